// Activity-record timestamps, on whatever clock CUPTI stamps them with, onto
// the session clock.
//
// gpuutil registers its session clock as CUPTI's timestamp callback once
// per process, before it first enables an activity kind, and never again
// (cupti_activity.h: register it before enabling any kind; each later
// registration leaves kernel records stamped on the wrong clock at the
// head of later activity sessions, pytorch/pytorch#192021). Another client
// may register its own afterwards (Kineto registers its TSC clock, raw
// rdtsc ticks, at every trace start), and then CUPTI's records are on that
// clock for the rest of the process. So the collector probes CUPTI's clock
// (cuptiGetTimestamp, bracketed by two session-clock reads) at attach and
// at each drain, and the map turns record times into session times:
//  - identity when the probe reads the session clock (within kIdentityNs):
//    exact, the common case (nobody else registered a clock);
//  - otherwise an affine map fitted between the first probe after the
//    clock was found changed and the latest one (its slope learns the unit:
//    ticks or ns).
// A record stamped before a change and delivered after it lands far from
// its launch; the decoder counts and drops such records
// (cupti_clock_mismatch).
//
// Pure: no clock reads, no CUPTI calls; the caller probes. Contract: used by
// one thread (the collector's drain thread).
#pragma once

#include <cstdint>
#include <cstdlib>

namespace gpuutil::cupti {

class ClockMap {
 public:
  // A probe within this of the session clock means the session clock is CUPTI's.
  static constexpr int64_t kIdentityNs = 100'000;
  // Probes this far apart (session clock) refit the slope.
  static constexpr int64_t kRefitNs = 10'000'000;

  // CUPTI's clock read `cupti` between session reads before_ns and after_ns.
  void observe(uint64_t cupti, int64_t before_ns, int64_t after_ns) {
    if (cupti == 0 || after_ns < before_ns) return;
    const int64_t mid = before_ns + (after_ns - before_ns) / 2;
    const int64_t skew = static_cast<int64_t>(cupti) - mid;
    if (!known_) {
      known_ = true;
      identity_ = std::llabs(skew) <= kIdentityNs;
      anchor_cupti_ = cupti;
      anchor_ns_ = mid;
      slope_ = 1.0;
      return;
    }
    if (identity_) {
      // Still the session clock? A jump means another client registered its own.
      if (std::llabs(skew) > kIdentityNs) changed_ = true;
      return;
    }
    if (mid - anchor_ns_ >= kRefitNs && cupti > anchor_cupti_) {
      slope_ = double(mid - anchor_ns_) / double(cupti - anchor_cupti_);
    }
  }
  // Forget what was learnt: the next probe starts a new fit.
  void reset() { *this = ClockMap{}; }
  bool known() const { return known_; }
  bool identity() const { return !known_ || identity_; }
  // The probe left the session clock after it had matched it.
  bool changed() const { return changed_; }
  int64_t to_session(uint64_t cupti) const {
    if (identity()) return static_cast<int64_t>(cupti);
    const double d = cupti >= anchor_cupti_ ? double(cupti - anchor_cupti_) : -double(anchor_cupti_ - cupti);
    return anchor_ns_ + static_cast<int64_t>(d * slope_);
  }

 private:
  bool known_ = false;
  bool identity_ = true;
  bool changed_ = false;
  uint64_t anchor_cupti_ = 0;
  int64_t anchor_ns_ = 0;
  double slope_ = 1.0;
};

}  // namespace gpuutil::cupti
