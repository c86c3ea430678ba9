// File reading and gzip decompression for the trace importer (see trace_bytes.h).
//
// libdeflate for single-member streams whose ISIZE is exact, else zlib
// inflate with gzip framing; the output buffer is sized from the gzip
// trailer's ISIZE hint and grown geometrically. Every failure becomes a
// one-line message; nothing throws except std::bad_alloc, which the caller
// turns into an error result. A build without zlib (GPUUTIL_HAVE_ZLIB unset,
// cmake/GpuutilDependencies.cmake) reads plain JSON only: gunzip() then
// fails with one line saying so.
#include "import/source/trace_bytes.h"

#ifdef GPUUTIL_HAVE_ZLIB
#include <zlib.h>
#endif

#ifdef GPUUTIL_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include <simdjson.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpuutil::replay {

static_assert(kTracePaddingBytes == simdjson::SIMDJSON_PADDING, "padding must match simdjson");

namespace {

#ifdef GPUUTIL_HAVE_ZLIB
constexpr size_t kInflateChunkBytes = size_t{1} << 20;
#endif

// Buffers of a MiB or more are written once, front to back (gzip output,
// file reads): with transparent huge pages in "madvise" mode (Debian's and
// Ubuntu's default) each 2 MiB costs one page fault instead of 512 (on this
// project's VM a 4 KiB fault costs about 2 us: 0.8 ms for a 1.7 MiB
// document). A hint only: a kernel without THP, or with THP off, ignores or
// refuses it. Only whole, aligned 2 MiB ranges can be huge pages, so such
// buffers are mapped 2 MiB-aligned and rounded up to whole huge pages.
// A reused buffer (the streaming window) is only hinted from 4 MiB, where
// its aligned interior can be huge pages without rounding it up.
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kHugeMinBytes = size_t{1} << 20;
constexpr size_t kHugeMinReusedBytes = 2 * kHugePageBytes;
void advise_huge_pages(void* p, size_t bytes, bool written_once) {
#ifdef MADV_HUGEPAGE
  if (bytes >= (written_once ? kHugeMinBytes : kHugeMinReusedBytes)) (void)madvise(p, bytes, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
  (void)written_once;
#endif
}

// `*bytes` of fresh zeroed memory (with `huge`, rounded up to whole huge
// pages and 2 MiB-aligned), or nullptr.
char* map_buffer(size_t* bytes, bool huge) {
  if (!huge) {
    void* p = mmap(nullptr, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    advise_huge_pages(p, *bytes, /*written_once=*/false);
    return static_cast<char*>(p);
  }
  const size_t rounded = (*bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const size_t reserve = rounded + kHugePageBytes;
  void* p = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  char* base = static_cast<char*>(p);
  const uintptr_t aligned_at = (reinterpret_cast<uintptr_t>(base) + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  char* aligned = reinterpret_cast<char*>(aligned_at);
  if (aligned > base) munmap(base, static_cast<size_t>(aligned - base));
  char* end = aligned + rounded;
  if (end < base + reserve) munmap(end, static_cast<size_t>(base + reserve - end));
  advise_huge_pages(aligned, rounded, /*written_once=*/true);
  *bytes = rounded;
  return aligned;
}

// Leaves `out` holding `size` document bytes followed by zeroed padding
// (the buffer already has room for them).
void finish_padding(TraceBytes* out, size_t size) {
  out->size = size;
  std::memset(out->data() + size, 0, kTracePaddingBytes);
}

}  // namespace

TraceBytes& TraceBytes::operator=(TraceBytes&& o) noexcept {
  if (this != &o) {
    clear();
    storage = std::exchange(o.storage, nullptr);
    capacity = std::exchange(o.capacity, 0);
    written_once = o.written_once;
    size = std::exchange(o.size, 0);
  }
  return *this;
}

void TraceBytes::allocate(size_t bytes, bool once) {
  clear();
  written_once = once;
  if (bytes == 0) return;
  char* p = map_buffer(&bytes, once && bytes >= kHugeMinBytes);
  if (p == nullptr) throw std::bad_alloc();
  storage = p;
  capacity = bytes;
  size = 0;
}

void TraceBytes::grow(size_t bytes, size_t keep) {
  if (storage == nullptr) {
    allocate(bytes, written_once);
    return;
  }
  (void)keep;  // mremap keeps everything
  void* p = mremap(storage, capacity, bytes, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) throw std::bad_alloc();
  advise_huge_pages(p, bytes, written_once);
  storage = static_cast<char*>(p);
  capacity = bytes;
}

void TraceBytes::clear() {
  if (storage != nullptr) munmap(storage, capacity);
  storage = nullptr;
  capacity = 0;
  size = 0;
}

// A document's first significant byte: JSON (a trace is an object; an
// array of events is accepted too) or not. Checked on the first bytes, so a
// large file that is not JSON is refused before it is read or inflated.
bool starts_like_json(std::string_view head, std::string* why) {
  size_t i = 0;
  if (head.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 byte order mark
  while (i < head.size() && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) ++i;
  if (i == head.size()) return true;  // empty or blank so far: the parser words it
  if (head[i] == '{' || head[i] == '[') return true;
  char shown[16];
  const auto c = static_cast<unsigned char>(head[i]);
  std::snprintf(shown, sizeof shown, c >= 0x20 && c < 0x7f ? "'%c'" : "byte 0x%02x", c);
  *why = std::string("not a JSON trace: it starts with ") + shown + " at byte " + std::to_string(i) +
         " (a Kineto trace starts with '{')";
  return false;
}

bool looks_like_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

#ifdef GPUUTIL_HAVE_LIBDEFLATE
namespace {
size_t isize_hint(std::string_view compressed) {
  if (compressed.size() < 18) return SIZE_MAX;
  const auto* p = reinterpret_cast<const unsigned char*>(compressed.data() + compressed.size() - 4);
  return size_t{p[0]} | (size_t{p[1]} << 8) | (size_t{p[2]} << 16) | (size_t{p[3]} << 24);
}
}  // namespace
#endif

#ifndef GPUUTIL_HAVE_ZLIB
bool gunzip_capped(std::string_view compressed, TraceBytes* out, std::string* error, size_t, bool*) {
  return gunzip(compressed, out, error);
}

bool gunzip(std::string_view, TraceBytes* out, std::string* error) {
  out->clear();
  *error =
      "gzip trace, but this gpuutil build has no gzip support (zlib was not found when it was built): "
      "gunzip the file first, or rebuild with zlib headers installed (Debian/Ubuntu: zlib1g-dev)";
  return false;
}
#else
bool gunzip(std::string_view compressed, TraceBytes* out, std::string* error) {
  return gunzip_capped(compressed, out, error, kMaxDocumentBytes);
}

bool gunzip_capped(std::string_view compressed, TraceBytes* out, std::string* error, size_t cap_bytes,
                   bool* over_cap) {
  // ISIZE (the last 4 bytes, little endian) is the uncompressed size mod
  // 2^32 of the last member: a good first guess for one-member files.
  size_t guess = compressed.size() * 4;
  if (compressed.size() >= 18) {
    const auto* p = reinterpret_cast<const unsigned char*>(compressed.data() + compressed.size() - 4);
    const size_t isize = size_t{p[0]} | (size_t{p[1]} << 8) | (size_t{p[2]} << 16) | (size_t{p[3]} << 24);
    // Trust the hint only within a plausible compression ratio.
    if (isize >= compressed.size() / 2 && isize / 1032 <= compressed.size()) guess = isize;
  }
  if (guess > cap_bytes) guess = cap_bytes;
  out->allocate(guess + kTracePaddingBytes);
#ifdef GPUUTIL_HAVE_LIBDEFLATE
  // Fast path: one gzip member whose ISIZE is the exact size. libdeflate
  // inflates and checks the CRC several times faster than zlib. Anything
  // else (several members, trailing bytes, corruption) takes the zlib path
  // below, which also words the errors.
  if (guess == isize_hint(compressed)) {
    if (libdeflate_decompressor* d = libdeflate_alloc_decompressor()) {
      size_t in_used = 0, produced = 0;
      const libdeflate_result rc = libdeflate_gzip_decompress_ex(
          d, compressed.data(), compressed.size(), out->data(), guess, &in_used, &produced);
      libdeflate_free_decompressor(d);
      if (rc == LIBDEFLATE_SUCCESS && in_used == compressed.size()) {
        finish_padding(out, produced);
        std::string why;  // (small documents: the parser words what is wrong)
        if (produced >= 4096 && !starts_like_json(out->view().substr(0, 4096), &why)) {
          *error = "gzip: " + why;
          out->clear();
          return false;
        }
        return true;
      }
    }
  }
#endif

  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {  // 16: gzip framing only
    *error = "cannot initialise zlib";
    return false;
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  size_t in_left = compressed.size();
  size_t produced = 0;
  bool ok = true;
  bool member_done = false;
  for (;;) {
    if (zs.avail_in == 0 && in_left > 0) {
      const size_t take = in_left < kInflateChunkBytes ? in_left : kInflateChunkBytes;
      zs.avail_in = static_cast<uInt>(take);
      in_left -= take;
    }
    if (produced + kTracePaddingBytes >= out->capacity) {
      if (produced >= cap_bytes) {
        *error = "gzip: decompressed document exceeds " +
                 (cap_bytes == kMaxDocumentBytes ? std::string("4 GiB") : std::to_string(cap_bytes) + " bytes");
        if (over_cap != nullptr) *over_cap = cap_bytes < kMaxDocumentBytes;
        ok = false;
        break;
      }
      size_t grown = out->capacity * 2;
      if (grown > cap_bytes + kTracePaddingBytes) grown = cap_bytes + kTracePaddingBytes;
      out->grow(grown, produced);
    }
    size_t room = out->capacity - kTracePaddingBytes - produced;
    if (room > kInflateChunkBytes * 64) room = kInflateChunkBytes * 64;
    zs.next_out = reinterpret_cast<Bytef*>(out->data() + produced);
    zs.avail_out = static_cast<uInt>(room);
    const size_t before = produced;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced += room - zs.avail_out;
    if (before < 4096 && produced >= 4096) {  // the inflated document's first bytes
      std::string why;
      if (!starts_like_json({out->data(), produced}, &why)) {
        *error = "gzip: " + why;
        ok = false;
        break;
      }
    }
    if (rc == Z_STREAM_END) {
      member_done = true;
      // Another gzip member may follow (files written by `cat a.gz b.gz`).
      if (zs.avail_in == 0 && in_left > 0) {
        const size_t take = in_left < kInflateChunkBytes ? in_left : kInflateChunkBytes;
        zs.avail_in = static_cast<uInt>(take);
        in_left -= take;
      }
      if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b) {
        inflateReset(&zs);
        member_done = false;
        continue;
      }
      break;  // trailing bytes that are not a gzip member are ignored, like gzip(1)
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0) {
      break;  // input ended mid-stream
    }
    if (rc == Z_BUF_ERROR && zs.avail_out == 0) continue;
    *error = std::string("corrupt gzip data: ") + (zs.msg ? zs.msg : "inflate failed");
    ok = false;
    break;
  }
  inflateEnd(&zs);
  if (ok && !member_done) {
    *error = "truncated gzip data: the stream ended before the gzip trailer";
    ok = false;
  }
  if (!ok) {
    out->clear();
    return false;
  }
  finish_padding(out, produced);
  return true;
}
#endif  // GPUUTIL_HAVE_ZLIB

bool read_trace_file(const std::string& path, TraceBytes* out, std::string* error) {
  std::error_code fs_error;
  if (std::filesystem::is_directory(path, fs_error)) {
    *error = "cannot read " + path + ": is a directory";
    return false;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = read_trace_fd(fd, 0, path, out, error);
  ::close(fd);
  return ok;
}

namespace {

// Reads [offset, offset + bytes) of `fd` into `dst`; the count read.
size_t pread_all(int fd, char* dst, size_t bytes, uint64_t offset) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, dst + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

bool read_trace_fd(int fd, uint64_t offset, const std::string& label, TraceBytes* out, std::string* error,
                   size_t cap_bytes, bool* over_cap) {
  if (over_cap != nullptr) *over_cap = false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *error = "cannot size " + label + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "cannot read " + label + " whole: not a regular file";
    return false;
  }
  const uint64_t end = static_cast<uint64_t>(st.st_size);
  const size_t file_bytes = end > offset ? static_cast<size_t>(end - offset) : 0;
  if (file_bytes > kMaxDocumentBytes) {
    *error = label + " is larger than 4 GiB";
    return false;
  }
  if (file_bytes > cap_bytes) {
    *error = label + " is larger than " + std::to_string(cap_bytes) + " bytes";
    if (over_cap != nullptr) *over_cap = true;
    return false;
  }
  TraceBytes raw;
  raw.allocate(file_bytes + kTracePaddingBytes);
  // The first bytes first: gzip, or something that starts like JSON.
  const size_t head = file_bytes < 4096 ? file_bytes : 4096;
  errno = 0;
  size_t got = pread_all(fd, raw.data(), head, offset);
  if (got == head && head == 4096 && !looks_like_gzip({raw.data(), head})) {  // small files: the parser words it
    std::string why;
    if (!starts_like_json({raw.data(), head}, &why)) {
      *error = "cannot read " + label + ": " + why;
      return false;
    }
  }
  if (got == head && file_bytes > head) got += pread_all(fd, raw.data() + head, file_bytes - head, offset + head);
  if (got != file_bytes) {
    *error = "cannot read " + label + ": " + (errno != 0 ? std::strerror(errno) : "short read");
    return false;
  }
  finish_padding(&raw, file_bytes);
  if (looks_like_gzip(raw.view())) return gunzip_capped(raw.view(), out, error, std::min(cap_bytes, kMaxDocumentBytes), over_cap);
  *out = std::move(raw);
  return true;
}

}  // namespace gpuutil::replay
