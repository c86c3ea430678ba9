// Which enqueued device work has not delivered its records yet: the part of
// "is step N complete?" that depends on the GPU.
//
// CUPTI delivers a kernel, copy or memset record only once the device has
// finished it, and a default flush withholds any buffer holding an
// unfinished record (cupti_activity.h, cuptiActivityFlushAll). A host that
// runs ahead of the GPU therefore ends step N long before step N's device
// records arrive. The tracker remembers every API call that enqueues device
// work (launches, graph launches, copies, memsets) until a device record
// with its correlation id arrives, so the collector can say up to when its
// data is complete: before the start of the oldest call still waiting.
//
// Rules:
// - An ordinary launch or copy is done when one device record carries its
//   correlation id (records may arrive before or after the API record).
// - A graph launch has many records with one correlation id and no count;
//   it is done once a device record with a later correlation id arrives on a
//   stream the graph ran on (CUDA orders later work on a stream behind the
//   whole graph), or when the wait bound passes.
// - Calls made during stream capture enqueue nothing: calls on a thread
//   between its StreamBeginCapture and StreamEndCapture records are dropped.
// - A device-wide synchronisation (cudaDeviceSynchronize, cuCtxSynchronize)
//   finishes all earlier work, and a default flush after it returns all its
//   records (cupti_activity.h, cuptiActivityFlushAll): once such a flush was
//   drained, everything enqueued before the sync is done (this is how the
//   last graph of a run completes).
// - Nothing waits forever: an entry older than the wait bound is given up
//   (counted, see take_timed_out()); the table holds at most max_entries.
//
// Vendor-free: it sees correlation ids, times and flags decoded by
// RecordDecoder. Contract: used by one thread (the collector's drain thread).
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace gpuutil::cupti {

class LaunchTracker {
 public:
  explicit LaunchTracker(size_t max_entries = size_t(1) << 20) : max_entries_(max_entries) {}

  // An API call that enqueues device work (kernel, graph, copy, memset).
  void on_enqueue(uint32_t correlation_id, int64_t start_ns, uint64_t thread, bool graph);
  // Stream capture on `thread`: begin at t_ns, end at t_ns.
  void on_capture_begin(uint64_t thread, int64_t t_ns);
  void on_capture_end(uint64_t thread, int64_t t_ns);
  // A kernel, copy or memset record arrived.
  void on_device(uint32_t correlation_id, uint32_t stream);
  // A device-wide synchronisation call ended at end_ns.
  void on_device_sync(int64_t end_ns) { synced_until_ns_ = std::max(synced_until_ns_, end_ns); }
  // A default flush that began at flush_start_ns was drained: enqueues
  // before a sync that ended before it are done.
  void on_flush_drained(int64_t flush_start_ns);

  // The start of the oldest enqueue still waiting for its records (INT64_MAX
  // when none). Entries older than now_ns - max_wait_ns are given up first.
  int64_t oldest_waiting_ns(int64_t now_ns, int64_t max_wait_ns);
  // Enqueues given up (waited past the bound, or evicted by the size bound)
  // since the last call.
  uint64_t take_timed_out();
  size_t waiting() const { return entries_.size(); }

 private:
  struct Entry {
    int64_t start_ns = 0;  // API call start
    uint64_t thread = 0;
    bool device_seen = false;
    bool graph = false;
    std::vector<uint32_t> streams;  // graphs: where its records ran
  };
  struct Capture {
    int64_t begin_ns;
    int64_t end_ns;  // INT64_MAX while open
  };
  bool captured(uint64_t thread, int64_t t_ns) const;
  void erase(std::map<uint32_t, Entry>::iterator it);
  void evict_if_full();

  size_t max_entries_;
  std::map<uint32_t, Entry> entries_;  // by correlation id (CUPTI numbers calls in order)
  std::vector<uint32_t> graphs_;        // correlation ids of graph entries with records
  std::unordered_map<uint64_t, std::vector<Capture>> captures_;  // per thread, recent
  // Device records that arrived before their API record (direct-mapped by
  // correlation id; an older one is forgotten when its slot is reused).
  struct EarlyRecord {
    uint32_t correlation_id = 0;
    uint32_t stream = 0;
  };
  static constexpr size_t kEarlySlots = 8192;
  std::vector<EarlyRecord> early_ = std::vector<EarlyRecord>(kEarlySlots);
  uint64_t timed_out_ = 0;
  int64_t synced_until_ns_ = INT64_MIN;
};

}  // namespace gpuutil::cupti
