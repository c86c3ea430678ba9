// File reading and gzip decompression for the trace importer (see trace_bytes.h).
//
// libdeflate for single-member streams whose ISIZE is exact, else zlib
// inflate with gzip framing; the output buffer is sized from the gzip
// trailer's ISIZE hint and grown geometrically. Every failure becomes a
// one-line message; nothing throws except std::bad_alloc, which the caller
// turns into an error result. A build without zlib (GPUUTIL_HAVE_ZLIB unset,
// cmake/GpuutilDependencies.cmake) reads plain JSON only: gunzip() then
// fails with one line saying so.
#include "collectors/replay/trace_bytes.h"

#ifdef GPUUTIL_HAVE_ZLIB
#include <zlib.h>
#endif

#ifdef GPUUTIL_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include <simdjson.h>

namespace gpuutil::replay {

static_assert(kTracePaddingBytes == simdjson::SIMDJSON_PADDING, "padding must match simdjson");

namespace {

#ifdef GPUUTIL_HAVE_ZLIB
constexpr size_t kInflateChunkBytes = size_t{1} << 20;
#endif

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

// Leaves `out` holding `size` document bytes followed by zeroed padding
// (the buffer already has room for them).
void finish_padding(TraceBytes* out, size_t size) {
  out->size = size;
  std::memset(out->data() + size, 0, kTracePaddingBytes);
}

}  // namespace

namespace {

// Uninitialised on purpose: the decompressor or fread writes every byte.
std::unique_ptr<char[]> new_buffer(size_t bytes) { return std::unique_ptr<char[]>(new char[bytes]); }

}  // namespace

void TraceBytes::allocate(size_t bytes) {
  storage.reset();
  storage = new_buffer(bytes);
  capacity = bytes;
  size = 0;
}

void TraceBytes::grow(size_t bytes, size_t keep) {
  auto bigger = new_buffer(bytes);
  if (keep > 0) std::memcpy(bigger.get(), storage.get(), keep);
  storage = std::move(bigger);
  capacity = bytes;
}

bool looks_like_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

#ifdef GPUUTIL_HAVE_LIBDEFLATE
namespace {
size_t isize_hint(std::string_view compressed) {
  if (compressed.size() < 18) return SIZE_MAX;
  const auto* p = reinterpret_cast<const unsigned char*>(compressed.data() + compressed.size() - 4);
  return size_t{p[0]} | (size_t{p[1]} << 8) | (size_t{p[2]} << 16) | (size_t{p[3]} << 24);
}
}  // namespace
#endif

#ifndef GPUUTIL_HAVE_ZLIB
bool gunzip(std::string_view, TraceBytes* out, std::string* error) {
  out->clear();
  *error =
      "gzip trace, but this gpuutil build has no gzip support (zlib was not found when it was built): "
      "gunzip the file first, or rebuild with zlib headers installed (Debian/Ubuntu: zlib1g-dev)";
  return false;
}
#else
bool gunzip(std::string_view compressed, TraceBytes* out, std::string* error) {
  // ISIZE (the last 4 bytes, little endian) is the uncompressed size mod
  // 2^32 of the last member: a good first guess for one-member files.
  size_t guess = compressed.size() * 4;
  if (compressed.size() >= 18) {
    const auto* p = reinterpret_cast<const unsigned char*>(compressed.data() + compressed.size() - 4);
    const size_t isize = size_t{p[0]} | (size_t{p[1]} << 8) | (size_t{p[2]} << 16) | (size_t{p[3]} << 24);
    // Trust the hint only within a plausible compression ratio.
    if (isize >= compressed.size() / 2 && isize / 1032 <= compressed.size()) guess = isize;
  }
  if (guess > kMaxDocumentBytes) guess = kMaxDocumentBytes;
  out->allocate(guess + kTracePaddingBytes);
#ifdef GPUUTIL_HAVE_LIBDEFLATE
  // Fast path: one gzip member whose ISIZE is the exact size. libdeflate
  // inflates and checks the CRC several times faster than zlib. Anything
  // else (several members, trailing bytes, corruption) takes the zlib path
  // below, which also words the errors.
  if (guess == isize_hint(compressed)) {
    if (libdeflate_decompressor* d = libdeflate_alloc_decompressor()) {
      size_t in_used = 0, produced = 0;
      const libdeflate_result rc = libdeflate_gzip_decompress_ex(
          d, compressed.data(), compressed.size(), out->data(), guess, &in_used, &produced);
      libdeflate_free_decompressor(d);
      if (rc == LIBDEFLATE_SUCCESS && in_used == compressed.size()) {
        finish_padding(out, produced);
        return true;
      }
    }
  }
#endif

  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {  // 16: gzip framing only
    *error = "cannot initialise zlib";
    return false;
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  size_t in_left = compressed.size();
  size_t produced = 0;
  bool ok = true;
  bool member_done = false;
  for (;;) {
    if (zs.avail_in == 0 && in_left > 0) {
      const size_t take = in_left < kInflateChunkBytes ? in_left : kInflateChunkBytes;
      zs.avail_in = static_cast<uInt>(take);
      in_left -= take;
    }
    if (produced + kTracePaddingBytes >= out->capacity) {
      if (produced >= kMaxDocumentBytes) {
        *error = "gzip: decompressed document exceeds 4 GiB";
        ok = false;
        break;
      }
      size_t grown = out->capacity * 2;
      if (grown > kMaxDocumentBytes + kTracePaddingBytes) grown = kMaxDocumentBytes + kTracePaddingBytes;
      out->grow(grown, produced);
    }
    size_t room = out->capacity - kTracePaddingBytes - produced;
    if (room > kInflateChunkBytes * 64) room = kInflateChunkBytes * 64;
    zs.next_out = reinterpret_cast<Bytef*>(out->data() + produced);
    zs.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced += room - zs.avail_out;
    if (rc == Z_STREAM_END) {
      member_done = true;
      // Another gzip member may follow (files written by `cat a.gz b.gz`).
      if (zs.avail_in == 0 && in_left > 0) {
        const size_t take = in_left < kInflateChunkBytes ? in_left : kInflateChunkBytes;
        zs.avail_in = static_cast<uInt>(take);
        in_left -= take;
      }
      if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b) {
        inflateReset(&zs);
        member_done = false;
        continue;
      }
      break;  // trailing bytes that are not a gzip member are ignored, like gzip(1)
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0) {
      break;  // input ended mid-stream
    }
    if (rc == Z_BUF_ERROR && zs.avail_out == 0) continue;
    *error = std::string("corrupt gzip data: ") + (zs.msg ? zs.msg : "inflate failed");
    ok = false;
    break;
  }
  inflateEnd(&zs);
  if (ok && !member_done) {
    *error = "truncated gzip data: the stream ended before the gzip trailer";
    ok = false;
  }
  if (!ok) {
    out->clear();
    return false;
  }
  finish_padding(out, produced);
  return true;
}
#endif  // GPUUTIL_HAVE_ZLIB

bool read_trace_file(const std::string& path, TraceBytes* out, std::string* error) {
  std::error_code fs_error;
  if (std::filesystem::is_directory(path, fs_error)) {
    *error = "cannot read " + path + ": is a directory";
    return false;
  }
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  if (std::fseek(file.get(), 0, SEEK_END) != 0) {
    *error = "cannot seek " + path + ": " + std::strerror(errno);
    return false;
  }
  const long end = std::ftell(file.get());
  if (end < 0 || std::fseek(file.get(), 0, SEEK_SET) != 0) {
    *error = "cannot size " + path + ": " + std::strerror(errno);
    return false;
  }
  const auto file_bytes = static_cast<size_t>(end);
  if (file_bytes > kMaxDocumentBytes) {
    *error = path + " is larger than 4 GiB";
    return false;
  }
  TraceBytes raw;
  raw.allocate(file_bytes + kTracePaddingBytes);
  const size_t got = file_bytes == 0 ? 0 : std::fread(raw.data(), 1, file_bytes, file.get());
  if (got != file_bytes) {
    *error = "cannot read " + path + ": " + (std::ferror(file.get()) ? std::strerror(errno) : "short read");
    return false;
  }
  finish_padding(&raw, file_bytes);
  if (looks_like_gzip(raw.view())) return gunzip(raw.view(), out, error);
  *out = std::move(raw);
  return true;
}

}  // namespace gpuutil::replay
