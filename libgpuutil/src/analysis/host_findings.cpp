// Findings of host-only runs (no GPU activity: a CPU training job, a live
// session without CUPTI, a trace without device events): from the main
// training thread's host breakdown, summed over the steps, per rank
// (docs/findings.md, "Host-only runs").
//
// The main thread of a step is its busiest classified thread (the most time
// in dataloader/forward/backward/optimizer/host_sync), as the cross-rank
// view chooses it. Rules, each on that thread's summed wall:
//   host_dataloader  waiting for the next batch >= 5%       recoverable: that time
//   host_sync        blocked in .item()/.cpu()/syncs >= 5%  recoverable: that time
//   host_optimizer   optimizer step >= 20%                  recoverable: half of it
//   outside_steps    time between steps >= 10% of the span  recoverable: that time
//                    and >= 1 ms in all
//                    (every run, GPU or not: outside_steps_finding)
#include "analysis/host_findings.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>

#include "analysis/findings.h"
#include "analysis/text_format.h"

namespace gpuutil {

namespace {

constexpr double kIdleShare = 0.05;
constexpr double kOptimizerShare = 0.20;
constexpr double kOutsideShare = 0.10;
constexpr int64_t kOutsideFloorNs = 1'000'000;  // and at least 1 ms in all

int64_t at(const HostThreadStepReport& h, HostCategory c) { return h.breakdown_ns[static_cast<int>(c)]; }

int64_t classified_ns(const HostThreadStepReport& h) {
  return h.wall_ns - at(h, HostCategory::kOther) - at(h, HostCategory::kCollective);
}


Finding host_finding(const char* id, std::string title, std::string evidence, std::string fix, int64_t recoverable_ns,
                     int64_t wall_ns) {
  return make_finding(id, std::move(title), std::move(evidence), std::move(fix), recoverable_ns,
                      static_cast<double>(wall_ns));
}

}  // namespace

void host_findings(const Report& report, std::vector<Finding>& out) {
  std::map<int32_t, HostTotals> ranks;
  // Culprit time summed over the steps, per rank and category. A one-step
  // report (every live report) needs no sums: its culprits are the step's.
  const bool one_step = report.steps.size() == 1;
  std::map<int32_t, std::array<std::map<std::string, int64_t>, kHostCategoryCount>> culprits;
  for (const auto& step : report.steps) {
    std::map<int32_t, const HostThreadStepReport*> main;
    for (const auto& h : step.host) {
      const HostThreadStepReport*& m = main[h.rank];
      if (m == nullptr || classified_ns(h) > classified_ns(*m)) m = &h;
    }
    for (const auto& [rank, h] : main) {
      HostTotals& t = ranks[rank];
      t.rank = rank;
      t.wall_ns += h->wall_ns;
      ++t.steps;
      for (int c = 0; c < kHostCategoryCount; ++c) {
        t.ns[c] += h->breakdown_ns[c];
        if (one_step) {
          // The most time, the smallest name among equals (as the sums' map order gives).
          const NamedTime* best = nullptr;
          for (const auto& n : h->culprits[c]) {
            if (best == nullptr || n.ns > best->ns || (n.ns == best->ns && n.name < best->name)) best = &n;
          }
          if (best != nullptr) t.top_culprit[c] = best->name;
        } else {
          for (const auto& n : h->culprits[c]) culprits[rank][c][n.name] += n.ns;
        }
      }
    }
  }
  std::vector<HostTotals> totals;
  for (auto& [rank, t] : ranks) {
    if (!one_step) {
      for (int c = 0; c < kHostCategoryCount; ++c) {
        const auto& m = culprits[rank][c];
        const auto best =
            std::max_element(m.begin(), m.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
        if (best != m.end()) t.top_culprit[c] = best->first;
      }
    }
    totals.push_back(std::move(t));
  }
  host_findings_of(totals, out);
}

void host_findings_of(const std::vector<HostTotals>& ranks, std::vector<Finding>& out) {
  const bool several = ranks.size() > 1;
  for (const HostTotals& t : ranks) {
    if (t.wall_ns <= 0 || t.steps == 0) continue;
    const auto wall = static_cast<double>(t.wall_ns);
    const std::string where = several ? cat({" on rank ", std::to_string(t.rank)}) : std::string();
    const auto per_ms = [&](int64_t ns) { return ms_text(ns / static_cast<int64_t>(t.steps)); };
    const auto top = [&](HostCategory c) -> const std::string& { return t.top_culprit[static_cast<int>(c)]; };
    const int64_t dataloader = t.ns[static_cast<int>(HostCategory::kDataloader)];
    if (dataloader >= kIdleShare * wall) {
      const std::string& culprit = top(HostCategory::kDataloader);
      out.push_back(host_finding(
          "host_dataloader",
          cat({"The training thread waits for the next batch ", pct_text(dataloader / wall), " of step time", where}),
          cat({per_ms(dataloader), " per step (", ms_text(dataloader), " of ", ms_text(t.wall_ns), " over ",
               std::to_string(t.steps), " steps) in the input pipeline", culprit.empty() ? "" : "; top range: ",
               culprit}),
          "more DataLoader workers (num_workers), persistent_workers=True and a larger prefetch_factor; move "
          "decoding/augmentation out of __getitem__'s critical path or pre-bake it; check the storage it reads",
          dataloader, t.wall_ns));
    }
    const int64_t sync = t.ns[static_cast<int>(HostCategory::kHostSync)];
    if (sync >= kIdleShare * wall) {
      const std::string& culprit = top(HostCategory::kHostSync);
      out.push_back(host_finding(
          "host_sync", cat({"The training thread blocks in host syncs ", pct_text(sync / wall), " of step time", where}),
          cat({per_ms(sync), " per step in .item()/.cpu()/synchronize-like calls", culprit.empty() ? "" : "; top: ",
               culprit}),
          "remove per-step .item()/.cpu()/.tolist()/print of tensors from the loop, or do them every N steps; "
          "keep metrics on the device and read them once",
          sync, t.wall_ns));
    }
    const int64_t optimizer = t.ns[static_cast<int>(HostCategory::kOptimizer)];
    if (optimizer >= kOptimizerShare * wall) {
      out.push_back(host_finding(
          "host_optimizer", cat({"The optimizer step takes ", pct_text(optimizer / wall), " of step time", where}),
          cat({per_ms(optimizer), " per step in Optimizer.step/zero_grad"}),
          "use the fused or foreach optimizer implementation (foreach=True / fused=True), zero_grad(set_to_none="
          "True), fewer parameter tensors (flatten small ones); recoverable time is estimated as half",
          optimizer / 2, t.wall_ns));
    }
  }
}

std::optional<Finding> outside_steps_finding(uint64_t steps, int64_t span_ns, int64_t outside_ns) {
  // Evaluation, checkpoints, logging between steps, or a loop whose steps do
  // not cover its work.
  if (steps < 2 || span_ns <= 0 || outside_ns < kOutsideFloorNs ||
      outside_ns < kOutsideShare * static_cast<double>(span_ns)) {
    return std::nullopt;
  }
  return host_finding(
      "outside_steps",
      "The job spends " + pct_text(static_cast<double>(outside_ns) / static_cast<double>(span_ns)) +
          " of its time outside training steps",
      ms_text(outside_ns) + " of " + ms_text(span_ns) + " between or around " + std::to_string(steps) + " steps",
      "look at what runs between steps (evaluation, checkpoint saving, logging, data re-sharding): make it "
      "asynchronous or less frequent; or mark the steps so they cover the loop's work",
      outside_ns, span_ns);
}

}  // namespace gpuutil
