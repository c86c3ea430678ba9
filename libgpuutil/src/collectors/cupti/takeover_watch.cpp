// Takeover detection from flush results, the clock probe and buffer traffic
// (see takeover_watch.h).
#include "collectors/cupti/takeover_watch.h"

#include <algorithm>
#include <cstdlib>

namespace gpuutil::cupti {

void TakeoverWatch::attached(int64_t now_ns, int64_t clock_skew_ns) {
  attached_ns_ = now_ns;
  clock_probe_usable_ = clock_skew_ns != INT64_MIN && std::llabs(clock_skew_ns) <= kClockMatchNs;
  clock_baseline_ns_ = clock_probe_usable_ ? clock_skew_ns : 0;
  last_progress_ns_ = now_ns;
  quiet_observations_ = 0;
  cause_ = TakeoverCause::kNone;
  since_ns_ = taken_at_ns_ = INT64_MIN;
  outstanding_at_take_ = 0;
  skew_at_take_ns_ = 0;
  pending_owed_ = 0;
  pending_since_ns_ = INT64_MAX;
  pending_at_ns_ = INT64_MIN;
}

TakeoverWatch::Change TakeoverWatch::observe(const TakeoverObservation& o) {
  if (taken()) {
    // Only silence can end: gpuutil's buffers flow again (a false alarm,
    // e.g. a long kernel with the host blocked). Gone callbacks and another
    // clock stay until gpuutil attaches again.
    if ((cause_ == TakeoverCause::kBuffersSilent || cause_ == TakeoverCause::kRecordsElsewhere) &&
        o.last_buffer_event_ns > taken_at_ns_) {
      cause_ = TakeoverCause::kNone;
      since_ns_ = taken_at_ns_ = INT64_MIN;
      last_progress_ns_ = o.last_buffer_event_ns;
      quiet_observations_ = 0;
      return Change::kBack;
    }
    return Change::kNone;
  }
  const int64_t progress = std::max(attached_ns_, o.last_buffer_event_ns);
  if (progress > last_progress_ns_) {
    last_progress_ns_ = progress;
    quiet_observations_ = 0;
    } else {
    if (quiet_observations_++ == 0) quiet_first_ns_ = o.now_ns;
  }
  // Launches a sync finished whose records never came: owed to gpuutil
  // unless a buffer came back (or was asked for) since the earliest of them.
  if (o.owed_records > 0) {
    if (pending_owed_ == 0) pending_at_ns_ = o.now_ns;
    pending_owed_ += o.owed_records;
    pending_since_ns_ = std::min(pending_since_ns_, o.owed_since_ns);
  }
  if (pending_owed_ != 0 && o.last_buffer_event_ns >= pending_since_ns_) {
    pending_owed_ = 0;
    pending_since_ns_ = INT64_MAX;
  }
  const bool records_elsewhere =
      pending_owed_ != 0 &&
      (o.buffers_outstanding == 0 || (o.now_ns - pending_at_ns_ >= kPresumedConfirmNs && !o.device_work_waiting));
  // Evidence of another client's buffer callbacks: the application made
  // calls whose API records fill every buffer gpuutil handed out and one
  // more (per-thread buffers: each thread's calls fill only its own), and
  // none was asked of gpuutil.
  const uint64_t fill = (std::max<uint64_t>(o.buffers_outstanding, 1) + 1) * std::max<uint64_t>(o.calls_per_buffer, 1);
  const bool calls_filled_buffers = o.calls_since_buffer_event >= fill;
  TakeoverCause seen = TakeoverCause::kNone;
  if (o.callbacks_missing) {
    seen = TakeoverCause::kCallbacksGone;
  } else if (clock_probe_usable_ && o.clock_skew_ns != INT64_MIN &&
             std::llabs(o.clock_skew_ns - clock_baseline_ns_) > kClockJumpNs) {
    seen = TakeoverCause::kClockReplaced;
  } else if (records_elsewhere) {
    seen = TakeoverCause::kRecordsElsewhere;
  } else if (calls_filled_buffers && quiet_observations_ >= kMinQuietObservations &&
             o.now_ns - last_progress_ns_ >= quiet_ns_ &&
             o.now_ns - quiet_first_ns_ >= quiet_ns_ / 2) {
    seen = TakeoverCause::kBuffersSilent;
  }
  if (seen == TakeoverCause::kNone) return Change::kNone;
  cause_ = seen;
  since_ns_ = last_progress_ns_;
  owed_at_take_ = pending_owed_;
  pending_owed_ = 0;
  pending_since_ns_ = INT64_MAX;
  taken_at_ns_ = o.now_ns;
  outstanding_at_take_ = o.buffers_outstanding;
  calls_at_take_ = o.calls_since_buffer_event;
  skew_at_take_ns_ = o.clock_skew_ns == INT64_MIN ? 0 : o.clock_skew_ns - clock_baseline_ns_;
  return Change::kTaken;
}

std::string TakeoverWatch::why() const {
  switch (cause_) {
    case TakeoverCause::kCallbacksGone:
      return "a flush found no activity-buffer callbacks registered: another CUPTI client called cuptiFinalize "
             "(Kineto does after a trace with TEARDOWN_CUPTI=1), dropping gpuutil's kinds, callbacks and held buffers";
    case TakeoverCause::kClockReplaced:
      return "cuptiGetTimestamp moved " + std::to_string(skew_at_take_ns_ / 1'000'000) +
             " ms off gpuutil's clock: another CUPTI client registered its own timestamp callback (Kineto does when "
             "it starts a trace: on-demand through dynolog with KINETO_USE_DAEMON, or torch.profiler started on "
             "another thread) and took gpuutil's buffer callbacks";
    case TakeoverCause::kBuffersSilent:
      return "no activity buffer was requested from or completed to gpuutil for " +
             std::to_string(quiet_ns_ / 1'000'000) + " ms while " + std::to_string(outstanding_at_take_) +
             " were outstanding, " + std::to_string(calls_at_take_) +
             " API calls were made (more API records than the buffers held and one more take) and it kept flushing: another CUPTI "
             "client registered its own buffer callbacks (Kineto on-demand tracing through dynolog with "
             "KINETO_USE_DAEMON, torch.profiler started on another thread)";
    case TakeoverCause::kRecordsElsewhere:
      return std::to_string(owed_at_take_) +
             " launches finished by a device synchronisation delivered no record to gpuutil at the flush after it, "
             "and no activity buffer came back to gpuutil or was requested from it: another CUPTI client registered "
             "its own buffer callbacks or disabled gpuutil's activity kinds (Kineto on-demand tracing through dynolog with "
             "KINETO_USE_DAEMON, torch.profiler started on another thread)";
    case TakeoverCause::kNone:
      break;
  }
  return "";
}

}  // namespace gpuutil::cupti
