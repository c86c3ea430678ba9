// Other CUPTI clients in the same process, for coexistence tests:
//  - a second activity client that does what Kineto does under
//    torch.profiler: registers its own buffer callbacks (silently replacing
//    the current ones), enables its kinds, and at its stop disables them and
//    force-flushes; its completion callback rejects buffers it did not
//    allocate ("bufferCompleted called with unknown buffer") without
//    touching them. The matrix's second_client flags add what Kineto does
//    in some setups: cuptiFinalize after the trace (TEARDOWN_CUPTI=1),
//    PER_THREAD_ACTIVITY_BUFFER=0 after it, starting and stopping from a
//    thread of its own (on-demand tracing through dynolog), a timestamp
//    callback of its own, and a subscription taken at its first start and
//    kept for the life of the process (Kineto before its lazy subscription,
//    kineto#1250: libkineto_init subscribes, and a failed subscription
//    leaves it CPU-only: it then enables no GPU activity at all);
//  - another tool holding the CUPTI subscription (Nsight Systems, DCGM).
#include <time.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "fake_state.h"

using namespace fake;

extern "C" {
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc,
                                                    CUpti_BuffersCallbackCompleteFunc);
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind);
CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind);
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t);
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**);
CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc);
CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute, size_t*, void*);
CUptiResult CUPTIAPI cuptiFinalize(void);
CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
}

namespace {

constexpr size_t kBufferBytes = 1 << 20;
const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_RUNTIME,
                                     CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

std::mutex g_mu;
std::set<uint8_t*> g_mine;
fake_cupti_client_stats g_stats{};

void CUPTIAPI second_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  auto* b = static_cast<uint8_t*>(std::malloc(kBufferBytes));
  std::lock_guard<std::mutex> lock(g_mu);
  g_mine.insert(b);
  *buffer = b;
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI second_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_mine.erase(buffer) == 0) {
    ++g_stats.foreign_buffers_rejected;  // not ours: left alone
    return;
  }
  ++g_stats.buffers;
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    switch (r->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        ++g_stats.kernels;
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
        if (int64_t(k->end) > g_stats.last_record_end_ns) g_stats.last_record_end_ns = int64_t(k->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: ++g_stats.memcpys; break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: ++g_stats.api_records; break;
      default: break;
    }
  }
  std::free(buffer);
}

// FAKE_CUPTI_CLIENT_OWN_CLOCK: CUPTI's default clock moved by 1000 s, so
// which clock a record is on shows.
uint64_t CUPTIAPI own_clock() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec + 1000) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int flags() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.matrix.second_client;
}

void CUPTIAPI second_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// keeps_subscription: subscribes once (at the first start of the process's
// life, i.e. since the last reset) and never lets go. False when that
// subscription failed: the client traces CPU-only.
bool keep_subscription() {
  State& s = st();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.second_client_token != nullptr) return true;
    if (s.stats.second_client_cpu_only) return false;
  }
  CUpti_SubscriberHandle h = nullptr;
  const CUptiResult r = cuptiSubscribe(&h, &second_callback, nullptr);
  std::lock_guard<std::mutex> lock(s.mu);
  if (r != CUPTI_SUCCESS) {
    s.stats.second_client_cpu_only = 1;
    return false;
  }
  s.second_client_token = reinterpret_cast<int*>(h);
  return true;
}

// Runs `f` on the calling thread, or on a thread of its own.
template <class F>
void as_the_client(int f, F&& body) {
  if (f & FAKE_CUPTI_CLIENT_OTHER_THREAD) {
    std::thread(std::forward<F>(body)).join();
  } else {
    body();
  }
}

}  // namespace

extern "C" {

void fake_cupti_second_client_start(void) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_stats = fake_cupti_client_stats{};
  }
  const int f = flags();
  as_the_client(f, [f] {
    if ((f & FAKE_CUPTI_CLIENT_KEEPS_SUBSCRIPTION) && !keep_subscription()) return;  // CPU-only
    if (f & FAKE_CUPTI_CLIENT_OWN_CLOCK) cuptiActivityRegisterTimestampCallback(&own_clock);
    cuptiActivityRegisterCallbacks(&second_requested, &second_completed);
    for (CUpti_ActivityKind k : kKinds) cuptiActivityEnable(k);
  });
}

fake_cupti_client_stats fake_cupti_second_client_stop(void) {
  const int f = flags();
  bool cpu_only;
  {
    State& s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    cpu_only = s.stats.second_client_cpu_only != 0;
  }
  if (cpu_only) {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_stats;  // it traced nothing on the GPU
  }
  as_the_client(f, [f] {
    for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (f & FAKE_CUPTI_CLIENT_PER_THREAD_RESET) {
      uint8_t per_thread = 0;
      size_t size = sizeof(per_thread);
      cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
    }
  });
  if (f & FAKE_CUPTI_CLIENT_TEARDOWN) {
    // After the trace is processed, off the thread that stopped it.
    State& s = st();
    if (s.teardown.joinable()) s.teardown.join();
    s.teardown = std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      cuptiFinalize();
    });
  }
  std::lock_guard<std::mutex> lock(g_mu);
  return g_stats;
}

void fake_cupti_other_subscriber(const char* name) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.other_subscriber = name ? name : "";
}

int fake_cupti_subscriber_callback(void** callback, void** user) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.subscribers.empty()) return 0;
  if (callback != nullptr) *callback = reinterpret_cast<void*>(s.subscribers.front().callback);
  if (user != nullptr) *user = s.subscribers.front().user;
  return 1;
}

}  // extern "C"
