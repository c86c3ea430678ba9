// NVTX push/pop cost on the application thread with gpuutil's injection
// active (libgpuutil_nvtx.so via NVTX_INJECTION64_PATH, recording on, the
// collector draining), plus the cost of the two timestamp sources and of
// draining one range into the session. Target: <= 50 ns per pair.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"
#include "nvtx3/nvToolsExt.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace {
const bool kInjected = [] {
  setenv("NVTX_INJECTION64_PATH", GPUUTIL_NVTX_LIBRARY, 1);
  return true;
}();

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

int main() {
  using namespace gpuutil;
  (void)kInjected;
  constexpr int kBurst = 2000;  // pairs per burst: 4000 entries, half a ring
  constexpr int kBursts = 5000;  // 10M pairs
  Session session(SessionOptions{});
  LiveOptions o;
  o.gpu = false;
  LiveCollector live(session, o);
  live.start();
  if (!live.nvtx_off().empty()) {
    std::printf("NVTX collection off: %s\n", live.nvtx_off().c_str());
    return 1;
  }
  double pushpop_s = 0, drain_s = 0;
  for (int b = 0; b < kBursts; ++b) {
    const double t0 = now_s();
    for (int i = 0; i < kBurst; ++i) {
      nvtxRangePushA("aten::addmm");
      nvtxRangePop();
    }
    const double t1 = now_s();
    pushpop_s += t1 - t0;
    live.flush();  // drain between bursts so the ring never overflows (not timed above)
    drain_s += now_s() - t1;
    if (b % 64 == 0) {
      session.begin_step(b, session_now_ns());
      session.end_step(session_now_ns());
      session.mark_complete_until(session_now_ns());
      session.collect();
    }
  }
  live.stop();
  const double pairs = double(kBurst) * kBursts;
  // Timestamp sources alone.
  constexpr int kN = 10'000'000;
  volatile uint64_t sink = 0;
  double t0 = now_s();
  for (int i = 0; i < kN; ++i) sink = sink + static_cast<uint64_t>(session_now_ns());
  const double cg_ns = (now_s() - t0) * 1e9 / kN;
  double tsc_ns = -1;
#if defined(__x86_64__)
  t0 = now_s();
  for (int i = 0; i < kN; ++i) sink = sink + __rdtsc();
  tsc_ns = (now_s() - t0) * 1e9 / kN;
#endif
  std::printf("| benchmark | value | target |\n|---|---|---|\n");
  std::printf("| NVTX push+pop pair, injection active | %.1f ns | <= 50 ns |\n", pushpop_s * 1e9 / pairs);
  std::printf("| drain, per range into the session | %.1f ns | - |\n", drain_s * 1e9 / pairs);
  std::printf("| clock_gettime(CLOCK_MONOTONIC) | %.1f ns | - |\n", cg_ns);
  std::printf("| rdtsc | %.1f ns | - |\n", tsc_ns);
  const LiveCounters c = live.counters();
  std::printf("\nranges stored %llu of %.0f pairs\n", static_cast<unsigned long long>(c.nvtx_ranges), pairs);
  return c.nvtx_ranges == static_cast<uint64_t>(pairs) ? 0 : 1;
}
