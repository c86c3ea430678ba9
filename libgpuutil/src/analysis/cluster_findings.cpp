// Straggler findings (gpuutil/cluster.h, docs/distributed.md): which rank
// holds the others back, the category of its step that explains it, and
// what it costs the others (their wait in collectives).
//
// A rank is a straggler when its own time per step (wall minus collective
// wait, median over the compared steps) exceeds the median rank's by at
// least the view's threshold while the other ranks wait in collectives.
// Its cause is the category (per step, averaged) with the largest excess
// over the median rank; collective and communication time are waits or
// transfers, never a cause. Compute on a rank whose GPU was throttled for
// most of its steps is reported as "throttling".
#include <algorithm>
#include <cstdio>
#include <map>

#include "analysis/text_format.h"
#include "gpuutil/cluster.h"

namespace gpuutil {

namespace {

int64_t lower_median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[(v.size() - 1) / 2];
}

bool is_wait_category(const std::string& c) { return c == "communication" || c == "collective"; }

const char* fix_for(const std::string& cause) {
  if (cause == "dataloader") {
    return "that rank waits on its input pipeline: give its DataLoader more workers (num_workers), "
           "pin_memory=True and prefetching, and check that its data shard or storage is not slower than the "
           "others' (balance shards, cache locally)";
  }
  if (cause == "host_sync") {
    return "remove the host syncs on that rank (.item(), .cpu(), printing or logging a tensor every step), or do "
           "them every N steps";
  }
  if (cause == "throttling") {
    return "its GPU is throttled (power or thermal): check cooling, power capping and clocks on that node "
           "(nvidia-smi -q -d PERFORMANCE), or move the job off it";
  }
  if (cause == "compute" || cause == "forward" || cause == "backward" || cause == "memory") {
    return "it does more work than the others: balance the work across ranks (sequence lengths, uneven "
           "batch or shard sizes, pipeline stages), or check that GPU or node for a fault (lower clocks, ECC, "
           "a slower link)";
  }
  if (cause == "optimizer") {
    return "its optimizer step is slower: use the fused/foreach optimizer and look for work only that rank "
           "does in the step (checkpoint saving, logging, evaluation)";
  }
  return "its host is slower: look for work only that rank does (logging, checkpointing, evaluation on rank 0), "
         "CPU contention on its node (other processes, CPU affinity, OMP_NUM_THREADS), or cut per-step host "
         "work (CUDA graphs, torch.compile)";
}

}  // namespace

std::vector<Finding> straggler_findings(const ClusterView& view) {
  std::vector<Finding> out;
  std::vector<const RankSummary*> ranks;
  for (const auto& r : view.ranks) {
    if (r.steps > 0 && r.own_p50_ns) ranks.push_back(&r);
  }
  if (ranks.size() < 2) return out;
  std::vector<int64_t> owns;
  int64_t all_wall_ns = 0;
  for (const auto* r : ranks) {
    owns.push_back(*r->own_p50_ns);
    all_wall_ns += r->steps_wall_ns;
  }
  const int64_t mid_own = lower_median(owns);
  // Per-step averages of every category, and their median over ranks.
  std::map<std::string, std::vector<int64_t>> per_category;
  for (const auto* r : ranks) {
    for (const auto& [name, ns] : r->breakdown_ns) per_category[name].push_back(ns / static_cast<int64_t>(r->steps));
  }
  for (const auto* r : ranks) {
    const int64_t excess = *r->own_p50_ns - mid_own;
    if (excess < view.straggler_threshold_ns || excess <= 0) continue;
    int64_t others_wait_ns = 0;
    std::vector<int64_t> others_wait_p50;
    for (const auto* o : ranks) {
      if (o == r) continue;
      others_wait_ns += o->collective_wait_ns;
      others_wait_p50.push_back(o->collective_wait_p50_ns.value_or(0));
    }
    if (others_wait_ns <= 0) continue;  // nobody waited for it
    std::string cause = "unknown";
    int64_t cause_excess = 0;
    for (const auto& [name, ns] : r->breakdown_ns) {
      if (is_wait_category(name)) continue;
      auto values = per_category[name];
      values.resize(ranks.size(), 0);  // ranks without the category had none of it
      const int64_t e = ns / static_cast<int64_t>(r->steps) - lower_median(values);
      if (e > cause_excess) {
        cause_excess = e;
        cause = name;
      }
    }
    if (cause == "compute" && r->throttled_steps * 2 >= r->steps) cause = "throttling";
    const std::string who = "Rank " + std::to_string(r->rank) + (r->host.empty() ? "" : " (" + r->host + ")");
    Finding f;
    f.id = "straggler";
    f.rank = r->rank;
    f.host = r->host;
    f.cause = cause;
    f.title = who + " is a straggler: " + ms_text(excess) + " more own time per step than the median rank" +
              (cause == "unknown" ? "" : ", mostly " + cause);
    const int64_t wait_p50 = lower_median(others_wait_p50);
    f.evidence = "own time (step wall minus collective wait), median per step: " + ms_text(*r->own_p50_ns) +
                 " vs " + ms_text(mid_own) + " for the median rank";
    if (r->relative_perf) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f", *r->relative_perf);
      f.evidence += " (relative perf " + std::string(buf) + ")";
    }
    if (cause != "unknown") f.evidence += "; its " + cause + " is " + ms_text(cause_excess) + " per step over the median rank";
    const size_t others = ranks.size() - 1;
    f.evidence += (others == 1 ? std::string("; the other rank waits a median ")
                               : "; the other " + std::to_string(others) + " ranks wait a median ") +
                  ms_text(wait_p50) + " per step in collectives (" + ms_text(others_wait_ns) + " in all over " +
                  std::to_string(r->steps) + (r->steps == 1 ? " step)" : " steps)");
    f.fix = fix_for(cause);
    f.recoverable_ns = others_wait_ns;
    f.share_of_wall = all_wall_ns > 0 ? static_cast<double>(others_wait_ns) / static_cast<double>(all_wall_ns) : 0;
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return a.recoverable_ns != b.recoverable_ns ? a.recoverable_ns > b.recoverable_ns : a.rank < b.rank;
  });
  return out;
}

}  // namespace gpuutil
