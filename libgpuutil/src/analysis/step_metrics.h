// Per-window kernel, memcpy and launch metrics for one device.
//
// Internal to the analysis core. Counts are of activities that START in the
// window; time-weighted figures use each activity's part inside the window,
// so an activity straddling a step edge is split between the steps.
#pragma once

#include <cstdint>

#include "analysis/device_timeline.h"
#include "analysis/host_timeline.h"
#include "gpuutil/analysis.h"
#include "gpuutil/report.h"

namespace gpuutil {

// Fills the kernel/memcpy/launch fields of `out` (not the breakdown).
// `sm_weighted_ns` and `occ_*` return the raw sums so run totals can be
// formed without averaging averages.
struct StepMetricSums {
  double sm_weighted_ns = 0;  // sum of min(blocks/SMs,1) * kernel ns in window
  double occ_weighted_ns = 0; // sum of occupancy * kernel ns
  double occ_kernel_ns = 0;   // kernel ns with a known occupancy
  bool sm_known = false;
};

StepMetricSums compute_step_metrics(const EventStore& store, const DeviceTimeline& tl, const HostTimelines& host,
                                    int64_t lo_ns, int64_t hi_ns, const AnalysisOptions& options,
                                    DeviceStepReport& out);

}  // namespace gpuutil
