// Fake CUPTI: a simulated GPU behind CUPTI's activity API (see fake_cupti.h).
//
// One mutex guards the fake's state; client callbacks are called with it
// held, which is safe because gpuutil's callbacks only call back into
// cuptiActivityGetNumDroppedRecords, which is lock-free here.
#include "fake_cupti.h"

#include <cupti.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr uint32_t kMagic = 0x46414b45;  // "FAKE"
constexpr CUpti_ActivityKind kUnknownKind = static_cast<CUpti_ActivityKind>(0x7ff0);

struct HeldBuffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
};

struct State {
  std::mutex mu;
  fake_cupti_config cfg{};
  fake_cupti_stats stats{};
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  CUpti_TimestampCallbackFunc timestamp = nullptr;
  std::vector<HeldBuffer> slots;  // one per emit thread
  std::deque<HeldBuffer> full;    // completed, waiting (out-of-order fault)
  std::atomic<uint64_t> pending_dropped{0};
  std::atomic<uint32_t> correlation{1};
  std::thread worker;
};

State& st() {
  static State* s = new State();  // never destroyed: client threads may outlive statics
  return *s;
}

int64_t clock_now() {
  State& s = st();
  if (s.timestamp) return static_cast<int64_t>(s.timestamp());
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // real CUPTI's default is a REALTIME-like clock
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool enabled(const State& s, CUpti_ActivityKind k) {
  const uint32_t bit = static_cast<uint32_t>(k);
  return bit < 32 && (s.stats.enabled_kinds_mask & (1u << bit)) != 0;
}

void complete_locked(State& s, HeldBuffer b) {
  ++s.stats.buffers_completed;
  // The first two buffers are always delivered intact, so record-level
  // faults injected at the start stay observable.
  const bool buffer_faults = s.stats.buffers_completed > 2;
  if (buffer_faults && s.cfg.null_buffers > 0) {
    --s.cfg.null_buffers;
    s.complete(nullptr, 0, nullptr, b.size, 0);
    // the client never gets this buffer back: like CUPTI, we lost track of it
    return;
  }
  size_t valid = b.used;
  if (buffer_faults && s.cfg.overlong_buffers > 0) {
    --s.cfg.overlong_buffers;
    valid = b.size + 4096;
  } else if (buffer_faults && s.cfg.truncated_buffers > 0 && valid >= 16) {
    --s.cfg.truncated_buffers;
    valid -= 8;
  }
  s.complete(nullptr, 0, b.data, b.size, valid);
}

void flush_full_locked(State& s) {
  if (s.cfg.out_of_order > 0 && s.full.size() > 1) {
    --s.cfg.out_of_order;
    std::reverse(s.full.begin(), s.full.end());
  }
  while (!s.full.empty()) {
    HeldBuffer b = s.full.front();
    s.full.pop_front();
    complete_locked(s, b);
  }
}

// Writes one record (kind-tagged struct of `bytes`) into the slot's buffer.
void write_locked(State& s, size_t slot, const void* record, size_t bytes, bool forced_unknown = false) {
  ++s.stats.records_emitted;
  if (s.slots.empty()) s.slots.resize(1);
  HeldBuffer& h = s.slots[slot % s.slots.size()];
  const size_t need = 8 + ((bytes + 7) & ~size_t(7));
  if (h.data && h.used + need > h.size) {
    s.full.push_back(h);
    h = HeldBuffer{};
    if (s.full.size() >= 2 || s.cfg.out_of_order == 0) flush_full_locked(s);
  }
  if (!h.data) {
    ++s.stats.buffers_requested;
    uint8_t* buf = nullptr;
    size_t size = 0, max_records = 0;
    if (s.request) s.request(&buf, &size, &max_records);
    if (!buf || size < need) {
      ++s.stats.buffers_denied;
      ++s.stats.records_lost_no_buffer;
      s.pending_dropped.fetch_add(1);
      return;
    }
    h = HeldBuffer{buf, size, 0};
  }
  const uint32_t header[2] = {static_cast<uint32_t>(bytes), kMagic};
  std::memcpy(h.data + h.used, header, 8);
  std::memcpy(h.data + h.used + 8, record, bytes);
  if (forced_unknown) std::memcpy(h.data + h.used + 8, &kUnknownKind, sizeof(kUnknownKind));
  h.used += need;
  ++s.stats.records_written;
}

size_t thread_slot(const State& s) {
  const size_t n = s.slots.empty() ? 1 : s.slots.size();
  return std::hash<std::thread::id>()(std::this_thread::get_id()) % n;
}

const char* intern_name(const char* name) {
  static std::mutex mu;
  static std::deque<std::string>* names = new std::deque<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& n : *names) {
    if (n == name) return n.c_str();
  }
  names->emplace_back(name);
  return names->back().c_str();
}

void emit_api_locked(State& s, size_t slot, uint32_t cbid, int64_t a, int64_t b, uint32_t corr, uint32_t tid) {
  if (!enabled(s, CUPTI_ACTIVITY_KIND_RUNTIME)) return;
  CUpti_ActivityAPI r{};
  r.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  r.cbid = cbid;
  r.start = static_cast<uint64_t>(a);
  r.end = static_cast<uint64_t>(b);
  r.processId = static_cast<uint32_t>(getpid());
  r.threadId = tid;
  r.correlationId = corr;
  write_locked(s, slot, &r, sizeof(r));
}

void emit_kernel_locked(State& s, size_t slot, const char* name, uint32_t stream, int64_t a, int64_t b,
                        uint32_t corr) {
  if (!enabled(s, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) return;
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = static_cast<uint64_t>(a);
  k.end = static_cast<uint64_t>(b);
  k.completed = k.end;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = stream;
  k.gridX = 132;
  k.gridY = k.gridZ = 1;
  k.blockX = 256;
  k.blockY = k.blockZ = 1;
  k.registersPerThread = 32;
  k.correlationId = corr;
  k.name = intern_name(name);
  bool unknown = false;
  if (s.cfg.zero_timestamps > 0) {
    --s.cfg.zero_timestamps;
    k.start = 0;
  } else if (s.cfg.unknown_kinds > 0) {
    --s.cfg.unknown_kinds;
    unknown = true;
  }
  write_locked(s, slot, &k, sizeof(k), unknown);
}

void emit_memcpy_locked(State& s, size_t slot, int64_t a, int64_t b, uint64_t bytes, uint32_t corr) {
  if (!enabled(s, CUPTI_ACTIVITY_KIND_MEMCPY)) return;
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = bytes;
  m.start = static_cast<uint64_t>(a);
  m.end = static_cast<uint64_t>(b);
  m.streamId = 7;
  m.correlationId = corr;
  write_locked(s, slot, &m, sizeof(m));
}

void emit_sync_locked(State& s, size_t slot, int64_t a, int64_t b, uint32_t corr) {
  if (!enabled(s, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) return;
  CUpti_ActivitySynchronization2 y{};
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  y.start = static_cast<uint64_t>(a);
  y.end = static_cast<uint64_t>(b);
  y.correlationId = corr;
  y.streamId = 7;
  write_locked(s, slot, &y, sizeof(y));
}

void sleep_until(int64_t t_ns) {
  for (int64_t now = clock_now(); now < t_ns; now = clock_now()) {
    const int64_t d = std::min<int64_t>(t_ns - now, 2'000'000);
    timespec ts{0, static_cast<long>(d)};
    nanosleep(&ts, nullptr);
  }
}

// The simulated GPU + host thread of a step scenario, in virtual time that
// starts at "now" on the client's clock.
void run_steps(fake_cupti_scenario sc) {
  State& s = st();
  const uint32_t tid = 0x5eed;  // the simulated host thread
  int64_t h = clock_now();
  const int streams = sc.streams > 0 ? sc.streams : 1;
  std::vector<int64_t> stream_free(static_cast<size_t>(streams) + 1, 0);
  auto hook = [&](int type, int64_t step, const char* name, int64_t a, int64_t b) {
    if (sc.hook) sc.hook(sc.hook_ctx, type, step, name, a, b);
  };
  for (int step = 0; step < sc.steps; ++step) {
    hook(0, step, "", h, h);
    if (sc.dataloader_ns > 0) {
      hook(2, step, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", h, h + sc.dataloader_ns);
      h += sc.dataloader_ns;
    }
    int64_t gpu_done = h;
    std::lock_guard<std::mutex> lock(s.mu);
    for (int m = 0; m < sc.memcpy_per_step; ++m) {
      const uint32_t corr = s.correlation.fetch_add(1);
      emit_api_locked(s, 0, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, h, h + sc.launch_api_ns, corr, tid);
      const int64_t a = std::max(h + sc.launch_latency_ns, stream_free[0]);
      stream_free[0] = a + sc.memcpy_ns;
      emit_memcpy_locked(s, 0, a, a + sc.memcpy_ns, sc.memcpy_bytes, corr);
      gpu_done = std::max(gpu_done, stream_free[0]);
      h += sc.launch_api_ns;
    }
    for (int k = 0; k < sc.kernels_per_step; ++k) {
      const uint32_t corr = s.correlation.fetch_add(1);
      const size_t si = static_cast<size_t>(k % streams);
      emit_api_locked(s, 0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, h, h + sc.launch_api_ns, corr, tid);
      const int64_t a = std::max(h + sc.launch_latency_ns, stream_free[si]);
      stream_free[si] = a + sc.kernel_ns;
      emit_kernel_locked(s, 0, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", 7 + uint32_t(si), a,
                         a + sc.kernel_ns, corr);
      gpu_done = std::max(gpu_done, stream_free[si]);
      h += sc.launch_api_ns;
    }
    for (int k = 0; k < sc.nccl_kernels_per_step; ++k) {
      const uint32_t corr = s.correlation.fetch_add(1);
      const size_t si = static_cast<size_t>(streams);
      emit_api_locked(s, 0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, h, h + sc.launch_api_ns, corr, tid);
      const int64_t a = std::max(h + sc.launch_latency_ns, stream_free[si]);
      stream_free[si] = a + sc.nccl_ns;
      emit_kernel_locked(s, 0, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20, a, a + sc.nccl_ns, corr);
      gpu_done = std::max(gpu_done, stream_free[si]);
      h += sc.launch_api_ns;
    }
    if (sc.sync_at_step_end) {
      const uint32_t corr = s.correlation.fetch_add(1);
      const int64_t end = std::max(h, gpu_done) + 1000;
      emit_api_locked(s, 0, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, h, end, corr, tid);
      emit_sync_locked(s, 0, h, end, corr);
      h = end;
    }
    if (sc.pace_realtime) {
      s.mu.unlock();
      sleep_until(h);
      s.mu.lock();
    }
    hook(1, step, "", h, h);
  }
}

void run_stream(fake_cupti_scenario sc) {
  State& s = st();
  const int64_t t0 = clock_now();
  const double ns_per_record = 1e9 / (sc.records_per_s > 0 ? sc.records_per_s : 1e6);
  const uint64_t batch = 256;
  for (uint64_t i = 0; i < sc.stream_records; i += batch) {
    const int64_t due = t0 + static_cast<int64_t>(double(i) * ns_per_record);
    sleep_until(due);
    std::lock_guard<std::mutex> lock(s.mu);
    const int64_t now = clock_now();
    for (uint64_t j = i; j < std::min(sc.stream_records, i + batch); ++j) {
      const uint32_t corr = s.correlation.fetch_add(1);
      emit_kernel_locked(s, j, "void at::native::vectorized_elementwise_kernel<4>", 7, now - 900, now - 100, corr);
    }
  }
}

}  // namespace

extern "C" {

// ---- control API ----
void fake_cupti_reset(const fake_cupti_config* config) {
  State& s = st();
  if (s.worker.joinable()) s.worker.join();
  std::lock_guard<std::mutex> lock(s.mu);
  s.cfg = config ? *config : fake_cupti_config{};
  const uint32_t mask = s.stats.enabled_kinds_mask;
  const int cb = s.stats.callbacks_registered, ts = s.stats.timestamp_callback_set;
  s.stats = fake_cupti_stats{};
  s.stats.enabled_kinds_mask = mask;
  s.stats.callbacks_registered = cb;
  s.stats.timestamp_callback_set = ts;
  const size_t threads = static_cast<size_t>(s.cfg.emit_threads > 0 ? s.cfg.emit_threads : 1);
  // Buffers the fake held belong to the previous client; forget them.
  s.slots.assign(threads, HeldBuffer{});
  s.full.clear();
  s.pending_dropped = 0;
}

fake_cupti_stats fake_cupti_get_stats(void) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  fake_cupti_stats out = s.stats;
  out.buffers_held = static_cast<int>(s.full.size());
  for (const auto& h : s.slots) out.buffers_held += h.data ? 1 : 0;
  return out;
}

int fake_cupti_run_scenario(const fake_cupti_scenario* scenario) {
  State& s = st();
  if (s.worker.joinable()) return -1;
  const fake_cupti_scenario sc = *scenario;
  s.worker = std::thread([sc] {
    if (sc.steps > 0) {
      run_steps(sc);
    } else {
      run_stream(sc);
    }
  });
  return 0;
}

void fake_cupti_wait(void) {
  State& s = st();
  if (s.worker.joinable()) s.worker.join();
}

void fake_cupti_launch_kernel(const char* name, uint32_t stream, int64_t duration_ns, int64_t latency_ns) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  const int64_t now = clock_now();
  const uint32_t corr = s.correlation.fetch_add(1);
  const size_t slot = thread_slot(s);
  const uint32_t tid = static_cast<uint32_t>(pthread_self());  // what real CUPTI reports as threadId
  emit_api_locked(s, slot, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, now, now + 2000, corr, tid);
  emit_kernel_locked(s, slot, name, stream, now + latency_ns, now + latency_ns + duration_ns, corr);
}

int64_t fake_cupti_now_ns(void) { return clock_now(); }

// ---- the CUPTI entry points gpuutil calls ----
CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  *version = s.cfg.version ? s.cfg.version : CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_UNKNOWN: *str = "CUPTI_ERROR_UNKNOWN"; break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: *str = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    default: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  if (!name) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000: *name = "cudaLaunchKernel_v7000"; return CUPTI_SUCCESS;
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020: *name = "cudaStreamSynchronize_v3020"; return CUPTI_SUCCESS;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020: *name = "cudaMemcpyAsync_v3020"; return CUPTI_SUCCESS;
    default: return CUPTI_ERROR_INVALID_PARAMETER;
  }
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  if (!request || !complete) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.request = request;
  s.complete = complete;
  s.stats.callbacks_registered = 1;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.timestamp = f;
  s.stats.timestamp_callback_set = f != nullptr;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.cfg.enable_error != 0 && (s.cfg.enable_error_kind == 0 || s.cfg.enable_error_kind == int(kind))) {
    return static_cast<CUptiResult>(s.cfg.enable_error);
  }
  if (static_cast<uint32_t>(kind) < 32) s.stats.enabled_kinds_mask |= 1u << static_cast<uint32_t>(kind);
  if (static_cast<uint32_t>(kind) >= 32) s.stats.enabled_kinds_mask |= 1u << 31;  // kinds >= 32 share bit 31
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (static_cast<uint32_t>(kind) < 32) s.stats.enabled_kinds_mask &= ~(1u << static_cast<uint32_t>(kind));
  if (static_cast<uint32_t>(kind) >= 32) s.stats.enabled_kinds_mask &= ~(1u << 31);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.stats.flushes;
  (void)flag;  // every record the fake wrote is complete, so both flushes return all buffers
  for (auto& h : s.slots) {
    if (h.data) {
      s.full.push_back(h);
      h = HeldBuffer{};
    }
  }
  flush_full_locked(s);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
  size_t pos = 0;
  if (*record) {
    const uint8_t* cur = reinterpret_cast<const uint8_t*>(*record);
    uint32_t size;
    std::memcpy(&size, cur - 8, 4);
    pos = static_cast<size_t>(cur - buffer) - 8 + 8 + ((size + 7) & ~size_t(7));
  }
  if (pos >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  if (pos + 8 > valid) return CUPTI_ERROR_INVALID_PARAMETER;
  uint32_t header[2];
  std::memcpy(header, buffer + pos, 8);
  if (header[1] != kMagic || pos + 8 + header[0] > valid) return CUPTI_ERROR_INVALID_PARAMETER;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + pos + 8);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  // Lock-free: called from inside the completion callback.
  uint64_t d = s.pending_dropped.exchange(0);
  const uint64_t extra = __atomic_exchange_n(&s.cfg.dropped_records, uint64_t(0), __ATOMIC_ACQ_REL);
  d += extra;
  __atomic_fetch_add(&s.stats.dropped_reported, d, __ATOMIC_ACQ_REL);
  *dropped = static_cast<size_t>(d);
  return CUPTI_SUCCESS;
}

}  // extern "C"
