// The live CUPTI activity collector: owns the CUPTI registration, the buffer
// pool and the drain thread, and feeds one EventSink (the live Session).
//
// Three rooms, one file each:
//  - subscription and coexistence (cupti_subscription.cpp): the
//    subscription and its callbacks, the activity kinds and per-id API
//    enables, the one clock registration, and sharing CUPTI with other
//    clients (suspend/resume, takeovers found on the drain thread);
//  - launch coverage (call_catalog.h, api_callbacks.h): which callback ids
//    enqueue or wait for device work, derived from the CUPTI headers, and
//    what is learnt at API exit;
//  - delivery and completeness (cupti_delivery.cpp): the buffer callbacks,
//    the drain thread, flushes, the launch tracker, stuck and missing work.
// This file has the lifecycle (start, stop, step boundaries, counters).
//
// Flow: CUPTI's buffer-requested callback takes a pool buffer (never
// allocates; an empty pool is a counted starvation), the buffer-completed
// callback validates the buffer, reads cuptiActivityGetNumDroppedRecords and
// only enqueues. The drain thread decodes (RecordDecoder) into the Session
// and is the only thread that flushes or decodes. Buffers are handed out
// zeroed (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER=1: otherwise CUPTI
// zeroes each one on the thread that launches); the drain thread zeroes
// what CUPTI wrote when a buffer comes back.
//
// Completeness (docs/live-collection.md, "Completeness"): CUPTI delivers a
// device record only once the device has finished the work, and a default
// flush withholds any buffer that holds an unfinished record. "Data is
// complete up to t" means every launch, copy or memset call that began
// before t has its device record (LaunchTracker), and the last default
// flush began after t. Calls are learnt at API exit through the callback
// API on gpuutil's subscription (api_callbacks.h), so a buffer CUPTI holds
// (unsealed, prefetched) hides no launch; without the subscription, API
// records teach the tracker and every buffer CUPTI took and wrote into
// before t must have come back too. Buffers are requested with a
// record-count bound (maxNumRecords: about 100 ms of records at the
// measured rate) so they rotate whatever a default flush does with a
// partly filled one. Nothing is presumed delivered: a sync and a default
// flush make a launch overdue, not done. Waiting is never given up for lack
// of wall time while the device works: it costs report latency only, the
// training thread never blocks on it. A launch whose device work provably
// finished (overdue) but whose record never comes is released after
// missing_after_ns or missing_after_steps steps, when CUPTI reports dropped
// records, or before held steps would be given up, and named (cupti_record_missing), so one lost record
// never freezes the run; a launch with no stream to judge by, after
// unproven_after_ns while later work of its context finished. Past the
// bounds on held steps (max_held_steps) and memory (CUPTI holding most of
// the buffer pool, the tracker's table), the oldest held steps are reported
// incomplete (Session::mark_incomplete_until, steps[].complete false,
// cupti_step_incomplete), never as idle. When no device record of its
// stream arrived for stuck_after_ns while the oldest unfinished launch
// waits, "GPU stuck in <kernel> on stream N since t" is a gpu_stuck
// diagnostic and finding. The drain thread flushes while a boundary waits,
// adaptively: every drain_poll_ms once data caught up with the boundaries,
// doubling up to max_flush_interval_ms while the GPU trails.
//
// What is traced: kernels, copies, memsets, synchronization and overhead
// records, internal launches, and the runtime and driver API calls whose
// category (classify_call) is not "other", enabled one callback id at a
// time (cuptiActivityEnableRuntimeApi/DriverApi); the whole RUNTIME and
// DRIVER kinds only where those calls are missing.
//
// Timestamps: cuptiActivityRegisterTimestampCallback -> session_now_ns(),
// once per process, before the first kind is enabled, and never again
// (clock_map.h: re-registering leaves records on the wrong clock). When
// another client registered its own clock since, records are mapped onto
// the session clock by probing CUPTI's clock (ClockMap).
//
// Coexistence: start() subscribes as "gpuutil" (cuptiSubscribe_v2, asking
// for CUPTI >= 13.2's multiple-subscriber mode where the library offers it)
// and stop() unsubscribes. A subscriber that is an NVIDIA tool (Nsight
// Systems/Compute, cuda-gdb, sanitizer) turns GPU collection off with its
// name; any other subscriber (Kineto before its lazy subscription keeps one
// for the life of the process after torch.profiler first ran) is noted and
// collection goes on without API callbacks (learnt from API records), and
// the subscription is asked for again at step boundaries, at most once per
// resubscribe_ms. suspend()/resume() hand CUPTI to another activity client
// (torch.profiler) and take it back, releasing the subscription while it
// runs so that client can initialise GPU tracing; steps in between say so.
// A buffer of another client that reaches gpuutil's completion callback is
// counted and never touched. A client that takes CUPTI without telling
// gpuutil (Kineto on-demand tracing, torch.profiler on another thread,
// cuptiFinalize by TEARDOWN_CUPTI=1) is detected on the drain thread
// (TakeoverWatch) from evidence of that client (its clock, callbacks gone,
// records owed that never come, buffers never asked for while calls that
// must fill them are made): the steps from then on carry cupti_taken_over
// and gpu_collection_off, gpuutil touches nothing of that client's, and
// after a cuptiFinalize (nobody holds CUPTI) it attaches again at the next
// step boundary. A long kernel with the host blocked in a sync is no such
// evidence: it is named stuck, never a takeover. attach() asks for
// per-thread buffers before registering (Kineto resets
// PER_THREAD_ACTIVITY_BUFFER to 0 after each trace).
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
#include <deque>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/cupti/api_callbacks.h"
#include "collectors/cupti/buffer_pool.h"
#include "collectors/cupti/call_catalog.h"
#include "collectors/cupti/clock_map.h"
#include "collectors/cupti/cupti_api.h"
#include "collectors/cupti/launch_tracker.h"
#include "collectors/cupti/record_decoder.h"
#include "collectors/cupti/takeover_watch.h"
#include "gpuutil/event_sink.h"

namespace gpuutil::cupti {

struct CuptiCollectorOptions {
  size_t buffer_count = 32;                 // activity buffers free at start
  size_t buffer_bytes = size_t(512) << 10;  // small buffers fill and come back within a step
  size_t max_buffer_count = 512;            // the pool grows up to this (a GPU running behind holds many)
  std::vector<std::string> library_dirs;  // e.g. the nvidia-cuda-cupti wheel's lib dir
  bool driver_api = true;                 // DRIVER-domain calls (cuLaunchKernel: Triton, NCCL, cuBLASLt)
  int drain_poll_ms = 5;                  // drain thread wake-up; flush cadence while a boundary waits
  // Longest time a *blocking* wait (flush_now, suspend, stop) waits for
  // launched work's records; steps are never given up by wall time.
  int64_t completion_wait_ns = 2'000'000'000;
  size_t max_held_steps = 1000;            // step boundaries waiting for data before the oldest is reported incomplete
  int64_t stuck_after_ns = 30'000'000'000;  // no device record this long while a launch waits: gpu_stuck
  // A launch whose device work provably finished (a sync, later work on its
  // stream) with no record this long after: its record is missing
  // (cupti_record_missing) and it is no longer waited for.
  int64_t missing_after_ns = 10'000'000'000;
  size_t missing_after_steps = 100;  // ... or while this many steps ended after it began
  // A launch of unknown stream, with no such evidence, waiting this long
  // while later work of its context finished: the same.
  int64_t unproven_after_ns = 30'000'000'000;
  int resubscribe_ms = 1000;  // without the subscription: asked for again at step boundaries this often
  bool zeroed_buffers = true;  // hand CUPTI zeroed buffers (ZEROED_OUT_ACTIVITY_BUFFER=1) so it never zeroes on the app's threads
  int max_flush_interval_ms = 200;         // flush back-off while flushes bring nothing
  bool api_callbacks = true;                // learn calls at API exit (off: from API records, bounded by held buffers)
  size_t buffer_max_records = 0;           // bufferRequested's maxNumRecords; 0: about 100 ms of records at the rate seen
  // Buffers outstanding and none requested or completed for this long while
  // flushing: taken over (TakeoverWatch). GPUUTIL_CUPTI_TAKEOVER_MS overrides.
  int64_t takeover_quiet_ns = 10'000'000'000;
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
  uint64_t calls_learnt = 0;     // calls learnt at API exit (callback API)
  uint64_t calls_dropped = 0;    // calls the callback ring had no room for
  uint64_t flushes = 0;          // default flushes made while waiting
  uint64_t steps_given_up = 0;   // times held steps were reported incomplete (a bound was hit)
  uint64_t stuck = 0;            // launches named as stuck (gpu_stuck)
  uint64_t takeovers = 0;        // times another client was found to have taken CUPTI (cupti_taken_over)
  uint64_t records_missing = 0;  // launches released with no record (cupti_record_missing; after stop)
  uint64_t clock_mismatched = 0;  // device records on another clock, kept out (after stop)
  uint64_t timestamp_registrations = 0;  // cuptiActivityRegisterTimestampCallback calls by gpuutil (process-wide)
  uint64_t nested_calls = 0;     // enqueue calls learnt inside another enqueue call of their thread
  uint64_t streams_created = 0;  // streams learnt from resource callbacks
  uint64_t resubscribed = 0;     // times the subscription was taken again at a step boundary
  bool api_callbacks_on = false;  // launches are learnt at API exit now
};

// Calls learnt at API exit, by callback name, after stop (gpu_check's probe).
struct LearntCallCount {
  std::string name;
  uint64_t count = 0;
};

class CuptiCollector {
 public:
  CuptiCollector(EventSink& session, CuptiCollectorOptions options);
  ~CuptiCollector();  // stop()
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  // "" when collecting; else why not (the session stays host-only).
  // A non-empty `suspended_why` starts suspended (another client such as
  // torch.profiler owns CUPTI now): nothing is registered until resume().
  std::string start(const std::string& suspended_why = "");
  bool running() const { return running_; }
  bool suspended() const { return suspended_; }
  // Another client took CUPTI behind gpuutil's back (cupti_taken_over).
  bool taken_over() const { return taken_over_.load(std::memory_order_acquire); }
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
  // gpu_collection_suspended with `why`. With since_ns (the other client was
  // found running only now, and may have started then), or after a takeover,
  // the other client already set its kinds, per-id enables, clock and
  // callbacks: gpuutil touches none of them (a disable, a forced flush or
  // a clock change would strip or break its trace) and only marks the
  // interval from since_ns and releases its own subscription.
  void suspend(const std::string& why, int64_t since_ns = INT64_MIN);
  // Takes CUPTI back after the other client stopped. "" or why not (then
  // collection stays suspended).
  std::string resume();
  // Lets go of the CUPTI subscription alone (activity collection goes on;
  // launches are learnt from their API records meanwhile), so that a client
  // initialising now can subscribe: Kineto's libkineto_init subscribes
  // once, at `import torch` with KINETO_USE_DAEMON, and traces CPU-only for
  // the rest of the process if it cannot. take_subscription() asks for it
  // again (not before): "" when the callbacks are back, else why not
  // (gpuutil then goes on without them, asking again at step boundaries).
  void release_subscription();
  std::string take_subscription();

  // Waits for launched work (bounded), disables kinds, force-flushes,
  // drains, restores CUPTI's clock, unsubscribes, detaches. Idempotent.
  void stop();

  CuptiCounters counters() const;
  // Calls learnt at API exit by callback name (read after stop()).
  std::vector<LearntCallCount> learnt_calls() const;

  // The CUPTI major version this file was compiled against.
  static uint32_t compiled_major();

 private:
  friend struct CallbackAccess;
  void drain_loop();
  void drain_completed();
  void publish_counters();
  void do_flush(uint32_t flag);
  void update_complete_until(int64_t flush_start_ns);
  void drain_calls();                          // drain thread: learnt calls -> tracker
  void hold_steps_within_bounds(int64_t now);  // drain thread: held-steps and memory bounds
  void watch_stuck(int64_t now);               // drain thread: gpu_stuck
  void release_missing(int64_t now);           // drain thread: overdue and unproven launches (cupti_record_missing)
  void report_missing(const LaunchTracker::Released& r, const std::string& why);
  void probe_clock();                          // drain thread: CUPTI's clock against the session clock
  void enable_callbacks();
  void register_clock_once();  // the session clock as CUPTI's timestamp callback, only over CUPTI's own clock
  std::string call_name(uint32_t id) const;
  std::string unnamed_call(const LearntCall& c) const;  // drain thread: what a call that named no kernel is
  void forced_flush_on_drain_thread();
  void watch_takeover();        // drain thread, after a flush it made while waiting
  void forget_other_clients(bool finalized);  // control path: what another client took or reset is not gpuutil's
  void end_takeover(int64_t now_ns);           // closes the cupti_taken_over / gpu_collection_off intervals
  int64_t clock_skew_ns() const;  // cuptiGetTimestamp - session clock (INT64_MIN: no probe)
  std::string subscribe();
  void unsubscribe();
  void maybe_resubscribe();  // control: without the subscription, ask again (at most once per resubscribe_ms)
  std::string attach();  // timestamp callback, buffer callbacks, kinds and API ids
  void detach();         // disable what attach() enabled, restore CUPTI's clock
  std::string enable_kinds();
  void disable_kinds();

  EventSink& session_;
  CuptiCollectorOptions options_;
  CuptiApi api_;
  CuptiRelease release_;
  CallRoles roles_;
  std::unique_ptr<CallRing> calls_;
  std::atomic<bool> callbacks_on_{false};      // calls are learnt at API exit now
  std::atomic<size_t> max_records_{64};      // maxNumRecords for the next buffer requests
  std::atomic<size_t> most_records_per_buffer_{0};  // the most records a buffer handed out may take (this run)
  std::atomic<uint64_t> calls_learnt_{0}, calls_dropped_{0};
  // Drain thread: calls made after the last buffer event (takeover evidence),
  // counted since that event.
  uint64_t calls_after_buffer_event_ = 0;
  int64_t calls_counted_after_ns_ = INT64_MIN;
  uint64_t calls_dropped_published_ = 0;
  // Drain thread: completeness state.
  std::vector<std::string> call_names_;        // kernel names of learnt calls (id - 1)
  std::vector<uint64_t> learnt_by_cbid_[2];    // calls learnt, by callback id (runtime, driver)
  ClockMap clock_;                             // drain thread: CUPTI's clock -> session clock
  uint64_t records_missing_ = 0, nested_calls_ = 0, streams_created_ = 0;
  uint64_t dropped_released_ = 0;              // CUPTI-reported drops already used to release overdue launches
  std::unordered_map<std::string, uint32_t> call_name_ids_;
  std::unordered_map<uint32_t, uint32_t> unnamed_call_ids_;  // (domain, graph, cbid) -> id in call_names_
  int64_t given_up_until_ns_ = INT64_MIN;      // steps ending before it were reported incomplete
  uint64_t boundaries_seen_ = 0;               // step_boundary() calls (guarded by flush_mu_)
  int64_t sized_at_ns_ = 0;                    // drain thread: the last buffer sizing (maxNumRecords)
  uint64_t calls_at_sizing_ = 0, records_at_sizing_ = 0;
  int64_t flush_interval_ns_ = 0;
  uint64_t flushes_ = 0, steps_given_up_ = 0, stuck_count_ = 0;
  uint64_t progress_records_ = 0;              // device records seen at the last progress check
  int64_t progress_ns_ = INT64_MIN;            // when a device record last arrived
  uint32_t stuck_corr_ = 0;                    // the launch named stuck now (0: none)
  int64_t evicted_floor_ns_ = INT64_MAX;       // launches evicted by the memory bound began here
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
  CUptiResult last_flush_result_ = CUPTI_SUCCESS;  // drain thread (or stop() after it): the last flush's result
  std::mutex watch_mu_;
  std::unique_ptr<TakeoverWatch> watch_;          // guarded by watch_mu_ (drain thread observes, attach() resets)
  std::atomic<int64_t> last_buffer_event_ns_{INT64_MIN};  // callbacks: latest buffer request or completion
  std::atomic<bool> taken_over_{false};   // drain thread writes; control threads read
  std::atomic<bool> reattach_{false};     // drain thread: callbacks gone (cuptiFinalize), attach again
  std::atomic<bool> watching_{false};     // attached and not suspending or stopping: takeovers are looked for
  std::atomic<int64_t> forget_calls_before_ns_{INT64_MIN};  // control -> drain: calls before went to another client
  std::atomic<uint64_t> takeovers_{0};
  bool marked_only_ = false;  // control: suspended without touching CUPTI (the other client already ran)
  bool ask_per_thread_ = false;  // control: attach() asks for per-thread buffers (another client ran)
  int64_t resubscribe_at_ns_ = INT64_MIN;  // control: the next subscription attempt while without it
  std::atomic<uint64_t> resubscribed_{0};
  std::atomic<bool> clock_reset_{false};  // control -> drain: learn CUPTI's clock afresh (another client ran)
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
