// Builds the per-device sorted activity order and interval unions.
#include "analysis/device_timeline.h"

#include <algorithm>
#include <limits>
#include <map>

namespace gpuutil {

namespace {

// What the unions need of one activity, packed so sorting and the sweep
// below never touch the (much larger) DeviceActivity records again. Only
// built for a device whose activities are not in start order in the store.
struct Key {
  int64_t start_ns;
  int64_t end_ns;
  uint32_t index;
  uint8_t cls;  // 0 compute, 1 communication, 2 memory
  bool operator<(const Key& o) const { return start_ns != o.start_ns ? start_ns < o.start_ns : index < o.index; }
};

// Sorts keys that are usually only locally out of order (streams overlap a
// little): insertion sort while that stays cheap, std::sort otherwise. Keys
// are unique (index), so the result is the same either way.
void sort_nearly_sorted(std::vector<Key>& keys) {
  size_t budget = 8 * keys.size() + 64;  // element moves before giving up
  for (size_t i = 1; i < keys.size(); ++i) {
    if (!(keys[i] < keys[i - 1])) continue;
    const Key k = keys[i];
    size_t j = i;
    while (j > 0 && k < keys[j - 1] && budget > 0) {
      keys[j] = keys[j - 1];
      --j;
      --budget;
    }
    keys[j] = k;
    if (budget == 0) {
      std::sort(keys.begin(), keys.end());
      return;
    }
  }
}

uint8_t class_of(const EventStore& store, uint32_t i, const std::vector<uint8_t>* in_collective) {
  return store.activities[i].kind != ActivityKind::kKernel ? 2 : (is_communication_work(store, i, in_collective) ? 1 : 0);
}

// Appends [start, end) to a union being built from intervals fed in start
// order (what union_of() computes from the same list, without keeping it).
void add_sorted(IntervalList& u, int64_t start_ns, int64_t end_ns) {
  if (end_ns <= start_ns) return;
  if (!u.empty() && start_ns <= u.back().end_ns) {
    u.back().end_ns = std::max(u.back().end_ns, end_ns);
  } else {
    u.push_back({start_ns, end_ns});
  }
}

// One device's timeline, fed its activities in (start_ns, index) order.
struct Builder {
  DeviceTimeline tl;
  IntervalList memory;
  size_t expected = 0;
  int64_t last_start = std::numeric_limits<int64_t>::min();
  bool sorted = true;
  void add(int64_t start_ns, int64_t end_ns, uint32_t index, uint8_t cls) {
    tl.by_start.push_back(index);
    tl.max_duration_ns = std::max(tl.max_duration_ns, end_ns - start_ns);
    add_sorted(cls == 2 ? memory : cls == 1 ? tl.communication : tl.compute, start_ns, end_ns);
  }
};

}  // namespace

std::vector<DeviceTimeline> build_device_timelines(const EventStore& store, const std::vector<uint8_t>* in_collective) {
  std::map<int32_t, Builder> per_device;
  const auto& acts = store.activities;
  {
    // Count per device to reserve once, and note whether each device's work
    // is already in start order (the usual case: then no sort and no copy).
    // Device ids are small in practice, so a flat array with a map for the
    // rest avoids a tree lookup per event.
    constexpr int32_t kFlat = 64;
    size_t flat[kFlat] = {};
    int64_t flat_last[kFlat];
    bool flat_sorted[kFlat];
    for (int32_t d = 0; d < kFlat; ++d) {
      flat_last[d] = std::numeric_limits<int64_t>::min();
      flat_sorted[d] = true;
    }
    for (const auto& a : acts) {
      // A device with only malformed work still gets an (empty) timeline.
      const bool valid = a.end_ns >= a.start_ns;
      if (a.device >= 0 && a.device < kFlat) {
        ++flat[a.device];
        if (!valid) continue;
        if (a.start_ns < flat_last[a.device]) flat_sorted[a.device] = false;
        flat_last[a.device] = a.start_ns;
      } else {
        Builder& b = per_device[a.device];
        ++b.expected;
        if (!valid) continue;
        if (a.start_ns < b.last_start) b.sorted = false;
        b.last_start = a.start_ns;
      }
    }
    for (int32_t d = 0; d < kFlat; ++d) {
      if (flat[d] == 0) continue;
      Builder& b = per_device[d];
      b.expected = flat[d];
      b.sorted = flat_sorted[d];
    }
    for (auto& [device, b] : per_device) {
      b.tl.device = device;
      b.tl.by_start.reserve(b.expected);
    }
  }
  Builder* bucket = nullptr;
  int32_t bucket_device = 0;
  bool any_unsorted = false;
  for (uint32_t i = 0; i < acts.size(); ++i) {
    const auto& a = acts[i];
    if (a.end_ns < a.start_ns) continue;  // producers drop these; stay safe
    if (!bucket || a.device != bucket_device) {
      bucket_device = a.device;
      bucket = &per_device.find(bucket_device)->second;
    }
    if (bucket->sorted) {
      bucket->add(a.start_ns, a.end_ns, i, class_of(store, i, in_collective));
    } else {
      any_unsorted = true;
    }
  }
  if (any_unsorted) {
    for (auto& [device, b] : per_device) {
      if (b.sorted) continue;
      std::vector<Key> keys;
      keys.reserve(b.expected);
      for (uint32_t i = 0; i < acts.size(); ++i) {
        const auto& a = acts[i];
        if (a.device == device && a.end_ns >= a.start_ns) keys.push_back({a.start_ns, a.end_ns, i, class_of(store, i, in_collective)});
      }
      sort_nearly_sorted(keys);
      for (const Key& k : keys) b.add(k.start_ns, k.end_ns, k.index, k.cls);
    }
  }
  std::vector<DeviceTimeline> out;
  out.reserve(per_device.size());
  for (auto& [device, b] : per_device) {
    DeviceTimeline& tl = b.tl;
    tl.comm_only = difference(tl.communication, tl.compute);
    const IntervalList kernels = union_of(tl.compute, tl.comm_only);
    tl.memory_only = difference(b.memory, kernels);
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
