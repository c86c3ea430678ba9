// Reading a trace file into memory, gunzipping it when it is gzip.
//
// The bytes are returned with simdjson's SIMDJSON_PADDING zero bytes after
// the document, so the JSON parser can read them in place without another
// copy. The buffer is allocated uninitialised (a 32 MB trace is written once
// by the decompressor, not zero-filled first); only the padding is zeroed.
// Whole-document buffers carry a transparent-huge-page hint (see
// allocate; an early try without alignment saw compaction stalls, later
// runs on this project's VMs none: benchmarks/RESULTS.md).
// Gzip is detected by its magic bytes (1f 8b), not by the file name;
// concatenated gzip members are decompressed in sequence. Internal to the
// replay collector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace gpuutil::replay {

// A document plus at least kTracePaddingBytes zero bytes of slack after it.
struct TraceBytes {
  // Anonymous memory mappings, not the heap: growing one (mremap) never
  // holds the old and the new buffer at once, so an inflating gzip stream
  // peaks at its output size, not 1.5-3x it (a gzip bomb stops at the cap
  // with memory near the cap).
  TraceBytes() = default;
  TraceBytes(TraceBytes&& o) noexcept { *this = std::move(o); }
  TraceBytes& operator=(TraceBytes&& o) noexcept;
  TraceBytes(const TraceBytes&) = delete;
  TraceBytes& operator=(const TraceBytes&) = delete;
  ~TraceBytes() { clear(); }

  char* storage = nullptr;  // `capacity` bytes
  size_t capacity = 0;  // capacity >= size + kTracePaddingBytes once filled
  size_t size = 0;      // document length in bytes
  bool written_once = true;  // as allocated (see allocate); growth keeps its huge-page hint
  char* data() const { return storage; }
  std::string_view view() const { return {storage, size}; }
  // Replaces the buffer with at least `bytes` zero-filled bytes (contents
  // lost); throws std::bad_alloc. A buffer written once front to back (a
  // whole document: `once`) is, from 1 MiB on, rounded up to whole
  // 2 MiB huge pages (`capacity` says how many); a reused one (the
  // streaming window) is exactly `bytes`, so its resident memory stays the
  // window's.
  void allocate(size_t bytes, bool once = true);
  // Grows (or shrinks) the buffer to `bytes`, keeping its contents up to
  // that size (no copy where the kernel can extend or move the mapping;
  // shrinking returns the tail's pages); throws std::bad_alloc.
  void grow(size_t bytes, size_t keep);
  void clear();
};

// Equal to SIMDJSON_PADDING (checked in trace_bytes.cpp).
inline constexpr size_t kTracePaddingBytes = 64;
// simdjson cannot parse documents of 4 GiB or more.
inline constexpr size_t kMaxDocumentBytes = 0xFFFFFFFFull - kTracePaddingBytes;

// Reads `path`; returns false with a one-line `error` when the file cannot
// be read, the gzip stream is truncated or corrupt, the document exceeds
// kMaxDocumentBytes, or its first bytes show it is not JSON (checked before
// the rest is read or inflated: a 3 GB binary fails at once).
bool read_trace_file(const std::string& path, TraceBytes* out, std::string* error);
// The same for the regular file open as `fd`, from `offset` to its end
// (pread: the descriptor's position is not used), named `label` in
// errors. The file, and a gzip stream's inflated document, may take at
// most `cap_bytes` of memory; `*over_cap` (when given) says a document was
// refused for that cap rather than for kMaxDocumentBytes.
bool read_trace_fd(int fd, uint64_t offset, const std::string& label, TraceBytes* out, std::string* error,
                   size_t cap_bytes = kMaxDocumentBytes, bool* over_cap = nullptr);

// Decompresses a complete gzip stream held in memory (same errors as above).
bool gunzip(std::string_view compressed, TraceBytes* out, std::string* error);
// The same with a smaller cap than kMaxDocumentBytes (tests of the cap;
// the import's memory budget). The cap is checked before each growth, and
// growth never copies, so memory stays within the cap plus one inflate
// chunk. `*over_cap` (when given) is set when the cap stopped it.
bool gunzip_capped(std::string_view compressed, TraceBytes* out, std::string* error, size_t cap_bytes,
                   bool* over_cap = nullptr);

// True when `head` (a document's first bytes) starts like JSON: blank, or
// `{` / `[` after an optional UTF-8 byte order mark and whitespace. Else
// false with `why` ("not a JSON trace: it starts with 'x' at byte 0 ...").
bool starts_like_json(std::string_view head, std::string* why);

// True when `bytes` start with the gzip magic 1f 8b.
bool looks_like_gzip(std::string_view bytes);

}  // namespace gpuutil::replay
