// Subscription and coexistence (see cupti_collector.h): the subscription
// and its callbacks, activity kinds and per-id API enables, the one clock
// registration per process, and what another CUPTI client took or changed
// (suspend/resume, takeovers found on the drain thread).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdlib>

#include "collectors/cupti/collector_callbacks.h"
#include "collectors/cupti/cupti_collector.h"
#include "gpuutil/clock.h"

namespace gpuutil::cupti {

namespace {

uint64_t CUPTIAPI session_timestamp() { return static_cast<uint64_t>(session_now_ns()); }

// gpuutil's timestamp callback registrations in this process (at most one).
std::atomic<uint64_t> g_clock_registrations{0};

int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Subscribers that profile the process themselves: gpuutil must not compete.
bool is_nvidia_tool(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* tool : {"nsight", "nsys", "ncu", "cuda-gdb", "sanitizer", "memcheck", "dcgm"}) {
    if (name.find(tool) != std::string::npos) return true;
  }
  return false;
}

// CUPTI 13.2's cuptiSubscribe_v2 parameters (the 13.0 struct, then
// allowMultipleSubscribers; CUpti_SubscriberParams, CUPTI 13.2 docs): its
// structSize tells an older CUPTI to read no further.
struct SubscriberParamsMulti {
  CUpti_SubscriberParams base;
  uint8_t allowMultipleSubscribers;
};

}  // namespace

uint64_t timestamp_registrations() { return g_clock_registrations.load(); }

std::string explain_cupti_error(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_UNKNOWN:
      return "no NVIDIA driver/GPU visible";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "another CUPTI client (Nsight Systems, Nsight Compute, DCGM profiling) is active; stop it or profile "
             "with one tool at a time";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return "insufficient privileges for GPU profiling; allow it (NVreg_RestrictProfilingToAdminUsers=0 or "
             "CAP_SYS_ADMIN)";
    case CUPTI_ERROR_NOT_INITIALIZED:
      return "CUDA/CUPTI could not initialise (driver too old for this CUPTI?)";
    default:
      return "CUPTI refused activity tracing";
  }
}

std::string CuptiCollector::subscribe() {
  if (subscriber_ != nullptr || (api_.Subscribe_v2 == nullptr && api_.Subscribe == nullptr)) return "";
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {0};
  CUptiResult r;
  const char* call = "cuptiSubscribe_v2";
  if (api_.Subscribe_v2 != nullptr) {
    SubscriberParamsMulti p{};
    p.base.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    p.base.subscriberName = "gpuutil";
    p.base.oldSubscriberName = other;
    p.base.oldSubscriberSize = sizeof(other) - 1;
    // CUPTI >= 13.2 can let several subscribers in, each with its own
    // callbacks, when all of them ask: gpuutil asks, so a client that asks
    // too is never turned away by it.
    if (release_.major > 13 || (release_.major == 13 && release_.minor >= 2)) {
      p.allowMultipleSubscribers = 1;
      p.base.structSize = offsetof(SubscriberParamsMulti, allowMultipleSubscribers) + sizeof(uint8_t);
    }
    r = api_.Subscribe_v2(&subscriber_, &CallbackAccess::api, nullptr, &p.base);
  } else {
    call = "cuptiSubscribe";
    r = api_.Subscribe(&subscriber_, &CallbackAccess::api, nullptr);
  }
  if (r == CUPTI_SUCCESS) return "";
  subscriber_ = nullptr;
  const std::string who = other[0] ? other : "";
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && !is_nvidia_tool(who)) {
    // Kineto keeps its subscription for the life of the process once
    // torch.profiler ran (before its lazy subscription); the activity API
    // works without one. Say so, go on, and ask again at step boundaries.
    session_.add_standing_diagnostic(
        Diag::cupti_subscriber_other,
        (who.empty() ? std::string("an unnamed subscriber") : "held by \"" + who + "\"") +
            ": launches are learnt from their API records, and the subscription is asked for again at step "
            "boundaries");
    return "";
  }
  std::string why = "CUPTI: " + std::string(call) + " returned " + api_.describe(r) + ": ";
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    return why + "\"" + who + "\" is profiling this process; " + explain_cupti_error(r);
  }
  return why + explain_cupti_error(r);
}

void CuptiCollector::unsubscribe() {
  callbacks_on_ = false;  // the subscription carries the callbacks
  if (subscriber_ != nullptr && api_.Unsubscribe != nullptr) api_.Unsubscribe(subscriber_);
  subscriber_ = nullptr;
}

void CuptiCollector::maybe_resubscribe() {
  if (subscriber_ != nullptr || !options_.api_callbacks || suspended_ || taken_over_.load()) return;
  const int64_t now = session_now_ns();
  if (now < resubscribe_at_ns_) return;
  resubscribe_at_ns_ = now + int64_t(options_.resubscribe_ms) * 1'000'000;
  if (!subscribe().empty() || subscriber_ == nullptr) return;
  enable_callbacks();
  if (callbacks_on_.load()) resubscribed_.fetch_add(1);
}

void CuptiCollector::release_subscription() {
  if (!running_ || suspended_ || owner_pid_ != getpid()) return;
  unsubscribe();
  resubscribe_at_ns_ = INT64_MAX;  // until take_subscription()
}

std::string CuptiCollector::take_subscription() {
  if (!running_ || owner_pid_ != getpid()) return "";
  resubscribe_at_ns_ = INT64_MIN;
  maybe_resubscribe();
  return callbacks_on_.load() || !options_.api_callbacks
             ? ""
             : "CUPTI's subscription is held by another client: launches are learnt from their API records";
}

std::string CuptiCollector::enable_kinds() {
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                      CUPTI_ACTIVITY_KIND_OVERHEAD};
  auto fail = [this](const std::string& what, CUptiResult r) {
    disable_kinds();
    return "CUPTI: " + what + " returned " + api_.describe(r) + ": " + explain_cupti_error(r);
  };
  for (CUpti_ActivityKind k : kinds) {
    const CUptiResult r = api_.ActivityEnable(k);
    if (r != CUPTI_SUCCESS) return fail("cuptiActivityEnable(kind " + std::to_string(int(k)) + ")", r);
    enabled_.push_back(k);
  }
  // Peer copies arrive as MEMCPY2 records, and kernels launched outside any
  // public API call as INTERNAL_LAUNCH_API records; a CUPTI without a kind
  // loses only those.
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API}) {
    if (api_.ActivityEnable(k) == CUPTI_SUCCESS) enabled_.push_back(k);
  }
  // The API calls the analysis uses (classify_call: every category but
  // "other"), one callback id at a time.
  if (!cbids_listed_) {
    cbids_listed_ = true;
    auto list = [this](CUpti_CallbackDomain domain, uint32_t count, std::vector<uint32_t>& out) {
      for (uint32_t id = 1; id < count; ++id) {
        const char* name = nullptr;
        if (api_.GetCallbackName(domain, id, &name) == CUPTI_SUCCESS && name && api_role(name).traced) {
          out.push_back(id);
        }
      }
    };
    if (api_.ActivityEnableRuntimeApi) list(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, runtime_cbids_);
    if (api_.ActivityEnableDriverApi) list(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, driver_cbids_);
  }
  auto enable_ids = [&](CUptiResult (*fn)(CUpti_CallbackId, uint8_t), const std::vector<uint32_t>& ids,
                        std::vector<uint32_t>& enabled, CUpti_ActivityKind whole) -> std::string {
    if (fn == nullptr || ids.empty()) {
      const CUptiResult r = api_.ActivityEnable(whole);
      if (r != CUPTI_SUCCESS) return fail("cuptiActivityEnable(kind " + std::to_string(int(whole)) + ")", r);
      enabled_.push_back(whole);
      return "";
    }
    for (uint32_t id : ids) {
      const CUptiResult r = fn(id, 1);
      if (r != CUPTI_SUCCESS) return fail("cuptiActivityEnable{Runtime,Driver}Api(" + std::to_string(id) + ")", r);
      enabled.push_back(id);
    }
    return "";
  };
  std::string why =
      enable_ids(api_.ActivityEnableRuntimeApi, runtime_cbids_, runtime_enabled_, CUPTI_ACTIVITY_KIND_RUNTIME);
  if (why.empty() && options_.driver_api) {
    why = enable_ids(api_.ActivityEnableDriverApi, driver_cbids_, driver_enabled_, CUPTI_ACTIVITY_KIND_DRIVER);
  }
  return why;
}

void CuptiCollector::disable_kinds() {
  for (CUpti_ActivityKind k : enabled_) api_.ActivityDisable(k);
  enabled_.clear();
  for (uint32_t id : runtime_enabled_) api_.ActivityEnableRuntimeApi(id, 0);
  for (uint32_t id : driver_enabled_) api_.ActivityEnableDriverApi(id, 0);
  runtime_enabled_.clear();
  driver_enabled_.clear();
}

// The session clock becomes CUPTI's timestamp callback only while CUPTI
// still stamps with its own default clock (CLOCK_REALTIME): the first
// attach in the process, before any kind is enabled, or the first after a
// cuptiFinalize (which starts CUPTI afresh). Never a re-registration over
// another clock, never reset to CUPTI's: each registration after the first
// leaves kernel records on the wrong clock at the head of later activity
// sessions (cupti_activity.h; pytorch/pytorch#192021). A clock another
// client registered (Kineto's TSC) stays, and the ClockMap maps it.
void CuptiCollector::register_clock_once() {
  uint64_t probe = 0;
  if (api_.GetTimestamp != nullptr && api_.GetTimestamp(&probe) == CUPTI_SUCCESS && probe != 0) {
    const int64_t t = static_cast<int64_t>(probe);
    if (std::llabs(t - session_now_ns()) <= ClockMap::kIdentityNs) return;  // the session clock already
    if (std::llabs(t - realtime_ns()) > 100'000'000) return;  // another client's clock: mapped, not replaced
  }
  if (api_.ActivityRegisterTimestampCallback(&session_timestamp) == CUPTI_SUCCESS) g_clock_registrations.fetch_add(1);
}

std::string CuptiCollector::attach() {
  if (ask_per_thread_ && api_.ActivitySetAttribute != nullptr) {
    // Another client ran since gpuutil last attached (Kineto sets
    // PER_THREAD_ACTIVITY_BUFFER=0 after each trace): per-thread buffers
    // again, asked for before the callbacks are registered (cupti_activity.h).
    uint8_t per_thread = 1;
    size_t size = sizeof(per_thread);
    api_.ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
  }
  ask_per_thread_ = false;
  if (options_.zeroed_buffers && api_.ActivitySetAttribute != nullptr) {
    // gpuutil hands out zeroed buffers, so CUPTI does not zero each one on
    // the thread that needs it (cupti_activity.h, ZEROED_OUT_ACTIVITY_BUFFER).
    uint8_t zeroed = 1;
    size_t size = sizeof(zeroed);
    api_.ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &zeroed);
  }
  register_clock_once();
  CUptiResult r = api_.ActivityRegisterCallbacks(&CallbackAccess::requested, &CallbackAccess::completed);
  if (r != CUPTI_SUCCESS) {
    return "CUPTI: cuptiActivityRegisterCallbacks returned " + api_.describe(r) + ": " + explain_cupti_error(r);
  }
  const std::string why = enable_kinds();
  if (!why.empty()) return why;
  enable_callbacks();
  clock_reset_ = true;  // the drain thread learns CUPTI's clock afresh
  std::lock_guard<std::mutex> lock(watch_mu_);
  watch_->attached(session_now_ns(), clock_skew_ns());
  watching_ = true;
  return "";
}

int64_t CuptiCollector::clock_skew_ns() const {
  uint64_t t = 0;
  if (api_.GetTimestamp == nullptr || api_.GetTimestamp(&t) != CUPTI_SUCCESS || t == 0) return INT64_MIN;
  return static_cast<int64_t>(t) - session_now_ns();
}

void CuptiCollector::enable_callbacks() {
  callbacks_on_ = false;
  if (!options_.api_callbacks || subscriber_ == nullptr || api_.EnableCallback == nullptr || !calls_) return;
  reset_call_nesting();
  bool all = true;
  for (CUpti_CallbackDomain domain : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    for (uint32_t id : roles_.ids(domain)) {
      all = api_.EnableCallback(1, subscriber_, domain, id) == CUPTI_SUCCESS && all;
    }
  }
  // Streams as they come and go (api_callbacks.h): a failure only costs
  // learning their ids from records instead.
  for (uint32_t id : {uint32_t(CUPTI_CBID_RESOURCE_STREAM_CREATED), uint32_t(CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING)}) {
    api_.EnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, id);
  }
  callbacks_on_ = all && !roles_.ids(CUPTI_CB_DOMAIN_RUNTIME_API).empty();
}

// Disables what attach() enabled. The clock stays registered (one
// registration per process).
void CuptiCollector::detach() { disable_kinds(); }

void CuptiCollector::forget_other_clients(bool finalized) {
  // The other client got gpuutil's outstanding buffers (or cuptiFinalize
  // forgot them), and disabled or reset the kinds and ids gpuutil enabled:
  // none of it is gpuutil's to wait for or to disable any more.
  pool_->forget_held();
  enabled_.clear();
  runtime_enabled_.clear();
  driver_enabled_.clear();
  if (finalized) subscriber_ = nullptr;  // cuptiFinalize removed the subscription
  forget_calls_before_ns_ = session_now_ns();  // the drain thread forgets them
  marked_only_ = false;
  ask_per_thread_ = true;
}

void CuptiCollector::end_takeover(int64_t now_ns) {
  if (!taken_over_.exchange(false)) return;
  session_.end_interval(Diag::cupti_taken_over, now_ns);
  session_.end_interval(Diag::gpu_collection_off, now_ns);
}

void CuptiCollector::watch_takeover() {
  if (const int64_t t = forget_calls_before_ns_.exchange(INT64_MIN); t != INT64_MIN) {
    // Taken back from another client: calls made before went to it.
    tracker_->on_device_sync(t, 0);
    tracker_->on_forced_flush_drained(t);  // forgotten, not missing
    tracker_->take_owed(nullptr);
  }
  int64_t owed_since = INT64_MAX;
  const uint64_t owed = tracker_->take_owed(&owed_since);
  if (!watching_.load(std::memory_order_acquire)) return;  // suspended or stopping: CUPTI is not expected to be ours
  TakeoverObservation o;
  o.owed_records = owed;
  o.owed_since_ns = owed_since;
  o.now_ns = session_now_ns();
  o.last_buffer_event_ns = last_buffer_event_ns_.load(std::memory_order_relaxed);
  o.buffers_outstanding = pool_->outstanding();
  o.calls_since_buffer_event = o.last_buffer_event_ns == calls_counted_after_ns_ ? calls_after_buffer_event_ : 0;
  // A held buffer may take as many records as the most any buffer was
  // handed out with (its maxNumRecords, or as many API records as fit).
  o.calls_per_buffer = std::max<size_t>(most_records_per_buffer_.load(std::memory_order_relaxed), 1);
  o.callbacks_missing =
      last_flush_result_ == CUPTI_ERROR_INVALID_OPERATION || last_flush_result_ == CUPTI_ERROR_NOT_INITIALIZED;
  o.clock_skew_ns = clock_skew_ns();
  TakeoverWatch::Change change;
  std::string why;
  int64_t since;
  TakeoverCause cause;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    // Looked at only while launches are overdue (the scan stops at the first running launch).
    if (owed > 0 || watch_->owed_pending()) o.device_work_waiting = tracker_->running_work_waiting();
    change = watch_->observe(o);
    why = watch_->why();
    since = watch_->since_ns();
    cause = watch_->cause();
  }
  if (change == TakeoverWatch::Change::kTaken) {
    takeovers_.fetch_add(1);
    session_.begin_interval(Diag::cupti_taken_over, since, why);
    session_.begin_interval(Diag::gpu_collection_off, since,
                            "another CUPTI client took CUPTI from gpuutil (cupti_taken_over): GPU activity from here "
                            "on is not collected, and is not idle time");
    taken_over_.store(true, std::memory_order_release);
    tracker_->clear();  // what waits went to the other client (or died with cuptiFinalize)
    if (cause == TakeoverCause::kCallbacksGone) reattach_.store(true);  // nobody holds CUPTI now
    // Nothing more will come: data is as complete as it will get.
    int64_t until;
    {
      std::lock_guard<std::mutex> lock(flush_mu_);
      until = std::max(wanted_until_ns_, o.now_ns);
    }
    int64_t cur = complete_until_ns_.load();
    while (until > cur && !complete_until_ns_.compare_exchange_weak(cur, until)) {
    }
  } else if (change == TakeoverWatch::Change::kBack) {
    end_takeover(o.now_ns);
  }
}

void CuptiCollector::suspend(const std::string& why, int64_t since_ns) {
  if (!running_ || suspended_ || owner_pid_ != getpid()) return;
  watching_ = false;
  if (since_ns != INT64_MIN || taken_over_.load(std::memory_order_acquire)) {
    // The other client runs already and set its kinds, per-id enables,
    // clock and callbacks: a disable (a per-id call after its kind wins), a
    // forced flush (unfinished records with zero times) or a clock change
    // would break its trace. Touch nothing; only mark the interval.
    const int64_t now = session_now_ns();
    int64_t cur = complete_until_ns_.load();
    while (now > cur && !complete_until_ns_.compare_exchange_weak(cur, now)) {
    }
    session_.begin_interval(Diag::gpu_collection_suspended, since_ns == INT64_MIN ? now : since_ns, why);
    marked_only_ = true;
    suspended_ = true;
    return;
  }
  const int64_t now = session_now_ns();
  wait_complete(now, options_.completion_wait_ns);
  detach();
  forced_flush_on_drain_thread();  // every buffer back before the other client registers its own
  // The subscription goes too: a client that subscribes when it starts
  // (Kineto) would otherwise run CPU-only.
  unsubscribe();
  session_.begin_interval(Diag::gpu_collection_suspended, since_ns == INT64_MIN ? session_now_ns() : since_ns, why);
  suspended_ = true;
}

std::string CuptiCollector::resume() {
  if (!running_ || !suspended_ || owner_pid_ != getpid()) return "";
  // After a marked-only suspension or a takeover, the other client has
  // gpuutil's buffers and reset its kinds: start from what is left.
  const bool finalized = reattach_.exchange(false);
  if (marked_only_ || taken_over_.load() || finalized) forget_other_clients(finalized);
  ask_per_thread_ = true;  // the other client may have reset PER_THREAD_ACTIVITY_BUFFER
  std::string why = subscribe();
  if (why.empty()) why = attach();
  if (!why.empty()) {
    unsubscribe();
    return why;
  }
  const int64_t now = session_now_ns();
  session_.end_interval(Diag::gpu_collection_suspended, now);
  end_takeover(now);
  {
    // Records from now on arrive through gpuutil's callbacks again.
    std::lock_guard<std::mutex> lock(flush_mu_);
    wanted_until_ns_ = std::max(wanted_until_ns_, now);
  }
  resubscribe_at_ns_ = now + int64_t(options_.resubscribe_ms) * 1'000'000;
  suspended_ = false;
  return "";
}

}  // namespace gpuutil::cupti
