// A pipe fed by a thread, for the tests of the importer's streaming
// reader on inputs that cannot be seeked (test_import_source.cpp,
// test_import_budget.cpp): PipeFeed writes what `next` produces, block
// after block, into the pipe's write end until `next` returns an empty
// string or the reader goes away (EPIPE; SIGPIPE is ignored), then closes
// it. read_fd() / path() ("/dev/fd/N") are the read end.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace gpuutil::test {

class PipeFeed {
 public:
  explicit PipeFeed(std::function<std::string()> next) {
    ::signal(SIGPIPE, SIG_IGN);
    int fds[2] = {-1, -1};
    if (::pipe(fds) != 0) return;
    read_fd_ = fds[0];
    writer_ = std::thread([write_fd = fds[1], next = std::move(next), this] {
      for (std::string block = next(); !block.empty(); block = next()) {
        size_t done = 0;
        while (done < block.size()) {
          const ssize_t n = ::write(write_fd, block.data() + done, block.size() - done);
          if (n <= 0) {
            ::close(write_fd);
            return;
          }
          done += static_cast<size_t>(n);
          written_bytes_ += static_cast<size_t>(n);
        }
      }
      ::close(write_fd);
    });
  }
  // The whole of `bytes`, then the end.
  static std::function<std::string()> once(std::string bytes) {
    return [bytes = std::move(bytes), sent = false]() mutable {
      if (sent) return std::string();
      sent = true;
      return bytes;
    };
  }
  ~PipeFeed() {
    close_read();
    if (writer_.joinable()) writer_.join();
  }
  PipeFeed(const PipeFeed&) = delete;
  PipeFeed& operator=(const PipeFeed&) = delete;

  int read_fd() const { return read_fd_; }
  std::string path() const { return "/dev/fd/" + std::to_string(read_fd_); }
  // Closes the read end: a writer still writing stops on EPIPE.
  void close_read() {
    if (read_fd_ >= 0) ::close(read_fd_);
    read_fd_ = -1;
  }
  // Bytes the writer got into the pipe (read after the reader is done).
  size_t written_bytes() const { return written_bytes_; }

 private:
  int read_fd_ = -1;
  std::atomic<size_t> written_bytes_{0};
  std::thread writer_;
};

}  // namespace gpuutil::test
