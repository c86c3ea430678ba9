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
#include "gpuutil/run_totals.h"

namespace gpuutil {

// The main training thread of a rank, summed over steps.
struct HostTotals {
  int32_t rank = 0;
  int64_t wall_ns = 0;
  uint64_t steps = 0;
  std::array<int64_t, kHostCategoryCount> ns{};
  std::array<std::string, kHostCategoryCount> top_culprit;  // "" when unknown
};

// The main thread of each rank summed over a report's steps (the busiest
// classified thread of each step; RunTotals::add folds a run the same way).
std::vector<HostTotals> host_totals(const Report& report);
// host_dataloader, host_sync, host_optimizer per rank (appended to `out`);
// `loaders`: the run's input pipelines (host_dataloader reads them).
void host_findings_of(const std::vector<HostTotals>& ranks, const std::vector<LoaderReport>& loaders,
                      std::vector<Finding>& out);

// Waiting on the input pipeline, read from the loader itself
// (docs/findings.md, "Input pipeline"); shared by host_dataloader and
// idle_dataloader.
// The loader of `rank` waited on most; null when the rank has none.
const LoaderReport* main_loader(const std::vector<LoaderReport>& loaders, int32_t rank);
// ": every 2nd batch stalls (one per round of the DataLoader workers)" for a loader
// with a periodic stall, "" otherwise.
std::string loader_title(const LoaderReport* loader);
// "; every 2nd batch waits 43.1 ms (median of 15; the other batches
// 0.2 ms), 96.0% of the waiting: one batch per round of the loader's 2
// workers (one worker slower than the others, or all of them slower than
// the step)", or "".
std::string loader_evidence(const LoaderReport* loader);
// The fix, never recommending a setting the loader already has (settings
// unknown: every usual one). A periodic stall gets the slow-worker fix.
enum class LoaderFixFor : uint8_t { kHost, kDeviceTraining, kDeviceInference };
std::string loader_fix(const LoaderReport* loader, LoaderFixFor what);

// outside_steps: the job spent >= 10% of its span (and >= 1 ms) outside steps (needs two
// steps or more). span_ns = steps' wall + outside time. `named`: what the outside
// time was, where known (a live session's automatic steps; all zero otherwise):
// the evidence names the parts; torch.compile warm-up steps count neither in
// the outside time nor in the span the share is taken of (a one-off, no
// finding of its own).
std::optional<Finding> outside_steps_finding(uint64_t steps, int64_t span_ns, int64_t outside_ns,
                                             const std::array<int64_t, kOutsideKindCount>& named = {});

}  // namespace gpuutil
