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

inline std::vector<std::string> all_traces() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(traces_dir())) {
    const auto p = e.path().string();
    if (p.size() > 8 && (p.substr(p.size() - 8) == ".json.gz" || p.substr(p.size() - 5) == ".json")) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpuutil::test
