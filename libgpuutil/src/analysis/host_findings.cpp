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
// Waiting on the input pipeline (host_dataloader here, idle_dataloader in
// findings.cpp) is told from the rank's loader: a periodic stall (every
// k-th batch: with k workers, one slow worker, or all k slower than the
// step and delivering together; the waits cannot tell which) is named as
// such, and the fix never recommends a setting the live DataLoader
// already has (loader_fix).
#include "analysis/host_findings.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

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

std::string ordinal(int64_t n) {
  const int64_t tens = n % 100;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

// "a, b and c".
std::string listed(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? " and " : ", ";
    out += parts[i];
  }
  return out;
}

// The loader's workers explain the stall (one batch per round of them:
// one slow worker, or all of them slow and delivering together) when it
// has as many workers as the period (true), not when it has a different
// number (false); unknown: nullopt.
std::optional<bool> one_per_round(const LoaderReport& l) {
  if (!l.settings.num_workers) return std::nullopt;
  return *l.settings.num_workers == l.periodic_stall->period;
}

}  // namespace

const LoaderReport* main_loader(const std::vector<LoaderReport>& loaders, int32_t rank) {
  const LoaderReport* best = nullptr;
  for (const auto& l : loaders) {
    if (l.rank == rank && (best == nullptr || l.wait_ns > best->wait_ns)) best = &l;
  }
  return best;
}

std::string loader_title(const LoaderReport* l) {
  if (l == nullptr || !l->periodic_stall) return "";
  const std::optional<bool> round = one_per_round(*l);
  return cat({": every ", ordinal(l->periodic_stall->period), " batch stalls",
              round.value_or(true) ? " (one per round of the DataLoader workers)" : ""});
}

std::string loader_evidence(const LoaderReport* l) {
  if (l == nullptr || !l->periodic_stall) return "";
  const PeriodicStall& p = *l->periodic_stall;
  const std::optional<bool> round = one_per_round(*l);
  const std::string k = std::to_string(p.period);
  const std::string which = "one worker slower than the others, or all of them slower than the step";
  std::string why;
  if (!round) {
    why = cat({"the pattern of ", k, " workers delivering one batch per round (", which,
               "; the loader's num_workers is not known)"});
  } else if (*round) {
    why = cat({"one batch per round of the loader's ", k, " workers (", which, ")"});
  } else {
    why = cat({"a periodic stall (the loader has ", std::to_string(*l->settings.num_workers), " workers)"});
  }
  return cat({"; every ", ordinal(p.period), " batch waits ", ms_text(p.slow_wait_p50_ns), " (median of ",
              std::to_string(p.slow_batches), "; the other batches ", ms_text(p.other_wait_p50_ns), "), ",
              pct_text(static_cast<double>(p.slow_wait_ns) / static_cast<double>(std::max<int64_t>(l->wait_ns, 1))),
              " of the waiting: ", why});
}

std::string loader_fix(const LoaderReport* l, LoaderFixFor what) {
  const LoaderSettings none;
  const LoaderSettings& s = l != nullptr ? l->settings : none;
  const bool device = what != LoaderFixFor::kHost;
  const bool workers_known_zero = s.num_workers && *s.num_workers == 0;
  const std::string workers_now = s.num_workers ? cat({" (it is ", std::to_string(*s.num_workers), ")"}) : "";
  const std::string prefetch_now = s.prefetch_factor ? cat({" (it is ", std::to_string(*s.prefetch_factor), ")"}) : "";
  const bool want_pin = device && !(s.pin_memory && *s.pin_memory);
  const bool want_persistent = !workers_known_zero && !(s.persistent_workers && *s.persistent_workers);
  if (l != nullptr && l->periodic_stall) {
    const PeriodicStall& p = *l->periodic_stall;
    std::string fix;
    if (workers_known_zero) {
      fix = cat({"every ", ordinal(p.period), " batch is slow to load on the training thread: find what makes it "
                 "slow (a new file or shard, a costly sample type) and load batches in DataLoader workers "
                 "(num_workers > 0)"});
    } else {
      fix = cat({"time __getitem__ per worker (torch.utils.data.get_worker_info().id): if one worker is slower (a "
                 "slow shard, file or storage path, a costly sample type, a per-worker setup), spread that work "
                 "evenly over the workers; if all are, they are too slow for the step: more DataLoader workers "
                 "(num_workers",
                 s.num_workers ? ", now " + std::to_string(*s.num_workers) : std::string(),
                 ") or a cheaper __getitem__ (pre-bake decoding/augmentation); deeper prefetching only hides a "
                 "slow worker's stalls"});
    }
    if (want_pin) fix += "; also set pin_memory=True";
    return fix;
  }
  if (what == LoaderFixFor::kHost) {
    std::vector<std::string> parts;
    parts.push_back(workers_known_zero ? "load batches in DataLoader workers (num_workers > 0: with 0 the training "
                                         "thread loads every batch itself)"
                                       : cat({"more DataLoader workers (num_workers", s.num_workers ? ", now " : "",
                                              s.num_workers ? std::to_string(*s.num_workers) : "", ")"}));
    if (want_persistent) parts.push_back("persistent_workers=True");
    if (!workers_known_zero) parts.push_back(cat({"a larger prefetch_factor", prefetch_now}));
    return listed(parts) +
           "; move decoding/augmentation out of __getitem__'s critical path or pre-bake it; check the storage it "
           "reads";
  }
  const std::string workers = workers_known_zero ? "use DataLoader workers (num_workers > 0)"
                                                 : cat({"raise DataLoader num_workers", workers_now});
  if (what == LoaderFixFor::kDeviceInference) {
    return cat({"keep the device fed: batch requests dynamically (continuous batching for LLM serving) within a "
                "queue-delay budget, run more model concurrency (several CUDA streams or model instances), or share "
                "the GPU with MIG/MPS when the model is small; for offline inference over a DataLoader also ",
                workers_known_zero ? "use DataLoader workers" : cat({"raise num_workers", workers_now}),
                want_pin ? " and set pin_memory=True" : ""});
  }
  std::vector<std::string> set;
  if (want_pin) set.push_back("pin_memory=True");
  if (want_persistent) set.push_back("persistent_workers=True");
  std::string fix = workers;
  if (!set.empty()) fix += ", set " + listed(set);
  if (!workers_known_zero) fix += cat({", raise prefetch_factor", prefetch_now});
  return fix + ", or move augmentation to the GPU / pre-bake it";
}

std::vector<HostTotals> host_totals(const Report& report) {
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
  return totals;
}

void host_findings_of(const std::vector<HostTotals>& ranks, const std::vector<LoaderReport>& loaders,
                      std::vector<Finding>& out) {
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
      const LoaderReport* loader = main_loader(loaders, t.rank);
      out.push_back(host_finding(
          "host_dataloader",
          cat({"The training thread waits for the next batch ", pct_text(dataloader / wall), " of step time", where,
               loader_title(loader)}),
          cat({per_ms(dataloader), " per step (", ms_text(dataloader), " of ", ms_text(t.wall_ns), " over ",
               std::to_string(t.steps), " steps) in the input pipeline", culprit.empty() ? "" : "; top range: ",
               culprit, loader_evidence(loader)}),
          loader_fix(loader, LoaderFixFor::kHost), dataloader, t.wall_ns));
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

std::optional<Finding> outside_steps_finding(uint64_t steps, int64_t span_ns, int64_t outside_ns,
                                             const std::array<int64_t, kOutsideKindCount>& named) {
  // Evaluation, checkpoints, logging between steps, or a loop whose steps do
  // not cover its work. A torch.compile warm-up is a one-off, and an
  // incomplete step is a step (live: its device records never all came):
  // out of both.
  const int64_t warmup_ns = named[static_cast<size_t>(OutsideKind::kCompileWarmup)] +
                            named[static_cast<size_t>(OutsideKind::kIncomplete)];
  span_ns -= warmup_ns;
  outside_ns -= warmup_ns;
  if (steps < 2 || span_ns <= 0 || outside_ns < kOutsideFloorNs ||
      outside_ns < kOutsideShare * static_cast<double>(span_ns)) {
    return std::nullopt;
  }
  // "evaluation 1.5 s, checkpoint 0.4 s, other 0.1 s" when some of it is named.
  std::string parts;
  int64_t named_ns = 0;
  for (OutsideKind k : {OutsideKind::kEvaluation, OutsideKind::kCheckpoint}) {
    const int64_t ns = named[static_cast<size_t>(k)];
    if (ns <= 0) continue;
    named_ns += ns;
    parts += std::string(parts.empty() ? "" : ", ") + outside_kind_name(k) + " " + ms_text(ns);
  }
  if (!parts.empty() && outside_ns > named_ns) parts += ", other " + ms_text(outside_ns - named_ns);
  return host_finding(
      "outside_steps",
      "The job spends " + pct_text(static_cast<double>(outside_ns) / static_cast<double>(span_ns)) +
          " of its time outside training steps",
      ms_text(outside_ns) + " of " + ms_text(span_ns) + " between or around " + std::to_string(steps) + " steps" +
          (parts.empty() ? "" : " (" + parts + ")"),
      "look at what runs between steps (evaluation, checkpoint saving, logging, data re-sharding): make it "
      "asynchronous or less frequent; or mark the steps so they cover the loop's work",
      outside_ns, span_ns);
}

}  // namespace gpuutil
