// The analysis entry point: stores -> per-step, per-device report.
//
// Orchestrates the pure stages: device timelines and host timelines are
// built once per store; then, per step window and device, the exact
// breakdown (interval unions), idle attribution, metrics and MFU; then the
// run summary, the workload (training, inference, capture) and findings. See docs/accounting.md.
#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "analysis/device_health.h"
#include "analysis/device_timeline.h"
#include "analysis/findings.h"
#include "analysis/collective_spans.h"
#include "gpuutil/cluster.h"
#include "analysis/host_breakdown.h"
#include "analysis/loaders.h"
#include "analysis/host_timeline.h"
#include "analysis/idle_attribution.h"
#include "analysis/step_metrics.h"
#include "analysis/step_tail.h"
#include "analysis/text_format.h"
#include "analysis/windows.h"
#include "analysis/workload.h"
#include "gpuutil/analysis.h"
#include "gpuutil/peaks.h"

namespace gpuutil {

namespace {

// FLOPs reported by the trace's ops (with_flops), outermost ranges only so
// nested ops are not counted twice. Sorted by start.
std::vector<std::pair<int64_t, double>> trace_flops(const EventStore& s) {
  std::vector<const HostRange*> rs;
  for (const auto& r : s.ranges) {
    if (r.flops > 0) rs.push_back(&r);
  }
  std::sort(rs.begin(), rs.end(), [](const HostRange* a, const HostRange* b) {
    return a->thread != b->thread ? a->thread < b->thread : a->start_ns < b->start_ns;
  });
  std::vector<std::pair<int64_t, double>> out;
  uint32_t thread = std::numeric_limits<uint32_t>::max();
  int64_t covered_until = std::numeric_limits<int64_t>::min();
  for (const auto* r : rs) {
    if (r->thread != thread) {
      thread = r->thread;
      covered_until = std::numeric_limits<int64_t>::min();
    }
    if (r->start_ns < covered_until) continue;
    out.emplace_back(r->start_ns, r->flops);
    covered_until = r->end_ns;
  }
  std::sort(out.begin(), out.end());
  return out;
}

double flops_in(const std::vector<std::pair<int64_t, double>>& f, int64_t lo, int64_t hi) {
  double sum = 0;
  auto it = std::lower_bound(f.begin(), f.end(), std::make_pair(lo, -1.0));
  for (; it != f.end() && it->first < hi; ++it) sum += it->second;
  return sum;
}

std::vector<NamedTime> top_culprits(const std::unordered_map<CulpritKey, CulpritTally>& m, const EventStore& store,
                                    size_t n) {
  // Ties are broken by the name, not the key: keys are name ids, which
  // differ between a live store and the same trace imported (interning
  // order), and the two must name the same culprits.
  std::vector<NamedTime> v;
  v.reserve(m.size());
  for (const auto& [key, tally] : m) v.push_back({culprit_name(store, key), tally.ns, tally.count});
  std::sort(v.begin(), v.end(), [](const NamedTime& a, const NamedTime& b) {
    if (a.ns != b.ns) return a.ns > b.ns;
    if (a.name != b.name) return a.name < b.name;
    return a.count > b.count;
  });
  if (v.size() > n) v.resize(n);
  return v;
}

// Run-level accumulation for one (rank, device).
struct DeviceTotals {
  DeviceSummary summary;
  std::array<std::unordered_map<std::string, NamedTime>, kIdleCauseCount> culprits;
  double sm_weighted_ns = 0;
  bool sm_known = false;
  double occ_weighted_ns = 0, occ_kernel_ns = 0;
  double flops = 0;
  bool flops_known = false;
  double hardware_flops = 0;
  std::optional<double> peak;
};

// Run-level accumulation over stores and windows.
struct Accumulator {
  Report report;
  std::map<int64_t, StepReport> steps;
  std::map<std::pair<int32_t, int32_t>, DeviceTotals> totals;  // (rank, device)
  bool any_trace_flops = false;
  WorkloadSignals workload;
};

}  // namespace

// One store's indexes, built once (see analysis.h). `windows_in`: every
// window it will be asked about (the workload's capture windows are closed
// at their span).
struct PreparedStore::Impl {
  Impl(const EventStore& store, const std::vector<StepWindow>& windows_in)
      : s(store),
        events_span(event_span(store, /*with_steps=*/false)),
        host(build_host_timelines(store)),
        devices(build_device_timelines(store, &host.in_collective)),
        host_index(store),
        counters(store),
        collectives(store, &host.in_collective),
        fallback(busiest_thread(store)),
        flops_by_time(trace_flops(store)),
        workload(store, span_with(events_span, windows_in)),
        loader_waits(store) {
    for (uint32_t launch : host.launch_of) unmatched += launch == kNoLaunch ? 1 : 0;
  }
  static EventSpan span_with(EventSpan span, const std::vector<StepWindow>& ws) {
    for (const auto& w : ws) span.add(w.start_ns, w.end_ns);
    return span;
  }

  const EventStore& s;
  EventSpan events_span;            // of the store's events (not its steps)
  HostTimelines host;  // before devices: they read host.in_collective
  std::vector<DeviceTimeline> devices;
  HostBreakdownIndex host_index;
  HostBreakdownIndex::Scratch host_scratch;  // reused by every window
  StepMetricsScratch metrics_scratch;
  CounterIndex counters;
  CollectiveSpans collectives;
  int64_t fallback;
  std::vector<std::pair<int64_t, double>> flops_by_time;
  WorkloadIndex workload;
  WorkloadMemo workload_memo;  // the windows' Workload, spelled once when it does not change
  LoaderWaits loader_waits;    // batch waits of the input pipelines (loaders.h)
  uint64_t unmatched = 0;  // activities whose launch call is not in the store
};

namespace {

// Adds one store's `windows` (its own, or one of them) to the accumulator;
// `first` makes it the reference store of the summary.
// `has_steps`: the windows are the store's steps (else one whole-trace window).
// `tail`: what the end of the store's steps holds (offline analysis of a
// whole store; null for one window of a live session).
void add_store(PreparedStore::Impl& p, const std::vector<StepWindow>& windows, bool has_steps, bool first,
               const AnalysisOptions& options, Accumulator& acc, const StepTail* tail = nullptr) {
  const EventStore& s = p.s;
  Report& report = acc.report;
  report.diagnostics.merge(s.diagnostics);
  report.sources.push_back({s.source, s.rank, s.steps_source, s.activities.size(), s.api_calls.size(),
                            s.ranges.size()});
  if (p.unmatched > 0 && !s.api_calls.empty()) report.diagnostics.add(Diag::launch_unmatched, p.unmatched);
  for (const auto& tl : p.devices) {
    if (!s.device_info(tl.device)) {
      report.diagnostics.add(Diag::activity_unknown_device, 1, "device " + std::to_string(tl.device));
    }
  }
  acc.workload += p.workload.signals(windows, has_steps && s.steps_source != "whole_trace", s.steps_source);
  if (!has_steps && !windows.empty() && s.diagnostics.count(Diag::steps_missing) == 0) {
    report.diagnostics.add(Diag::steps_missing);
  }
  const int64_t unrecorded_ns = tail ? tail->unrecorded_ns : 0;
  const int64_t backlog_ns = tail ? tail->backlog_ns : 0;
  if (unrecorded_ns > 0) {
    report.diagnostics.add(Diag::trailing_unrecorded_stretch, 1,
                           cat({"rank ", std::to_string(s.rank), " step ", std::to_string(tail->step), ": its last ",
                                ms_text(unrecorded_ns),
                                " recorded nothing on any thread or device; left out of the step, its findings and "
                                "the time outside steps"}));
  }
  if (first) {
    EventSpan span = PreparedStore::Impl::span_with(p.events_span, windows);
    if (unrecorded_ns > 0) span.add(tail->unrecorded_from_ns, tail->unrecorded_from_ns + unrecorded_ns);
    report.summary.trace_span_ns = span.empty() ? 0 : span.hi - span.lo;
    std::vector<int64_t> walls;
    for (const auto& w : windows) {
      report.summary.steps_wall_ns += w.wall_ns();
      walls.push_back(w.wall_ns());
    }
    // The last step's own backlog and its unrecorded end are not time the
    // job spent outside steps (docs/accounting.md, "The last step").
    report.summary.last_step_backlog_ns = backlog_ns;
    report.summary.last_step_unrecorded_ns = unrecorded_ns;
    report.summary.outside_steps_ns = std::max<int64_t>(
        0, report.summary.trace_span_ns - report.summary.steps_wall_ns - backlog_ns - unrecorded_ns);
    if (!walls.empty()) {
      std::sort(walls.begin(), walls.end());
      report.summary.step_wall_p50_ns = walls[(walls.size() - 1) / 2];
    }
  }
  if (!p.flops_by_time.empty()) acc.any_trace_flops = true;

    for (const auto& w : windows) {
      auto [it, inserted] = acc.steps.try_emplace(w.step);
      StepReport& step = it->second;
      if (inserted) {
        step.step = w.step;
        step.start_ns = w.start_ns;
        step.end_ns = w.end_ns;
        step.wall_ns = w.wall_ns();
      }
      if (!p.collectives.empty()) step.collectives.push_back(p.collectives.in(w.start_ns, w.end_ns, s.rank));
      p.loader_waits.add(w.start_ns, w.end_ns, report.loaders);
      for (auto& h : p.host_index.step(w.start_ns, w.end_ns, options.top_n, p.host_scratch)) {
        h.rank = s.rank;
        step.host.push_back(std::move(h));
      }
      std::optional<double> step_flops;
      if (options.flops_per_step) {
        step_flops = *options.flops_per_step;
      } else if (!p.flops_by_time.empty()) {
        step_flops = flops_in(p.flops_by_time, w.start_ns, w.end_ns);
      }
      for (const auto& tl : p.devices) {
        DeviceStepReport d;
        d.device = tl.device;
        d.rank = s.rank;
        const DeviceInfo* info = s.device_info(tl.device);
        if (info) d.name = info->name;
        if (info) d.total_memory_bytes = info->total_memory_bytes;
        d.wall_ns = w.wall_ns();
        if (!p.counters.empty()) d.health = p.counters.health(tl.device, w.start_ns, w.end_ns);
        auto& b = d.breakdown;
        b.compute_ns = covered_ns(tl.compute, w.start_ns, w.end_ns);
        b.communication_ns = covered_ns(tl.comm_only, w.start_ns, w.end_ns);
        b.memory_ns = covered_ns(tl.memory_only, w.start_ns, w.end_ns);
        d.busy_ns = covered_ns(tl.busy, w.start_ns, w.end_ns);
        IdleAccount idle;
        attribute_idle(s, tl, p.host, p.fallback, w.start_ns, w.end_ns, idle);
        b.idle_ns = idle.idle_ns;
        for (int c = 0; c < kIdleCauseCount; ++c) d.culprits[c] = top_culprits(idle.culprits[c], s, options.top_n);
        d.communication_total_ns = covered_ns(tl.communication, w.start_ns, w.end_ns);
        d.communication_overlap_ns = d.communication_total_ns - b.communication_ns;
        const StepMetricSums sums =
            compute_step_metrics(s, tl, p.host, w.start_ns, w.end_ns, options, d, &p.metrics_scratch);

        std::optional<double> peak;
        if (options.peak_tflops) {
          peak = *options.peak_tflops * 1e12;
        } else if (info) {
          peak = peak_flops_per_s(*info, options.dtype);
        }
        d.peak_flops_per_s = peak;
        const auto n_devices = static_cast<double>(p.devices.size());
        const auto utilisation = [&](double flops) -> std::optional<double> {
          if (!peak || *peak <= 0 || d.wall_ns <= 0) return std::nullopt;
          return flops / (static_cast<double>(d.wall_ns) * 1e-9 * *peak);
        };
        if (step_flops) {
          d.flops = *step_flops / n_devices;
          d.mfu = utilisation(*d.flops);
          if (d.mfu && *d.mfu > 1.0) {  // impossible: an input is wrong, say which ones could be
            acc.report.diagnostics.add(Diag::mfu_above_peak, 1,
                                   "step " + std::to_string(w.step) + ", rank " + std::to_string(s.rank) + " device " +
                                       std::to_string(tl.device) + ": MFU " +
                                       std::to_string(static_cast<int>(*d.mfu * 100 + 0.5)) + "% of " +
                                       (options.peak_tflops ? "the given peak" : "the " + options.dtype + " peak"));
          }
        }
        if (options.hardware_flops_per_step) {
          d.hardware_flops = *options.hardware_flops_per_step / n_devices;
          d.hfu = utilisation(*d.hardware_flops);
        }

        auto& t = acc.totals[{s.rank, tl.device}];
        t.summary.device = tl.device;
        t.summary.rank = s.rank;
        t.summary.name = d.name;
        t.summary.wall_ns += d.wall_ns;
        t.summary.breakdown += d.breakdown;
        t.summary.kernels += d.kernels;
        for (int c = 0; c < kIdleCauseCount; ++c) {
          for (const auto& [name, tally] : idle.culprits[c]) {
            auto& n = t.culprits[c][culprit_name(s, name)];
            n.ns += tally.ns;
            n.count += tally.count;
          }
        }
        t.sm_weighted_ns += sums.sm_weighted_ns;
        t.sm_known = t.sm_known || sums.sm_known;
        t.occ_weighted_ns += sums.occ_weighted_ns;
        t.occ_kernel_ns += sums.occ_kernel_ns;
        if (d.flops) {
          t.flops += *d.flops;
          t.flops_known = true;
        }
        if (d.hardware_flops) t.hardware_flops += *d.hardware_flops;
        t.peak = peak;
        step.devices.push_back(std::move(d));
      }
    }
}

// `memo`: the prepared store's, when windows are analysed one by one.
Report finish(Accumulator& acc, const AnalysisOptions& options, WorkloadMemo* memo = nullptr) {
  Report& report = acc.report;
  for (auto& [n, step] : acc.steps) report.steps.push_back(std::move(step));
  report.summary.steps = report.steps.size();
  for (auto& [key, t] : acc.totals) {
    DeviceSummary& d = t.summary;
    for (int c = 0; c < kIdleCauseCount; ++c) {
      std::vector<NamedTime> v;
      for (auto& [name, nt] : t.culprits[c]) v.push_back({name, nt.ns, nt.count});
      std::sort(v.begin(), v.end(), [](const NamedTime& a, const NamedTime& b) {
        return a.ns != b.ns ? a.ns > b.ns : a.name < b.name;
      });
      if (v.size() > options.top_n) v.resize(options.top_n);
      d.culprits[c] = std::move(v);
    }
    if (t.sm_known && d.wall_ns > 0) d.sm_efficiency_est = std::min(1.0, t.sm_weighted_ns / static_cast<double>(d.wall_ns));
    if (t.occ_kernel_ns > 0) d.achieved_occupancy_est = t.occ_weighted_ns / t.occ_kernel_ns;
    if (t.flops_known && t.peak && *t.peak > 0 && d.wall_ns > 0) {
      d.mfu = t.flops / (static_cast<double>(d.wall_ns) * 1e-9 * *t.peak);
    }
    if (options.hardware_flops_per_step && t.peak && *t.peak > 0 && d.wall_ns > 0) {
      d.hfu = t.hardware_flops / (static_cast<double>(d.wall_ns) * 1e-9 * *t.peak);
    }
    if (t.flops_known && !t.peak) report.diagnostics.add(Diag::peak_unknown, 1, d.name);
    report.summary.devices.push_back(std::move(d));
  }
  if (options.flops_per_step) {
    report.flops_source = options.flops_source;
  } else if (acc.any_trace_flops) {
    report.flops_source = "trace";
  } else if (!acc.totals.empty()) {
    report.diagnostics.add(Diag::flops_unknown);
  }
  report.workload = memo != nullptr ? memo->classify(acc.workload) : classify_workload(acc.workload);
  finish_loaders(report.loaders, options.loader_settings);
  report.findings = derive_findings(report);
  if (auto view = cluster_view_of(report)) {
    for (const auto& f : view->findings) report.findings.push_back(f);
    std::stable_sort(report.findings.begin(), report.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.recoverable_ns > b.recoverable_ns; });
    report.cluster = std::make_shared<const ClusterView>(std::move(*view));
  }
  return std::move(report);
}

}  // namespace

PreparedStore::PreparedStore(const EventStore& store, const std::vector<StepWindow>& windows)
    : impl_(std::make_unique<Impl>(store, windows)) {}
PreparedStore::~PreparedStore() = default;

Report PreparedStore::analyze_window(const StepWindow& w, const AnalysisOptions& options) {
  Accumulator acc;
  add_store(*impl_, {w}, /*has_steps=*/true, /*first=*/true, options, acc);
  return finish(acc, options, &impl_->workload_memo);
}

Report analyze(const std::vector<const EventStore*>& stores, const AnalysisOptions& options) {
  Accumulator acc;
  for (size_t si = 0; si < stores.size(); ++si) {
    const EventStore& s = *stores[si];
    StepTail tail;
    const std::vector<StepWindow> windows = analysis_windows(s, &tail);
    PreparedStore::Impl p(s, windows);
    add_store(p, windows, !s.steps.empty(), si == 0, options, acc, &tail);
  }
  return finish(acc, options);
}

}  // namespace gpuutil
