// JSON Lines file sink: one compact report object per line, flushed per
// line so a crash loses at most the step being written.
#pragma once

#include <cstdio>
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

  bool ok() const { return file_ != nullptr; }
  const std::string& error() const { return error_; }
  // Writes `line` and a newline; false if the write failed.
  bool write_line(std::string_view line);
  // A forked child's copy: closes the descriptor without flushing anything
  // (every line is flushed when written, so nothing of the parent's is lost).
  void abandon();

 private:
  std::FILE* file_ = nullptr;
  std::string error_;
};

}  // namespace gpuutil
