// Builds the per-device sorted activity order and interval unions.
#include "analysis/device_timeline.h"

#include <algorithm>
#include <map>

namespace gpuutil {

std::vector<DeviceTimeline> build_device_timelines(const EventStore& store) {
  std::map<int32_t, std::vector<uint32_t>> per_device;
  const auto& acts = store.activities;
  {
    // Count per device to reserve once; device ids are small in practice, so
    // a flat array with a map for the rest avoids a tree lookup per event.
    constexpr int32_t kFlat = 64;
    size_t flat[kFlat] = {};
    std::map<int32_t, size_t> other;
    for (const auto& a : acts) {
      if (a.device >= 0 && a.device < kFlat) {
        ++flat[a.device];
      } else {
        ++other[a.device];
      }
    }
    for (int32_t d = 0; d < kFlat; ++d) {
      if (flat[d] > 0) per_device[d].reserve(flat[d]);
    }
    for (const auto& [device, n] : other) per_device[device].reserve(n);
  }
  std::vector<uint32_t>* bucket = nullptr;
  int32_t bucket_device = 0;
  for (uint32_t i = 0; i < acts.size(); ++i) {
    if (acts[i].end_ns < acts[i].start_ns) continue;  // producers drop these; stay safe
    if (!bucket || acts[i].device != bucket_device) {
      bucket_device = acts[i].device;
      bucket = &per_device[bucket_device];
    }
    bucket->push_back(i);
  }
  std::vector<DeviceTimeline> out;
  out.reserve(per_device.size());
  for (auto& [device, idx] : per_device) {
    DeviceTimeline tl;
    tl.device = device;
    auto by_start = [&](uint32_t a, uint32_t b) { return acts[a].start_ns < acts[b].start_ns; };
    if (!std::is_sorted(idx.begin(), idx.end(), by_start)) {
      // Sort (start, index) keys rather than indices: no indirection in the
      // comparator, and ties keep input order.
      std::vector<std::pair<int64_t, uint32_t>> keys(idx.size());
      for (size_t k = 0; k < idx.size(); ++k) keys[k] = {acts[idx[k]].start_ns, idx[k]};
      std::sort(keys.begin(), keys.end());
      for (size_t k = 0; k < idx.size(); ++k) idx[k] = keys[k].second;
    }
    std::vector<Interval> compute, comm, memory;
    compute.reserve(idx.size());
    for (uint32_t i : idx) {
      const auto& a = acts[i];
      tl.max_duration_ns = std::max(tl.max_duration_ns, a.end_ns - a.start_ns);
      const Interval iv{a.start_ns, a.end_ns};
      if (a.kind != ActivityKind::kKernel) {
        memory.push_back(iv);
      } else if (a.is_communication) {
        comm.push_back(iv);
      } else {
        compute.push_back(iv);
      }
    }
    tl.compute = union_of(std::move(compute));
    tl.communication = union_of(std::move(comm));
    const IntervalList mem = union_of(std::move(memory));
    tl.comm_only = difference(tl.communication, tl.compute);
    const IntervalList kernels = union_of(tl.compute, tl.comm_only);
    tl.memory_only = difference(mem, kernels);
    tl.busy = union_of(kernels, tl.memory_only);
    tl.by_start = std::move(idx);
    out.push_back(std::move(tl));
  }
  return out;
}

size_t first_candidate(const DeviceTimeline& tl, const EventStore& store, int64_t lo_ns) {
  const int64_t from = lo_ns - tl.max_duration_ns;
  return static_cast<size_t>(std::lower_bound(tl.by_start.begin(), tl.by_start.end(), from,
                                              [&](uint32_t i, int64_t t) { return store.activities[i].start_ns < t; }) -
                             tl.by_start.begin());
}

}  // namespace gpuutil
