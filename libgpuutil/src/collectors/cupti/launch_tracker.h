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
// What completes a call (and nothing else does):
// - One device record with its correlation id (or the id of a call nested
//   in it, on_enqueue's nested_in), whatever its timestamps: a record with
//   zero or inverted times (CUPTI's "no timing information ... for lack of
//   device memory") arrived, and its launch waits no more. Failed calls
//   and zero-byte copies are never added (the collector filters them).
// - A call learnt at API exit whose API record is traced (api_record) is
//   done only once that record came too: CUPTI writes it when the call
//   returns, after the device record the call reserved, so a buffer closed
//   between the two leaves the API record in the next buffer. A later API
//   record of the same thread means it came or was lost: done.
// - A call with many records and one correlation id (graph launch, batch
//   copy, multi-device launch: multi) is done once a record with a later
//   correlation id arrives on its launch stream or on a stream its own
//   records ran on (CUDA orders later work on a stream behind the whole
//   graph; graph nodes may run on internal streams whose ids no call
//   names). With CUPTI 13.0's stale graph correlation ids
//   (stale_graph_ids) a graph launch may never see a record of its own: it
//   is then done once a later-correlation record arrives in its context.
// - Calls captured into a graph never run: a call on a stream being
//   captured (StreamRegistry) is never added, and those learnt before the
//   capture's end are dropped then.
// - Released, counted by the caller as missing records, never presumed
//   delivered: see "Evidence" below.
//
// Evidence that the device finished a call whose record has not come makes
// it *overdue* (it still waits; nothing is presumed delivered): a
// device-wide or context sync (cudaDeviceSynchronize, cuCtxSynchronize) of
// its stream's context, or a stream sync of its stream, that ended after it
// began, once a default flush after the sync was drained; or a device
// record of a later call on its stream. A default flush after a sync is no
// proof that records came: it returns no buffer that still holds an
// unfinished record, and per-thread buffers mix the finished step's records
// with the next step's running ones. An overdue call is released (its
// record is missing) only by release_overdue (the caller's bound: time, or
// held steps, or CUPTI reporting dropped records) or by a forced flush
// after the sync (on_forced_flush_drained: a forced flush returns every
// buffer, so a finished call's record would have come). A call with no
// stream to judge by is released by release_unproven once it waited long
// and later work of its context kept finishing.
//
// Streams: a call carries its raw stream handle and context (StreamRef);
// the StreamRegistry maps it to CUPTI's stream and context ids (from
// resource callbacks and from records), so evidence and stuck naming use
// the stream's own context. Progress is kept per (context, stream): the time
// of the last drain in which a device record of that stream arrived
// (stream_progress_ns), so a hung stream is told apart from one that still
// delivers.
//
// Bounded: the table holds at most max_entries; past that the oldest is
// evicted and counted (take_evicted()). Vendor-free: it sees correlation
// ids, times, contexts and streams decoded by RecordDecoder or the
// collector's API callback. Contract: used by one thread (the collector's
// drain thread).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "collectors/cupti/stream_registry.h"

namespace gpuutil::cupti {

class LaunchTracker {
 public:
  explicit LaunchTracker(size_t max_entries = size_t(1) << 20) : max_entries_(max_entries) {}

  // An API call that enqueues device work (kernel, graph, copy, memset).
  // `context`: CUPTI's context id current to the caller (0 unknown; the
  // stream's own context wins when known); `stream`: CUPTI's stream id
  // (kUnknownStream: resolved from `ref`); `name`: the caller's id of the
  // kernel's name (0 none). `api_record`: its API record is traced and has
  // to come too (a call learnt at API exit); false when the call was learnt
  // from that record. `nested_in`: the call was made inside the enqueue
  // call with that correlation id (same work: one record of either
  // completes both).
  void on_enqueue(uint32_t correlation_id, int64_t start_ns, uint64_t thread, bool multi, uint32_t context = 0,
                  uint32_t stream = kUnknownStream, uint32_t name = 0, StreamRef ref = {}, bool api_record = false,
                  uint32_t nested_in = 0);
  // The waiting call `inner` turned out to be nested in `outer` (their API
  // records nest in time on one thread): one record of either completes both.
  void nest(uint32_t inner, uint32_t outer);
  // A call learnt at API exit that enqueues nothing but whose API record the
  // analysis uses (a stream or event sync, an event record): done once its
  // API record arrived (on_api_record), which a held buffer may delay.
  void on_host_call(uint32_t correlation_id, int64_t start_ns, uint64_t thread);
  // An API record arrived (`thread`: the id it carries).
  void on_api_record(uint32_t correlation_id, uint64_t thread = 0);
  // Stream capture on `ref` (the calling thread's when unknown): begin at t_ns, end at t_ns.
  void on_capture_begin(uint64_t thread, int64_t t_ns, StreamRef ref = {});
  void on_capture_end(uint64_t thread, int64_t t_ns, StreamRef ref = {});
  // cudaEventRecord(event, ref) / cudaStreamWaitEvent(ref, event) at t_ns.
  void on_event_record(uint64_t event, StreamRef ref, uint64_t thread, int64_t t_ns) {
    streams_.event_recorded(event, ref, thread, t_ns);
  }
  void on_stream_wait(uint64_t event, StreamRef ref, uint64_t thread, int64_t t_ns) {
    streams_.stream_waited(event, ref, thread, t_ns);
  }
  // Resource callbacks: a stream handle created (its ids), or destroyed.
  void on_stream_created(uint64_t handle, uint32_t stream, uint32_t context) {
    streams_.created(handle, stream, context);
  }
  void on_stream_destroyed(uint64_t handle) { streams_.destroyed(handle); }
  // The legacy default stream of the context whose handle is `context_handle`
  // (id `context`), and `thread`'s per-thread default stream in it
  // (kUnknownStream: not known).
  void on_default_streams(uint64_t context_handle, uint64_t thread, uint32_t context, uint32_t legacy,
                          uint32_t per_thread) {
    if (legacy != kUnknownStream) streams_.learn(StreamRef{kStreamLegacy, 0, context_handle}, thread, legacy, context);
    if (per_thread != kUnknownStream) {
      streams_.learn(StreamRef{kStreamPerThread, 0, context_handle}, thread, per_thread, context);
    }
  }
  // When the call a device record with this correlation id belongs to began
  // (INT64_MIN: not waiting, or unknown).
  int64_t launch_start_ns(uint32_t correlation_id) const;
  // A kernel, copy or memset record arrived (valid timestamps or not).
  void on_device(uint32_t correlation_id, uint32_t stream, uint32_t context = 0);
  // A device-wide synchronisation of `context` (0: every context) ended at end_ns.
  void on_device_sync(int64_t end_ns, uint32_t context = 0);
  // A stream synchronisation of `ref` ended at end_ns.
  void on_stream_sync(int64_t end_ns, StreamRef ref, uint64_t thread);
  // A default flush that began at flush_start_ns was drained: calls a sync
  // before it finished become overdue; so do calls behind a later record on
  // their stream. Nothing completes.
  void on_flush_drained(int64_t flush_start_ns);
  // A forced flush that began at flush_start_ns was drained: every buffer
  // came back, so overdue calls' records are missing: released.
  struct Released {
    uint64_t count = 0;
    int64_t earliest_start_ns = INT64_MAX;
    uint32_t correlation_id = 0;  // the earliest one
    uint32_t name = 0;
    uint32_t stream = kUnknownStream;
  };
  Released on_forced_flush_drained(int64_t flush_start_ns);
  // Releases overdue calls (device evidence says they finished, no record
  // came) that became overdue before overdue_before_ns (INT64_MAX: all) and
  // began before started_before_ns.
  Released release_overdue(int64_t overdue_before_ns, int64_t started_before_ns = INT64_MAX);
  // Releases calls of unknown stream with no evidence at all that began
  // before started_before_ns, when a record of a later call of their
  // context arrived since (that context is not stuck).
  Released release_unproven(int64_t started_before_ns);
  // CUPTI 13.0 in a later activity session: graph records carry stale ids.
  void set_stale_graph_ids(bool on) { stale_graph_ids_ = on; }
  // The drain that follows happens at now_ns (stream progress is stamped with it).
  void begin_drain(int64_t now_ns) { now_ns_ = now_ns; }
  // When a device record of (context, stream) last arrived; INT64_MIN never.
  int64_t stream_progress_ns(uint32_t context, uint32_t stream) const;

  struct Waiting {
    uint32_t correlation_id = 0;
    int64_t start_ns = INT64_MAX;  // INT64_MAX: nothing waits
    uint32_t context = 0;
    uint32_t stream = kUnknownStream;
    uint32_t name = 0;
    uint64_t thread = 0;
    bool overdue = false;  // the device finished it (evidence); its record is what is missing
  };
  // The oldest enqueue still waiting for its records; device_only: the
  // oldest whose device work has not delivered and is not known finished
  // (what a stuck GPU runs).
  Waiting oldest_waiting(bool device_only = false);
  int64_t oldest_waiting_ns() { return oldest_waiting().start_ns; }
  // Enqueues evicted by the size bound since the last call, and the latest
  // start among them.
  uint64_t take_evicted(int64_t* latest_start_ns = nullptr);
  size_t waiting() const { return entries_.size(); }
  size_t overdue() const;
  // Forgets every waiting call (their records go to another client now).
  void clear();
  uint64_t device_records() const { return device_records_; }  // seen so far (progress)
  // Calls that became overdue at a drained flush after a sync, with no
  // device record of their own, since the last call; *earliest_start_ns:
  // the earliest start among them. Normally their records sit in a buffer
  // CUPTI still holds; with no buffer held they went to another client
  // (TakeoverWatch).
  uint64_t take_owed(int64_t* earliest_start_ns) {
    const uint64_t n = owed_;
    if (earliest_start_ns != nullptr) *earliest_start_ns = owed_earliest_ns_;
    owed_ = 0;
    owed_earliest_ns_ = INT64_MAX;
    return n;
  }
  // Whether any call of device work waits that may still be running (not
  // overdue, not only an API record): a scan that stops at the first one.
  bool running_work_waiting() const;
  const StreamRegistry& streams() const { return streams_; }

 private:
  struct Entry {
    int64_t start_ns = 0;  // API call start
    int64_t overdue_since_ns = INT64_MAX;  // evidence that the device finished it came then
    uint64_t thread = 0;
    uint32_t context = 0;  // the stream's context id when known, else the caller's
    uint32_t stream = kUnknownStream;
    uint32_t name = 0;
    uint32_t alias = 0;  // a call nested in it (its record completes this one)
    bool device_seen = false;
    bool graph = false;        // many records, one id: in graphs_
    bool api_only = false;     // waits for its API record, not a device record
    bool api_pending = false;  // and its API record (api_record), not come yet
    bool device_done = false;  // its device work delivered; only its API record is missing
    StreamRef ref;
    std::vector<uint32_t> streams;  // graphs: where its records ran
  };
  using Iter = std::map<uint32_t, Entry>::iterator;
  static uint64_t stream_key(uint32_t context, uint32_t stream) { return (uint64_t(context) << 32) | stream; }
  bool waits_for_device(const Entry& e) const { return !e.api_only && !e.device_done; }
  void resolve(Entry& e);
  void erase(Iter it);
  // Its device work delivered: done, or waiting only for its API record.
  void device_delivered(Iter it);
  void complete_graphs(uint32_t corr, uint32_t stream, uint32_t context);
  // An API record of `thread` later than `corr` came: corr's came before it, or was lost.
  bool later_api_record_seen(uint64_t thread, uint32_t corr) const;
  void note_api_wait(uint32_t corr);
  void release_api_waits();
  void mark_overdue(Entry& e, int64_t t_ns, bool count_owed);
  template <class Pred>
  Released release_if(Pred pred);
  void evict_if_full();

  size_t max_entries_;
  bool stale_graph_ids_ = false;
  StreamRegistry streams_;
  std::map<uint32_t, Entry> entries_;  // by correlation id (CUPTI numbers calls in order)
  std::unordered_map<uint32_t, uint32_t> aliases_;  // nested call's id -> the entry's
  std::vector<uint32_t> graphs_;        // correlation ids of multi-record entries
  struct Sync {
    int64_t end_ns;
    uint32_t context;                  // 0: every context
    uint32_t stream = kUnknownStream;  // a stream sync: that stream only
  };
  std::vector<Sync> syncs_;  // syncs not yet applied
  // Device records that arrived before their call was learnt (direct-mapped
  // by correlation id; an older one is forgotten when its slot is reused).
  struct EarlyRecord {
    uint32_t correlation_id = 0;
    uint32_t stream = 0;
    uint32_t context = 0;
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
  struct StreamSeen {
    int64_t progress_ns = INT64_MIN;  // the last drain with a record of it
    uint32_t latest_corr = 0;         // the latest correlation id among its records
  };
  std::unordered_map<uint64_t, StreamSeen> stream_seen_;  // stream_key -> what its records said
  uint64_t seen_key_ = UINT64_MAX;                         // the last one touched (records come in runs)
  StreamSeen* seen_slot_ = nullptr;                        // node-based: stays valid
  std::unordered_map<uint32_t, uint32_t> context_latest_;  // context id -> latest correlation id of its records
  // The stream a thread's calls of unknown stream ran on, while their
  // records keep agreeing (run: how many in a row).
  struct ThreadStream {
    uint32_t context = 0;
    uint32_t stream = kUnknownStream;
    uint32_t run = 0;
  };
  static constexpr uint32_t kInferRun = 8;
  std::unordered_map<uint64_t, ThreadStream> thread_streams_;
  uint64_t evicted_ = 0;
  int64_t evicted_latest_ns_ = INT64_MIN;
  uint64_t device_records_ = 0;
  uint64_t owed_ = 0;
  int64_t owed_earliest_ns_ = INT64_MAX;
};

}  // namespace gpuutil::cupti
