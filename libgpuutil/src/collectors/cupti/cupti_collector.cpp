// CUPTI collector lifecycle, callbacks, drain thread and completeness (see
// cupti_collector.h).
#include "collectors/cupti/cupti_collector.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "gpuutil/clock.h"
#include "gpuutil/range_classify.h"

namespace gpuutil::cupti {

namespace {

// The active collector. CUPTI's callbacks carry no user pointer, so one
// process-wide slot; g_in_flight lets stop() wait out running callbacks.
std::atomic<CuptiCollector*> g_active{nullptr};
std::atomic<int> g_in_flight{0};
std::atomic<int> g_sessions{0};  // collectors that started in this process

void after_fork_in_child() { g_active.store(nullptr); }

void install_atfork_once() {
  static const int once = pthread_atfork(nullptr, nullptr, &after_fork_in_child);
  (void)once;
}

uint64_t CUPTIAPI session_timestamp() { return static_cast<uint64_t>(session_now_ns()); }

// CUPTI's own clock on Linux (cupti_activity.h): put back when gpuutil lets
// go, so another client's records are not on gpuutil's clock.
uint64_t CUPTIAPI cupti_default_timestamp() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Why a CUPTI error means "no GPU collection", with the fix, in one line.
std::string explain(CUptiResult r) {
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

// Subscribers that profile the process themselves: gpuutil must not compete.
bool is_nvidia_tool(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* tool : {"nsight", "nsys", "ncu", "cuda-gdb", "sanitizer", "memcheck", "dcgm"}) {
    if (name.find(tool) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

// Static entry points CUPTI calls; they reach the collector's private state.
struct CallbackAccess {
  static void CUPTIAPI api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    g_in_flight.fetch_add(1);
    CuptiCollector* c = g_active.load();
    if (c) {
      const int64_t now = session_now_ns();
      uint8_t* b = c->pool_->acquire(now);
      if (b) {
        *buffer = b;
        *size = c->pool_->buffer_bytes();
        // Rotate by record count, whatever a default flush does with a
        // partly filled buffer (cupti_activity.h: "filled with at most that
        // many records before it is returned").
        *max_records = c->max_records_.load(std::memory_order_relaxed);
        c->last_buffer_event_ns_.store(now, std::memory_order_relaxed);
      } else {
        c->starved_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    g_in_flight.fetch_sub(1);
  }

  static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
    g_in_flight.fetch_add(1);
    CuptiCollector* c = g_active.load();
    if (c) {
      if (buffer != nullptr && !c->pool_->owns(buffer)) {
        // Another client's buffer (its registration was replaced by ours):
        // never read, freed or kept.
        c->foreign_.fetch_add(1, std::memory_order_relaxed);
      } else if (buffer == nullptr || valid > size || size != c->pool_->buffer_bytes() ||
                 !c->pool_->complete(buffer, valid)) {
        c->invalid_.fetch_add(1, std::memory_order_relaxed);
      } else {
        c->completed_.fetch_add(1, std::memory_order_relaxed);
        c->last_buffer_event_ns_.store(session_now_ns(), std::memory_order_relaxed);
      }
      size_t dropped = 0;
      if (c->api_.ActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
        c->dropped_.fetch_add(dropped, std::memory_order_relaxed);
      }
      sem_post(&c->wake_);
    }
    g_in_flight.fetch_sub(1);
  }
};

// The callback API on gpuutil's subscription (api_callbacks.h): the call's
// start at enter, the call itself at exit.
void CUPTIAPI CallbackAccess::api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (d == nullptr) return;
  if (d->callbackSite == CUPTI_API_ENTER) {
    if (d->correlationData != nullptr) *d->correlationData = static_cast<uint64_t>(session_now_ns());
    return;
  }
  g_in_flight.fetch_add(1);
  CuptiCollector* c = g_active.load();
  if (c != nullptr && c->calls_ && c->callbacks_on_.load(std::memory_order_relaxed)) {
    LearntCall call;
    if (learn_call(c->roles_, domain, cbid, *d, session_now_ns(), call)) {
      if (c->calls_->push(call)) {
        c->calls_learnt_.fetch_add(1, std::memory_order_relaxed);
      } else {
        c->calls_dropped_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  g_in_flight.fetch_sub(1);
}

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

std::string CuptiCollector::subscribe() {
  if (subscriber_ != nullptr || (api_.Subscribe_v2 == nullptr && api_.Subscribe == nullptr)) return "";
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {0};
  CUptiResult r;
  const char* call = "cuptiSubscribe_v2";
  if (api_.Subscribe_v2 != nullptr) {
    CUpti_SubscriberParams p{};
    p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    p.subscriberName = "gpuutil";
    p.oldSubscriberName = other;
    p.oldSubscriberSize = sizeof(other) - 1;
    r = api_.Subscribe_v2(&subscriber_, &CallbackAccess::api, nullptr, &p);
  } else {
    call = "cuptiSubscribe";
    r = api_.Subscribe(&subscriber_, &CallbackAccess::api, nullptr);
  }
  if (r == CUPTI_SUCCESS) return "";
  subscriber_ = nullptr;
  const std::string who = other[0] ? other : "";
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && !is_nvidia_tool(who)) {
    // Kineto keeps its subscription after torch.profiler first ran; the
    // activity API works without one. Say so and go on.
    session_.add_standing_diagnostic(Diag::cupti_subscriber_other,
                                     who.empty() ? "an unnamed subscriber" : "held by \"" + who + "\"");
    return "";
  }
  std::string why = "CUPTI: " + std::string(call) + " returned " + api_.describe(r) + ": ";
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) return why + "\"" + who + "\" is profiling this process; " + explain(r);
  return why + explain(r);
}

void CuptiCollector::unsubscribe() {
  callbacks_on_ = false;  // the subscription carries the callbacks
  if (subscriber_ != nullptr && api_.Unsubscribe != nullptr) api_.Unsubscribe(subscriber_);
  subscriber_ = nullptr;
}

std::string CuptiCollector::enable_kinds() {
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                      CUPTI_ACTIVITY_KIND_OVERHEAD};
  auto fail = [this](const std::string& what, CUptiResult r) {
    disable_kinds();
    return "CUPTI: " + what + " returned " + api_.describe(r) + ": " + explain(r);
  };
  for (CUpti_ActivityKind k : kinds) {
    const CUptiResult r = api_.ActivityEnable(k);
    if (r != CUPTI_SUCCESS) return fail("cuptiActivityEnable(kind " + std::to_string(int(k)) + ")", r);
    enabled_.push_back(k);
  }
  // Peer copies arrive as MEMCPY2 records; a CUPTI without the kind loses
  // only them.
  if (api_.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2) == CUPTI_SUCCESS) enabled_.push_back(CUPTI_ACTIVITY_KIND_MEMCPY2);
  // The API calls the analysis uses, one callback id at a time.
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
  CUptiResult r = api_.ActivityRegisterTimestampCallback(&session_timestamp);
  if (r != CUPTI_SUCCESS) {
    return "CUPTI: cuptiActivityRegisterTimestampCallback returned " + api_.describe(r) + ": " +
           (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED ? explain(r)
                                                                         : "cannot put CUPTI on the session clock");
  }
  r = api_.ActivityRegisterCallbacks(&CallbackAccess::requested, &CallbackAccess::completed);
  if (r != CUPTI_SUCCESS) {
    api_.ActivityRegisterTimestampCallback(&cupti_default_timestamp);
    return "CUPTI: cuptiActivityRegisterCallbacks returned " + api_.describe(r) + ": " + explain(r);
  }
  const std::string why = enable_kinds();
  if (!why.empty()) {
    api_.ActivityRegisterTimestampCallback(&cupti_default_timestamp);
    return why;
  }
  enable_callbacks();
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
    tracker_->on_flush_drained(t);
    tracker_->take_presumed(nullptr);  // forgotten, not missing
  }
  int64_t presumed_since = INT64_MAX;
  const uint64_t presumed = tracker_->take_presumed(&presumed_since);
  if (!watching_.load(std::memory_order_acquire)) return;  // suspended or stopping: CUPTI is not expected to be ours
  TakeoverObservation o;
  o.presumed_missing = presumed;
  o.presumed_since_ns = presumed_since;
  o.now_ns = session_now_ns();
  o.last_buffer_event_ns = last_buffer_event_ns_.load(std::memory_order_relaxed);
  o.buffers_outstanding = pool_->outstanding();
  o.calls_learnt = calls_learnt_.load(std::memory_order_relaxed);
  o.callbacks_missing =
      last_flush_result_ == CUPTI_ERROR_INVALID_OPERATION || last_flush_result_ == CUPTI_ERROR_NOT_INITIALIZED;
  o.clock_skew_ns = clock_skew_ns();
  TakeoverWatch::Change change;
  std::string why;
  int64_t since;
  TakeoverCause cause;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    // Looked at only while launches are presumed done (the scan stops at the first launch).
    if (presumed > 0 || watch_->presumption_pending()) o.device_work_waiting = tracker_->device_work_waiting();
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

void CuptiCollector::enable_callbacks() {
  callbacks_on_ = false;
  if (!options_.api_callbacks || subscriber_ == nullptr || api_.EnableCallback == nullptr || !calls_) return;
  bool all = true;
  for (CUpti_CallbackDomain domain : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    for (uint32_t id : roles_.ids(domain)) {
      all = api_.EnableCallback(1, subscriber_, domain, id) == CUPTI_SUCCESS && all;
    }
  }
  callbacks_on_ = all && !roles_.ids(CUPTI_CB_DOMAIN_RUNTIME_API).empty();
}

// Disables what attach() enabled. CUPTI's own clock is put back later, by
// restore_clock(), after the forced flush: records still inside CUPTI are
// stamped when they are flushed.
void CuptiCollector::detach() { disable_kinds(); }

void CuptiCollector::restore_clock() { api_.ActivityRegisterTimestampCallback(&cupti_default_timestamp); }

std::string CuptiCollector::start(const std::string& suspended_why) {
  if (running_) return "";
  if (g_active.load() != nullptr) return "CUPTI: another gpuutil collector is already active in this process";
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
    calls_ = std::make_unique<CallRing>(size_t(1) << 14);  // kept across restarts (1.7 MB, mapped, touched once)
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
  calls_at_sizing_ = records_at_sizing_ = 0;
  call_names_.clear();
  call_name_ids_.clear();
  unnamed_call_ids_.clear();
  flush_interval_ns_ = int64_t(options_.drain_poll_ms) * 1'000'000;
  progress_ns_ = session_now_ns();
  progress_records_ = 0;
  stuck_corr_ = 0;
  stream_tried_corr_ = 0;
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
             "(cupti_taken_over) and those steps say gpu_collection_off";
  }
  if (const char* t = std::getenv("TEARDOWN_CUPTI"); t && std::string(t) == "1") {
    kineto += std::string(kineto.empty() ? "" : "; ") +
              "TEARDOWN_CUPTI=1: Kineto calls cuptiFinalize after each torch.profiler trace, from a later CUDA call; "
              "gpuutil notices (cupti_taken_over) and attaches again at the next step boundary";
  }
  if (!kineto.empty()) session_.add_standing_diagnostic(Diag::cupti_kineto_env, kineto);
  decoder_ = std::make_unique<RecordDecoder>(api_, session_, static_cast<int64_t>(getpid()), tracker_.get(), os_tids);
  owner_pid_ = getpid();
  quit_ = false;
  g_active.store(this);
  why = suspended_why.empty() ? attach() : "";
  if (!why.empty()) {
    g_active.store(nullptr);
    while (g_in_flight.load() != 0) sched_yield();
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

void CuptiCollector::drain_completed() {
  tracker_->begin_drain(session_now_ns());  // stream progress is stamped with it
  drain_calls();  // calls first: a device record may come before its call, not the other way round
  uint8_t* buffer;
  size_t valid;
  while (pool_->take_completed(buffer, valid)) {
    if (valid > 0) decoder_->decode_buffer(buffer, valid);
    pool_->release(buffer);
  }
  // CUPTI holds buffers with unfinished records while the GPU runs behind:
  // keep a quarter of the pool free, up to max_buffer_count.
  if (pool_->free_count() * 4 < pool_->count()) pool_->grow(std::max<size_t>(pool_->count() / 2, 8));
  publish_counters();
}

void CuptiCollector::publish_counters() {
  auto publish = [this](std::atomic<uint64_t>& src, uint64_t& seen, Diag d) {
    const uint64_t now = src.load(std::memory_order_relaxed);
    if (now > seen) session_.count(d, now - seen);
    seen = now;
  };
  publish(dropped_, dropped_published_, Diag::cupti_records_dropped);
  publish(starved_, starved_published_, Diag::cupti_buffer_starved);
  publish(invalid_, invalid_published_, Diag::cupti_buffer_invalid);
  publish(foreign_, foreign_published_, Diag::cupti_foreign_buffers);
  if (const uint64_t dropped = calls_dropped_.load(std::memory_order_relaxed); dropped > calls_dropped_published_) {
    session_.count(Diag::cupti_records_dropped, dropped - calls_dropped_published_,
                   "API callbacks: the call ring was full; those launches are not waited for");
    calls_dropped_published_ = dropped;
  }
  if (!graph_noted_ && decoder_->stats().graph_records > 0 && release_.major == 13 && release_.minor == 0) {
    graph_noted_ = true;
    session_.add_standing_diagnostic(
        Diag::cupti_graph_correlation,
        session_index_ > 1 ? "CUPTI 13.0 and profile #" + std::to_string(session_index_) +
                                 " in this process: graph kernels carry wrong correlation ids, their launches are "
                                 "misattributed"
                           : "CUPTI 13.0: right in this first profile of the process, wrong in any later one");
  }
}

void CuptiCollector::do_flush(uint32_t flag) {
  last_flush_result_ = api_.ActivityFlushAll(flag);  // completion callbacks enqueue; we drain below
  // Drops in the global queue (or while no buffer completes) surface here.
  size_t dropped = 0;
  if (api_.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    dropped_.fetch_add(dropped, std::memory_order_relaxed);
  }
  drain_completed();
}

// After a default flush that began at flush_start_ns: data is complete up
// to the earliest of that time and the oldest call still waiting for its
// records (and, when calls are not learnt at API exit, the oldest buffer
// CUPTI still holds). Nothing is given up for lack of time here; the bounds
// are steps and memory (hold_steps_within_bounds).
void CuptiCollector::update_complete_until(int64_t flush_start_ns) {
  int64_t until = flush_start_ns;
  if (!callbacks_on_.load(std::memory_order_relaxed)) {
    // API records teach the tracker: a held buffer may hide launches.
    until = std::min(until, pool_->oldest_held_since_ns());
  }
  tracker_->on_flush_drained(flush_start_ns);
  until = std::min(until, tracker_->oldest_waiting_ns());
  int64_t evicted_latest = INT64_MIN;
  if (const uint64_t evicted = tracker_->take_evicted(&evicted_latest); evicted > 0) {
    timeouts_ += evicted;
    session_.count(Diag::cupti_completion_timeout, evicted,
                   std::to_string(evicted) + " launches no longer waited for: over " +
                       std::to_string(tracker_->waiting()) + " waiting (memory bound)");
    evicted_floor_ns_ = std::min(evicted_floor_ns_, evicted_latest);
    session_.mark_incomplete_until(evicted_latest, "launches no longer waited for (memory bound: the launch table is full)");
  }
  // Evicted launches may still deliver records: nothing after them is
  // complete until every launch since has its records.
  if (tracker_->waiting() == 0) evicted_floor_ns_ = INT64_MAX;
  until = std::min(until, evicted_floor_ns_);
  int64_t cur = complete_until_ns_.load();
  const int64_t before = cur;
  while (until > cur && !complete_until_ns_.compare_exchange_weak(cur, until)) {
  }
  // Adaptive flushing: at drain_poll_ms once data caught up with what was
  // asked for, backing off (doubling) while the GPU trails.
  const int64_t poll = int64_t(options_.drain_poll_ms) * 1'000'000;
  int64_t wanted;
  {
    std::lock_guard<std::mutex> lock(flush_mu_);
    wanted = wanted_until_ns_;
  }
  (void)before;
  if (complete_until_ns_.load() >= wanted) {
    flush_interval_ns_ = poll;
  } else {
    flush_interval_ns_ = std::min<int64_t>(std::max(flush_interval_ns_, poll) * 2,
                                           int64_t(options_.max_flush_interval_ms) * 1'000'000);
  }
}

void CuptiCollector::drain_calls() {
  decoder_->learn_calls_from_records(!callbacks_on_.load(std::memory_order_relaxed));
  if (!calls_) return;
  LearntCall c;
  while (calls_->pop(c)) {
    if (c.flags & kCallCaptureBegin) tracker_->on_capture_begin(c.thread, c.start_ns);
    if (c.flags & kCallCaptureEnd) tracker_->on_capture_end(c.thread, c.end_ns);
    if (c.flags & kCallSync) tracker_->on_device_sync(c.end_ns, c.context);
    if (c.flags & kCallHostRecord) tracker_->on_host_call(c.correlation_id, c.start_ns, c.thread);
    if (c.flags & kCallEnqueue) {
      // The kernel's name when CUPTI gave one (symbolName), else what the
      // call is (a copy, a graph, a launch that named no kernel).
      uint32_t name = 0;
      const uint32_t call_key = (uint32_t(c.domain) << 17) | ((c.flags & kCallGraph) ? 1u << 16 : 0u) | c.cbid;
      if (c.name[0] == '\0') {
        if (auto hit = unnamed_call_ids_.find(call_key); hit != unnamed_call_ids_.end()) name = hit->second;
      }
      if (name == 0) {
        const std::string label = c.name[0] != '\0' ? std::string(c.name) : unnamed_call(c);
        auto [it, added] = call_name_ids_.emplace(label, uint32_t(call_names_.size() + 1));
        if (added) call_names_.push_back(label);
        name = it->second;
        if (c.name[0] == '\0') unnamed_call_ids_.emplace(call_key, name);
      }
      tracker_->on_enqueue(c.correlation_id, c.start_ns, c.thread, (c.flags & kCallGraph) != 0, c.context,
                           kUnknownStream, name, StreamRef{c.stream_kind, c.stream_handle, c.context_handle},
                           (c.flags & kCallApiRecord) != 0);
    }
  }
}

std::string CuptiCollector::call_name(uint32_t id) const {
  // 0: learnt from its API record (no callback API), which names no kernel.
  return id >= 1 && id <= call_names_.size() ? call_names_[id - 1]
                                             : "a launch whose kernel name CUPTI did not give (learnt from its API record)";
}

std::string CuptiCollector::unnamed_call(const LearntCall& c) const {
  const char* raw = nullptr;
  std::string api = "an API call";
  if (api_.GetCallbackName != nullptr &&
      api_.GetCallbackName(static_cast<CUpti_CallbackDomain>(c.domain), c.cbid, &raw) == CUPTI_SUCCESS && raw) {
    api = std::string(strip_api_suffixes(raw));
  }
  if (c.flags & kCallGraph) return "a CUDA graph launched by " + api;
  if (api.find("Memcpy") != std::string::npos) return "a copy (" + api + ")";
  if (api.find("Memset") != std::string::npos) return "a memset (" + api + ")";
  return "a kernel whose name CUPTI did not give, launched by " + api;
}

namespace {
std::string seconds(int64_t ns) {
  char b[40];
  std::snprintf(b, sizeof(b), "%.3f s", double(ns) / 1e9);
  return b;
}
}  // namespace

// The oldest waiting launch, with no device record arriving at all for
// stuck_after_ns: named once (gpu_stuck, a diagnostic and a finding over
// the steps it spans) until it completes.
void CuptiCollector::watch_stuck(int64_t now) {
  const uint64_t records = tracker_->device_records();
  if (records != progress_records_) {
    progress_records_ = records;
    progress_ns_ = now;
  }
  LaunchTracker::Waiting w = tracker_->oldest_waiting(/*device_only=*/true);
  if (stuck_corr_ != 0 && w.correlation_id != stuck_corr_) {
    session_.end_interval(Diag::gpu_stuck, now);
    stuck_corr_ = 0;
  }
  if (w.start_ns == INT64_MAX || stuck_corr_ != 0) return;
  if (now - w.start_ns < options_.stuck_after_ns) return;  // not waiting long enough to be stuck
  // Its stream, resolved once, lazily: only a launch waiting this long
  // costs a vendor call (on this thread, never at API exit).
  if (w.stream == kUnknownStream && w.correlation_id != stream_tried_corr_) {
    stream_tried_corr_ = w.correlation_id;
    uint32_t id = kUnknownStream;
    if (w.ref.kind == kStreamPerThread) {
      id = tracker_->per_thread_stream(w.thread, w.context);
    } else if (!resolve_stream(api_, w.ref.kind, w.ref.handle, w.ref.context, &id)) {
      id = kUnknownStream;
    }
    if (id != kUnknownStream) {
      tracker_->set_stream(w.correlation_id, id);
      w.stream = id;
    }
  }
  // Progress on its own stream when that stream ever delivered a record
  // (a hung stream beside busy ones is still named), else on any stream.
  int64_t progress = progress_ns_;
  if (w.stream != kUnknownStream) {
    if (const int64_t p = tracker_->stream_progress_ns(w.context, w.stream); p != INT64_MIN) progress = p;
  }
  const int64_t quiet_since = std::max(progress, w.start_ns);
  if (now - quiet_since < options_.stuck_after_ns) return;
  stuck_corr_ = w.correlation_id;
  ++stuck_count_;
  const std::string stream = w.stream == kUnknownStream ? "an unknown stream" : "stream " + std::to_string(w.stream);
  const std::string why = "GPU stuck in " + call_name(w.name) + " on " + stream + " since t=" + seconds(w.start_ns) +
                          " (session clock, launch correlation id " + std::to_string(w.correlation_id) +
                          "): no device record for " + seconds(now - quiet_since);
  session_.count(Diag::gpu_stuck, 1, why);
  session_.begin_interval(Diag::gpu_stuck, w.start_ns, why);
}

// The bounds on waiting: steps and memory. Past them the oldest held step
// boundaries are reported incomplete (never as idle); the tracker keeps
// waiting, so records that come while a later step is held still count.
void CuptiCollector::hold_steps_within_bounds(int64_t now) {
  const bool memory = tracker_->waiting() * 4 > size_t(3) << 20 ||  // the table's bound is 1M
                      pool_->outstanding() * 4 >= pool_->max_count() * 3;
  const size_t keep = memory ? std::min<size_t>(options_.max_held_steps, 1) : options_.max_held_steps;
  const int64_t give_up = session_.held_step_end_ns(keep);
  if (give_up != INT64_MIN && give_up > complete_until_ns_.load() && give_up > given_up_until_ns_) {
    given_up_until_ns_ = give_up;
    ++steps_given_up_;
    const LaunchTracker::Waiting w = tracker_->oldest_waiting(/*device_only=*/true);
    std::string why = memory ? "CUPTI holds most of the activity buffer pool, or the launch table is nearly full "
                               "(memory bound)"
                             : "more than " + std::to_string(options_.max_held_steps) +
                                   " steps waited for device records (cupti_max_held_steps)";
    if (w.start_ns != INT64_MAX) why += "; oldest launch waiting: " + call_name(w.name) + " since t=" + seconds(w.start_ns);
    session_.mark_incomplete_until(give_up, why);
  }
  // Buffers rotate by record count: about 100 ms of records each at the
  // rate seen (the calls learnt count at once, records only once their
  // buffer came back), so a buffer CUPTI keeps open while the GPU never
  // idles still comes back soon; at high rates the size bound wins (0).
  if (options_.buffer_max_records == 0 && now - sized_at_ns_ >= 100'000'000) {
    const uint64_t calls = calls_learnt_.load(std::memory_order_relaxed);
    const uint64_t records = decoder_->stats().records;
    const uint64_t n = std::max<uint64_t>(records - records_at_sizing_, 2 * (calls - calls_at_sizing_));
    const uint64_t per_100ms = n * 100'000'000 / uint64_t(now - sized_at_ns_);
    const size_t cap = pool_->buffer_bytes() / 64;  // more than any buffer holds
    max_records_.store(per_100ms >= cap ? 0 : std::max<size_t>(size_t(per_100ms), 32), std::memory_order_relaxed);
    sized_at_ns_ = now;
    calls_at_sizing_ = calls;
    records_at_sizing_ = records;
  }
}

void CuptiCollector::drain_loop() {
  for (;;) {
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += long(options_.drain_poll_ms) * 1'000'000L;
    deadline.tv_sec += deadline.tv_nsec / 1'000'000'000L;
    deadline.tv_nsec %= 1'000'000'000L;
    sem_timedwait(&wake_, &deadline);
    drain_completed();
    int64_t wanted;
    uint64_t forced;
    {
      std::lock_guard<std::mutex> lock(flush_mu_);
      wanted = wanted_until_ns_;
      forced = forced_requested_;
    }
    if (forced != 0) {
      do_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      // CUPTI goes to another client (suspend): what still runs reaches it,
      // not gpuutil, so nothing is waited for any more.
      tracker_->clear();
      std::lock_guard<std::mutex> lock(flush_mu_);
      forced_done_ = forced;
      forced_requested_ = 0;
    } else if (wanted > complete_until_ns_.load() && session_now_ns() - last_flush_ns_ >= flush_interval_ns_) {
      // Flush until everything up to `wanted` is in, at most once per flush
      // interval (drain_poll_ms while flushes bring data, backing off to
      // max_flush_interval_ms while they do not): a flush closes the buffers
      // being written and takes CUPTI's locks the launching threads use.
      const int64_t flush_start = session_now_ns();
      last_flush_ns_ = flush_start;
      ++flushes_;
      do_flush(0);
      update_complete_until(flush_start);
      watch_takeover();
    } else if (taken_over_.load(std::memory_order_acquire)) {
      // Taken over: gpuutil waits for nothing, and only watches whether its
      // buffers flow again (a false alarm), with a default flush once a
      // second (it hands the other client its complete buffers early, and
      // changes none of its records).
      bool silent;
      {
        std::lock_guard<std::mutex> lock(watch_mu_);
        silent = watch_->cause() == TakeoverCause::kBuffersSilent ||
                 watch_->cause() == TakeoverCause::kRecordsElsewhere;
      }
      const int64_t now = session_now_ns();
      if (silent && now - last_flush_ns_ >= 1'000'000'000) {
        last_flush_ns_ = now;
        do_flush(0);
        watch_takeover();
      }
    }
    if (!taken_over_.load(std::memory_order_acquire)) {
      const int64_t now = session_now_ns();
      watch_stuck(now);
      hold_steps_within_bounds(now);
    }
    flush_cv_.notify_all();
    if (quit_.load(std::memory_order_acquire)) {
      drain_completed();
      return;
    }
  }
}

int64_t CuptiCollector::step_boundary(int64_t t_ns) {
  if (!running_ || owner_pid_ != getpid()) return t_ns;
  if (!suspended_ && reattach_.exchange(false)) {
    // cuptiFinalize (TEARDOWN_CUPTI=1) dropped everything: nobody holds
    // CUPTI now, so gpuutil attaches again; the steps in between stay off.
    forget_other_clients(true);
    if (subscribe().empty() && attach().empty()) end_takeover(session_now_ns());
  }
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
  restore_clock();                 // last: the flush above stamped on the session clock
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
  suspended_ = false;
  return "";
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
  // Drain thread gone: force-flush and drain on this thread.
  if (owns_cupti) {
    do_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    restore_clock();  // last: the flush above stamped on the session clock
  }
  g_active.store(nullptr);
  while (g_in_flight.load() != 0) sched_yield();
  drain_completed();
  if (owns_cupti) {
    // Everything CUPTI had is in. A launch still waiting was never finished
    // by the device (a hung kernel, work cut off by the stop): the steps
    // from its start on are incomplete, never idle.
    // (A call waiting only for an API record lost that record.)
    tracker_->on_flush_drained(session_now_ns());
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
  }
  return c;
}

}  // namespace gpuutil::cupti
