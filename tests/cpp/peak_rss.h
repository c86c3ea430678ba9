// Peak and current resident memory of the test process, for the import
// tests that bound what an import holds (test_import_stream.cpp,
// test_import_source.cpp, test_import_budget.cpp): reset_peak_rss()
// clears VmHWM (false where the kernel does not allow it: skip then).
#pragma once

#include <cstddef>
#include <fstream>
#include <string>

namespace gpuutil::test {

inline bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

// A "VmHWM:" / "VmRSS:" line of /proc/self/status, in bytes (0 if absent).
inline size_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size())) * 1024;
  }
  return 0;
}

inline size_t peak_rss_bytes() { return status_bytes("VmHWM:"); }
inline size_t rss_bytes() { return status_bytes("VmRSS:"); }

// How far the peak since reset_peak_rss() rose above `start_bytes` (an
// rss_bytes() read after the reset), 0 if it did not. The kernel batches
// RSS counts per thread, so VmHWM can read a few pages below a VmRSS read
// before it (seen under ctest -j2: 56 KB below; the unsigned difference
// wrapped to 1.8e19 and failed a bound).
inline size_t peak_rss_above(size_t start_bytes) {
  const size_t peak = peak_rss_bytes();
  return peak > start_bytes ? peak - start_bytes : 0;
}

}  // namespace gpuutil::test
