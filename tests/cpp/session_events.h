// Event builders for tests that feed a live Session by hand: a host range
// named and classified the way collectors do it, and a plain kernel.
#pragma once

#include <cstdint>

#include "gpuutil/range_classify.h"
#include "gpuutil/session.h"

namespace gpuutil::testing {

inline HostRange range(Session& s, const char* name, int64_t a, int64_t b, uint32_t thread, bool op = true) {
  HostRange r;
  r.name = s.intern(name);
  r.start_ns = a;
  r.end_ns = b;
  r.thread = thread;
  r.category = classify_range(name, op);
  return r;
}

inline DeviceActivity kernel(Session& s, int64_t a, int64_t b) {
  DeviceActivity k;
  k.name = s.intern("gemm");
  k.start_ns = a;
  k.end_ns = b;
  return k;
}

}  // namespace gpuutil::testing
