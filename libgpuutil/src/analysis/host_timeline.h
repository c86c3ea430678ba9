// Per-host-thread view of what the host was doing, for idle attribution.
//
// Internal to the analysis core. For each thread, sorted disjoint interval
// lists, each interval carrying the name of its outermost contributor:
//   ops         outermost framework ops that are units, not regions
//               (culprit.h: a compiled graph's wrapper is left out, the
//               ops inside it are the outermost there); launch windows
//               start here
//   regions     the region ops left out of `ops`
//   active      every range of the thread, steps and phases included: the
//               thread was inside something recorded (outside it, it
//               recorded nothing: an idle worker thread)
//   calls       every CUDA API call of the thread (with `active`: when the
//               thread next recorded anything)
//   dataloader  input-pipeline waits
//   collective  host-side collectives
//   sync        host blocked on the device: host-sync ops (aten::item) and
//               synchronize / blocking-copy API calls, named by the
//               outermost op that issued them
// and, to name plain host time, the innermost range covering each instant:
//   leaf        innermost op or range that is not a coarse phase
//               (is_phase_range) and has a name
//   named       innermost of those and Python frames (Kineto
//               python_function): a frame under a coarse annotation names
//               the time, an op under a frame does; empty when the thread
//               has no Python frames (then `leaf` names the time)
//   phases      innermost coarse phase ("## forward ##"), context only
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analysis/correlation_index.h"
#include "gpuutil/events.h"

namespace gpuutil {

struct NamedInterval {
  int64_t start_ns;
  int64_t end_ns;
  NameId name;
};
using NamedIntervalList = std::vector<NamedInterval>;

// Index of the interval containing t (start <= t < end), or -1.
long find_containing(const NamedIntervalList& list, int64_t t_ns);
// Index of the first interval with end_ns > t_ns.
size_t first_ending_after(const NamedIntervalList& list, int64_t t_ns);


struct HostThreadTimeline {
  bool has_events = false;
  NamedIntervalList ops;
  NamedIntervalList dataloader;
  NamedIntervalList collective;
  NamedIntervalList sync;
  NamedIntervalList leaf;
  NamedIntervalList named;
  NamedIntervalList phases;
  NamedIntervalList regions;
  NamedIntervalList active;
  NamedIntervalList calls;
  // The list that names plain host time: `named`, else `leaf`.
  const NamedIntervalList& naming() const { return named.empty() ? leaf : named; }
};

struct HostTimelines {
  std::vector<HostThreadTimeline> threads;  // indexed like EventStore::threads
  // For each store activity, the index of the host call that launched it
  // (matched by correlation id), or kNoLaunch.
  std::vector<uint32_t> launch_of;
  // For each store activity, 1 when it is a kernel launched by a call made
  // inside a host collective range of its thread (c10d::*, nccl:*,
  // record_param_comms): communication by where it was launched, whatever
  // its name (a custom all-to-all behind torch's API). Empty when none is.
  std::vector<uint8_t> in_collective;
  // device id -> the thread that launched most of its work (-1 if unknown)
  std::unordered_map<int32_t, int64_t> main_thread_by_device;
};

HostTimelines build_host_timelines(const EventStore& store);

}  // namespace gpuutil
