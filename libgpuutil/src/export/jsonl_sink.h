// JSON Lines file sink: one compact report object per line, each line
// handed to the kernel with write(2) as it is written, so a crash or a
// SIGKILL loses at most the step being written.
//
// A line is written whole or not at all: when a write fails (a full disk,
// ENOSPC; a file size limit, EFBIG; an I/O error) the bytes of the line
// that did reach the file are cut off again (ftruncate to the end of the
// last whole line), so no later line ever follows a partial one. Failed
// lines are counted with the errno of the last failure; writing resumes
// with the next line once the file takes bytes again (space freed).
//
// Contract: not thread-safe (the session serialises writers under its
// jsonl lock); never throws except std::bad_alloc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuutil {

class JsonlSink {
 public:
  // Truncates/creates `path`. ok() is false (error() says why) on failure.
  explicit JsonlSink(const std::string& path);
  ~JsonlSink();
  JsonlSink(const JsonlSink&) = delete;
  JsonlSink& operator=(const JsonlSink&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  // Writes `line` and a newline, whole or not at all; false if it failed
  // (counted in lines_lost(), errno in last_errno()).
  bool write_line(std::string_view line);
  // Closes the file (at the profile's stop); later writes fail, uncounted.
  void close();
  // A forked child's copy: closes the descriptor (nothing is buffered, so
  // nothing of the parent's is written twice).
  void abandon() { close(); }

  uint64_t lines_written() const { return lines_written_; }
  uint64_t lines_lost() const { return lines_lost_; }
  // errno of the last failed write (0: none), and it in words:
  // "ENOSPC (No space left on device)".
  int last_errno() const { return last_errno_; }
  std::string last_error() const;
  const std::string& path() const { return path_; }

  // Tests: the write(2) the sink calls (fault injection); nullptr restores it.
  using WriteFn = long (*)(int fd, const void* data, unsigned long bytes);
  static void set_write_for_tests(WriteFn fn);

 private:
  // Cuts the file back to the last whole line; false if it could not.
  bool cut_back();

  int fd_ = -1;
  std::string path_;
  std::string error_;
  std::string buffer_;       // the line and its newline (reused)
  uint64_t good_bytes_ = 0;  // the file's length up to the last whole line
  bool torn_ = false;        // a partial line could not be cut off yet
  uint64_t lines_written_ = 0;
  uint64_t lines_lost_ = 0;
  int last_errno_ = 0;
};

}  // namespace gpuutil
