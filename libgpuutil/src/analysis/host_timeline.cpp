// Builds per-thread host state lists and the correlation index.
#include "analysis/host_timeline.h"

#include <algorithm>
#include <map>

namespace gpuutil {

namespace {

// Union of possibly nested/overlapping named intervals; each merged interval
// keeps the name of its earliest-starting (outermost) member.
NamedIntervalList merge_named(std::vector<NamedInterval> raw) {
  raw.erase(std::remove_if(raw.begin(), raw.end(), [](const NamedInterval& i) { return i.end_ns <= i.start_ns; }),
            raw.end());
  const auto outer_first = [](const NamedInterval& a, const NamedInterval& b) {
    return a.start_ns < b.start_ns || (a.start_ns == b.start_ns && a.end_ns > b.end_ns);
  };
  if (!std::is_sorted(raw.begin(), raw.end(), outer_first)) std::stable_sort(raw.begin(), raw.end(), outer_first);
  // Compact in place: no second allocation for lists of millions of ranges.
  size_t n = 0;
  for (size_t k = 0; k < raw.size(); ++k) {
    if (n > 0 && raw[k].start_ns < raw[n - 1].end_ns) {
      raw[n - 1].end_ns = std::max(raw[n - 1].end_ns, raw[k].end_ns);
    } else {
      raw[n++] = raw[k];
    }
  }
  raw.resize(n);
  return raw;
}

// correlation id -> api call index. CUPTI and Kineto hand out correlation
// ids densely, so a flat table indexed by (id - min) is the fast path; a
// hash map covers sparse ids.
class CorrelationIndex {
 public:
  explicit CorrelationIndex(const std::vector<HostApiCall>& calls) {
    uint64_t lo = UINT64_MAX, hi = 0;
    size_t n = 0;
    for (const auto& c : calls) {
      if (c.correlation_id == 0) continue;
      lo = std::min(lo, c.correlation_id);
      hi = std::max(hi, c.correlation_id);
      ++n;
    }
    if (n > 0 && hi - lo < 4 * n + 4096) {
      base_ = lo;
      flat_.assign(hi - lo + 1, kNoLaunch);
    } else {
      sparse_.reserve(n);
    }
  }
  void insert(uint64_t id, uint32_t index) {
    if (!flat_.empty()) {
      flat_[id - base_] = index;
    } else {
      sparse_.emplace(id, index);
    }
  }
  uint32_t find(uint64_t id) const {
    if (!flat_.empty()) return (id >= base_ && id - base_ < flat_.size()) ? flat_[id - base_] : kNoLaunch;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? kNoLaunch : it->second;
  }
  bool empty() const { return flat_.empty() && sparse_.empty(); }

 private:
  uint64_t base_ = 0;
  std::vector<uint32_t> flat_;
  std::unordered_map<uint64_t, uint32_t> sparse_;
};

}  // namespace

size_t first_ending_after(const NamedIntervalList& list, int64_t t_ns) {
  return static_cast<size_t>(std::upper_bound(list.begin(), list.end(), t_ns,
                                              [](int64_t t, const NamedInterval& i) { return t < i.end_ns; }) -
                             list.begin());
}

long find_containing(const NamedIntervalList& list, int64_t t_ns) {
  const size_t i = first_ending_after(list, t_ns);
  if (i < list.size() && list[i].start_ns <= t_ns) return static_cast<long>(i);
  return -1;
}

HostTimelines build_host_timelines(const EventStore& store) {
  HostTimelines out;
  size_t n_threads = store.threads.size();
  for (const auto& r : store.ranges) n_threads = std::max<size_t>(n_threads, r.thread + 1);
  for (const auto& c : store.api_calls) n_threads = std::max<size_t>(n_threads, c.thread + 1);
  out.threads.resize(n_threads);

  struct Raw {
    std::vector<NamedInterval> ops, dataloader, collective, sync, annotations;
  };
  std::vector<Raw> raw(n_threads);
  {
    // Reserve once: these lists hold millions of ranges in long runs.
    std::vector<size_t> ops(n_threads), others(n_threads);
    for (const auto& r : store.ranges) {
      ++(r.category == RangeCategory::kOp || r.category == RangeCategory::kHostSync ? ops : others)[r.thread];
    }
    for (size_t t = 0; t < n_threads; ++t) {
      raw[t].ops.reserve(ops[t]);
      raw[t].annotations.reserve(others[t]);
    }
  }
  for (const auto& r : store.ranges) {
    auto& t = raw[r.thread];
    out.threads[r.thread].has_events = true;
    const NamedInterval iv{r.start_ns, r.end_ns, r.name};
    switch (r.category) {
      case RangeCategory::kStep: continue;  // the window itself, not a state
      case RangeCategory::kOp: t.ops.push_back(iv); continue;
      case RangeCategory::kHostSync:
        t.ops.push_back(iv);
        t.sync.push_back(iv);
        continue;
      case RangeCategory::kDataloader: t.dataloader.push_back(iv); break;
      case RangeCategory::kCollective: t.collective.push_back(iv); break;
      default: break;
    }
    t.annotations.push_back(iv);
  }
  for (size_t i = 0; i < n_threads; ++i) {
    out.threads[i].ops = merge_named(std::move(raw[i].ops));
    out.threads[i].annotations = merge_named(std::move(raw[i].annotations));
  }
  CorrelationIndex launch_by_correlation(store.api_calls);
  for (uint32_t i = 0; i < store.api_calls.size(); ++i) {
    const auto& c = store.api_calls[i];
    if (c.correlation_id != 0 && c.kind != HostApiKind::kOther) launch_by_correlation.insert(c.correlation_id, i);
  }
  // An async copy to or from pageable memory blocks the host like a sync
  // (the driver stages it through a pinned buffer).
  std::vector<bool> pageable_copy(store.api_calls.size(), false);
  for (const auto& a : store.activities) {
    if (a.kind != ActivityKind::kMemcpy || !a.host_pageable || a.correlation_id == 0) continue;
    const uint32_t call = launch_by_correlation.find(a.correlation_id);
    if (call != kNoLaunch && store.api_calls[call].kind == HostApiKind::kAsyncCopy) pageable_copy[call] = true;
  }
  for (uint32_t i = 0; i < store.api_calls.size(); ++i) {
    const auto& c = store.api_calls[i];
    out.threads[c.thread].has_events = true;
    if (c.kind == HostApiKind::kSynchronize || c.kind == HostApiKind::kBlockingCopy || pageable_copy[i]) {
      // Name a sync by the outermost op that issued it (aten::item, aten::to)
      // when there is one; the API name otherwise.
      const auto& ops = out.threads[c.thread].ops;
      const long op = find_containing(ops, c.start_ns);
      raw[c.thread].sync.push_back({c.start_ns, c.end_ns, op >= 0 ? ops[op].name : c.name});
    }
  }
  for (size_t i = 0; i < n_threads; ++i) {
    out.threads[i].dataloader = merge_named(std::move(raw[i].dataloader));
    out.threads[i].collective = merge_named(std::move(raw[i].collective));
    out.threads[i].sync = merge_named(std::move(raw[i].sync));
  }

  std::map<int32_t, std::unordered_map<uint32_t, uint64_t>> launches;
  out.launch_of.assign(store.activities.size(), kNoLaunch);
  if (!launch_by_correlation.empty()) {
    int32_t last_device = 0;
    auto* per_device = &launches[0];
    // Consecutive launches mostly share a (device, thread): keep its counter
    // (unordered_map elements never move, even on rehash).
    uint32_t last_thread = 0;
    uint64_t* counter = nullptr;
    for (size_t k = 0; k < store.activities.size(); ++k) {
      const auto& a = store.activities[k];
      if (a.correlation_id == 0) continue;
      const uint32_t launch = launch_by_correlation.find(a.correlation_id);
      if (launch == kNoLaunch) continue;
      out.launch_of[k] = launch;
      const uint32_t thread = store.api_calls[launch].thread;
      if (a.device != last_device) {
        last_device = a.device;
        per_device = &launches[a.device];
        counter = nullptr;
      }
      if (!counter || thread != last_thread) {
        last_thread = thread;
        counter = &(*per_device)[thread];
      }
      ++*counter;
    }
  }
  for (const auto& [device, per_thread] : launches) {
    int64_t best = -1;
    uint64_t best_n = 0;
    for (const auto& [thread, n] : per_thread) {
      if (n > best_n) {
        best = thread;
        best_n = n;
      }
    }
    out.main_thread_by_device[device] = best;
  }
  return out;
}

}  // namespace gpuutil
