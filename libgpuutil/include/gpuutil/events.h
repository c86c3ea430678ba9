// The plain event model every collector produces and the analysis core reads.
//
// Nothing here names a vendor type: CUPTI records, Kineto JSON events and
// (later) RecordFunction callbacks are all turned into these structs at the
// collector edge, once. All times are int64 nanoseconds in ONE session clock;
// a collector that reads another clock converts before it stores. Names are
// interned in the store's NameTable and referenced by NameId.
//
// Contract: an EventStore is a value. It is filled by one thread (a collector
// or the importer) and then read, never mutated, by the analysis functions.
// Intervals are half-open [start_ns, end_ns); end_ns >= start_ns is enforced
// by the producers (a violating event is dropped and counted in diagnostics).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpuutil/diagnostics.h"
#include "gpuutil/names.h"

namespace gpuutil {

// What kind of work occupied the device.
enum class ActivityKind : uint8_t { kKernel, kMemcpy, kMemset };

enum class MemcpyDirection : uint8_t {
  kUnknown,
  kHostToDevice,
  kDeviceToHost,
  kDeviceToDevice,
  kHostToHost,
  kPeerToPeer,
};
inline constexpr int kMemcpyDirectionCount = 6;
const char* to_string(MemcpyDirection d);

// One interval of device work (a kernel, memcpy or memset).
struct DeviceActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t correlation_id = 0;  // links to the HostApiCall that launched it; 0 = unknown
  uint64_t bytes = 0;           // memcpy / memset payload
  NameId name = kNoName;
  int32_t device = 0;
  int32_t stream = 0;
  ActivityKind kind = ActivityKind::kKernel;
  MemcpyDirection direction = MemcpyDirection::kUnknown;
  bool is_communication = false;  // NCCL/RCCL and similar collective kernels
  bool host_pageable = false;     // memcpy to or from pageable host memory: the copy call blocks the host
  // Launch configuration (kernels only; zeros when unknown).
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t registers_per_thread = 0;
  uint32_t shared_memory_bytes = 0;  // static + dynamic per block
  uint32_t graph_id = 0;             // CUDA graph id, 0 = not from a graph

  int64_t duration_ns() const { return end_ns - start_ns; }
  uint64_t blocks() const { return uint64_t(grid[0]) * grid[1] * grid[2]; }
  uint64_t threads_per_block() const { return uint64_t(block[0]) * block[1] * block[2]; }
};

// What a host runtime/driver call does, as far as idle attribution cares.
enum class HostApiKind : uint8_t {
  kOther,
  kLaunch,        // kernel launch (cudaLaunchKernel, cuLaunchKernel, graph launch, ...)
  kAsyncCopy,     // cudaMemcpyAsync / cudaMemsetAsync: enqueues device work
  kSynchronize,   // blocks the host until device work completes
  kBlockingCopy,  // synchronous cudaMemcpy: enqueues and blocks
};

enum class SyncKind : uint8_t { kNone, kDevice, kStream, kEvent, kContext, kOther };

// One host call into the CUDA/HIP runtime or driver.
struct HostApiCall {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t correlation_id = 0;
  NameId name = kNoName;
  uint32_t thread = 0;  // index into EventStore::threads
  HostApiKind kind = HostApiKind::kOther;
  SyncKind sync = SyncKind::kNone;
  bool graph = false;  // a CUDA graph launch: many device activities share its correlation id
};

// Category of a host range, from PyTorch's own names, NVTX or the user.
enum class RangeCategory : uint8_t {
  kOp,          // a framework operator (aten::*, cpu_op): host CPU work
  kAnnotation,  // a user or framework annotation with no special meaning
  kStep,        // ProfilerStep#N or a gpuutil step range
  kDataloader,  // waiting on the input pipeline
  kForward,
  kBackward,
  kOptimizer,
  kHostSync,    // an op that blocks on the device (aten::item, ...)
  kCollective,  // host side of a collective (nccl:*, record_param_comms, c10d)
  kPython,      // a Python frame (Kineto python_function): names host time no range covers
};
inline constexpr int kRangeCategoryCount = 10;
const char* to_string(RangeCategory c);

// A named interval on one host thread. Ranges on a thread nest properly in
// well-formed input; the analysis tolerates overlap without crashing.
struct HostRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  NameId name = kNoName;
  uint32_t thread = 0;  // index into EventStore::threads
  RangeCategory category = RangeCategory::kAnnotation;
  // Kineto: an op recorded with an autograd "Sequence number" (it ran with
  // grad mode on); the host breakdown's forward phases (autograd_phases.h).
  bool autograd = false;
  double flops = 0;  // FLOPs the range reports (Kineto with_flops), 0 = unknown
};

// A training step: the wall-clock window [start_ns, end_ns).
struct StepWindow {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t wall_ns() const { return end_ns - start_ns; }
};

// A sampled device counter (NVML, GPM, allocator). value is in the unit the
// counter's name states (e.g. "sm_clock_mhz").
struct CounterSample {
  int64_t ts_ns = 0;
  NameId counter = kNoName;
  int32_t device = 0;
  double value = 0;
};

// Static facts about one device, as far as the source knows them (0 = unknown).
struct DeviceInfo {
  int32_t id = 0;
  std::string name;
  int32_t compute_major = 0;
  int32_t compute_minor = 0;
  int32_t sm_count = 0;
  int32_t max_threads_per_sm = 0;
  int32_t max_blocks_per_sm = 0;
  int32_t registers_per_sm = 0;
  int32_t shared_memory_per_sm_bytes = 0;
  int32_t warp_size = 0;
  int64_t total_memory_bytes = 0;
};

// A host thread. Live sources key threads by gpuutil::this_thread_key()
// (what CUPTI records, see thread_key.h) and keep the OS thread id to name
// the thread; trace files carry the tracer's thread id in `tid`.
struct HostThread {
  int64_t pid = 0;
  int64_t tid = 0;     // the key events use to find their thread
  std::string name;
  int64_t os_tid = 0;  // the OS thread id when known and different from tid (live), else 0

  int64_t display_tid() const { return os_tid != 0 ? os_tid : tid; }
};

// Everything one source (one rank's trace, or one live session) produced.
struct EventStore {
  NameTable names;
  std::vector<DeviceActivity> activities;
  std::vector<HostApiCall> api_calls;
  std::vector<HostRange> ranges;
  std::vector<StepWindow> steps;  // sorted by start_ns, non-overlapping
  std::vector<CounterSample> counters;
  std::vector<DeviceInfo> devices;
  std::vector<HostThread> threads;
  Diagnostics diagnostics;
  int32_t rank = 0;
  std::string source;          // file path or "live"
  std::string steps_source;    // how steps were found ("ProfilerStep", "whole_trace", ...)

  // Returns the info for device id, or nullptr when the source had none.
  const DeviceInfo* device_info(int32_t id) const;
};

}  // namespace gpuutil
