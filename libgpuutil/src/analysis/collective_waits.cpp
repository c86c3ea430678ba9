// Training threads waiting for the collectives they issued in backward
// (collective_waits.h).
#include "analysis/collective_waits.h"

#include <algorithm>
#include <string_view>
#include <tuple>

namespace gpuutil {

namespace {

struct Execution {  // a gloo collective on a worker thread
  int64_t start_ns;
  int64_t end_ns;
  uint32_t thread;
  NameId name;
  bool queued;
};

bool is_execution(const EventStore& s, const HostRange& r) {
  return r.category == RangeCategory::kCollective && s.names.view(r.name).substr(0, 5) == "gloo:";
}

}  // namespace

std::vector<CollectiveWait> collective_waits(const EventStore& s) {
  std::vector<CollectiveWait> out;
  std::vector<Execution> runs;
  for (const auto& r : s.ranges) {
    if (r.end_ns > r.start_ns && is_execution(s, r)) runs.push_back({r.start_ns, r.end_ns, r.thread, r.name, false});
  }
  if (runs.empty()) return out;
  std::sort(runs.begin(), runs.end(), [](const Execution& a, const Execution& b) {
    return std::tie(a.thread, a.start_ns) < std::tie(b.thread, b.start_ns);
  });
  for (size_t i = 1; i < runs.size(); ++i) {
    const Execution& prev = runs[i - 1];
    const int64_t gap_ns = runs[i].start_ns - prev.end_ns;
    runs[i].queued = prev.thread == runs[i].thread && gap_ns >= 0 && gap_ns <= kQueuedCollectiveGapNs;
  }
  std::sort(runs.begin(), runs.end(), [](const Execution& a, const Execution& b) { return a.start_ns < b.start_ns; });

  // Per thread: its outermost backward ranges and its enqueue ranges.
  std::vector<std::vector<const HostRange*>> backward(s.threads.size()), issues(s.threads.size());
  for (const auto& r : s.ranges) {
    if (r.end_ns <= r.start_ns) continue;
    if (r.thread >= backward.size()) {
      backward.resize(r.thread + 1);
      issues.resize(r.thread + 1);
    }
    if (r.category == RangeCategory::kBackward) backward[r.thread].push_back(&r);
    if (r.category == RangeCategory::kCollective && !is_execution(s, r)) issues[r.thread].push_back(&r);
  }
  for (uint32_t t = 0; t < backward.size(); ++t) {
    auto& bw = backward[t];
    std::sort(bw.begin(), bw.end(), [](const HostRange* a, const HostRange* b) {
      return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
    });
    auto& marks = issues[t];
    std::sort(marks.begin(), marks.end(), [](const HostRange* a, const HostRange* b) { return a->end_ns < b->end_ns; });
    int64_t covered_until = INT64_MIN;
    for (const HostRange* b : bw) {
      if (b->start_ns < covered_until) continue;  // nested in the previous outermost one
      covered_until = b->end_ns;
      // Collectives other threads started inside this backward range.
      auto first = std::lower_bound(runs.begin(), runs.end(), b->start_ns,
                                    [](const Execution& e, int64_t v) { return e.start_ns < v; });
      int64_t from_ns = INT64_MIN, first_start = INT64_MIN;
      bool any = false;
      for (auto e = first; e != runs.end() && e->start_ns < b->end_ns; ++e) {
        if (e->thread == t) continue;
        if (!any) first_start = e->start_ns;
        any = true;
        if (!e->queued) from_ns = std::max(from_ns, e->start_ns);
      }
      if (!any) continue;
      if (from_ns == INT64_MIN) from_ns = first_start;
      // The thread's own last enqueue inside the range, when recorded, is exact.
      auto m = std::upper_bound(marks.begin(), marks.end(), b->end_ns,
                                [](int64_t v, const HostRange* r) { return v < r->end_ns; });
      if (m != marks.begin() && (*(m - 1))->end_ns > b->start_ns) from_ns = (*(m - 1))->end_ns;
      for (auto e = first; e != runs.end() && e->start_ns < b->end_ns; ++e) {
        if (e->thread == t) continue;
        const int64_t lo = std::max(e->start_ns, from_ns), hi = std::min(e->end_ns, b->end_ns);
        if (hi > lo) out.push_back({t, lo, hi, e->name});
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const CollectiveWait& a, const CollectiveWait& b) {
    return std::tie(a.thread, a.start_ns, a.end_ns) < std::tie(b.thread, b.start_ns, b.end_ns);
  });
  return out;
}

}  // namespace gpuutil
