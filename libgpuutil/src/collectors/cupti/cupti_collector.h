// The live CUPTI activity collector: owns the CUPTI registration, the buffer
// pool and the drain thread, and feeds one Session.
//
// Flow: CUPTI's buffer-requested callback takes a pool buffer (never
// allocates; an empty pool is a counted starvation), the buffer-completed
// callback validates the buffer, reads cuptiActivityGetNumDroppedRecords and
// only enqueues. The drain thread decodes (RecordDecoder) into the Session.
// At a step boundary the application thread calls step_boundary(t): the
// drain thread then runs cuptiActivityFlushAll(0) off the hot path.
// Timestamps: CUPTI is given cuptiActivityRegisterTimestampCallback ->
// session_now_ns(), so every record is on the session clock
// (docs/clock.md).
//
// Degrade, never break: start() returns "" when collecting, otherwise a
// one-line reason (no driver, version mismatch, another subscriber,
// privileges, library missing) and the session stays host-only.
//
// Contract: at most one collector is active per process (CUPTI's callbacks
// carry no user pointer); start()/step_boundary()/stop() are called from
// control threads, serialised by the caller (gpuutil::Profiler or the Python
// collector). stop() disables every kind it enabled, force-flushes, drains
// and detaches so a later torch.profiler can subscribe. After fork() the
// child's copy is inert (pthread_atfork): callbacks ignore it and stop()
// only forgets it.
#pragma once

#include <semaphore.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/cupti/buffer_pool.h"
#include "collectors/cupti/cupti_api.h"
#include "collectors/cupti/record_decoder.h"
#include "gpuutil/session.h"

namespace gpuutil::cupti {

struct CuptiCollectorOptions {
  size_t buffer_count = 16;
  size_t buffer_bytes = size_t(2) << 20;
  std::vector<std::string> library_dirs;  // e.g. the nvidia-cuda-cupti wheel's lib dir
  bool driver_api = false;                // also DRIVER records (cuLaunchKernel callers such as Triton)
  int drain_poll_ms = 5;                  // drain thread wake-up when idle
};

struct CuptiCounters {
  uint64_t buffers_completed = 0;
  uint64_t records_dropped = 0;  // as reported by CUPTI
  uint64_t buffers_starved = 0;
  uint64_t buffers_invalid = 0;
  uint64_t records_decoded = 0;  // 0 while running: read after stop()
  uint64_t events_stored = 0;    // 0 while running: read after stop()
};

class CuptiCollector {
 public:
  CuptiCollector(Session& session, CuptiCollectorOptions options);
  ~CuptiCollector();  // stop()
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  // "" when collecting; else why not (the session stays host-only).
  std::string start();
  bool running() const { return running_; }
  const std::string& library_path() const { return api_.path; }

  // Step boundary at t_ns (application thread, never a hot path): waits
  // until the previous boundary's flush was drained (normally immediate),
  // then asks the drain thread to flush up to t_ns. Returns the time up to
  // which data is complete: the previous boundary (reports lag one step).
  int64_t step_boundary(int64_t t_ns);
  // Synchronous flush and drain up to now (stop, tests).
  void flush_now();
  int64_t complete_until_ns() const { return complete_until_ns_.load(std::memory_order_acquire); }

  // Disables kinds, force-flushes, drains, detaches. Idempotent.
  void stop();

  CuptiCounters counters() const;

  // The CUPTI major version this file was compiled against.
  static uint32_t compiled_major();

 private:
  friend struct CallbackAccess;
  void drain_loop();
  void drain_completed();
  void publish_counters();
  void do_flush(uint32_t flag);
  std::string enable_kinds();

  Session& session_;
  CuptiCollectorOptions options_;
  CuptiApi api_;
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<RecordDecoder> decoder_;
  std::vector<CUpti_ActivityKind> enabled_;
  bool running_ = false;
  int64_t owner_pid_ = 0;

  // Written by callbacks (any thread), read by the drain thread.
  std::atomic<uint64_t> dropped_{0}, starved_{0}, invalid_{0}, completed_{0};
  uint64_t dropped_published_ = 0, starved_published_ = 0, invalid_published_ = 0;
  sem_t wake_;

  // Flush handshake between step boundaries and the drain thread.
  std::mutex flush_mu_;
  std::condition_variable flush_cv_;
  int64_t flush_requested_ns_ = INT64_MIN;  // guarded by flush_mu_
  int64_t flush_done_ns_ = INT64_MIN;       // guarded by flush_mu_
  int64_t last_boundary_ns_ = INT64_MIN;    // control thread only
  std::atomic<int64_t> complete_until_ns_{INT64_MIN};
  std::atomic<bool> quit_{false};
  std::thread drain_;
};

}  // namespace gpuutil::cupti
