// Trace replay through the live path: a digital twin of a recorded GPU run.
//
// A Kineto trace recorded on a real GPU is played back in real time through
// exactly the entry points a live training job uses:
//  - one real thread per trace thread makes the trace's runtime and driver
//    API calls at their recorded host times, into the faithful fake CUPTI
//    (tests/fake_cupti), which emits their API records with that thread's
//    pthread_self() and the calls' kernels, copies and memsets as device
//    records that are complete only once their recorded device end has
//    passed (so buffers are withheld, flushed, drained as they would be);
//  - the same threads record the trace's host ranges (ProfilerStep,
//    DataLoader, aten ops, .item(), optimizer, NCCL) through the LibTorch
//    hook's ring (hook_ring.h), drained by the same HookDrain the PyTorch
//    collector uses;
//  - the recorded steps are marked through gpuutil::Profiler at their
//    recorded times, and reports come out of the live Session when the
//    collector says their data is complete.
// Times are shifted onto the session clock (a constant offset), and divided
// by `time_scale` when a trace is long (the offline analysis it is compared
// with gets the same times). A step boundary waits until every replay thread
// has made the calls recorded before it, as a live host would have.
//
// compare() puts each step's per-device breakdown_ns from the replay next to
// `gpuutil analyze` of the same (scaled) trace.
//
// Contract: one replay at a time per process (CUPTI is process-wide); the
// fake CUPTI must be loadable (GPUUTIL_FAKE_CUPTI).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpuutil/events.h"
#include "gpuutil/report.h"
#include "gpuutil/session.h"

namespace gpuutil::replay {

struct ReplayOptions {
  int64_t time_scale = 1;       // trace times are divided by this (long traces)
  int device_records = 0;       // FAKE_CUPTI_DEVICE_RECORDS_IN_THREAD_BUFFER or _IN_DEVICE_BUFFER
  int64_t lead_ns = 50'000'000;  // the first event plays this long after the replay starts
  bool progress = false;         // one line per step on stderr
};

struct ReplayStats {
  int threads = 0;             // replay threads (trace threads with host events)
  uint64_t api_calls = 0;      // calls made into the fake
  uint64_t api_unknown = 0;    // trace API names the CUDA headers do not know (not replayed)
  uint64_t device_only = 0;    // device work with no launching call in the trace
  uint64_t ranges = 0;         // host ranges recorded through the hook ring
  int64_t max_lateness_ns = 0;  // worst real-time lag of a replay thread behind its recorded time
  double wall_s = 0;
};

struct ReplayResult {
  std::string error;               // "" when the replay ran
  std::vector<StepOutput> steps;   // the live per-step reports, in order
  ReplayStats stats;
};

// Trace times divided by `time_scale` (every event; the same store shape).
EventStore scaled(const EventStore& store, int64_t time_scale);

// Plays `store` (a trace with steps) through the live path.
ReplayResult replay(const EventStore& store, const ReplayOptions& options);

// Differences between the replay and the offline analysis, per step and
// device: the largest |live - offline| of each breakdown bucket.
struct BucketDiff {
  std::string bucket;
  int64_t max_abs_ns = 0;
  int64_t step = -1;  // where the largest difference is
  int32_t device = -1;
};
struct Comparison {
  std::vector<BucketDiff> buckets;  // compute, communication, memory, idle_* (report order)
  std::vector<std::string> problems;  // steps or devices one side lacks
  int64_t steps = 0;
  int64_t max_abs_ns() const;
};
Comparison compare(const Report& offline, const std::vector<StepOutput>& live);

}  // namespace gpuutil::replay
