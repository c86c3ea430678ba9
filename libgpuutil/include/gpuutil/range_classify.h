// Maps PyTorch / NCCL / user range names to a RangeCategory and host API
// names to (HostApiKind, SyncKind).
//
// Pure string functions shared by every collector that sees names: the
// Kineto importer today, the NVTX and RecordFunction collectors later.
#pragma once

#include <cstdint>
#include <string_view>

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

// What a CUDA runtime/driver (or HIP) call means for live collection.
enum class CaptureMark : uint8_t { kNone, kBegin, kEnd };
struct ApiRole {
  bool traced = false;          // worth an API record: launch, copy, memset, sync, capture, event record/wait
  bool expects_record = false;  // enqueues device work that produces a kernel/memcpy/memset record
  bool graph_launch = false;    // one call, many device records with its correlation id
  CaptureMark capture = CaptureMark::kNone;  // stream capture begins / ends on the calling thread
};
ApiRole api_role(std::string_view name);

// True for collective-communication kernels (NCCL, RCCL, ...).
bool is_communication_kernel(std::string_view name);

}  // namespace gpuutil
