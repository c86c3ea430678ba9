// CUPTI collector lifecycle: start, step boundaries, blocking waits, stop
// and counters (see cupti_collector.h; subscription and coexistence in
// cupti_subscription.cpp, delivery and completeness in cupti_delivery.cpp).
#include "collectors/cupti/cupti_collector.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "collectors/cupti/collector_callbacks.h"
#include "gpuutil/clock.h"
#include "gpuutil/range_classify.h"

namespace gpuutil::cupti {

namespace {

std::atomic<int> g_sessions{0};  // collectors that started in this process

void after_fork_in_child() { active_collector().store(nullptr); }

void install_atfork_once() {
  static const int once = pthread_atfork(nullptr, nullptr, &after_fork_in_child);
  (void)once;
}

}  // namespace

uint32_t CuptiCollector::compiled_major() { return CUPTI_API_VERSION / 10000; }

CuptiCollector::CuptiCollector(EventSink& session, CuptiCollectorOptions options)
    : session_(session), options_(std::move(options)) {
  sem_init(&wake_, 0, 0);
  install_atfork_once();
}

CuptiCollector::~CuptiCollector() {
  stop();
  if (owner_pid_ == 0 || owner_pid_ == getpid()) sem_destroy(&wake_);
}

std::string CuptiCollector::start(const std::string& suspended_why) {
  if (running_) return "";
  if (active_collector().load() != nullptr) return "CUPTI: another gpuutil collector is already active in this process";
  if (api_.handle == nullptr) {
    const std::string why = api_.load(options_.library_dirs);
    if (!why.empty()) return "CUPTI: " + why;
  }
  uint32_t version = 0;
  CUptiResult r = api_.GetVersion(&version);
  if (r != CUPTI_SUCCESS) return "CUPTI: cuptiGetVersion returned " + api_.describe(r) + " (" + api_.path + ")";
  release_ = cupti_release(version);
  if (release_.major != compiled_major()) {
    return "CUPTI: " + api_.path + " is CUPTI " + describe_cupti_version(version) + ", gpuutil was built against CUPTI " +
           describe_cupti_version(CUPTI_API_VERSION) +
           "; record layouts differ between majors, so records are not decoded. Fix: install the CUPTI " +
           std::to_string(compiled_major()) + " wheel matching torch (nvidia-cuda-cupti), or set GPUUTIL_CUPTI_LIBRARY";
  }
  std::string why = suspended_why.empty() ? subscribe() : "";
  if (!why.empty()) return why;
  CUpti_ActivityThreadIdType id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
  if (api_.GetThreadIdType != nullptr) api_.GetThreadIdType(&id_type);
  const bool os_tids = id_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM;
  if (os_tids) session_.add_standing_diagnostic(Diag::cupti_thread_ids_os, "set by another tool before gpuutil started");
  pool_ = std::make_unique<BufferPool>(options_.buffer_count, options_.buffer_bytes, options_.max_buffer_count);
  if (!pool_->ok()) {
    unsubscribe();
    return "CUPTI: could not allocate the activity buffer pool";
  }
  tracker_ = std::make_unique<LaunchTracker>();
  if (!calls_) {
    calls_ = std::make_unique<CallRing>(size_t(1) << 14);  // kept across restarts (2.2 MB, mapped, touched once)
  } else {
    LearntCall stale;
    while (calls_->pop(stale)) {
    }
  }
  roles_.build(api_, options_.driver_api);
  // Until a rate is measured: about a buffer's worth of kernel records.
  max_records_ = options_.buffer_max_records != 0 ? options_.buffer_max_records
                                                  : std::max<size_t>(options_.buffer_bytes / 216, 32);
  sized_at_ns_ = session_now_ns();
  most_records_per_buffer_ = 0;
  calls_at_sizing_ = records_at_sizing_ = 0;
  call_names_.clear();
  call_name_ids_.clear();
  unnamed_call_ids_.clear();
  flush_interval_ns_ = int64_t(options_.drain_poll_ms) * 1'000'000;
  progress_ns_ = session_now_ns();
  progress_records_ = 0;
  stuck_corr_ = 0;
  records_missing_ = nested_calls_ = streams_created_ = 0;
  dropped_released_ = dropped_.load();
  learnt_by_cbid_[0].clear();
  learnt_by_cbid_[1].clear();
  clock_.reset();
  resubscribe_at_ns_ = session_now_ns() + int64_t(options_.resubscribe_ms) * 1'000'000;
  evicted_floor_ns_ = INT64_MAX;
  given_up_until_ns_ = INT64_MIN;
  int64_t quiet_ns = options_.takeover_quiet_ns;
  if (const char* ms = std::getenv("GPUUTIL_CUPTI_TAKEOVER_MS"); ms && std::atoll(ms) > 0) {
    quiet_ns = std::atoll(ms) * 1'000'000;
  }
  watch_ = std::make_unique<TakeoverWatch>(quiet_ns);
  taken_over_ = false;
  reattach_ = false;
  marked_only_ = false;
  ask_per_thread_ = false;
  last_buffer_event_ns_ = INT64_MIN;
  // Kineto's settings that decide how torch.profiler shares CUPTI.
  std::string kineto;
  if (const char* d = std::getenv("KINETO_USE_DAEMON"); d && *d && std::string(d) != "0") {
    kineto = "KINETO_USE_DAEMON=" + std::string(d) +
             ": Kineto's on-demand traces (dynolog) may take CUPTI from any thread at any time; gpuutil detects it "
             "(cupti_taken_over) and those steps say gpu_collection_off. A Kineto that subscribes to CUPTI when its "
             "trace starts (before kineto#1250's lazy subscription, it does so once at startup) finds gpuutil's "
             "subscription and traces CPU-only: start the on-demand trace before gpuutil.profile(), or suspend "
             "gpuutil around it";
  }
  if (const char* t = std::getenv("TEARDOWN_CUPTI"); t && std::string(t) == "1") {
    kineto += std::string(kineto.empty() ? "" : "; ") +
              "TEARDOWN_CUPTI=1: Kineto calls cuptiFinalize after each torch.profiler trace, from a later CUDA call; "
              "gpuutil notices (cupti_taken_over) and attaches again at the next step boundary";
  }
  if (!kineto.empty()) session_.add_standing_diagnostic(Diag::cupti_kineto_env, kineto);
  decoder_ = std::make_unique<RecordDecoder>(api_, session_, static_cast<int64_t>(getpid()), tracker_.get(), os_tids);
  decoder_->set_clock_map(&clock_);
  owner_pid_ = getpid();
  quit_ = false;
  active_collector().store(this);
  why = suspended_why.empty() ? attach() : "";
  if (!why.empty()) {
    active_collector().store(nullptr);
    while (callbacks_in_flight().load() != 0) sched_yield();
    unsubscribe();
    return why;
  }
  session_index_ = g_sessions.fetch_add(1) + 1;
  // CUPTI 13.0 from the second activity session on: graph records carry
  // stale correlation ids (fixed in 13.1 Update 1).
  tracker_->set_stale_graph_ids(release_.major == 13 && release_.minor == 0 && session_index_ > 1);
  {
    std::lock_guard<std::mutex> lock(flush_mu_);
    wanted_until_ns_ = INT64_MIN;
    forced_requested_ = forced_done_ = 0;
  }
  complete_until_ns_ = INT64_MIN;
  suspended_ = !suspended_why.empty();
  if (suspended_) session_.begin_interval(Diag::gpu_collection_suspended, session_now_ns(), suspended_why);
  drain_ = std::thread([this] { drain_loop(); });
  running_ = true;
  return "";
}

int64_t CuptiCollector::step_boundary(int64_t t_ns) {
  if (!running_ || owner_pid_ != getpid()) return t_ns;
  if (!suspended_ && reattach_.exchange(false)) {
    // cuptiFinalize (TEARDOWN_CUPTI=1) dropped everything: nobody holds
    // CUPTI now, so gpuutil attaches again; the steps in between stay off.
    forget_other_clients(true);
    if (subscribe().empty() && attach().empty()) end_takeover(session_now_ns());
  }
  maybe_resubscribe();  // without the subscription (another client kept it): ask again, now and then
  if (suspended_ || taken_over_.load(std::memory_order_acquire)) {
    // Nothing to wait for while another client owns CUPTI.
    int64_t cur = complete_until_ns_.load();
    while (t_ns > cur && !complete_until_ns_.compare_exchange_weak(cur, t_ns)) {
    }
    return complete_until_ns_.load();
  }
  {
    std::lock_guard<std::mutex> lock(flush_mu_);
    wanted_until_ns_ = std::max(wanted_until_ns_, t_ns);
    ++boundaries_seen_;
  }
  sem_post(&wake_);
  return complete_until_ns_.load();
}

int64_t CuptiCollector::wait_complete(int64_t t_ns, int64_t timeout_ns) {
  if (!running_ || owner_pid_ != getpid()) return t_ns;
  step_boundary(t_ns);
  std::unique_lock<std::mutex> lock(flush_mu_);
  flush_cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), [&] { return complete_until_ns_.load() >= t_ns; });
  return complete_until_ns_.load();
}

void CuptiCollector::flush_now() { wait_complete(session_now_ns(), options_.completion_wait_ns); }

void CuptiCollector::forced_flush_on_drain_thread() {
  std::unique_lock<std::mutex> lock(flush_mu_);
  const uint64_t ticket = forced_done_ + 1;
  forced_requested_ = ticket;
  lock.unlock();
  sem_post(&wake_);
  lock.lock();
  flush_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return forced_done_ >= ticket; });
}

void CuptiCollector::stop() {
  if (!running_) return;
  if (owner_pid_ != getpid()) {
    // Forked child: the drain thread and CUPTI state belong to the parent.
    // Forget them without touching either (no join, no CUPTI calls).
    running_ = false;
    new (&drain_) std::thread();
    (void)pool_.release();
    (void)decoder_.release();
    (void)tracker_.release();
    return;
  }
  // Launched work finishes and is delivered first: a forced flush would hand
  // over what is still running with zero timestamps. While suspended,
  // another client owns CUPTI: leave it alone.
  bool owns_cupti = !suspended_ && !taken_over_.load();
  if (owns_cupti) wait_complete(session_now_ns(), options_.completion_wait_ns);
  watching_ = false;
  owns_cupti = owns_cupti && !taken_over_.load();  // found taken over while waiting
  running_ = false;
  if (owns_cupti) detach();
  quit_.store(true, std::memory_order_release);
  sem_post(&wake_);
  drain_.join();
  // Drain thread gone: force-flush and drain on this thread. The clock
  // stays registered (one registration per process, clock_map.h).
  const int64_t forced_at = session_now_ns();
  if (owns_cupti) do_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  active_collector().store(nullptr);
  while (callbacks_in_flight().load() != 0) sched_yield();
  decoder_->set_forced_delivery(owns_cupti);  // stragglers of the forced flush
  drain_completed();
  decoder_->set_forced_delivery(false);
  if (owns_cupti) {
    // Everything CUPTI had is in: a launch the device finished (a sync)
    // without its record lost it. One still waiting was never finished by
    // the device (a hung kernel, work cut off by the stop): the steps from
    // its start on are incomplete, never idle. (A call waiting only for an
    // API record lost that record.)
    report_missing(tracker_->on_forced_flush_drained(forced_at), "no record came back with the forced flush at stop");
    const LaunchTracker::Waiting w = tracker_->oldest_waiting(/*device_only=*/true);
    if (w.start_ns != INT64_MAX) {
      session_.mark_complete_until(w.start_ns);
      session_.mark_incomplete_until(INT64_MAX, "device work launched at t=" + seconds(w.start_ns) + " (" +
                                                    call_name(w.name) + ") had not finished when the profile stopped");
    }
  }
  if (reattach_.exchange(false)) subscriber_ = nullptr;  // cuptiFinalize removed it
  unsubscribe();
  if (suspended_) session_.end_interval(Diag::gpu_collection_suspended, session_now_ns());
  end_takeover(session_now_ns());
  suspended_ = false;
  marked_only_ = false;
  // CUPTI keeps our callback pointers, which now ignore everything; a later
  // client (torch.profiler) registers its own. A buffer CUPTI still holds
  // must never be unmapped under it.
  if (pool_->outstanding() != 0) {
    if (owns_cupti) {
      session_.count(Diag::cupti_buffer_invalid, pool_->outstanding(), "buffers still held by CUPTI after stop; kept");
    }
    (void)pool_.release();
  } else {
    pool_.reset();
  }
  complete_until_ns_ = INT64_MAX;
}

CuptiCounters CuptiCollector::counters() const {
  CuptiCounters c;
  c.buffers_completed = completed_.load();
  c.records_dropped = dropped_.load();
  c.buffers_starved = starved_.load();
  c.buffers_invalid = invalid_.load();
  c.buffers_foreign = foreign_.load();
  c.buffers_in_pool = pool_ ? pool_->count() : 0;
  c.runtime_cbids = runtime_cbids_.size();
  c.driver_cbids = options_.driver_api ? driver_cbids_.size() : 0;
  c.calls_learnt = calls_learnt_.load();
  c.calls_dropped = calls_dropped_.load();
  c.takeovers = takeovers_.load();
  if (decoder_ && !running_) {  // the drain thread owns the decoder while running
    c.records_decoded = decoder_->stats().records;
    c.events_stored = decoder_->stats().stored;
    c.records_unfinished = decoder_->stats().unfinished;
    c.completion_timeouts = timeouts_;
    c.flushes = flushes_;
    c.steps_given_up = steps_given_up_;
    c.stuck = stuck_count_;
    c.records_missing = records_missing_;
    c.clock_mismatched = decoder_->stats().clock_mismatched;
    c.nested_calls = nested_calls_;
    c.streams_created = streams_created_;
  }
  c.timestamp_registrations = timestamp_registrations();
  c.resubscribed = resubscribed_.load();
  c.api_callbacks_on = callbacks_on_.load();
  return c;
}

std::vector<LearntCallCount> CuptiCollector::learnt_calls() const {
  std::vector<LearntCallCount> out;
  if (running_) return out;  // the drain thread owns the counts while running
  for (int d = 0; d < 2; ++d) {
    const auto domain = d == 0 ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    for (size_t id = 0; id < learnt_by_cbid_[d].size(); ++id) {
      if (learnt_by_cbid_[d][id] == 0) continue;
      const char* name = nullptr;
      std::string n = (d == 0 ? "runtime#" : "driver#") + std::to_string(id);
      if (api_.GetCallbackName != nullptr && api_.GetCallbackName(domain, uint32_t(id), &name) == CUPTI_SUCCESS && name) {
        n = name;
      }
      out.push_back({n, learnt_by_cbid_[d][id]});
    }
  }
  return out;
}

}  // namespace gpuutil::cupti
