// Serialises a Report to the versioned JSON report schema "gpuutil.report/1".
//
// This is the one place that decides the on-disk shape of a report; the
// schema is documented field by field in docs/report-schema.md and every key
// written here appears there. Keys keep insertion order (ordered_json) so the
// output is stable and diffable. Rules applied throughout:
//   - durations are JSON integers (int64 ns), counts unsigned integers;
//   - an empty std::optional is null, and so is any non-finite double
//     (NaN/Inf never reach the output);
//   - invalid UTF-8 in names (kernel names from traces) is replaced, never
//     thrown on;
//   - indent < 0 gives one compact line (a JSON Lines record).
#include "gpuutil/report_json.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuutil {

namespace {

using Json = nlohmann::ordered_json;

// A double, or null when it is not finite.
Json number_or_null(double v) {
  if (!std::isfinite(v)) return Json(nullptr);
  return Json(v);
}

Json optional_double(const std::optional<double>& v) {
  if (!v) return Json(nullptr);
  return number_or_null(*v);
}

Json optional_int(const std::optional<int64_t>& v) {
  if (!v) return Json(nullptr);
  return Json(*v);
}

// numerator / denominator * scale, or null when the denominator is zero.
Json ratio_or_null(double numerator, double denominator, double scale) {
  if (denominator == 0) return Json(nullptr);
  return number_or_null(numerator / denominator * scale);
}

Json breakdown_json(const Breakdown& b) {
  Json j = Json::object();
  j["compute"] = b.compute_ns;
  j["communication"] = b.communication_ns;
  j["memory"] = b.memory_ns;
  for (int i = 0; i < kIdleCauseCount; ++i) {
    j[std::string("idle_") + to_string(static_cast<IdleCause>(i))] = b.idle_ns[static_cast<size_t>(i)];
  }
  return j;
}

Json named_times_json(const std::vector<NamedTime>& items) {
  Json arr = Json::array();
  for (const auto& t : items) {
    Json j = Json::object();
    j["name"] = t.name;
    j["ns"] = t.ns;
    j["count"] = t.count;
    arr.push_back(std::move(j));
  }
  return arr;
}

Json culprits_json(const std::array<std::vector<NamedTime>, kIdleCauseCount>& culprits) {
  Json j = Json::object();
  for (int i = 0; i < kIdleCauseCount; ++i) {
    j[to_string(static_cast<IdleCause>(i))] = named_times_json(culprits[static_cast<size_t>(i)]);
  }
  return j;
}

Json memcpy_json(const DeviceStepReport& d) {
  Json j = Json::object();
  for (int i = 0; i < kMemcpyDirectionCount; ++i) {
    const auto idx = static_cast<size_t>(i);
    const uint64_t bytes = d.memcpy_bytes[idx];
    const int64_t ns = d.memcpy_ns[idx];
    if (bytes == 0 && ns <= 0) continue;
    Json dir = Json::object();
    dir["bytes"] = bytes;
    dir["ns"] = ns;
    // bytes per ns is GB/s (1e9 bytes per 1e9 ns).
    dir["gbps"] = ns > 0 ? number_or_null(static_cast<double>(bytes) / static_cast<double>(ns)) : Json(nullptr);
    j[to_string(static_cast<MemcpyDirection>(i))] = std::move(dir);
  }
  return j;
}

// Device health from counters (docs/report-schema.md, "health"); null when
// the step had no counter samples for the device.
Json health_json(const DeviceHealth& h) {
  if (!h.any()) return Json(nullptr);
  auto opt_int = [](const std::optional<int64_t>& v) { return v ? Json(*v) : Json(nullptr); };
  Json j = Json::object();
  j["nvml_utilization_pct"] = optional_double(h.nvml_utilization_pct);
  j["sm_clock_mhz"] = optional_double(h.sm_clock_mhz);
  j["sm_clock_max_mhz"] = optional_double(h.sm_clock_max_mhz);
  j["mem_clock_mhz"] = optional_double(h.mem_clock_mhz);
  j["mem_clock_max_mhz"] = optional_double(h.mem_clock_max_mhz);
  j["power_w"] = optional_double(h.power_w);
  j["energy_j"] = optional_double(h.energy_j);
  j["temperature_c"] = optional_double(h.temperature_c);
  j["throttle_power_ns"] = opt_int(h.throttle_power_ns);
  j["throttle_thermal_ns"] = opt_int(h.throttle_thermal_ns);
  j["fb_used_bytes"] = optional_double(h.fb_used_bytes);
  j["allocated_bytes"] = optional_double(h.allocated_bytes);
  j["reserved_bytes"] = optional_double(h.reserved_bytes);
  j["peak_allocated_bytes"] = optional_double(h.peak_allocated_bytes);
  j["gpm_sm_util_pct"] = optional_double(h.gpm_sm_util_pct);
  j["gpm_sm_occupancy_pct"] = optional_double(h.gpm_sm_occupancy_pct);
  j["gpm_tensor_util_pct"] = optional_double(h.gpm_tensor_util_pct);
  j["gpm_dram_bw_util_pct"] = optional_double(h.gpm_dram_bw_util_pct);
  return j;
}

Json device_step_json(const DeviceStepReport& d) {
  Json j = Json::object();
  j["device"] = d.device;
  j["rank"] = d.rank;
  j["name"] = d.name;
  j["wall_ns"] = d.wall_ns;
  j["busy_ns"] = d.busy_ns;
  j["breakdown_ns"] = breakdown_json(d.breakdown);
  j["idle_ns"] = d.breakdown.idle_total_ns();
  j["culprits"] = culprits_json(d.culprits);
  j["kernels"] = d.kernels;
  j["memcpys"] = d.memcpys;
  j["memsets"] = d.memsets;
  j["short_kernels"] = d.short_kernels;
  j["sm_efficiency_est"] = optional_double(d.sm_efficiency_est);
  j["achieved_occupancy_est"] = optional_double(d.achieved_occupancy_est);
  j["memcpy"] = memcpy_json(d);
  Json comm = Json::object();
  comm["total_ns"] = d.communication_total_ns;
  comm["overlap_ns"] = d.communication_overlap_ns;
  comm["overlap_pct"] = ratio_or_null(static_cast<double>(d.communication_overlap_ns),
                                      static_cast<double>(d.communication_total_ns), 100.0);
  j["communication"] = std::move(comm);
  j["top_kernels"] = named_times_json(d.top_kernels);
  Json lat = Json::object();
  lat["p50"] = optional_int(d.launch_latency_p50_ns);
  lat["p95"] = optional_int(d.launch_latency_p95_ns);
  j["launch_latency_ns"] = std::move(lat);
  j["flops"] = optional_double(d.flops);
  j["peak_flops_per_s"] = optional_double(d.peak_flops_per_s);
  j["mfu"] = optional_double(d.mfu);
  j["health"] = health_json(d.health);
  return j;
}

Json host_breakdown_json(const std::array<int64_t, kHostCategoryCount>& breakdown_ns) {
  Json b = Json::object();
  for (int i = 0; i < kHostCategoryCount; ++i) {
    b[to_string(static_cast<HostCategory>(i))] = breakdown_ns[static_cast<size_t>(i)];
  }
  return b;
}

Json host_thread_json(const HostThreadStepReport& h) {
  Json j = Json::object();
  j["rank"] = h.rank;
  j["thread"] = h.thread;
  j["tid"] = h.tid;
  j["name"] = h.name;
  j["wall_ns"] = h.wall_ns;
  Json c = Json::object();
  for (int i = 0; i < kHostCategoryCount; ++i) {
    c[to_string(static_cast<HostCategory>(i))] = named_times_json(h.culprits[static_cast<size_t>(i)]);
  }
  j["breakdown_ns"] = host_breakdown_json(h.breakdown_ns);
  j["culprits"] = std::move(c);
  return j;
}

Json step_json(const StepReport& s) {
  Json j = Json::object();
  j["step"] = s.step;
  j["start_ns"] = s.start_ns;
  j["end_ns"] = s.end_ns;
  j["wall_ns"] = s.wall_ns;
  Json devices = Json::array();
  for (const auto& d : s.devices) devices.push_back(device_step_json(d));
  j["devices"] = std::move(devices);
  Json host = Json::array();
  for (const auto& h : s.host) host.push_back(host_thread_json(h));
  j["host"] = std::move(host);
  return j;
}

Json device_summary_json(const DeviceSummary& d) {
  Json j = Json::object();
  j["device"] = d.device;
  j["rank"] = d.rank;
  j["name"] = d.name;
  j["wall_ns"] = d.wall_ns;
  j["breakdown_ns"] = breakdown_json(d.breakdown);
  const auto wall = static_cast<double>(d.wall_ns);
  j["busy_pct"] = ratio_or_null(static_cast<double>(d.breakdown.busy_ns()), wall, 100.0);
  j["idle_pct"] = ratio_or_null(static_cast<double>(d.breakdown.idle_total_ns()), wall, 100.0);
  j["culprits"] = culprits_json(d.culprits);
  j["kernels"] = d.kernels;
  j["sm_efficiency_est"] = optional_double(d.sm_efficiency_est);
  j["achieved_occupancy_est"] = optional_double(d.achieved_occupancy_est);
  j["mfu"] = optional_double(d.mfu);
  return j;
}

Json finding_json(const Finding& f) {
  Json j = Json::object();
  j["id"] = f.id;
  j["title"] = f.title;
  j["evidence"] = f.evidence;
  j["fix"] = f.fix;
  j["recoverable_ns"] = f.recoverable_ns;
  j["share_of_wall"] = number_or_null(f.share_of_wall);
  return j;
}

Json summary_json(const Report& r) {
  const Summary& s = r.summary;
  Json j = Json::object();
  j["steps"] = s.steps;
  j["steps_wall_ns"] = s.steps_wall_ns;
  j["trace_span_ns"] = s.trace_span_ns;
  j["outside_steps_ns"] = s.outside_steps_ns;
  j["step_wall_p50_ns"] = optional_int(s.step_wall_p50_ns);
  Json devices = Json::array();
  for (const auto& d : s.devices) devices.push_back(device_summary_json(d));
  j["devices"] = std::move(devices);
  j["top_finding"] = r.findings.empty() ? Json(nullptr) : finding_json(r.findings.front());
  return j;
}

Json diagnostics_json(const Diagnostics& diags) {
  Json arr = Json::array();
  for (size_t i = 0; i < kDiagCount; ++i) {
    const auto d = static_cast<Diag>(i);
    const uint64_t n = diags.count(d);
    if (n == 0) continue;
    const DiagInfo& info = diag_info(d);
    Json j = Json::object();
    j["name"] = info.name;
    j["severity"] = to_string(info.severity);
    j["count"] = n;
    j["description"] = info.description;
    const std::string& example = diags.example(d);
    j["example"] = example.empty() ? Json(nullptr) : Json(example);
    arr.push_back(std::move(j));
  }
  return arr;
}

Json sources_json(const std::vector<SourceInfo>& sources) {
  Json arr = Json::array();
  for (const auto& s : sources) {
    Json j = Json::object();
    j["path"] = s.path;
    j["rank"] = s.rank;
    j["steps_source"] = s.steps_source;
    j["activities"] = s.activities;
    j["api_calls"] = s.api_calls;
    j["ranges"] = s.ranges;
    arr.push_back(std::move(j));
  }
  return arr;
}

}  // namespace

std::string report_to_json(const Report& report, int indent) {
  Json root = Json::object();
  root["schema"] = kReportSchema;
  root["sources"] = sources_json(report.sources);
  root["flops_source"] = report.flops_source.empty() ? Json(nullptr) : Json(report.flops_source);
  Json steps = Json::array();
  for (const auto& s : report.steps) steps.push_back(step_json(s));
  root["steps"] = std::move(steps);
  root["summary"] = summary_json(report);
  Json findings = Json::array();
  for (const auto& f : report.findings) findings.push_back(finding_json(f));
  root["findings"] = std::move(findings);
  root["diagnostics"] = diagnostics_json(report.diagnostics);
  // replace: a stray invalid UTF-8 byte in a kernel name must not throw.
  return root.dump(indent < 0 ? -1 : indent, ' ', false, Json::error_handler_t::replace);
}

std::string run_totals_to_json(const RunTotals& totals) {
  Json root = Json::object();
  root["steps"] = totals.steps;
  root["steps_wall_ns"] = totals.steps_wall_ns;
  Json devices = Json::array();
  for (const auto& [key, d] : totals.devices) {
    Json j = Json::object();
    j["rank"] = key.first;
    j["device"] = key.second;
    j["name"] = d.name;
    j["wall_ns"] = d.wall_ns;
    j["breakdown_ns"] = breakdown_json(d.breakdown);
    j["busy_pct"] = ratio_or_null(static_cast<double>(d.breakdown.busy_ns()), static_cast<double>(d.wall_ns), 100.0);
    devices.push_back(std::move(j));
  }
  root["devices"] = std::move(devices);
  Json host = Json::array();
  for (const auto& [key, h] : totals.threads) {
    Json j = Json::object();
    j["rank"] = key.first;
    j["tid"] = key.second;
    j["name"] = h.name;
    j["steps"] = h.steps;
    j["wall_ns"] = h.wall_ns;
    j["breakdown_ns"] = host_breakdown_json(h.breakdown_ns);
    host.push_back(std::move(j));
  }
  root["host"] = std::move(host);
  std::vector<std::pair<const std::string*, const FindingTotals*>> ranked;
  for (const auto& [id, f] : totals.findings) ranked.emplace_back(&id, &f);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second->recoverable_ns > b.second->recoverable_ns; });
  Json findings = Json::array();
  for (const auto& [id, f] : ranked) {
    Json j = Json::object();
    j["id"] = *id;
    j["title"] = f->title;
    j["fix"] = f->fix;
    j["recoverable_ns"] = f->recoverable_ns;
    j["steps"] = f->steps;
    findings.push_back(std::move(j));
  }
  root["findings"] = std::move(findings);
  return root.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gpuutil
