// Locating the shared real-GPU traces (../shared/traces) from tests.
// GPUUTIL_TRACES_DIR in the environment overrides the compiled-in path.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace gpuutil::test {

inline std::string traces_dir() {
  if (const char* env = std::getenv("GPUUTIL_TRACES_DIR")) return env;
  return GPUUTIL_TRACES_DIR;
}

inline std::string trace_path(const std::string& name) { return traces_dir() + "/" + name; }

inline bool traces_present() { return std::filesystem::is_directory(traces_dir()); }

// Skips the calling test, with the reason, on a clone that has no shared
// traces beside it (a user's clone; see README, "Real traces").
#define GPUUTIL_REQUIRE_TRACES()                                                                          \
  do {                                                                                                     \
    if (!::gpuutil::test::traces_present())                                                                \
      GTEST_SKIP() << "the shared real GPU traces are not at " << ::gpuutil::test::traces_dir()            \
                   << " (a clone without ../shared; set GPUUTIL_TRACES_DIR, see README 'Real traces')"; \
  } while (0)

inline std::vector<std::string> all_traces() {
  std::vector<std::string> out;
  if (!traces_present()) return out;
  for (const auto& e : std::filesystem::directory_iterator(traces_dir())) {
    const auto p = e.path().string();
    if (p.size() > 8 && (p.substr(p.size() - 8) == ".json.gz" || p.substr(p.size() - 5) == ".json")) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpuutil::test
