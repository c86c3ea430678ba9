// gpuutil::Profiler and gpuutil::LiveCollector (see gpuutil/profiler.h):
// lifecycle, step boundaries, the exit-time flush and fork safety.
#include "gpuutil/profiler.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <set>

#include "collectors/cupti/cupti_collector.h"
#include "collectors/nvtx/nvtx_collector.h"
#include "gpuutil/clock.h"

namespace gpuutil {

// ---- LiveCollector ----

struct LiveCollector::Impl {
  Session& session;
  LiveOptions options;
  std::unique_ptr<cupti::CuptiCollector> cupti;
  std::unique_ptr<nvtx::NvtxCollector> nvtx;
  std::string nvtx_off;
  Impl(Session& s, LiveOptions o) : session(s), options(std::move(o)) {}
};

LiveCollector::LiveCollector(Session& session, LiveOptions options)
    : impl_(std::make_unique<Impl>(session, std::move(options))) {}

LiveCollector::~LiveCollector() { stop(); }

std::string LiveCollector::start(const std::string& suspended_why) {
  if (impl_->options.nvtx && !(impl_->nvtx && impl_->nvtx->running())) {
    nvtx::NvtxCollectorOptions no;
    no.library = impl_->options.nvtx_library;
    impl_->nvtx = std::make_unique<nvtx::NvtxCollector>(impl_->session, std::move(no));
    impl_->nvtx_off = impl_->nvtx->start();
    // Every report from now on says so, however steps are batched.
    if (!impl_->nvtx_off.empty()) impl_->session.add_standing_diagnostic(Diag::nvtx_collection_off, impl_->nvtx_off);
  } else if (!impl_->options.nvtx) {
    impl_->nvtx_off = "NVTX collection disabled by the caller (LiveOptions::nvtx = false)";
  }
  if (!impl_->options.gpu) return "GPU collection disabled by the caller (LiveOptions::gpu = false)";
  if (impl_->cupti && impl_->cupti->running()) return "";
  cupti::CuptiCollectorOptions o;
  o.buffer_count = impl_->options.cupti_buffer_count;
  o.buffer_bytes = impl_->options.cupti_buffer_bytes;
  o.max_buffer_count = std::max(impl_->options.cupti_max_buffer_count, impl_->options.cupti_buffer_count);
  o.library_dirs = impl_->options.cupti_library_dirs;
  o.driver_api = impl_->options.cupti_driver_api;
  o.completion_wait_ns = impl_->options.cupti_completion_wait_ms * 1'000'000;
  o.max_held_steps = impl_->options.cupti_max_held_steps;
  o.stuck_after_ns = impl_->options.cupti_stuck_after_ms * 1'000'000;
  o.missing_after_ns = impl_->options.cupti_missing_after_ms * 1'000'000;
  o.api_callbacks = impl_->options.cupti_api_callbacks;
  o.zeroed_buffers = impl_->options.cupti_zeroed_buffers;
  impl_->cupti = std::make_unique<cupti::CuptiCollector>(impl_->session, std::move(o));
  return impl_->cupti->start(suspended_why);
}

bool LiveCollector::running() const { return impl_->cupti && impl_->cupti->running(); }

std::string LiveCollector::nvtx_off() const { return impl_->nvtx_off; }

int64_t LiveCollector::step_boundary(int64_t t_ns) {
  if (impl_->nvtx && impl_->nvtx->running()) impl_->nvtx->drain_now();
  return running() ? impl_->cupti->step_boundary(t_ns) : t_ns;
}

int64_t LiveCollector::wait_complete(int64_t t_ns, int64_t timeout_ms) {
  return running() ? impl_->cupti->wait_complete(t_ns, timeout_ms * 1'000'000) : t_ns;
}

void LiveCollector::flush() {
  if (impl_->nvtx && impl_->nvtx->running()) impl_->nvtx->drain_now();
  if (running()) impl_->cupti->flush_now();
}

void LiveCollector::suspend(const std::string& why, int64_t since_ns) {
  if (running()) impl_->cupti->suspend(why, since_ns);
}

std::string LiveCollector::resume() { return running() ? impl_->cupti->resume() : ""; }

bool LiveCollector::suspended() const { return running() && impl_->cupti->suspended(); }

void LiveCollector::release_subscription() {
  if (running()) impl_->cupti->release_subscription();
}

std::string LiveCollector::take_subscription() { return running() ? impl_->cupti->take_subscription() : ""; }

void LiveCollector::stop() {
  if (!impl_) return;
  if (impl_->cupti) impl_->cupti->stop();
  if (impl_->nvtx) impl_->nvtx->stop();
}

LiveCounters LiveCollector::counters() const {
  LiveCounters out;
  if (impl_->nvtx) out.nvtx_ranges = impl_->nvtx->ranges_stored();
  if (!impl_->cupti) return out;
  const cupti::CuptiCounters c = impl_->cupti->counters();
  out.buffers_completed = c.buffers_completed;
  out.records_dropped = c.records_dropped;
  out.buffers_starved = c.buffers_starved;
  out.buffers_invalid = c.buffers_invalid;
  out.buffers_foreign = c.buffers_foreign;
  out.records_decoded = c.records_decoded;
  out.events_stored = c.events_stored;
  out.records_unfinished = c.records_unfinished;
  out.completion_timeouts = c.completion_timeouts;
  out.buffers_in_pool = c.buffers_in_pool;
  out.runtime_cbids = c.runtime_cbids;
  out.driver_cbids = c.driver_cbids;
  out.calls_learnt = c.calls_learnt;
  out.calls_dropped = c.calls_dropped;
  out.flushes = c.flushes;
  out.steps_given_up = c.steps_given_up;
  out.stuck = c.stuck;
  out.records_missing = c.records_missing;
  out.clock_mismatched = c.clock_mismatched;
  out.timestamp_registrations = c.timestamp_registrations;
  out.nested_calls = c.nested_calls;
  out.streams_created = c.streams_created;
  out.resubscribed = c.resubscribed;
  out.api_callbacks_on = c.api_callbacks_on;
  return out;
}

LearntCalls LiveCollector::learnt_calls() const {
  LearntCalls out;
  if (!impl_->cupti) return out;
  for (const auto& c : impl_->cupti->learnt_calls()) out.by_name.emplace_back(c.name, c.count);
  return out;
}

std::string LiveCollector::library_path() const { return impl_->cupti ? impl_->cupti->library_path() : ""; }

// ---- exit-time flush: every running Profiler is stopped at exit() ----

namespace {

std::mutex& registry_mu() {
  static std::mutex* mu = new std::mutex();  // leaked: used during exit
  return *mu;
}
std::set<Profiler*>& registry() {
  static std::set<Profiler*>* r = new std::set<Profiler*>();
  return *r;
}

void stop_all_at_exit() {
  std::vector<Profiler*> live;
  {
    std::lock_guard<std::mutex> lock(registry_mu());
    live.assign(registry().begin(), registry().end());
  }
  for (Profiler* p : live) p->stop();
}

// A fork while another thread held the registry lock must not leave the
// child's exit handler blocked on it.
void reset_registry_in_child() { new (&registry_mu()) std::mutex(); }

void register_profiler(Profiler* p) {
  static const int once = std::atexit(&stop_all_at_exit) + pthread_atfork(nullptr, nullptr, &reset_registry_in_child);
  (void)once;
  std::lock_guard<std::mutex> lock(registry_mu());
  registry().insert(p);
}

void unregister_profiler(Profiler* p) {
  std::lock_guard<std::mutex> lock(registry_mu());
  registry().erase(p);
}

}  // namespace

void nvtx_push_step(int64_t step) { nvtx::push_step_range(step); }
void nvtx_pop_step() { nvtx::pop_step_range(); }

// ---- Profiler ----

Profiler::Profiler(ProfilerOptions options) : options_(std::move(options)) {
  session_ = std::make_unique<Session>(options_.session);
  live_ = std::make_unique<LiveCollector>(*session_, options_.live);
}

Profiler::~Profiler() {
  if (owner_pid_ != 0 && owner_pid_ != getpid()) {
    // Forked child: the session, its sink and the collector's threads are
    // the parent's. Forget them; never lock or join anything.
    (void)live_.release();
    (void)session_.release();
    return;
  }
  stop();
  unregister_profiler(this);
  live_.reset();
  // The session's destructor reports nothing more: stop() finished it.
}

std::string Profiler::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) return off_reason_;
  owner_pid_ = getpid();
  off_reason_ = live_->start();
  running_ = true;
  register_profiler(this);
  return off_reason_;
}

bool Profiler::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ && owner_pid_ == getpid();
}

void Profiler::stop() {
  if (owner_pid_ != 0 && owner_pid_ != getpid()) return;  // forked child
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_) return;
  running_ = false;
  live_->stop();
  deliver_locked(session_->finish(session_now_ns()));
}

void Profiler::begin_step(int64_t step) { begin_step(step, session_now_ns()); }

void Profiler::end_step() { end_step(session_now_ns()); }

void Profiler::begin_step(int64_t step, int64_t t_ns) {
  if (owner_pid_ != getpid()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_) return;
  if (!off_reason_.empty()) session_->count(Diag::gpu_collection_off, 1, off_reason_);
  nvtx::push_step_range(step);  // for Nsight Systems; our collector skips the domain
  session_->begin_step(step, t_ns);
}

void Profiler::end_step(int64_t t_ns) {
  if (owner_pid_ != getpid()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_) return;
  nvtx::pop_step_range();
  session_->end_step(t_ns);
  session_->mark_complete_until(live_->step_boundary(t_ns));
  deliver_locked(session_->collect());
}

void Profiler::deliver_locked(std::vector<StepOutput>&& outs) {
  for (auto& o : outs) reports_.push_back(std::move(o));
  if (reports_.size() > options_.keep_reports) {
    reports_.erase(reports_.begin(), reports_.begin() + static_cast<long>(reports_.size() - options_.keep_reports));
  }
}

std::vector<StepOutput> Profiler::take_reports() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StepOutput> out;
  out.swap(reports_);
  return out;
}

std::string Profiler::gpu_collection_off() const {
  std::lock_guard<std::mutex> lock(mu_);
  return off_reason_;
}

}  // namespace gpuutil
