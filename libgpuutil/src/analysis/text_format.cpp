// Human-readable numbers (see text_format.h).
#include "analysis/text_format.h"

#include <charconv>
#include <cstdio>
#include <system_error>

namespace gpuutil {

namespace {

// printf(fmt, v) into 32 bytes (fmt: "%.1f" and a suffix), without printf
// for the values findings print (they run for every live step report):
// to_chars rounds the exact binary value correctly, as printf does. A value
// with more than 24 characters (never a real time or share) takes printf,
// truncated at 31 characters as before.
std::string one_decimal(double v, const char* suffix, const char* fmt) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + 24, v, std::chars_format::fixed, 1);
  if (r.ec != std::errc()) {
    std::snprintf(buf, sizeof buf, fmt, v);
    return buf;
  }
  std::string out(buf, r.ptr);
  out += suffix;
  return out;
}

}  // namespace

std::string ms_text(int64_t ns) { return one_decimal(static_cast<double>(ns) / 1e6, " ms", "%.1f ms"); }
std::string pct_text(double f) { return one_decimal(f * 100.0, "%", "%.1f%%"); }
std::string bytes_text(double bytes) {
  char buf[32];
  if (bytes >= 1024.0 * 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  } else if (bytes >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  }
  return buf;
}
std::string cat(std::initializer_list<std::string_view> pieces) {
  size_t n = 0;
  for (std::string_view p : pieces) n += p.size();
  std::string out;
  out.reserve(n);
  for (std::string_view p : pieces) out.append(p);
  return out;
}
std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace gpuutil
