// JSON Lines file sink (see jsonl_sink.h): whole lines or none.
#include "export/jsonl_sink.h"

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace gpuutil {

namespace {

long system_write(int fd, const void* data, unsigned long bytes) { return ::write(fd, data, bytes); }

std::atomic<JsonlSink::WriteFn> g_write{&system_write};

const char* errno_name(int e) {
  switch (e) {
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EFBIG: return "EFBIG";
    case EIO: return "EIO";
    case EBADF: return "EBADF";
    case EROFS: return "EROFS";
    case EPIPE: return "EPIPE";
    case EINVAL: return "EINVAL";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    default: return nullptr;
  }
}

}  // namespace

void JsonlSink::set_write_for_tests(WriteFn fn) { g_write.store(fn != nullptr ? fn : &system_write); }

JsonlSink::JsonlSink(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) error_ = "cannot open " + path + ": " + std::strerror(errno);
}

JsonlSink::~JsonlSink() { close(); }

void JsonlSink::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string JsonlSink::last_error() const {
  if (last_errno_ == 0) return "";
  const char* name = errno_name(last_errno_);
  std::string out = name != nullptr ? name : "errno " + std::to_string(last_errno_);
  return out + " (" + std::strerror(last_errno_) + ")";
}

bool JsonlSink::cut_back() {
  if (::ftruncate(fd_, static_cast<off_t>(good_bytes_)) != 0) return false;
  return ::lseek(fd_, static_cast<off_t>(good_bytes_), SEEK_SET) == static_cast<off_t>(good_bytes_);
}

bool JsonlSink::write_line(std::string_view line) {
  if (fd_ < 0) return false;
  if (torn_) {
    // The tail of an earlier failed line is still there: no line may
    // follow it until it is cut off.
    if (!cut_back()) {
      ++lines_lost_;
      return false;
    }
    torn_ = false;
  }
  buffer_.assign(line.data(), line.size());
  buffer_.push_back('\n');
  const WriteFn write_fn = g_write.load(std::memory_order_relaxed);
  size_t done = 0;
  while (done < buffer_.size()) {
    const long n = write_fn(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    last_errno_ = n < 0 ? errno : ENOSPC;  // a write of 0 bytes: no room
    ++lines_lost_;
    if (done > 0 && !cut_back()) torn_ = true;  // cut off before the next line
    return false;
  }
  good_bytes_ += done;
  ++lines_written_;
  return true;
}

}  // namespace gpuutil
