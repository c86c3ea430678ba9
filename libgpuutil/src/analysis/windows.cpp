// Analysis windows, event span and the fallback host thread (windows.h).
#include "analysis/windows.h"

namespace gpuutil {

EventSpan event_span(const EventStore& s, bool with_steps) {
  EventSpan span;
  for (const auto& a : s.activities) span.add(a.start_ns, a.end_ns);
  for (const auto& c : s.api_calls) span.add(c.start_ns, c.end_ns);
  for (const auto& r : s.ranges) span.add(r.start_ns, r.end_ns);
  if (with_steps) {
    for (const auto& w : s.steps) span.add(w.start_ns, w.end_ns);
  }
  return span;
}

namespace {

// The store's steps, the last one ending where recording stopped.
std::vector<StepWindow> step_windows(const EventStore& s, StepTail* tail) {
  std::vector<StepWindow> windows = s.steps;
  const StepTail t = step_tail(s, windows);
  if (t.unrecorded_ns > 0) {
    for (auto& w : windows) {
      if (w.step == t.step && w.end_ns == t.unrecorded_from_ns + t.unrecorded_ns) w.end_ns = t.unrecorded_from_ns;
    }
  }
  if (tail) *tail = t;
  return windows;
}

}  // namespace

std::vector<StepWindow> analysis_windows(const EventStore& s, StepTail* tail) {
  if (!s.steps.empty()) return step_windows(s, tail);
  return analysis_windows(s, event_span(s), tail);
}

std::vector<StepWindow> analysis_windows(const EventStore& s, const EventSpan& span, StepTail* tail) {
  if (tail) *tail = StepTail{};
  if (!s.steps.empty()) return step_windows(s, tail);
  if (span.empty()) return {};
  return {StepWindow{0, span.lo, span.hi}};
}

int64_t busiest_thread(const EventStore& s) {
  std::vector<uint64_t> n(s.threads.size());
  for (const auto& r : s.ranges) {
    if (r.thread >= n.size()) n.resize(r.thread + 1);
    ++n[r.thread];
  }
  int64_t best = -1;
  uint64_t best_n = 0;
  for (size_t t = 0; t < n.size(); ++t) {
    if (n[t] > best_n) {
      best = static_cast<int64_t>(t);
      best_n = n[t];
    }
  }
  return best;
}

}  // namespace gpuutil
