// Whether another CUPTI client took CUPTI from gpuutil without telling it,
// judged only from what gpuutil can see.
//
// CUPTI has one pair of activity-buffer callbacks, one timestamp callback
// and one set of enabled kinds per process. A client that starts behind
// gpuutil's back (Kineto's on-demand tracing through dynolog with
// KINETO_USE_DAEMON=1; torch.profiler started on another thread, which the
// thread-local torch._C._autograd._profiler_enabled() does not show)
// registers its own callbacks: gpuutil's outstanding buffers are completed
// to that client, every new buffer is requested from it, and at its stop it
// disables the kinds gpuutil enabled. Kineto also registers its own clock
// (its TSC clock, libkineto CuptiTimestamp.cpp). Kineto with
// TEARDOWN_CUPTI=1 calls cuptiFinalize after a trace, which forgets
// gpuutil's callbacks, kinds, clock and held buffers. Either way nothing
// reaches gpuutil again, and its steps would read as an idle GPU.
//
// The collector's drain thread tells the watch, after each flush it made
// while waiting for data (observe()):
//  - whether the flush found no buffer callbacks registered
//    (CUPTI_ERROR_INVALID_OPERATION / NOT_INITIALIZED): callbacks gone;
//  - cuptiGetTimestamp minus the session clock, when that probe matched the
//    session clock right after gpuutil registered its clock (attached()): a
//    jump of more than kClockJumpNs means another clock was registered;
//  - buffer traffic: for quiet_ns no buffer was requested from or
//    completed to gpuutil while it kept flushing (flushes spanning at least
//    half of it: the drain thread may not have flushed for a long idle
//    while), and in that time the application made enough API calls
//    (learnt at their exit through the callback API on gpuutil's
//    subscription, which another client's buffer callbacks do not replace)
//    after the last buffer event to fill every buffer gpuutil handed out and
//    one more with their API records ((outstanding + 1) x the most records a
//    buffer was handed out for: maxNumRecords, or as many API records as
//    fit): CUPTI must have asked some client for a buffer, and it was not
//    gpuutil. A GPU
//    stuck in one kernel with the host blocked in a sync (a collective
//    waiting for a late rank) makes no such calls: it is no evidence of
//    another client, and the collector names it stuck instead. A buffer
//    coming back ends the takeover (kBack);
//  - records owed and nowhere to be: launches whose work a device sync
//    finished, a default flush after that sync drained, yet no record of
//    theirs came, and no buffer was requested from or completed to gpuutil
//    since the earliest such launch, while gpuutil held no buffer at all
//    (seen at that flush), or, at a later flush (at least
//    kPresumedConfirmNs on, so a launch still inside its API call then is
//    learnt by now), still none came and no device work at all waits (a
//    default flush withholds only a buffer holding an unfinished record,
//    cupti_activity.h; a held empty prefetched buffer holds none). A
//    finished record in a buffer gpuutil handed out would have come back:
//    the buffers were requested from another client's callbacks, or another
//    client disabled the kinds. Seen within a few flushes of the sync,
//    whatever the clock; a buffer reaching gpuutil again ends it (kBack), as
//    for silence.
// The takeover starts at the last buffer gpuutil saw requested or
// completed (or its attach): records after that may have gone elsewhere.
//
// Pure: no CUPTI calls and no clock reads; the caller passes both in.
// Contract: used by one thread (the drain thread) between attached() calls
// made with the drain thread's knowledge (the collector's control path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpuutil::cupti {

enum class TakeoverCause {
  kNone,
  kCallbacksGone,   // a flush found no buffer callbacks registered (cuptiFinalize)
  kClockReplaced,   // cuptiGetTimestamp left the session clock (another client's clock, or CUPTI's again)
  kBuffersSilent,   // buffers outstanding, none requested or completed for quiet_ns while flushing
  kRecordsElsewhere,  // synchronised launches' records never came, and no buffer of gpuutil's could hold them
};

struct TakeoverObservation {
  int64_t now_ns = 0;                       // session clock
  int64_t last_buffer_event_ns = INT64_MIN; // latest request or completion through gpuutil's callbacks
  size_t buffers_outstanding = 0;           // gpuutil's buffers CUPTI holds (as far as gpuutil knows)
  uint64_t calls_since_buffer_event = 0;    // API calls made after last_buffer_event_ns, learnt at exit (0: no callback API)
  uint64_t calls_per_buffer = 1;            // the most records a held buffer takes before CUPTI asks for another
  bool callbacks_missing = false;           // the flush said no buffer callbacks are registered
  int64_t clock_skew_ns = INT64_MIN;        // cuptiGetTimestamp - session clock; INT64_MIN: not probed
  // Launches a device sync showed finished (overdue) with no device record
  // of their own at the drained flush after it (LaunchTracker::take_owed),
  // and the earliest start among them.
  uint64_t owed_records = 0;
  int64_t owed_since_ns = INT64_MAX;
  bool device_work_waiting = true;  // any launch, copy or memset waits for its records now
};

class TakeoverWatch {
 public:
  static constexpr int64_t kClockJumpNs = 1'000'000'000;
  // The probe is usable when it read the session clock within this at attach.
  static constexpr int64_t kClockMatchNs = 100'000'000;
  static constexpr int kMinQuietObservations = 2;  // flushes after the last buffer event, spanning quiet_ns / 2
  static constexpr int64_t kPresumedConfirmNs = 10'000'000;  // missing records with buffers held: looked at again after

  explicit TakeoverWatch(int64_t quiet_ns) : quiet_ns_(quiet_ns) {}

  // gpuutil registered its callbacks and clock at now_ns; clock_skew_ns is
  // cuptiGetTimestamp - session clock read right after (INT64_MIN: no
  // probe). Clears any takeover.
  void attached(int64_t now_ns, int64_t clock_skew_ns);

  enum class Change { kNone, kTaken, kBack };
  // One observation after a flush gpuutil made. kTaken once when a
  // takeover is first seen, kBack once when buffers reach gpuutil again
  // after a kBuffersSilent takeover.
  Change observe(const TakeoverObservation& o);

  bool taken() const { return cause_ != TakeoverCause::kNone; }
  // Owed records not seen yet wait for a later look.
  bool owed_pending() const { return pending_owed_ != 0; }
  TakeoverCause cause() const { return cause_; }
  // Where the takeover starts: the last buffer event or the attach before it.
  int64_t since_ns() const { return since_ns_; }
  // One line: what was seen and what it means.
  std::string why() const;
  int64_t quiet_ns() const { return quiet_ns_; }

 private:
  int64_t quiet_ns_;
  int64_t attached_ns_ = INT64_MIN;
  bool clock_probe_usable_ = false;
  int64_t clock_baseline_ns_ = 0;
  int64_t last_progress_ns_ = INT64_MIN;
  int quiet_observations_ = 0;
  int64_t quiet_first_ns_ = INT64_MIN;  // the first observation that found no buffer event
  TakeoverCause cause_ = TakeoverCause::kNone;
  int64_t since_ns_ = INT64_MIN;
  int64_t taken_at_ns_ = INT64_MIN;
  size_t outstanding_at_take_ = 0;
  uint64_t calls_at_take_ = 0;
  uint64_t owed_at_take_ = 0;
  uint64_t pending_owed_ = 0;          // owed records that never came
  int64_t pending_since_ns_ = INT64_MAX;  // the earliest of them
  int64_t pending_at_ns_ = INT64_MIN;     // the observation that first saw them
  int64_t skew_at_take_ns_ = 0;
};

}  // namespace gpuutil::cupti
