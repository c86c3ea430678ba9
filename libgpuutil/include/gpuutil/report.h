// The step report: what the analysis returns and every exporter reads.
//
// Contract: a Report is a plain value produced by gpuutil::analyze() (and,
// later, by the live session). Exporters (JSON, tables, trackers) read it and
// never reach back into collectors. Every duration is integer nanoseconds and
// every breakdown satisfies, per step and device:
//   compute_ns + communication_ns + memory_ns + sum(idle_ns) == wall_ns.
// Optional ratios are std::nullopt when undefined (serialised as null, never
// NaN/Inf).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuutil/diagnostics.h"
#include "gpuutil/events.h"

namespace gpuutil {

enum class IdleCause : uint8_t {
  kDataloader,    // host waiting on the input pipeline
  kHostSync,      // GPU drained because the host blocked on it
  kCollective,    // host blocked in a collective
  kLaunch,        // GPU waiting on launch latency / a launch-bound host
  kHost,          // host busy with other CPU work
  kDependency,    // the next work was queued before the gap: it waited on stream/event order or a graph edge
  kUnattributed,  // no host information explains the gap
  kKernelGap,     // a gap under 20 us before already-queued work: the device's turnaround between back-to-back work
};
inline constexpr int kIdleCauseCount = 8;
const char* to_string(IdleCause c);  // "dataloader", "host_sync", ...

struct Breakdown {
  int64_t compute_ns = 0;
  int64_t communication_ns = 0;
  int64_t memory_ns = 0;
  std::array<int64_t, kIdleCauseCount> idle_ns{};

  int64_t idle_total_ns() const;
  int64_t busy_ns() const { return compute_ns + communication_ns + memory_ns; }
  int64_t total_ns() const { return busy_ns() + idle_total_ns(); }
  Breakdown& operator+=(const Breakdown& o);
};

// A named contributor (an op, range or kernel) with the time it accounts for.
struct NamedTime {
  std::string name;
  int64_t ns = 0;
  uint64_t count = 0;
};

// Device health over one step, from sampled counters (CounterSample names in
// docs/report-schema.md, "health"). Every field is std::nullopt when no
// sample of its counter fell in (or, for cumulative counters, around) the
// step. Gauges are the mean of the step's samples; *_bytes the maximum;
// energy_j and throttle_*_ns the growth of a cumulative counter.
struct DeviceHealth {
  std::optional<double> nvml_utilization_pct;  // NVML utilization.gpu (duty cycle)
  std::optional<double> sm_clock_mhz;
  std::optional<double> sm_clock_max_mhz;
  std::optional<double> mem_clock_mhz;
  std::optional<double> mem_clock_max_mhz;
  std::optional<double> power_w;
  std::optional<double> energy_j;
  std::optional<double> temperature_c;
  std::optional<int64_t> throttle_power_ns;    // clock-event reasons: power cap / power brake
  std::optional<int64_t> throttle_thermal_ns;  // clock-event reasons: HW / SW thermal slowdown
  std::optional<double> fb_used_bytes;
  std::optional<double> allocated_bytes;       // PyTorch caching allocator
  std::optional<double> reserved_bytes;
  std::optional<double> peak_allocated_bytes;
  std::optional<double> gpm_sm_util_pct;       // GPM (Hopper+, opt-in)
  std::optional<double> gpm_sm_occupancy_pct;
  std::optional<double> gpm_tensor_util_pct;
  std::optional<double> gpm_dram_bw_util_pct;
  bool any() const;
};

struct DeviceStepReport {
  int32_t device = 0;
  int32_t rank = 0;
  std::string name;  // device name, "" when unknown
  int64_t wall_ns = 0;
  int64_t busy_ns = 0;  // union of all device work within the window
  Breakdown breakdown;
  // Top culprits per idle cause (at most AnalysisOptions::top_n each).
  std::array<std::vector<NamedTime>, kIdleCauseCount> culprits;

  uint64_t kernels = 0;  // kernels starting in the window
  uint64_t memcpys = 0;
  uint64_t memsets = 0;
  uint64_t short_kernels = 0;  // kernels shorter than short_kernel_threshold_ns
  std::optional<double> sm_efficiency_est;
  // Over kernels that are not persistent launches (their occupancy is their
  // design); persistent_kernel_ns is the kernel time left out of it.
  std::optional<double> achieved_occupancy_est;
  int64_t persistent_kernel_ns = 0;
  std::array<uint64_t, kMemcpyDirectionCount> memcpy_bytes{};
  std::array<int64_t, kMemcpyDirectionCount> memcpy_ns{};
  uint64_t pageable_memcpys = 0;       // copies to/from pageable host memory: they block the host
  uint64_t pageable_memcpy_bytes = 0;
  int64_t communication_total_ns = 0;   // union of communication kernels
  int64_t communication_overlap_ns = 0; // of which overlapped by compute
  std::vector<NamedTime> top_kernels;
  std::optional<int64_t> launch_latency_p50_ns;  // launch call -> kernel, kernels not from a CUDA graph
  std::optional<int64_t> launch_latency_p95_ns;
  uint64_t graph_kernels = 0;                          // kernels from CUDA graphs starting in the window
  std::optional<int64_t> graph_launch_latency_p50_ns;  // graph launch call -> its first kernel
  std::optional<int64_t> graph_launch_latency_p95_ns;
  std::optional<double> flops;       // FLOPs attributed to this step
  std::optional<double> peak_flops_per_s;
  std::optional<double> mfu;
  std::optional<double> hardware_flops;  // FLOPs executed incl. recomputation (when given)
  std::optional<double> hfu;             // hardware_flops / (wall × peak)
  DeviceHealth health;                // from counter samples; all-null without counters
  int64_t total_memory_bytes = 0;     // device memory, 0 = unknown
};

// Where one host thread's time went during a step (docs/accounting.md,
// "Host breakdown"): every ns of the step window in exactly one category,
// so sum(breakdown_ns) == wall_ns.
enum class HostCategory : uint8_t {
  kDataloader,
  kForward,
  kBackward,
  kOptimizer,
  kHostSync,
  kCollective,
  kOther,
};
inline constexpr int kHostCategoryCount = 7;
const char* to_string(HostCategory c);  // "dataloader", "forward", ...

struct HostThreadStepReport {
  int32_t rank = 0;
  uint32_t thread = 0;  // index into the source's threads
  int64_t tid = 0;
  std::string name;     // thread name, "" when unknown
  int64_t wall_ns = 0;  // == the step's wall_ns
  std::array<int64_t, kHostCategoryCount> breakdown_ns{};
  // Top ranges that won each category's time (at most AnalysisOptions::top_n).
  std::array<std::vector<NamedTime>, kHostCategoryCount> culprits;
};

// One collective instance on one rank: its group (a stream ordinal for GPU
// collective kernels, the range name, e.g. "gloo:all_reduce", for host-side
// gloo execution), how long the rank spent in it and when it started. Feeds
// the cross-rank view (gpuutil/cluster.h), which needs the starts only to
// count instances that run at the same time (several streams or gloo worker
// threads) once.
struct CollectiveSample {
  std::string group;
  int64_t dur_ns = 0;
  // From the start of the rank's step window (the rank's own clock, never
  // compared across ranks). Unset: the instances are taken to run one after
  // the other from the step's start, in order.
  std::optional<int64_t> start_offset_ns;
};
struct RankCollectives {
  int32_t rank = 0;
  std::vector<CollectiveSample> samples;  // in start order
  uint64_t dropped = 0;                   // beyond the per-step cap
};

struct StepReport {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t wall_ns = 0;
  // Live sessions: whether the step collected the detail tier (per-op and
  // autograd-node ranges); unset offline and when the collector has no tiers.
  std::optional<bool> detail;
  // Live sessions: torch.compile compiled during the step (a warm-up), so
  // the step is kept out of the run's totals (its wall counts outside steps).
  bool compile_warmup = false;
  // Live sessions: false when a completeness bound was hit before every
  // device record of the step arrived (cupti_step_incomplete says which):
  // its device time is a lower bound, never idle, and the step is kept out
  // of the run's totals, MFU and findings.
  bool complete = true;
  std::vector<DeviceStepReport> devices;
  std::vector<HostThreadStepReport> host;  // per rank, per thread with host ranges in the step
  std::vector<RankCollectives> collectives;  // per rank; not in the step JSON (cluster view input)
};

struct Finding {
  std::string id;        // stable rule id, e.g. "idle_dataloader"
  std::string title;     // one line
  std::string evidence;  // the numbers behind it
  std::string fix;       // the intervention that fits
  int64_t recoverable_ns = 0;  // over all steps
  double share_of_wall = 0;    // recoverable / total step wall
  // Cross-rank findings ("straggler") only: the rank, its host and the
  // category that explains it; rank < 0 and empty strings otherwise.
  int32_t rank = -1;
  std::string host;
  std::string cause;
};

struct DeviceSummary {
  int32_t device = 0;
  int32_t rank = 0;
  std::string name;
  int64_t wall_ns = 0;
  Breakdown breakdown;  // sum over steps
  std::array<std::vector<NamedTime>, kIdleCauseCount> culprits;
  uint64_t kernels = 0;
  std::optional<double> sm_efficiency_est;
  std::optional<double> achieved_occupancy_est;
  std::optional<double> mfu;
  std::optional<double> hfu;
};

struct Summary {
  uint64_t steps = 0;
  int64_t steps_wall_ns = 0;       // sum of step walls (reference rank)
  int64_t trace_span_ns = 0;       // first to last event (reference rank)
  int64_t outside_steps_ns = 0;    // span not inside any step, its backlog or its unrecorded end (below)
  // Offline analysis of steps (docs/accounting.md, "The last step"): how far
  // the device work queued by the steps ran past the last step (the GPU
  // running behind), and the unrecorded stretch left out of the last step.
  // trace_span_ns = steps_wall_ns + outside_steps_ns + these two (when the
  // difference is not floored at 0).
  int64_t last_step_backlog_ns = 0;
  int64_t last_step_unrecorded_ns = 0;
  std::optional<int64_t> step_wall_p50_ns;
  std::vector<DeviceSummary> devices;
};

struct SourceInfo {
  std::string path;
  int32_t rank = 0;
  std::string steps_source;
  uint64_t activities = 0;
  uint64_t api_calls = 0;
  uint64_t ranges = 0;
};

// What the run is doing (libgpuutil/src/analysis/workload.h,
// docs/findings.md "Workload"): findings choose the fix that fits it.
struct Workload {
  std::string kind = "unknown";  // "training", "inference", "capture" or "unknown"
  std::string evidence;          // what was seen, for people
  // Time inside CUDA-graph capture windows (stream capture begin..end, graph
  // instantiation) within the analysed windows, summed over sources.
  int64_t capture_ns = 0;
};

// What a DataLoader was set up with, as the live loader has it (the
// PyTorch collector reads it once per iterator); unset = unknown (a trace
// carries none of it; its `_SingleProcessDataLoaderIter` range says 0
// workers). Findings never recommend a setting the loader already has.
struct LoaderSettings {
  std::optional<int64_t> num_workers;
  std::optional<bool> pin_memory;
  std::optional<bool> persistent_workers;
  std::optional<int64_t> prefetch_factor;  // batches in flight per worker
  bool any() const { return num_workers || pin_memory || persistent_workers || prefetch_factor; }
};

// A periodic loader stall: every `period`-th batch waits long and the others
// do not (docs/findings.md, "Input pipeline"): with `period` workers, one of
// them is slow.
struct PeriodicStall {
  int64_t period = 0;
  uint64_t slow_batches = 0;
  int64_t slow_wait_ns = 0;       // the slow batches' waits, summed
  int64_t slow_wait_p50_ns = 0;   // median wait of a slow batch
  int64_t other_wait_p50_ns = 0;  // median wait of the other batches
};

// The waits for one input pipeline's batches (one per rank and DataLoader
// wait-range name, e.g. "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__").
inline constexpr size_t kBatchWaitsKept = 4096;
struct LoaderReport {
  int32_t rank = 0;
  std::string name;
  LoaderSettings settings;
  uint64_t batches = 0;   // waits in the report's steps (outermost wait ranges ending in them)
  int64_t wait_ns = 0;    // their sum
  std::vector<int64_t> batch_waits_ns;  // the latest kBatchWaitsKept of them, in order
  std::optional<PeriodicStall> periodic_stall;
};

struct ClusterView;  // gpuutil/cluster.h

struct Report {
  std::vector<SourceInfo> sources;
  Workload workload;
  std::vector<StepReport> steps;
  Summary summary;
  std::vector<Finding> findings;  // ranked, most recoverable first
  Diagnostics diagnostics;
  std::string flops_source;  // "user", "trace", or "" (unknown)
  // The input pipelines the steps waited on, by rank then name.
  std::vector<LoaderReport> loaders;
  // The cross-rank view when the report covers several ranks (offline:
  // several rank files); null otherwise. Serialised as summary.ranks and
  // summary.cluster; its straggler findings are also in `findings`.
  std::shared_ptr<const ClusterView> cluster;
};

}  // namespace gpuutil
