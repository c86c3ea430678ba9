// Helpers of the live-path tests against the fake CUPTI
// (test_cupti_faithful.cpp, test_cupti_promises.cpp): a small buffer pool,
// planted launches at session times, and collecting step reports as the
// Python profile does at step boundaries.
#pragma once

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fake_cupti_client.h"
#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"
#include "gpuutil/session.h"

namespace gpuutil::testing {

inline constexpr int64_t kMs = 1'000'000;

// LiveOptions with a small buffer pool and no NVTX.
inline LiveOptions pool() {
  LiveOptions o;
  o.nvtx = false;
  o.cupti_buffer_count = 8;
  o.cupti_buffer_bytes = 256 << 10;
  return o;
}

inline void sleep_until(int64_t t_ns) {
  for (int64_t now = session_now_ns(); now < t_ns; now = session_now_ns()) {
    timespec ts{0, static_cast<long>(std::min<int64_t>(t_ns - now, 2 * kMs))};
    nanosleep(&ts, nullptr);
  }
}

// One kernel launch at explicit session times: API [t, t + 5 us), kernel
// [start, end) on `stream`; through the cell's launch call (CUDA 13's
// __cudaLaunchKernel by default, cudaLaunchKernel under launch=runtime)
// unless `cbid` names one.
inline uint32_t launch_at(FakeCupti& fake, const char* name, uint32_t stream, int64_t t, int64_t start, int64_t end,
                          uint32_t cbid = 0, uint32_t graph_id = 0) {
  if (cbid == 0) cbid = fake.launch_cbid(0);
  return fake.call_at(cbid, FAKE_CUPTI_KERNEL, name, stream, t, start, end, graph_id);
}

// Reports whatever is complete now.
inline std::vector<StepOutput> collect(Session& s, LiveCollector& live) {
  s.mark_complete_until(live.step_boundary(session_now_ns()));
  return s.collect();
}

// Collects until `n` reports came out or `ms` passed.
inline std::vector<StepOutput> collect_for(Session& s, LiveCollector& live, size_t n, int ms) {
  std::vector<StepOutput> out;
  for (int i = 0; i < ms / 2 && out.size() < n; ++i) {
    usleep(2'000);
    for (auto& o : collect(s, live)) out.push_back(std::move(o));
  }
  return out;
}

inline uint64_t count(const std::vector<StepOutput>& out, Diag d) {
  uint64_t n = 0;
  for (const auto& o : out) n += o.report.diagnostics.count(d);
  return n;
}

}  // namespace gpuutil::testing
