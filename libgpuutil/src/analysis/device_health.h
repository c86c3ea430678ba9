// Per-step device health from sampled counters (NVML, GPM, allocator).
//
// Internal to the analysis core; pure. Collectors store CounterSamples named
// by the counter names below (the contract between collectors/nvml, the
// PyTorch allocator hook and this file; listed in docs/report-schema.md).
// Aggregation per counter kind:
//   gauge       mean of the samples in [lo_ns, hi_ns)
//   max         maximum of the samples in [lo_ns, hi_ns)
//   cumulative  value at the last sample <= hi_ns minus value at the last
//               sample <= lo_ns (both must exist; a counter reset gives 0)
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpuutil/events.h"
#include "gpuutil/report.h"

namespace gpuutil {

// Samples of one store grouped by (device, field), sorted by time. Built once
// per store, then queried per step window.
class CounterIndex {
 public:
  explicit CounterIndex(const EventStore& store);
  bool empty() const { return series_.empty(); }
  // Health of `device` over [lo_ns, hi_ns).
  DeviceHealth health(int32_t device, int64_t lo_ns, int64_t hi_ns) const;

 private:
  struct Point {
    int64_t ts_ns;
    double value;
  };
  // key: device * 64 + field index
  std::unordered_map<int64_t, std::vector<Point>> series_;
};

// The field index of a counter name, or -1 for a counter health ignores.
int health_field_of(std::string_view counter_name);

}  // namespace gpuutil
