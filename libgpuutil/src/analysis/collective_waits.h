// Where a training thread waits for the collectives it issued during
// backward, for the host breakdown (host_breakdown.h).
//
// DDP's reducer issues one all-reduce per gradient bucket from the backward
// hooks; with gloo each runs on one of the process group's worker threads
// ("gloo:all_reduce" ranges, several at once), and the training thread,
// once it has no gradient left to compute, blocks in the reducer until they
// complete. Nothing is recorded on the training thread for that wait, so it
// would read as `backward`. A wait stretch is, inside one outermost backward
// range of the thread: the time from the thread's last collective issue
// onwards during which a gloo collective that started inside that backward
// range runs on another thread. The last issue is the end of the thread's
// last enqueue range there ("c10d::*", "record_param_comms", "nccl:*":
// detail-tier steps and traces), else the latest start of those
// collectives that did not queue behind another (a worker takes a queued
// collective the moment it finishes the previous one, so its start says
// nothing about when it was issued).
//
// Internal to the analysis core; pure.
#pragma once

#include <cstdint>
#include <vector>

#include "gpuutil/events.h"

namespace gpuutil {

struct CollectiveWait {
  uint32_t thread;  // the waiting thread (index into EventStore::threads)
  int64_t start_ns;
  int64_t end_ns;
  NameId name;  // the collective waited for ("gloo:all_reduce")
};

// A worker that starts a collective this soon after finishing another one
// took it from its queue (it was issued earlier).
inline constexpr int64_t kQueuedCollectiveGapNs = 200'000;

// Every wait stretch of the store, by thread then start. Stretches of one
// thread may overlap (one per collective in flight); the host breakdown
// counts overlapping time once.
std::vector<CollectiveWait> collective_waits(const EventStore& store);

}  // namespace gpuutil
