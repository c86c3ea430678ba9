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
// Contract: at most one NVTX collector runs per process (the rings have one
// consumer); start/step_boundary/stop from control threads (serialised by
// the caller); a drain thread polls the rings so that rings do not overflow
// between step boundaries: every drain_poll_ms while a ring was more than
// 1/8 full at its last drain, backing off (doubling) up to
// drain_poll_max_ms while every ring stayed under 1/64 full, so an idle or
// lightly used collector wakes 40 times a second, not 200, and a thread
// may still record ~160k ranges/s (torch emit_nvtx rates) without loss
// (4096 ranges per ring per 25 ms). stop() wakes the thread at once. A full ring loses entries, counted as
// nvtx_records_dropped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "collectors/nvtx/nvtx_abi.h"
#include "gpuutil/session.h"

namespace gpuutil::nvtx {

struct NvtxCollectorOptions {
  std::string library;  // "" = $NVTX_INJECTION64_PATH
  int drain_poll_ms = 5;       // poll interval while rings fill fast
  int drain_poll_max_ms = 25;  // poll interval after backing off (idle rings)
};

class NvtxCollector {
 public:
  NvtxCollector(Session& session, NvtxCollectorOptions options);
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
  struct ThreadState {
    uint32_t thread = 0;
    bool known = false;
    std::unordered_map<uint16_t, std::vector<Open>> stacks;  // by domain
    uint64_t dropped_seen = 0;
  };
  // Returns the most entries found in one ring (its fill before draining).
  uint64_t drain_locked();
  int64_t to_ns(uint64_t ticks) const;
  void calibrate();

  Session& session_;
  NvtxCollectorOptions options_;
  const Abi* abi_ = nullptr;
  bool running_ = false;
  int64_t owner_pid_ = 0;
  std::mutex drain_mu_;  // drain thread vs control thread; never on an NVTX call
  std::vector<ThreadState> threads_;
  uint64_t tick0_ = 0;
  int64_t ns0_ = 0;
  double ns_per_tick_ = 1.0;
  uint64_t without_ring_seen_ = 0;
  std::atomic<uint64_t> ranges_stored_{0};
  std::atomic<bool> quit_{false};
  std::mutex wake_mu_;  // drain thread's sleep; stop() notifies
  std::condition_variable wake_cv_;
  std::thread drain_;
};

// gpuutil's own step ranges in the "gpuutil" NVTX domain, so they show in
// Nsight Systems. Cheap no-ops when no NVTX tool is attached.
void push_step_range(int64_t step);
void pop_step_range();

}  // namespace gpuutil::nvtx
