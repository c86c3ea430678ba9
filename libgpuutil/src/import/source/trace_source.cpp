// Sequential reading of a trace document, inflating gzip on the fly (see
// trace_source.h).
#include "import/source/trace_source.h"

#include "import/source/read_ahead.h"

#ifdef GPUUTIL_HAVE_ZLIB
#include <zlib.h>
#endif

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <vector>

namespace gpuutil::replay {

namespace {

constexpr size_t kInputChunkBytes = size_t{1} << 20;
// A stream's first bytes are read ahead (at least the gzip magic's two).
constexpr size_t kHeadBytes = 4096;
// A FIFO without a writer is announced after this long (a writer that is
// just starting is not worth a line), and polled in slices of it.
constexpr int kAnnounceAfterMs = 100;
// A stream with a writer but no data yet is announced after this long.
constexpr int kQuietStreamAnnounceMs = 1000;

bool is_gzip_magic(const unsigned char* p) { return p[0] == 0x1f && p[1] == 0x8b; }

// ISIZE, when plausible for `compressed_bytes` (the same test gunzip()
// applies before trusting it).
uint64_t plausible_isize(const unsigned char* trailer, uint64_t compressed_bytes) {
  if (compressed_bytes < 18) return 0;  // shorter than a gzip header and trailer
  const uint64_t isize = uint64_t{trailer[0]} | (uint64_t{trailer[1]} << 8) | (uint64_t{trailer[2]} << 16) |
                         (uint64_t{trailer[3]} << 24);
  if (isize < compressed_bytes / 2 || isize / 1032 > compressed_bytes) return 0;
  return isize;
}

}  // namespace

struct TraceSource::Inflater {
#ifdef GPUUTIL_HAVE_ZLIB
  z_stream zs{};
  bool initialised = false;
  ~Inflater() {
    if (initialised) inflateEnd(&zs);
  }
#endif
  std::vector<unsigned char> input;  // file sources only
  bool input_done = false;   // nothing more to feed
  bool member_done = false;  // the current member reached its trailer
  bool ended = false;        // the document is complete
};

TraceSource::TraceSource() = default;

TraceSource::~TraceSource() {
  ahead_.reset();  // joins the read-ahead thread before the file closes
  if (fd_ >= 0 && owns_fd_) ::close(fd_);
}

bool TraceSource::open_file(const std::string& path, const StreamWait& wait, std::string* error) {
  path_ = path;
  // O_NONBLOCK: opening a FIFO without a writer returns at once instead of
  // blocking until one comes (adopt() waits for it, bounded).
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  owns_fd_ = true;
  return adopt(wait, /*opened_nonblocking=*/true, error);
}

bool TraceSource::open_fd(int fd, const std::string& name, const StreamWait& wait, std::string* error) {
  path_ = name;
  fd_ = fd;
  owns_fd_ = false;
  return adopt(wait, /*opened_nonblocking=*/false, error);
}

bool TraceSource::adopt(const StreamWait& wait, bool opened_nonblocking, std::string* error) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    *error = "cannot size " + path_ + ": " + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *error = "cannot read " + path_ + ": is a directory";
    return false;
  }
  if (::isatty(fd_)) {
    *error = path_ + " is a terminal, not a trace: pipe one in or name a file";
    return false;
  }
  const bool fifo = S_ISFIFO(st.st_mode);
  if (opened_nonblocking && !fifo) {
    // Only a FIFO's wait needs it; everything else reads blocking.
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) (void)::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  }
  if (!S_ISREG(st.st_mode)) {
    rewindable_ = false;
    return wait_for_head(wait, fifo && opened_nonblocking, error);
  }
  const off_t at = owns_fd_ ? 0 : ::lseek(fd_, 0, SEEK_CUR);
  start_offset_ = at > 0 ? static_cast<uint64_t>(at) : 0;
  if (start_offset_ > 0 && ::lseek(fd_, static_cast<off_t>(start_offset_), SEEK_SET) < 0) start_offset_ = 0;
  const auto end_bytes = static_cast<uint64_t>(st.st_size);
  const uint64_t file_bytes = end_bytes > start_offset_ ? end_bytes - start_offset_ : 0;
  unsigned char magic[2] = {0, 0};
  gzip_ = file_bytes >= 2 && ::pread(fd_, magic, 2, static_cast<off_t>(start_offset_)) == 2 && is_gzip_magic(magic);
  if (!gzip_) {
    size_hint_bytes_ = file_bytes;
  } else {
    unsigned char trailer[4] = {0, 0, 0, 0};
    if (file_bytes >= 18 && ::pread(fd_, trailer, 4, static_cast<off_t>(end_bytes - 4)) == 4) {
      size_hint_bytes_ = plausible_isize(trailer, file_bytes);
    }
  }
#ifdef POSIX_FADV_SEQUENTIAL
  (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  return true;
}

namespace {

std::string seconds_text(uint32_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", ms / 1000.0);
  return text;
}

}  // namespace

bool TraceSource::wait_for_head(const StreamWait& wait, bool fifo_nonblocking, std::string* error) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(wait.writer_wait_ms);
  bool announced = false;
  auto announce = [&](const std::string& line) {
    if (!announced && wait.on_wait != nullptr && *wait.on_wait) (*wait.on_wait)(line);
    announced = true;
  };
  char first[kHeadBytes];
  size_t got = 0;
  // Until the first byte. A FIFO opened without blocking tells a missing
  // writer (read() = 0 with nothing polled) from a quiet one (EAGAIN): only
  // a missing writer is waited on for a bounded time; a writer that is
  // there sends at its own pace, as it would to cat(1).
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    const int slice_ms = fifo_nonblocking ? kAnnounceAfterMs : announced ? -1 : kQuietStreamAnnounceMs;
    const int ready = ::poll(&p, 1, slice_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      *error = "cannot read " + path_ + ": " + std::strerror(errno);
      return false;
    }
    if (!fifo_nonblocking) {
      if (ready > 0) break;  // data, or the end: the reads below say which
      announce("waiting for " + path_ + " to send data...");
      continue;
    }
    const ssize_t n = ::read(fd_, first, sizeof first);
    if (n > 0) {
      got = static_cast<size_t>(n);
      break;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *error = "cannot read " + path_ + ": " + std::strerror(errno);
      return false;
    }
    if (n < 0) {
      if (errno != EINTR) announce("waiting for " + path_ + " to send data...");
      continue;
    }
    if (ready > 0) break;  // a writer came and went without a byte: empty
    if (Clock::now() >= deadline) {
      *error = "no writer opened the FIFO " + path_ + " within " + seconds_text(wait.writer_wait_ms) +
               " (start the writer first, or within that time)";
      return false;
    }
    announce("waiting up to " + seconds_text(wait.writer_wait_ms) + " for a writer on the FIFO " + path_ + "...");
  }
  if (fifo_nonblocking) {
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) (void)::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  }
  // The first bytes: at least the two of the gzip magic, unless it ends.
  head_.assign(first, got);
  while (head_.size() < 2) {
    size_t more = 0;
    if (!read_fd(first, sizeof first, &more, error)) return false;
    if (more == 0) break;
    head_.append(first, more);
  }
  head_offset_ = 0;
  gzip_ = head_.size() >= 2 && is_gzip_magic(reinterpret_cast<const unsigned char*>(head_.data()));
  size_hint_bytes_ = 0;  // unknown
  return true;
}

void TraceSource::open_memory(std::string_view bytes) {
  memory_ = bytes;
  memory_offset_ = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  gzip_ = bytes.size() >= 2 && is_gzip_magic(data);
  if (!gzip_) {
    size_hint_bytes_ = bytes.size();
  } else {
    size_hint_bytes_ = bytes.size() >= 18 ? plausible_isize(data + bytes.size() - 4, bytes.size()) : 0;
  }
}

bool TraceSource::read(char* dst, size_t want, size_t* got, std::string* error) {
  bool ok = true;
  if (ahead_) {
    *got = 0;
    ok = want == 0 || ahead_->read(dst, want, got, error);
  } else {
    ok = read_direct(dst, want, got, error);
  }
  bytes_read_ += *got;
  return ok;
}

bool TraceSource::read_ahead(size_t block_bytes, size_t blocks) {
  if (ahead_ || block_bytes == 0) return ahead_ != nullptr;
  try {
    ahead_ = std::make_unique<ReadAhead>(this, block_bytes, blocks);
  } catch (const std::system_error&) {
    return false;  // no thread to be had: read() reads itself
  }
  return true;
}

bool TraceSource::read_direct(char* dst, size_t want, size_t* got, std::string* error) {
  *got = 0;
  if (want == 0) return true;
  return gzip_ ? inflate_into(dst, want, got, error) : read_raw(dst, want, got, error);
}

bool TraceSource::read_raw(char* dst, size_t want, size_t* got, std::string* error) {
  if (fd_ < 0) {
    const size_t take = std::min(want, memory_.size() - memory_offset_);
    if (take > 0) std::memcpy(dst, memory_.data() + memory_offset_, take);
    memory_offset_ += take;
    *got = take;
    return true;
  }
  // A stream's first bytes were read ahead: they go first.
  size_t done = 0;
  if (head_offset_ < head_.size()) {
    done = std::min(want, head_.size() - head_offset_);
    std::memcpy(dst, head_.data() + head_offset_, done);
    head_offset_ += done;
    if (head_offset_ == head_.size()) {
      std::string().swap(head_);
      head_offset_ = 0;
    }
  }
  size_t more = 0;
  const bool ok = read_fd(dst + done, want - done, &more, error);
  *got = done + more;
  return ok;
}

bool TraceSource::read_fd(char* dst, size_t want, size_t* got, std::string* error) {
  size_t done = 0;
  while (done < want) {
    const size_t ask = std::min(want - done, size_t{SSIZE_MAX});
    const ssize_t n = ::read(fd_, dst + done, ask);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = "cannot read " + path_ + ": " + std::strerror(errno);
      *got = done;
      return false;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  *got = done;
  return true;
}

#ifndef GPUUTIL_HAVE_ZLIB
bool TraceSource::refill_input(std::string*) { return false; }

bool TraceSource::inflate_into(char*, size_t, size_t*, std::string* error) {
  *error =
      "gzip trace, but this gpuutil build has no gzip support (zlib was not found when it was built): "
      "gunzip the file first, or rebuild with zlib headers installed (Debian/Ubuntu: zlib1g-dev)";
  return false;
}
#else
// Tops up the inflater's input: unread bytes are moved to the front and the
// rest of the buffer is filled from the file. Memory sources hand over
// everything at once.
bool TraceSource::refill_input(std::string* error) {
  Inflater& in = *inflater_;
  if (in.input_done) return true;
  if (fd_ < 0) {
    in.zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(memory_.data()));
    in.zs.avail_in = static_cast<uInt>(std::min(memory_.size(), size_t{UINT_MAX}));
    memory_offset_ = in.zs.avail_in;
    if (memory_offset_ == memory_.size()) in.input_done = true;
    return true;
  }
  if (in.input.empty()) in.input.resize(kInputChunkBytes);
  const size_t kept = in.zs.avail_in;
  if (kept > 0 && in.zs.next_in != in.input.data()) std::memmove(in.input.data(), in.zs.next_in, kept);
  size_t got = 0;
  if (!read_raw(reinterpret_cast<char*>(in.input.data() + kept), in.input.size() - kept, &got, error)) return false;
  if (got == 0) in.input_done = true;
  in.zs.next_in = in.input.data();
  in.zs.avail_in = static_cast<uInt>(kept + got);
  return true;
}

bool TraceSource::inflate_into(char* dst, size_t want, size_t* got, std::string* error) {
  if (!inflater_) {
    inflater_ = std::make_unique<Inflater>();
    if (inflateInit2(&inflater_->zs, 15 + 16) != Z_OK) {  // 16: gzip framing only
      *error = "cannot initialise zlib";
      return false;
    }
    inflater_->initialised = true;
  }
  Inflater& in = *inflater_;
  z_stream& zs = in.zs;
  size_t produced = 0;
  while (produced < want && !in.ended) {
    if (zs.avail_in < 2 && !in.input_done) {
      if (!refill_input(error)) {
        *got = produced;
        return false;
      }
    }
    if (in.member_done) {
      // Another gzip member may follow (files written by `cat a.gz b.gz`);
      // anything else after a member is ignored, like gzip(1).
      if (zs.avail_in >= 2 && is_gzip_magic(zs.next_in)) {
        inflateReset(&zs);
        in.member_done = false;
      } else {
        in.ended = true;
        break;
      }
    }
    if (zs.avail_in == 0 && in.input_done) {
      *error = "truncated gzip data: the stream ended before the gzip trailer";
      *got = produced;
      return false;
    }
    const size_t room = std::min(want - produced, size_t{UINT_MAX});
    zs.next_out = reinterpret_cast<Bytef*>(dst + produced);
    zs.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced += room - zs.avail_out;
    if (rc == Z_STREAM_END) {
      in.member_done = true;
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && (zs.avail_in == 0 || zs.avail_out == 0)) continue;  // needs input / room
    *error = std::string("corrupt gzip data: ") + (zs.msg ? zs.msg : "inflate failed");
    *got = produced;
    return false;
  }
  *got = produced;
  return true;
}
#endif  // GPUUTIL_HAVE_ZLIB

}  // namespace gpuutil::replay
