// Findings of host-only runs, from the main training thread's host
// breakdown (host_findings.cpp; docs/findings.md, "Host-only runs"), and the
// time-outside-steps finding of every run.
//
// Internal to the analysis core; pure functions of the report.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "gpuutil/report.h"

namespace gpuutil {

// The main training thread of a rank, summed over steps.
struct HostTotals {
  int32_t rank = 0;
  int64_t wall_ns = 0;
  uint64_t steps = 0;
  std::array<int64_t, kHostCategoryCount> ns{};
  std::array<std::string, kHostCategoryCount> top_culprit;  // "" when unknown
};

// host_dataloader, host_sync, host_optimizer per rank (appended to `out`),
// from a report's steps (the main thread of each step) ...
void host_findings(const Report& report, std::vector<Finding>& out);
// ... or from totals already summed (a live session's run totals).
void host_findings_of(const std::vector<HostTotals>& ranks, std::vector<Finding>& out);

// outside_steps: the job spent >= 10% of its span (and >= 1 ms) outside steps (needs two
// steps or more). span_ns = steps' wall + outside time.
std::optional<Finding> outside_steps_finding(uint64_t steps, int64_t span_ns, int64_t outside_ns);

}  // namespace gpuutil
