// The C++ session API for a training loop (LibTorch or plain C++), and the
// live GPU collector it drives.
//
//   gpuutil::ProfilerOptions o;
//   o.session.jsonl_path = "steps.jsonl";
//   gpuutil::Profiler prof(o);
//   if (std::string why = prof.start(); !why.empty()) std::cerr << why;  // host-only, still works
//   for (int64_t i = 0; i < n; ++i) {
//     gpuutil::StepScope step(prof, i);
//     train_step();
//   }
//   prof.stop();  // also done by the destructor and at exit()
//
// Vendor-free header: CUPTI lives behind LiveCollector's implementation.
//
// Contract:
// - Thread-safe: every method may be called from any thread (multi-threaded
//   launchers); control calls are serialised by one mutex that no collector
//   callback or drain thread takes.
// - Each step's report is produced when the next step boundary is reached
//   (the CUPTI flush for step N completes during step N+1), i.e. within one
//   step after it ends; stop() reports everything left.
// - When GPU collection cannot run, start() returns the reason and every
//   report carries it as the gpu_collection_off diagnostic.
// - Exit without stop() still flushes and reports the last step (atexit).
// - After fork() the child does not inherit the session: in the child every
//   method is a no-op and nothing of the parent's (threads, CUPTI, sink) is
//   touched, so it cannot deadlock.
#pragma once

#ifdef GPUUTIL_LOWER_LAYER
#error "the runtime (gpuutil/session.h, step_path.h, profiler.h) is included from a lower layer: collectors use gpuutil/event_sink.h (docs/architecture.md)"
#endif

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpuutil/session.h"

namespace gpuutil {

struct LiveOptions {
  bool gpu = true;                                 // CUPTI activity collection
  size_t cupti_buffer_count = 32;                  // activity buffers free at start
  size_t cupti_buffer_bytes = size_t(512) << 10;   // bytes per buffer
  size_t cupti_max_buffer_count = 512;             // the pool grows up to this many (reserved, not touched)
  std::vector<std::string> cupti_library_dirs;     // extra dirs to search (the CUPTI wheel)
  bool cupti_driver_api = true;                    // driver API launches/copies/syncs (Triton, NCCL, cuBLASLt)
  // Longest *blocking* wait for launched work's device records (flush(),
  // suspend(), stop()). Step reports are never given up by wall time: they
  // wait while the device progresses, bounded by cupti_max_held_steps and
  // by memory, and are then reported incomplete (steps[].complete false).
  int64_t cupti_completion_wait_ms = 2000;
  size_t cupti_max_held_steps = 1000;              // steps waiting for device records before the oldest is incomplete
  int64_t cupti_stuck_after_ms = 30000;            // no device record this long while a launch waits: gpu_stuck
  // A launch the device finished (a sync, later work on its stream) whose
  // record has not come this long after: cupti_record_missing, no longer waited for.
  int64_t cupti_missing_after_ms = 10000;
  bool cupti_api_callbacks = true;                 // learn launches at API exit (callback API); off: from API records
  // Hand CUPTI zeroed buffers (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER=1;
  // the drain thread zeroes them on return). Off: CUPTI zeroes each buffer on
  // the application thread that needs one (benchmarks/RESULTS.md).
  bool cupti_zeroed_buffers = true;
  bool nvtx = true;                                // NVTX host ranges (libgpuutil_nvtx.so)
  std::string nvtx_library;                        // "" = $NVTX_INJECTION64_PATH
};

struct LiveCounters {
  uint64_t buffers_completed = 0;
  uint64_t records_dropped = 0;  // reported by CUPTI
  uint64_t buffers_starved = 0;  // buffer requests the pool could not serve
  uint64_t buffers_invalid = 0;
  uint64_t buffers_foreign = 0;  // another CUPTI client's buffers handed to gpuutil (left untouched)
  uint64_t records_decoded = 0;  // filled in once stopped (0 while running)
  uint64_t events_stored = 0;    // filled in once stopped (0 while running)
  uint64_t records_unfinished = 0;   // device records the device had not finished when flushed (after stop)
  uint64_t completion_timeouts = 0;  // launches given up waiting for (after stop)
  uint64_t buffers_in_pool = 0;  // activity buffers in the pool (grows from cupti_buffer_count)
  uint64_t runtime_cbids = 0;    // runtime API callback ids traced (0: the whole RUNTIME kind)
  uint64_t driver_cbids = 0;     // driver API callback ids traced
  uint64_t calls_learnt = 0;     // calls learnt at API exit (callback API)
  uint64_t calls_dropped = 0;    // calls the callback ring had no room for
  uint64_t flushes = 0;          // default flushes made while waiting (after stop)
  uint64_t steps_given_up = 0;   // times held steps were reported incomplete, a bound hit (after stop)
  uint64_t stuck = 0;            // launches named stuck (gpu_stuck; after stop)
  uint64_t records_missing = 0;  // launches released with no record (cupti_record_missing; after stop)
  uint64_t clock_mismatched = 0;  // device records on another clock, kept out (cupti_clock_mismatch; after stop)
  uint64_t timestamp_registrations = 0;  // gpuutil's CUPTI timestamp-callback registrations in this process
  uint64_t nested_calls = 0;     // enqueue calls made inside another of their thread (after stop)
  uint64_t streams_created = 0;  // streams learnt from CUPTI's resource callbacks (after stop)
  uint64_t resubscribed = 0;     // times the CUPTI subscription was taken again at a step boundary
  bool api_callbacks_on = false;  // launches are learnt at API exit (gpuutil holds the subscription)
  uint64_t nvtx_ranges = 0;      // NVTX ranges stored
};

// Calls learnt at API exit, by CUPTI callback name (after stop).
struct LearntCalls {
  std::vector<std::pair<std::string, uint64_t>> by_name;
};

// Live GPU collection feeding one Session. At most one runs per process.
class LiveCollector {
 public:
  LiveCollector(Session& session, LiveOptions options);
  ~LiveCollector();  // stop()
  LiveCollector(const LiveCollector&) = delete;
  LiveCollector& operator=(const LiveCollector&) = delete;

  // "" when GPU activity is collected, else why not (one line, with the fix).
  // NVTX collection starts too; its own reason is nvtx_off(). A non-empty
  // `suspended_why` starts GPU collection suspended (torch.profiler owns
  // CUPTI now; resume() takes it over later).
  std::string start(const std::string& suspended_why = "");
  // "" when NVTX ranges are collected, else why not (every later report of
  // the session then carries the nvtx_collection_off diagnostic).
  std::string nvtx_off() const;
  bool running() const;
  // A step boundary at t_ns (control thread): drains NVTX queues, asks the
  // CUPTI drain thread to flush until device data is complete up to t_ns.
  // Returns at once the session time up to which device data is complete
  // now (t_ns when CUPTI is off or suspended): every launch that began
  // before it has its device record.
  int64_t step_boundary(int64_t t_ns);
  // Blocks until device data is complete up to t_ns or timeout_ms passed;
  // returns the time up to which it is complete.
  int64_t wait_complete(int64_t t_ns, int64_t timeout_ms);
  // Drains NVTX and waits until everything launched so far was delivered
  // (bounded by cupti_completion_wait_ms; blocking, not per step).
  void flush();
  // Hands CUPTI to another client (torch.profiler) and takes it back; see
  // cupti::CuptiCollector::suspend. Steps in between carry
  // gpu_collection_suspended with `why`. resume() returns "" or why not.
  void suspend(const std::string& why, int64_t since_ns = INT64_MIN);
  std::string resume();
  bool suspended() const;
  // Lets go of CUPTI's subscription alone while another client may
  // initialise (see cupti::CuptiCollector::release_subscription), and asks
  // for it again: "" or why not (collection goes on either way).
  void release_subscription();
  std::string take_subscription();
  void stop();  // releases CUPTI (disable, flush, detach); idempotent
  LiveCounters counters() const;
  LearntCalls learnt_calls() const;  // after stop()
  std::string library_path() const;  // the libcupti that was loaded, "" if none

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ProfilerOptions {
  SessionOptions session;
  LiveOptions live;
  size_t keep_reports = 1000;  // take_reports() buffer bound (oldest dropped)
};

class Profiler {
 public:
  explicit Profiler(ProfilerOptions options);
  ~Profiler();  // stop()
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Starts collection. Returns "" when GPU activity is collected, else the
  // gpu_collection_off reason (the profiler then runs host-only).
  std::string start();
  // Stops collection and reports every remaining step. Idempotent.
  void stop();
  bool running() const;

  void begin_step(int64_t step);
  void end_step();
  // The same at explicit session-clock times (a caller with its own
  // timestamps, the trace replay).
  void begin_step(int64_t step, int64_t t_ns);
  void end_step(int64_t t_ns);

  // Reports produced since the last call (oldest first, at most keep_reports).
  std::vector<StepOutput> take_reports();
  std::string gpu_collection_off() const;
  Session& session() { return *session_; }
  LiveCollector& collector() { return *live_; }

 private:
  void deliver_locked(std::vector<StepOutput>&& outs);

  ProfilerOptions options_;
  mutable std::mutex mu_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<LiveCollector> live_;
  std::vector<StepOutput> reports_;
  std::string off_reason_;
  bool running_ = false;
  int64_t owner_pid_ = 0;
};

// gpuutil's step range in the "gpuutil" NVTX domain, so steps show up in
// Nsight Systems. Profiler::begin_step/end_step call these; other step
// drivers (the Python Profile) may too. Cheap no-ops without an NVTX tool.
void nvtx_push_step(int64_t step);
void nvtx_pop_step();

// RAII step: begin_step on construction, end_step on destruction.
class StepScope {
 public:
  StepScope(Profiler& profiler, int64_t step) : profiler_(profiler) { profiler_.begin_step(step); }
  ~StepScope() { profiler_.end_step(); }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  Profiler& profiler_;
};

}  // namespace gpuutil
