// Maps PyTorch / NCCL / user range names to a RangeCategory and host API
// names to (HostApiKind, SyncKind).
//
// Pure string functions shared by every collector that sees names: the
// Kineto importer today, the NVTX and RecordFunction collectors later.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpuutil/events.h"

namespace gpuutil {

// `is_op` is true for framework operator events (cpu_op / Operator); they are
// kOp unless the name has a specific meaning (aten::item -> kHostSync, ...).
RangeCategory classify_range(std::string_view name, bool is_op);

// True for coarse phase ranges that give context but never explain host
// time by themselves: "## forward ##"-style pipeline phases (no ':' inside;
// gpuutil's own "## host_sync: Tensor.cpu ##" is specific) and step ranges.
bool is_phase_range(std::string_view name);

// Returns the step number for "ProfilerStep#N" (or "gpuutil.step#N"), else -1.
int64_t parse_step_number(std::string_view name);

struct ApiClass {
  HostApiKind kind;
  SyncKind sync;
  bool graph = false;  // cudaGraphLaunch / cuGraphLaunch / hipGraphLaunch
};
// CUDA runtime/driver and HIP names.
ApiClass classify_api(std::string_view name);

// An API name without the suffixes CUPTI and roctracer append, repeatedly:
// version ("_v7000", "_v2") and per-thread stream ("_ptsz", "_ptds",
// "_spt"). "cudaMemcpyAsync_ptsz_v7000" -> "cudaMemcpyAsync". A view into
// `name`.
std::string_view strip_api_suffixes(std::string_view name);
// Only a trailing "_v<digits>" removed, once: the name Kineto's traces give
// a call ("cudaDeviceSynchronize_v3020" -> "cudaDeviceSynchronize"), with
// per-thread-stream variants ("cudaLaunchKernel_ptsz") kept apart.
std::string_view strip_api_version(std::string_view name);

// What a CUDA runtime/driver (or HIP) call does to the device, by its name
// (cuptiGetCallbackName's, or a trace's): every callback id of the CUPTI
// headers gets one (tests/cpp/test_call_coverage.cpp checks each id whose
// name or parameters say it submits or waits for device work against it).
// The family prefix may be "cuda", "cu", "hip" or CUDA 13's "__cuda" (a
// `<<<>>>` launch is `__cudaLaunchKernel`, crt/host_runtime.h).
enum class ApiCategory : uint8_t {
  kOther,         // no device work: allocation, queries, graph construction, module loading, ...
  kLaunch,        // a kernel launch (cudaLaunchKernel, __cudaLaunchKernel, cuLaunchKernelEx, cooperative, legacy cudaLaunch)
  kGraphLaunch,   // cudaGraphLaunch / cuGraphLaunch: many kernel/copy/memset records, one correlation id
  kCopy,          // a copy: one memcpy record (a batch copy: many)
  kMemset,        // a memset: one memset record
  kSync,          // the host waits for device work (device, context, stream, event)
  kEventRecord,   // records an event on a stream (device-side; no record of its own)
  kStreamWait,    // a stream waits on the device (event, value, external semaphore): no host wait, no record
  kStreamWork,    // stream-ordered work with no kernel/memcpy/memset record (memory ops, async alloc/free,
                  // prefetch/discard, semaphore signals, graph upload, decompression)
  kHostFunc,      // a host function enqueued on a stream (cudaLaunchHostFunc, cudaStreamAddCallback)
  kCaptureBegin,  // stream capture begins (its stream's work goes into a graph, nothing runs)
  kCaptureEnd,
  kStreamCreate,
  kStreamDestroy,
};
ApiCategory classify_call(std::string_view name);
const char* to_string(ApiCategory c);

// What a CUDA runtime/driver (or HIP) call means for live collection,
// derived from its ApiCategory.
enum class CaptureMark : uint8_t { kNone, kBegin, kEnd };
struct ApiRole {
  ApiCategory category = ApiCategory::kOther;
  bool traced = false;          // worth an API record: every category but kOther
  bool expects_record = false;  // enqueues device work that produces a kernel/memcpy/memset record
  bool graph_launch = false;    // one call, many device records with its correlation id, no count
  bool multi_record = false;    // many records, one correlation id: graph launches, batch copies, multi-device launches
  CaptureMark capture = CaptureMark::kNone;  // stream capture begins / ends
};
ApiRole api_role(std::string_view name);

// True for communication kernels, recognised by what they do
// (docs/accounting.md, "Communication"): the built-in families
// (NCCL/RCCL/MSCCL/NVSHMEM, DeepEP and
// other expert-parallel dispatch/combine, symmetric memory, custom
// all-reduce, any kernel named for a collective verb), or a name containing
// one of the user's patterns (set_communication_kernel_patterns, else
// $GPUUTIL_COMM_KERNELS, comma-separated; case-insensitive substrings).
// Kernels launched inside a host collective range are communication too;
// the analysis adds those (it sees the ranges).
// Thread-safe; the user's patterns are read under a mutex, so callers
// classify a name once and cache it (the CUPTI decoder and the Kineto
// mapper do).
bool is_communication_kernel(std::string_view name);
// Replaces the user's patterns (and the environment's) for the process.
// Names already classified and cached by a running collector keep their
// class: set them before profiling starts.
void set_communication_kernel_patterns(const std::vector<std::string>& substrings);
std::vector<std::string> communication_kernel_patterns();

}  // namespace gpuutil
