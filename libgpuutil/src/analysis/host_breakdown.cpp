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
#include <limits>
#include <tuple>

#include "analysis/blocking_calls.h"

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
    case RangeCategory::kStep:
    case RangeCategory::kPython: return HostCategory::kOther;
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
using Key = HostBreakdownIndex::Scratch::Key;
void insert_key(std::vector<Key>& keys, const Key& k) { keys.insert(std::lower_bound(keys.begin(), keys.end(), k), k); }
void erase_key(std::vector<Key>& keys, const Key& k) {
  auto it = std::lower_bound(keys.begin(), keys.end(), k);
  if (it != keys.end() && *it == k) keys.erase(it);
}
Key active_key(int64_t start_ns, int64_t end_ns, uint32_t i) { return {start_ns, -end_ns, i}; }

}  // namespace

HostBreakdownIndex::HostBreakdownIndex(const EventStore& store)
    : store_(store), waits_(collective_waits(store)), by_thread_(store.threads.size()) {
  // Per thread, references to the store's ranges and blocking API calls (not
  // copies: a long run has millions of ranges per thread).
  const std::vector<uint8_t> blocking = blocking_api_calls(store);
  auto slot = [this](uint32_t thread) -> std::vector<Ref>& {
    if (thread >= by_thread_.size()) by_thread_.resize(thread + 1);
    return by_thread_[thread];
  };
  {
    // Reserve once.
    std::vector<size_t> n(by_thread_.size());
    auto bump = [&n](uint32_t t) {
      if (t >= n.size()) n.resize(t + 1);
      ++n[t];
    };
    for (const auto& r : store.ranges) bump(r.thread);
    for (size_t i = 0; i < store.api_calls.size(); ++i) {
      if (blocking[i]) bump(store.api_calls[i].thread);
    }
    for (const auto& w : waits_) bump(w.thread);
    for (size_t t = 0; t < n.size(); ++t) slot(static_cast<uint32_t>(t)).reserve(n[t]);
  }
  std::vector<int64_t> last_start(by_thread_.size(), std::numeric_limits<int64_t>::min());
  std::vector<uint8_t> unsorted(by_thread_.size(), 0);
  max_duration_ns_.assign(by_thread_.size(), 0);
  for (uint32_t i = 0; i < store.ranges.size(); ++i) {
    const auto& r = store.ranges[i];
    // Steps are the window, Python frames only name time (idle culprits).
    if (r.category == RangeCategory::kStep || r.category == RangeCategory::kPython || r.end_ns <= r.start_ns) continue;
    slot(r.thread).push_back({i, Source::kRange});
    if (r.start_ns < last_start[r.thread]) unsorted[r.thread] = 1;
    last_start[r.thread] = r.start_ns;
    max_duration_ns_[r.thread] = std::max(max_duration_ns_[r.thread], r.end_ns - r.start_ns);
  }
  std::vector<size_t> ranges_end(by_thread_.size());
  for (size_t t = 0; t < by_thread_.size(); ++t) ranges_end[t] = by_thread_[t].size();
  std::vector<int64_t> last_api_start(by_thread_.size(), std::numeric_limits<int64_t>::min());
  for (uint32_t i = 0; i < store.api_calls.size(); ++i) {
    const auto& c = store.api_calls[i];
    if (c.end_ns <= c.start_ns) continue;
    if (!blocking[i]) continue;
    slot(c.thread).push_back({i, Source::kApi});
    if (c.start_ns < last_api_start[c.thread]) unsorted[c.thread] = 1;
    last_api_start[c.thread] = c.start_ns;
    max_duration_ns_[c.thread] = std::max(max_duration_ns_[c.thread], c.end_ns - c.start_ns);
  }
  std::vector<size_t> apis_end(by_thread_.size());
  for (size_t t = 0; t < by_thread_.size(); ++t) apis_end[t] = by_thread_[t].size();
  for (uint32_t i = 0; i < waits_.size(); ++i) {  // by thread, then start
    const auto& w = waits_[i];
    slot(w.thread).push_back({i, Source::kWait});
    max_duration_ns_[w.thread] = std::max(max_duration_ns_[w.thread], w.end_ns - w.start_ns);
  }
  for (size_t t = 0; t < by_thread_.size(); ++t) {
    auto& refs = by_thread_[t];
    const auto by_start = [this](Ref a, Ref b) { return start_of(a) < start_of(b); };
    // Ranges, blocking API calls, then collective waits: runs that are
    // usually sorted already, so linear merges replace a full sort.
    const auto mid = refs.begin() + static_cast<long>(ranges_end[t]);
    const auto waits = refs.begin() + static_cast<long>(apis_end[t]);
    if (!unsorted[t]) {
      if (mid != refs.begin() && mid != waits && start_of(*mid) < start_of(*(mid - 1))) {
        std::inplace_merge(refs.begin(), mid, waits, by_start);
      }
      if (waits != refs.begin() && waits != refs.end()) std::inplace_merge(refs.begin(), waits, refs.end(), by_start);
    } else {
      std::stable_sort(refs.begin(), refs.end(), by_start);
    }
  }
  // Forward/backward phases of a trace without module ranges
  // (autograd_phases.h), merged into each thread's sorted references.
  phases_ = autograd_phases(store);
  for (uint32_t i = 0; i < phases_.size(); ++i) {
    const auto& p = phases_[i];
    auto& refs = slot(p.thread);
    refs.push_back({i, Source::kPhase});
    max_duration_ns_[p.thread] = std::max(max_duration_ns_[p.thread], p.end_ns - p.start_ns);
    const bool last_of_thread = i + 1 == phases_.size() || phases_[i + 1].thread != p.thread;
    if (last_of_thread) {
      // This thread's phases (in start order) follow its other references.
      auto first = refs.end() - 1;
      while (first != refs.begin() && (first - 1)->source == Source::kPhase) --first;
      std::inplace_merge(refs.begin(), first, refs.end(),
                         [this](Ref a, Ref b) { return start_of(a) < start_of(b); });
    }
  }
}

HostBreakdownIndex::Item HostBreakdownIndex::item(Ref r) const {
  if (r.source == Source::kApi) {
    const auto& c = store_.api_calls[r.index];
    return {c.start_ns, c.end_ns, c.name, HostCategory::kHostSync, false, true};
  }
  if (r.source == Source::kWait) {
    const auto& w = waits_[r.index];
    return {w.start_ns, w.end_ns, w.name, HostCategory::kCollective, false, false};
  }
  if (r.source == Source::kPhase) {  // unnamed: its time is named by the outermost op, or by nothing
    const auto& p = phases_[r.index];
    return {p.start_ns, p.end_ns, kNoName, p.category, false, true};
  }
  const auto& g = store_.ranges[r.index];
  return {g.start_ns, g.end_ns, g.name, host_category(g.category), g.category == RangeCategory::kOp, false};
}

std::vector<HostThreadStepReport> HostBreakdownIndex::step(int64_t start_ns, int64_t end_ns, size_t top_n) const {
  Scratch scratch;
  return step(start_ns, end_ns, top_n, scratch);
}

std::vector<HostThreadStepReport> HostBreakdownIndex::step(int64_t start_ns, int64_t end_ns, size_t top_n,
                                                           Scratch& scratch) const {
  std::vector<HostThreadStepReport> out;
  if (end_ns <= start_ns) return out;
  for (size_t t = 0; t < by_thread_.size(); ++t) {
    const auto& all = by_thread_[t];
    // Ranges overlapping the window, clipped to it. Nothing starting before
    // start_ns - (longest range) can reach the window: skip it by bisection,
    // so each step costs its own ranges, not the whole run's.
    std::vector<Item>& items = scratch.items;
    items.clear();
    const int64_t from_ns = start_ns - max_duration_ns_[t];
    auto first = std::lower_bound(all.begin(), all.end(), from_ns,
                                  [this](Ref r, int64_t v) { return start_of(r) < v; });
    for (auto p = first; p != all.end(); ++p) {
      if (start_of(*p) >= end_ns) break;
      Item c = item(*p);
      if (c.end_ns <= start_ns) continue;
      c.start_ns = std::max(c.start_ns, start_ns);
      c.end_ns = std::min(c.end_ns, end_ns);
      items.push_back(c);
    }
    if (items.empty()) continue;
    const auto n = static_cast<uint32_t>(items.size());

    // Boundary events in (time, is_start, item) order: ends sort before
    // starts at the same time so back-to-back ranges never look nested.
    // Clipped starts are already in item order; only the ends are sorted
    // (usually they are too), then the two runs are merged.
    std::vector<uint32_t>& ends = scratch.ends;
    ends.resize(n);
    for (uint32_t i = 0; i < n; ++i) ends[i] = i;
    const auto by_end = [&items](uint32_t a, uint32_t b) {
      return items[a].end_ns != items[b].end_ns ? items[a].end_ns < items[b].end_ns : a < b;
    };
    if (!std::is_sorted(ends.begin(), ends.end(), by_end)) std::sort(ends.begin(), ends.end(), by_end);

    auto& active = scratch.active;  // [category], then [kHostCategoryCount] = ops
    for (auto& a : active) a.clear();
    std::vector<Key>& ops = active[kHostCategoryCount];  // active framework ops: name "other" time and API syncs
    scratch.credited.assign(n, 0);
    auto& tally = scratch.tally;
    auto& slots = scratch.slot;
    tally.clear();
    HostThreadStepReport rep;
    rep.thread = static_cast<uint32_t>(t);
    if (t < store_.threads.size()) {
      rep.tid = store_.threads[t].display_tid();
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
        if (!ops.empty()) who = std::get<2>(ops.front());
      } else {
        who = std::get<2>(active[idx(winner)].front());
        if (items[static_cast<size_t>(who)].is_api && !ops.empty()) who = std::get<2>(ops.front());
      }
      if (who < 0) return;
      const Item& w = items[static_cast<size_t>(who)];
      if (w.is_api && w.name == kNoName) return;  // an autograd phase with no op over this stretch
      const size_t key = static_cast<size_t>(w.name) * 8 + idx(winner);
      if (key >= slots.size()) slots.resize((static_cast<size_t>(w.name) + 1) * 8, 0);
      if (slots[key] == 0) {
        tally.push_back({w.name, static_cast<uint32_t>(idx(winner)), 0, 0});
        slots[key] = static_cast<uint32_t>(tally.size());
      }
      auto& nt = tally[slots[key] - 1];
      nt.ns += hi - lo;
      if (!scratch.credited[static_cast<size_t>(who)]) {
        scratch.credited[static_cast<size_t>(who)] = 1;
        ++nt.count;
      }
    };

    int64_t cursor = start_ns;
    uint32_t next_start = 0, next_end = 0;
    while (next_end < n) {
      const bool is_start = next_start < n && items[next_start].start_ns < items[ends[next_end]].end_ns;
      const uint32_t i = is_start ? next_start++ : ends[next_end++];
      const Item& it = items[i];
      const int64_t time_ns = is_start ? it.start_ns : it.end_ns;
      credit(cursor, time_ns);
      cursor = time_ns;
      const auto key = active_key(it.start_ns, it.end_ns, i);
      // Ops count as "other" here (their category is kOther) and also name
      // API-level syncs.
      auto& set = active[idx(it.category)];
      if (is_start) {
        if (it.category != HostCategory::kOther) insert_key(set, key);
        if (it.is_op) insert_key(ops, key);
      } else {
        erase_key(set, key);
        erase_key(ops, key);
      }
    }
    credit(cursor, end_ns);

    for (const auto& e : tally) slots[static_cast<size_t>(e.name) * 8 + e.category] = 0;
    std::sort(tally.begin(), tally.end(), [](const Scratch::Tally& a, const Scratch::Tally& b) {
      if (a.category != b.category) return a.category < b.category;
      return a.ns != b.ns ? a.ns > b.ns : a.name < b.name;
    });
    size_t taken = 0;
    for (size_t k = 0; k < tally.size(); ++k) {
      if (k > 0 && tally[k].category != tally[k - 1].category) taken = 0;
      if (taken++ >= top_n) continue;
      rep.culprits[tally[k].category].push_back(
          {std::string(store_.names.view(tally[k].name)), tally[k].ns, tally[k].count});
    }
    out.push_back(std::move(rep));
  }
  return out;
}

}  // namespace gpuutil
