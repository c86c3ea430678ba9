// The fake CUPTI's simulated device and activity buffers (see fake_cupti.h).
//
// API calls write their API record into the calling thread's buffer at once
// (complete). Device work is scheduled on (device, stream) timelines on the
// session clock; its record is complete only once that time has passed:
// reserved in the launching thread's buffer (CUDA 13 per-thread buffers), or
// written at completion into the device's buffer. Delivery takes buffers out
// of the state under the lock and calls the client with the lock released.
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "fake_state.h"

namespace fake {

namespace {

thread_local Slot* t_slot = nullptr;

Slot& thread_slot_locked(State& s) {
  if (t_slot == nullptr) {
    t_slot = new Slot();  // lives as long as the process: a thread's buffers may outlive it
    s.thread_slots.push_back(t_slot);
  }
  return *t_slot;
}

void sleep_until(int64_t t_ns) {
  for (int64_t now = mono_ns(); now < t_ns; now = mono_ns()) {
    const int64_t d = std::min<int64_t>(t_ns - now, 2'000'000);
    timespec ts{0, static_cast<long>(d)};
    nanosleep(&ts, nullptr);
  }
}

// Appends one record to `slot`. May release `lk` while the client is asked
// for a buffer (on this thread). `reserved`: a device record that is complete
// only at `end_ns`. Returns false when the record was lost for lack of a buffer.
bool put(std::unique_lock<std::mutex>& lk, State& s, Slot& slot, const void* record, size_t bytes, bool reserved,
         int64_t start_ns, int64_t end_ns, bool unknown_kind = false, bool planted_fault = false) {
  ++s.stats.records_emitted;
  const size_t need = 8 + ((bytes + 7) & ~size_t(7));
  if (slot.cur.data != nullptr && slot.cur.used + need > slot.cur.size) {
    slot.cur.full = true;
    slot.closed.push_back(std::move(slot.cur));
    slot.cur = Buffer{};
    s.worker_cv.notify_one();
  }
  if (slot.cur.data == nullptr) {
    ++s.stats.buffers_requested;
    CUpti_BuffersCallbackRequestFunc request = s.request;
    uint8_t* buf = nullptr;
    size_t size = 0, max_records = 0;
    if (request != nullptr) {
      lk.unlock();
      request(&buf, &size, &max_records);
      lk.lock();
    }
    if (buf == nullptr || size < need) {
      ++s.stats.buffers_denied;
      ++s.stats.records_lost_no_buffer;
      s.pending_dropped.fetch_add(1);
      return false;
    }
    slot.cur = Buffer{};
    slot.cur.data = buf;
    slot.cur.size = size;
  }
  Buffer& b = slot.cur;
  const uint32_t header[2] = {static_cast<uint32_t>(bytes), kMagic};
  std::memcpy(b.data + b.used, header, 8);
  std::memcpy(b.data + b.used + 8, record, bytes);
  if (unknown_kind) std::memcpy(b.data + b.used + 8, &kUnknownKind, sizeof(kUnknownKind));
  if (reserved) {
    b.reserved.push_back({b.used + 8, start_ns, end_ns});
    b.complete_at_ns = std::max(b.complete_at_ns, end_ns);
  }
  b.used += need;
  b.keep_intact = b.keep_intact || planted_fault || unknown_kind;
  ++s.stats.records_written;
  return true;
}

// Zeroes the timestamps of a device record the device has not finished.
void zero_unfinished(uint8_t* rec, bool started) {
  uint64_t* start = nullptr;
  uint64_t* end = nullptr;
  switch (reinterpret_cast<CUpti_Activity*>(rec)->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
      start = &k->start;
      end = &k->end;
      k->completed = 0;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      start = &m->start;
      end = &m->end;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
      start = &m->start;
      end = &m->end;
      break;
    }
    default:
      return;
  }
  if (!started) *start = 0;
  *end = 0;
}

struct Delivery {
  uint8_t* data;
  size_t size;
  size_t valid;
};

// Takes every deliverable buffer out of the state (mu held). close_current:
// a flush (the current buffers are closed first).
std::vector<Buffer> take_locked(State& s, bool close_current, bool forced, int64_t now) {
  std::vector<Buffer> out;
  auto visit = [&](Slot& slot) {
    if (close_current && slot.cur.data != nullptr && slot.cur.used > 0) {
      slot.closed.push_back(std::move(slot.cur));
      slot.cur = Buffer{};
    }
    for (auto it = slot.closed.begin(); it != slot.closed.end();) {
      // Without a flush only full buffers are handed over (when complete);
      // a flush hands over every complete one.
      if (forced || (it->complete_at_ns <= now && (close_current || it->full))) {
        for (const Reserved& r : it->reserved) {
          if (r.end_ns > now) {
            zero_unfinished(it->data + r.offset, r.start_ns <= now);
            ++s.stats.records_incomplete_forced;
          }
        }
        out.push_back(std::move(*it));
        it = slot.closed.erase(it);
      } else {
        if (close_current) ++s.stats.buffers_withheld;
        ++it;
      }
    }
    if (forced && slot.cur.data != nullptr) {  // an empty current buffer goes back too
      out.push_back(std::move(slot.cur));
      slot.cur = Buffer{};
    }
  };
  for (Slot* slot : s.thread_slots) visit(*slot);
  for (auto& [device, slot] : s.device_slots) visit(slot);
  return out;
}

// Device-buffer mode: writes finished device work into its device's buffer,
// in completion order (mu held; may release it to request a buffer).
void complete_device_work(std::unique_lock<std::mutex>& lk, State& s, int64_t now, bool forced) {
  if (s.pending.empty()) return;
  std::vector<PendingWork> done;
  for (auto it = s.pending.begin(); it != s.pending.end();) {
    if (it->end_ns <= now || (forced && it->start_ns <= now)) {
      done.push_back(std::move(*it));
      it = s.pending.erase(it);
    } else {
      ++it;
    }
  }
  std::stable_sort(done.begin(), done.end(),
                   [](const PendingWork& a, const PendingWork& b) { return a.end_ns < b.end_ns; });
  for (PendingWork& w : done) {
    if (w.end_ns > now) {
      zero_unfinished(w.record.data(), w.start_ns <= now);
      ++s.stats.records_incomplete_forced;
    }
    Slot& slot = s.device_slots[w.device];
    slot.is_device = true;
    put(lk, s, slot, w.record.data(), w.record.size(), false, 0, 0, false, w.planted_fault);
  }
}

// Hands buffers to the registered client with the lock released.
void deliver(std::unique_lock<std::mutex>& lk, State& s, std::vector<Buffer>&& buffers) {
  if (buffers.empty()) return;
  if (s.cfg.out_of_order > 0 && buffers.size() > 1) {
    --s.cfg.out_of_order;
    std::reverse(buffers.begin(), buffers.end());
  }
  std::vector<Delivery> out;
  for (Buffer& b : buffers) {
    ++s.stats.buffers_completed;
    // The first two buffers, and any buffer holding a planted record-level
    // fault, are delivered intact, so those faults stay observable.
    const bool faults = s.stats.buffers_completed > 2 && !b.keep_intact;
    if (faults && s.cfg.null_buffers > 0) {
      --s.cfg.null_buffers;
      out.push_back({nullptr, b.size, 0});  // like CUPTI losing track of a buffer: never returned
      continue;
    }
    size_t valid = b.used;
    if (faults && s.cfg.overlong_buffers > 0) {
      --s.cfg.overlong_buffers;
      valid = b.size + 4096;
    } else if (faults && s.cfg.truncated_buffers > 0 && valid >= 16) {
      --s.cfg.truncated_buffers;
      valid -= 8;
    }
    out.push_back({b.data, b.size, valid});
  }
  CUpti_BuffersCallbackCompleteFunc complete = s.complete;
  lk.unlock();
  if (complete != nullptr) {
    for (const Delivery& d : out) complete(nullptr, 0, d.data, d.size, d.valid);
  }
  lk.lock();
}

void worker_loop() {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  while (!s.worker_quit) {
    s.worker_cv.wait_for(lk, std::chrono::milliseconds(1));
    if (s.worker_quit) break;
    lk.unlock();
    flush_and_deliver(false, false);
    lk.lock();
  }
}

uint32_t key_of_this_thread(CUpti_ActivityThreadIdType type) {
  if (type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) return static_cast<uint32_t>(syscall(SYS_gettid));
  return static_cast<uint32_t>(pthread_self());  // CUPTI's default on Linux
}

const char* keep_name(State& s, const char* name) {
  if (name == nullptr) name = "<unnamed kernel>";
  for (const std::string& n : s.names) {
    if (n == name) return n.c_str();
  }
  s.names.emplace_back(name);
  return s.names.back().c_str();
}

// The record of one piece of device work, in the layout CUPTI 13 uses.
std::vector<uint8_t> device_record(State& s, const fake_cupti_work& w, int64_t start, int64_t end, uint32_t corr) {
  std::vector<uint8_t> rec;
  const int64_t offset = clock_offset_ns();  // device times -> the client's clock
  start += offset;
  end += offset;
  if (w.kind == FAKE_CUPTI_KERNEL) {
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = static_cast<uint64_t>(start);
    k.end = static_cast<uint64_t>(end);
    k.completed = k.end;
    k.deviceId = w.device;
    k.contextId = 1;
    k.streamId = w.stream;
    k.gridX = static_cast<int32_t>(w.grid[0] ? w.grid[0] : 1);
    k.gridY = static_cast<int32_t>(w.grid[1] ? w.grid[1] : 1);
    k.gridZ = static_cast<int32_t>(w.grid[2] ? w.grid[2] : 1);
    k.blockX = static_cast<int32_t>(w.block[0] ? w.block[0] : 1);
    k.blockY = static_cast<int32_t>(w.block[1] ? w.block[1] : 1);
    k.blockZ = static_cast<int32_t>(w.block[2] ? w.block[2] : 1);
    k.registersPerThread = static_cast<uint16_t>(w.registers_per_thread);
    k.dynamicSharedMemory = static_cast<int32_t>(w.shared_memory_bytes);
    k.correlationId = corr;
    k.graphId = w.graph_id;
    k.name = keep_name(s, w.name);
    rec.resize(sizeof(k));
    std::memcpy(rec.data(), &k, sizeof(k));
  } else if (w.kind == FAKE_CUPTI_MEMCPY) {
    CUpti_ActivityMemcpy6 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = w.copy_kind ? w.copy_kind : uint8_t(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    m.srcKind = w.src_kind;
    m.dstKind = w.dst_kind;
    m.bytes = w.bytes;
    m.start = static_cast<uint64_t>(start);
    m.end = static_cast<uint64_t>(end);
    m.deviceId = w.device;
    m.contextId = 1;
    m.streamId = w.stream;
    m.correlationId = corr;
    m.graphId = w.graph_id;
    rec.resize(sizeof(m));
    std::memcpy(rec.data(), &m, sizeof(m));
  } else {
    CUpti_ActivityMemset4 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.bytes = w.bytes;
    m.start = static_cast<uint64_t>(start);
    m.end = static_cast<uint64_t>(end);
    m.deviceId = w.device;
    m.contextId = 1;
    m.streamId = w.stream;
    m.correlationId = corr;
    m.graphId = w.graph_id;
    rec.resize(sizeof(m));
    std::memcpy(rec.data(), &m, sizeof(m));
  }
  return rec;
}

CUpti_ActivityKind activity_kind(int work_kind) {
  return work_kind == FAKE_CUPTI_KERNEL   ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
         : work_kind == FAKE_CUPTI_MEMCPY ? CUPTI_ACTIVITY_KIND_MEMCPY
                                          : CUPTI_ACTIVITY_KIND_MEMSET;
}

bool is_13_0(const State& s) {
  const uint32_t v = s.cfg.version ? s.cfg.version : CUPTI_API_VERSION;
  return v / 100 == 1300;
}

// Puts one piece of scheduled device work where the mode says (mu held).
void emit_work(std::unique_lock<std::mutex>& lk, State& s, Slot& slot, const fake_cupti_work& w, int64_t start,
               int64_t end, uint32_t corr) {
  if (!kind_enabled(s, activity_kind(w.kind))) return;
  if (w.graph_id != 0) {
    if (s.first_graph_correlation == 0) s.first_graph_correlation = corr;
    // CUPTI 13.0: in every activity session after the first, graph node
    // records carry a stale correlation id (fixed in 13.1 Update 1).
    if (s.cfg.graph_correlation_bug && is_13_0(s) && s.stats.activity_sessions > 1) corr = s.first_graph_correlation;
  }
  std::vector<uint8_t> rec = device_record(s, w, start, end, corr);
  bool unknown = false;
  bool planted = false;
  if (w.kind == FAKE_CUPTI_KERNEL) {
    if (s.cfg.zero_timestamps > 0) {
      --s.cfg.zero_timestamps;
      reinterpret_cast<CUpti_ActivityKernel10*>(rec.data())->start = 0;
      planted = true;
    } else if (s.cfg.unknown_kinds > 0) {
      --s.cfg.unknown_kinds;
      unknown = true;
    }
  }
  s.last_device_end_ns = std::max(s.last_device_end_ns, end);
  if (s.cfg.device_records == FAKE_CUPTI_DEVICE_RECORDS_IN_DEVICE_BUFFER && !unknown) {
    s.pending.push_back({start, end, w.device, std::move(rec), planted});
    return;
  }
  put(lk, s, slot, rec.data(), rec.size(), true, start, end, unknown, planted);
}

}  // namespace

State& st() {
  static State* s = new State();  // never destroyed: client threads may outlive statics
  return *s;
}

int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Measured, not read per record: two reads of one clock differ by tens of
// ns, and a client on the session clock must get exactly the times it gave.
void measure_clock_offset() {
  int64_t best = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const int64_t a = mono_ns();
    const int64_t c = now_ns();
    const int64_t b = mono_ns();
    const int64_t off = c - (a + (b - a) / 2);
    if (std::llabs(off) < std::llabs(best)) best = off;
  }
  if (std::llabs(best) < 1000) best = 0;  // the same clock
  st().clock_offset.store(best);
}

int64_t clock_offset_ns() {
  int64_t off = st().clock_offset.load();
  if (off == INT64_MIN) {
    measure_clock_offset();
    off = st().clock_offset.load();
  }
  return off;
}

int64_t now_ns() {
  CUpti_TimestampCallbackFunc f = st().timestamp.load();
  if (f != nullptr) return static_cast<int64_t>(f());
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // CUPTI's default clock on Linux
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

uint32_t this_thread_id(const State& s) { return key_of_this_thread(s.thread_id_type); }

bool kind_enabled(const State& s, CUpti_ActivityKind k) {
  const uint32_t bit = std::min<uint32_t>(static_cast<uint32_t>(k), 31);
  return (s.stats.enabled_kinds_mask & (1u << bit)) != 0;
}

bool api_traced(const State& s, CUpti_CallbackDomain domain, uint32_t cbid) {
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const auto& overrides = runtime ? s.runtime_override : s.driver_override;
  const auto it = overrides.find(cbid);
  if (it != overrides.end()) return it->second;
  return runtime ? s.runtime_all : s.driver_all;
}

void flush_and_deliver(bool flush, bool forced) {
  State& s = st();
  std::lock_guard<std::mutex> writer(s.writer_mu);
  std::unique_lock<std::mutex> lk(s.mu);
  if (flush) ++s.stats.flushes;
  if (forced) ++s.stats.forced_flushes;
  const int64_t now = mono_ns();
  complete_device_work(lk, s, now, forced);
  deliver(lk, s, take_locked(s, flush, forced, now));
}

void ensure_worker() {
  State& s = st();
  if (!s.worker.joinable()) s.worker = std::thread(worker_loop);
}

void clear_buffers_locked(State& s) {
  for (Slot* slot : s.thread_slots) {
    slot->cur = Buffer{};
    slot->closed.clear();
  }
  s.device_slots.clear();
  s.pending.clear();
  s.stream_free_ns.clear();
  s.last_device_end_ns = INT64_MIN;
}

}  // namespace fake

using namespace fake;

extern "C" {

uint32_t fake_cupti_call_api(const fake_cupti_call* call) {
  State& s = st();
  const uint32_t corr = s.correlation.fetch_add(1);
  const bool explicit_times = call->start_ns != 0 || call->end_ns != 0;
  int64_t start = explicit_times ? call->start_ns : mono_ns();
  int64_t end = explicit_times ? call->end_ns : start + call->api_ns;
  std::unique_lock<std::mutex> lk(s.mu);
  // Schedule the device work on its streams.
  std::vector<std::pair<int64_t, int64_t>> times;
  for (int i = 0; i < call->n_work; ++i) {
    const fake_cupti_work& w = call->work[i];
    int64_t& free_ns = s.stream_free_ns[{w.device, w.stream}];
    int64_t a = w.start_ns, b = w.end_ns;
    if (a == 0 && b == 0) {
      a = std::max(start + w.latency_ns, free_ns);
      b = a + w.duration_ns;
    }
    if (!call->captured) free_ns = std::max(free_ns, b);
    times.emplace_back(a, b);
  }
  // A synchronizing call returns once the work it waits for is done.
  if (call->sync != FAKE_CUPTI_SYNC_NONE && !explicit_times) {
    int64_t done = INT64_MIN;
    for (const auto& [key, free_ns] : s.stream_free_ns) {
      if (key.first == call->sync_device && (call->sync == FAKE_CUPTI_SYNC_DEVICE || key.second == call->sync_stream)) {
        done = std::max(done, free_ns);
      }
    }
    end = std::max(end, done);
    lk.unlock();
    sleep_until(end);
    lk.lock();
  }
  Slot& slot = thread_slot_locked(s);
  const CUpti_CallbackDomain domain = static_cast<CUpti_CallbackDomain>(call->domain);
  const CUpti_ActivityKind api_kind =
      domain == CUPTI_CB_DOMAIN_DRIVER_API ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
  if (api_traced(s, domain, call->cbid)) {
    const int64_t offset = clock_offset_ns();
    CUpti_ActivityAPI r{};
    r.kind = api_kind;
    r.cbid = call->cbid;
    r.start = static_cast<uint64_t>(start + offset);
    r.end = static_cast<uint64_t>(end + offset);
    r.processId = static_cast<uint32_t>(getpid());
    r.threadId = this_thread_id(s);
    r.correlationId = corr;
    put(lk, s, slot, &r, sizeof(r), false, 0, 0);
  }
  if (call->sync != FAKE_CUPTI_SYNC_NONE && kind_enabled(s, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) {
    CUpti_ActivitySynchronization2 y{};
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = call->sync == FAKE_CUPTI_SYNC_DEVICE ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE
                                                  : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    y.start = static_cast<uint64_t>(start + clock_offset_ns());
    y.end = static_cast<uint64_t>(end + clock_offset_ns());
    y.correlationId = corr;
    y.streamId = call->sync_stream;
    put(lk, s, slot, &y, sizeof(y), false, 0, 0);
  }
  if (!call->captured) {
    for (int i = 0; i < call->n_work; ++i) emit_work(lk, s, slot, call->work[i], times[i].first, times[i].second, corr);
  }
  return corr;
}

}  // extern "C"

namespace fake {
void emit_device_work_batch(const fake_cupti_work* work, size_t n) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  Slot& slot = thread_slot_locked(s);
  for (size_t i = 0; i < n; ++i) emit_work(lk, s, slot, work[i], work[i].start_ns, work[i].end_ns, s.correlation.fetch_add(1));
}
}  // namespace fake

extern "C" {

void fake_cupti_device_work(const fake_cupti_work* work, uint32_t correlation_id) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  int64_t a = work->start_ns, b = work->end_ns;
  if (a == 0 && b == 0) {
    int64_t& free_ns = s.stream_free_ns[{work->device, work->stream}];
    a = std::max(mono_ns() + work->latency_ns, free_ns);
    b = a + work->duration_ns;
    free_ns = b;
  }
  emit_work(lk, s, thread_slot_locked(s), *work, a, b, correlation_id);
}

void fake_cupti_launch_kernel(const char* name, uint32_t stream, int64_t duration_ns, int64_t latency_ns) {
  fake_cupti_work w{};
  w.kind = FAKE_CUPTI_KERNEL;
  w.name = name;
  w.stream = stream;
  w.duration_ns = duration_ns;
  w.latency_ns = latency_ns;
  w.grid[0] = 132;
  w.block[0] = 256;
  w.registers_per_thread = 32;
  fake_cupti_call c{};
  c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  c.api_ns = 2000;
  c.work = &w;
  c.n_work = 1;
  fake_cupti_call_api(&c);
}

void fake_cupti_device_synchronize(void) {
  State& s = st();
  int64_t until;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    until = s.last_device_end_ns;
  }
  sleep_until(until);
}

int64_t fake_cupti_now_ns(void) { return now_ns(); }

void fake_cupti_reset(const fake_cupti_config* config) {
  State& s = st();
  if (s.scenario.joinable()) s.scenario.join();
  std::lock_guard<std::mutex> writer(s.writer_mu);
  std::lock_guard<std::mutex> lock(s.mu);
  s.cfg = config ? *config : fake_cupti_config{};
  fake_cupti_stats keep = s.stats;
  s.stats = fake_cupti_stats{};
  s.stats.enabled_kinds_mask = keep.enabled_kinds_mask;
  s.stats.callbacks_registered = keep.callbacks_registered;
  s.stats.timestamp_callback_set = keep.timestamp_callback_set;
  s.stats.subscribed = keep.subscribed;
  s.thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
  s.other_subscriber.clear();
  // Buffers the fake held belong to the previous client; forget them.
  clear_buffers_locked(s);
  s.pending_dropped = 0;
}

fake_cupti_stats fake_cupti_get_stats(void) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  fake_cupti_stats out = s.stats;
  out.buffers_held = 0;
  out.pending_device_work = s.pending.size();
  auto count = [&](const Slot& slot) {
    out.buffers_held += static_cast<int>(slot.closed.size()) + (slot.cur.data ? 1 : 0);
    for (const Buffer& b : slot.closed) out.pending_device_work += b.reserved.size();
    out.pending_device_work += slot.cur.reserved.size();
  };
  for (const Slot* slot : s.thread_slots) count(*slot);
  for (const auto& [device, slot] : s.device_slots) count(slot);
  out.thread_id_type = s.thread_id_type;
  uint32_t runtime = 0, driver = 0;
  for (uint32_t id = 1; id < callback_id_count(CUPTI_CB_DOMAIN_RUNTIME_API); ++id)
    runtime += api_traced(s, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  for (uint32_t id = 1; id < callback_id_count(CUPTI_CB_DOMAIN_DRIVER_API); ++id)
    driver += api_traced(s, CUPTI_CB_DOMAIN_DRIVER_API, id);
  out.runtime_cbids_enabled = runtime;
  out.driver_cbids_enabled = driver;
  return out;
}

}  // extern "C"
