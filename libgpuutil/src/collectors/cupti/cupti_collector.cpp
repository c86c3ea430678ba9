// CUPTI collector lifecycle, callbacks, drain thread and completeness (see
// cupti_collector.h).
#include "collectors/cupti/cupti_collector.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "gpuutil/clock.h"

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

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

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
  static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    g_in_flight.fetch_add(1);
    CuptiCollector* c = g_active.load();
    if (c) {
      uint8_t* b = c->pool_->acquire(session_now_ns());
      if (b) {
        *buffer = b;
        *size = c->pool_->buffer_bytes();
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

uint32_t CuptiCollector::compiled_major() { return CUPTI_API_VERSION / 10000; }

CuptiCollector::CuptiCollector(Session& session, CuptiCollectorOptions options)
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
    r = api_.Subscribe_v2(&subscriber_, &ignore_callback, nullptr, &p);
  } else {
    call = "cuptiSubscribe";
    r = api_.Subscribe(&subscriber_, &ignore_callback, nullptr);
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
  if (!why.empty()) api_.ActivityRegisterTimestampCallback(&cupti_default_timestamp);
  return why;
}

void CuptiCollector::detach() {
  disable_kinds();
  api_.ActivityRegisterTimestampCallback(&cupti_default_timestamp);
}

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
  api_.ActivityFlushAll(flag);  // completion callbacks enqueue; we drain below
  // Drops in the global queue (or while no buffer completes) surface here.
  size_t dropped = 0;
  if (api_.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    dropped_.fetch_add(dropped, std::memory_order_relaxed);
  }
  drain_completed();
}

// After a default flush that began at flush_start_ns: data is complete up
// to the earliest of that time, the oldest buffer CUPTI still holds, and
// the oldest launch still waiting for its records.
void CuptiCollector::update_complete_until(int64_t flush_start_ns) {
  const int64_t now = session_now_ns();
  const int64_t stale_before = now - options_.completion_wait_ns;
  int64_t until = flush_start_ns;
  const int64_t held = pool_->oldest_held_since_ns();
  if (held < until) {
    if (held >= stale_before) {
      until = held;
    } else if (held != held_timeout_noted_ns_) {
      held_timeout_noted_ns_ = held;
      ++timeouts_;
      session_.count(Diag::cupti_completion_timeout, 1,
                     "an activity buffer CUPTI held for over " + std::to_string(options_.completion_wait_ns / 1'000'000) +
                         " ms (unfinished device work in it)");
    }
  }
  tracker_->on_flush_drained(flush_start_ns);
  until = std::min(until, tracker_->oldest_waiting_ns(now, options_.completion_wait_ns));
  if (const uint64_t timed_out = tracker_->take_timed_out(); timed_out > 0) {
    timeouts_ += timed_out;
    session_.count(Diag::cupti_completion_timeout, timed_out,
                   std::to_string(timed_out) + " launches without a device record after " +
                       std::to_string(options_.completion_wait_ns / 1'000'000) + " ms");
  }
  int64_t cur = complete_until_ns_.load();
  while (until > cur && !complete_until_ns_.compare_exchange_weak(cur, until)) {
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
      std::lock_guard<std::mutex> lock(flush_mu_);
      forced_done_ = forced;
      forced_requested_ = 0;
    } else if (wanted > complete_until_ns_.load() &&
               session_now_ns() - last_flush_ns_ >= int64_t(options_.drain_poll_ms) * 1'000'000) {
      // Flush until everything up to `wanted` is in, at most once per poll
      // interval: a flush closes the buffers being written, so flushing at
      // every step of a fast loop would churn through buffers (and CUPTI).
      const int64_t flush_start = session_now_ns();
      last_flush_ns_ = flush_start;
      do_flush(0);
      update_complete_until(flush_start);
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
  if (suspended_) {
    // Nothing to wait for while another client owns CUPTI.
    int64_t cur = complete_until_ns_.load();
    while (t_ns > cur && !complete_until_ns_.compare_exchange_weak(cur, t_ns)) {
    }
    return complete_until_ns_.load();
  }
  {
    std::lock_guard<std::mutex> lock(flush_mu_);
    wanted_until_ns_ = std::max(wanted_until_ns_, t_ns);
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
  const int64_t now = session_now_ns();
  wait_complete(now, options_.completion_wait_ns);
  detach();
  forced_flush_on_drain_thread();  // every buffer back before the other client registers its own
  unsubscribe();
  session_.begin_interval(Diag::gpu_collection_suspended, since_ns == INT64_MIN ? session_now_ns() : since_ns, why);
  suspended_ = true;
}

std::string CuptiCollector::resume() {
  if (!running_ || !suspended_ || owner_pid_ != getpid()) return "";
  std::string why = subscribe();
  if (why.empty()) why = attach();
  if (!why.empty()) {
    unsubscribe();
    return why;
  }
  const int64_t now = session_now_ns();
  session_.end_interval(Diag::gpu_collection_suspended, now);
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
  const bool owns_cupti = !suspended_;
  if (owns_cupti) wait_complete(session_now_ns(), options_.completion_wait_ns);
  running_ = false;
  if (owns_cupti) detach();
  quit_.store(true, std::memory_order_release);
  sem_post(&wake_);
  drain_.join();
  // Drain thread gone: force-flush and drain on this thread.
  if (owns_cupti) do_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_active.store(nullptr);
  while (g_in_flight.load() != 0) sched_yield();
  drain_completed();
  unsubscribe();
  if (suspended_) session_.end_interval(Diag::gpu_collection_suspended, session_now_ns());
  suspended_ = false;
  // CUPTI keeps our callback pointers, which now ignore everything; a later
  // client (torch.profiler) registers its own. A buffer CUPTI still holds
  // must never be unmapped under it.
  if (pool_->outstanding() != 0) {
    session_.count(Diag::cupti_buffer_invalid, pool_->outstanding(), "buffers still held by CUPTI after stop; kept");
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
  if (decoder_ && !running_) {  // the drain thread owns the decoder while running
    c.records_decoded = decoder_->stats().records;
    c.events_stored = decoder_->stats().stored;
    c.records_unfinished = decoder_->stats().unfinished;
    c.completion_timeouts = timeouts_;
  }
  return c;
}

}  // namespace gpuutil::cupti
