// Which enqueued device work has not delivered its records yet: the part of
// "is step N complete?" that depends on the GPU.
//
// CUPTI delivers a kernel, copy or memset record only once the device has
// finished it, and a default flush withholds any buffer holding an
// unfinished record (cupti_activity.h, cuptiActivityFlushAll). A host that
// runs ahead of the GPU therefore ends step N long before step N's device
// records arrive. The tracker remembers every API call that enqueues device
// work (launches, graph launches, copies, memsets), learnt at API exit from
// the callback API (or from its API record when callbacks are unavailable),
// until a device record with its correlation id arrives, so the collector
// can say up to when its data is complete: before the start of the oldest
// call still waiting.
//
// Rules:
// - An ordinary launch or copy is done when one device record carries its
//   correlation id (records may arrive before or after the call is learnt).
//   Calls that enqueue nothing are never added: failed calls, zero-byte
//   copies (the collector filters them at API exit).
// - A call learnt at API exit whose API record is traced (api_record) is
//   done only once that record came too: CUPTI writes it when the call
//   returns, after the device record the call reserved, so a buffer closed
//   between the two (a flush, a record-count rotation) leaves the API
//   record in the next buffer, held by later launches' unfinished records.
//   Its step's launch latency and host calls need it. A later API record of
//   the same thread (written after it) means it came or was lost: done.
// - A graph launch has many records with one correlation id and no count;
//   it is done once a device record with a later correlation id arrives on a
//   stream the graph ran on (CUDA orders later work on a stream behind the
//   whole graph). With CUPTI 13.0's stale graph correlation ids
//   (stale_graph_ids) a graph launch may never see a record of its own: it is
//   then done once a later-correlation record arrives in its context.
// - Calls made during stream capture enqueue nothing: calls on a thread
//   between its StreamBeginCapture and StreamEndCapture are dropped.
// - A device-wide synchronisation (cudaDeviceSynchronize, cuCtxSynchronize)
//   finishes all earlier work of its context (device), and a default flush
//   after it returns all its records (cupti_activity.h,
//   cuptiActivityFlushAll): once such a flush was drained, everything
//   enqueued in that context before the sync is done. A sync or a call of
//   unknown context (0) applies to every context.
// - Nothing is given up for lack of time: the collector decides, by steps
//   and memory, when to stop waiting. The table holds at most max_entries;
//   past that the oldest is evicted and counted (take_evicted()).
//
// - Streams: a call learnt at API exit carries its raw stream handle and
//   context (StreamRef), not CUPTI's stream id; the collector resolves it
//   only for a launch it is about to name stuck (set_stream). Progress is
//   kept per (context, stream id): the time of the last drain in which a
//   device record of that stream arrived (stream_progress_ns), so a hung
//   stream is told apart from one that still delivers. A per-thread default
//   stream's id is learnt from the device records of that thread's earlier
//   launches on it (per_thread_stream): only its own thread could ask CUPTI.
//
// Vendor-free: it sees correlation ids, times, contexts and streams decoded
// by RecordDecoder or the collector's API callback. Contract: used by one
// thread (the collector's drain thread).
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace gpuutil::cupti {

constexpr uint32_t kUnknownStream = UINT32_MAX;

// Which stream a learnt call enqueued on, as its parameters say.
enum StreamKind : uint8_t {
  kStreamNone = 0,       // the call carries no stream gpuutil reads
  kStreamExplicit = 1,   // a stream handle (StreamRef::handle)
  kStreamLegacy = 2,     // the legacy default stream of its context (NULL, cudaStreamLegacy)
  kStreamPerThread = 3,  // the calling thread's per-thread default stream (cudaStreamPerThread, NULL in _ptsz calls)
};

// A call's stream before it is resolved: raw handles, never dereferenced.
struct StreamRef {
  uint8_t kind = kStreamNone;  // StreamKind
  uint64_t handle = 0;         // the CUstream (kStreamExplicit)
  uint64_t context = 0;        // the CUcontext of the call
};

class LaunchTracker {
 public:
  explicit LaunchTracker(size_t max_entries = size_t(1) << 20) : max_entries_(max_entries) {}

  // An API call that enqueues device work (kernel, graph, copy, memset).
  // `context`: CUPTI's context id (0 unknown); `stream`: CUPTI's stream id
  // (kUnknownStream); `name`: the caller's id of the kernel's name (0 none).
  // `api_record`: its API record is traced and has to come too (a call
  // learnt at API exit); false when the call was learnt from that record.
  void on_enqueue(uint32_t correlation_id, int64_t start_ns, uint64_t thread, bool graph, uint32_t context = 0,
                  uint32_t stream = kUnknownStream, uint32_t name = 0, StreamRef ref = {}, bool api_record = false);
  // The stream id the collector resolved for a waiting call.
  void set_stream(uint32_t correlation_id, uint32_t stream);
  // The drain that follows happens at now_ns (stream progress is stamped with it).
  void begin_drain(int64_t now_ns) { now_ns_ = now_ns; }
  // When a device record of (context, stream) last arrived; INT64_MIN never.
  int64_t stream_progress_ns(uint32_t context, uint32_t stream) const;
  // The id of `thread`'s per-thread default stream in `context`, learnt from
  // its earlier launches' device records; kUnknownStream when none came yet.
  uint32_t per_thread_stream(uint64_t thread, uint32_t context) const;
  // A call learnt at API exit that enqueues nothing but whose API record the
  // analysis uses (a stream or event sync, an event record): done once its
  // API record arrived (on_api_record), which a held buffer may delay.
  void on_host_call(uint32_t correlation_id, int64_t start_ns, uint64_t thread);
  // An API record arrived (`thread`: the id it carries).
  void on_api_record(uint32_t correlation_id, uint64_t thread = 0);
  // Stream capture on `thread`: begin at t_ns, end at t_ns.
  void on_capture_begin(uint64_t thread, int64_t t_ns);
  void on_capture_end(uint64_t thread, int64_t t_ns);
  // A kernel, copy or memset record arrived.
  void on_device(uint32_t correlation_id, uint32_t stream, uint32_t context = 0);
  // A device-wide synchronisation of `context` (0: every context) ended at end_ns.
  void on_device_sync(int64_t end_ns, uint32_t context = 0);
  // A default flush that began at flush_start_ns was drained: enqueues
  // before a sync that ended before it are done.
  void on_flush_drained(int64_t flush_start_ns);
  // CUPTI 13.0 in a later activity session: graph records carry stale ids.
  void set_stale_graph_ids(bool on) { stale_graph_ids_ = on; }

  struct Waiting {
    uint32_t correlation_id = 0;
    int64_t start_ns = INT64_MAX;  // INT64_MAX: nothing waits
    uint32_t context = 0;
    uint32_t stream = kUnknownStream;
    uint32_t name = 0;
    uint64_t thread = 0;
    StreamRef ref;  // its stream before resolution (stream == kUnknownStream)
  };
  // The oldest enqueue still waiting for its records; device_only: the
  // oldest whose device work has not delivered (what a stuck GPU runs).
  Waiting oldest_waiting(bool device_only = false) const;
  int64_t oldest_waiting_ns() const { return oldest_waiting().start_ns; }
  // Enqueues evicted by the size bound since the last call, and the latest
  // start among them.
  uint64_t take_evicted(int64_t* latest_start_ns = nullptr);
  size_t waiting() const { return entries_.size(); }
  // Forgets every waiting call (their records go to another client now).
  void clear() {
    entries_.clear();
    graphs_.clear();
    syncs_.clear();
    api_waits_.clear();
    api_latest_.clear();  // correlation ids may start again (cuptiFinalize)
    api_latest_slot_ = nullptr;
    take_presumed(nullptr);
  }
  uint64_t device_records() const { return device_records_; }  // seen so far (progress)
  // Enqueues that on_flush_drained() declared done (a device sync and a
  // drained flush after them) with no device record of their own, since the
  // last call; *earliest_start_ns: the earliest start among them. Normally
  // their records were withheld in a buffer CUPTI still holds; with no
  // buffer held, they went to another client (TakeoverWatch).
  uint64_t take_presumed(int64_t* earliest_start_ns) {
    const uint64_t n = presumed_;
    if (earliest_start_ns != nullptr) *earliest_start_ns = presumed_earliest_ns_;
    presumed_ = 0;
    presumed_earliest_ns_ = INT64_MAX;
    return n;
  }
  // Whether any enqueue of device work waits (not only API records): a
  // scan that stops at the first one.
  bool device_work_waiting() const {
    for (const auto& kv : entries_) {
      if (!kv.second.api_only && !kv.second.device_done) return true;
    }
    return false;
  }

 private:
  struct Entry {
    int64_t start_ns = 0;  // API call start
    uint64_t thread = 0;
    bool device_seen = false;
    bool graph = false;
    bool api_only = false;  // waits for its API record, not a device record
    bool api_pending = false;  // and its API record (api_record), not come yet
    bool device_done = false;  // its device work delivered; only its API record is missing
    uint32_t context = 0;
    uint32_t stream = kUnknownStream;
    uint32_t name = 0;
    StreamRef ref;
    std::vector<uint32_t> streams;  // graphs: where its records ran
  };
  static uint64_t stream_key(uint32_t context, uint32_t stream) { return (uint64_t(context) << 32) | stream; }
  void learn_per_thread(const Entry& e, uint32_t stream, uint32_t context);
  struct Capture {
    int64_t begin_ns;
    int64_t end_ns;  // INT64_MAX while open
  };
  struct Sync {
    int64_t end_ns;
    uint32_t context;
  };
  bool captured(uint64_t thread, int64_t t_ns) const;
  void erase(std::map<uint32_t, Entry>::iterator it);
  // Its device work delivered: done, or waiting only for its API record
  // (an entry no longer in graphs_).
  void device_delivered(std::map<uint32_t, Entry>::iterator it);
  // An API record of `thread` later than `corr` came: corr's came before it, or was lost.
  bool later_api_record_seen(uint64_t thread, uint32_t corr) const;
  void note_api_wait(uint32_t corr);
  void release_api_waits();
  void evict_if_full();

  size_t max_entries_;
  bool stale_graph_ids_ = false;
  std::map<uint32_t, Entry> entries_;  // by correlation id (CUPTI numbers calls in order)
  std::vector<uint32_t> graphs_;        // correlation ids of graph entries
  std::unordered_map<uint64_t, std::vector<Capture>> captures_;  // per thread, recent
  std::vector<Sync> syncs_;             // device syncs not yet applied
  // Device records that arrived before their call was learnt (direct-mapped
  // by correlation id; an older one is forgotten when its slot is reused).
  struct EarlyRecord {
    uint32_t correlation_id = 0;
    uint32_t stream = 0;
  };
  static constexpr size_t kEarlySlots = 8192;
  std::vector<EarlyRecord> early_ = std::vector<EarlyRecord>(kEarlySlots);
  std::vector<uint32_t> api_seen_ = std::vector<uint32_t>(kEarlySlots);  // API records, the same way
  std::vector<uint32_t> api_waits_;  // entries whose device work delivered, waiting for their API record
  size_t api_waits_sweep_at_ = 4096;  // swept past this length (note_api_wait)
  std::unordered_map<uint64_t, uint32_t> api_latest_;  // thread -> latest correlation id of its API records
  uint64_t api_latest_thread_ = 0;                      // the last one touched
  uint32_t* api_latest_slot_ = nullptr;
  int64_t now_ns_ = INT64_MIN;
  std::unordered_map<uint64_t, int64_t> stream_progress_;  // stream_key -> last drain with a record of it
  uint64_t progress_key_ = UINT64_MAX;                       // the last one touched (records come in runs)
  int64_t* progress_slot_ = nullptr;                          // node-based: stays valid
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> per_thread_;  // (thread, context) -> its per-thread stream id
  uint64_t evicted_ = 0;
  int64_t evicted_latest_ns_ = INT64_MIN;
  uint64_t device_records_ = 0;
  uint64_t presumed_ = 0;
  int64_t presumed_earliest_ns_ = INT64_MAX;
};

}  // namespace gpuutil::cupti
