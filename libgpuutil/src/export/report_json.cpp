// Serialises a Report to the versioned JSON report schema "gpuutil.report/1".
//
// This is the one place that decides the on-disk shape of a report; the
// schema is documented field by field in docs/report-schema.md and every key
// written here appears there. The report is streamed straight into the
// output string through JsonWriter (json_writer.h; no DOM, so the per-step
// cost of a live session is the bytes, not allocations), keys in the order
// written here so the output is stable and diffable. The bytes are exactly
// what nlohmann::ordered_json::dump printed for the same document (pinned by
// tests/cpp/test_report_json_writer.cpp). Rules applied throughout:
//   - durations are JSON integers (int64 ns), counts unsigned integers;
//   - an empty std::optional is null, and so is any non-finite double
//     (NaN/Inf never reach the output);
//   - invalid UTF-8 in names (kernel names from traces) is replaced, never
//     thrown on;
//   - indent < 0 gives one compact line (a JSON Lines record); indent >= 0
//     nlohmann's pretty layout with that many spaces per level (the CLI).
#include "gpuutil/report_json.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "export/json_writer.h"
#include "export/report_json_parts.h"

namespace gpuutil {

namespace {

void optional_double(JsonWriter& w, const std::optional<double>& v) {
  if (v) {
    w.value(*v);
  } else {
    w.null();
  }
}

void optional_int(JsonWriter& w, const std::optional<int64_t>& v) {
  if (v) {
    w.value(*v);
  } else {
    w.null();
  }
}

// numerator / denominator * scale, or null when the denominator is zero.
void ratio_or_null(JsonWriter& w, double numerator, double denominator, double scale) {
  if (denominator == 0) {
    w.null();
  } else {
    w.value(numerator / denominator * scale);
  }
}

// A string, or null when it is empty.
void string_or_null(JsonWriter& w, const std::string& s) {
  if (s.empty()) {
    w.null();
  } else {
    w.value(s);
  }
}

void breakdown_json(JsonWriter& w, const Breakdown& b) {
  // "idle_" + cause name, built once.
  static const std::array<std::string, kIdleCauseCount> kIdleKeys = [] {
    std::array<std::string, kIdleCauseCount> keys;
    for (int i = 0; i < kIdleCauseCount; ++i) {
      keys[static_cast<size_t>(i)] = std::string("idle_") + to_string(static_cast<IdleCause>(i));
    }
    return keys;
  }();
  w.begin_object();
  w.member("compute", b.compute_ns);
  w.member("communication", b.communication_ns);
  w.member("memory", b.memory_ns);
  for (size_t i = 0; i < kIdleKeys.size(); ++i) w.member(kIdleKeys[i], b.idle_ns[i]);
  w.end_object();
}

void named_times_json(JsonWriter& w, const std::vector<NamedTime>& items) {
  w.begin_array();
  for (const auto& t : items) {
    w.begin_object();
    w.member("name", t.name);
    w.member("ns", t.ns);
    w.member("count", t.count);
    w.end_object();
  }
  w.end_array();
}

void culprits_json(JsonWriter& w, const std::array<std::vector<NamedTime>, kIdleCauseCount>& culprits) {
  w.begin_object();
  for (int i = 0; i < kIdleCauseCount; ++i) {
    w.key(to_string(static_cast<IdleCause>(i)));
    named_times_json(w, culprits[static_cast<size_t>(i)]);
  }
  w.end_object();
}

// {"p50": ..., "p95": ...}, null where unknown.
void percentiles_json(JsonWriter& w, const std::optional<int64_t>& p50, const std::optional<int64_t>& p95) {
  w.begin_object();
  w.key("p50");
  optional_int(w, p50);
  w.key("p95");
  optional_int(w, p95);
  w.end_object();
}

void memcpy_json(JsonWriter& w, const DeviceStepReport& d) {
  w.begin_object();
  for (int i = 0; i < kMemcpyDirectionCount; ++i) {
    const auto idx = static_cast<size_t>(i);
    const uint64_t bytes = d.memcpy_bytes[idx];
    const int64_t ns = d.memcpy_ns[idx];
    if (bytes == 0 && ns <= 0) continue;
    w.key(to_string(static_cast<MemcpyDirection>(i)));
    w.begin_object();
    w.member("bytes", bytes);
    w.member("ns", ns);
    // bytes per ns is GB/s (1e9 bytes per 1e9 ns).
    w.key("gbps");
    if (ns > 0) {
      w.value(static_cast<double>(bytes) / static_cast<double>(ns));
    } else {
      w.null();
    }
    w.end_object();
  }
  w.end_object();
}

// Device health from counters (docs/report-schema.md, "health"); null when
// the step had no counter samples for the device.
void health_json(JsonWriter& w, const DeviceHealth& h) {
  if (!h.any()) {
    w.null();
    return;
  }
  auto dbl = [&w](const auto& k, const std::optional<double>& v) {
    w.key(k);
    optional_double(w, v);
  };
  w.begin_object();
  dbl("nvml_utilization_pct", h.nvml_utilization_pct);
  dbl("sm_clock_mhz", h.sm_clock_mhz);
  dbl("sm_clock_max_mhz", h.sm_clock_max_mhz);
  dbl("mem_clock_mhz", h.mem_clock_mhz);
  dbl("mem_clock_max_mhz", h.mem_clock_max_mhz);
  dbl("power_w", h.power_w);
  dbl("energy_j", h.energy_j);
  dbl("temperature_c", h.temperature_c);
  w.key("throttle_power_ns");
  optional_int(w, h.throttle_power_ns);
  w.key("throttle_thermal_ns");
  optional_int(w, h.throttle_thermal_ns);
  dbl("fb_used_bytes", h.fb_used_bytes);
  dbl("allocated_bytes", h.allocated_bytes);
  dbl("reserved_bytes", h.reserved_bytes);
  dbl("peak_allocated_bytes", h.peak_allocated_bytes);
  dbl("gpm_sm_util_pct", h.gpm_sm_util_pct);
  dbl("gpm_sm_occupancy_pct", h.gpm_sm_occupancy_pct);
  dbl("gpm_tensor_util_pct", h.gpm_tensor_util_pct);
  dbl("gpm_dram_bw_util_pct", h.gpm_dram_bw_util_pct);
  w.end_object();
}

void device_step_json(JsonWriter& w, const DeviceStepReport& d) {
  w.begin_object();
  w.member("device", d.device);
  w.member("rank", d.rank);
  w.member("name", d.name);
  w.member("wall_ns", d.wall_ns);
  w.member("busy_ns", d.busy_ns);
  w.key("breakdown_ns");
  breakdown_json(w, d.breakdown);
  w.member("idle_ns", d.breakdown.idle_total_ns());
  w.key("culprits");
  culprits_json(w, d.culprits);
  w.member("kernels", d.kernels);
  w.member("memcpys", d.memcpys);
  w.member("memsets", d.memsets);
  w.member("short_kernels", d.short_kernels);
  w.member("persistent_kernel_ns", d.persistent_kernel_ns);
  w.key("sm_efficiency_est");
  optional_double(w, d.sm_efficiency_est);
  w.key("achieved_occupancy_est");
  optional_double(w, d.achieved_occupancy_est);
  w.key("memcpy");
  memcpy_json(w, d);
  w.key("pageable_memcpy");
  w.begin_object();
  w.member("count", d.pageable_memcpys);
  w.member("bytes", d.pageable_memcpy_bytes);
  w.end_object();
  w.key("communication");
  w.begin_object();
  w.member("total_ns", d.communication_total_ns);
  w.member("overlap_ns", d.communication_overlap_ns);
  w.key("overlap_pct");
  ratio_or_null(w, static_cast<double>(d.communication_overlap_ns), static_cast<double>(d.communication_total_ns),
                100.0);
  w.end_object();
  w.key("top_kernels");
  named_times_json(w, d.top_kernels);
  w.key("launch_latency_ns");
  percentiles_json(w, d.launch_latency_p50_ns, d.launch_latency_p95_ns);
  w.member("graph_kernels", d.graph_kernels);
  w.key("graph_launch_latency_ns");
  percentiles_json(w, d.graph_launch_latency_p50_ns, d.graph_launch_latency_p95_ns);
  w.key("flops");
  optional_double(w, d.flops);
  w.key("peak_flops_per_s");
  optional_double(w, d.peak_flops_per_s);
  w.key("mfu");
  optional_double(w, d.mfu);
  w.key("hardware_flops");
  optional_double(w, d.hardware_flops);
  w.key("hfu");
  optional_double(w, d.hfu);
  w.key("health");
  health_json(w, d.health);
  w.end_object();
}

void host_breakdown_json(JsonWriter& w, const std::array<int64_t, kHostCategoryCount>& breakdown_ns) {
  w.begin_object();
  for (int i = 0; i < kHostCategoryCount; ++i) {
    w.member(to_string(static_cast<HostCategory>(i)), breakdown_ns[static_cast<size_t>(i)]);
  }
  w.end_object();
}

void host_thread_json(JsonWriter& w, const HostThreadStepReport& h) {
  w.begin_object();
  w.member("rank", h.rank);
  w.member("thread", h.thread);
  w.member("tid", h.tid);
  w.member("name", h.name);
  w.member("wall_ns", h.wall_ns);
  w.key("breakdown_ns");
  host_breakdown_json(w, h.breakdown_ns);
  w.key("culprits");
  w.begin_object();
  for (int i = 0; i < kHostCategoryCount; ++i) {
    w.key(to_string(static_cast<HostCategory>(i)));
    named_times_json(w, h.culprits[static_cast<size_t>(i)]);
  }
  w.end_object();
  w.end_object();
}

void step_json(JsonWriter& w, const StepReport& s) {
  w.begin_object();
  w.member("step", s.step);
  w.member("start_ns", s.start_ns);
  w.member("end_ns", s.end_ns);
  w.member("wall_ns", s.wall_ns);
  if (s.detail) w.member("detail", *s.detail);
  if (s.compile_warmup) w.member("compile_warmup", true);
  if (!s.complete) w.member("complete", false);
  w.key("devices");
  w.begin_array();
  for (const auto& d : s.devices) device_step_json(w, d);
  w.end_array();
  w.key("host");
  w.begin_array();
  for (const auto& h : s.host) host_thread_json(w, h);
  w.end_array();
  w.end_object();
}

void device_summary_json(JsonWriter& w, const DeviceSummary& d) {
  w.begin_object();
  w.member("device", d.device);
  w.member("rank", d.rank);
  w.member("name", d.name);
  w.member("wall_ns", d.wall_ns);
  w.key("breakdown_ns");
  breakdown_json(w, d.breakdown);
  const auto wall = static_cast<double>(d.wall_ns);
  w.key("busy_pct");
  ratio_or_null(w, static_cast<double>(d.breakdown.busy_ns()), wall, 100.0);
  w.key("idle_pct");
  ratio_or_null(w, static_cast<double>(d.breakdown.idle_total_ns()), wall, 100.0);
  w.key("culprits");
  culprits_json(w, d.culprits);
  w.member("kernels", d.kernels);
  w.key("sm_efficiency_est");
  optional_double(w, d.sm_efficiency_est);
  w.key("achieved_occupancy_est");
  optional_double(w, d.achieved_occupancy_est);
  w.key("mfu");
  optional_double(w, d.mfu);
  w.key("hfu");
  optional_double(w, d.hfu);
  w.end_object();
}

void summary_json(JsonWriter& w, const Report& r) {
  const Summary& s = r.summary;
  w.begin_object();
  w.member("steps", s.steps);
  w.member("steps_wall_ns", s.steps_wall_ns);
  w.member("trace_span_ns", s.trace_span_ns);
  w.member("outside_steps_ns", s.outside_steps_ns);
  w.member("last_step_backlog_ns", s.last_step_backlog_ns);
  w.member("last_step_unrecorded_ns", s.last_step_unrecorded_ns);
  w.key("step_wall_p50_ns");
  optional_int(w, s.step_wall_p50_ns);
  w.key("devices");
  w.begin_array();
  for (const auto& d : s.devices) device_summary_json(w, d);
  w.end_array();
  if (r.cluster) cluster_members(w, *r.cluster);  // summary.ranks, summary.cluster
  w.key("top_finding");
  if (r.findings.empty()) {
    w.null();
  } else {
    finding_json(w, r.findings.front());
  }
  w.end_object();
}

void diagnostics_json(JsonWriter& w, const Diagnostics& diags) {
  w.begin_array();
  for (size_t i = 0; i < kDiagCount; ++i) {
    const auto d = static_cast<Diag>(i);
    const uint64_t n = diags.count(d);
    if (n == 0) continue;
    const DiagInfo& info = diag_info(d);
    w.begin_object();
    w.member("name", info.name);
    w.member("severity", to_string(info.severity));
    w.member("count", n);
    w.member("description", info.description);
    w.key("example");
    string_or_null(w, diags.example(d));
    w.end_object();
  }
  w.end_array();
}

void sources_json(JsonWriter& w, const std::vector<SourceInfo>& sources) {
  w.begin_array();
  for (const auto& s : sources) {
    w.begin_object();
    w.member("path", s.path);
    w.member("rank", s.rank);
    w.member("steps_source", s.steps_source);
    w.member("activities", s.activities);
    w.member("api_calls", s.api_calls);
    w.member("ranges", s.ranges);
    w.end_object();
  }
  w.end_array();
}

}  // namespace

void finding_json(JsonWriter& w, const Finding& f) {
  w.begin_object();
  w.member("id", f.id);
  w.member("title", f.title);
  w.member("evidence", f.evidence);
  w.member("fix", f.fix);
  w.member("recoverable_ns", f.recoverable_ns);
  w.member("share_of_wall", f.share_of_wall);  // null when not finite
  if (f.rank >= 0) {  // cross-rank findings (docs/report-schema.md, "Cluster")
    w.member("rank", f.rank);
    w.member("host", f.host);
    w.member("cause", f.cause);
  }
  w.end_object();
}


void optional_bool(JsonWriter& w, const std::optional<bool>& v) {
  if (v) {
    w.value(*v);
  } else {
    w.null();
  }
}

// The input pipelines (docs/report-schema.md, "loaders[]").
void loaders_json(JsonWriter& w, const std::vector<LoaderReport>& loaders) {
  w.begin_array();
  for (const auto& l : loaders) {
    w.begin_object();
    w.member("rank", l.rank);
    w.member("name", l.name);
    w.key("settings");
    w.begin_object();
    w.key("num_workers");
    optional_int(w, l.settings.num_workers);
    w.key("pin_memory");
    optional_bool(w, l.settings.pin_memory);
    w.key("persistent_workers");
    optional_bool(w, l.settings.persistent_workers);
    w.key("prefetch_factor");
    optional_int(w, l.settings.prefetch_factor);
    w.end_object();
    w.member("batches", l.batches);
    w.member("wait_ns", l.wait_ns);
    w.key("batch_waits_ns");
    w.begin_array();
    for (int64_t v : l.batch_waits_ns) w.value(v);
    w.end_array();
    w.key("periodic_stall");
    if (l.periodic_stall) {
      const PeriodicStall& p = *l.periodic_stall;
      w.begin_object();
      w.member("period", p.period);
      w.member("slow_batches", p.slow_batches);
      w.member("slow_wait_ns", p.slow_wait_ns);
      w.member("slow_wait_p50_ns", p.slow_wait_p50_ns);
      w.member("other_wait_p50_ns", p.other_wait_p50_ns);
      w.end_object();
    } else {
      w.null();
    }
    w.end_object();
  }
  w.end_array();
}

std::string report_to_json(const Report& report, int indent) {
  std::string out;
  JsonWriter w(out, indent < 0 ? -1 : indent);
  w.begin_object();
  w.member("schema", kReportSchema);
  w.key("sources");
  sources_json(w, report.sources);
  w.key("flops_source");
  string_or_null(w, report.flops_source);
  w.key("workload");
  w.begin_object();
  w.member("kind", report.workload.kind);
  w.member("evidence", report.workload.evidence);
  w.member("capture_ns", report.workload.capture_ns);
  w.end_object();
  w.key("loaders");
  loaders_json(w, report.loaders);
  w.key("steps");
  w.begin_array();
  for (const auto& s : report.steps) step_json(w, s);
  w.end_array();
  w.key("summary");
  summary_json(w, report);
  w.key("findings");
  w.begin_array();
  for (const auto& f : report.findings) finding_json(w, f);
  w.end_array();
  w.key("diagnostics");
  diagnostics_json(w, report.diagnostics);
  w.end_object();
  w.finish();
  return out;
}

std::string run_totals_to_json(const RunTotals& totals) {
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  w.member("steps", totals.steps);
  w.member("steps_wall_ns", totals.steps_wall_ns);
  w.member("outside_steps_ns", totals.outside_steps_ns);
  w.key("outside_steps_breakdown_ns");
  w.begin_object();
  for (size_t k = 0; k < kOutsideKindCount; ++k) {
    w.member(outside_kind_name(static_cast<OutsideKind>(k)), totals.outside_named_ns[k]);
  }
  w.end_object();
  w.member("compile_warmup_steps", totals.compile_warmup_steps);
  w.member("incomplete_steps", totals.incomplete_steps);
  w.key("loaders");  // with their periodic stalls over the run
  loaders_json(w, totals.finished_loaders());
  w.key("devices");
  w.begin_array();
  for (const auto& [key, d] : totals.devices) {
    w.begin_object();
    w.member("rank", key.first);
    w.member("device", key.second);
    w.member("name", d.name);
    w.member("wall_ns", d.wall_ns);
    w.key("breakdown_ns");
    breakdown_json(w, d.breakdown);
    w.key("busy_pct");
    ratio_or_null(w, static_cast<double>(d.breakdown.busy_ns()), static_cast<double>(d.wall_ns), 100.0);
    w.end_object();
  }
  w.end_array();
  w.key("host");
  w.begin_array();
  for (const auto& [key, h] : totals.threads) {
    w.begin_object();
    w.member("rank", key.first);
    w.member("tid", key.second);
    w.member("name", h.name);
    w.member("steps", h.steps);
    w.member("wall_ns", h.wall_ns);
    w.key("breakdown_ns");
    host_breakdown_json(w, h.breakdown_ns);
    w.end_object();
  }
  w.end_array();
  // The run's findings (run_findings: the rules over the run, ranked), each
  // with the number of step reports whose own findings had its id.
  w.key("findings");
  w.begin_array();
  for (const Finding& f : run_findings(totals)) {
    w.begin_object();
    w.member("id", f.id);
    w.member("title", f.title);
    w.member("evidence", f.evidence);
    w.member("fix", f.fix);
    w.member("recoverable_ns", f.recoverable_ns);
    w.member("share_of_wall", f.share_of_wall);
    const auto seen = totals.findings.find(f.id);
    w.member("steps", seen == totals.findings.end() ? uint64_t{0} : seen->second.steps);
    w.end_object();
  }
  w.end_array();
  const Workload workload = totals.workload();
  w.key("workload");
  w.begin_object();
  w.member("kind", workload.kind);
  w.member("evidence", workload.evidence);
  w.member("capture_ns", workload.capture_ns);
  w.end_object();
  w.end_object();
  w.finish();
  return out;
}

}  // namespace gpuutil
