// Finding rules (see findings.h; every threshold is in docs/findings.md).
//
// Each rule reads one device's run totals (DeviceSummary) and, for counters,
// memory and copies, that device's health folded over its step reports
// (DeviceHealthTotals, in RunFacts); it fires only when its
// evidence crosses a documented threshold, says what it saw, estimates the
// time a fix could recover, and names the fix. The fix text fits the run's
// workload (Report::workload: training, inference, capture, unknown), and
// CUDA-graph capture time is not charged as recoverable idle. Rules never
// read collectors.
#include "analysis/findings.h"

#include "analysis/host_findings.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "analysis/text_format.h"

namespace gpuutil {

namespace {

// Shares of step wall time (xprof's input-bound convention).
constexpr double kModerate = 0.05;  // xprof "moderately input-bound"
constexpr double kHigh = 0.20;      // xprof "highly input-bound"
// "Busy" rules only judge a device that is busy at least this share.
constexpr double kBusyEnough = 0.50;
// SM efficiency below this share of the busy share: kernels too narrow.
constexpr double kSmEfficiencyOfBusy = 0.50;
// Achieved occupancy (estimate) below this while busy: low occupancy.
constexpr double kLowOccupancy = 0.25;
// MFU below this while busy; recoverable time measured against kMfuTarget.
constexpr double kLowMfu = 0.30;
constexpr double kMfuTarget = 0.50;
// Reserved memory at least this multiple of allocated, and at least kSlackBytes more.
constexpr double kReservedOverAllocated = 2.0;
constexpr double kSlackBytes = 1024.0 * 1024.0 * 1024.0;
// Small job: SM efficiency and memory footprint both below this share of the device.
constexpr double kSmallJob = 0.25;
// Pageable copies: fires when copies to/from pageable host memory move at
// least this many bytes per step. Below it they are scalar reads (.item(),
// a few bytes each) that pinning does not help; their cost is the sync
// (idle_host_sync).
constexpr double kPageableBytesPerStep = 1024.0 * 1024.0;

enum class Kind { kUnknown, kTraining, kInference, kCapture };

Kind kind_of(const Workload& w) {
  if (w.kind == "training") return Kind::kTraining;
  if (w.kind == "inference") return Kind::kInference;
  if (w.kind == "capture") return Kind::kCapture;
  return Kind::kUnknown;
}

// Names of up to n culprits of a cause, "a (12.0 ms), b (3.1 ms)".
std::string culprit_list(const DeviceSummary& d, IdleCause c, size_t n) {
  std::string out;
  size_t k = 0;
  for (const auto& t : d.culprits[static_cast<size_t>(c)]) {
    if (t.name.empty()) continue;
    if (k++ == n) break;
    if (!out.empty()) out += ", ";
    out += t.name + " (" + ms_text(t.ns) + ", x" + std::to_string(t.count) + ")";
  }
  return out;
}

struct IdleRule {
  IdleCause cause;
  const char* id;
  const char* what;
  const char* fix;            // unknown workload (and any kind without its own text)
  const char* training_fix;   // nullptr: fix
  const char* inference_fix;  // nullptr: fix
};

constexpr IdleRule kIdleRules[] = {
    // Its fix reads the loader (loader_fix in host_findings.h): never a setting it already has.
    {IdleCause::kDataloader, "idle_dataloader", "GPU idle waiting on the input pipeline", "", nullptr, nullptr},
    {IdleCause::kHostSync, "idle_host_sync", "GPU drained by host synchronization",
     "remove .item()/.cpu()/.tolist()/print of device tensors and blocking copies from the step (log every N steps, "
     "use non_blocking=True copies, keep metrics on the device)",
     nullptr, nullptr},
    {IdleCause::kLaunch, "idle_launch", "GPU waiting on kernel launches (launch-bound)",
     "capture the step with CUDA graphs or torch.compile(mode=\"reduce-overhead\"), fuse small ops, or raise the batch "
     "size",
     nullptr,
     "launch-bound inference: capture the forward with CUDA graphs or torch.compile(mode=\"reduce-overhead\"), and "
     "give each launch more work: dynamic or continuous batching within a queue-delay budget, more model "
     "concurrency (several CUDA streams or model instances), or MIG/MPS when the model is small"},
    {IdleCause::kCollective, "idle_collective", "GPU idle while the host waits in collectives",
     "overlap communication with compute (DDP bucket_cap_mb, gradient accumulation with no_sync), and check for "
     "stragglers across ranks",
     nullptr,
     "check for stragglers across ranks, overlap collectives with compute, or use less tensor/pipeline parallelism "
     "when the model fits on fewer GPUs"},
    {IdleCause::kHost, "idle_host", "GPU idle while the host does other CPU work",
     "move CPU work off the critical path: fewer Python-side ops per step, torch.compile, or overlap it with device "
     "work",
     "move CPU work off the critical path: fused/foreach optimizers, fewer Python-side ops per step, "
     "torch.compile, or overlap it with device work",
     "host-bound inference: capture the forward with CUDA graphs or torch.compile(mode=\"reduce-overhead\") and move "
     "pre/post-processing off the serving thread; keep the device fed with dynamic or continuous batching within a "
     "queue-delay budget, more model concurrency (several CUDA streams or model instances), or MIG/MPS when the "
     "model is small"},
    {IdleCause::kDependency, "idle_dependency", "GPU idle with work queued behind a dependency",
     "the queued work waits on another stream, an event or a graph edge: check cross-stream waits "
     "(wait_stream/record_stream), split independent work onto streams that can overlap, and make sure no "
     "blocking copy or collective holds the stream it waits on",
     nullptr, nullptr},
};

const char* fix_for(const IdleRule& rule, Kind kind) {
  if (kind == Kind::kTraining && rule.training_fix) return rule.training_fix;
  if (kind == Kind::kInference && rule.inference_fix) return rule.inference_fix;
  return rule.fix;
}

// Health of one device over a report's steps (gpuutil/run_totals.h).
using RunHealth = DeviceHealthTotals;

RunHealth run_health(const Report& report, const DeviceSummary& d) {
  RunHealth h;
  for (const auto& step : report.steps) {
    for (const auto& s : step.devices) {
      if (s.device == d.device && s.rank == d.rank) h.add(s);
    }
  }
  return h;
}

Finding make(const char* id, std::string title, std::string evidence, std::string fix, int64_t recoverable_ns,
             double wall) {
  return make_finding(id, std::move(title), std::move(evidence), std::move(fix), recoverable_ns, wall);
}

// Share of the analysed time inside CUDA-graph capture windows: capture_ns
// over the analysed wall of every rank (a rank's wall is its devices'). Exact
// for one rank; with several, capture time is spread over ranks by wall.
double capture_share(const RunFacts& report) {
  if (report.workload.capture_ns <= 0) return 0.0;
  std::vector<std::pair<int32_t, int64_t>> rank_wall;
  for (const auto& d : report.summary.devices) {
    auto it = std::find_if(rank_wall.begin(), rank_wall.end(), [&](const auto& rw) { return rw.first == d.rank; });
    if (it == rank_wall.end()) {
      rank_wall.emplace_back(d.rank, d.wall_ns);
    } else {
      it->second = std::max(it->second, d.wall_ns);
    }
  }
  int64_t analysed_ns = 0;
  for (const auto& rw : rank_wall) analysed_ns += rw.second;
  if (analysed_ns <= 0) return 0.0;
  return std::min(1.0, static_cast<double>(report.workload.capture_ns) / static_cast<double>(analysed_ns));
}

void device_findings(const RunFacts& report, const DeviceSummary& d, const RunHealth& h, std::vector<Finding>& out) {
  const double wall = static_cast<double>(d.wall_ns);
  const std::string where = "rank " + std::to_string(d.rank) + " device " + std::to_string(d.device);
  const double steps = std::max<double>(1.0, static_cast<double>(report.summary.steps));
  const Kind kind = kind_of(report.workload);
  const bool pageable = static_cast<double>(h.pageable_memcpy_bytes) / steps >= kPageableBytesPerStep;

  // CUDA-graph capture windows: the device idles while work is recorded, so
  // that idle is expected, not waste. Captured work does not run, so the
  // capture time on this device is taken out of its idle time (every cause
  // in proportion); a capture-dominated run has no idle findings at all.
  const int64_t idle_total_ns = d.breakdown.idle_total_ns();
  const int64_t capture_idle_ns =
      std::min(idle_total_ns, static_cast<int64_t>(capture_share(report) * wall));
  const double idle_kept =
      idle_total_ns > 0 ? static_cast<double>(idle_total_ns - capture_idle_ns) / static_cast<double>(idle_total_ns)
                        : 1.0;
  const auto chargeable_idle = [&](IdleCause c) {
    return static_cast<int64_t>(static_cast<double>(d.breakdown.idle_ns[static_cast<size_t>(c)]) * idle_kept);
  };

  // Idle, by cause. The device's own turnaround between back-to-back queued
  // work (idle_kernel_gap) is no finding and no serving idle either.
  const int64_t kernel_gap_ns = chargeable_idle(IdleCause::kKernelGap);
  int64_t unclaimed_idle_ns = -kernel_gap_ns;  // chargeable idle no idle rule below claims (for idle_serving)
  for (int c = 0; c < kIdleCauseCount; ++c) unclaimed_idle_ns += chargeable_idle(static_cast<IdleCause>(c));
  for (const auto& rule : kIdleRules) {
    if (kind == Kind::kCapture) break;
    const int64_t ns = chargeable_idle(rule.cause);
    const double share = static_cast<double>(ns) / wall;
    if (share < kModerate) continue;
    unclaimed_idle_ns -= ns;
    std::string evidence = ms_text(static_cast<int64_t>(static_cast<double>(ns) / steps)) + " per step (" + ms_text(ns) +
                           " of " + ms_text(d.wall_ns) + ")";
    if (capture_idle_ns > 0) evidence += " after excluding " + ms_text(capture_idle_ns) + " of CUDA-graph capture";
    const std::string culprits = culprit_list(d, rule.cause, rule.cause == IdleCause::kHostSync ? 3 : 1);
    if (!culprits.empty()) {
      evidence += rule.cause == IdleCause::kHostSync ? "; culprit ops: " : "; top culprit: ";
      evidence += culprits;
    }
    if (rule.cause == IdleCause::kLaunch && h.kernels > 0) {
      evidence += "; " + pct_text(static_cast<double>(h.short_kernels) / static_cast<double>(h.kernels)) +
                  " of kernels are short";
    }
    std::string fix = fix_for(rule, kind);
    std::string title_end;
    if (rule.cause == IdleCause::kDataloader) {  // read from the loader itself (host_findings.h)
      const LoaderReport* loader = main_loader(report.loaders, d.rank);
      evidence += loader_evidence(loader);
      title_end = loader_title(loader);
      fix = loader_fix(loader, kind == Kind::kInference ? LoaderFixFor::kDeviceInference : LoaderFixFor::kDeviceTraining);
    }
    if (rule.cause == IdleCause::kHostSync && pageable) {
      evidence += "; " + std::to_string(h.pageable_memcpys) + " copies from pageable memory block the host too";
      fix += "; pin the host side of copies (see pageable_copy)";
    }
    out.push_back(make(rule.id,
                       std::string(share >= kHigh ? "Highly" : "Moderately") + " bound: " + rule.what + " " +
                           pct_text(share) + " of step time on " + where + title_end,
                       std::move(evidence), std::move(fix), ns, wall));
  }

  // Inference with a large idle share that no single cause explains (the
  // device waits for requests): idle >= 20% of wall, of which >= 5% is not
  // claimed by an idle_* finding above. Recovers only that unclaimed part,
  // so idle is never counted twice.
  const int64_t chargeable_idle_ns =
      static_cast<int64_t>(static_cast<double>(idle_total_ns) * idle_kept) - kernel_gap_ns;
  if (kind == Kind::kInference && static_cast<double>(chargeable_idle_ns) / wall >= kHigh &&
      static_cast<double>(unclaimed_idle_ns) / wall >= kModerate) {
    out.push_back(make("idle_serving",
                       "Underused in inference: GPU idle " + pct_text(static_cast<double>(chargeable_idle_ns) / wall) +
                           " of step time on " + where,
                       ms_text(static_cast<int64_t>(static_cast<double>(chargeable_idle_ns) / steps)) + " idle per step (" +
                           ms_text(chargeable_idle_ns) + " of " + ms_text(d.wall_ns) + "); " + ms_text(unclaimed_idle_ns) +
                           " of it not explained by a single cause",
                       "keep the device fed: batch requests dynamically (continuous batching for LLM serving) within a "
                       "queue-delay budget, run more model concurrency (several CUDA streams or model instances), or "
                       "share the GPU with MIG/MPS when the model is small",
                       unclaimed_idle_ns, wall));
  }

  // Copies to/from pageable host memory: each blocks the host while the
  // driver stages it (counted as idle host_sync); its time is already in
  // idle_host_sync, so this finding recovers nothing on its own.
  if (pageable) {
    char count_buf[32];
    std::snprintf(count_buf, sizeof count_buf, "%.1f", static_cast<double>(h.pageable_memcpys) / steps);
    std::string evidence = std::string(count_buf) + " copies (" +
                           bytes_text(static_cast<double>(h.pageable_memcpy_bytes) / steps) +
                           ") per step to or from pageable host memory (" + std::to_string(h.pageable_memcpys) +
                           " copies, " + bytes_text(static_cast<double>(h.pageable_memcpy_bytes)) + " in all)";
    const int64_t sync_ns = d.breakdown.idle_ns[static_cast<size_t>(IdleCause::kHostSync)];
    if (sync_ns > 0) {
      evidence += "; idle host_sync (host syncs, these copies among them) " +
                  ms_text(static_cast<int64_t>(static_cast<double>(sync_ns) / steps)) + " per step";
    }
    out.push_back(make("pageable_copy",
                       "Copies from pageable host memory block the host: " + std::to_string(h.pageable_memcpys) +
                           " copies, " + bytes_text(static_cast<double>(h.pageable_memcpy_bytes)) + " on " + where,
                       std::move(evidence),
                       "pin the host buffers: DataLoader(pin_memory=True), or tensor.pin_memory() for buffers you "
                       "copy yourself (allocate them once and reuse); use .to(device, non_blocking=True) only from "
                       "pinned buffers, since a non_blocking copy from pageable memory still blocks the host",
                       0, wall));
  }

  // Exposed communication: collective kernels running with nothing to hide them.
  const double comm_share = static_cast<double>(d.breakdown.communication_ns) / wall;
  if (comm_share >= kModerate) {
    out.push_back(make("exposed_communication",
                       "Exposed communication: collective kernels run alone " + pct_text(comm_share) +
                           " of step time on " + where,
                       ms_text(d.breakdown.communication_ns) + " of communication not overlapped by compute",
                       kind == Kind::kInference
                           ? "overlap collectives with compute (asynchronous tensor-parallel communication), or use "
                             "less tensor/pipeline parallelism when the model fits on fewer GPUs"
                           : "overlap communication with compute: tune DDP bucket_cap_mb, FSDP prefetching, or "
                             "accumulate gradients (no_sync) to communicate less often",
                       d.breakdown.communication_ns, wall));
  }

  const double busy_share = static_cast<double>(d.breakdown.busy_ns()) / wall;
  // Busy but narrow kernels: low estimated SM efficiency.
  if (d.sm_efficiency_est && busy_share >= kBusyEnough && *d.sm_efficiency_est < kSmEfficiencyOfBusy * busy_share) {
    out.push_back(make("low_sm_efficiency",
                       "Busy but narrow: estimated SM efficiency " + pct_text(*d.sm_efficiency_est) + " while busy " +
                           pct_text(busy_share) + " on " + where,
                       "kernels launch fewer blocks than the device has SMs for much of the busy time",
                       "fuse small kernels (torch.compile), raise the batch size, or run several jobs per GPU "
                       "(MPS/MIG)",
                       static_cast<int64_t>((busy_share - *d.sm_efficiency_est) * wall * 0.5), wall));
  }
  // Busy but low occupancy.
  if (d.achieved_occupancy_est && busy_share >= kBusyEnough && *d.achieved_occupancy_est < kLowOccupancy) {
    out.push_back(make("low_occupancy",
                       "Busy but low occupancy: estimated achieved occupancy " + pct_text(*d.achieved_occupancy_est) +
                           " while busy " + pct_text(busy_share) + " on " + where,
                       "launch configurations (block size, registers, shared memory) leave most warp slots empty",
                       "fuse small kernels, use larger blocks / fewer registers per thread (torch.compile max-autotune "
                       "picks configs), or raise the batch size",
                       static_cast<int64_t>(static_cast<double>(d.breakdown.compute_ns) *
                                            (1.0 - *d.achieved_occupancy_est / kLowOccupancy) * 0.5),
                       wall));
  }
  // Busy but low MFU.
  if (d.mfu && busy_share >= kBusyEnough && *d.mfu < kLowMfu) {
    const double mfu_while_busy = *d.mfu / busy_share;
    const double recover = static_cast<double>(d.breakdown.busy_ns()) * std::max(0.0, 1.0 - mfu_while_busy / kMfuTarget);
    out.push_back(make("low_mfu",
                       "Busy but low MFU: " + pct_text(*d.mfu) + " of peak FLOP/s while busy " + pct_text(busy_share) + " on " +
                           where,
                       "MFU " + pct_text(*d.mfu) + " (" + pct_text(mfu_while_busy) + " of peak while busy); threshold " +
                           pct_text(kLowMfu),
                       "use bf16/fp16 autocast or fp8, keep matmuls on the tensor-core path (TF32 on, aligned shapes: "
                       "multiples of 8/16), and fuse memory-bound ops",
                       static_cast<int64_t>(recover), wall));
  }
  // Throttling: clock-event reasons from counters.
  const int64_t throttled_ns = h.throttle_power_ns + h.throttle_thermal_ns;
  if (h.throttle_known && static_cast<double>(throttled_ns) / wall >= kModerate) {
    const bool thermal = h.throttle_thermal_ns > h.throttle_power_ns;
    std::string evidence = "clocks held down " + ms_text(throttled_ns) + " of " + ms_text(d.wall_ns) + " (power " +
                           ms_text(h.throttle_power_ns) + ", thermal " + ms_text(h.throttle_thermal_ns) + ")";
    int64_t recover = 0;
    if (h.sm_clock_n > 0) {
      const double mean_clock = h.sm_clock_sum / static_cast<double>(h.sm_clock_n);
      char buf[96];
      std::snprintf(buf, sizeof buf, "; mean SM clock %.0f of %.0f MHz", mean_clock, h.sm_clock_max);
      evidence += buf;
      recover = static_cast<int64_t>(static_cast<double>(throttled_ns) * busy_share *
                                     std::max(0.0, 1.0 - mean_clock / h.sm_clock_max));
    }
    if (h.power_w_max) evidence += "; peak power " + std::to_string(static_cast<int>(*h.power_w_max)) + " W";
    if (h.temperature_c_max) evidence += "; peak " + std::to_string(static_cast<int>(*h.temperature_c_max)) + " C";
    out.push_back(make("throttling",
                       std::string(thermal ? "Thermal" : "Power") + " throttling " +
                           pct_text(static_cast<double>(throttled_ns) / wall) + " of step time on " + where,
                       std::move(evidence),
                       "not a code problem: check cooling, power limits (nvidia-smi -q -d PERFORMANCE,POWER) and "
                       "neighbouring jobs; compare against an unthrottled node before tuning code",
                       recover, wall));
  }
  // Reserved memory far above allocated.
  if (h.reserved_max && h.allocated_max && *h.reserved_max >= kReservedOverAllocated * *h.allocated_max &&
      *h.reserved_max - *h.allocated_max >= kSlackBytes) {
    out.push_back(make("reserved_memory",
                       "Allocator holds " + gib_text(*h.reserved_max - *h.allocated_max) + " reserved but unused on " +
                           where,
                       "peak reserved " + gib_text(*h.reserved_max) + " vs peak allocated " + gib_text(*h.allocated_max),
                       "tune the caching allocator: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, avoid varying "
                       "tensor shapes per step, and do not call torch.cuda.empty_cache() in the loop",
                       0, wall));
  }
  // Small job on a big GPU: narrow kernels and a small memory footprint.
  std::optional<double> footprint = h.fb_used_max;
  if (h.reserved_max) footprint = footprint ? std::max(*footprint, *h.reserved_max) : *h.reserved_max;
  if (d.sm_efficiency_est && *d.sm_efficiency_est < kSmallJob && footprint && h.total_memory_bytes > 0 &&
      *footprint < kSmallJob * static_cast<double>(h.total_memory_bytes)) {
    out.push_back(make("small_job",
                       "Small job on a big GPU: estimated SM efficiency " + pct_text(*d.sm_efficiency_est) + ", memory " +
                           pct_text(*footprint / static_cast<double>(h.total_memory_bytes)) + " of the device on " + where,
                       "footprint " + gib_text(*footprint) + " of " + gib_text(static_cast<double>(h.total_memory_bytes)) +
                           "; most SMs idle even while busy",
                       "share the GPU: MIG partitions or MPS for several such jobs, or a smaller GPU",
                       0, wall));
  }
}

// CUDA-graph capture windows: a note, not waste (recovers nothing).
void capture_note(const RunFacts& report, std::vector<Finding>& out) {
  if (report.workload.capture_ns <= 0) return;
  const double share = capture_share(report);
  const bool dominant = report.workload.kind == "capture";
  int64_t wall_ns = 0;
  for (const auto& d : report.summary.devices) wall_ns = std::max(wall_ns, d.wall_ns);
  out.push_back(make("graph_capture",
                     std::string(dominant ? "CUDA-graph capture run: " : "CUDA-graph capture: ") +
                         ms_text(report.workload.capture_ns) + " (" + pct_text(share) +
                         " of the analysed time) inside capture windows; the GPU idle there is expected, "
                         "not counted as recoverable",
                     report.workload.evidence,
                     "nothing to fix in the capture itself (one-time warm-up: recorded work does not run until "
                     "replayed); to judge the steady state, profile the replays: start the profiler after capture "
                     "(torch.profiler schedule with wait/warmup steps past it)",
                     0, static_cast<double>(wall_ns)));
}

}  // namespace

Finding make_finding(const char* id, std::string title, std::string evidence, std::string fix,
                     int64_t recoverable_ns, double wall_ns) {
  Finding f;
  f.id = id;
  f.title = std::move(title);
  f.evidence = std::move(evidence);
  f.fix = std::move(fix);
  f.recoverable_ns = std::max<int64_t>(0, recoverable_ns);
  f.share_of_wall = wall_ns > 0 ? static_cast<double>(f.recoverable_ns) / wall_ns : 0.0;
  return f;
}

std::vector<Finding> derive_findings(const Report& report) {
  RunFacts facts{report.summary, report.workload, {}, {}, {}, report.loaders};
  bool device = false;
  for (const auto& d : report.summary.devices) {
    facts.health.push_back(run_health(report, d));
    device = device || d.wall_ns > 0;
  }
  if (!device) facts.host = host_totals(report);  // a host-only run: the main thread's breakdown
  return findings_of(facts);
}

std::vector<Finding> findings_of(const RunFacts& facts) {
  std::vector<Finding> out;
  bool device = false;
  for (size_t i = 0; i < facts.summary.devices.size(); ++i) {
    const DeviceSummary& d = facts.summary.devices[i];
    if (d.wall_ns <= 0) continue;
    device = true;
    device_findings(facts, d, facts.health[i], out);
  }
  if (!device) host_findings_of(facts.host, facts.loaders, out);
  const Summary& s = facts.summary;
  if (auto f = outside_steps_finding(s.steps, s.trace_span_ns, s.outside_steps_ns, facts.outside_named_ns)) {
    out.push_back(std::move(*f));
  }
  capture_note(facts, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return a.recoverable_ns > b.recoverable_ns; });
  return out;
}

}  // namespace gpuutil
