// The session clock: one clock for every live event.
//
// CLOCK_MONOTONIC nanoseconds: immune to NTP steps, shared by every thread
// of the process. Collectors whose source has another clock (CUPTI) either
// make the source use this one (CUPTI timestamp callback) or convert at the
// edge; docs/clock.md says which collector does what.
#pragma once

#include <time.h>

#include <cstdint>

namespace gpuutil {

inline int64_t session_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace gpuutil
