// Input pipelines' batch waits and periodic stalls (see loaders.h).
#include "analysis/loaders.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

namespace gpuutil {

namespace {

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<long>((v.size() - 1) / 2);  // lower median
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// The wait that starts the slow group of `sorted` (ascending): the split
// with the largest between-group variance (Otsu's method over the waits
// themselves, not their logarithms: a loaded host spreads the fast
// batches' waits over 0.02-10 ms, a spread that is wide in log scale and
// small beside a stall of tens of ms). nullopt when all waits are equal.
std::optional<int64_t> slow_group_start(const std::vector<int64_t>& sorted) {
  const size_t n = sorted.size();
  double total = 0;
  for (int64_t w : sorted) total += static_cast<double>(w);
  double below = 0, best = -1;
  std::optional<int64_t> start;
  for (size_t j = 1; j < n; ++j) {
    below += static_cast<double>(sorted[j - 1]);
    if (sorted[j] == sorted[j - 1]) continue;
    const double n0 = static_cast<double>(j), n1 = static_cast<double>(n - j);
    const double gap = (total - below) / n1 - below / n0;
    const double between = n0 * n1 * gap * gap;
    if (between > best) {
      best = between;
      start = sorted[j];
    }
  }
  return start;
}

}  // namespace

LoaderWaits::LoaderWaits(const EventStore& store) : store_(store) {
  // Outermost wait ranges per thread: a wait nested in another (PyTorch's
  // range inside a wrapper's) is the same batch.
  std::vector<const HostRange*> all;
  for (const auto& r : store.ranges) {
    if (r.category == RangeCategory::kDataloader && r.end_ns > r.start_ns) all.push_back(&r);
  }
  std::sort(all.begin(), all.end(), [](const HostRange* a, const HostRange* b) {
    return std::make_tuple(a->thread, a->start_ns, -a->end_ns) < std::make_tuple(b->thread, b->start_ns, -b->end_ns);
  });
  const HostRange* outer = nullptr;
  for (const HostRange* r : all) {
    if (outer != nullptr && outer->thread == r->thread && r->start_ns < outer->end_ns) continue;
    outer = r;
    waits_.push_back({r->end_ns, r->end_ns - r->start_ns, r->name});
  }
  std::stable_sort(waits_.begin(), waits_.end(), [](const Wait& a, const Wait& b) { return a.end_ns < b.end_ns; });
}

void LoaderWaits::add(int64_t lo_ns, int64_t hi_ns, std::vector<LoaderReport>& into) const {
  auto it = std::lower_bound(waits_.begin(), waits_.end(), lo_ns,
                             [](const Wait& w, int64_t t) { return w.end_ns < t; });
  for (; it != waits_.end() && it->end_ns < hi_ns; ++it) {
    add_batch_wait(loader_of(into, store_.rank, std::string(store_.names.view(it->name))), it->dur_ns);
  }
}

LoaderReport& loader_of(std::vector<LoaderReport>& loaders, int32_t rank, const std::string& name) {
  for (auto& l : loaders) {
    if (l.rank == rank && l.name == name) return l;
  }
  loaders.emplace_back();
  loaders.back().rank = rank;
  loaders.back().name = name;
  return loaders.back();
}

void add_batch_wait(LoaderReport& loader, int64_t wait_ns) {
  ++loader.batches;
  loader.wait_ns += wait_ns;
  // Trimmed a batch of waits at a time (amortised O(1)); finish_loaders
  // and periodic_stall keep to the latest kBatchWaitsKept.
  auto& waits = loader.batch_waits_ns;
  if (waits.size() >= 2 * kBatchWaitsKept) waits.erase(waits.begin(), waits.end() - static_cast<long>(kBatchWaitsKept));
  waits.push_back(wait_ns);
}

void fold_loader(LoaderReport& run, const LoaderReport& step) {
  if (step.settings.any()) run.settings = step.settings;
  // The step's own counts, with only its latest waits listed: count the
  // ones not listed first.
  const auto listed = static_cast<uint64_t>(step.batch_waits_ns.size());
  int64_t listed_ns = 0;
  for (int64_t w : step.batch_waits_ns) listed_ns += w;
  run.batches += step.batches > listed ? step.batches - listed : 0;
  run.wait_ns += step.wait_ns - listed_ns;
  for (int64_t w : step.batch_waits_ns) add_batch_wait(run, w);
}

void finish_loaders(std::vector<LoaderReport>& loaders,
                    const std::vector<std::pair<std::string, LoaderSettings>>& settings) {
  std::sort(loaders.begin(), loaders.end(), [](const LoaderReport& a, const LoaderReport& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.name < b.name;
  });
  for (auto& l : loaders) {
    for (const auto& [name, s] : settings) {
      if (name == l.name) l.settings = s;
    }
    if (!l.settings.num_workers && l.name.find("_SingleProcessDataLoaderIter") != std::string::npos) {
      l.settings.num_workers = 0;
    }
    auto& waits = l.batch_waits_ns;
    if (waits.size() > kBatchWaitsKept) waits.erase(waits.begin(), waits.end() - static_cast<long>(kBatchWaitsKept));
    l.periodic_stall = periodic_stall(waits);
  }
}

std::optional<PeriodicStall> periodic_stall(const std::vector<int64_t>& all_waits_ns) {
  // The latest kBatchWaitsKept waits.
  const std::vector<int64_t> waits_ns(
      all_waits_ns.end() - static_cast<long>(std::min(all_waits_ns.size(), kBatchWaitsKept)), all_waits_ns.end());
  const size_t n = waits_ns.size();
  if (n < 2 * kMinStallBatches) return std::nullopt;
  std::vector<int64_t> sorted = waits_ns;
  std::sort(sorted.begin(), sorted.end());
  const std::optional<int64_t> group_start = slow_group_start(sorted);
  if (!group_start) return std::nullopt;
  const int64_t slow_from = std::max(kStallFloorNs, *group_start);
  std::vector<size_t> slow;
  std::vector<int64_t> slow_waits, other_waits;
  int64_t slow_ns = 0, all_ns = 0;
  for (size_t i = 0; i < n; ++i) {
    all_ns += waits_ns[i];
    if (waits_ns[i] >= slow_from) {
      slow.push_back(i);
      slow_waits.push_back(waits_ns[i]);
      slow_ns += waits_ns[i];
    } else {
      other_waits.push_back(waits_ns[i]);
    }
  }
  if (slow.size() < kMinStallBatches || other_waits.empty()) return std::nullopt;
  std::map<size_t, size_t> distances;
  for (size_t k = 1; k < slow.size(); ++k) ++distances[slow[k] - slow[k - 1]];
  size_t period = 0, seen = 0;
  for (const auto& [d, count] : distances) {
    if (count > seen) {  // ties: the shorter distance (map order)
      period = d;
      seen = count;
    }
  }
  if (period < 2 || period > static_cast<size_t>(kMaxStallPeriod)) return std::nullopt;
  // A slow batch that came quickly (the step before it was long enough for
  // the slow worker to catch up) leaves a distance of 2k: still the period.
  size_t in_period = 0;
  for (const auto& [d, count] : distances) in_period += d % period == 0 ? count : 0;
  if (4 * in_period < 3 * (slow.size() - 1)) return std::nullopt;
  if (2 * slow.size() * period < n) return std::nullopt;  // at least half of n / period
  if (2 * slow_ns < all_ns) return std::nullopt;
  PeriodicStall s;
  s.period = static_cast<int64_t>(period);
  s.slow_batches = slow.size();
  s.slow_wait_ns = slow_ns;
  s.slow_wait_p50_ns = median(std::move(slow_waits));
  s.other_wait_p50_ns = median(std::move(other_waits));
  if (s.slow_wait_p50_ns < kStallOverOthers * std::max<int64_t>(s.other_wait_p50_ns, 1)) return std::nullopt;
  return s;
}

}  // namespace gpuutil
