// Run totals of a live session or a file of step reports (see
// gpuutil/run_totals.h): the fold, the run's workload, and its findings by
// the rules of analysis/findings.cpp.
#include "gpuutil/run_totals.h"

#include <algorithm>
#include <type_traits>

#include "analysis/findings.h"
#include "analysis/host_findings.h"
#include "analysis/loaders.h"

namespace gpuutil {

namespace {

void keep_max(std::optional<double>& into, const std::optional<double>& v) {
  if (v) into = into ? std::max(*into, *v) : *v;
}

// Adds `ns` to `name` in a map that keeps at most kCulpritNamesKept names:
// a new name past that replaces the one with the least time, if it has more.
template <typename Value, typename Ns>
void add_bounded(std::map<std::string, Value>& m, const std::string& name, Ns ns_of, int64_t ns, uint64_t count) {
  auto it = m.find(name);
  if (it == m.end()) {
    if (m.size() >= kCulpritNamesKept) {
      auto least = std::min_element(m.begin(), m.end(),
                                    [&](const auto& a, const auto& b) { return ns_of(a.second) < ns_of(b.second); });
      if (ns_of(least->second) >= ns) return;
      m.erase(least);
    }
    it = m.emplace(name, Value{}).first;
  }
  if constexpr (std::is_same_v<Value, NamedTime>) {
    it->second.name = name;
    it->second.ns += ns;
    it->second.count += count;
  } else {
    it->second += ns;
  }
}

int64_t classified_ns(const HostThreadStepReport& h) {
  return h.wall_ns - h.breakdown_ns[static_cast<int>(HostCategory::kOther)] -
         h.breakdown_ns[static_cast<int>(HostCategory::kCollective)];
}

// A live step's workload evidence ends its first clause list with "; 1 step
// from <source>" (one window): the run states its own count instead.
std::string without_step_count(std::string evidence) {
  const std::string mark = "; 1 step";
  const size_t at = evidence.find(mark);
  if (at == std::string::npos) return evidence;
  const size_t after = at + mark.size();
  if (after < evidence.size() && evidence[after] != ' ' && evidence[after] != ';') return evidence;  // "; 1 steps"
  const size_t end = evidence.find(';', after);
  evidence.erase(at, end == std::string::npos ? std::string::npos : end - at);
  return evidence;
}

}  // namespace

const char* outside_kind_name(OutsideKind k) {
  switch (k) {
    case OutsideKind::kEvaluation: return "evaluation";
    case OutsideKind::kCheckpoint: return "checkpoint";
    case OutsideKind::kCompileWarmup: return "compile_warmup";
    case OutsideKind::kIncomplete: return "incomplete";
    case OutsideKind::kOther: break;
  }
  return "other";
}

void DeviceHealthTotals::add(const DeviceStepReport& s) {
  const DeviceHealth& x = s.health;
  if (x.throttle_power_ns || x.throttle_thermal_ns) throttle_known = true;
  throttle_power_ns += x.throttle_power_ns.value_or(0);
  throttle_thermal_ns += x.throttle_thermal_ns.value_or(0);
  if (x.sm_clock_mhz && x.sm_clock_max_mhz && *x.sm_clock_max_mhz > 0) {
    sm_clock_sum += *x.sm_clock_mhz;
    sm_clock_max = std::max(sm_clock_max, *x.sm_clock_max_mhz);
    ++sm_clock_n;
  }
  keep_max(allocated_max, x.peak_allocated_bytes ? x.peak_allocated_bytes : x.allocated_bytes);
  keep_max(reserved_max, x.reserved_bytes);
  keep_max(fb_used_max, x.fb_used_bytes);
  keep_max(power_w_max, x.power_w);
  keep_max(temperature_c_max, x.temperature_c);
  total_memory_bytes = std::max(total_memory_bytes, s.total_memory_bytes);
  short_kernels += s.short_kernels;
  kernels += s.kernels;
  pageable_memcpys += s.pageable_memcpys;
  pageable_memcpy_bytes += s.pageable_memcpy_bytes;
}

DeviceSummary DeviceTotals::summary(int32_t rank, int32_t device, size_t top_n) const {
  DeviceSummary d;
  d.rank = rank;
  d.device = device;
  d.name = name;
  d.wall_ns = wall_ns;
  d.breakdown = breakdown;
  d.kernels = health.kernels;
  for (size_t c = 0; c < culprits.size(); ++c) {
    std::vector<NamedTime> v;
    for (const auto& [n, t] : culprits[c]) v.push_back(t);
    std::sort(v.begin(), v.end(),
              [](const NamedTime& a, const NamedTime& b) { return a.ns != b.ns ? a.ns > b.ns : a.name < b.name; });
    if (v.size() > top_n) v.resize(top_n);
    d.culprits[c] = std::move(v);
  }
  const auto wall = static_cast<double>(wall_ns);
  if (sm_known && wall_ns > 0) d.sm_efficiency_est = std::min(1.0, sm_weighted_ns / wall);
  if (occupancy_weight_ns > 0) d.achieved_occupancy_est = occupancy_weighted_ns / occupancy_weight_ns;
  if (flops_known && peak_flops_per_s && *peak_flops_per_s > 0 && wall_ns > 0) {
    d.mfu = flops / (wall * 1e-9 * *peak_flops_per_s);
  }
  return d;
}

void RunTotals::add(const Report& report) {
  for (const StepReport& s : report.steps) {
    ++steps;
    steps_wall_ns += s.wall_ns;
    for (const DeviceStepReport& d : s.devices) {
      DeviceTotals& t = devices[{d.rank, d.device}];
      if (t.name.empty()) t.name = d.name;
      t.wall_ns += d.wall_ns;
      t.breakdown += d.breakdown;
      t.health.add(d);
      for (size_t c = 0; c < d.culprits.size(); ++c) {
        for (const NamedTime& n : d.culprits[c]) {
          add_bounded(t.culprits[c], n.name, [](const NamedTime& v) { return v.ns; }, n.ns, n.count);
        }
      }
      if (d.sm_efficiency_est) {
        t.sm_weighted_ns += *d.sm_efficiency_est * static_cast<double>(d.wall_ns);
        t.sm_known = true;
      }
      // Weighted by the compute time the estimate speaks for (persistent
      // launches are left out of it).
      const int64_t weight_ns = std::max<int64_t>(0, d.breakdown.compute_ns - d.persistent_kernel_ns);
      if (d.achieved_occupancy_est && weight_ns > 0) {
        t.occupancy_weighted_ns += *d.achieved_occupancy_est * static_cast<double>(weight_ns);
        t.occupancy_weight_ns += static_cast<double>(weight_ns);
      }
      if (d.flops) {
        t.flops += *d.flops;
        t.flops_known = true;
      }
      if (d.peak_flops_per_s) t.peak_flops_per_s = d.peak_flops_per_s;
    }
    std::map<int32_t, const HostThreadStepReport*> main;
    for (const HostThreadStepReport& h : s.host) {
      HostThreadTotals& t = threads[{h.rank, h.tid}];
      if (t.name.empty()) t.name = h.name;
      ++t.steps;
      t.wall_ns += h.wall_ns;
      for (size_t i = 0; i < t.breakdown_ns.size(); ++i) t.breakdown_ns[i] += h.breakdown_ns[i];
      const HostThreadStepReport*& m = main[h.rank];
      if (m == nullptr || classified_ns(h) > classified_ns(*m)) m = &h;
    }
    for (const auto& [rank, h] : main) {
      MainThreadTotals& t = main_threads[rank];
      ++t.steps;
      t.wall_ns += h->wall_ns;
      for (size_t c = 0; c < t.breakdown_ns.size(); ++c) {
        t.breakdown_ns[c] += h->breakdown_ns[c];
        for (const NamedTime& n : h->culprits[c]) {
          add_bounded(t.culprits[c], n.name, [](int64_t v) { return v; }, n.ns, n.count);
        }
      }
    }
  }
  if (!report.steps.empty()) {
    workload_steps[report.workload.kind] += report.steps.size();
    workload_evidence[report.workload.kind] = without_step_count(report.workload.evidence);
    capture_ns += report.workload.capture_ns;
  }
  for (const SourceInfo& src : report.sources) {
    if (steps_source.empty() && !src.steps_source.empty()) steps_source = src.steps_source;
  }
  for (const LoaderReport& l : report.loaders) fold_loader(loader_of(loaders, l.rank, l.name), l);
  for (const Finding& f : report.findings) {
    FindingTotals& t = findings[f.id];
    if (t.title.empty()) {
      t.title = f.title;
      t.fix = f.fix;
    }
    t.recoverable_ns += f.recoverable_ns;
    ++t.steps;
  }
}

Workload RunTotals::workload() const {
  Workload w;
  w.capture_ns = capture_ns;
  uint64_t most = 0;
  for (const char* kind : {"training", "inference", "capture", "unknown"}) {
    const auto it = workload_steps.find(kind);
    if (it != workload_steps.end() && it->second > most) {
      most = it->second;
      w.kind = kind;
    }
  }
  if (most == 0) return w;
  std::string e = workload_evidence.at(w.kind);
  e += std::string(e.empty() ? "" : "; ") + std::to_string(steps) + (steps == 1 ? " step" : " steps");
  if (!steps_source.empty()) e += " from " + steps_source;
  if (most < steps) e += "; " + w.kind + " in " + std::to_string(most) + " of them";
  w.evidence = std::move(e);
  return w;
}

std::vector<LoaderReport> RunTotals::finished_loaders() const {
  std::vector<LoaderReport> out = loaders;
  finish_loaders(out, {});  // their periodic stalls over the run's batches
  return out;
}

std::vector<Finding> run_findings(const RunTotals& t) {
  Summary s;
  s.steps = t.steps;
  s.steps_wall_ns = t.steps_wall_ns;
  s.outside_steps_ns = t.outside_steps_ns;
  s.trace_span_ns = t.steps_wall_ns + t.outside_steps_ns;
  std::vector<DeviceHealthTotals> health;
  bool device = false;
  for (const auto& [key, d] : t.devices) {
    s.devices.push_back(d.summary(key.first, key.second));
    health.push_back(d.health);
    device = device || d.wall_ns > 0;
  }
  std::vector<HostTotals> host;
  if (!device) {
    for (const auto& [rank, m] : t.main_threads) {
      HostTotals h;
      h.rank = rank;
      h.wall_ns = m.wall_ns;
      h.steps = m.steps;
      h.ns = m.breakdown_ns;
      for (size_t c = 0; c < m.culprits.size(); ++c) {
        const auto& names = m.culprits[c];
        const auto best = std::max_element(names.begin(), names.end(),
                                           [](const auto& a, const auto& b) { return a.second < b.second; });
        if (best != names.end()) h.top_culprit[c] = best->first;
      }
      host.push_back(std::move(h));
    }
  }
  const Workload workload = t.workload();
  RunFacts facts{s, workload, std::move(health), std::move(host), t.outside_named_ns, t.finished_loaders()};
  std::vector<Finding> out = findings_of(facts);
  for (Finding& f : out) {  // how often the step's own rule fired, when it did
    const auto seen = t.findings.find(f.id);
    if (seen == t.findings.end() || seen->second.steps == 0 || t.steps < 2) continue;
    f.evidence += "; in " + std::to_string(seen->second.steps) + " of " + std::to_string(t.steps) + " steps";
  }
  return out;
}

RunTotals run_totals_of_reports(const std::vector<Report>& reports) {
  RunTotals t;
  bool any = false;
  int64_t last_end_ns = 0;
  for (const Report& r : reports) {
    for (const StepReport& s : r.steps) {
      if (any && s.start_ns > last_end_ns) t.outside_steps_ns += s.start_ns - last_end_ns;
      last_end_ns = any ? std::max(last_end_ns, s.end_ns) : s.end_ns;
      any = true;
    }
    const bool incomplete = !r.steps.empty() && !r.steps.front().complete;
    const bool warmup = !r.steps.empty() && r.steps.front().compile_warmup;
    if (!warmup && !incomplete) {
      t.add(r);
      continue;
    }
    // An incomplete step or a torch.compile warm-up: reported, but kept out
    // of the run's figures (as Session::collect_batch does).
    const OutsideKind kind = incomplete ? OutsideKind::kIncomplete : OutsideKind::kCompileWarmup;
    for (const StepReport& s : r.steps) {
      t.outside_steps_ns += s.wall_ns;
      t.outside_named_ns[static_cast<size_t>(kind)] += s.wall_ns;
      ++(incomplete ? t.incomplete_steps : t.compile_warmup_steps);
    }
  }
  int64_t named = 0;
  for (size_t k = 0; k + 1 < kOutsideKindCount; ++k) named += t.outside_named_ns[k];
  t.outside_named_ns[static_cast<size_t>(OutsideKind::kOther)] = std::max<int64_t>(0, t.outside_steps_ns - named);
  return t;
}

}  // namespace gpuutil
