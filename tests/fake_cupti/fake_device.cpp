// The fake CUPTI's simulated device and activity buffers (see fake_cupti.h).
//
// API calls write their API record into the calling thread's buffer (or the
// global one) complete, before their device records or, with the matrix's
// api_record_at_exit, after them at the call's end. Device work is scheduled
// on (device, stream) timelines on the session clock; its record is complete
// only once that time has passed: reserved in the writing buffer at launch
// (CUDA 13 per-thread buffers), or written at completion into the device's
// buffer. A default flush seals partly filled buffers, or (keep_appending)
// leaves one holding an incomplete record open. Delivery takes buffers out
// of the state under the lock and calls the client with the lock released.
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "fake_cupti_matrix.h"
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

// Where the calling thread's records go now (mu held).
Slot& writing_slot_locked(State& s) { return s.per_thread ? thread_slot_locked(s) : s.global_slot; }

void sleep_until(int64_t t_ns) {
  for (int64_t now = mono_ns(); now < t_ns; now = mono_ns()) {
    const int64_t d = std::min<int64_t>(t_ns - now, 2'000'000);
    timespec ts{0, static_cast<long>(d)};
    nanosleep(&ts, nullptr);
  }
}

// Asks the registered client for a buffer, on this thread with `lk`
// released. data == nullptr: none given.
Buffer request_buffer(std::unique_lock<std::mutex>& lk, State& s) {
  ++s.stats.buffers_requested;
  Buffer b;
  CUpti_BuffersCallbackRequestFunc request = s.request;
  if (request == nullptr) return b;
  uint8_t* buf = nullptr;
  size_t size = 0, max_records = 0;
  lk.unlock();
  request(&buf, &size, &max_records);
  lk.lock();
  b.data = buf;
  b.size = size;
  b.max_records = max_records;
  if (buf != nullptr && size > 0) {
    if (!s.zeroed_attr) {
      // CUPTI zeroes the buffer itself, on this (the application's) thread
      // (cupti_activity.h, CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER = 0).
      lk.unlock();
      std::memset(buf, 0, size);
      lk.lock();
      ++s.stats.buffers_zeroed_by_cupti;
    } else {
      // The client promised a zeroed buffer: spot-check a word per 4 KiB.
      bool zero = true;
      for (size_t at = 0; at + sizeof(uint64_t) <= size && zero; at += 4096) {
        uint64_t word;
        std::memcpy(&word, buf + at, sizeof(word));
        zero = word == 0;
      }
      if (!zero) ++s.stats.buffers_not_zeroed;
    }
  }
  return b;
}

// Appends one record to `slot`. May release `lk` while the client is asked
// for a buffer (on this thread). `reserved`: a device record that is complete
// only at `end_ns`. Returns false when the record was lost for lack of a buffer.
bool put(std::unique_lock<std::mutex>& lk, State& s, Slot& slot, const void* record, size_t bytes, bool reserved,
         int64_t start_ns, int64_t end_ns, bool unknown_kind = false, bool planted_fault = false) {
  ++s.stats.records_emitted;
  const size_t need = 8 + ((bytes + 7) & ~size_t(7));
  for (;;) {
    if (slot.cur.data != nullptr) {
      // Full by size, or by bufferRequested's maxNumRecords ("filled with at
      // most that many records before it is returned", cupti_activity.h).
      const bool by_count = slot.cur.max_records != 0 && slot.cur.records >= slot.cur.max_records;
      if (!by_count && slot.cur.used + need <= slot.cur.size) break;
      if (by_count) ++s.stats.buffers_full_by_count;
      slot.cur.full = true;
      slot.closed.push_back(std::move(slot.cur));
      slot.cur = Buffer{};
      s.worker_cv.notify_one();
    }
    Buffer b;
    if (slot.spare.data != nullptr) {
      b = std::move(slot.spare);
      slot.spare = Buffer{};
    } else {
      b = request_buffer(lk, s);
    }
    if (b.data == nullptr || b.size < need) {
      ++s.stats.buffers_denied;
      ++s.stats.records_lost_no_buffer;
      s.pending_dropped.fetch_add(1);
      return false;
    }
    if (slot.cur.data != nullptr) {
      // Another writer of a shared slot got one meanwhile: this one goes
      // back empty at the next flush.
      slot.closed.push_back(std::move(b));
      continue;
    }
    slot.cur = std::move(b);
    if (s.matrix.hold_empty && slot.spare.data == nullptr) {
      Buffer spare = request_buffer(lk, s);  // prefetched, held empty
      if (slot.spare.data == nullptr) {
        slot.spare = std::move(spare);
      } else if (spare.data != nullptr) {
        slot.closed.push_back(std::move(spare));
      }
    }
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
  ++b.records;
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
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpyPtoP4*>(rec);
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
      if (!forced && s.matrix.keep_appending && slot.cur.complete_at_ns > now) {
        // Not sealed: it holds an incomplete record, so it is not returned,
        // and later records keep going into it.
        ++s.stats.buffers_left_open;
        ++s.stats.buffers_withheld;
      } else {
        slot.closed.push_back(std::move(slot.cur));
        slot.cur = Buffer{};
      }
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
    if (forced && slot.spare.data != nullptr) {  // and a held spare
      out.push_back(std::move(slot.spare));
      slot.spare = Buffer{};
    }
  };
  for (Slot* slot : s.thread_slots) visit(*slot);
  visit(s.global_slot);
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

// CLOCK_REALTIME - CLOCK_MONOTONIC (CUPTI's default clock against the
// simulated device's), measured once.
int64_t realtime_offset_ns() {
  static const int64_t offset = [] {
    timespec r;
    clock_gettime(CLOCK_REALTIME, &r);
    return int64_t(r.tv_sec) * 1'000'000'000 + r.tv_nsec - mono_ns();
  }();
  return offset;
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
std::vector<uint8_t> device_record(State& s, const fake_cupti_work& w, int64_t start, int64_t end, uint32_t corr,
                                   bool wrong_clock = false) {
  std::vector<uint8_t> rec;
  // Device times -> the client's clock, through CUPTI's GPU->CPU
  // interpolation (the matrix's skew); or CUPTI's default clock (a record
  // at the head of a session after a re-registration).
  const int64_t offset = (wrong_clock ? realtime_offset_ns() : clock_offset_ns()) - s.matrix.skew_ns;
  start += offset;
  end += offset;
  const uint32_t context = w.device + 1;
  // The fields every device record has, and the record into `rec`.
  auto place = [&](auto r, CUpti_ActivityKind kind) {
    r.kind = kind;
    r.start = static_cast<uint64_t>(start);
    r.end = static_cast<uint64_t>(end);
    r.deviceId = w.device;
    r.contextId = context;
    r.streamId = w.stream;
    r.correlationId = corr;
    r.graphId = w.graph_id;
    rec.resize(sizeof(r));
    std::memcpy(rec.data(), &r, sizeof(r));
  };
  if (w.kind == FAKE_CUPTI_KERNEL) {
    CUpti_ActivityKernel10 k{};
    k.completed = static_cast<uint64_t>(end);
    k.gridX = static_cast<int32_t>(w.grid[0] ? w.grid[0] : 1);
    k.gridY = static_cast<int32_t>(w.grid[1] ? w.grid[1] : 1);
    k.gridZ = static_cast<int32_t>(w.grid[2] ? w.grid[2] : 1);
    k.blockX = static_cast<int32_t>(w.block[0] ? w.block[0] : 1);
    k.blockY = static_cast<int32_t>(w.block[1] ? w.block[1] : 1);
    k.blockZ = static_cast<int32_t>(w.block[2] ? w.block[2] : 1);
    k.registersPerThread = static_cast<uint16_t>(w.registers_per_thread);
    k.dynamicSharedMemory = static_cast<int32_t>(w.shared_memory_bytes);
    k.name = keep_name(s, w.name);
    place(k, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  } else if (w.kind == FAKE_CUPTI_MEMCPY) {
    CUpti_ActivityMemcpy6 m{};
    m.copyKind = w.copy_kind ? w.copy_kind : uint8_t(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    m.srcKind = w.src_kind;
    m.dstKind = w.dst_kind;
    m.bytes = w.bytes;
    place(m, CUPTI_ACTIVITY_KIND_MEMCPY);
  } else if (w.kind == FAKE_CUPTI_MEMCPY_PEER) {
    CUpti_ActivityMemcpyPtoP4 m{};
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = w.bytes;
    m.srcDeviceId = w.device;
    m.srcContextId = context;
    m.dstDeviceId = w.device ^ 1u;
    m.dstContextId = (w.device ^ 1u) + 1;
    place(m, CUPTI_ACTIVITY_KIND_MEMCPY2);
  } else {
    CUpti_ActivityMemset4 m{};
    m.bytes = w.bytes;
    place(m, CUPTI_ACTIVITY_KIND_MEMSET);
  }
  return rec;
}

CUpti_ActivityKind activity_kind(int work_kind) {
  return work_kind == FAKE_CUPTI_KERNEL        ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
         : work_kind == FAKE_CUPTI_MEMCPY      ? CUPTI_ACTIVITY_KIND_MEMCPY
         : work_kind == FAKE_CUPTI_MEMCPY_PEER ? CUPTI_ACTIVITY_KIND_MEMCPY2
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
  if (w.kind == FAKE_CUPTI_KERNEL && (s.cfg.lose_records > 0 || s.cfg.drop_records > 0)) {
    // Never written: lost with a buffer (not reported), or dropped (reported).
    if (s.cfg.lose_records > 0) {
      --s.cfg.lose_records;
    } else {
      --s.cfg.drop_records;
      s.pending_dropped.fetch_add(1);
    }
    ++s.stats.records_lost;
    s.last_device_end_ns = std::max(s.last_device_end_ns, end);
    return;
  }
  fake_cupti_work placed = w;
  if (w.graph_id != 0 && s.matrix.graph_internal_streams) placed.stream = 1000 + w.stream;  // a graph's own streams
  bool wrong_clock = false;
  if (w.kind == FAKE_CUPTI_KERNEL && s.bad_clock_head > 0) {
    --s.bad_clock_head;
    ++s.stats.records_on_wrong_clock;
    wrong_clock = true;
  }
  std::vector<uint8_t> rec = device_record(s, placed, start, end, corr, wrong_clock);
  bool unknown = false;
  bool planted = false;
  if (w.kind == FAKE_CUPTI_KERNEL) {
    if (s.cfg.no_timing_records > 0) {
      --s.cfg.no_timing_records;
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec.data());
      k->start = k->end = 0;
      planted = true;
    } else if (s.cfg.zero_timestamps > 0) {
      --s.cfg.zero_timestamps;
      reinterpret_cast<CUpti_ActivityKernel10*>(rec.data())->start = 0;
      planted = true;
    } else if (s.cfg.unknown_kinds > 0) {
      --s.cfg.unknown_kinds;
      unknown = true;
    }
  }
  s.last_device_end_ns = std::max(s.last_device_end_ns, end);
  if (device_records_mode(s) == FAKE_CUPTI_DEVICE_RECORDS_IN_DEVICE_BUFFER && !unknown) {
    s.pending.push_back({start, end, w.device, std::move(rec), planted || wrong_clock});
    return;
  }
  put(lk, s, slot, rec.data(), rec.size(), true, start, end, unknown, planted || wrong_clock);
}

}  // namespace

State& st() {
  static State* s = [] {
    auto* n = new State();  // never destroyed: client threads may outlive statics
    n->matrix = matrix_from_env();
    apply_matrix_locked(*n);
    return n;
  }();
  return *s;
}

fake_cupti_matrix matrix_from_env() {
  const char* env = std::getenv("GPUUTIL_FAKE_CUPTI_MATRIX");
  fake_cupti_matrix m{};
  const std::string err = fake_matrix::parse(env ? env : "", m);
  if (!err.empty()) {
    std::fprintf(stderr, "fake CUPTI: GPUUTIL_FAKE_CUPTI_MATRIX=%s: %s\n", env, err.c_str());
    std::abort();
  }
  return m;
}

void apply_matrix_locked(State& s) {
  s.per_thread = s.matrix.buffers != FAKE_CUPTI_BUFFERS_GLOBAL;
  s.switch_pending = s.matrix.buffers == FAKE_CUPTI_BUFFERS_SWITCH;
}

int device_records_mode(const State& s) {
  return s.cfg.device_records != 0 ? s.cfg.device_records : s.matrix.device_records;
}

int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Measured, not read per record: two reads of one clock differ by tens of
// ns, and a client on the session clock must get exactly the times it gave.
// The read of the client's clock bracketed most tightly by two monotonic
// reads wins: a thread preempted inside a bracket (a loaded host) would
// otherwise shift every record by up to half the preemption, enough to put
// an API record before the cuptiGetTimestamp() read made just before its
// call (a flaky gpu_check probe under load).
void measure_clock_offset() {
  // At least 5 reads; more (up to 1,000) until one is bracketed within 2 us.
  int64_t best = 0, best_bracket = INT64_MAX;
  for (int i = 0; i < 1000; ++i) {
    if (i >= 5 && best_bracket <= 2'000) break;
    const int64_t a = mono_ns();
    const int64_t c = now_ns();
    const int64_t b = mono_ns();
    if (b - a < best_bracket) {
      best_bracket = b - a;
      best = c - (a + (b - a) / 2);
    }
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
  if (flush && !forced && s.matrix.lazy_flush && ++s.default_flushes % 2 == 1) {
    // flush=lazy: this default flush returns nothing at all (the header
    // promises complete buffers only "eventually"; the next one does).
    ++s.stats.flushes_returning_nothing;
    return;
  }
  const int64_t now = mono_ns();
  complete_device_work(lk, s, now, forced);
  std::vector<Buffer> out = take_locked(s, flush, forced, now);
  if (flush && !forced && s.switch_pending) {
    // buffers=switch: from now on every thread writes the global buffer, as
    // after another client set PER_THREAD_ACTIVITY_BUFFER=0 mid-session.
    s.switch_pending = false;
    s.per_thread = false;
  }
  deliver(lk, s, std::move(out));
}

void ensure_worker() {
  State& s = st();
  if (!s.worker.joinable()) s.worker = std::thread(worker_loop);
}

uint64_t forget_buffers_locked(State& s) {
  uint64_t n = 0;
  auto forget = [&](Slot& slot) {
    n += slot.closed.size() + (slot.cur.data ? 1 : 0) + (slot.spare.data ? 1 : 0);
    slot.cur = Buffer{};
    slot.spare = Buffer{};
    slot.closed.clear();
  };
  for (Slot* slot : s.thread_slots) forget(*slot);
  forget(s.global_slot);
  for (auto& [device, slot] : s.device_slots) forget(slot);
  s.device_slots.clear();
  s.pending.clear();
  return n;
}

void finalize_all() {
  State& s = st();
  std::lock_guard<std::mutex> writer(s.writer_mu);
  std::lock_guard<std::mutex> lock(s.mu);
  s.stats.buffers_lost_at_finalize += forget_buffers_locked(s);
  s.stats.enabled_kinds_mask = 0;
  s.runtime_all = s.driver_all = false;
  s.runtime_override.clear();
  s.driver_override.clear();
  s.request = nullptr;
  s.complete = nullptr;
  s.stats.callbacks_registered = 0;
  s.timestamp.store(nullptr);
  s.stats.timestamp_callback_set = 0;
  s.stats.timestamp_registrations = 0;  // CUPTI starts afresh: the next registration is a first one
  s.bad_clock_head = 0;
  measure_clock_offset();
  s.stats.subscribed = 0;
  s.subscribers.clear();
  s.stats.subscribers = 0;
  s.second_client_token = nullptr;
  s.thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
  s.per_thread = true;
  s.switch_pending = false;
  ++s.stats.finalized;
}

std::vector<Callee> callees(int domain, uint32_t cbid) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<Callee> out;
  for (const State::Subscriber& sub : s.subscribers) {
    if (sub.callback != nullptr && sub.enabled.count({domain, cbid}) != 0) out.push_back({sub.callback, sub.user});
  }
  return out;
}

void resource_callback(uint32_t cbid, CUcontext context, CUstream stream) {
  const std::vector<Callee> to_call = callees(CUPTI_CB_DOMAIN_RESOURCE, cbid);
  if (to_call.empty()) return;
  CUpti_ResourceData d{};
  d.context = context;
  d.resourceHandle.stream = stream;
  for (const Callee& c : to_call) c.callback(c.user, CUPTI_CB_DOMAIN_RESOURCE, cbid, &d);
}

uint32_t launch_cbid(const fake_cupti_matrix& m, bool per_thread_stream) {
  if (m.launch_api == FAKE_CUPTI_LAUNCH_RUNTIME) {
    return per_thread_stream ? CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000
                             : CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  }
  // nvcc 13: a <<<>>> launch is __cudaLaunchKernel (crt/host_runtime.h), or
  // its _ptsz variant under --default-stream per-thread.
  return per_thread_stream ? CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000
                           : CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000;
}

void clear_buffers_locked(State& s) {
  forget_buffers_locked(s);
  s.stream_free_ns.clear();
  s.last_device_end_ns = INT64_MIN;
}

}  // namespace fake

using namespace fake;

namespace {

// The subscribers' callbacks (callback API) for one call at `site`, for
// every subscriber that enabled that callback id; called with mu released,
// on the calling thread. The parameters are the call's generated *_params
// struct (build_params): the stream handle and byte count where the real
// struct has them. contextUid and context are the calling thread's current
// context (current_device, else the work's device).
void api_callback(const fake_cupti_call* call, uint32_t corr, int return_value, CUpti_ApiCallbackSite site,
                  uint64_t* correlation_data) {
  const std::vector<Callee> to_call = callees(call->domain, call->cbid);
  if (to_call.empty()) return;
  const bool has_work = call->n_work > 0 && call->work != nullptr;
  alignas(16) unsigned char params[kParamsBytes];
  CUcontext context = nullptr;
  build_params(call, params, &context);
  const uint32_t current = call->current_device > 0 ? uint32_t(call->current_device - 1)
                                                    : (has_work ? call->work[0].device : call->sync_device);
  int rv = return_value;
  CUpti_CallbackData d{};
  d.callbackSite = site;
  d.functionName = callback_name(static_cast<CUpti_CallbackDomain>(call->domain), call->cbid);
  d.functionParams = params;
  d.functionReturnValue = &rv;
  d.symbolName = has_work && call->work[0].kind == FAKE_CUPTI_KERNEL ? call->work[0].name : nullptr;
  d.contextUid = current + 1;  // as activity records' contextId
  d.context = context_handle(current);
  d.correlationData = correlation_data;
  d.correlationId = corr;
  for (const Callee& c : to_call) c.callback(c.user, static_cast<CUpti_CallbackDomain>(call->domain), call->cbid, &d);
}

// The driver call a runtime call makes inside (matrix nested=outer|inner),
// or 0: launches call cuLaunchKernel(Ex), async copies cuMemcpyAsync.
uint32_t nested_driver_cbid(const fake_cupti_call* call) {
  if (call->domain != CUPTI_CB_DOMAIN_RUNTIME_API) return 0;
  const char* n = callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, call->cbid);
  if (n == nullptr) return 0;
  const std::string_view name(n);
  const bool ptsz = name.find("_ptsz") != std::string_view::npos;
  int domain = 0;
  if (name.find("LaunchKernelExC") != std::string_view::npos) {
    return callback_id(ptsz ? "cuLaunchKernelEx_ptsz" : "cuLaunchKernelEx", &domain);
  }
  if (name.find("LaunchKernel") != std::string_view::npos && name.find("Cooperative") == std::string_view::npos) {
    return callback_id(ptsz ? "cuLaunchKernel_ptsz" : "cuLaunchKernel", &domain);
  }
  if (name.rfind("cudaMemcpyAsync", 0) == 0) return callback_id(ptsz ? "cuMemcpyAsync_ptsz" : "cuMemcpyAsync", &domain);
  return 0;
}

// One API call (see fake_cupti_call_api); return_value != 0: it failed, and
// enqueues and waits for nothing.
uint32_t call_api(const fake_cupti_call* call, int return_value) {
  State& s = st();
  const uint32_t corr = s.correlation.fetch_add(1);
  const bool explicit_times = call->start_ns != 0 || call->end_ns != 0;
  const bool failed = return_value != 0;
  const int n_work = failed ? 0 : call->n_work;
  int64_t start = explicit_times ? call->start_ns : mono_ns();
  int64_t end = explicit_times ? call->end_ns : start + call->api_ns;
  // No call is recorded before it began: a call planted ahead of real time
  // is made at its start (a scenario computed ahead plays in real time).
  if (start > mono_ns()) sleep_until(start);
  int nested_mode;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    nested_mode = s.matrix.nested_driver;
  }
  // A driver call inside this runtime call: its own correlation id, its own
  // callbacks and API record, the same work.
  fake_cupti_call inner = *call;
  inner.domain = CUPTI_CB_DOMAIN_DRIVER_API;
  inner.cbid = nested_mode != FAKE_CUPTI_NESTED_NONE && !failed ? nested_driver_cbid(call) : 0;
  const uint32_t inner_corr = inner.cbid != 0 ? s.correlation.fetch_add(1) : 0;
  const uint32_t record_corr = inner_corr != 0 && nested_mode == FAKE_CUPTI_NESTED_INNER_ID ? inner_corr : corr;
  uint64_t correlation_data = 0, inner_data = 0;
  api_callback(call, corr, return_value, CUPTI_API_ENTER, &correlation_data);
  if (inner_corr != 0) api_callback(&inner, inner_corr, 0, CUPTI_API_ENTER, &inner_data);
  std::unique_lock<std::mutex> lk(s.mu);
  // Schedule the device work on its streams.
  std::vector<std::pair<int64_t, int64_t>> times;
  for (int i = 0; i < n_work; ++i) {
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
  if (call->sync != FAKE_CUPTI_SYNC_NONE && !explicit_times && !failed) {
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
  // The call's host records: its API record (if that callback id is
  // traced) and, for a synchronizing call, its synchronization record.
  auto api_record = [&](Slot& slot, int domain, uint32_t cbid, uint32_t id, int64_t a, int64_t b, int rv) {
    const CUpti_CallbackDomain dom = static_cast<CUpti_CallbackDomain>(domain);
    if (!api_traced(s, dom, cbid)) return;
    const int64_t offset = clock_offset_ns();
    CUpti_ActivityAPI r{};
    r.kind = dom == CUPTI_CB_DOMAIN_DRIVER_API ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    r.cbid = cbid;
    r.start = static_cast<uint64_t>(a + offset);
    r.end = static_cast<uint64_t>(b + offset);
    r.processId = static_cast<uint32_t>(getpid());
    r.threadId = this_thread_id(s);
    r.correlationId = id;
    r.returnValue = static_cast<uint32_t>(rv);
    put(lk, s, slot, &r, sizeof(r), false, 0, 0);
  };
  auto host_records = [&](Slot& slot) {
    api_record(slot, call->domain, call->cbid, corr, start, end, return_value);
    if (inner_corr != 0) api_record(slot, inner.domain, inner.cbid, inner_corr, start, end, 0);
    if (call->sync != FAKE_CUPTI_SYNC_NONE && !failed && kind_enabled(s, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) {
      CUpti_ActivitySynchronization2 y{};
      y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
      y.type = call->sync == FAKE_CUPTI_SYNC_DEVICE ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE
                                                    : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
      y.start = static_cast<uint64_t>(start + clock_offset_ns());
      y.end = static_cast<uint64_t>(end + clock_offset_ns());
      y.correlationId = corr;
      y.contextId = call->sync_device + 1;
      y.streamId = call->sync_stream;
      put(lk, s, slot, &y, sizeof(y), false, 0, 0);
    }
  };
  const bool at_exit = s.matrix.api_record_at_exit != 0;
  if (!at_exit) host_records(writing_slot_locked(s));
  if (!call->captured) {
    for (int i = 0; i < n_work; ++i) {
      emit_work(lk, s, writing_slot_locked(s), call->work[i], times[i].first, times[i].second, record_corr);
    }
  }
  if (at_exit) {
    // CUPTI writes the API record when the call returns: after the device
    // records the call reserved, and not before the call's end.
    if (end > mono_ns()) {
      lk.unlock();
      sleep_until(end);
      lk.lock();
    }
    host_records(writing_slot_locked(s));
  }
  lk.unlock();
  if (inner_corr != 0) api_callback(&inner, inner_corr, 0, CUPTI_API_EXIT, &inner_data);
  api_callback(call, corr, return_value, CUPTI_API_EXIT, &correlation_data);
  return corr;
}

}  // namespace

extern "C" {

uint32_t fake_cupti_call_api(const fake_cupti_call* call) { return call_api(call, 0); }

uint32_t fake_cupti_call_api_failed(const fake_cupti_call* call, int return_value) {
  return call_api(call, return_value != 0 ? return_value : 1);
}

}  // extern "C"

namespace fake {
void emit_device_work_batch(const fake_cupti_work* work, size_t n) {
  State& s = st();
  std::unique_lock<std::mutex> lk(s.mu);
  for (size_t i = 0; i < n; ++i) {
    emit_work(lk, s, writing_slot_locked(s), work[i], work[i].start_ns, work[i].end_ns, s.correlation.fetch_add(1));
  }
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
  emit_work(lk, s, writing_slot_locked(s), *work, a, b, correlation_id);
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
  c.cbid = fake_cupti_launch_cbid(stream == fake_cupti_per_thread_stream());
  c.api_ns = 2000;
  c.work = &w;
  c.n_work = 1;
  fake_cupti_call_api(&c);
}

int fake_cupti_inject(const char* fault, int n) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string f = fault ? fault : "";
  if (f == "lose_records") {
    s.cfg.lose_records += n;
  } else if (f == "drop_records") {
    s.cfg.drop_records += n;
  } else if (f == "no_timing_records") {
    s.cfg.no_timing_records += n;
  } else if (f == "zero_timestamps") {
    s.cfg.zero_timestamps += n;
  } else {
    return -1;
  }
  return 0;
}

uint32_t fake_cupti_launch_cbid(int per_thread_stream) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  return launch_cbid(s.matrix, per_thread_stream != 0);
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
  fake_cupti_wait();
  std::lock_guard<std::mutex> writer(s.writer_mu);
  std::lock_guard<std::mutex> lock(s.mu);
  s.cfg = config ? *config : fake_cupti_config{};
  fake_cupti_stats keep = s.stats;
  s.stats = fake_cupti_stats{};
  s.stats.enabled_kinds_mask = keep.enabled_kinds_mask;
  s.stats.callbacks_registered = keep.callbacks_registered;
  // CUPTI's own clock again, as in a fresh process (registrations are
  // counted afresh: a client registers anew).
  s.timestamp.store(nullptr);
  measure_clock_offset();
  s.stats.subscribed = keep.subscribed;
  s.thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
  s.other_subscriber.clear();
  // The keeps_subscription client's subscription lasts the process in real
  // life; tests start afresh.
  if (s.second_client_token != nullptr) {
    for (auto it = s.subscribers.begin(); it != s.subscribers.end(); ++it) {
      if (it->token == s.second_client_token) {
        s.subscribers.erase(it);
        break;
      }
    }
    s.second_client_token = nullptr;
    s.stats.subscribed = s.subscribers.empty() ? 0 : 1;
  }
  s.stats.subscribers = static_cast<uint32_t>(s.subscribers.size());
  s.bad_clock_head = 0;  // registrations are counted from here (each test starts as a fresh process would)
  s.default_flushes = 0;
  // Buffers the fake held belong to the previous client; forget them.
  clear_buffers_locked(s);
  s.pending_dropped = 0;
  apply_matrix_locked(s);
}

int fake_cupti_configure(const fake_cupti_matrix* matrix) {
  State& s = st();
  const fake_cupti_matrix m = matrix ? *matrix : matrix_from_env();
  std::lock_guard<std::mutex> lock(s.mu);
  s.matrix = m;
  apply_matrix_locked(s);
  return 0;
}

int fake_cupti_configure_text(const char* cell) {
  fake_cupti_matrix m{};
  const std::string err = fake_matrix::parse(cell ? cell : "", m);
  if (!err.empty()) {
    std::fprintf(stderr, "fake CUPTI: matrix \"%s\": %s\n", cell, err.c_str());
    return -1;
  }
  return fake_cupti_configure(&m);
}

const char* fake_cupti_cells_for_run(void) {
  static const std::string cells = [] {
    std::string out;
    for (const fake_cupti_matrix& m : fake_matrix::cells_for_run()) out += (out.empty() ? "" : ";") + fake_matrix::name(m);
    return out;
  }();
  return cells.c_str();
}

fake_cupti_matrix fake_cupti_get_matrix(void) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.matrix;
}

fake_cupti_stats fake_cupti_get_stats(void) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  fake_cupti_stats out = s.stats;
  out.buffers_held = 0;
  out.pending_device_work = s.pending.size();
  auto count = [&](const Slot& slot) {
    out.buffers_held += static_cast<int>(slot.closed.size()) + (slot.cur.data ? 1 : 0) + (slot.spare.data ? 1 : 0);
    for (const Buffer& b : slot.closed) out.pending_device_work += b.reserved.size();
    out.pending_device_work += slot.cur.reserved.size();
  };
  for (const Slot* slot : s.thread_slots) count(*slot);
  count(s.global_slot);
  for (const auto& [device, slot] : s.device_slots) count(slot);
  out.thread_id_type = s.thread_id_type;
  out.per_thread_buffers = s.per_thread ? 1 : 0;
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
