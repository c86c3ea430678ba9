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
// The fake CUPTI runs under one cell of its matrix (options.cell,
// tests/fake_cupti/fake_cupti_matrix.h): how a default flush seals buffers,
// where records go, when API records are written, timestamp skew, held
// empty buffers. With a skew, the device records the live path gets are
// earlier than the trace's; the offline side analyses skewed(store, skew),
// the same records, so equality is no longer given by construction: it
// holds only if the live path reports each step once all of its data is
// in, whatever the cell.
//
// compare() puts each step's per-device figures from the replay next to
// `gpuutil analyze` of the same (scaled, skewed) trace: breakdown buckets,
// idle culprits, launch latency, kernel/copy/memset counts, and the run's
// findings (run_findings() over the live reports and over the offline
// report alike).
//
// Contract: one replay at a time per process (CUPTI is process-wide); the
// fake CUPTI must be loadable (GPUUTIL_FAKE_CUPTI).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fake_cupti.h"
#include "gpuutil/events.h"
#include "gpuutil/report.h"
#include "gpuutil/session.h"

namespace gpuutil::replay {

struct ReplayOptions {
  int64_t time_scale = 1;       // trace times are divided by this (long traces)
  fake_cupti_matrix cell{};     // the fake CUPTI's matrix cell (all defaults: the fake as it always was)
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
// Device activity times moved skew_ns earlier (what the live path gets from
// the fake under a cell with that skew); everything else unchanged (a copy).
EventStore skewed(const EventStore& store, int64_t skew_ns);

// Plays `store` (a trace with steps) through the live path.
ReplayResult replay(const EventStore& store, const ReplayOptions& options);

// True when some live step report holds no CUPTI data at all (no API call,
// no device activity) while the offline analysis of that step has device
// work: the signature of a step reported before its records arrived.
bool no_cupti_data_in_a_step(const std::vector<StepOutput>& live, const Report& offline);

// Differences between the replay and the offline analysis, per step and
// device: the largest |live - offline| of each breakdown bucket, and every
// step/device whose culprits, launch latency or counts differ, and the
// run's findings.
struct BucketDiff {
  std::string bucket;
  int64_t max_abs_ns = 0;
  int64_t step = -1;  // where the largest difference is
  int32_t device = -1;
};
struct Comparison {
  std::vector<BucketDiff> buckets;  // compute, communication, memory, idle_* (report order)
  std::vector<std::string> problems;  // steps or devices one side lacks
  // What differs besides buckets, by what: "culprits", "culprit_names"
  // (culprits equal but for CUPTI's version suffix on API names, "_v3020"),
  // "launch_latency", "counts", "findings"; the number of step/device pairs
  // (findings: 1 when the lists differ) and the first few, described.
  std::map<std::string, uint64_t> differing;
  std::vector<std::string> differences;
  int64_t steps = 0;
  int64_t max_abs_ns() const;
  bool equal() const { return max_abs_ns() == 0 && problems.empty() && differences.empty(); }
};
Comparison compare(const Report& offline, const std::vector<StepOutput>& live);

}  // namespace gpuutil::replay
