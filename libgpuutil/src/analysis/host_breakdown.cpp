// Host breakdown of a step per thread (see analysis/host_breakdown.h).
//
// A sweep over the boundaries of the ranges that overlap the window: between
// two consecutive boundaries the set of covering ranges is constant, so the
// whole elementary segment goes to the highest-priority category present
// (host_sync > collective > dataloader > backward > forward > optimizer >
// other) and is credited to the outermost range of that category. Segments
// partition the window, so the categories sum to its wall time exactly.
#include "analysis/host_breakdown.h"

#include <algorithm>
#include <array>
#include <tuple>
#include <unordered_map>

namespace gpuutil {

const char* to_string(HostCategory c) {
  switch (c) {
    case HostCategory::kDataloader: return "dataloader";
    case HostCategory::kForward: return "forward";
    case HostCategory::kBackward: return "backward";
    case HostCategory::kOptimizer: return "optimizer";
    case HostCategory::kHostSync: return "host_sync";
    case HostCategory::kCollective: return "collective";
    case HostCategory::kOther: return "other";
  }
  return "other";
}

HostCategory host_category(RangeCategory c) {
  switch (c) {
    case RangeCategory::kDataloader: return HostCategory::kDataloader;
    case RangeCategory::kForward: return HostCategory::kForward;
    case RangeCategory::kBackward: return HostCategory::kBackward;
    case RangeCategory::kOptimizer: return HostCategory::kOptimizer;
    case RangeCategory::kHostSync: return HostCategory::kHostSync;
    case RangeCategory::kCollective: return HostCategory::kCollective;
    case RangeCategory::kOp:
    case RangeCategory::kAnnotation:
    case RangeCategory::kStep: return HostCategory::kOther;
  }
  return HostCategory::kOther;
}

namespace {

// Highest priority first. A category nested inside another wins when it is
// higher here: .item() inside forward is host_sync, an all-reduce inside
// backward is collective, backward run inside Optimizer.step(closure) (the
// Lightning pattern) is backward, recomputed forward inside backward is
// backward.
constexpr std::array<HostCategory, kHostCategoryCount> kPriority = {
    HostCategory::kHostSync, HostCategory::kCollective, HostCategory::kDataloader, HostCategory::kBackward,
    HostCategory::kForward,  HostCategory::kOptimizer,  HostCategory::kOther,
};

size_t idx(HostCategory c) { return static_cast<size_t>(c); }

// Active ranges of one category, outermost first: earliest start, then
// latest end, then index (a strict total order).
// A sorted vector, not a std::set: ranges nest a few deep, so linear
// insert/erase on a small contiguous array beats a node allocation per op.
class ActiveSet {
 public:
  using Key = std::tuple<int64_t, int64_t, uint32_t>;
  void insert(const Key& k) { keys_.insert(std::lower_bound(keys_.begin(), keys_.end(), k), k); }
  void erase(const Key& k) {
    auto it = std::lower_bound(keys_.begin(), keys_.end(), k);
    if (it != keys_.end() && *it == k) keys_.erase(it);
  }
  bool empty() const { return keys_.empty(); }
  std::vector<Key>::const_iterator begin() const { return keys_.begin(); }

 private:
  std::vector<Key> keys_;
};
std::tuple<int64_t, int64_t, uint32_t> active_key(int64_t start_ns, int64_t end_ns, uint32_t i) {
  return {start_ns, -end_ns, i};
}

}  // namespace

HostBreakdownIndex::HostBreakdownIndex(const EventStore& store) : store_(store), by_thread_(store.threads.size()) {
  auto slot = [this](uint32_t thread) -> std::vector<Item>& {
    if (thread >= by_thread_.size()) by_thread_.resize(thread + 1);
    return by_thread_[thread];
  };
  {
    // Reserve once: a long run has millions of ranges per thread.
    std::vector<size_t> n(by_thread_.size());
    auto bump = [&n](uint32_t t) {
      if (t >= n.size()) n.resize(t + 1);
      ++n[t];
    };
    for (const auto& r : store.ranges) bump(r.thread);
    for (const auto& c : store.api_calls) {
      if (c.kind == HostApiKind::kSynchronize || c.kind == HostApiKind::kBlockingCopy) bump(c.thread);
    }
    for (size_t t = 0; t < n.size(); ++t) slot(static_cast<uint32_t>(t)).reserve(n[t]);
  }
  for (const auto& r : store.ranges) {
    if (r.category == RangeCategory::kStep || r.end_ns <= r.start_ns) continue;
    slot(r.thread).push_back({r.start_ns, r.end_ns, r.name, host_category(r.category),
                              r.category == RangeCategory::kOp, false});
  }
  std::vector<size_t> ranges_end(by_thread_.size());
  for (size_t t = 0; t < by_thread_.size(); ++t) ranges_end[t] = by_thread_[t].size();
  for (const auto& c : store.api_calls) {
    if (c.end_ns <= c.start_ns) continue;
    if (c.kind != HostApiKind::kSynchronize && c.kind != HostApiKind::kBlockingCopy) continue;
    slot(c.thread).push_back({c.start_ns, c.end_ns, c.name, HostCategory::kHostSync, false, true});
  }
  max_duration_ns_.assign(by_thread_.size(), 0);
  for (size_t t = 0; t < by_thread_.size(); ++t) {
    auto& items = by_thread_[t];
    const auto by_start = [](const Item& a, const Item& b) { return a.start_ns < b.start_ns; };
    // Ranges first, then blocking API calls: two runs that are usually
    // sorted already, so a linear merge replaces a full sort.
    const auto mid = items.begin() + static_cast<long>(std::min(ranges_end.size() > t ? ranges_end[t] : 0, items.size()));
    if (std::is_sorted(items.begin(), mid, by_start) && std::is_sorted(mid, items.end(), by_start)) {
      std::inplace_merge(items.begin(), mid, items.end(), by_start);
    } else {
      std::stable_sort(items.begin(), items.end(), by_start);
    }
    for (const auto& it : items) max_duration_ns_[t] = std::max(max_duration_ns_[t], it.end_ns - it.start_ns);
  }
}

std::vector<HostThreadStepReport> HostBreakdownIndex::step(int64_t start_ns, int64_t end_ns, size_t top_n) const {
  std::vector<HostThreadStepReport> out;
  if (end_ns <= start_ns) return out;
  for (size_t t = 0; t < by_thread_.size(); ++t) {
    const auto& all = by_thread_[t];
    // Ranges overlapping the window, clipped to it. Nothing starting before
    // start_ns - (longest range) can reach the window: skip it by bisection,
    // so each step costs its own ranges, not the whole run's.
    std::vector<Item> items;
    const int64_t from_ns = start_ns - max_duration_ns_[t];
    auto first = std::lower_bound(all.begin(), all.end(), from_ns,
                                  [](const Item& it, int64_t v) { return it.start_ns < v; });
    for (auto p = first; p != all.end(); ++p) {
      const Item& it = *p;
      if (it.start_ns >= end_ns) break;
      if (it.end_ns <= start_ns) continue;
      Item c = it;
      c.start_ns = std::max(c.start_ns, start_ns);
      c.end_ns = std::min(c.end_ns, end_ns);
      items.push_back(c);
    }
    if (items.empty()) continue;

    // Boundary events: (time, is_start, item). Ends sort before starts at
    // the same time so back-to-back ranges never look nested.
    std::vector<std::tuple<int64_t, int, uint32_t>> events;
    events.reserve(items.size() * 2);
    for (uint32_t i = 0; i < items.size(); ++i) {
      events.emplace_back(items[i].start_ns, 1, i);
      events.emplace_back(items[i].end_ns, 0, i);
    }
    std::sort(events.begin(), events.end());

    std::array<ActiveSet, kHostCategoryCount> active;
    ActiveSet ops;  // active framework ops: name "other" time and API syncs
    std::array<std::unordered_map<NameId, NamedTime>, kHostCategoryCount> tally;
    std::vector<bool> credited(items.size(), false);
    HostThreadStepReport rep;
    rep.thread = static_cast<uint32_t>(t);
    if (t < store_.threads.size()) {
      rep.tid = store_.threads[t].tid;
      rep.name = store_.threads[t].name;
    }
    rep.wall_ns = end_ns - start_ns;

    auto credit = [&](int64_t lo, int64_t hi) {
      if (hi <= lo) return;
      HostCategory winner = HostCategory::kOther;
      for (HostCategory c : kPriority) {
        if (!active[idx(c)].empty()) {
          winner = c;
          break;
        }
      }
      rep.breakdown_ns[idx(winner)] += hi - lo;
      // The culprit: the outermost range of the winning category; "other"
      // time and API-level syncs are named by the outermost op.
      long who = -1;
      if (winner == HostCategory::kOther) {
        if (!ops.empty()) who = std::get<2>(*ops.begin());
      } else {
        who = std::get<2>(*active[idx(winner)].begin());
        if (items[static_cast<size_t>(who)].is_api && !ops.empty()) who = std::get<2>(*ops.begin());
      }
      if (who < 0) return;
      const Item& w = items[static_cast<size_t>(who)];
      NamedTime& nt = tally[idx(winner)][w.name];
      nt.ns += hi - lo;
      if (!credited[static_cast<size_t>(who)]) {
        credited[static_cast<size_t>(who)] = true;
        ++nt.count;
      }
    };

    int64_t cursor = start_ns;
    for (const auto& [time_ns, is_start, i] : events) {
      credit(cursor, time_ns);
      cursor = time_ns;
      const Item& it = items[i];
      const auto key = active_key(it.start_ns, it.end_ns, i);
      // Ops count as "other" here (their category is kOther) and also name
      // API-level syncs.
      ActiveSet& set = active[idx(it.category)];
      if (is_start) {
        if (it.category != HostCategory::kOther) set.insert(key);
        if (it.is_op) ops.insert(key);
      } else {
        set.erase(key);
        ops.erase(key);
      }
    }
    credit(cursor, end_ns);

    for (size_t c = 0; c < kHostCategoryCount; ++c) {
      std::vector<std::pair<NameId, NamedTime>> v(tally[c].begin(), tally[c].end());
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
        return a.second.ns != b.second.ns ? a.second.ns > b.second.ns : a.first < b.first;
      });
      for (size_t k = 0; k < v.size() && k < top_n; ++k) {
        rep.culprits[c].push_back({std::string(store_.names.view(v[k].first)), v[k].second.ns, v[k].second.count});
      }
    }
    out.push_back(std::move(rep));
  }
  return out;
}

}  // namespace gpuutil
