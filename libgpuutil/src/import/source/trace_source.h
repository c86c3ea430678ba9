// A trace document read front to back in pieces, for the streaming import
// (stream_pass.cpp): a plain file is read with read(2), a gzip file or
// buffer is inflated with zlib as the caller asks for bytes, so the whole
// document is never held. Gzip is recognised by its magic bytes;
// concatenated members are inflated in sequence and bytes after the last
// member that are not a member are ignored (like gzip(1) and
// trace_bytes.h's gunzip()). The error texts match trace_bytes.h's, so a
// file reports the same fault whichever pass reads it.
//
// Every input is one of these sources: a regular file (seekable: its size
// and a gzip trailer are read up front, and it can be read again whole),
// or a stream - a pipe, a FIFO, `/dev/stdin`, a `/dev/fd/N`, a socket, a
// character device, standard input as a descriptor - which is never
// seeked: its first bytes are read ahead to see the gzip magic and handed
// over first, and its size is unknown. A FIFO is opened without blocking
// and waited on for a writer for a bounded time; a terminal is refused.
//
// read_ahead() moves the reading (and inflating) onto a second thread that
// stays a few blocks ahead of the caller (read_ahead.cpp), so inflating a
// gzip stream overlaps parsing what came before.
//
// Contract: never throws except std::bad_alloc; every failure is a
// one-line `error`, the same with or without read-ahead, reported after
// every byte before it was handed over. Not thread-safe; one reader at a
// time (the read-ahead thread is the source's own). Internal to the replay
// collector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace gpuutil::replay {

// How long a stream may keep the reader waiting (ImportOptions).
struct StreamWait {
  uint32_t writer_wait_ms = 30000;  // a FIFO without a writer
  const std::function<void(const std::string&)>* on_wait = nullptr;  // one line when the wait begins
};

class TraceSource {
 public:
  TraceSource();
  ~TraceSource();
  TraceSource(const TraceSource&) = delete;
  TraceSource& operator=(const TraceSource&) = delete;

  // Opens `path` for reading. False with `error` ("cannot open PATH: ...",
  // "cannot read PATH: is a directory", "PATH is a terminal ...", "no
  // writer opened the FIFO PATH within 30 s") when it cannot be read.
  bool open_file(const std::string& path, const StreamWait& wait, std::string* error);
  // Reads from `fd` (not owned, never closed) from its current position;
  // `name` names it in errors. The same kinds and errors as open_file.
  bool open_fd(int fd, const std::string& name, const StreamWait& wait, std::string* error);
  // Reads `bytes` (plain or gzip), which must outlive the source; no copy.
  void open_memory(std::string_view bytes);

  // A regular file (or memory): it has a size and can be read again whole
  // from fd() at start_offset() (trace_bytes.h's read_trace_fd).
  bool rewindable() const { return rewindable_; }
  int fd() const { return fd_; }
  uint64_t start_offset() const { return start_offset_; }
  // Document bytes handed over by read() so far.
  uint64_t bytes_read() const { return bytes_read_; }

  bool gzip() const { return gzip_; }
  // The document's size in bytes when known before reading: a plain
  // source's size, or a one-member gzip stream's trailer (ISIZE, the size
  // mod 2^32) when it is plausible for the compressed size. 0 = unknown.
  uint64_t size_hint_bytes() const { return size_hint_bytes_; }

  // Reads up to `want` bytes of the document into `dst`; `*got` = 0 at the
  // end. Fills `want` bytes unless the document ends first. False with
  // `error` on an I/O fault, corrupt or truncated gzip data; `*got` then
  // counts the bytes written before the fault.
  bool read(char* dst, size_t want, size_t* got, std::string* error);

  // From now on a thread reads the document in blocks of `block_bytes`, at
  // most `blocks` ahead of read() (memory: blocks x block_bytes). False
  // when no thread could be started; read() then goes on reading itself.
  // Call it before the first read(). The thread stops when the source is
  // destroyed.
  bool read_ahead(size_t block_bytes, size_t blocks);

 private:
  struct ReadAhead;
  // read() itself, on the calling thread or the read-ahead thread.
  bool read_direct(char* dst, size_t want, size_t* got, std::string* error);
  bool read_raw(char* dst, size_t want, size_t* got, std::string* error);
  bool inflate_into(char* dst, size_t want, size_t* got, std::string* error);
  bool refill_input(std::string* error);
  // open_file / open_fd once the descriptor is open.
  bool adopt(const StreamWait& wait, bool opened_nonblocking, std::string* error);
  // A stream: waits for its first bytes (a FIFO's writer, bounded) and
  // reads them into head_.
  bool wait_for_head(const StreamWait& wait, bool fifo_nonblocking, std::string* error);
  bool read_fd(char* dst, size_t want, size_t* got, std::string* error);

  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
  std::unique_ptr<ReadAhead> ahead_;  // its thread is joined first thing in the destructor
  std::string path_;
  int fd_ = -1;
  bool owns_fd_ = false;
  bool rewindable_ = true;
  uint64_t start_offset_ = 0;
  std::string head_;  // a stream's first bytes, read ahead to see its magic
  size_t head_offset_ = 0;
  std::string_view memory_;
  size_t memory_offset_ = 0;
  bool gzip_ = false;
  uint64_t size_hint_bytes_ = 0;
  uint64_t bytes_read_ = 0;
};

}  // namespace gpuutil::replay
