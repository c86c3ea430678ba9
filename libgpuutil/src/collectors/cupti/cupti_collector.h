// The live CUPTI activity collector: owns the CUPTI registration, the buffer
// pool and the drain thread, and feeds one Session.
//
// Flow: CUPTI's buffer-requested callback takes a pool buffer (never
// allocates; an empty pool is a counted starvation), the buffer-completed
// callback validates the buffer, reads cuptiActivityGetNumDroppedRecords and
// only enqueues. The drain thread decodes (RecordDecoder) into the Session
// and is the only thread that flushes or decodes.
//
// Completeness: CUPTI delivers a device record only once the device has
// finished the work, and a default flush withholds any buffer that holds an
// unfinished record. So "data is complete up to t" needs two things: every
// buffer CUPTI took before the last flush came back (or that flush began
// after t), and every launch, copy or memset call that began before t has
// its device record (LaunchTracker). The drain thread flushes at most every
// drain_poll_ms while a step boundary waits for that, and publishes
// complete_until_ns(). Nothing waits forever: past completion_wait_ns the
// collector stops waiting and counts cupti_completion_timeout; records that
// come later are counted as cupti_records_late by the session.
//
// What is traced: kernels, copies, memsets, synchronization and overhead
// records, and only the runtime and driver API calls the analysis uses
// (launches incl. cuLaunchKernel/cuLaunchKernelEx/graph launches, copies,
// memsets, syncs, stream capture, event record/wait), enabled one callback
// id at a time (cuptiActivityEnableRuntimeApi/DriverApi); the whole RUNTIME
// and DRIVER kinds only where those calls are missing.
//
// Timestamps: cuptiActivityRegisterTimestampCallback -> session_now_ns(), so
// every record is on the session clock (docs/clock.md). CUPTI's default
// clock (CLOCK_REALTIME) is put back when gpuutil stops or suspends, so a
// later torch.profiler trace is not moved onto gpuutil's clock.
//
// Coexistence: start() subscribes as "gpuutil" (cuptiSubscribe_v2) and
// stop() unsubscribes. A subscriber that is an NVIDIA tool (Nsight
// Systems/Compute, cuda-gdb, sanitizer) turns GPU collection off with its
// name; any other subscriber (Kineto keeps one after torch.profiler first
// ran) is noted and collection goes on, since the activity API does not
// need the subscription. suspend()/resume() hand CUPTI to another activity
// client (torch.profiler) and take it back; steps in between say so. A
// buffer of another client that reaches gpuutil's completion callback is
// counted and never touched.
//
// Degrade, never break: start() returns "" when collecting, otherwise a
// one-line reason (no driver, version mismatch, an NVIDIA tool attached,
// privileges, library missing) and the session stays host-only.
//
// Contract: at most one collector is active per process (CUPTI's callbacks
// carry no user pointer); start()/step_boundary()/wait_complete()/
// suspend()/resume()/stop() are called from control threads, serialised by
// the caller (gpuutil::Profiler or the Python collector). After fork() the
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
#include "collectors/cupti/launch_tracker.h"
#include "collectors/cupti/record_decoder.h"
#include "gpuutil/session.h"

namespace gpuutil::cupti {

struct CuptiCollectorOptions {
  size_t buffer_count = 32;                 // activity buffers free at start
  size_t buffer_bytes = size_t(512) << 10;  // small buffers fill and come back within a step
  size_t max_buffer_count = 512;            // the pool grows up to this (a GPU running behind holds many)
  std::vector<std::string> library_dirs;  // e.g. the nvidia-cuda-cupti wheel's lib dir
  bool driver_api = true;                 // DRIVER-domain calls (cuLaunchKernel: Triton, NCCL, cuBLASLt)
  int drain_poll_ms = 5;                  // drain thread wake-up; flush cadence while a boundary waits
  int64_t completion_wait_ns = 2'000'000'000;  // longest wait for launched work's records
};

struct CuptiCounters {
  uint64_t buffers_completed = 0;
  uint64_t records_dropped = 0;  // as reported by CUPTI
  uint64_t buffers_starved = 0;
  uint64_t buffers_invalid = 0;
  uint64_t buffers_foreign = 0;  // another client's buffers handed to gpuutil
  uint64_t records_decoded = 0;  // 0 while running: read after stop()
  uint64_t events_stored = 0;    // 0 while running: read after stop()
  uint64_t records_unfinished = 0;  // device records delivered unfinished (zero timestamps); after stop()
  uint64_t completion_timeouts = 0;  // launches given up waiting for (completion_wait_ns)
  uint64_t buffers_in_pool = 0;  // buffers the pool holds now (grown from buffer_count on demand)
  uint64_t runtime_cbids = 0;    // runtime API callback ids traced one by one (0: whole kind)
  uint64_t driver_cbids = 0;     // driver API callback ids traced one by one
};

class CuptiCollector {
 public:
  CuptiCollector(Session& session, CuptiCollectorOptions options);
  ~CuptiCollector();  // stop()
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  // "" when collecting; else why not (the session stays host-only).
  // A non-empty `suspended_why` starts suspended (another client such as
  // torch.profiler owns CUPTI now): nothing is registered until resume().
  std::string start(const std::string& suspended_why = "");
  bool running() const { return running_; }
  bool suspended() const { return suspended_; }
  const std::string& library_path() const { return api_.path; }

  // Step boundary at t_ns (application thread, never a hot path): asks the
  // drain thread to flush until data is complete up to t_ns, and returns at
  // once the time up to which data is complete now (never later than what
  // the Session may report).
  int64_t step_boundary(int64_t t_ns);
  // Blocks until data is complete up to t_ns, or timeout_ns passed; returns
  // complete_until_ns().
  int64_t wait_complete(int64_t t_ns, int64_t timeout_ns);
  // wait_complete(now, completion_wait_ns) (stop, tests, summaries).
  void flush_now();
  int64_t complete_until_ns() const { return complete_until_ns_.load(std::memory_order_acquire); }

  // Hands CUPTI to another activity client (torch.profiler) before it starts:
  // waits for launched work's records (bounded), disables what gpuutil
  // enabled, force-flushes every buffer back, restores CUPTI's default clock
  // and releases the subscription. Steps overlapping the suspension carry
  // gpu_collection_suspended with `why`, from since_ns when given (the
  // other client was found running only now, but may have started earlier).
  void suspend(const std::string& why, int64_t since_ns = INT64_MIN);
  // Takes CUPTI back after the other client stopped. "" or why not (then
  // collection stays suspended).
  std::string resume();

  // Waits for launched work (bounded), disables kinds, force-flushes,
  // drains, restores CUPTI's clock, unsubscribes, detaches. Idempotent.
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
  void update_complete_until(int64_t flush_start_ns);
  void forced_flush_on_drain_thread();
  std::string subscribe();
  void unsubscribe();
  std::string attach();  // timestamp callback, buffer callbacks, kinds and API ids
  void detach();         // disable what attach() enabled, restore CUPTI's clock
  std::string enable_kinds();
  void disable_kinds();

  Session& session_;
  CuptiCollectorOptions options_;
  CuptiApi api_;
  CuptiRelease release_;
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<LaunchTracker> tracker_;
  std::unique_ptr<RecordDecoder> decoder_;
  std::vector<CUpti_ActivityKind> enabled_;
  std::vector<uint32_t> runtime_cbids_, driver_cbids_;  // traced one by one (computed once)
  bool cbids_listed_ = false;
  std::vector<uint32_t> runtime_enabled_, driver_enabled_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool running_ = false;
  bool suspended_ = false;
  int64_t owner_pid_ = 0;
  int session_index_ = 0;  // 1 for the first collector started in this process
  bool graph_noted_ = false;

  // Written by callbacks (any thread), read by the drain thread.
  std::atomic<uint64_t> dropped_{0}, starved_{0}, invalid_{0}, foreign_{0}, completed_{0};
  uint64_t dropped_published_ = 0, starved_published_ = 0, invalid_published_ = 0, foreign_published_ = 0;
  uint64_t timeouts_ = 0;  // drain thread
  int64_t held_timeout_noted_ns_ = INT64_MIN;  // drain thread: the held buffer already counted
  int64_t last_flush_ns_ = INT64_MIN / 2;       // drain thread: when the last default flush began
  sem_t wake_;

  // Requests from control threads to the drain thread.
  std::mutex flush_mu_;
  std::condition_variable flush_cv_;
  int64_t wanted_until_ns_ = INT64_MIN;  // guarded by flush_mu_: complete data up to here is asked for
  uint64_t forced_requested_ = 0;        // guarded by flush_mu_
  uint64_t forced_done_ = 0;             // guarded by flush_mu_
  std::atomic<int64_t> complete_until_ns_{INT64_MIN};
  std::atomic<bool> quit_{false};
  std::thread drain_;
};

}  // namespace gpuutil::cupti
