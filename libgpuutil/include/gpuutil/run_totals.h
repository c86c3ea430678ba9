// Run totals: what `prof.summary()` reports over every step of a live
// session (not only the steps whose reports are still kept in memory), and
// what `gpuutil analyze` / `export html` show for a file of step reports
// (a live run's JSONL): the same fold, the same run-level findings.
//
// Pure accumulation over step reports (no I/O, no locks), part of the
// analysis layer (src/analysis/run_totals.cpp, library gpuutil_offline): the
// Session adds each report it produces, under its own lock;
// run_totals_of_reports() folds reports read back from a file.
//
// Contract:
// - Sums are exact integer ns: for every device, sum(breakdown) == wall_ns,
//   and for every host thread, sum(breakdown_ns) == wall_ns, because every
//   added step report satisfies the same identities.
// - Memory is bounded by the number of distinct devices, host threads,
//   finding ids and culprit names (at most kCulpritNamesKept per cause or
//   category), never by the number of steps.
// - run_findings() is the run's one list of findings: the rules of
//   derive_findings() (docs/findings.md) over the run's totals, ranked the
//   same way; every surface (prof.summary(), gpuutil.format, gpuutil
//   analyze of a JSONL, the HTML report) shows this list.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuutil/report.h"

namespace gpuutil {

// Culprit names kept per cause (device) or category (host thread): past
// this, the name with the least time is dropped to make room (the rules
// quote only the top few).
inline constexpr size_t kCulpritNamesKept = 64;

// Device health and counts over a run, folded from its step reports: what
// the finding rules read besides the breakdown (docs/findings.md).
struct DeviceHealthTotals {
  int64_t throttle_power_ns = 0;
  int64_t throttle_thermal_ns = 0;
  bool throttle_known = false;
  double sm_clock_sum = 0, sm_clock_max = 0;  // the mean clock is sum / n
  size_t sm_clock_n = 0;
  std::optional<double> allocated_max, reserved_max, fb_used_max;
  std::optional<double> power_w_max, temperature_c_max;
  int64_t total_memory_bytes = 0;
  uint64_t short_kernels = 0, kernels = 0;
  uint64_t pageable_memcpys = 0, pageable_memcpy_bytes = 0;

  void add(const DeviceStepReport& step);
};

struct DeviceTotals {
  std::string name;
  int64_t wall_ns = 0;
  Breakdown breakdown;
  // What a run's DeviceSummary is made of (summary()): culprits by name,
  // time-weighted SM efficiency and occupancy, FLOPs against the peak.
  DeviceHealthTotals health;
  std::array<std::map<std::string, NamedTime>, kIdleCauseCount> culprits;
  double sm_weighted_ns = 0;  // sum of sm_efficiency_est x wall over the steps that have one
  bool sm_known = false;
  double occupancy_weighted_ns = 0, occupancy_weight_ns = 0;  // weighted by compute time
  double flops = 0;
  bool flops_known = false;
  std::optional<double> peak_flops_per_s;

  // The run's summary of this device, as analyze() would give it (culprits:
  // the top `top_n` per cause).
  DeviceSummary summary(int32_t rank, int32_t device, size_t top_n = 5) const;
};

// The main training thread of a rank (its busiest classified thread in each
// step, as host findings choose it), summed over the steps.
struct MainThreadTotals {
  uint64_t steps = 0;
  int64_t wall_ns = 0;
  std::array<int64_t, kHostCategoryCount> breakdown_ns{};
  std::array<std::map<std::string, int64_t>, kHostCategoryCount> culprits;
};

struct HostThreadTotals {
  std::string name;
  uint64_t steps = 0;
  int64_t wall_ns = 0;
  std::array<int64_t, kHostCategoryCount> breakdown_ns{};
};

struct FindingTotals {
  std::string title;
  std::string fix;
  int64_t recoverable_ns = 0;
  uint64_t steps = 0;  // reports in which the finding appeared
};

// What time outside steps was, where gpuutil could tell (automatic steps carve
// evaluation and checkpoint writes out of the step they would open, and steps
// that compiled with torch.compile are kept out of the run's figures;
// docs/pytorch.md, "Steps"), as are steps reported incomplete (live GPU
// collection: not every device record arrived; docs/live-collection.md,
// "Completeness"). The rest of the outside time is "other".
enum class OutsideKind : uint8_t { kEvaluation = 0, kCheckpoint = 1, kCompileWarmup = 2, kIncomplete = 3, kOther = 4 };
constexpr size_t kOutsideKindCount = 5;
// "evaluation", "checkpoint", "compile_warmup", "incomplete", "other".
const char* outside_kind_name(OutsideKind k);

struct RunTotals {
  uint64_t steps = 0;
  int64_t steps_wall_ns = 0;
  // Filled by the Session (not by add()): time outside every step, and how
  // much of it was each kind (the kOther entry is the rest, so the entries
  // sum to outside_steps_ns); steps kept out of the figures above because
  // torch.compile compiled during them, or reported incomplete (their wall
  // is outside time), so first step start to last step end is exactly
  // steps_wall_ns + outside_steps_ns.
  int64_t outside_steps_ns = 0;
  std::array<int64_t, kOutsideKindCount> outside_named_ns{};
  uint64_t compile_warmup_steps = 0;
  uint64_t incomplete_steps = 0;
  std::map<std::pair<int32_t, int32_t>, DeviceTotals> devices;       // (rank, device)
  std::map<std::pair<int32_t, int64_t>, HostThreadTotals> threads;   // (rank, tid)
  std::map<std::string, FindingTotals> findings;                     // per-step findings, by id
  std::map<int32_t, MainThreadTotals> main_threads;                  // by rank
  // The workload over the run: steps per kind, and per kind the latest
  // step's evidence with its own step count left out.
  std::map<std::string, uint64_t> workload_steps;
  std::map<std::string, std::string> workload_evidence;
  int64_t capture_ns = 0;
  std::string steps_source;  // of the first report that names one
  // The input pipelines: each report's loaders folded in order (counts,
  // the latest batch waits, the latest settings); bounded by
  // kBatchWaitsKept waits each.
  std::vector<LoaderReport> loaders;

  // Adds every step, device, host thread and finding of `report`.
  void add(const Report& report);

  // `loaders` with each one's periodic stall found over the run's kept
  // batch waits (what run_findings reads; run_totals_to_json writes them).
  std::vector<LoaderReport> finished_loaders() const;

  // What the run is: the kind most steps had (ties: training, inference,
  // capture, unknown), with its evidence and the run's step count.
  Workload workload() const;
};

// The run-level findings of `totals` (see the contract above), most
// recoverable first. Reads steps, steps_wall_ns, outside_steps_ns and
// outside_named_ns, the devices (or, with none, the main threads) and the
// workload.
std::vector<Finding> run_findings(const RunTotals& totals);

// Run totals of step reports read back from a file (a live run's JSONL), in
// file order, as a live session makes them: steps that compiled with
// torch.compile (StepReport::compile_warmup) are outside time, not summed;
// time between consecutive steps is outside time.
RunTotals run_totals_of_reports(const std::vector<Report>& reports);

}  // namespace gpuutil
