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
                                    DeviceStepReport& out, StepMetricsScratch* scratch) {
  StepMetricSums sums;
  const DeviceInfo* info = store.device_info(tl.device);
  std::optional<OccupancyLimits> own_limits;
  const std::optional<OccupancyLimits>* limits_p = &own_limits;
  if (info) {
    if (scratch) {
      auto it = scratch->limits.find(tl.device);
      if (it == scratch->limits.end()) it = scratch->limits.emplace(tl.device, resolve_occupancy_limits(*info)).first;
      limits_p = &it->second;
    } else {
      own_limits = resolve_occupancy_limits(*info);
    }
  }
  const std::optional<OccupancyLimits>& limits = *limits_p;
  constexpr size_t kCacheSize = 1024;
  if (scratch && info && limits && scratch->occupancy.size() != kCacheSize) scratch->occupancy.assign(kCacheSize, {});
  // Occupancy is a pure function of the launch configuration (the device and
  // its limits being fixed): memoised when the caller gives a scratch.
  // (occupancy, persistent launch)
  auto occupancy_of = [&](const DeviceActivity& a) -> std::pair<std::optional<double>, bool> {
    if (!scratch) {
      const auto d = estimate_occupancy_detail(a, *info, *limits);
      return {d ? std::optional<double>(d->achieved_occupancy) : std::nullopt, d && d->persistent};
    }
    const uint64_t blocks = a.blocks(), threads = a.threads_per_block();
    const size_t h = static_cast<size_t>((blocks * 0x9E3779B97F4A7C15ull) ^ (threads * 0xC2B2AE3D27D4EB4Full) ^
                                         (uint64_t(a.registers_per_thread) << 20) ^
                                         (uint64_t(a.shared_memory_bytes) * 0x165667B19E3779F9ull) ^
                                         uint64_t(uint32_t(tl.device)) * 0x27D4EB2F165667C5ull);
    auto& e = scratch->occupancy[(h ^ (h >> 29)) % kCacheSize];
    if (!e.used || e.device != tl.device || e.blocks != blocks || e.threads != threads ||
        e.registers != a.registers_per_thread || e.shared_bytes != a.shared_memory_bytes) {
      e.used = true;
      e.device = tl.device;
      e.blocks = blocks;
      e.threads = threads;
      e.registers = a.registers_per_thread;
      e.shared_bytes = a.shared_memory_bytes;
      const auto d = estimate_occupancy_detail(a, *info, *limits);
      e.occupancy = d ? std::optional<double>(d->achieved_occupancy) : std::nullopt;
      e.persistent = d && d->persistent;
    }
    return {e.occupancy, e.persistent};
  };
  std::unordered_map<NameId, NamedTime> kernel_time;
  std::vector<int64_t> latencies_ns, graph_latencies_ns;
  std::vector<uint32_t> graph_launches_seen;  // a graph's first kernel gives its launch latency
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
        const uint32_t launch = host.launch_of[index];
        const bool graph = a.graph_id != 0 || (launch != kNoLaunch && store.api_calls[launch].graph);
        if (graph) ++out.graph_kernels;
        if (launch != kNoLaunch) {
          // Every kernel of a graph carries the graph launch's correlation
          // id: only its first kernel measures the launch.
          const int64_t lat = a.start_ns - store.api_calls[launch].start_ns;
          if (!graph) {
            if (lat >= 0) latencies_ns.push_back(lat);
          } else if (std::find(graph_launches_seen.begin(), graph_launches_seen.end(), launch) ==
                     graph_launches_seen.end()) {
            graph_launches_seen.push_back(launch);
            if (lat >= 0) graph_latencies_ns.push_back(lat);
          }
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
        if (limits) {
          const auto [o, persistent] = occupancy_of(a);
          if (persistent) {
            out.persistent_kernel_ns += in_ns;  // occupancy by design: not in the estimate
          } else if (o) {
            sums.occ_weighted_ns += *o * static_cast<double>(in_ns);
            sums.occ_kernel_ns += static_cast<double>(in_ns);
          }
        }
      }
    } else if (starts_here) {
      if (a.kind == ActivityKind::kMemcpy) {
        ++out.memcpys;
        const auto d = static_cast<size_t>(a.direction);
        out.memcpy_bytes[d] += a.bytes;
        out.memcpy_ns[d] += a.duration_ns();
        if (a.host_pageable) {
          ++out.pageable_memcpys;
          out.pageable_memcpy_bytes += a.bytes;
        }
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
  if (!graph_latencies_ns.empty()) {
    out.graph_launch_latency_p50_ns = percentile(graph_latencies_ns, 0.50);
    out.graph_launch_latency_p95_ns = percentile(graph_latencies_ns, 0.95);
  }
  return sums;
}

}  // namespace gpuutil
