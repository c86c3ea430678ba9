// Per-window kernel, memcpy and launch metrics for one device.
//
// Internal to the analysis core. Counts are of activities that START in the
// window; time-weighted figures use each activity's part inside the window,
// so an activity straddling a step edge is split between the steps.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "analysis/device_timeline.h"
#include "analysis/host_timeline.h"
#include "analysis/occupancy.h"
#include "gpuutil/analysis.h"
#include "gpuutil/report.h"

namespace gpuutil {

// Fills the kernel/memcpy/launch fields of `out` (not the breakdown).
// `sm_weighted_ns` and `occ_*` return the raw sums so run totals can be
// formed without averaging averages.
struct StepMetricSums {
  double sm_weighted_ns = 0;  // sum of min(blocks/SMs,1) * kernel ns in window
  double occ_weighted_ns = 0; // sum of occupancy * kernel ns
  double occ_kernel_ns = 0;   // kernel ns with a known occupancy (persistent launches left out)
  bool sm_known = false;
};

// Working memory compute_step_metrics() may reuse across calls on one store
// (one per calling thread): occupancy estimates memoised by launch
// configuration. Results are the same with or without it.
struct StepMetricsScratch {
  struct Entry {
    bool used = false;
    int32_t device = 0;
    uint64_t blocks = 0, threads = 0;
    uint32_t registers = 0, shared_bytes = 0;
    std::optional<double> occupancy;
    bool persistent = false;
  };
  std::vector<Entry> occupancy;  // direct-mapped by launch configuration
  std::unordered_map<int32_t, std::optional<OccupancyLimits>> limits;  // per device
};

StepMetricSums compute_step_metrics(const EventStore& store, const DeviceTimeline& tl, const HostTimelines& host,
                                    int64_t lo_ns, int64_t hi_ns, const AnalysisOptions& options,
                                    DeviceStepReport& out, StepMetricsScratch* scratch = nullptr);

}  // namespace gpuutil
