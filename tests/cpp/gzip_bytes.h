// gzip_bytes(): a document gzip-compressed in memory, for the importer
// tests that feed gzip input (test_kineto_import.cpp, test_import_stream.cpp).
// Those tests link zlib.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace gpuutil::test {

inline std::string gzip_bytes(const std::string& plain) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, plain.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  zs.avail_in = static_cast<uInt>(plain.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace gpuutil::test
