// A trace document read front to back in pieces, for the streaming import
// (stream_pass.cpp): a plain file is read with read(2), a gzip file or
// buffer is inflated with zlib as the caller asks for bytes, so the whole
// document is never held. Gzip is recognised by its magic bytes;
// concatenated members are inflated in sequence and bytes after the last
// member that are not a member are ignored (like gzip(1) and
// trace_bytes.h's gunzip()). The error texts match trace_bytes.h's, so a
// file reports the same fault whichever pass reads it.
//
// Contract: never throws except std::bad_alloc; every failure is a
// one-line `error`. Not thread-safe; one reader at a time. Internal to the
// replay collector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace gpuutil::replay {

class TraceSource {
 public:
  TraceSource();
  ~TraceSource();
  TraceSource(const TraceSource&) = delete;
  TraceSource& operator=(const TraceSource&) = delete;

  // Opens `path` for reading. False with `error` ("cannot open PATH: ...",
  // "cannot read PATH: is a directory") when it cannot be read.
  bool open_file(const std::string& path, std::string* error);
  // Reads `bytes` (plain or gzip), which must outlive the source; no copy.
  void open_memory(std::string_view bytes);

  bool gzip() const { return gzip_; }
  // The document's size in bytes when known before reading: a plain
  // source's size, or a one-member gzip stream's trailer (ISIZE, the size
  // mod 2^32) when it is plausible for the compressed size. 0 = unknown.
  uint64_t size_hint_bytes() const { return size_hint_bytes_; }

  // Reads up to `want` bytes of the document into `dst`; `*got` = 0 at the
  // end. Fills `want` bytes unless the document ends first. False with
  // `error` on an I/O fault, corrupt or truncated gzip data.
  bool read(char* dst, size_t want, size_t* got, std::string* error);

 private:
  bool read_raw(char* dst, size_t want, size_t* got, std::string* error);
  bool inflate_into(char* dst, size_t want, size_t* got, std::string* error);
  bool refill_input(std::string* error);

  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
  std::string path_;
  int fd_ = -1;
  std::string_view memory_;
  size_t memory_offset_ = 0;
  bool gzip_ = false;
  uint64_t size_hint_bytes_ = 0;
};

}  // namespace gpuutil::replay
