// The last step's backlog and trailing unrecorded stretch (step_tail.h).
#include "analysis/step_tail.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>


namespace gpuutil {

namespace {

constexpr int64_t kMinTailNs = 1'000'000;   // an unrecorded tail shorter than this is noise
constexpr double kMinTailShare = 0.05;      // ... or than this share of the step's wall
constexpr int64_t kTailSlackNs = 1'000'000;  // the trace may go on this long after the step

}  // namespace

StepTail step_tail(const EventStore& store, const std::vector<StepWindow>& steps) {
  StepTail out;
  // "The last step" needs steps before it: with one step there is no time
  // between steps (the outside_steps finding needs two) and no other
  // step's end to compare an unrecorded tail with. (One window is also
  // what a live step is analysed as: its step never is the trace's last.)
  if (steps.size() < 2) return out;
  std::vector<size_t> order(steps.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return steps[x].start_ns < steps[y].start_ns; });
  const StepWindow& last = steps[order.back()];
  out.step = last.step;
  const int64_t end_ns = last.end_ns;

  // Per step (in start order), the latest instant anything recorded covers.
  std::vector<int64_t> recorded(order.size());
  for (size_t k = 0; k < order.size(); ++k) recorded[k] = steps[order[k]].start_ns;
  int64_t latest_start = std::numeric_limits<int64_t>::min();
  size_t hint = 0;  // events mostly come in time order: try the last step found first
  const auto record = [&](int64_t x, int64_t y, bool context_when_covering) {
    latest_start = std::max(latest_start, x);
    y = std::max(x, y);
    // First step (in start order) ending after x.
    size_t k = hint;
    const bool hinted = steps[order[k]].end_ns > x && (k == 0 || steps[order[k - 1]].end_ns <= x);
    if (!hinted) {
      k = static_cast<size_t>(std::upper_bound(order.begin(), order.end(), x,
                                               [&](int64_t t, size_t i) { return t < steps[i].end_ns; }) -
                              order.begin());
      if (k < order.size()) hint = k;
    }
    for (; k < order.size(); ++k) {
      const StepWindow& w = steps[order[k]];
      if (y > x ? w.start_ns >= y : w.start_ns > x) break;
      if (context_when_covering && x <= w.start_ns && y >= w.end_ns) continue;
      recorded[k] = std::max(recorded[k], std::min(y, w.end_ns));
    }
  };
  for (const auto& r : store.ranges) {
    if (r.category == RangeCategory::kStep) continue;
    record(r.start_ns, r.end_ns, /*context_when_covering=*/true);
  }
  for (const auto& c : store.api_calls) record(c.start_ns, c.end_ns, false);
  for (const auto& a : store.activities) record(a.start_ns, a.end_ns, false);

  const size_t li = order.size() - 1;
  const int64_t tail_ns = end_ns - recorded[li];
  int64_t others_ns = 0;
  for (size_t k = 0; k < li; ++k) {
    const StepWindow& w = steps[order[k]];
    if (recorded[k] > w.start_ns) others_ns = std::max(others_ns, w.end_ns - recorded[k]);
  }
  const bool something_recorded = recorded[li] > last.start_ns;
  if (something_recorded && tail_ns >= kMinTailNs &&
      static_cast<double>(tail_ns) >= kMinTailShare * static_cast<double>(last.wall_ns()) &&
      tail_ns > 2 * others_ns && latest_start < end_ns + kTailSlackNs) {
    out.unrecorded_from_ns = recorded[li];
    out.unrecorded_ns = tail_ns;
  }

  // The backlog: work launched before the last step ended that ran past it.
  // (Few activities end after the last step: their correlation ids are
  // looked up in one pass over the calls.)
  std::vector<std::pair<uint64_t, int64_t>> after;  // (correlation id, end) of work ending after the step
  for (const auto& a : store.activities) {
    if (a.end_ns > end_ns && a.correlation_id != 0) after.emplace_back(a.correlation_id, a.end_ns);
  }
  if (after.empty()) return out;
  std::sort(after.begin(), after.end());
  std::vector<uint8_t> launched_before(after.size(), 0);
  for (const auto& c : store.api_calls) {
    if (c.correlation_id == 0 || c.kind == HostApiKind::kOther || c.start_ns >= end_ns) continue;
    auto it = std::lower_bound(after.begin(), after.end(), std::make_pair(c.correlation_id, INT64_MIN));
    for (; it != after.end() && it->first == c.correlation_id; ++it) launched_before[it - after.begin()] = 1;
  }
  int64_t backlog_end_ns = end_ns;
  for (size_t i = 0; i < after.size(); ++i) {
    if (!launched_before[i]) continue;
    backlog_end_ns = std::max(backlog_end_ns, after[i].second);
    ++out.backlog_activities;
  }
  out.backlog_ns = backlog_end_ns - end_ns;
  return out;
}

}  // namespace gpuutil
