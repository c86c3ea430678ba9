// Human-readable numbers (see text_format.h).
#include "analysis/text_format.h"

#include <cstdio>

namespace gpuutil {

std::string ms_text(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}
std::string pct_text(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", f * 100.0);
  return buf;
}
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
std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace gpuutil
