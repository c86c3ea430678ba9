// Per-device view of a store's device work, prepared once for all steps.
//
// Internal to the analysis core. Holds the activities of one device sorted
// by start, and the interval unions the accounting needs:
//   busy           = union of all work
//   compute        = union of non-communication kernels
//   comm_only      = communication kernels not overlapped by compute
//   memory_only    = memcpy/memset not overlapped by any kernel
//   communication  = union of communication kernels (for overlap metrics)
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/intervals.h"
#include "gpuutil/events.h"

namespace gpuutil {

struct DeviceTimeline {
  int32_t device = 0;
  std::vector<uint32_t> by_start;  // indices into store.activities, sorted by start_ns
  int64_t max_duration_ns = 0;
  IntervalList busy;
  IntervalList compute;
  IntervalList comm_only;
  IntervalList memory_only;
  IntervalList communication;
};

// Whether activity `index` is communication: its own flag (named like
// communication), or launched inside a host collective range
// (`in_collective`, HostTimelines::in_collective; null or empty: none).
inline bool is_communication_work(const EventStore& store, uint32_t index, const std::vector<uint8_t>* in_collective) {
  const DeviceActivity& a = store.activities[index];
  return a.kind == ActivityKind::kKernel &&
         (a.is_communication || (in_collective != nullptr && index < in_collective->size() && (*in_collective)[index]));
}

// One timeline per device that has any activity, ordered by device id.
// `in_collective` (optional): see is_communication_work.
std::vector<DeviceTimeline> build_device_timelines(const EventStore& store,
                                                   const std::vector<uint8_t>* in_collective = nullptr);

// Index into tl.by_start of the first activity that may overlap a window
// starting at lo_ns (accounts for the longest activity).
size_t first_candidate(const DeviceTimeline& tl, const EventStore& store, int64_t lo_ns);

}  // namespace gpuutil
