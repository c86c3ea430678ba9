// CUPTI collector lifecycle, callbacks and drain thread (see cupti_collector.h).
#include "collectors/cupti/cupti_collector.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "gpuutil/clock.h"

namespace gpuutil::cupti {

namespace {

// The active collector. CUPTI's callbacks carry no user pointer, so one
// process-wide slot; g_in_flight lets stop() wait out running callbacks.
std::atomic<CuptiCollector*> g_active{nullptr};
std::atomic<int> g_in_flight{0};

void after_fork_in_child() { g_active.store(nullptr); }

void install_atfork_once() {
  static const int once = pthread_atfork(nullptr, nullptr, &after_fork_in_child);
  (void)once;
}

uint64_t CUPTIAPI session_timestamp() { return static_cast<uint64_t>(session_now_ns()); }

// Why a CUPTI error means "no GPU collection", with the fix, in one line.
std::string explain(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_UNKNOWN:
      return "no NVIDIA driver/GPU visible";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "another CUPTI client (torch.profiler, Nsight Systems, DCGM profiling) is active; stop it or profile "
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
      uint8_t* b = c->pool_->acquire();
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
      if (buffer == nullptr || valid > size || size != c->pool_->buffer_bytes() || !c->pool_->complete(buffer, valid)) {
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

std::string CuptiCollector::enable_kinds() {
  std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_RUNTIME,
                                           CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                           CUPTI_ACTIVITY_KIND_OVERHEAD};
  if (options_.driver_api) kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  for (CUpti_ActivityKind k : kinds) {
    const CUptiResult r = api_.ActivityEnable(k);
    if (r != CUPTI_SUCCESS) {
      for (CUpti_ActivityKind e : enabled_) api_.ActivityDisable(e);
      enabled_.clear();
      return "CUPTI: cuptiActivityEnable(kind " + std::to_string(int(k)) + ") returned " + api_.describe(r) + ": " +
             explain(r);
    }
    enabled_.push_back(k);
  }
  return "";
}

std::string CuptiCollector::start() {
  if (running_) return "";
  if (g_active.load() != nullptr) return "CUPTI: another gpuutil collector is already active in this process";
  if (api_.handle == nullptr) {
    const std::string why = api_.load(options_.library_dirs);
    if (!why.empty()) return "CUPTI: " + why;
  }
  uint32_t version = 0;
  CUptiResult r = api_.GetVersion(&version);
  if (r != CUPTI_SUCCESS) return "CUPTI: cuptiGetVersion returned " + api_.describe(r) + " (" + api_.path + ")";
  const uint32_t major = version / 10000;
  if (major != compiled_major()) {
    return "CUPTI: " + api_.path + " has API version " + std::to_string(version) + " (major " +
           std::to_string(major) + "), gpuutil was built against CUPTI " + std::to_string(compiled_major()) +
           " (" + std::to_string(CUPTI_API_VERSION) +
           "); records are not decoded. Fix: install the CUPTI " + std::to_string(compiled_major()) +
           " wheel matching torch, or set GPUUTIL_CUPTI_LIBRARY";
  }
  pool_ = std::make_unique<BufferPool>(options_.buffer_count, options_.buffer_bytes);
  if (!pool_->ok()) return "CUPTI: could not allocate the activity buffer pool";
  decoder_ = std::make_unique<RecordDecoder>(api_, session_, static_cast<int64_t>(getpid()));
  r = api_.ActivityRegisterTimestampCallback(&session_timestamp);
  if (r != CUPTI_SUCCESS) {
    // Without a driver, real CUPTI 13 fails here first (CUPTI_ERROR_UNKNOWN).
    return "CUPTI: cuptiActivityRegisterTimestampCallback returned " + api_.describe(r) + ": " +
           (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED ? explain(r)
                                                                         : "cannot put CUPTI on the session clock");
  }
  r = api_.ActivityRegisterCallbacks(&CallbackAccess::requested, &CallbackAccess::completed);
  if (r != CUPTI_SUCCESS) {
    return "CUPTI: cuptiActivityRegisterCallbacks returned " + api_.describe(r) + ": " + explain(r);
  }
  owner_pid_ = getpid();
  quit_ = false;
  g_active.store(this);
  const std::string why = enable_kinds();
  if (!why.empty()) {
    g_active.store(nullptr);
    while (g_in_flight.load() != 0) sched_yield();
    return why;
  }
  {
    std::lock_guard<std::mutex> lock(flush_mu_);
    flush_requested_ns_ = flush_done_ns_ = INT64_MIN;
  }
  last_boundary_ns_ = INT64_MIN;
  complete_until_ns_ = INT64_MIN;
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

void CuptiCollector::drain_loop() {
  for (;;) {
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += long(options_.drain_poll_ms) * 1'000'000L;
    deadline.tv_sec += deadline.tv_nsec / 1'000'000'000L;
    deadline.tv_nsec %= 1'000'000'000L;
    sem_timedwait(&wake_, &deadline);
    drain_completed();
    int64_t want;
    {
      std::lock_guard<std::mutex> lock(flush_mu_);
      want = flush_requested_ns_;
      if (want <= flush_done_ns_) want = INT64_MIN;
    }
    if (want != INT64_MIN) {
      do_flush(0);
      {
        std::lock_guard<std::mutex> lock(flush_mu_);
        flush_done_ns_ = want;
      }
      flush_cv_.notify_all();
    }
    if (quit_.load(std::memory_order_acquire)) {
      drain_completed();
      return;
    }
  }
}

int64_t CuptiCollector::step_boundary(int64_t t_ns) {
  if (!running_ || owner_pid_ != getpid()) return t_ns;
  const int64_t previous = last_boundary_ns_;
  {
    std::unique_lock<std::mutex> lock(flush_mu_);
    if (previous != INT64_MIN) {
      flush_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return flush_done_ns_ >= previous; });
    }
    flush_requested_ns_ = t_ns;
  }
  sem_post(&wake_);
  last_boundary_ns_ = t_ns;
  if (previous != INT64_MIN) {
    int64_t cur = complete_until_ns_.load();
    while (previous > cur && !complete_until_ns_.compare_exchange_weak(cur, previous)) {
    }
  }
  return complete_until_ns_.load();
}

void CuptiCollector::flush_now() {
  if (!running_ || owner_pid_ != getpid()) return;
  const int64_t t = session_now_ns();
  {
    std::unique_lock<std::mutex> lock(flush_mu_);
    flush_requested_ns_ = std::max(flush_requested_ns_, t);
  }
  sem_post(&wake_);
  std::unique_lock<std::mutex> lock(flush_mu_);
  flush_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return flush_done_ns_ >= t; });
  int64_t cur = complete_until_ns_.load();
  while (t > cur && !complete_until_ns_.compare_exchange_weak(cur, t)) {
  }
}

void CuptiCollector::stop() {
  if (!running_) return;
  running_ = false;
  if (owner_pid_ != getpid()) {
    // Forked child: the drain thread and CUPTI state belong to the parent.
    // Forget them without touching either (no join, no CUPTI calls).
    new (&drain_) std::thread();
    (void)pool_.release();
    (void)decoder_.release();
    return;
  }
  for (CUpti_ActivityKind k : enabled_) api_.ActivityDisable(k);
  enabled_.clear();
  quit_.store(true, std::memory_order_release);
  sem_post(&wake_);
  drain_.join();
  // Drain thread gone: force-flush and drain on this thread.
  do_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_active.store(nullptr);
  while (g_in_flight.load() != 0) sched_yield();
  drain_completed();
  // Detach: CUPTI keeps our callback pointers, which now ignore everything;
  // a later client (torch.profiler) registers its own. A buffer CUPTI still
  // holds must never be unmapped under it.
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
  if (decoder_ && !running_) {  // the drain thread owns the decoder while running
    c.records_decoded = decoder_->stats().records;
    c.events_stored = decoder_->stats().stored;
  }
  return c;
}

}  // namespace gpuutil::cupti
