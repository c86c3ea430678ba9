// The analysis engine: pure functions from EventStores to a Report.
//
// No I/O, no globals, no vendor types. The same function runs on events from
// a trace file, a live CUPTI session, or a planted test timeline.
//
// Contract: analyze() may be called from any thread; it only reads its
// arguments. Stores are analysed per rank; step windows come from each
// store's `steps` (a store with no steps is analysed as one whole-trace
// window, and says so in diagnostics).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuutil/events.h"
#include "gpuutil/report.h"

namespace gpuutil {

struct AnalysisOptions {
  std::optional<double> flops_per_step;  // FLOPs per step (per rank), from flops_source
  std::string flops_source = "user";      // report's flops_source when flops_per_step is set ("user", "measured")
  // FLOPs the hardware executes per step (per rank), recomputation
  // included (activation checkpointing); gives HFU next to MFU.
  std::optional<double> hardware_flops_per_step;
  std::string dtype = "bf16";            // picks the peak for MFU
  std::optional<double> peak_tflops;     // overrides the peak table
  int64_t short_kernel_threshold_ns = 10'000;
  size_t top_n = 5;
  // The live DataLoaders' settings by wait-range name (a session fact the
  // PyTorch collector gives, Session::set_loader): reports carry them in
  // `loaders`, and findings never recommend a setting a loader has.
  std::vector<std::pair<std::string, LoaderSettings>> loader_settings;
};

// Analyses one or more stores (one per rank) into one report. Steps are
// matched across ranks by step number; the first store is the reference
// rank for step-level start/end and the summary's span.
Report analyze(const std::vector<const EventStore*>& stores, const AnalysisOptions& options);
inline Report analyze(const EventStore& store, const AnalysisOptions& options = {}) {
  return analyze(std::vector<const EventStore*>{&store}, options);
}

// One store prepared for analysing many windows of it, one report each: its
// indexes (device and host timelines, counters, collectives, workload
// signals) are built once, not once per window. A live session reports a
// batch of finished steps this way; per-step analyze() made each report
// cost O(pending events).
//
// Contract: keeps a reference to `store`, which must outlive it unchanged.
// `windows` lists every window analyze_window() will be given.
// analyze_window(w, o) returns exactly analyze(s, o) for a copy s of the
// store with s.steps = {w} (pinned on planted and real traces,
// test_analyze_window.cpp). Not thread-safe: it reuses scratch memory.
class PreparedStore {
 public:
  PreparedStore(const EventStore& store, const std::vector<StepWindow>& windows);
  ~PreparedStore();
  PreparedStore(const PreparedStore&) = delete;
  PreparedStore& operator=(const PreparedStore&) = delete;

  Report analyze_window(const StepWindow& w, const AnalysisOptions& options);

  struct Impl;  // internal (analyze.cpp)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuutil
