// Checks on one device's step report for the idle-cause tests: a cause's
// idle time, a culprit's time, the top culprit, and the accounting
// identities every step must hold.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "gpuutil/report.h"

namespace gpuutil::test {

inline int64_t idle(const DeviceStepReport& d, IdleCause c) { return d.breakdown.idle_ns[static_cast<size_t>(c)]; }

// The idle time of `cause` credited to `name` (0 when it is not among the culprits).
inline int64_t culprit_ns(const DeviceStepReport& d, IdleCause c, const std::string& name) {
  for (const auto& t : d.culprits[static_cast<size_t>(c)]) {
    if (t.name == name) return t.ns;
  }
  return 0;
}

inline std::string top_culprit(const DeviceStepReport& d, IdleCause c) {
  const auto& v = d.culprits[static_cast<size_t>(c)];
  return v.empty() ? "" : v.front().name;
}

inline void expect_identities(const DeviceStepReport& d) {
  EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);
  EXPECT_EQ(d.breakdown.busy_ns(), d.busy_ns);
  for (auto v : d.breakdown.idle_ns) EXPECT_GE(v, 0);
}

}  // namespace gpuutil::test
