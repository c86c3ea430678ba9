// Builds per-thread host state lists and the correlation index.
#include "analysis/host_timeline.h"

#include <algorithm>
#include <limits>
#include <map>

#include "analysis/blocking_calls.h"
#include "analysis/correlation_index.h"
#include "analysis/culprit.h"
#include "gpuutil/range_classify.h"

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

// The innermost of possibly nested intervals at every instant: disjoint,
// sorted pieces, each named by the latest-starting interval still open.
// Tolerates improper overlap (an inner range outliving its parent).
NamedIntervalList innermost_named(std::vector<NamedInterval> raw) {
  raw.erase(std::remove_if(raw.begin(), raw.end(), [](const NamedInterval& i) { return i.end_ns <= i.start_ns; }),
            raw.end());
  const auto outer_first = [](const NamedInterval& a, const NamedInterval& b) {
    return a.start_ns < b.start_ns || (a.start_ns == b.start_ns && a.end_ns > b.end_ns);
  };
  if (!std::is_sorted(raw.begin(), raw.end(), outer_first)) std::stable_sort(raw.begin(), raw.end(), outer_first);
  NamedIntervalList out;
  out.reserve(raw.size());
  std::vector<NamedInterval> open;  // nesting stack, innermost last
  int64_t cur = std::numeric_limits<int64_t>::min();
  const auto emit = [&](int64_t to) {
    if (!open.empty() && to > cur) {
      const NameId name = open.back().name;
      if (!out.empty() && out.back().end_ns == cur && out.back().name == name) {
        out.back().end_ns = to;
      } else {
        out.push_back({cur, to, name});
      }
    }
    cur = std::max(cur, to);
  };
  // Advance to t: close every interval that ends by t, naming the time
  // before each end by the interval then innermost.
  const auto advance = [&](int64_t t) {
    while (!open.empty()) {
      if (open.back().end_ns <= cur) {
        open.pop_back();  // ended under an interval that outlived it
        continue;
      }
      if (open.back().end_ns > t) break;
      emit(open.back().end_ns);
      open.pop_back();
    }
    emit(t);
  };
  for (const auto& r : raw) {
    advance(r.start_ns);
    open.push_back(r);
  }
  advance(std::numeric_limits<int64_t>::max());
  return out;
}

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
    std::vector<NamedInterval> ops, dataloader, collective, sync, leaf, python, phases, active;
    std::vector<UnitRange> units;      // ops, host syncs, collectives: what may dispatch device work
    std::vector<int64_t> queue_starts;  // calls that queue device work
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
      raw[t].leaf.reserve(ops[t] + others[t]);
    }
  }
  std::vector<NamedIntervalList> calls(n_threads);
  {
    std::vector<size_t> per_thread(n_threads);
    for (const auto& c : store.api_calls) ++per_thread[c.thread];
    for (size_t t = 0; t < n_threads; ++t) calls[t].reserve(per_thread[t]);
  }
  for (const auto& c : store.api_calls) {
    if (c.kind != HostApiKind::kOther && c.kind != HostApiKind::kSynchronize) raw[c.thread].queue_starts.push_back(c.start_ns);
    calls[c.thread].push_back({c.start_ns, c.end_ns, c.name});
  }
  for (size_t i = 0; i < n_threads; ++i) out.threads[i].calls = merge_named(std::move(calls[i]));
  for (const auto& r : store.ranges) {
    auto& t = raw[r.thread];
    out.threads[r.thread].has_events = true;
    const NamedInterval iv{r.start_ns, r.end_ns, r.name};
    t.active.push_back(iv);
    if (r.category == RangeCategory::kOp || r.category == RangeCategory::kHostSync ||
        r.category == RangeCategory::kCollective) {
      t.units.push_back({r.start_ns, r.end_ns, r.name, r.category == RangeCategory::kOp});
    }
    if (r.category == RangeCategory::kPython) {
      t.python.push_back(iv);
      continue;
    }
    if (r.category != RangeCategory::kStep && r.name != kNoName) {
      (is_phase_range(store.names.view(r.name)) ? t.phases : t.leaf).push_back(iv);
    }
    switch (r.category) {
      case RangeCategory::kOp: t.ops.push_back(iv); break;
      case RangeCategory::kHostSync:
        t.ops.push_back(iv);
        t.sync.push_back(iv);
        break;
      case RangeCategory::kDataloader: t.dataloader.push_back(iv); break;
      case RangeCategory::kCollective: t.collective.push_back(iv); break;
      default: break;  // steps are the window; other ranges only name time (leaf, phases)
    }
  }
  for (size_t i = 0; i < n_threads; ++i) {
    auto& t = raw[i];
    // Regions (culprit.h) are left out of the ops: the units inside name
    // the work they queue.
    const std::vector<uint8_t> region = region_flags(t.units, std::move(t.queue_starts), store.names);
    std::vector<NamedInterval> regions;
    for (size_t k = 0; k < t.units.size(); ++k) {
      if (region[k]) regions.push_back({t.units[k].start_ns, t.units[k].end_ns, t.units[k].name});
    }
    if (!regions.empty()) {
      std::sort(regions.begin(), regions.end(), [](const NamedInterval& a, const NamedInterval& b) {
        return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
      });
      t.ops.erase(std::remove_if(t.ops.begin(), t.ops.end(),
                                 [&](const NamedInterval& o) {
                                   const auto at = std::lower_bound(
                                       regions.begin(), regions.end(), o,
                                       [](const NamedInterval& a, const NamedInterval& b) {
                                         return a.start_ns != b.start_ns ? a.start_ns < b.start_ns
                                                                         : a.end_ns < b.end_ns;
                                       });
                                   return at != regions.end() && at->start_ns == o.start_ns &&
                                          at->end_ns == o.end_ns && at->name == o.name;
                                 }),
                  t.ops.end());
    }
    std::vector<UnitRange>().swap(t.units);
    out.threads[i].regions = merge_named(std::move(regions));
    out.threads[i].ops = merge_named(std::move(t.ops));
    if (!t.python.empty()) {
      // Python frames and ranges nest in one another: the innermost names the time.
      std::vector<NamedInterval> both = t.leaf;
      both.insert(both.end(), t.python.begin(), t.python.end());
      out.threads[i].named = innermost_named(std::move(both));
      std::vector<NamedInterval>().swap(t.python);
    }
    out.threads[i].leaf = innermost_named(std::move(t.leaf));
    out.threads[i].phases = innermost_named(std::move(t.phases));
    out.threads[i].active = merge_named(std::move(t.active));
  }
  CorrelationIndex launch_by_correlation(store.api_calls);
  for (uint32_t i = 0; i < store.api_calls.size(); ++i) {
    const auto& c = store.api_calls[i];
    if (c.correlation_id != 0 && c.kind != HostApiKind::kOther) launch_by_correlation.insert(c.correlation_id, i);
  }
  const std::vector<uint8_t> blocking = blocking_api_calls(store, launch_by_correlation);
  for (uint32_t i = 0; i < store.api_calls.size(); ++i) {
    const auto& c = store.api_calls[i];
    out.threads[c.thread].has_events = true;
    if (blocking[i]) {
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
      // A kernel launched from inside a host collective range is part of
      // that collective, whatever its library calls it.
      if (a.kind == ActivityKind::kKernel && !a.is_communication &&
          find_containing(out.threads[thread].collective, store.api_calls[launch].start_ns) >= 0) {
        if (out.in_collective.empty()) out.in_collective.assign(store.activities.size(), 0);
        out.in_collective[k] = 1;
      }
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
