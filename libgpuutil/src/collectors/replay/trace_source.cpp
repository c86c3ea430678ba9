// Sequential reading of a trace document, inflating gzip on the fly (see
// trace_source.h).
#include "collectors/replay/trace_source.h"

#include "collectors/replay/read_ahead.h"

#ifdef GPUUTIL_HAVE_ZLIB
#include <zlib.h>
#endif

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <system_error>
#include <vector>

namespace gpuutil::replay {

namespace {

constexpr size_t kInputChunkBytes = size_t{1} << 20;

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
  if (fd_ >= 0) ::close(fd_);
}

bool TraceSource::open_file(const std::string& path, std::string* error) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    *error = "cannot size " + path + ": " + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *error = "cannot read " + path + ": is a directory";
    return false;
  }
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  unsigned char magic[2] = {0, 0};
  gzip_ = file_bytes >= 2 && ::pread(fd_, magic, 2, 0) == 2 && is_gzip_magic(magic);
  if (!gzip_) {
    size_hint_bytes_ = file_bytes;
  } else {
    unsigned char trailer[4] = {0, 0, 0, 0};
    if (file_bytes >= 18 && ::pread(fd_, trailer, 4, static_cast<off_t>(file_bytes - 4)) == 4) {
      size_hint_bytes_ = plausible_isize(trailer, file_bytes);
    }
  }
#ifdef POSIX_FADV_SEQUENTIAL
  (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
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
  if (ahead_) {
    *got = 0;
    return want == 0 || ahead_->read(dst, want, got, error);
  }
  return read_direct(dst, want, got, error);
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
