// Report serialisation speed: gpuutil::report_to_json() and
// run_totals_to_json() on reports from a real trace.
//
// Imports and analyses TRACE once, then times the serialisers on:
//   - "live step": the per-step report a live session serialises (one step,
//     one device with its top kernels and culprits, one host thread, plus
//     the summary, findings and diagnostics), compact;
//   - "whole trace": the full report of TRACE, compact and indent 2;
//   - "run totals": run_totals_to_json over the whole report.
// Each case runs in batches of about 20 ms; the best and median ns per call
// over `repeats` batches are printed (the machine is shared: best-of-N is
// the least disturbed number).
// Usage: bench_report_json TRACE [repeats (default 15)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report_json.h"
#include "gpuutil/run_totals.h"

using namespace gpuutil;

namespace {

// Keeps the compiler from dropping the serialisation.
size_t g_sink = 0;

void time_case(const char* label, int repeats, const std::function<std::string()>& fn) {
  const size_t bytes = fn().size();
  // Calibrate a batch to about 20 ms.
  int batch = 1;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) g_sink += fn().size();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.02 || batch > (1 << 24)) break;
    batch *= 2;
  }
  std::vector<double> ns_each;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) g_sink += fn().size();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ns_each.push_back(s * 1e9 / batch);
  }
  std::sort(ns_each.begin(), ns_each.end());
  std::printf("%-26s %8zu bytes  best %10.0f ns  median %10.0f ns  (%d x %d calls)\n", label, bytes, ns_each.front(),
              ns_each[ns_each.size() / 2], repeats, batch);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_report_json TRACE [repeats]\n");
    return 2;
  }
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 15;
  ImportResult imp = import_kineto_file(argv[1]);
  if (!imp.ok) {
    std::fprintf(stderr, "bench_report_json: cannot read %s: %s\n", argv[1], imp.error.c_str());
    return 1;
  }
  const Report whole = analyze(imp.store);
  if (whole.steps.empty() || whole.steps.front().devices.empty()) {
    std::fprintf(stderr, "bench_report_json: %s has no step with a device\n", argv[1]);
    return 1;
  }
  // The live-session shape: one step, one device, one host thread.
  Report live = whole;
  live.steps.resize(1);
  live.steps[0].devices.resize(1);
  if (live.steps[0].host.size() > 1) live.steps[0].host.resize(1);
  if (live.summary.devices.size() > 1) live.summary.devices.resize(1);
  live.summary.steps = 1;
  RunTotals totals;
  totals.add(whole);

  std::printf("trace %s: %zu steps\n", argv[1], whole.steps.size());
  time_case("live step, compact", repeats, [&] { return report_to_json(live); });
  time_case("whole trace, compact", repeats, [&] { return report_to_json(whole); });
  time_case("whole trace, indent 2", repeats, [&] { return report_to_json(whole, 2); });
  time_case("run totals", repeats, [&] { return run_totals_to_json(totals); });
  return g_sink == 0 ? 1 : 0;
}
