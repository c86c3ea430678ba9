// Enqueued device work still waiting for its records (see launch_tracker.h).
#include "collectors/cupti/launch_tracker.h"

#include <algorithm>
#include <limits>

namespace gpuutil::cupti {

namespace {
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr size_t kCapturesKept = 64;  // per thread
constexpr int kWatermarkScan = 64;    // entries looked at past the first (call-order inversions)
constexpr size_t kThreadsKept = 4096;  // threads whose latest API record is remembered
constexpr size_t kApiWaitsKept = 4096;  // api_waits_ swept when longer
}  // namespace

bool LaunchTracker::captured(uint64_t thread, int64_t t_ns) const {
  const auto it = captures_.find(thread);
  if (it == captures_.end()) return false;
  for (const Capture& c : it->second) {
    if (c.begin_ns <= t_ns && t_ns < c.end_ns) return true;
  }
  return false;
}

void LaunchTracker::erase(std::map<uint32_t, Entry>::iterator it) {
  if (it->second.graph) graphs_.erase(std::remove(graphs_.begin(), graphs_.end(), it->first), graphs_.end());
  entries_.erase(it);
}

void LaunchTracker::evict_if_full() {
  while (entries_.size() > max_entries_) {
    ++evicted_;
    evicted_latest_ns_ = std::max(evicted_latest_ns_, entries_.begin()->second.start_ns);
    erase(entries_.begin());
  }
}

void LaunchTracker::learn_per_thread(const Entry& e, uint32_t stream, uint32_t context) {
  if (e.ref.kind == kStreamPerThread) per_thread_[{e.thread, context != 0 ? context : e.context}] = stream;
}

uint32_t LaunchTracker::per_thread_stream(uint64_t thread, uint32_t context) const {
  const auto it = per_thread_.find({thread, context});
  return it == per_thread_.end() ? kUnknownStream : it->second;
}

int64_t LaunchTracker::stream_progress_ns(uint32_t context, uint32_t stream) const {
  const auto it = stream_progress_.find(stream_key(context, stream));
  return it == stream_progress_.end() ? INT64_MIN : it->second;
}

void LaunchTracker::set_stream(uint32_t corr, uint32_t stream) {
  const auto it = entries_.find(corr);
  if (it != entries_.end()) it->second.stream = stream;
}

void LaunchTracker::on_enqueue(uint32_t corr, int64_t start_ns, uint64_t thread, bool graph, uint32_t context,
                               uint32_t stream, uint32_t name, StreamRef ref, bool api_record) {
  if (captured(thread, start_ns)) return;  // recorded into a graph: nothing runs now
  const EarlyRecord early = early_[corr % kEarlySlots];
  const bool device_seen = early.correlation_id == corr && corr != 0;
  if (device_seen && ref.kind == kStreamPerThread) per_thread_[{thread, context}] = early.stream;
  const bool api_pending =
      api_record && corr != 0 && api_seen_[corr % kEarlySlots] != corr && !later_api_record_seen(thread, corr);
  if (device_seen && !graph && !api_pending) return;  // its records are already here
  const auto existing = entries_.find(corr);
  if (existing != entries_.end()) {  // learnt twice (callback and API record): keep the earliest start
    existing->second.start_ns = std::min(existing->second.start_ns, start_ns);
    return;
  }
  Entry& e = entries_[corr];
  e.start_ns = start_ns;
  e.thread = thread;
  e.graph = graph;
  e.context = context;
  e.stream = stream;
  e.name = name;
  e.ref = ref;
  e.api_pending = api_pending;
  if (device_seen && !graph) {  // only its API record is missing
    e.device_seen = true;
    e.device_done = true;
    note_api_wait(corr);
  } else {
    if (graph) graphs_.push_back(corr);
    if (device_seen) {
      e.device_seen = true;
      e.streams.assign(1, early.stream);
    }
  }
  evict_if_full();
}

bool LaunchTracker::later_api_record_seen(uint64_t thread, uint32_t corr) const {
  const auto latest = api_latest_.find(thread);
  return latest != api_latest_.end() && latest->second > corr;
}

void LaunchTracker::device_delivered(std::map<uint32_t, Entry>::iterator it) {
  if (!it->second.api_pending) {
    erase(it);
    return;
  }
  it->second.device_done = true;
  note_api_wait(it->first);
}

void LaunchTracker::note_api_wait(uint32_t corr) {
  api_waits_.push_back(corr);
  // Ids whose record came since stay until the next flush drained; bounded
  // by sweeping when the list doubled since the last sweep (amortised: many
  // launches may wait for API records at once).
  if (api_waits_.size() > api_waits_sweep_at_) {
    release_api_waits();
    api_waits_sweep_at_ = std::max(kApiWaitsKept, 2 * api_waits_.size());
  }
}

// Entries waiting only for an API record that a later API record of their
// thread shows came before it (into a slot since reused) or was lost.
void LaunchTracker::release_api_waits() {
  for (size_t i = 0; i < api_waits_.size();) {
    const auto it = entries_.find(api_waits_[i]);
    bool drop = it == entries_.end() || !it->second.api_pending;
    if (!drop && later_api_record_seen(it->second.thread, it->first)) {
      entries_.erase(it);
      drop = true;
    }
    if (drop) {
      api_waits_[i] = api_waits_.back();
      api_waits_.pop_back();
    } else {
      ++i;
    }
  }
}

void LaunchTracker::on_host_call(uint32_t corr, int64_t start_ns, uint64_t thread) {
  if (corr == 0 || api_seen_[corr % kEarlySlots] == corr) return;  // its record is already here
  if (entries_.count(corr) != 0) return;
  Entry& e = entries_[corr];
  e.start_ns = start_ns;
  e.thread = thread;
  e.api_only = true;
  evict_if_full();
}

void LaunchTracker::on_api_record(uint32_t corr, uint64_t thread) {
  api_seen_[corr % kEarlySlots] = corr;
  if (thread != 0) {
    if (thread != api_latest_thread_ || api_latest_slot_ == nullptr) {  // records come in runs of one thread
      if (api_latest_.size() >= kThreadsKept && api_latest_.count(thread) == 0) api_latest_.clear();  // bounded
      api_latest_slot_ = &api_latest_[thread];  // node-based: stays valid until clear()
      api_latest_thread_ = thread;
    }
    *api_latest_slot_ = std::max(*api_latest_slot_, corr);
  }
  auto it = entries_.find(corr);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  if (e.api_only || e.device_done) {
    entries_.erase(it);  // (a stale api_waits_ id is dropped by release_api_waits)
  } else {
    e.api_pending = false;
  }
}

void LaunchTracker::on_capture_begin(uint64_t thread, int64_t t_ns) {
  auto& list = captures_[thread];
  list.push_back({t_ns, kNever});
  if (list.size() > kCapturesKept) list.erase(list.begin());
}

void LaunchTracker::on_capture_end(uint64_t thread, int64_t t_ns) {
  auto& list = captures_[thread];
  Capture* open = nullptr;
  for (Capture& c : list) {
    if (c.end_ns == kNever && c.begin_ns <= t_ns) open = &c;
  }
  if (open == nullptr) {
    list.push_back({std::numeric_limits<int64_t>::min(), t_ns});  // its begin was before tracing started
    open = &list.back();
  } else {
    open->end_ns = t_ns;
  }
  // Launches from this thread inside the capture were learnt before its
  // end: they will never produce records.
  const int64_t begin = open->begin_ns, end = open->end_ns;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const Entry& e = it->second;
    auto next = std::next(it);
    if (e.thread == thread && begin <= e.start_ns && e.start_ns < end) erase(it);
    it = next;
  }
}

void LaunchTracker::on_device(uint32_t corr, uint32_t stream, uint32_t context) {
  ++device_records_;
  if (const uint64_t key = stream_key(context, stream); key != progress_key_ || progress_slot_ == nullptr) {
    progress_slot_ = &stream_progress_[key];
    progress_key_ = key;
  }
  *progress_slot_ = now_ns_;
  // Later work on a stream a graph ran on means the whole graph finished.
  for (size_t i = 0; i < graphs_.size();) {
    const uint32_t g = graphs_[i];
    auto it = entries_.find(g);
    if (it == entries_.end()) {
      graphs_.erase(graphs_.begin() + static_cast<long>(i));
      continue;
    }
    const Entry& e = it->second;
    const auto& streams = e.streams;
    bool done = false;
    if (g < corr) {
      if (e.device_seen) {
        done = std::find(streams.begin(), streams.end(), stream) != streams.end();
      } else if (stale_graph_ids_) {
        // No record of its own will come (CUPTI 13.0): later work of its
        // context, on its stream when known, finished after it.
        done = (e.context == 0 || context == 0 || e.context == context) &&
               (e.stream == kUnknownStream || e.stream == stream);
      } else {
        done = e.stream != kUnknownStream && e.stream == stream;
      }
    }
    if (done) {
      graphs_.erase(graphs_.begin() + static_cast<long>(i));
      it->second.graph = false;  // out of graphs_ already
      device_delivered(it);
    } else {
      ++i;
    }
  }
  early_[corr % kEarlySlots] = {corr, stream};  // the call may be learnt later
  auto it = entries_.find(corr);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  learn_per_thread(e, stream, context);
  if (e.device_done) return;  // a second record of a done call (it waits for its API record)
  if (!e.graph) {
    device_delivered(it);
    return;
  }
  e.device_seen = true;
  if (std::find(e.streams.begin(), e.streams.end(), stream) == e.streams.end()) e.streams.push_back(stream);
}

void LaunchTracker::on_device_sync(int64_t end_ns, uint32_t context) {
  for (Sync& s : syncs_) {
    if (s.context == context) {
      s.end_ns = std::max(s.end_ns, end_ns);
      return;
    }
  }
  syncs_.push_back({end_ns, context});
}

void LaunchTracker::on_flush_drained(int64_t flush_start_ns) {
  release_api_waits();
  for (auto s = syncs_.begin(); s != syncs_.end();) {
    if (flush_start_ns < s->end_ns) {
      ++s;
      continue;
    }
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      const Entry& e = it->second;
      const bool same_context = s->context == 0 || e.context == 0 || e.context == s->context;
      if (same_context && !e.api_only && e.start_ns < s->end_ns) {
        if (!e.device_seen) {
          ++presumed_;
          presumed_earliest_ns_ = std::min(presumed_earliest_ns_, e.start_ns);
        }
        erase(it);
      }
      it = next;
    }
    s = syncs_.erase(s);
  }
}

LaunchTracker::Waiting LaunchTracker::oldest_waiting(bool device_only) const {
  Waiting w;
  int scanned = 0;
  for (auto it = entries_.begin(); it != entries_.end() && scanned <= kWatermarkScan; ++it, ++scanned) {
    if (device_only && (it->second.api_only || it->second.device_done)) continue;
    if (it->second.start_ns < w.start_ns) {
      w.correlation_id = it->first;
      w.start_ns = it->second.start_ns;
      w.context = it->second.context;
      w.stream = it->second.stream;
      w.name = it->second.name;
      w.thread = it->second.thread;
      w.ref = it->second.ref;
    }
  }
  return w;
}

uint64_t LaunchTracker::take_evicted(int64_t* latest_start_ns) {
  const uint64_t n = evicted_;
  if (latest_start_ns != nullptr) *latest_start_ns = evicted_latest_ns_;
  evicted_ = 0;
  evicted_latest_ns_ = INT64_MIN;
  return n;
}

}  // namespace gpuutil::cupti
