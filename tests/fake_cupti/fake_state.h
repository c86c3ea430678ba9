// Internal state of the fake CUPTI (see fake_cupti.h for what it models).
//
// One process-wide State, guarded by `mu`. Records live in client buffers
// held in Slots: one Slot per application thread (CUDA 13's per-thread
// activity buffers) or one global Slot (PER_THREAD_ACTIVITY_BUFFER=0), and
// one per device (device records written at completion,
// FAKE_CUPTI_DEVICE_RECORDS_IN_DEVICE_BUFFER). A Slot has a current buffer
// being written, closed buffers waiting for delivery and, with the matrix's
// hold_empty, a prefetched empty spare.
// Client callbacks are never called with `mu` held: requests happen with
// `mu` released on the thread that needs a buffer, deliveries happen after
// the buffers were taken out of the state.
#pragma once

#include <cupti.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_cupti.h"

namespace fake {

constexpr uint32_t kMagic = 0x46414b45;  // "FAKE"
constexpr CUpti_ActivityKind kUnknownKind = static_cast<CUpti_ActivityKind>(0x7ff0);

// A device record reserved in a buffer before the device finished it.
struct Reserved {
  size_t offset;  // of the record struct in the buffer
  int64_t start_ns;  // device times (mono_ns)
  int64_t end_ns;
};

struct Buffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
  int64_t complete_at_ns = INT64_MIN;  // every record is complete once mono_ns() >= this
  std::vector<Reserved> reserved;
  bool full = false;  // closed because the next record did not fit (CUPTI hands these over by itself)
  size_t records = 0;
  size_t max_records = 0;  // bufferRequested's maxNumRecords: full once it holds this many (0: no limit)
  // Holds a planted record-level fault (zero timestamps, unknown kind): no
  // buffer-level fault is applied to it, so every planted fault stays
  // observable whatever order buffers complete in.
  bool keep_intact = false;
};

struct Slot {
  Buffer cur;                 // data == nullptr: none yet
  std::deque<Buffer> closed;  // full or flushed, waiting for their records to complete
  Buffer spare;               // hold_empty: requested ahead, empty; only a forced flush returns it
  bool is_device = false;
};

// Device work not yet written (records written at completion).
struct PendingWork {
  int64_t start_ns;  // device times (mono_ns)
  int64_t end_ns;
  uint32_t device;
  std::vector<uint8_t> record;  // the full record struct
  bool planted_fault = false;   // see Buffer::keep_intact
};

struct State {
  std::mutex mu;
  fake_cupti_config cfg{};
  fake_cupti_matrix matrix{};  // kept across resets (fake_cupti_configure)
  fake_cupti_stats stats{};
  bool per_thread = true;      // CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER
  bool switch_pending = false;  // matrix buffers=switch: per_thread goes to false at the next default flush
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  std::atomic<CUpti_TimestampCallbackFunc> timestamp{nullptr};
  std::atomic<int64_t> clock_offset{INT64_MIN};  // client clock - mono; measured when the clock changes
  CUpti_ActivityThreadIdType thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
  // Kinds and per-callback-id API tracing.
  bool runtime_all = false;
  bool driver_all = false;
  std::map<uint32_t, bool> runtime_override;  // cuptiActivityEnableRuntimeApi
  std::map<uint32_t, bool> driver_override;   // cuptiActivityEnableDriverApi
  // Subscriptions: one, or several in multi-subscriber mode (CUPTI 13.2)
  // when every one of them asked for it.
  struct Subscriber {
    int* token = nullptr;  // what its CUpti_SubscriberHandle points at
    CUpti_CallbackFunc callback = nullptr;
    void* user = nullptr;
    bool allow_multiple = false;
    std::set<std::pair<int, uint32_t>> enabled;  // (domain, cbid): cuptiEnableCallback
  };
  std::vector<Subscriber> subscribers;
  std::string other_subscriber;  // another tool holds the subscription
  int* second_client_token = nullptr;  // the keeps_subscription client's subscription (dropped by a reset)
  // Timestamp callback registrations: each one after the first leaves that
  // many kernel records at the head of every later activity session on
  // CUPTI's default clock (pytorch/pytorch#192021's standalone repro).
  uint32_t bad_clock_head = 0;  // kernel records of this activity session still to stamp wrongly
  bool zeroed_attr = false;     // CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER
  uint64_t default_flushes = 0;  // flush=lazy: every other one returns nothing
  // Buffers.
  std::vector<Slot*> thread_slots;        // never freed (threads may outlive a reset)
  Slot global_slot;                       // PER_THREAD_ACTIVITY_BUFFER=0
  std::map<uint32_t, Slot> device_slots;  // by device
  std::vector<PendingWork> pending;       // device-buffer mode: not yet complete
  std::atomic<uint64_t> pending_dropped{0};
  std::atomic<uint32_t> correlation{1};
  // The simulated device: when each (device, stream) is free again.
  std::map<std::pair<uint32_t, uint32_t>, int64_t> stream_free_ns;
  int64_t last_device_end_ns = INT64_MIN;  // latest end of any launched work
  uint32_t first_graph_correlation = 0;    // for the CUPTI 13.0 graph-correlation emulation
  std::deque<std::string> names;           // kernel names (records point into them; never move)
  // Worker thread (delivers completed buffers, completes device work).
  std::thread worker;
  std::condition_variable worker_cv;
  bool worker_quit = false;
  std::mutex writer_mu;  // one writer of device slots at a time (worker or flusher)
  std::thread scenario;
  std::thread teardown;  // the second client's deferred cuptiFinalize (FAKE_CUPTI_CLIENT_TEARDOWN)
};

State& st();
// The simulated device runs on CLOCK_MONOTONIC (gpuutil's session clock):
// explicit times given to the fake, scheduling, completion and sleeps use
// it. Records carry the client's clock: the registered timestamp callback,
// or CLOCK_REALTIME like CUPTI; clock_offset_ns() converts.
int64_t mono_ns();
int64_t now_ns();           // the client's clock
int64_t clock_offset_ns();  // now_ns() - mono_ns(), measured when the client's clock changed
void measure_clock_offset();

// Whether a kind / an API callback id is traced now (mu held).
bool kind_enabled(const State& s, CUpti_ActivityKind k);
bool api_traced(const State& s, CUpti_CallbackDomain domain, uint32_t cbid);

// Callback name table from the CUDA headers (fake_cupti_names.cpp).
const char* callback_name(CUpti_CallbackDomain domain, uint32_t cbid);
uint32_t callback_id(const char* name, int* domain);
uint32_t callback_id_count(CUpti_CallbackDomain domain);

// Closes current buffers (flush), takes every deliverable buffer out of the
// state and delivers it with `mu` released. forced: unfinished records get
// zero timestamps and everything is delivered.
void flush_and_deliver(bool flush, bool forced);
void ensure_worker();
void stop_worker();
void clear_buffers_locked(State& s);

uint32_t this_thread_id(const State& s);

// The matrix the fake starts with: GPUUTIL_FAKE_CUPTI_MATRIX, or defaults
// (a malformed value stops the process with the reason).
fake_cupti_matrix matrix_from_env();
// Puts the buffer attribute where the matrix starts it (mu held).
void apply_matrix_locked(State& s);
// Where device records go: config.device_records when set, else the matrix.
int device_records_mode(const State& s);
// cuptiFinalize: everything CUPTI holds is dropped (mu released).
void finalize_all();

// Streams and contexts as handles (fake_streams.cpp).
constexpr size_t kParamsBytes = 256;
// Stable per (device, id) until destroyed; a new one is announced to the
// subscribers (STREAM_CREATED) on the calling thread, mu released.
CUstream stream_handle(uint32_t device, uint32_t id);
uint32_t stream_id_of(CUstream s);                      // NULL: the legacy default stream (7)
CUcontext context_handle(uint32_t device);
// The call's functionParams (kParamsBytes, 8-aligned) and its context.
void build_params(const fake_cupti_call* call, unsigned char* out, CUcontext* context);

// The subscribers' callbacks enabled for (domain, cbid), to call with mu
// released (a copy).
struct Callee {
  CUpti_CallbackFunc callback;
  void* user;
};
std::vector<Callee> callees(int domain, uint32_t cbid);
// A resource callback (stream created / destroyed) to every subscriber that enabled it.
void resource_callback(uint32_t cbid, CUcontext context, CUstream stream);
// The callback id a kernel launch goes through in this cell (mu held or not).
uint32_t launch_cbid(const fake_cupti_matrix& m, bool per_thread_stream);

// Device work with no API call, many items under one lock (streaming
// scenarios); each item gets its own correlation id.
void emit_device_work_batch(const fake_cupti_work* work, size_t n);

}  // namespace fake
