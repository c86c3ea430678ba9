// Reading a trace file into memory, gunzipping it when it is gzip.
//
// The bytes are returned with simdjson's SIMDJSON_PADDING zero bytes after
// the document, so the JSON parser can read them in place without another
// copy. The buffer is allocated uninitialised (a 32 MB trace is written once
// by the decompressor, not zero-filled first); only the padding is zeroed.
// (Transparent huge pages were measured and dropped: a median gain with
// 50-100 ms compaction stalls on some calls; benchmarks/RESULTS.md.)
// Gzip is detected by its magic bytes (1f 8b), not by the file name;
// concatenated gzip members are decompressed in sequence. Internal to the
// replay collector.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace gpuutil::replay {

// A document plus at least kTracePaddingBytes zero bytes of slack after it.
struct TraceBytes {
  std::unique_ptr<char[]> storage;  // `capacity` bytes, uninitialised
  size_t capacity = 0;  // capacity >= size + kTracePaddingBytes once filled
  size_t size = 0;      // document length in bytes
  char* data() const { return storage.get(); }
  std::string_view view() const { return {storage.get(), size}; }
  // Replaces the buffer with `bytes` uninitialised bytes (contents lost);
  // throws std::bad_alloc.
  void allocate(size_t bytes);
  // Grows the buffer to `bytes`, keeping the first `keep` bytes.
  void grow(size_t bytes, size_t keep);
  void clear() {
    storage.reset();
    capacity = 0;
    size = 0;
  }
};

// Equal to SIMDJSON_PADDING (checked in trace_bytes.cpp).
inline constexpr size_t kTracePaddingBytes = 64;
// simdjson cannot parse documents of 4 GiB or more.
inline constexpr size_t kMaxDocumentBytes = 0xFFFFFFFFull - kTracePaddingBytes;

// Reads `path`; returns false with a one-line `error` when the file cannot
// be read, the gzip stream is truncated or corrupt, or the document exceeds
// kMaxDocumentBytes.
bool read_trace_file(const std::string& path, TraceBytes* out, std::string* error);

// Decompresses a complete gzip stream held in memory (same errors as above).
bool gunzip(std::string_view compressed, TraceBytes* out, std::string* error);

// True when `bytes` start with the gzip magic 1f 8b.
bool looks_like_gzip(std::string_view bytes);

}  // namespace gpuutil::replay
