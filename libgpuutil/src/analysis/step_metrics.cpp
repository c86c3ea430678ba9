// Kernel counts, SM efficiency/occupancy estimates, memcpy bandwidth, top
// kernels and launch latency for one device and window.
#include "analysis/step_metrics.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "analysis/occupancy.h"

namespace gpuutil {

namespace {

std::vector<NamedTime> top_by_time(const std::unordered_map<NameId, NamedTime>& m, const NameTable& names,
                                   size_t n) {
  std::vector<std::pair<NameId, NamedTime>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second.ns != b.second.ns ? a.second.ns > b.second.ns : a.first < b.first;
  });
  std::vector<NamedTime> out;
  for (size_t i = 0; i < v.size() && i < n; ++i) {
    out.push_back(v[i].second);
    out.back().name = std::string(names.view(v[i].first));
  }
  return out;
}

int64_t percentile(std::vector<int64_t>& v, double q) {
  const size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace

StepMetricSums compute_step_metrics(const EventStore& store, const DeviceTimeline& tl, const HostTimelines& host,
                                    int64_t lo_ns, int64_t hi_ns, const AnalysisOptions& options,
                                    DeviceStepReport& out) {
  StepMetricSums sums;
  const DeviceInfo* info = store.device_info(tl.device);
  const std::optional<OccupancyLimits> limits = info ? resolve_occupancy_limits(*info) : std::nullopt;
  std::unordered_map<NameId, NamedTime> kernel_time;
  std::vector<int64_t> latencies_ns;
  const auto& acts = store.activities;
  for (size_t k = first_candidate(tl, store, lo_ns); k < tl.by_start.size(); ++k) {
    const uint32_t index = tl.by_start[k];
    const auto& a = acts[index];
    if (a.start_ns >= hi_ns) break;
    if (a.end_ns <= lo_ns && !(a.start_ns == a.end_ns && a.start_ns >= lo_ns)) continue;
    const bool starts_here = a.start_ns >= lo_ns;
    const int64_t in_ns = std::max<int64_t>(0, std::min(a.end_ns, hi_ns) - std::max(a.start_ns, lo_ns));
    if (a.kind == ActivityKind::kKernel) {
      if (starts_here) {
        ++out.kernels;
        if (a.duration_ns() < options.short_kernel_threshold_ns) ++out.short_kernels;
        if (host.launch_of[index] != kNoLaunch) {
          const int64_t lat = a.start_ns - store.api_calls[host.launch_of[index]].start_ns;
          if (lat >= 0) latencies_ns.push_back(lat);
        }
      }
      auto& kt = kernel_time[a.name];
      kt.ns += in_ns;
      kt.count += starts_here ? 1 : 0;
      if (info) {
        if (auto e = estimate_sm_efficiency(a, *info)) {
          sums.sm_weighted_ns += *e * static_cast<double>(in_ns);
          sums.sm_known = true;
        }
        if (auto o = limits ? estimate_achieved_occupancy(a, *info, *limits) : std::nullopt) {
          sums.occ_weighted_ns += *o * static_cast<double>(in_ns);
          sums.occ_kernel_ns += static_cast<double>(in_ns);
        }
      }
    } else if (starts_here) {
      if (a.kind == ActivityKind::kMemcpy) {
        ++out.memcpys;
        const auto d = static_cast<size_t>(a.direction);
        out.memcpy_bytes[d] += a.bytes;
        out.memcpy_ns[d] += a.duration_ns();
      } else {
        ++out.memsets;
      }
    }
  }
  out.top_kernels = top_by_time(kernel_time, store.names, options.top_n);
  const int64_t wall = hi_ns - lo_ns;
  if (sums.sm_known && wall > 0) {
    out.sm_efficiency_est = std::min(1.0, sums.sm_weighted_ns / static_cast<double>(wall));
  }
  if (sums.occ_kernel_ns > 0) out.achieved_occupancy_est = sums.occ_weighted_ns / sums.occ_kernel_ns;
  if (!latencies_ns.empty()) {
    out.launch_latency_p50_ns = percentile(latencies_ns, 0.50);
    out.launch_latency_p95_ns = percentile(latencies_ns, 0.95);
  }
  return sums;
}

}  // namespace gpuutil
