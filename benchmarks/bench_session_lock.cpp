// How long the live session's lock keeps the application's threads
// waiting while the report worker analyses large batches.
//
// The training thread (or CUPTI's buffer callback, or the NVTX drain) adds
// events under the session mutex; the report worker takes that mutex at
// each batch. This plays a GPU-like run into a Session with its worker: per
// step, KERNELS launch calls and KERNELS kernels (each kernel a step after
// its launch, as on a pipelined GPU), a step boundary, and a report request
// every BATCH steps, paced to one step per STEP_MS of real time with the
// adds spread evenly over it, as CUPTI buffers and NVTX drains arrive at any
// moment (a producer faster than the worker's analysis would pile up
// pending events without bound, which no real run does). The producer times every add_* call and prints the
// distribution of those waits: the worst ones are the worker's critical
// sections (the producer itself only appends to a vector). It also prints
// the producer's total time in calls that took more than 100 us.
//
// Usage: bench_session_lock [steps (default 1000)] [kernels per step
//        (1000)] [steps per batch (100)] [step ms (5)]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gpuutil/session.h"

using namespace gpuutil;

namespace {

void print_waits(const char* label, std::vector<int64_t> wait_ns) {
  if (wait_ns.empty()) return;
  std::sort(wait_ns.begin(), wait_ns.end());
  auto pct = [&](double p) { return wait_ns[std::min(wait_ns.size() - 1, size_t(p * double(wait_ns.size())))]; };
  int64_t over_100us_ns = 0;
  size_t over_100us = 0, over_1ms = 0;
  for (int64_t w : wait_ns) {
    if (w > 100'000) {
      over_100us_ns += w;
      ++over_100us;
    }
    if (w > 1'000'000) ++over_1ms;
  }
  std::printf("%-16s %9zu adds: median %lld ns, p99.99 %lld ns, max %lld ns; over 100 us: %zu (%.2f ms in all), "
              "over 1 ms: %zu\n",
              label, wait_ns.size(), static_cast<long long>(pct(0.5)), static_cast<long long>(pct(0.9999)),
              static_cast<long long>(wait_ns.back()), over_100us, double(over_100us_ns) / 1e6, over_1ms);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int kernels = argc > 2 ? std::atoi(argv[2]) : 1000;
  const int batch = argc > 3 ? std::atoi(argv[3]) : 100;
  const double step_ms = argc > 4 ? std::atof(argv[4]) : 5.0;
  if (steps <= 1 || kernels <= 0 || batch <= 0 || !(step_ms >= 0)) {
    std::fprintf(stderr, "usage: bench_session_lock [steps>1] [kernels>0] [batch>0] [step ms>=0]\n");
    return 2;
  }
  Session s(SessionOptions{});
  s.start_worker();
  const uint32_t thread = s.thread_index(1, 1, "main");
  const NameId launch = s.intern("cudaLaunchKernel");
  const NameId kernel = s.intern("ampere_sgemm_128x64_nn");
  const int64_t step_ns = 10'000'000;
  const int64_t slot_ns = step_ns / (kernels + 1);

  std::vector<int64_t> wait_ns;
  wait_ns.reserve(size_t(steps) * kernels * 2);
  using clock = std::chrono::steady_clock;
  auto timed = [&](auto&& add) {
    const auto t0 = clock::now();
    add();
    wait_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count());
  };
  const auto run0 = clock::now();
  auto pace = [&](int step, double fraction) {  // sleeps until that point of the step in real time
    std::this_thread::sleep_until(run0 + std::chrono::duration_cast<clock::duration>(
                                             std::chrono::duration<double, std::milli>(step_ms * (step + fraction))));
  };
  uint64_t corr = 1;
  size_t warm_adds = SIZE_MAX;
  for (int step = 0; step < steps; ++step) {
    if (step == 2 * batch) warm_adds = wait_ns.size();
    const int64_t t0 = step * step_ns;
    s.begin_step(step, t0);
    for (int k = 0; k < kernels; ++k) {
      HostApiCall c;
      c.start_ns = t0 + k * slot_ns;
      c.end_ns = c.start_ns + slot_ns / 4;
      c.correlation_id = corr + uint64_t(k);
      c.name = launch;
      c.thread = thread;
      c.kind = HostApiKind::kLaunch;
      timed([&] { s.add_api_call(c); });
      if (k % 64 == 63) pace(step, double(k + 1) / (2.0 * kernels));  // adds spread over the step
    }
    if (step > 0) {  // the previous step's kernels, a step after their launch
      for (int k = 0; k < kernels; ++k) {
        DeviceActivity a;
        a.start_ns = t0 + k * slot_ns;
        a.end_ns = a.start_ns + slot_ns / 2;
        a.correlation_id = corr - uint64_t(kernels) + uint64_t(k);
        a.name = kernel;
        timed([&] { s.add_activity(a); });
        if (k % 64 == 63) pace(step, 0.5 + double(k + 1) / (2.0 * kernels));
      }
    }
    corr += uint64_t(kernels);
    s.end_step(t0 + step_ns);
    s.mark_complete_until(t0);  // the device's records lag a step
    if ((step + 1) % batch == 0) s.request_report();
    pace(step, 1.0);
  }
  const double run_s = std::chrono::duration<double>(clock::now() - run0).count();
  s.finish(steps * step_ns);
  const uint64_t reported = s.steps_reported();

  std::printf("steps %d, kernels per step %d, steps per batch %d, %.1f ms per step (%zu adds timed, %llu steps reported, "
              "producer run %.3f s)\n",
              steps, kernels, batch, step_ms, wait_ns.size(), static_cast<unsigned long long>(reported), run_s);
  // The first two batches grow the session's vectors to their working size
  // (a reallocation under the lock, once); the rest is the steady state.
  const size_t split = std::min(wait_ns.size(), warm_adds);
  print_waits("first 2 batches", std::vector<int64_t>(wait_ns.begin(), wait_ns.begin() + long(split)));
  print_waits("after them", std::vector<int64_t>(wait_ns.begin() + long(split), wait_ns.end()));
  return 0;
}
