// The first call in a fresh process, which is what a one-shot analysis
// (`gpuutil analyze`, `gpuutil.analyze()` in a new interpreter, the HTA
// comparison's analyze call) pays: cold code, fresh heap pages, first-use
// set-up in simdjson and the C++ runtime. Warm-loop benchmarks
// (bench_import) never see these costs.
//
// Usage: bench_first_call TRACE MODE, once per process (run it N times
// from the shell and take the median):
//   gunzip   only read the file and gunzip it (the importer's
//            read_trace_file), so its share of a first import shows
//   import   import_kineto_file()
//   analyze  import, then analyze() and report_to_json(), each timed
//   twice    the whole analysis twice in this process: first and warm call
//   hw       std::thread::hardware_concurrency(), first and second call
// Prints wall milliseconds and minor page faults of each timed part.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "import/source/trace_bytes.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report_json.h"

using namespace gpuutil;

namespace {

using Clock = std::chrono::steady_clock;

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Times `work` once: prints "label ms faults".
template <typename Work>
void timed(const char* label, Work work) {
  const long f0 = minor_faults();
  const Clock::time_point t0 = Clock::now();
  work();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("%-8s %8.3f ms %6ld faults\n", label, ms, minor_faults() - f0);
}

void analyze_once(const std::string& path, const char* import_label, const char* analyze_label,
                  const char* json_label) {
  ImportResult imported;
  timed(import_label, [&] { imported = import_kineto_file(path); });
  if (!imported.ok) {
    std::fprintf(stderr, "bench_first_call: %s\n", imported.error.c_str());
    std::exit(1);
  }
  const std::vector<const EventStore*> stores{&imported.store};
  Report report;
  timed(analyze_label, [&] { report = analyze(stores, AnalysisOptions{}); });
  std::string json;
  timed(json_label, [&] { json = report_to_json(report, -1); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bench_first_call TRACE gunzip|import|analyze|twice|hw\n");
    return 2;
  }
  const std::string path = argv[1];
  const char* mode = argv[2];
  if (std::strcmp(mode, "gunzip") == 0) {
    timed("gunzip", [&] {
      replay::TraceBytes bytes;
      std::string error;
      if (!replay::read_trace_file(path, &bytes, &error)) std::fprintf(stderr, "bench_first_call: %s\n", error.c_str());
    });
  } else if (std::strcmp(mode, "import") == 0) {
    timed("import", [&] { (void)import_kineto_file(path); });
  } else if (std::strcmp(mode, "analyze") == 0) {
    analyze_once(path, "import", "analyze", "json");
  } else if (std::strcmp(mode, "twice") == 0) {
    analyze_once(path, "import1", "analyze1", "json1");
    analyze_once(path, "import2", "analyze2", "json2");
  } else if (std::strcmp(mode, "hw") == 0) {
    unsigned n = 0;
    timed("hw1", [&] { n += std::thread::hardware_concurrency(); });
    timed("hw2", [&] { n += std::thread::hardware_concurrency(); });
    std::printf("(%u)\n", n / 2);
  } else {
    std::fprintf(stderr, "bench_first_call: unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
