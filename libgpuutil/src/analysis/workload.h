// Workload classification: is the run training, inference, a CUDA-graph
// capture, or unknown, and what was seen that says so.
//
// Internal to the analysis core; pure functions of an EventStore and the
// windows analyze() runs over. The signals are names only: autograd
// backward ops and optimizer ranges (training), model-layer forward ops
// without either (inference), and stream-capture API calls
// (cudaStreamBeginCapture .. cudaStreamEndCapture, graph instantiation),
// whose windows are capture time. A run whose capture windows cover more
// than half of the analysed time is "capture". Findings read the result
// (Report::workload) to choose fixes that fit; the rules are documented in
// docs/findings.md, "Workload".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/intervals.h"
#include "analysis/windows.h"
#include "gpuutil/events.h"
#include "gpuutil/report.h"

namespace gpuutil {

// A capture window must cover more than this share of the analysed time for
// the run to be classified "capture".
inline constexpr double kCaptureDominant = 0.5;

// What one or more stores showed. Counts are of host ranges (ops,
// annotations) and API calls; *_example is the first name seen.
struct WorkloadSignals {
  uint64_t backward_ops = 0;  // autograd ranges, *Backward nodes, aten::*_backward ops
  std::string backward_example;
  uint64_t optimizer_ops = 0;  // Optimizer.step#/zero_grad# ranges, ## optimizer ##, aten::_fused_adam_ & co
  std::string optimizer_example;
  uint64_t foreach_in_optimizer = 0;  // aten::_foreach_* ops inside an optimizer range
  uint64_t forward_ops = 0;           // model-layer ops (linear, conv, attention, norm, ...), forward ranges
  std::string forward_example;
  uint64_t capture_windows = 0;       // stream-capture begin..end pairs (open ends closed at the span)
  uint64_t graph_instantiations = 0;  // cudaGraphInstantiate* / cuGraphInstantiate* / hipGraphInstantiate*
  int64_t capture_ns = 0;             // capture windows inside the analysed windows
  int64_t analysed_ns = 0;            // total wall of the analysed windows
  uint64_t steps = 0;                 // step windows from markers (0: one whole-trace window)
  std::string steps_source;           // of the first store that had one

  WorkloadSignals& operator+=(const WorkloadSignals& o);
};

// One store's signals, classified once: names counted, capture windows
// built. `span` must cover the store's events and every window later asked
// about (capture windows still open at the end run to span.hi; an end whose
// begin precedes the trace starts at span.lo, so any such span gives the
// same capture time inside those windows).
class WorkloadIndex {
 public:
  WorkloadIndex(const EventStore& store, const EventSpan& span);
  // The signals over `windows` (the store's analysis windows: its steps, or
  // one whole-trace window). `markers`: the windows are step markers (not
  // one whole-trace window), counted as steps from `steps_source`.
  WorkloadSignals signals(const std::vector<StepWindow>& windows, bool markers, const std::string& steps_source) const;

 private:
  WorkloadSignals base_;  // counts and examples, over the whole store
  IntervalList capture_;
};

// The signals of one store over its analysis windows (analysis_windows()).
inline WorkloadSignals workload_signals(const EventStore& store, const EventSpan& span,
                                        const std::vector<StepWindow>& windows) {
  return WorkloadIndex(store, span).signals(windows, !store.steps.empty() && store.steps_source != "whole_trace",
                                            store.steps_source);
}

// The kind and its evidence: capture when capture windows cover more than
// kCaptureDominant of the analysed time; else training when backward or
// optimizer ops were seen; else inference when model-layer forward ops
// were; else unknown.
Workload classify_workload(const WorkloadSignals& signals);

// classify_workload for the windows of one prepared store, one after
// another (the live session's batch): their signals differ only in the
// analysed and capture time, which matter only when there is capture
// activity. Without it, the previous window's Workload is returned again
// instead of spelling the same evidence anew. Same results as
// classify_workload in every case (test_workload pins it).
class WorkloadMemo {
 public:
  const Workload& classify(const WorkloadSignals& signals);

 private:
  bool valid_ = false;
  WorkloadSignals last_;
  Workload workload_;
};

}  // namespace gpuutil
