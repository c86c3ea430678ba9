// The NVTX host-range collector: drains libgpuutil_nvtx.so's per-thread
// rings into HostRanges on the session clock.
//
// NVTX itself loads the injection library named by NVTX_INJECTION64_PATH
// (set by `import gpuutil`, or by the C++ caller, before the process's first
// NVTX call). This collector dlopens the same file to reach its rings
// (gpuutil_nvtx_abi). If the variable names another tool's library (Nsight
// Systems), or is unset, start() returns why and ranges are not collected.
//
// Ranges: push/pop pairs per (thread, domain) become HostRange with
// classify_range() categories; ranges of the "NCCL" domain are collectives;
// ranges of the "gpuutil" domain (our own step ranges, emitted for Nsight)
// are skipped. Ticks are mapped to the session clock by a linear fit
// against CLOCK_MONOTONIC refreshed on every drain (docs/clock.md).
//
// Contract: at most one NVTX collector runs per process (the queues have
// one consumer); start/step_boundary/stop from control threads (serialised
// by the caller); a drain thread drains the queues between step boundaries:
// every drain_poll_ms while some queue held more than a segment (2048
// ranges) at the last drain, backing off (doubling) up to drain_poll_max_ms
// otherwise, so an idle collector wakes 40 times a second, not 200; and at
// once when a producer starts a segment with kWakeSegments undrained (a
// futex wake from the injection library, nvtx_abi.h). A thread's queue
// grows from a shared slab of 2M ranges (committed only as deep as the
// backlog ever was), so 1M ranges/s sustained, a 100k-range burst after an
// idle second, and a drain thread held off the CPU for a second are not
// lost (benchmarks/bench_nvtx_pushpop, tests/cpp/test_nvtx_injection.cpp).
// stop() wakes the thread at once. With the slab used up, entries are lost,
// counted as nvtx_records_dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "collectors/nvtx/nvtx_abi.h"
#include "gpuutil/event_sink.h"

namespace gpuutil::nvtx {

struct NvtxCollectorOptions {
  std::string library;  // "" = $NVTX_INJECTION64_PATH
  int drain_poll_ms = 5;       // poll interval while rings fill fast
  int drain_poll_max_ms = 25;  // poll interval after backing off (idle rings)
};

class NvtxCollector {
 public:
  NvtxCollector(EventSink& session, NvtxCollectorOptions options);
  ~NvtxCollector();
  NvtxCollector(const NvtxCollector&) = delete;
  NvtxCollector& operator=(const NvtxCollector&) = delete;

  // "" when collecting, else why not.
  std::string start();
  bool running() const { return running_; }
  // Drains everything recorded so far (control thread, step boundaries).
  void drain_now();
  void stop();
  uint64_t ranges_stored() const { return ranges_stored_.load(); }

 private:
  struct Open {
    uint64_t ticks;
    char name[kNameBytes];
  };
  // A thread's open ranges in one domain. At most kMaxOpenDepth are kept
  // (pushes that are never popped must not grow memory with run length);
  // deeper pushes are counted and only their depth is tracked, so the pops
  // that close them still pair correctly with the kept ones.
  struct OpenStack {
    std::vector<Open> open;
    uint64_t beyond = 0;  // pushes deeper than kMaxOpenDepth, not yet popped
  };
  static constexpr size_t kMaxOpenDepth = 1024;
  struct ThreadState {
    uint32_t thread = 0;
    bool known = false;
    std::unordered_map<uint16_t, OpenStack> stacks;  // by domain
    uint64_t dropped_seen = 0;
    uint32_t generation = 0;  // the ring's owner this state is for (Ring::generation)
  };
  // Moves every queue's entries into staged_ (no session lock); returns the
  // most entries found in one queue (its backlog before draining).
  uint64_t drain_locked();
  // staged_ into the session: at once if it is free (or wait).
  void hand_over(bool wait);
  static constexpr size_t kStageBatch = 4096;     // ranges per hand-over attempt
  static constexpr size_t kStageMax = 1u << 18;   // then the drain waits for the session (18 MiB)
  int64_t to_ns(uint64_t ticks) const;
  void calibrate();

  EventSink& session_;
  NvtxCollectorOptions options_;
  const Abi* abi_ = nullptr;
  bool running_ = false;
  int64_t owner_pid_ = 0;
  std::mutex drain_mu_;  // drain thread vs control thread; never on an NVTX call
  std::vector<ThreadState> threads_;
  std::vector<EventSink::StagedRange> staged_;  // drained, not yet in the session (drain_mu_)
  uint64_t tick0_ = 0;
  int64_t ns0_ = 0;
  double ns_per_tick_ = 1.0;
  uint64_t without_ring_seen_ = 0;
  uint64_t registrations_lost_seen_ = 0;
  std::atomic<uint64_t> ranges_stored_{0};
  std::atomic<bool> quit_{false};  // stop(): also bumps and wakes the ABI's futex word
  std::thread drain_;
};

// gpuutil's own step ranges in the "gpuutil" NVTX domain, so they show in
// Nsight Systems. Cheap no-ops when no NVTX tool is attached.
void push_step_range(int64_t step);
void pop_step_range();

}  // namespace gpuutil::nvtx
