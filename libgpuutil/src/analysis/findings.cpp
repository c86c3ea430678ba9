// Finding rules (see findings.h and docs/findings.md).
#include "analysis/findings.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace gpuutil {

namespace {

constexpr double kModerate = 0.05;  // xprof "moderately input-bound"
constexpr double kHigh = 0.20;      // xprof "highly input-bound"

std::string ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}
std::string pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", f * 100.0);
  return buf;
}

std::string top_culprit(const DeviceSummary& d, IdleCause c) {
  const auto& v = d.culprits[static_cast<size_t>(c)];
  for (const auto& n : v) {
    if (!n.name.empty()) return n.name;
  }
  return "";
}

struct IdleRule {
  IdleCause cause;
  const char* id;
  const char* what;
  const char* fix;
};

constexpr IdleRule kIdleRules[] = {
    {IdleCause::kDataloader, "idle_dataloader", "GPU idle waiting on the input pipeline",
     "raise DataLoader num_workers, set pin_memory=True and persistent_workers=True, raise prefetch_factor, or move "
     "augmentation to the GPU / pre-bake it"},
    {IdleCause::kHostSync, "idle_host_sync", "GPU drained by host synchronization",
     "remove .item()/.cpu()/.tolist()/print of device tensors and blocking copies from the step (log every N steps, "
     "use non_blocking=True copies, keep metrics on the device)"},
    {IdleCause::kLaunch, "idle_launch", "GPU waiting on kernel launches (launch-bound)",
     "capture the step with CUDA graphs or torch.compile(mode=\"reduce-overhead\"), fuse small ops, or raise the batch "
     "size"},
    {IdleCause::kCollective, "idle_collective", "GPU idle while the host waits in collectives",
     "overlap communication with compute (DDP bucket_cap_mb, gradient accumulation with no_sync), and check for "
     "stragglers across ranks"},
    {IdleCause::kHost, "idle_host", "GPU idle while the host does other CPU work",
     "move CPU work off the critical path: fused/foreach optimizers, fewer Python-side ops per step, "
     "torch.compile, or overlap it with device work"},
};

}  // namespace

std::vector<Finding> derive_findings(const Report& report) {
  std::vector<Finding> out;
  for (const auto& d : report.summary.devices) {
    if (d.wall_ns <= 0) continue;
    const double wall = static_cast<double>(d.wall_ns);
    const std::string where = "rank " + std::to_string(d.rank) + " device " + std::to_string(d.device);
    const double steps = std::max<double>(1.0, static_cast<double>(report.summary.steps));
    for (const auto& rule : kIdleRules) {
      const int64_t ns = d.breakdown.idle_ns[static_cast<size_t>(rule.cause)];
      const double share = static_cast<double>(ns) / wall;
      if (share < kModerate) continue;
      Finding f;
      f.id = rule.id;
      f.title = std::string(share >= kHigh ? "Highly" : "Moderately") + " bound: " + rule.what + " " + pct(share) +
                " of step time on " + where;
      f.evidence = ms(static_cast<int64_t>(static_cast<double>(ns) / steps)) + " per step (" + ms(ns) +
                   " of " + ms(d.wall_ns) + ")";
      const std::string culprit = top_culprit(d, rule.cause);
      if (!culprit.empty()) f.evidence += "; top culprit: " + culprit;
      f.fix = rule.fix;
      f.recoverable_ns = ns;
      f.share_of_wall = share;
      out.push_back(std::move(f));
    }
    // Exposed communication: collective kernels running with nothing to hide them.
    const double comm_share = static_cast<double>(d.breakdown.communication_ns) / wall;
    if (comm_share >= kModerate) {
      Finding f;
      f.id = "exposed_communication";
      f.title = "Exposed communication: collective kernels run alone " + pct(comm_share) + " of step time on " + where;
      f.evidence = ms(d.breakdown.communication_ns) + " of communication not overlapped by compute";
      f.fix = "overlap communication with compute: tune DDP bucket_cap_mb, FSDP prefetching, or accumulate gradients";
      f.recoverable_ns = d.breakdown.communication_ns;
      f.share_of_wall = comm_share;
      out.push_back(std::move(f));
    }
    // Busy but with small kernels: low estimated SM efficiency.
    const double busy_share = static_cast<double>(d.breakdown.busy_ns()) / wall;
    if (d.sm_efficiency_est && busy_share >= 0.5 && *d.sm_efficiency_est < 0.5 * busy_share) {
      Finding f;
      f.id = "low_sm_efficiency";
      f.title = "Busy but narrow: estimated SM efficiency " + pct(*d.sm_efficiency_est) + " while busy " +
                pct(busy_share) + " on " + where;
      f.evidence = "kernels launch fewer blocks than the device has SMs for much of the busy time";
      f.fix = "fuse small kernels (torch.compile), raise the batch size, or run several jobs per GPU (MPS/MIG)";
      f.recoverable_ns = static_cast<int64_t>((busy_share - *d.sm_efficiency_est) * wall * 0.5);
      f.share_of_wall = static_cast<double>(f.recoverable_ns) / wall;
      out.push_back(std::move(f));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return a.recoverable_ns > b.recoverable_ns; });
  return out;
}

}  // namespace gpuutil
