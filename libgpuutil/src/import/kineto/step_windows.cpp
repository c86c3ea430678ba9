// Step window construction (see step_windows.h).
#include "import/kineto/step_windows.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>

namespace gpuutil::replay {

namespace {

void extend(int64_t start_ns, int64_t end_ns, int64_t* lo, int64_t* hi) {
  *lo = std::min(*lo, start_ns);
  *hi = std::max(*hi, end_ns);
}

}  // namespace

void build_step_windows(std::vector<StepWindow> candidates, EventStore* store) {
  store->steps.clear();
  if (candidates.empty()) {
    store->steps_source = "whole_trace";
    store->diagnostics.add(Diag::steps_missing, 1, "no ProfilerStep#N range in the trace");
    int64_t lo = std::numeric_limits<int64_t>::max();
    int64_t hi = std::numeric_limits<int64_t>::min();
    for (const auto& a : store->activities) extend(a.start_ns, a.end_ns, &lo, &hi);
    for (const auto& c : store->api_calls) extend(c.start_ns, c.end_ns, &lo, &hi);
    for (const auto& r : store->ranges) extend(r.start_ns, r.end_ns, &lo, &hi);
    if (lo <= hi) store->steps.push_back(StepWindow{0, lo, hi});
    return;
  }

  store->steps_source = "ProfilerStep";
  std::stable_sort(candidates.begin(), candidates.end(), [](const StepWindow& a, const StepWindow& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  uint64_t overlapping = 0;
  std::string example;
  // One window per step number, as the report has one entry per step: a
  // number seen again (traces concatenated, a profiler restarted, a
  // duplicated event) keeps its earliest window, and the later ones are
  // counted and dropped; their time lies outside any step.
  std::unordered_map<int64_t, size_t> kept_by_step;  // step number -> index in store->steps
  uint64_t duplicated = 0;
  std::string duplicate_example;
  for (StepWindow w : candidates) {
    if (const auto it = kept_by_step.find(w.step); it != kept_by_step.end()) {
      ++duplicated;
      if (duplicate_example.empty()) {
        const StepWindow& kept = store->steps[it->second];
        duplicate_example = "step " + std::to_string(w.step) + ": [" + std::to_string(w.start_ns) + ", " +
                            std::to_string(w.end_ns) + ") ns dropped, [" + std::to_string(kept.start_ns) +
                            ", " + std::to_string(kept.end_ns) + ") ns kept";
      }
      continue;
    }
    if (!store->steps.empty() && w.start_ns < store->steps.back().end_ns) {
      ++overlapping;
      if (example.empty()) {
        example = "step " + std::to_string(w.step) + " starts before step " +
                  std::to_string(store->steps.back().step) + " ends";
      }
      w.start_ns = store->steps.back().end_ns;
      if (w.start_ns >= w.end_ns) continue;  // nothing left after clipping
    }
    store->steps.push_back(w);
    kept_by_step.emplace(w.step, store->steps.size() - 1);
  }
  if (overlapping > 0) store->diagnostics.add(Diag::steps_overlapping, overlapping, example);
  if (duplicated > 0) store->diagnostics.add(Diag::steps_duplicated, duplicated, duplicate_example);
}

}  // namespace gpuutil::replay
