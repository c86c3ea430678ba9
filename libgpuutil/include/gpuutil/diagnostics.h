// Counted data-quality diagnostics, visible in every report.
//
// Every data problem a collector, importer or the analysis meets (dropped
// records, unknown kinds, clock faults, malformed events, unmatched
// correlations) is a named counter with a severity and a one-line
// description, never a log line. The list below is the single registry:
// docs/diagnostics.md documents the same names.
//
// Contract: a Diagnostics value is owned by one EventStore or Report and is
// not thread-safe; merge() combines two.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include <string_view>

namespace gpuutil {

enum class Severity : uint8_t { kInfo, kWarning, kError };
const char* to_string(Severity s);

// X(name, severity, description)
#define GPUUTIL_DIAGNOSTICS(X)                                                                     \
  X(input_unreadable, kError, "the input could not be read or decompressed")                       \
  X(json_invalid, kError, "the input is not valid JSON; events after the fault were not read")     \
  X(trace_events_missing, kError, "the trace has no traceEvents array")                            \
  X(event_malformed, kWarning, "an event lacked a required field or had a wrong type; skipped")    \
  X(event_negative_duration, kWarning, "an event had a negative duration; skipped")                \
  X(event_huge_duration, kWarning, "an event lasted longer than 1 day; skipped")                   \
  X(event_timestamp_out_of_range, kWarning, "a timestamp was outside the int64 ns range; skipped") \
  X(event_unknown_phase, kInfo, "an event had a phase gpuutil does not use; ignored")              \
  X(event_unknown_category, kInfo, "a complete event had a category gpuutil does not know; ignored") \
  X(device_properties_malformed, kWarning, "deviceProperties was present but unusable")            \
  X(steps_missing, kWarning, "no ProfilerStep#N ranges: the whole trace is one window")            \
  X(steps_overlapping, kWarning, "step ranges overlapped; the later step was clipped")             \
  X(steps_duplicated, kWarning, "a step number had several step ranges; the earliest was kept, the later ones dropped (their time is outside any step)") \
  X(trailing_unrecorded_stretch, kInfo, "the last step ended with a stretch in which no thread and no device recorded anything (the profiler stopping; see example: how long); it was left out of the step, its findings and the time outside steps") \
  X(activity_unknown_device, kInfo, "device work on a device with no deviceProperties")            \
  X(launch_unmatched, kInfo, "device work whose launching host call was not found")               \
  X(rocm_trace, kInfo, "the trace is from ROCm/HIP; HIP runtime names were mapped")               \
  X(flops_unknown, kInfo, "no FLOP count for the steps: MFU is null")                              \
  X(peak_unknown, kInfo, "no peak FLOP/s known for a device: MFU is null (pass peak_tflops)")      \
  X(mfu_above_peak, kWarning, "MFU above 100%: the FLOPs per step, the dtype or the peak is wrong (check flops_per_step and dtype, or pass peak_tflops; see example)") \
  X(launch_config_missing, kInfo, "kernels without grid/block: SM efficiency/occupancy partial")        \
  X(session_events_dropped, kWarning, "live events dropped: the session's pending-event bound was hit") \
  X(step_end_without_begin, kWarning, "end_step() was called with no open step; ignored")               \
  X(sink_write_failed, kError, "a report could not be written to the JSON Lines file (see example: the error, e.g. ENOSPC, the file, the lines lost); the file holds every other report whole, never a partial line") \
  X(torn_final_line, kWarning, "the last line of the JSON Lines file was cut off (no final newline, not JSON), as a crash leaves it; it was skipped (see example: which line)") \
  X(reports_dropped, kWarning, "step reports finished in the background were dropped before the application took them (it took none for 65,536 reports)") \
  X(gpu_collection_off, kWarning, "GPU activity is not collected in this session (see example: why)") \
  X(cupti_records_dropped, kWarning, "CUPTI dropped activity records (cuptiActivityGetNumDroppedRecords): device time is undercounted") \
  X(cupti_buffer_starved, kWarning, "CUPTI asked for an activity buffer while all of gpuutil's pool, reservation included (C++ `LiveOptions::cupti_max_buffer_count`, 512), was out; that buffer's records were lost (raise it)") \
  X(cupti_buffer_invalid, kWarning, "CUPTI returned a NULL, foreign or over-long activity buffer, or a buffer that could not be parsed; skipped") \
  X(cupti_record_unknown_kind, kInfo, "a CUPTI activity record of a kind gpuutil does not decode; ignored") \
  X(cupti_timestamp_invalid, kWarning, "a CUPTI record had a zero or reversed timestamp (a forced flush of unfinished work, or CUPTI had no device memory to time it); its launch waits no more, its time is not counted") \
  X(cupti_record_missing, kWarning, "launched device work finished on the device (a sync or later work on its stream says so) but its record never came (dropped by CUPTI, lost with its buffer), or a launch of unknown stream had none long after later work of its context finished; it is no longer waited for, so later steps are complete, and the step it ran in undercounts it (see example: which launch, why)") \
  X(cupti_clock_mismatch, kWarning, "a CUPTI device record was stamped on another clock than its launch (another CUPTI client registered its own timestamp callback, or a re-registration left it on the previous one): it started long before its own launch call, or days after; counted and kept out of steps (see example)") \
  X(nvtx_collection_off, kInfo, "NVTX ranges are not collected in this session (see example: why)") \
  X(nvtx_records_dropped, kWarning, "every segment of the NVTX queues' slab (2M push/pop pairs across all threads) was in use, or more than 256 threads recorded at once (the drain thread fell far behind), or ranges were nested more than 1024 deep on one thread (pushes never popped); ranges were lost") \
  X(nvtx_registrations_lost, kInfo, "the program registered more NVTX domains (64) or strings (4096) than gpuutil's tables hold; ranges using the rest are unnamed or count in the default domain") \
  X(torch_hook_fallback, kInfo, "the LibTorch RecordFunction hook is not loaded; PyTorch ranges come from Python-level hooks (see example: why)") \
  X(torch_ranges_dropped, kWarning, "PyTorch ranges were lost: every segment of the RecordFunction queues' slab (524,288 ranges across all threads) was in use between two step ends, or ranges nested more than 64 deep on one thread") \
  X(flops_measured_step, kInfo, "one step ran under torch FlopCounterMode to measure FLOPs per step (flops_per_step=\"measure\"); its timing is inflated (see example: which step)") \
  X(cupti_records_late, kWarning, "a CUPTI record arrived after the step it falls in was reported (that step was reported incomplete, or its launch was not known in time); that step undercounts it") \
  X(cupti_completion_timeout, kWarning, "launched device work was no longer waited for (the launch table's memory bound; see example); the steps since are reported incomplete") \
  X(cupti_step_incomplete, kWarning, "a step was reported before all its device records arrived (a held-steps or memory bound was hit, or the device never finished work launched in it; see example): steps[].complete is false, its device time is a lower bound, and it is kept out of run totals, MFU and findings") \
  X(gpu_stuck, kError, "launched device work made no progress for a long time: GPU stuck in the named kernel (a hung kernel, or a collective waiting on another rank; see example)") \
  X(cupti_foreign_buffers, kWarning, "CUPTI handed gpuutil another client's activity buffer (that client replaced gpuutil's callbacks); left untouched") \
  X(gpu_collection_suspended, kWarning, "GPU collection was suspended during this step while another CUPTI client (torch.profiler) ran (see example)") \
  X(cupti_taken_over, kWarning, "another CUPTI client took CUPTI from gpuutil without telling it (Kineto on-demand tracing, torch.profiler on another thread, cuptiFinalize by TEARDOWN_CUPTI=1; see example: what was seen): this step's GPU activity was not collected (gpu_collection_off), not measured as idle") \
  X(cupti_kineto_env, kInfo, "Kineto settings in the environment that change how torch.profiler shares CUPTI with gpuutil (KINETO_USE_DAEMON: on-demand traces may take CUPTI at any time; TEARDOWN_CUPTI=1: cuptiFinalize after each trace; see example)") \
  X(cupti_subscriber_other, kInfo, "another CUPTI subscriber holds the subscription; activity records are collected without it (see example)") \
  X(cupti_thread_ids_os, kInfo, "CUPTI reports OS thread ids (CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM, set by another tool); threads joined by OS tid") \
  X(nvml_counters_partial, kInfo, "NVML counters are partial: a listed CUDA device was not found in NVML, a MIG device reports its parent GPU's clocks/power and no utilisation, a field is not supported, or devices are labelled by NVML index (see example: which)") \
  X(cupti_graph_correlation, kWarning, "CUDA graphs with CUPTI 13.0: graph kernels' correlation ids are wrong in every session after the first; upgrade to CUPTI 13.1 Update 1 or later (see example)") \
  X(collector_failed, kWarning, "a collector raised after a report batch; it was skipped for that batch (see example)") \
  X(on_step_failed, kWarning, "an on_step sink raised on a report; the training went on (see example: which sink, the exception)") \
  X(cluster_off, kWarning, "the cross-rank view is off or stopped on this rank (see example: why)") \
  X(cluster_steps_dropped, kWarning, "cross-rank step summaries were dropped before publishing (the exchange fell behind); the cluster view lacks them") \
  X(optimizers_per_iteration, kInfo, "several optimizers step per iteration (a GAN): each automatic step ends at the one seen last and holds one iteration; the first iteration is split in two steps; mark steps with prof.step() to choose (see example: which optimizers)") \
  X(compile_warmup, kInfo, "torch.compile compiled during this step: a warm-up, kept out of the run's figures (prof.summary(): its wall counts as outside steps, compile_warmup) (see example: which compile)") \
  X(optimizer_step_skipped, kInfo, "GradScaler skipped optimizer.step() (non-finite gradients); the iteration still ends an automatic step, as an optimizer step would (see example: which optimizer, how many)")

enum class Diag : uint16_t {
#define GPUUTIL_DIAG_ENUM(name, sev, desc) name,
  GPUUTIL_DIAGNOSTICS(GPUUTIL_DIAG_ENUM)
#undef GPUUTIL_DIAG_ENUM
      kCount
};
inline constexpr size_t kDiagCount = static_cast<size_t>(Diag::kCount);

struct DiagInfo {
  const char* name;
  Severity severity;
  const char* description;
};
const DiagInfo& diag_info(Diag d);

class Diagnostics {
 public:
  // Counts n occurrences; `example` (first one only is kept) helps a user
  // find the offending input, e.g. "event #1234: missing ts".
  void add(Diag d, uint64_t n = 1, std::string_view example = {});
  uint64_t count(Diag d) const { return counts_[static_cast<size_t>(d)]; }
  // The first example given for d ("" when none was).
  const std::string& example(Diag d) const;
  void merge(const Diagnostics& other);
  bool any_error() const;

 private:
  std::array<uint64_t, kDiagCount> counts_{};
  // Only the diagnostics that have an example (few), so that making,
  // copying and merging one (once per live step report) stays cheap.
  std::vector<std::pair<Diag, std::string>> examples_;
};

}  // namespace gpuutil
