// What happens at the end of a trace's last step: its device backlog and a
// trailing stretch in which nothing was recorded.
//
// Internal to the analysis core; a pure function of an EventStore and its
// step windows (docs/accounting.md, "The last step"). Used by
// analysis_windows() (which trims the last window by the unrecorded
// stretch, so analyze() and the Perfetto export cut the timeline the same
// way) and by analyze() for the run summary and the diagnostic.
//   - Backlog: device work whose launch call began before the last step's
//     window ended but which ran after it (the GPU running behind the
//     host). Step N's backlog is accounted in step N+1; the last step has
//     none, so the time its backlog ran past its window is the steps' own
//     work, not time outside steps.
//   - Unrecorded stretch: the last step's window ends with a stretch in
//     which no thread and no device recorded anything (the profiler
//     stopping: the last ProfilerStep range closes only at stop), the trace
//     ending at most kTailSlackNs after the step. It is left out of the
//     step (and so of every breakdown and finding) and of the time outside
//     steps. Only a stretch that stands out is taken: >= 1 ms, >= 5% of
//     the step's wall, more than twice the longest such tail of the other
//     steps, after something was recorded in the step. Ranges that cover
//     the whole step (a Python frame around the loop, a loop annotation)
//     are context, not recording.
// Both need at least two steps: a store with one step window (a trace with
// one ProfilerStep, or one window analysed alone, as a live session does)
// has no "last step" to speak of.
#pragma once

#include <cstdint>
#include <vector>

#include "gpuutil/events.h"

namespace gpuutil {

struct StepTail {
  int64_t step = 0;  // the last step's number (when there are steps)
  // The unrecorded stretch [unrecorded_from_ns, the last step's end); 0 = none.
  int64_t unrecorded_from_ns = 0;
  int64_t unrecorded_ns = 0;
  // How far past the last step's (untrimmed) end its backlog ran, and how
  // many activities ran past it.
  int64_t backlog_ns = 0;
  uint64_t backlog_activities = 0;
};

// `steps`: the store's step windows (disjoint; any order). Fewer than two
// steps: {} (nothing is "the last step" of one).
StepTail step_tail(const EventStore& store, const std::vector<StepWindow>& steps);

}  // namespace gpuutil
