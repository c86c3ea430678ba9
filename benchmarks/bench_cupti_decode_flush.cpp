// What completeness costs on the launch path and per flush, on the fake
// CUPTI (tests/fake_cupti): the application thread's cost per launch with
// gpuutil's collector learning calls at API exit (the API callback at enter
// and exit, the learnt call pushed onto the ring) against the same
// collector learning them from API records (LiveOptions::cupti_api_callbacks),
// the cost of one default flush (cuptiActivityFlushAll(0)) with launches in
// flight, the drain thread's flush rate in a pipelined loop whose GPU
// trails the host (the adaptive back-off), and who zeroes activity buffers:
// CUPTI on the launching thread (ZEROED_OUT_ACTIVITY_BUFFER=0, CUPTI's
// default) or gpuutil's drain thread when a buffer comes back (=1,
// LiveOptions::cupti_zeroed_buffers). Every run traces the callback ids
// the headers classify (about 290 runtime and driver ids, printed). The
// subscriber callback's own cost per launch (enter + exit) is also timed
// alone, called directly as CUPTI would, without the fake's dispatch.
//
// The fake's own launch path (its lock, its buffers) is in every number; a
// real CUPTI's differ, and only a GPU can measure those (benchmarks/RESULTS.md).
//
// Needs the fake: GPUUTIL_CUPTI_LIBRARY=build/tests/cpp/libfake_cupti.so
// (without it, prints why and exits 0).
#include <cupti.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"
#include "gpuutil/session.h"

namespace {

using Launch = void (*)(const char*, uint32_t, int64_t, int64_t);
using Reset = void (*)(const void*);
using Flush = int (*)(uint32_t);
using Subscriber = int (*)(void**, void**);
using StreamHandle = void* (*)(uint32_t, uint32_t);

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void sleep_until(int64_t t_ns) {
  for (int64_t now = gpuutil::session_now_ns(); now < t_ns; now = gpuutil::session_now_ns()) {
    timespec ts{0, static_cast<long>(std::min<int64_t>(t_ns - now, 1'000'000))};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace

int main() {
  using namespace gpuutil;
  const char* path = std::getenv("GPUUTIL_CUPTI_LIBRARY");
  void* h = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : nullptr;
  auto launch = h ? reinterpret_cast<Launch>(dlsym(h, "fake_cupti_launch_kernel")) : nullptr;
  auto reset = h ? reinterpret_cast<Reset>(dlsym(h, "fake_cupti_reset")) : nullptr;
  auto flush = h ? reinterpret_cast<Flush>(dlsym(h, "cuptiActivityFlushAll")) : nullptr;
  if (!launch || !reset || !flush) {
    std::printf("skipped: set GPUUTIL_CUPTI_LIBRARY to the fake CUPTI (build/tests/cpp/libfake_cupti.so)\n");
    return 0;
  }
  constexpr int kLaunches = 20000;
  // Collector attached in both: with and without the API callback.
  LiveCounters last{};
  auto time_launches = [&](bool callbacks, bool zeroed) {
    reset(nullptr);
    Session session(SessionOptions{});
    LiveOptions o;
    o.nvtx = false;
    o.cupti_api_callbacks = callbacks;
    o.cupti_zeroed_buffers = zeroed;
    auto live = std::make_unique<LiveCollector>(session, o);
    if (!live->start().empty()) return -1.0;
    const int64_t t0 = session_now_ns();
    for (int i = 0; i < kLaunches; ++i) launch("gemm", 7, 1000, 1000);  // 1 us kernels
    const double ns = double(session_now_ns() - t0) / kLaunches;
    live->stop();
    last = live->counters();
    return ns;
  };
  std::vector<double> with, without, not_zeroed;
  uint64_t learnt = 0, ids = 0, buffers = 0;
  for (int r = 0; r < 5; ++r) {
    without.push_back(time_launches(false, true));
    not_zeroed.push_back(time_launches(true, false));
    with.push_back(time_launches(true, true));
    learnt = last.calls_learnt;
    ids = last.runtime_cbids + last.driver_cbids;
    buffers = last.buffers_completed;
  }
  // gpuutil's callback alone: a cudaLaunchKernel on a stream (parameters
  // read, a learnt call pushed), a CUDA 13 <<<>>> launch (__cudaLaunchKernel:
  // no parameters), called at enter and exit as CUPTI calls it.
  auto subscriber = reinterpret_cast<Subscriber>(dlsym(h, "fake_cupti_subscriber_callback"));
  auto stream_handle = reinterpret_cast<StreamHandle>(dlsym(h, "fake_cupti_stream_handle"));
  double callback_ns[2] = {-1, -1};
  if (subscriber != nullptr && stream_handle != nullptr) {
    const CUpti_CallbackId launch_ids[2] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                            CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000};
    for (int which = 0; which < 2; ++which) {
      std::vector<double> runs;
      for (int r = 0; r < 5; ++r) {
        reset(nullptr);
        Session session(SessionOptions{});
        LiveOptions o;
        o.nvtx = false;
        o.cupti_completion_wait_ms = 10;  // the timed calls enqueue nothing real: do not wait at stop
        LiveCollector live(session, o);
        void* fn = nullptr;
        void* user = nullptr;
        if (!live.start().empty() || !subscriber(&fn, &user)) break;
        const auto cb = reinterpret_cast<CUpti_CallbackFunc>(fn);
        cudaLaunchKernel_v7000_params p{};
        p.stream = static_cast<cudaStream_t>(stream_handle(0, 7));
        CUpti_CallbackData d{};
        uint64_t correlation_data = 0;
        int ok = 0;
        d.functionName = which == 0 ? "cudaLaunchKernel" : "__cudaLaunchKernel";
        d.symbolName = "ampere_sgemm_128x64_nn";
        d.functionParams = which == 0 ? &p : nullptr;
        d.functionReturnValue = &ok;
        d.correlationData = &correlation_data;
        d.contextUid = 1;
        constexpr int kCalls = 20000;
        const int64_t t0 = session_now_ns();
        for (int i = 0; i < kCalls; ++i) {
          d.correlationId = uint32_t(i + 1);
          d.callbackSite = CUPTI_API_ENTER;
          cb(user, CUPTI_CB_DOMAIN_RUNTIME_API, launch_ids[which], &d);
          d.callbackSite = CUPTI_API_EXIT;
          cb(user, CUPTI_CB_DOMAIN_RUNTIME_API, launch_ids[which], &d);
        }
        runs.push_back(double(session_now_ns() - t0) / kCalls);
        live.stop();
      }
      if (!runs.empty()) callback_ns[which] = median(runs);
    }
  }
  // What zeroing one buffer costs the thread that does it (CUPTI: the
  // launching thread that needed a buffer, unless ZEROED_OUT=1; gpuutil: the
  // drain thread, the bytes written only): a memset of a 512 KiB buffer.
  std::vector<double> zero_us;
  {
    const size_t bytes = LiveOptions{}.cupti_buffer_bytes;
    std::vector<uint8_t> buffer(bytes, 1);
    for (int r = 0; r < 200; ++r) {
      buffer[size_t(r) % bytes] = uint8_t(r);
      const int64_t a = session_now_ns();
      std::memset(buffer.data(), 0, bytes);
      asm volatile("" : : "r"(buffer.data()) : "memory");
      zero_us.push_back(double(session_now_ns() - a) / 1e3);
    }
  }
  // One default flush, launches in flight (the GPU trails by 50 ms).
  std::vector<double> flush_us;
  {
    reset(nullptr);
    Session session(SessionOptions{});
    LiveOptions o;
    o.nvtx = false;
    LiveCollector live(session, o);
    if (!live.start().empty()) return 1;
    for (int r = 0; r < 200; ++r) {
      for (int i = 0; i < 20; ++i) launch("gemm", 7, 2'500'000 / 20, 1000);
      const int64_t a = session_now_ns();
      flush(0);
      flush_us.push_back(double(session_now_ns() - a) / 1e3);
    }
    live.stop();
  }
  // The drain thread's flush rate while the GPU trails the host: 10 ms
  // steps, the GPU kept 25 ms behind, for 2 s.
  double flushes_per_s = 0;
  uint64_t steps = 0;
  {
    reset(nullptr);
    Session session(SessionOptions{});
    LiveOptions o;
    o.nvtx = false;
    LiveCollector live(session, o);
    if (!live.start().empty()) return 1;
    const int64_t t0 = session_now_ns();
    int64_t begin = t0, queued = t0;
    while (begin - t0 < 2'000'000'000) {
      session.begin_step(int64_t(steps), begin);
      while (queued < session_now_ns() + 25'000'000) {
        launch("gemm", 7, 5'000'000, 5000);
        queued = std::max(queued, session_now_ns() + 5000) + 5'000'000;
      }
      sleep_until(begin + 10'000'000);
      const int64_t end = session_now_ns();
      session.end_step(end);
      session.mark_complete_until(live.step_boundary(end));
      session.collect();
      begin = end;
      ++steps;
    }
    const int64_t span = session_now_ns() - t0;
    live.stop();
    flushes_per_s = double(live.counters().flushes) * 1e9 / double(span);
  }
  std::printf("| benchmark (fake CUPTI) | value |\n|---|---|\n");
  std::printf("| launch, collector attached, calls learnt from API records (ns per launch, median of 5 x %d) | %.0f |\n",
              kLaunches, median(without));
  std::printf("| launch, collector attached, calls learnt at API exit: callback + ring (ns per launch) | %.0f |\n",
              median(with));
  std::printf("| callback cost per launch (difference) | %.0f |\n", median(with) - median(without));
  std::printf("| callback ids traced (runtime + driver) | %llu |\n", (unsigned long long)ids);
  std::printf("| gpuutil's callback alone, enter + exit, cudaLaunchKernel on a stream (ns, median of 5 x 20000) | %.0f |\n",
              callback_ns[0]);
  std::printf("| gpuutil's callback alone, enter + exit, __cudaLaunchKernel (<<<>>>, no parameters) | %.0f |\n",
              callback_ns[1]);
  std::printf("| launch, callbacks, CUPTI zeroes each buffer on the launching thread (ZEROED_OUT=0; ns per launch) | %.0f |\n",
              median(not_zeroed));
  std::printf("| zeroing on the launching thread costs, per launch (difference; %llu buffers per run) | %.0f |\n",
              (unsigned long long)buffers, median(not_zeroed) - median(with));
  std::printf("| zeroing one 512 KiB buffer (memset, us, median of 200): what a buffer request costs the launching thread when CUPTI zeroes | %.1f |\n",
              median(zero_us));
  std::printf("| calls learnt at API exit in the last run | %llu of %d |\n", (unsigned long long)learnt, kLaunches);
  std::printf("| default flush with 20 launches in flight (us, median of 200) | %.1f |\n", median(flush_us));
  std::printf("| drain-thread flushes per second, GPU 25 ms behind, 10 ms steps (%llu steps) | %.0f |\n",
              (unsigned long long)steps, flushes_per_s);
  return learnt == uint64_t(kLaunches) ? 0 : 1;
}
