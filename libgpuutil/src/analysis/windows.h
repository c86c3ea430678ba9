// The time windows analysis runs over, shared by analyze() and the exporters
// that must cut the timeline exactly as analyze() does (Perfetto).
//
// Internal to the analysis core; pure functions of an EventStore.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "analysis/step_tail.h"
#include "gpuutil/events.h"

namespace gpuutil {

// First start to last end over every event and step of a store.
struct EventSpan {
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  void add(int64_t a, int64_t b) {
    if (a < lo) lo = a;
    if (b > hi) hi = b;
  }
  bool empty() const { return hi < lo; }
};
// First start to last end over every event (and, with_steps, step) of a store.
EventSpan event_span(const EventStore& store, bool with_steps = true);

// The store's step windows, or, when it has none, one window (step 0) over
// the whole event span; empty for a store with no events. The last step's
// window ends before a trailing stretch in which nothing was recorded
// (step_tail.h); `tail`, when given, receives what step_tail() found.
std::vector<StepWindow> analysis_windows(const EventStore& store, StepTail* tail = nullptr);
// The same, reusing an event_span() the caller already computed.
std::vector<StepWindow> analysis_windows(const EventStore& store, const EventSpan& span, StepTail* tail = nullptr);

// The thread with the most host ranges (-1 if none): explains gaps on
// devices whose launches could not be matched.
int64_t busiest_thread(const EventStore& store);

}  // namespace gpuutil
