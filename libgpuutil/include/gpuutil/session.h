// The live session core: collectors push plain events, the application
// marks steps, and each finished step is analysed by the same engine that
// analyses trace files, then written to the sinks.
//
// Vendor-free. The CUPTI, NVTX and torch collectors live in their own
// folders; they decode on THEIR drain threads and write to the EventSink
// interface (gpuutil/event_sink.h) that this class implements: they never
// include this header (the runtime library, gpuutil_runtime, links them,
// not the other way round).
// Nothing in this class may be called from a CUPTI/NVTX/RecordFunction
// callback: those only write into their own preallocated buffers.
//
// Contract:
// - Thread-safe. One internal mutex guards the pending events and steps; it
//   is taken by drain threads (ingest) and by step boundaries (a few times
//   per step), never on a per-kernel or per-op path. Its critical sections
//   are O(1) in the number of pending events (an add; a report batch swaps
//   the added events out): none copies, sorts or prunes them.
// - Memory is bounded: only events that may still overlap an unreported
//   step are kept, at most SessionOptions::max_pending_events; an event past
//   that bound is dropped and counted (session_events_dropped).
// - A step's report is produced once the collectors say data is complete up
//   to the step's end (mark_complete_until), so reports lag by at most the
//   collectors' flush interval (one step with step-boundary flushes).
// - Each report covers exactly one step; its diagnostics are the data
//   problems counted since the previous report, so a drop is reported in
//   the step where it happened (or the next one).
// - Pruning keeps what an unreported step can still need: events that end
//   after the oldest unreported step begins, plus the launch calls (and the
//   ranges around them) of device work that is kept, however old: on a
//   pipelined GPU a kernel runs a step or more after its launch.
// - A device record or API call that arrives after the step it falls in was
//   reported is counted (cupti_records_late), never silently dropped.
#pragma once

#ifdef GPUUTIL_LOWER_LAYER
#error "the runtime (gpuutil/session.h, step_path.h, profiler.h) is included from a lower layer: collectors use gpuutil/event_sink.h (docs/architecture.md)"
#endif

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/events.h"
#include "gpuutil/report.h"
#include "gpuutil/cluster.h"
#include "gpuutil/event_sink.h"
#include "gpuutil/run_totals.h"

namespace gpuutil {
class JsonlSink;
}

namespace gpuutil {

struct SessionOptions {
  AnalysisOptions analysis;
  std::string jsonl_path;             // "" = no file sink
  int32_t rank = 0;
  size_t max_pending_events = 1u << 22;  // bound on buffered events (all kinds)
};

// One finished step.
struct StepOutput {
  Report report;     // one step
  std::string json;  // compact JSON line (gpuutil.report/1)
};

class Session final : public EventSink {
 public:
  // Opens the JSONL sink if asked. `ok()` is false with `error()` set when
  // the sink cannot be opened; the session then still works without it.
  explicit Session(SessionOptions options);
  // Finishes (flushes the open step) if finish() was not called, in the
  // process that made it; in a forked child it writes nothing.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  // --- ingestion: the EventSink the collectors write to (gpuutil/event_sink.h;
  // collector drain threads, any thread) ---
  NameId intern(std::string_view name) override;
  uint32_t thread_index(int64_t pid, int64_t key, std::string_view name = {}, int64_t os_tid = 0) override;
  // thread_index() for a thread shown in reports with another process's OS
  // tid (`os_tid`: the traced thread's, in the trace replay, tests/replay)
  // while its generation is its own gettid (`generation`), which the live
  // sources on it (the hook rings, NVTX) give as their os_tid. thread_index()
  // is this with generation = os_tid.
  uint32_t thread_index_with_generation(int64_t pid, int64_t key, std::string_view name, int64_t os_tid,
                                        int64_t generation);
  uint32_t thread_index_for_os_tid(int64_t pid, int64_t os_tid) override;
  uint64_t thread_generation() const override { return thread_generation_.load(std::memory_order_relaxed); }
  void set_devices(std::vector<DeviceInfo> devices);
  void add_activity(const DeviceActivity& a) override;
  void add_api_call(const HostApiCall& c) override;
  void add_range(const HostRange& r) override;
  bool add_staged_ranges(std::vector<StagedRange>& staged, bool wait) override;
  void add_counter(const CounterSample& c) override;
  void count(Diag d, uint64_t n = 1, std::string_view example = {}) override;
  // How steps are found ("session", "user", "optimizer_step", ...): written
  // into each report's sources[0].steps_source from the next report on.
  void set_steps_source(std::string_view source);
  // Standing and interval diagnostics (gpuutil/event_sink.h).
  void add_standing_diagnostic(Diag d, std::string_view example = {}) override;
  void begin_interval(Diag d, int64_t start_ns, std::string_view example) override;
  void end_interval(Diag d, int64_t end_ns) override;
  // FLOPs per step for MFU from the next analysed step on (also steps
  // already closed but not yet reported); `source` becomes the reports'
  // flops_source ("user", "measured").
  void set_flops_per_step(std::optional<double> flops, std::string_view source);
  // The live DataLoader whose batch waits are the ranges named `name`
  // ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__") is
  // set up with `settings`: reports analysed from now on (also of steps
  // already closed) carry them in `loaders`, and findings never recommend
  // a setting it has (AnalysisOptions::loader_settings). A later call for
  // the same name replaces the settings (the latest iterator made wins).
  // The PyTorch collector calls it once per DataLoader iterator; any
  // thread, not a hot path.
  void set_loader(std::string_view name, const LoaderSettings& settings);

  // --- step boundaries (application thread) ---
  // Opens step `step` at t_ns. An open step is closed at t_ns first.
  void begin_step(int64_t step, int64_t t_ns);
  // Closes the open step at t_ns (no-op with a diagnostic if none is open).
  void end_step(int64_t t_ns);
  bool step_open() const;
  // Records the closed step [start_ns, end_ns) in one call (automatic steps,
  // whose start is known only when they end); an open step is closed at
  // start_ns first.
  void close_step(int64_t step, int64_t start_ns, int64_t end_ns);
  // From t_ns on, the detail tier (per-op and autograd-node ranges;
  // docs/pytorch.md, "Collection tiers") is on or off. Collectors switch
  // it at step boundaries, so a step's report carries "detail": the state
  // at its end; steps that end before the first call carry none. At most
  // 4,096 unreported changes are kept (the oldest are forgotten).
  void set_detail(int64_t t_ns, bool on);

  // --- completion and output ---
  // Collectors promise that every event ending before t_ns has been
  // ingested. Steps ending at or before t_ns become reportable.
  void mark_complete_until(int64_t t_ns) override;
  // A collector gave up waiting for data before t_ns (a held-steps or memory
  // bound was hit, or the device never finished work launched before it):
  // steps ending at or before t_ns that are not complete (they end after
  // what mark_complete_until said) become reportable with
  // steps[].complete = false and cupti_step_incomplete counted with `cause`;
  // they are kept out of run_totals(), MFU and findings, never reported as
  // idle. t_ns = INT64_MAX (a collector's stop with unfinished work): finish()
  // keeps the completeness it was given instead of treating all data as
  // complete. Any thread.
  void mark_incomplete_until(int64_t t_ns, std::string_view cause) override;
  uint64_t steps_incomplete() const;  // steps reported with complete = false
  // The end of the newest closed, unreported step that is older than the
  // newest `keep` of them (INT64_MIN when at most `keep` wait): what a
  // collector bounding the steps held for its data gives up. Any thread.
  int64_t held_step_end_ns(size_t keep) const override;
  // Analyses reportable steps, writes them to the sinks, prunes events no
  // unreported step can need, and returns the new outputs (after any the
  // worker finished and nobody took yet, in step order). Waits for a
  // worker batch in flight.
  std::vector<StepOutput> collect();

  // --- background reporting (the live Python path) ---
  // A worker thread analyses reportable steps off the training thread:
  // request_report() wakes it and returns at once; take_outputs() returns
  // what it finished since the last take, in step order. The analysis runs
  // on the pending events taken out of the session in O(1), so the session
  // lock is held only for that take and to record the results, never for
  // work that grows with the pending events: the application's threads
  // (steps, ranges, CUPTI buffers) never wait for an analysis, a copy or a
  // prune. Outputs not taken pile up
  // to 65,536 at most (older ones are dropped and counted as
  // reports_dropped). Outputs made by the worker carry only their JSON
  // line (`report` is empty). The JSON Lines file is written by the worker.
  // finish() stops the worker; a forked child never touches it.
  // take_outputs() is for the thread that drives the session.
  void start_worker();
  void request_report();
  std::vector<StepOutput> take_outputs();
  std::vector<std::string> take_lines();  // the same, JSON lines only
  // Closes an open step at t_ns, treats all data as complete, collects.
  std::vector<StepOutput> finish(int64_t t_ns);

  // Run totals for summaries.
  uint64_t steps_reported() const;
  // Distinct finding ids over the reported steps (grows when a new one fires).
  size_t findings_seen() const;
  int64_t outside_steps_ns() const;  // time between consecutive steps, plus add_outside_ns() and compile warm-ups
  // Outside-steps time that no gap between two consecutive steps holds
  // (automatic steps: work carved out before the first step, and the time
  // from the last step to the profile's stop): added to outside_steps_ns().
  void add_outside_ns(int64_t ns);
  // Names `ns` of the outside-steps time as `kind` (run_totals(): what is
  // not named is "other"); outside_steps_ns() does not change. A step that
  // overlaps a compile_warmup interval (begin_interval) is reported as usual
  // but kept out of run_totals(): its wall counts outside steps, named
  // kCompileWarmup.
  void name_outside(OutsideKind kind, int64_t ns);
  int64_t reported_until_ns() const;  // end of the last reported step (INT64_MIN before any)
  size_t pending_events() const;     // buffered now (for memory tests)
  RunTotals run_totals() const;      // sums over every reported step

  // Cross-rank view input (gpuutil/cluster.h): from now on every reported
  // step's RankStep is kept, at most `max_steps` (older ones are dropped and
  // counted in take_rank_steps), until taken. 0 turns it off.
  void keep_rank_steps(size_t max_steps);
  // The kept RankSteps, oldest first; `dropped` gets how many were dropped
  // since the last take. Any thread.
  std::vector<RankStep> take_rank_steps(uint64_t* dropped = nullptr);
  int32_t rank() const { return store_.rank; }
  // Appends one line (e.g. a cluster record) to the JSON Lines file, if
  // any, between step reports; false when there is no file or it failed.
  bool write_jsonl_line(const std::string& line);
  // The JSON Lines file: lines written, lines lost to failed writes (each
  // counted as sink_write_failed with the errno in the example; a failed
  // line never leaves a partial line behind) and the last failure in words
  // ("ENOSPC (No space left on device)", "" if none). Any thread.
  struct OutputStatus {
    std::string path;
    uint64_t lines_written = 0;
    uint64_t lines_lost = 0;
    std::string last_error;
  };
  OutputStatus output_status() const;
  // Closes the JSON Lines file (the profile's stop, after its last line);
  // later lines are not written. Any thread.
  void close_output();

  // Called with each finished step while the session lock is NOT held
  // (e.g. a tracker sink). Set before the first step.
  void set_step_callback(std::function<void(const StepOutput&)> cb);

 private:
  struct Interval {
    Diag diag;
    int64_t start_ns;
    int64_t end_ns;
    std::string example;
  };
  bool admit_locked();
  bool late_locked(int64_t start_ns, int64_t end_ns);
  void begin_step_locked(int64_t step, int64_t t_ns);
  void end_step_locked(int64_t t_ns);
  size_t pending_locked() const;
  void take_incoming_locked();
  void absorb_incoming();
  void prune_held(int64_t keep_from_ns);
  std::vector<StepOutput> collect_batch();  // with collect_mu_ held
  void stop_worker();

  struct Worker {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    bool wake = false;
    bool quit = false;
    std::vector<std::string> done;  // JSON lines finished, not taken
    uint64_t dropped = 0;
  };
  static constexpr size_t kMaxUntakenOutputs = size_t(1) << 16;

  SessionOptions options_;
  std::string error_;
  mutable std::mutex mu_;
  EventStore store_;  // events added since the last take (names, threads, devices: all); store_.steps unused
  std::vector<StepWindow> closed_;  // closed, not yet reported, in order
  std::deque<std::pair<int64_t, bool>> detail_;  // (t_ns, on) changes, in time order; the first is in force
  bool open_ = false;
  StepWindow current_{};
  int64_t complete_until_ns_ = INT64_MIN;
  int64_t incomplete_until_ns_ = INT64_MIN;  // steps ending at or before it are reported, complete or not
  std::string incomplete_cause_;
  uint64_t steps_incomplete_ = 0;
  int64_t reported_until_ns_ = INT64_MIN;
  int64_t keep_from_ns_ = INT64_MIN;  // events ending at or before this were pruned
  std::vector<Interval> intervals_;
  int64_t last_step_end_ns_ = INT64_MIN;
  int64_t outside_steps_ns_ = 0;
  std::array<int64_t, kOutsideKindCount> outside_named_ns_{};
  uint64_t compile_warmup_steps_ = 0;
  uint64_t steps_reported_ = 0;
  bool finished_ = false;
  Diagnostics since_last_report_;
  std::vector<std::pair<Diag, std::string>> standing_;
  std::vector<int64_t> thread_generations_;  // each store_.threads entry's generation (0: not known yet; mu_)
  std::atomic<uint64_t> thread_generation_{0};  // known keys that started naming a new thread (mu_ to write)
  RunTotals totals_;
  size_t keep_rank_steps_ = 0;
  std::deque<RankStep> rank_steps_;
  uint64_t rank_steps_dropped_ = 0;
  mutable std::mutex jsonl_mu_;  // the file's lines, in order (never held with mu_)
  std::unique_ptr<JsonlSink> jsonl_;
  int64_t owner_pid_ = 0;  // the process that made the session (a forked child never finishes it)
  std::function<void(const StepOutput&)> callback_;
  std::mutex collect_mu_;  // one analysis batch at a time (worker or collect())
  EventStore snap_;        // held events: taken from store_, not yet pruned; a batch analyses them (collect_mu_)
  EventStore in_;          // events just taken from store_, before they join snap_ (collect_mu_)
  size_t held_events_ = 0;  // events in snap_ and in_ (mu_; counts against max_pending_events)
  std::unique_ptr<Worker> worker_;
  std::vector<std::string> parked_;  // the stopped worker's untaken lines
  uint64_t parked_dropped_ = 0;
};

}  // namespace gpuutil
