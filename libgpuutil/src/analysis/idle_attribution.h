// Splits the idle time of one device inside one window into causes.
//
// Internal to the analysis core; the rules are documented with timelines in
// docs/accounting.md. For each maximal idle gap [a, b) of the device:
//   1. The work that ends the gap (the activities starting at b; of ties,
//      the one whose enqueuing call returned last) is looked up by
//      correlation id.
//   2. Queued before the gap (its call returned by a): a gap under 20 us is
//      `kernel_gap` (the device's turnaround between back-to-back work).
//      Otherwise, until the device could have picked it up (call start +
//      the window's submission floor) it is `launch`; after that the GPU
//      waited on a dependency: whatever a host thread was blocked in
//      explains it (sync or blocking copy: `host_sync`; collective:
//      `collective`) unless the host was still in it when the work started
//      (it waited on the GPU: a consequence), else `dependency`.
//   3. Launched late: the part after the launching op began (the outermost
//      op around the call, else the call) is `launch`, or `host_sync` from
//      the call on when the call itself blocks (pageable copy), up to when
//      the device could have picked the work up (the call's end, at least
//      its start + the submission floor); work that started 20 us or more
//      after that waited on the device: that stretch is explained as in 2
//      (sync, collective, else `dependency`). When the op
//      worked >= 0.5 ms longer before its call than the window's median
//      dispatch (a first-use GEMM, an allocator stall), only that median is
//      `launch`: the rest is the op's host work (rule 4).
//   4. The rest is explained by the launching thread's state (the window's
//      main launching thread when there is no match), interval by interval,
//      by priority: dataloader > collective > host_sync (only while the
//      blocking call runs; a sync still running when gap-ending work with
//      no launch record started is `dependency`) > `host`, named by the
//      innermost non-phase range, else Python frame, else the thread. Where
//      the thread recorded nothing, another thread in something explains
//      the time (launchers first, then every thread), else the thread that
//      recorded something first afterwards. A gap under 20 us ended by work
//      with no launch record is `kernel_gap`.
//   5. With no host events for the thread, the time is `unattributed`.
// Culprits are accumulated per cause by CulpritKey (culprit.h).
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analysis/culprit.h"
#include "analysis/device_timeline.h"
#include "analysis/host_timeline.h"
#include "gpuutil/events.h"
#include "gpuutil/report.h"

namespace gpuutil {

struct CulpritTally {
  int64_t ns = 0;
  uint64_t count = 0;
};

// One attributed piece of an idle gap: [start_ns, end_ns) credited to cause.
struct IdleSegment {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  IdleCause cause = IdleCause::kUnattributed;
  CulpritKey culprit = kNoHostCulprit;
};

struct IdleAccount {
  std::array<int64_t, kIdleCauseCount> idle_ns{};
  std::array<std::unordered_map<CulpritKey, CulpritTally>, kIdleCauseCount> culprits;
  // Optional output (timeline exporters): when set, every credited piece is
  // appended (pieces are disjoint; sort by start_ns for time order); the
  // totals above are unaffected.
  std::vector<IdleSegment>* segments = nullptr;
};

// Attributes every idle nanosecond of `device` inside [lo_ns, hi_ns).
// `fallback_thread` (or -1) explains gaps with no correlated next launch
// when the device has no main launching thread.
void attribute_idle(const EventStore& store, const DeviceTimeline& device, const HostTimelines& host,
                    int64_t fallback_thread, int64_t lo_ns, int64_t hi_ns, IdleAccount& out);

}  // namespace gpuutil
