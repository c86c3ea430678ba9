// Live session core: pending events, step windows, per-step analysis,
// bounded memory (see gpuutil/session.h).
#include "gpuutil/session.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <unordered_set>

#include <unistd.h>

#include "analysis/host_findings.h"
#include "export/jsonl_sink.h"
#include "gpuutil/report_json.h"

namespace gpuutil {

namespace {
// Key of a thread known only by its OS tid so far (never a pthread_self() value).
constexpr int64_t kOsTidOnly = int64_t(1) << 40;

// sink_write_failed's example: the error, the file and what was lost.
std::string sink_failure_example(const JsonlSink& sink, uint64_t lost_now) {
  return sink.last_error() + " writing " + sink.path() + ": " + std::to_string(lost_now) +
         (lost_now == 1 ? " line" : " lines") + " lost (" + std::to_string(sink.lines_lost()) + " in all)";
}
}  // namespace

Session::Session(SessionOptions options) : options_(std::move(options)) {
  owner_pid_ = getpid();
  store_.rank = options_.rank;
  store_.source = "live";
  store_.steps_source = "session";
  if (!options_.jsonl_path.empty()) {
    jsonl_ = std::make_unique<JsonlSink>(options_.jsonl_path);
    if (!jsonl_->ok()) {
      error_ = jsonl_->error();
      jsonl_.reset();
    }
  }
}

Session::~Session() {
  // A forked child destroying the parent's session (at its exit) must not
  // write the parent's pending steps again, nor take a lock a parent
  // thread may have held at the fork.
  if (owner_pid_ != getpid()) {
    if (jsonl_) jsonl_->abandon();
    // The worker thread is the parent's: its std::thread, mutex and
    // condition variable (which may have had waiters at the fork) are
    // never touched here (destroying them could block forever).
    (void)worker_.release();
    return;
  }
  bool done;
  int64_t end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done = finished_;
    end = open_ ? std::max(current_.start_ns, complete_until_ns_) : 0;
  }
  if (!done) finish(end);
  stop_worker();
}

NameId Session::intern(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  return store_.names.intern(name);
}

uint32_t Session::thread_index(int64_t pid, int64_t key, std::string_view name, int64_t os_tid) {
  return thread_index_with_generation(pid, key, name, os_tid, os_tid);
}

uint32_t Session::thread_index_with_generation(int64_t pid, int64_t key, std::string_view name, int64_t os_tid,
                                               int64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& threads = store_.threads;
  auto& generations = thread_generations_;  // parallel to threads; 0: not known yet
  auto name_it = [&](HostThread& t) {
    if (t.name.empty() && !name.empty()) t.name = std::string(name);
    if (t.os_tid == 0 && os_tid != 0) t.os_tid = os_tid;
  };
  // The newest thread with this key: glibc gives the pthread_t of a thread
  // that exited to the next one, so an older entry is a thread gone.
  for (uint32_t i = static_cast<uint32_t>(threads.size()); i-- > 0;) {
    if (threads[i].pid != pid || threads[i].tid != key) continue;
    if (generation == 0 || generations[i] == 0 || generations[i] == generation) {
      name_it(threads[i]);
      if (generations[i] == 0) generations[i] = generation;
      return i;
    }
    // The key's generation changed (another OS thread): a new thread.
    thread_generation_.fetch_add(1, std::memory_order_relaxed);
    break;
  }
  if (os_tid != 0) {
    for (uint32_t i = 0; i < threads.size(); ++i) {
      if (threads[i].pid == pid && threads[i].os_tid == os_tid && threads[i].tid == (kOsTidOnly | os_tid)) {
        threads[i].tid = key;  // first met through CUPTI by OS tid: now its key is known
        name_it(threads[i]);
        if (generations[i] == 0) generations[i] = generation;
        return i;
      }
    }
  }
  threads.push_back({pid, key, std::string(name), os_tid});
  generations.resize(threads.size());
  generations.back() = generation;
  return static_cast<uint32_t>(threads.size() - 1);
}

uint32_t Session::thread_index_for_os_tid(int64_t pid, int64_t os_tid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& threads = store_.threads;
  for (uint32_t i = 0; i < threads.size(); ++i) {
    if (threads[i].pid == pid && threads[i].os_tid == os_tid) return i;
  }
  threads.push_back({pid, kOsTidOnly | os_tid, std::string(), os_tid});
  thread_generations_.resize(threads.size());
  thread_generations_.back() = os_tid;
  return static_cast<uint32_t>(threads.size() - 1);
}

void Session::set_devices(std::vector<DeviceInfo> devices) {
  std::lock_guard<std::mutex> lock(mu_);
  store_.devices = std::move(devices);
}

bool Session::admit_locked() {
  if (pending_locked() < options_.max_pending_events) return true;
  since_last_report_.add(Diag::session_events_dropped);
  return false;
}

// A record from before the end of the last reported step came too late for
// that step: counted. Returns false when no unreported step can use it.
bool Session::late_locked(int64_t start_ns, int64_t end_ns) {
  if (start_ns >= reported_until_ns_) return true;
  since_last_report_.add(Diag::cupti_records_late);
  return end_ns > keep_from_ns_;
}

void Session::add_activity(const DeviceActivity& a) {
  std::lock_guard<std::mutex> lock(mu_);
  if (late_locked(a.start_ns, a.end_ns) && admit_locked()) store_.activities.push_back(a);
}

void Session::add_api_call(const HostApiCall& c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (late_locked(c.start_ns, c.end_ns) && admit_locked()) store_.api_calls.push_back(c);
}

void Session::add_range(const HostRange& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (admit_locked()) store_.ranges.push_back(r);
}

bool Session::add_staged_ranges(std::vector<StagedRange>& staged, bool wait) {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return false;
  }
  for (const StagedRange& s : staged) {
    if (!admit_locked()) continue;  // counted there
    HostRange r;
    r.start_ns = s.start_ns;
    r.end_ns = s.end_ns;
    r.thread = s.thread;
    r.category = s.category;
    r.name = store_.names.intern(std::string_view(s.name, strnlen(s.name, sizeof s.name)));
    store_.ranges.push_back(r);
  }
  staged.clear();
  return true;
}

void Session::add_counter(const CounterSample& c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (admit_locked()) store_.counters.push_back(c);
}

void Session::count(Diag d, uint64_t n, std::string_view example) {
  std::lock_guard<std::mutex> lock(mu_);
  since_last_report_.add(d, n, example);
}

void Session::set_steps_source(std::string_view source) {
  std::lock_guard<std::mutex> lock(mu_);
  store_.steps_source = std::string(source);
}

void Session::add_standing_diagnostic(Diag d, std::string_view example) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [diag, text] : standing_) {
    if (diag == d && text == example) return;  // the same condition again (a collector restarted)
  }
  standing_.emplace_back(d, std::string(example));
}

void Session::begin_interval(Diag d, int64_t start_ns, std::string_view example) {
  std::lock_guard<std::mutex> lock(mu_);
  intervals_.push_back({d, start_ns, std::numeric_limits<int64_t>::max(), std::string(example)});
}

void Session::end_interval(Diag d, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = intervals_.rbegin(); it != intervals_.rend(); ++it) {
    if (it->diag == d && it->end_ns == std::numeric_limits<int64_t>::max()) {
      it->end_ns = std::max(end_ns, it->start_ns);
      return;
    }
  }
}

void Session::set_flops_per_step(std::optional<double> flops, std::string_view source) {
  std::lock_guard<std::mutex> lock(mu_);
  options_.analysis.flops_per_step = flops;
  options_.analysis.flops_source = std::string(source);
}

void Session::set_loader(std::string_view name, const LoaderSettings& settings) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [n, s] : options_.analysis.loader_settings) {
    if (n == name) {
      s = settings;
      return;
    }
  }
  options_.analysis.loader_settings.emplace_back(std::string(name), settings);
}

void Session::begin_step(int64_t step, int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  begin_step_locked(step, t_ns);
}

void Session::close_step(int64_t step, int64_t start_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  begin_step_locked(step, start_ns);
  end_step_locked(end_ns);
}

void Session::set_detail(int64_t t_ns, bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  if (detail_.size() >= 4096) detail_.pop_front();
  if (!detail_.empty() && t_ns < detail_.back().first) t_ns = detail_.back().first;  // time order
  detail_.emplace_back(t_ns, on);
}

void Session::begin_step_locked(int64_t step, int64_t t_ns) {
  if (open_) {
    current_.end_ns = std::max(t_ns, current_.start_ns);
    closed_.push_back(current_);
  }
  if (last_step_end_ns_ != std::numeric_limits<int64_t>::min() && t_ns > last_step_end_ns_) {
    outside_steps_ns_ += t_ns - last_step_end_ns_;
  }
  current_ = {step, t_ns, t_ns};
  open_ = true;
}

void Session::end_step(int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  end_step_locked(t_ns);
}

void Session::end_step_locked(int64_t t_ns) {
  if (!open_) {
    since_last_report_.add(Diag::step_end_without_begin);
    return;
  }
  current_.end_ns = std::max(t_ns, current_.start_ns);
  closed_.push_back(current_);
  last_step_end_ns_ = current_.end_ns;
  open_ = false;
}

bool Session::step_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

void Session::mark_complete_until(int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  complete_until_ns_ = std::max(complete_until_ns_, t_ns);
}

void Session::mark_incomplete_until(int64_t t_ns, std::string_view cause) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t_ns > incomplete_until_ns_) {
    incomplete_until_ns_ = t_ns;
    incomplete_cause_ = std::string(cause);
  }
}

int64_t Session::held_step_end_ns(size_t keep) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_.size() <= keep) return INT64_MIN;
  return closed_[closed_.size() - keep - 1].end_ns;
}

uint64_t Session::steps_incomplete() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_incomplete_;
}

size_t Session::pending_locked() const {
  return held_events_ + store_.activities.size() + store_.api_calls.size() + store_.ranges.size() +
         store_.counters.size();
}

// Moves the events added since the last take out of store_ in O(1): each
// vector is swapped with an empty one of in_ (whose capacity store_ reuses,
// so the adds rarely reallocate under mu_). Names are append-only (ids are
// positions), so snap_'s table only gets the new ones; the small tables
// (threads, devices) are copied.
void Session::take_incoming_locked() {
  for (auto id = static_cast<NameId>(snap_.names.size()); id < store_.names.size(); ++id) {
    snap_.names.intern(store_.names.view(id));
  }
  in_.activities.swap(store_.activities);
  in_.api_calls.swap(store_.api_calls);
  in_.ranges.swap(store_.ranges);
  in_.counters.swap(store_.counters);
  held_events_ += in_.activities.size() + in_.api_calls.size() + in_.ranges.size() + in_.counters.size();
  snap_.devices = store_.devices;
  snap_.threads = store_.threads;
  snap_.diagnostics = store_.diagnostics;
  snap_.rank = store_.rank;
  snap_.source = store_.source;
  snap_.steps_source = store_.steps_source;
}

// Appends what take_incoming_locked took to the held events, in arrival
// order, without mu_; in_ is left empty with its capacity.
void Session::absorb_incoming() {
  auto append = [](auto& to, auto& from) {
    to.insert(to.end(), from.begin(), from.end());
    from.clear();
  };
  append(snap_.activities, in_.activities);
  append(snap_.api_calls, in_.api_calls);
  append(snap_.ranges, in_.ranges);
  append(snap_.counters, in_.counters);
}

// Drops every held event no unreported step can need: events that end at
// or before keep_from_ns, except the launch calls of device work that is
// kept and the ranges around them (the kernels of a pipelined GPU run a
// step or more after their launch, and idle attribution looks up that
// launch). Without mu_: the caller took every event added before it set
// keep_from_ns_, so later adds are checked by late_locked instead.
void Session::prune_held(int64_t keep_from_ns) {
  std::unordered_set<uint64_t> launched;
  for (const DeviceActivity& a : snap_.activities) {
    if (a.end_ns > keep_from_ns && a.correlation_id != 0) launched.insert(a.correlation_id);
  }
  int64_t host_from = keep_from_ns;
  for (const HostApiCall& c : snap_.api_calls) {
    if (c.start_ns < host_from && launched.count(c.correlation_id) != 0) host_from = c.start_ns;
  }
  auto ends_by = [](int64_t t) { return [t](const auto& e) { return e.end_ns <= t; }; };
  snap_.activities.erase(std::remove_if(snap_.activities.begin(), snap_.activities.end(), ends_by(keep_from_ns)),
                         snap_.activities.end());
  snap_.api_calls.erase(std::remove_if(snap_.api_calls.begin(), snap_.api_calls.end(), ends_by(host_from)),
                        snap_.api_calls.end());
  snap_.ranges.erase(std::remove_if(snap_.ranges.begin(), snap_.ranges.end(), ends_by(host_from)), snap_.ranges.end());
  snap_.counters.erase(std::remove_if(snap_.counters.begin(), snap_.counters.end(),
                                      [keep_from_ns](const CounterSample& c) { return c.ts_ns <= keep_from_ns; }),
                       snap_.counters.end());
}

// One batch. Under mu_: the reportable steps, and the events added since
// the last batch, taken in O(1). Without it: those events joined to the held
// ones, and the analysis (the expensive part). Under mu_ again: totals,
// sinks, the new prune point, and the events added meanwhile; then, without
// mu_, the prune. mu_ is never held for work that grows with the number of
// pending events, so the adds of the training thread, CUPTI and the NVTX
// drain never wait for a copy or a prune. Callers hold collect_mu_ (one
// batch at a time; snap_ and in_ are theirs).
std::vector<StepOutput> Session::collect_batch() {
  std::vector<StepWindow> windows;
  std::vector<std::optional<bool>> detail;
  Diagnostics first_diags;
  std::vector<std::pair<Diag, std::string>> standing;
  std::vector<Interval> intervals;
  AnalysisOptions options;
  std::vector<bool> complete;  // per window: every device record of it arrived
  std::string incomplete_cause;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t ready = 0;
    const int64_t reportable = std::max(complete_until_ns_, incomplete_until_ns_);
    while (ready < closed_.size() && closed_[ready].end_ns <= reportable) ++ready;
    if (ready == 0) return {};
    windows.assign(closed_.begin(), closed_.begin() + static_cast<long>(ready));
    for (const StepWindow& w : windows) complete.push_back(w.end_ns <= complete_until_ns_);
    incomplete_cause = incomplete_cause_;
    for (const StepWindow& w : windows) {
      // The detail state at the step's end; changes before it but the last are done with.
      while (detail_.size() > 1 && detail_[1].first <= w.end_ns) detail_.pop_front();
      detail.push_back(!detail_.empty() && detail_.front().first <= w.end_ns ? std::optional<bool>(detail_.front().second)
                                                                              : std::nullopt);
    }
    // Data problems counted since the previous report belong to this one.
    first_diags = std::move(since_last_report_);
    since_last_report_ = Diagnostics();
    standing = standing_;
    intervals = intervals_;
    options = options_.analysis;
    take_incoming_locked();
  }
  absorb_incoming();

  // The batch's steps share one set of indexes over the pending events
  // (each step's report is what analyze() gives with steps = {w}).
  std::vector<StepOutput> out;
  out.reserve(windows.size());
  {
    PreparedStore prepared(snap_, windows);
    for (size_t i = 0; i < windows.size(); ++i) {
      const StepWindow& w = windows[i];
      StepOutput o;
      o.report = prepared.analyze_window(w, options);
      if (detail[i] && !o.report.steps.empty()) o.report.steps.front().detail = *detail[i];
      if (i == 0) o.report.diagnostics.merge(first_diags);
      for (const auto& [d, example] : standing) o.report.diagnostics.add(d, 1, example);
      for (const Interval& iv : intervals) {
        if (iv.start_ns < w.end_ns && iv.end_ns > w.start_ns) o.report.diagnostics.add(iv.diag, 1, iv.example);
      }
      o.report.summary.trace_span_ns = w.wall_ns();
      o.report.summary.outside_steps_ns = 0;
      if (!complete[i] && !o.report.steps.empty()) {
        // Device records of this step are still missing: its device time is
        // a lower bound, so nothing is concluded from it.
        o.report.steps.front().complete = false;
        o.report.findings.clear();
        for (DeviceStepReport& d : o.report.steps.front().devices) d.mfu.reset();
        for (DeviceSummary& d : o.report.summary.devices) d.mfu.reset();
        o.report.diagnostics.add(Diag::cupti_step_incomplete, 1, incomplete_cause);
      }
      for (const Interval& iv : intervals) {
        if (iv.diag == Diag::gpu_stuck && iv.start_ns < w.end_ns && iv.end_ns > w.start_ns) {
          Finding f;
          f.id = "gpu_stuck";
          f.title = iv.example;
          f.evidence = "no device record arrived for the oldest launch still waiting since it was made";
          f.fix = "find why the kernel does not finish: a collective waiting on another rank (check the other "
                  "ranks' progress, NCCL_DEBUG=INFO), a deadlock or an endless loop in the kernel";
          o.report.findings.insert(o.report.findings.begin(), std::move(f));
        }
      }
      if (!o.report.steps.empty()) {
        for (const Interval& iv : intervals) {
          if (iv.diag == Diag::compile_warmup && iv.start_ns < w.end_ns && iv.end_ns > w.start_ns) {
            o.report.steps.front().compile_warmup = true;
          }
        }
      }
      o.json = report_to_json(o.report);
      out.push_back(std::move(o));
    }
  }

  // The JSON Lines file (each line handed to the kernel whole, or cut off
  // again) is written outside mu_.
  uint64_t write_failures = 0;
  std::string write_error;
  {
    std::lock_guard<std::mutex> lock(jsonl_mu_);
    if (jsonl_) {
      for (const StepOutput& o : out) write_failures += jsonl_->write_line(o.json) ? 0 : 1;
      if (write_failures > 0) write_error = sink_failure_example(*jsonl_, write_failures);
    }
  }
  int64_t keep_from;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (write_failures > 0) since_last_report_.add(Diag::sink_write_failed, write_failures, write_error);
    for (StepOutput& o : out) {
      reported_until_ns_ = std::max(reported_until_ns_, o.report.steps.empty() ? INT64_MIN : o.report.steps[0].end_ns);
      if (!o.report.steps.empty() && !o.report.steps.front().complete) {
        // Never in the run's figures (its device time is a lower bound): its
        // wall is outside time, named, so the run's time still adds up.
        ++steps_incomplete_;
        outside_steps_ns_ += o.report.steps.front().wall_ns;
        outside_named_ns_[static_cast<size_t>(OutsideKind::kIncomplete)] += o.report.steps.front().wall_ns;
      } else if (!o.report.steps.empty() && o.report.steps.front().compile_warmup) {
        // A torch.compile warm-up: reported, but kept out of the run's figures.
        outside_steps_ns_ += o.report.steps.front().wall_ns;
        outside_named_ns_[static_cast<size_t>(OutsideKind::kCompileWarmup)] += o.report.steps.front().wall_ns;
        ++compile_warmup_steps_;
      } else {
        totals_.add(o.report);
      }
      if (keep_rank_steps_ > 0 && !o.report.steps.empty()) {
        if (auto rs = rank_step_of(o.report.steps.front(), store_.rank)) {
          if (rank_steps_.size() >= keep_rank_steps_) {
            rank_steps_.pop_front();
            ++rank_steps_dropped_;
          }
          rank_steps_.push_back(std::move(*rs));
        }
      }
      ++steps_reported_;
    }
    closed_.erase(closed_.begin(), closed_.begin() + static_cast<long>(windows.size()));
    keep_from = windows.back().end_ns;
    if (!closed_.empty()) keep_from = std::min(keep_from, closed_.front().start_ns);
    if (open_) keep_from = std::min(keep_from, current_.start_ns);
    keep_from_ns_ = std::max(keep_from_ns_, keep_from);
    intervals_.erase(std::remove_if(intervals_.begin(), intervals_.end(),
                                    [this](const Interval& iv) { return iv.end_ns <= reported_until_ns_; }),
                     intervals_.end());
    take_incoming_locked();  // what came during the analysis: its prune needs all of them
  }
  absorb_incoming();
  prune_held(keep_from);
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_events_ = snap_.activities.size() + snap_.api_calls.size() + snap_.ranges.size() + snap_.counters.size();
  }
  if (callback_) {
    for (const auto& o : out) callback_(o);
  }
  return out;
}

std::vector<StepOutput> Session::collect() {
  std::lock_guard<std::mutex> batch(collect_mu_);
  std::vector<StepOutput> out = take_outputs();  // the worker's, finished before
  std::vector<StepOutput> now = collect_batch();
  out.insert(out.end(), std::make_move_iterator(now.begin()), std::make_move_iterator(now.end()));
  return out;
}

void Session::start_worker() {
  if (worker_) return;
  worker_ = std::make_unique<Worker>();
  Worker* w = worker_.get();
  w->thread = std::thread([this, w] {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(w->mu);
        w->cv.wait(lock, [w] { return w->wake || w->quit; });
        if (w->quit) return;
        w->wake = false;
      }
      std::vector<StepOutput> outs;
      {
        std::lock_guard<std::mutex> batch(collect_mu_);
        outs = collect_batch();
      }
      if (outs.empty()) continue;
      std::lock_guard<std::mutex> lock(w->mu);
      if (w->done.size() + outs.size() > kMaxUntakenOutputs) {
        const size_t drop = std::min(w->done.size(), w->done.size() + outs.size() - kMaxUntakenOutputs);
        w->done.erase(w->done.begin(), w->done.begin() + static_cast<long>(drop));
        w->dropped += drop;
      }
      // Only the JSON line leaves the worker: the report's many small
      // allocations are freed here, on the thread (and malloc arena) that
      // made them, not on the training thread that takes the line.
      for (auto& o : outs) w->done.push_back(std::move(o.json));
    }
  });
}

void Session::stop_worker() {
  if (!worker_) return;
  {
    std::lock_guard<std::mutex> lock(worker_->mu);
    worker_->quit = true;
  }
  worker_->cv.notify_one();
  worker_->thread.join();
  std::vector<std::string> left = std::move(worker_->done);
  const uint64_t dropped = worker_->dropped;
  worker_.reset();
  // Outputs nobody took stay takeable (take_outputs reads them below).
  parked_ = std::move(left);
  parked_dropped_ = dropped;
}

void Session::request_report() {
  if (!worker_) return;
  {
    std::lock_guard<std::mutex> lock(worker_->mu);
    worker_->wake = true;
  }
  worker_->cv.notify_one();
}

std::vector<StepOutput> Session::take_outputs() {
  std::vector<std::string> lines = take_lines();
  std::vector<StepOutput> out(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) out[i].json = std::move(lines[i]);
  return out;
}

std::vector<std::string> Session::take_lines() {
  std::vector<std::string> out = std::move(parked_);
  parked_.clear();
  uint64_t dropped = parked_dropped_;
  parked_dropped_ = 0;
  if (worker_) {
    std::lock_guard<std::mutex> lock(worker_->mu);
    if (out.empty()) {
      out.swap(worker_->done);
    } else {
      for (auto& line : worker_->done) out.push_back(std::move(line));
      worker_->done.clear();
    }
    dropped += worker_->dropped;
    worker_->dropped = 0;
  }
  if (dropped > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    since_last_report_.add(Diag::reports_dropped, dropped, "reports finished in the background but not taken in time");
  }
  return out;
}

bool Session::write_jsonl_line(const std::string& line) {
  std::string write_error;
  {
    std::lock_guard<std::mutex> lock(jsonl_mu_);
    if (!jsonl_ || !jsonl_->ok()) return false;
    if (jsonl_->write_line(line)) return true;
    write_error = sink_failure_example(*jsonl_, 1);
  }
  std::lock_guard<std::mutex> lock(mu_);
  since_last_report_.add(Diag::sink_write_failed, 1, write_error);
  return false;
}

Session::OutputStatus Session::output_status() const {
  OutputStatus out;
  std::lock_guard<std::mutex> lock(jsonl_mu_);
  if (jsonl_) {
    out.path = jsonl_->path();
    out.lines_written = jsonl_->lines_written();
    out.lines_lost = jsonl_->lines_lost();
    out.last_error = jsonl_->last_error();
  }
  return out;
}

void Session::close_output() {
  std::lock_guard<std::mutex> lock(jsonl_mu_);
  if (jsonl_) jsonl_->close();
}

void Session::keep_rank_steps(size_t max_steps) {
  std::lock_guard<std::mutex> lock(mu_);
  keep_rank_steps_ = max_steps;
  while (rank_steps_.size() > max_steps) {
    rank_steps_.pop_front();
    ++rank_steps_dropped_;
  }
}

std::vector<RankStep> Session::take_rank_steps(uint64_t* dropped) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RankStep> out(std::make_move_iterator(rank_steps_.begin()), std::make_move_iterator(rank_steps_.end()));
  rank_steps_.clear();
  if (dropped) *dropped = rank_steps_dropped_;
  rank_steps_dropped_ = 0;
  return out;
}

std::vector<StepOutput> Session::finish(int64_t t_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_) {
      current_.end_ns = std::max(t_ns, current_.start_ns);
      closed_.push_back(current_);
      last_step_end_ns_ = current_.end_ns;
      open_ = false;
    }
    // All data is in now, unless a collector said at its stop that work
    // launched after complete_until_ns_ never finished.
    if (incomplete_until_ns_ != std::numeric_limits<int64_t>::max()) {
      complete_until_ns_ = std::numeric_limits<int64_t>::max();
    }
    finished_ = true;
  }
  stop_worker();  // its batch in flight finishes; what it made comes first
  return collect();
}

size_t Session::findings_seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_.findings.size();
}

uint64_t Session::steps_reported() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_reported_;
}

int64_t Session::reported_until_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reported_until_ns_;
}

int64_t Session::outside_steps_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outside_steps_ns_;
}

void Session::add_outside_ns(int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  outside_steps_ns_ += std::max<int64_t>(0, ns);
}

void Session::name_outside(OutsideKind kind, int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  outside_named_ns_[static_cast<size_t>(kind)] += std::max<int64_t>(0, ns);
}

size_t Session::pending_events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_locked();
}

RunTotals Session::run_totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  RunTotals t = totals_;
  // Run-level findings are made from these totals (run_findings), not
  // summed from per-step ones (docs/findings.md): the time outside steps is
  // the session's.
  t.outside_steps_ns = outside_steps_ns_;
  t.outside_named_ns = outside_named_ns_;
  int64_t named = 0;
  for (size_t k = 0; k + 1 < kOutsideKindCount; ++k) named += outside_named_ns_[k];
  t.outside_named_ns[static_cast<size_t>(OutsideKind::kOther)] = std::max<int64_t>(0, outside_steps_ns_ - named);
  t.compile_warmup_steps = compile_warmup_steps_;
  t.incomplete_steps = steps_incomplete_;
  return t;
}

void Session::set_step_callback(std::function<void(const StepOutput&)> cb) {
  std::lock_guard<std::mutex> lock(mu_);
  callback_ = std::move(cb);
}

}  // namespace gpuutil
