// Rules that turn a report's numbers into ranked findings with the fix.
//
// Internal to the analysis core. Pure functions of what the rules read
// (RunFacts), gathered from a Report (steps and summary: derive_findings)
// or from a run's totals (run_findings, gpuutil/run_totals.h): one set of
// rules for an analysed trace, a live summary and a JSONL. Thresholds follow xprof's input-bound convention (>= 5% of step
// time "moderately", >= 20% "highly") and are documented in
// docs/findings.md. Findings are ranked by recoverable time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/host_findings.h"
#include "gpuutil/report.h"
#include "gpuutil/run_totals.h"

namespace gpuutil {

// The findings of a report (an analysed trace, or one live step): the rules
// over its summary, with device health and the main threads folded from its
// steps.
std::vector<Finding> derive_findings(const Report& report);

// What the rules read, however it was gathered: a report's summary and
// steps (derive_findings), or a run's totals (run_findings in
// gpuutil/run_totals.h), so that both give findings by one set of rules.
struct RunFacts {
  const Summary& summary;    // steps, trace_span_ns, outside_steps_ns, devices
  const Workload& workload;
  std::vector<DeviceHealthTotals> health;  // one per summary.devices entry, same order
  std::vector<HostTotals> host;            // main thread per rank; read when no device has wall time
  std::array<int64_t, kOutsideKindCount> outside_named_ns{};
  std::vector<LoaderReport> loaders;       // input pipelines, with their periodic stalls (loaders.h)
};

// The findings of `facts`, most recoverable first.
std::vector<Finding> findings_of(const RunFacts& facts);

// A finding with share_of_wall = recoverable / wall (0 when wall is 0);
// recoverable is floored at 0.
Finding make_finding(const char* id, std::string title, std::string evidence, std::string fix,
                     int64_t recoverable_ns, double wall_ns);

}  // namespace gpuutil
