// Trace import speed and peak memory on a real trace file.
//
// Times gpuutil::import_kineto_file() (gzip + JSON parse + mapping into the
// event model) and gpuutil::analyze() on the result, repeated, and prints
// the median of each and the process's peak RSS.
// Usage: bench_import TRACE [repeats (default 5)] [parse threads (default 0 =
// automatic; 1 = the one-thread pass, for comparison)]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"

using namespace gpuutil;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_import TRACE [repeats]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  ImportOptions options;
  options.threads = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 0;
  std::vector<double> import_s, analyze_s;
  size_t events = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ImportResult imp = import_kineto_file(path, options);
    const auto t1 = std::chrono::steady_clock::now();
    if (!imp.ok) {
      std::fprintf(stderr, "bench_import: cannot read %s: %s\n", path.c_str(), imp.error.c_str());
      return 1;
    }
    const Report r = analyze(imp.store);
    const auto t2 = std::chrono::steady_clock::now();
    import_s.push_back(std::chrono::duration<double>(t1 - t0).count());
    analyze_s.push_back(std::chrono::duration<double>(t2 - t1).count());
    events = imp.store.activities.size() + imp.store.api_calls.size() + imp.store.ranges.size();
    if (r.steps.empty()) return 1;
  }
  std::sort(import_s.begin(), import_s.end());
  std::sort(analyze_s.begin(), analyze_s.end());
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  std::printf("trace              %s (%.1f MB on disk)\n", path.c_str(), mb);
  std::printf("events kept        %zu\n", events);
  std::printf("import median      %.3f s (min %.3f, max %.3f, %d runs)\n", import_s[import_s.size() / 2],
              import_s.front(), import_s.back(), repeats);
  std::printf("analyze median     %.3f s\n", analyze_s[analyze_s.size() / 2]);
  std::printf("peak RSS           %.1f MiB\n", static_cast<double>(u.ru_maxrss) / 1024.0);
  return 0;
}
