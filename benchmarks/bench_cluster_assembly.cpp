// Cross-rank assembly at scale (docs/distributed.md, "Scale"): the leader's
// ClusterAssembler fed synthetic rank batches from N ranks, one report
// interval at a time, as the live exchange does (parse each rank's JSON
// batch, add, advance, render the view).
//
//   build/benchmarks/bench_cluster_assembly [ranks=1024] [intervals=30]
//       [steps_per_interval=10] [collectives_per_step=16]
//
// Prints per-interval assembly time (median and max) against the report
// interval the batches cover (steps_per_interval x a 100 ms step), the
// view-render time, and peak RSS after each third of the run (bounded:
// it must not grow with the number of intervals).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gpuutil/cluster.h"

namespace {

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

long current_rss_kib() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long pages = 0, resident = 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  std::fclose(f);
  return resident * 4;
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int intervals = argc > 2 ? std::atoi(argv[2]) : 30;
  const int steps_per_interval = argc > 3 ? std::atoi(argv[3]) : 10;
  const int collectives = argc > 4 ? std::atoi(argv[4]) : 16;
  constexpr int64_t kStepNs = 100'000'000;  // a 100 ms step
  const int64_t interval_ns = kStepNs * steps_per_interval;

  gpuutil::ClusterOptions options;
  options.world_size = ranks;
  gpuutil::ClusterAssembler assembler(options);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int64_t> jitter(0, 2'000'000);
  const int slow_rank = ranks / 3;

  // Build the batches outside the timed region, as the store would hand them over.
  std::vector<double> assemble_ms, render_ms;
  std::vector<long> rss_kib;
  size_t batch_bytes = 0;
  for (int iv = 0; iv < intervals; ++iv) {
    std::vector<std::string> batches;
    batches.reserve(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      gpuutil::RankBatch b;
      b.rank = r;
      b.host = "node" + std::to_string(r / 8);
      b.clock_offset_ns = jitter(rng);
      b.clock_uncertainty_ns = 30'000;
      for (int k = 0; k < steps_per_interval; ++k) {
        gpuutil::RankStep s;
        s.step = static_cast<int64_t>(iv) * steps_per_interval + k;
        s.start_ns = s.step * kStepNs + jitter(rng);
        s.basis = "device";
        const int64_t slow = r == slow_rank ? 20'000'000 : 0;
        const int64_t comm = (r == slow_rank ? 5'000'000 : 25'000'000) + jitter(rng);
        s.categories_ns = {{"compute", 60'000'000 + jitter(rng)}, {"communication", comm},
                           {"memory", 1'000'000},               {"dataloader", 1'000'000 + slow},
                           {"host_sync", 0},                    {"launch", 2'000'000}};
        s.wall_ns = kStepNs;
        for (int c = 0; c < collectives; ++c) {
          s.collectives.push_back({"gpu stream #0", comm / collectives});
        }
        b.steps.push_back(std::move(s));
      }
      batches.push_back(gpuutil::rank_batch_to_json(b));
      batch_bytes += batches.back().size();
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& text : batches) {
      const std::string error = gpuutil::ingest_rank_batch_json(assembler, text);
      if (!error.empty()) {
        std::fprintf(stderr, "ingest failed: %s\n", error.c_str());
        return 1;
      }
    }
    assembler.advance();
    const auto t1 = std::chrono::steady_clock::now();
    const std::string view = gpuutil::cluster_view_to_json(assembler.view());
    const auto t2 = std::chrono::steady_clock::now();
    assemble_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    render_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    if ((iv + 1) % std::max(1, intervals / 3) == 0) rss_kib.push_back(current_rss_kib());
    if (iv == intervals - 1 && view.find("\"straggler\"") == std::string::npos) {
      std::fprintf(stderr, "the planted straggler (rank %d) was not found\n", slow_rank);
      return 1;
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double interval_ms = static_cast<double>(interval_ns) / 1e6;
  std::printf("ranks %d, intervals %d, %d steps x %d collectives per rank and interval, batch %.1f KiB per rank\n",
              ranks, intervals, steps_per_interval, collectives,
              static_cast<double>(batch_bytes) / intervals / ranks / 1024.0);
  std::printf("| what | median ms | max ms | report interval ms | share of interval |\n|---|---|---|---|---|\n");
  std::printf("| parse + add + advance (all ranks) | %.1f | %.1f | %.0f | %.1f%% |\n", median(assemble_ms),
              *std::max_element(assemble_ms.begin(), assemble_ms.end()), interval_ms,
              100.0 * median(assemble_ms) / interval_ms);
  std::printf("| render view JSON | %.1f | %.1f | %.0f | %.1f%% |\n", median(render_ms),
              *std::max_element(render_ms.begin(), render_ms.end()), interval_ms,
              100.0 * median(render_ms) / interval_ms);
  std::printf("RSS after each third of the run (KiB):");
  for (long k : rss_kib) std::printf(" %ld", k);
  std::printf("; peak %ld KiB; steps held %zu\n", peak_rss_kib(), assembler.pending_steps());
  return 0;
}
