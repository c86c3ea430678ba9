// Trace import speed and peak memory on a real trace file.
//
// Times gpuutil::import_kineto_file() (gzip + JSON parse + mapping into the
// event model), gpuutil::analyze() on the result and report_to_json() of the
// report (the three parts of `gpuutil-analyze`), repeated, and prints the
// median of each (wall and process CPU time), events per CPU-second and the
// process's peak RSS.
// Usage: bench_import TRACE [repeats (default 5)] [parse threads (default 0 =
// automatic; 1 = the one-thread pass, for comparison)]
// GPUUTIL_BENCH_NO_STREAM=1 reads every document whole (the pass before
// the streaming import), GPUUTIL_BENCH_WINDOW_MB=N sets the streaming
// window.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report_json.h"

using namespace gpuutil;

namespace {

// User + system CPU seconds of the whole process (every thread).
double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_import TRACE [repeats]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  ImportOptions options;
  options.threads = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 0;
  if (const char* no_stream = std::getenv("GPUUTIL_BENCH_NO_STREAM"); no_stream && *no_stream == '1') {
    options.stream_min_bytes = SIZE_MAX;
  }
  if (const char* window = std::getenv("GPUUTIL_BENCH_WINDOW_MB")) {
    options.stream_window_bytes = static_cast<size_t>(std::atof(window) * 1048576.0);
  }
  std::vector<double> import_s, analyze_s, import_cpu_s, analyze_cpu_s, json_s;
  size_t json_bytes = 0;
  size_t events = 0;
  for (int i = 0; i < repeats; ++i) {
    const double c0 = process_cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    ImportResult imp = import_kineto_file(path, options);
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = process_cpu_s();
    if (!imp.ok) {
      std::fprintf(stderr, "bench_import: cannot read %s: %s\n", path.c_str(), imp.error.c_str());
      return 1;
    }
    const Report r = analyze(imp.store);
    const auto t2 = std::chrono::steady_clock::now();
    json_bytes = report_to_json(r, -1).size();
    json_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count());
    import_cpu_s.push_back(c1 - c0);
    analyze_cpu_s.push_back(process_cpu_s() - c1);
    import_s.push_back(std::chrono::duration<double>(t1 - t0).count());
    analyze_s.push_back(std::chrono::duration<double>(t2 - t1).count());
    events = imp.store.activities.size() + imp.store.api_calls.size() + imp.store.ranges.size();
    if (r.steps.empty()) return 1;
  }
  for (auto* v : {&import_s, &analyze_s, &import_cpu_s, &analyze_cpu_s, &json_s}) std::sort(v->begin(), v->end());
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  std::printf("trace              %s (%.1f MB on disk)\n", path.c_str(), mb);
  std::printf("events kept        %zu\n", events);
  std::printf("import median      %.2f ms (min %.2f, max %.2f, %d runs)\n", 1e3 * import_s[import_s.size() / 2],
              1e3 * import_s.front(), 1e3 * import_s.back(), repeats);
  const double import_cpu = import_cpu_s[import_cpu_s.size() / 2];
  const double analyze_cpu = analyze_cpu_s[analyze_cpu_s.size() / 2];
  std::printf("import CPU median  %.2f ms (user + system, every thread)\n", 1e3 * import_cpu);
  std::printf("analyze median     %.2f ms (CPU %.2f ms)\n", 1e3 * analyze_s[analyze_s.size() / 2], 1e3 * analyze_cpu);
  std::printf("report JSON median %.3f ms (%zu bytes)\n", 1e3 * json_s[json_s.size() / 2], json_bytes);
  std::printf("events per CPU-s   %.3f M (import), %.3f M (import + analyze)\n",
              static_cast<double>(events) / import_cpu / 1e6,
              static_cast<double>(events) / (import_cpu + analyze_cpu) / 1e6);
  std::printf("peak RSS           %.1f MiB\n", static_cast<double>(u.ru_maxrss) / 1024.0);
  return 0;
}
