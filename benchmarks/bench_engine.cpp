// Engine throughput on synthetic timelines.
//
// Builds an EventStore of N events (kernels on 4 streams, their launch
// calls, host op ranges, a dataloader wait and a sync per step) and times
// gpuutil::analyze() on it, single-threaded. Prints events/s and the peak
// RSS. The machine is shared, so the analysis runs `repeats` times and the
// best and median are printed (best-of-N is the least disturbed run).
// Usage: bench_engine [events (default 10000000)] [steps (default 1000)] [repeats (default 5)]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <random>
#include <vector>

#include "gpuutil/analysis.h"

using namespace gpuutil;

namespace {

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

EventStore synth(uint64_t target_events, int64_t steps) {
  EventStore s;
  s.threads.push_back({1, 1, "main"});
  DeviceInfo d;
  d.id = 0;
  d.name = "NVIDIA H100 80GB HBM3";
  d.compute_major = 9;
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.registers_per_sm = 65536;
  d.shared_memory_per_sm_bytes = 233472;
  d.warp_size = 32;
  s.devices.push_back(d);
  const NameId names[4] = {s.names.intern("gemm"), s.names.intern("elementwise"), s.names.intern("reduce"),
                           s.names.intern("ncclDevKernel_AllReduce")};
  const NameId launch = s.names.intern("cudaLaunchKernel");
  const NameId op = s.names.intern("aten::mm");
  const NameId dl = s.names.intern("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__");
  const NameId sync = s.names.intern("cudaStreamSynchronize");
  // Each kernel brings 3 events: the kernel, its launch call and its op.
  const uint64_t kernels = target_events / 3;
  const uint64_t per_step = kernels / static_cast<uint64_t>(steps);
  std::mt19937_64 rng(42);
  int64_t t = 1'000'000;
  uint64_t corr = 1;
  s.activities.reserve(kernels);
  s.api_calls.reserve(kernels + steps);
  s.ranges.reserve(kernels + steps);
  for (int64_t st = 0; st < steps; ++st) {
    const int64_t step_start = t;
    s.ranges.push_back({t, t + 2'000'000, dl, 0, RangeCategory::kDataloader, 0});
    t += 2'000'000;
    int64_t gpu_t = t + 5'000;
    for (uint64_t k = 0; k < per_step; ++k) {
      const int64_t host_t = t;
      s.ranges.push_back({host_t, host_t + 4'000, op, 0, RangeCategory::kOp, 0});
      s.api_calls.push_back({host_t + 1'000, host_t + 3'000, corr, launch, 0, HostApiKind::kLaunch, SyncKind::kNone});
      DeviceActivity a;
      a.correlation_id = corr++;
      a.name = names[rng() % 4];
      a.is_communication = a.name == names[3];
      a.stream = static_cast<int32_t>(rng() % 4);
      const int64_t dur = 1'000 + static_cast<int64_t>(rng() % 20'000);
      a.start_ns = std::max(gpu_t, host_t + 5'000) - static_cast<int64_t>(rng() % 2'000);
      a.end_ns = a.start_ns + dur;
      a.grid[0] = 1 + static_cast<uint32_t>(rng() % 512);
      a.grid[1] = a.grid[2] = 1;
      a.block[0] = 256;
      a.block[1] = a.block[2] = 1;
      a.registers_per_thread = 32;
      gpu_t = a.end_ns;
      s.activities.push_back(a);
      t += 4'500;
    }
    s.api_calls.push_back({t, gpu_t + 1'000, 0, sync, 0, HostApiKind::kSynchronize, SyncKind::kStream});
    t = gpu_t + 2'000;
    s.steps.push_back({st, step_start, t});
  }
  s.steps_source = "synthetic";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t events = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000;
  const int64_t steps = argc > 2 ? std::strtoll(argv[2], nullptr, 10) : 1000;
  const EventStore s = synth(events, steps);
  const uint64_t n = s.activities.size() + s.api_calls.size() + s.ranges.size();
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
  const long rss_before = peak_rss_kib();
  std::vector<double> secs_each;
  Report r;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    r = analyze(s);
    const auto t1 = std::chrono::steady_clock::now();
    secs_each.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::printf("runs (s)         ");
  for (double v : secs_each) std::printf(" %.3f", v);
  std::printf("  (run 1 pays first-touch page faults)\n");
  std::sort(secs_each.begin(), secs_each.end());
  const double secs = secs_each.front();
  const double median = secs_each[secs_each.size() / 2];
  int64_t check = 0;
  for (const auto& st : r.steps) {
    for (const auto& d : st.devices) {
      if (d.breakdown.total_ns() != d.wall_ns) ++check;
    }
  }
  std::printf("events            %llu (activities %zu, api calls %zu, ranges %zu)\n",
              static_cast<unsigned long long>(n), s.activities.size(), s.api_calls.size(), s.ranges.size());
  std::printf("steps             %zu\n", r.steps.size());
  std::printf("analyze seconds   best %.3f, median %.3f (%d runs)\n", secs, median, repeats);
  std::printf("events per second best %.2f M, median %.2f M\n", static_cast<double>(n) / secs / 1e6,
              static_cast<double>(n) / median / 1e6);
  std::printf("peak RSS          %.1f MiB (store built: %.1f MiB)\n", static_cast<double>(peak_rss_kib()) / 1024.0,
              static_cast<double>(rss_before) / 1024.0);
  std::printf("identity failures %lld\n", static_cast<long long>(check));
  return check == 0 ? 0 : 1;
}
