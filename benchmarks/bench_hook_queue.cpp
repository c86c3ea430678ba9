// The LibTorch hook's range queues (python/gpuutil/torch/csrc/hook_ring.h):
// what one record() costs on the application thread, what the step-end
// drain costs per range, and the memory written, for step-sized batches
// (drained every `per_drain` ranges) and for one deep backlog.
// Usage: bench_hook_queue [per_drain (default 2000)] [rounds (default 2000)]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "hook_ring.h"

namespace {

struct BenchTag {};
using Rings = gpuutil_hook::RingSet<BenchTag>;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t g_sum = 0;  // what the sink saw, so the drain is not optimised away
void sink(void*, const char* name, int64_t start_ns, int64_t end_ns, int64_t, int64_t, int kind) {
  g_sum += static_cast<uint64_t>(end_ns - start_ns) + static_cast<uint64_t>(kind) + static_cast<uint8_t>(name[0]);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A typical autograd-node name, read through a volatile pointer as the hook
// reads RecordFunction::name() (its length is not known at compile time).
const char* volatile g_name = "autograd::engine::evaluate_function: AddmmBackward0";

// Records `n` ranges, then drains them;
// returns {record ns per range, drain ns per range}, and the drop count.
void batch(size_t n, double* record_ns, double* drain_ns, uint64_t* dropped) {
  const double t0 = now_s();
  for (size_t i = 0; i < n; ++i) {
    Rings::record(g_name, static_cast<int64_t>(i), static_cast<int64_t>(i) + 7, 2);
  }
  const double t1 = now_s();
  *dropped += Rings::drain_into(&sink, nullptr);
  const double t2 = now_s();
  *record_ns = (t1 - t0) * 1e9 / static_cast<double>(n);
  *drain_ns = (t2 - t1) * 1e9 / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t per_drain = argc > 1 ? static_cast<size_t>(std::atoll(argv[1])) : 2000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 2000;
  uint64_t dropped = 0;
  std::vector<double> rec, drn;
  for (int r = 0; r < rounds; ++r) {
    double a = 0, b = 0;
    batch(per_drain, &a, &b, &dropped);
    rec.push_back(a);
    drn.push_back(b);
  }
  const uint32_t touched_steady = Rings::segments_touched();
  std::printf("step-sized batches   %zu ranges per drain, %d drains\n", per_drain, rounds);
  std::printf("record per range     %.1f ns (median over drains)\n", median(rec));
  std::printf("drain per range      %.1f ns\n", median(drn));
  std::printf("segments written     %u of %u (%zu ranges each, %.1f MiB)\n", touched_steady, Rings::segments(),
              Rings::kSegmentRanges, touched_steady * Rings::kSegmentRanges * 128.0 / 1048576.0);
  const size_t deep = Rings::segments() * Rings::kSegmentRanges / 2;
  double a = 0, b = 0;
  batch(deep, &a, &b, &dropped);
  std::printf("deep backlog         %zu ranges between two drains: record %.1f ns, drain %.1f ns per range\n", deep,
              a, b);
  std::printf("segments written     %u after the deep backlog\n", Rings::segments_touched());
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  std::printf("peak RSS             %.1f MiB\n", static_cast<double>(u.ru_maxrss) / 1024.0);
  std::printf("dropped              %llu\n", static_cast<unsigned long long>(dropped));
  std::fprintf(stderr, "(checksum %llu)\n", static_cast<unsigned long long>(g_sum));
  return dropped == 0 ? 0 : 1;
}
