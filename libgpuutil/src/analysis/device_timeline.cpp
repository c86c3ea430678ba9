// Builds the per-device sorted activity order and interval unions.
#include "analysis/device_timeline.h"

#include <algorithm>
#include <map>

namespace gpuutil {

namespace {

// What the unions need of one activity, packed so sorting and the sweep
// below never touch the (much larger) DeviceActivity records again.
struct Key {
  int64_t start_ns;
  int64_t end_ns;
  uint32_t index;
  uint8_t cls;  // 0 compute, 1 communication, 2 memory
  bool operator<(const Key& o) const { return start_ns != o.start_ns ? start_ns < o.start_ns : index < o.index; }
};

}  // namespace

std::vector<DeviceTimeline> build_device_timelines(const EventStore& store) {
  std::map<int32_t, std::vector<Key>> per_device;
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
  std::vector<Key>* bucket = nullptr;
  int32_t bucket_device = 0;
  for (uint32_t i = 0; i < acts.size(); ++i) {
    const auto& a = acts[i];
    if (a.end_ns < a.start_ns) continue;  // producers drop these; stay safe
    if (!bucket || a.device != bucket_device) {
      bucket_device = a.device;
      bucket = &per_device[bucket_device];
    }
    const uint8_t cls = a.kind != ActivityKind::kKernel ? 2 : (a.is_communication ? 1 : 0);
    bucket->push_back({a.start_ns, a.end_ns, i, cls});
  }
  std::vector<DeviceTimeline> out;
  out.reserve(per_device.size());
  for (auto& [device, keys] : per_device) {
    DeviceTimeline tl;
    tl.device = device;
    if (!std::is_sorted(keys.begin(), keys.end())) std::sort(keys.begin(), keys.end());
    std::vector<Interval> compute, comm, memory;
    compute.reserve(keys.size());
    tl.by_start.resize(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) {
      const Key& key = keys[k];
      tl.by_start[k] = key.index;
      tl.max_duration_ns = std::max(tl.max_duration_ns, key.end_ns - key.start_ns);
      const Interval iv{key.start_ns, key.end_ns};
      if (key.cls == 2) {
        memory.push_back(iv);
      } else if (key.cls == 1) {
        comm.push_back(iv);
      } else {
        compute.push_back(iv);
      }
    }
    std::vector<Key>().swap(keys);
    tl.compute = union_of(std::move(compute));
    tl.communication = union_of(std::move(comm));
    const IntervalList mem = union_of(std::move(memory));
    tl.comm_only = difference(tl.communication, tl.compute);
    const IntervalList kernels = union_of(tl.compute, tl.comm_only);
    tl.memory_only = difference(mem, kernels);
    tl.busy = union_of(kernels, tl.memory_only);
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
