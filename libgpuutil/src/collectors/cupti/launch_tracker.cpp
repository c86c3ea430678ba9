// Enqueued device work still waiting for its records (see launch_tracker.h).
#include "collectors/cupti/launch_tracker.h"

#include <algorithm>
#include <limits>

namespace gpuutil::cupti {

namespace {
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int kWatermarkScan = 64;      // entries looked at past the first (call-order inversions)
constexpr int kEvidenceScan = 4096;     // oldest entries checked for evidence at each drained flush
constexpr size_t kThreadsKept = 4096;   // threads whose latest API record is remembered
constexpr size_t kApiWaitsKept = 4096;  // api_waits_ swept when longer
constexpr size_t kContextsKept = 1024;
}  // namespace

void LaunchTracker::erase(Iter it) {
  if (it->second.graph) graphs_.erase(std::remove(graphs_.begin(), graphs_.end(), it->first), graphs_.end());
  if (it->second.alias != 0) aliases_.erase(it->second.alias);
  entries_.erase(it);
}

void LaunchTracker::clear() {
  entries_.clear();
  aliases_.clear();
  graphs_.clear();
  syncs_.clear();
  api_waits_.clear();
  api_latest_.clear();  // correlation ids may start again (cuptiFinalize)
  api_latest_slot_ = nullptr;
  take_owed(nullptr);
}

void LaunchTracker::evict_if_full() {
  while (entries_.size() > max_entries_) {
    ++evicted_;
    evicted_latest_ns_ = std::max(evicted_latest_ns_, entries_.begin()->second.start_ns);
    erase(entries_.begin());
  }
}

void LaunchTracker::resolve(Entry& e) {
  if (e.stream != kUnknownStream || e.ref.kind == kStreamNone) return;
  const ResolvedStream r = streams_.resolve(e.ref, e.thread);
  if (r.stream == kUnknownStream) return;
  e.stream = r.stream;
  if (r.context != 0) e.context = r.context;  // the stream's context, not the caller's current one
}

int64_t LaunchTracker::stream_progress_ns(uint32_t context, uint32_t stream) const {
  const auto it = stream_seen_.find(stream_key(context, stream));
  return it == stream_seen_.end() ? INT64_MIN : it->second.progress_ns;
}

void LaunchTracker::on_enqueue(uint32_t corr, int64_t start_ns, uint64_t thread, bool multi, uint32_t context,
                               uint32_t stream, uint32_t name, StreamRef ref, bool api_record, uint32_t nested_in) {
  if (streams_.captured(ref, thread, start_ns)) return;  // recorded into a graph: nothing runs now
  // A call nested in another enqueue call is that call's work: it waits
  // under the outer id, and a record carrying either id completes it.
  const uint32_t inner = nested_in != 0 && nested_in != corr ? corr : 0;
  const uint32_t id = inner != 0 ? nested_in : corr;
  EarlyRecord early = early_[id % kEarlySlots];
  bool device_seen = early.correlation_id == id && id != 0;
  if (!device_seen && inner != 0 && early_[inner % kEarlySlots].correlation_id == inner) {
    early = early_[inner % kEarlySlots];
    device_seen = true;
  }
  if (device_seen) streams_.learn(ref, thread, early.stream, early.context);
  // Only the outer call's API record is waited for (the nested one's record
  // may be traced or not; it says nothing the outer's does not).
  const bool api_pending = inner == 0 && api_record && id != 0 && api_seen_[id % kEarlySlots] != id &&
                           !later_api_record_seen(thread, id);
  const auto existing = entries_.find(id);
  if (existing != entries_.end()) {  // learnt twice (inner and outer, or callback and API record)
    Entry& e = existing->second;
    e.start_ns = std::min(e.start_ns, start_ns);
    if (inner != 0) {
      e.alias = inner;
      aliases_[inner] = id;
    }
    if (api_pending && !e.device_done) e.api_pending = true;
    if (e.ref.kind == kStreamNone) e.ref = ref;
    if (device_seen && !e.graph && !e.device_done) device_delivered(existing);
    return;
  }
  if (device_seen && !multi && !api_pending) return;  // its records are already here
  Entry& e = entries_[id];
  e.start_ns = start_ns;
  e.thread = thread;
  e.graph = multi;
  e.context = context;
  e.stream = stream;
  e.name = name;
  e.ref = ref;
  e.api_pending = api_pending;
  if (inner != 0) {
    e.alias = inner;
    aliases_[inner] = id;
  }
  resolve(e);
  if (device_seen && !multi) {  // only its API record is missing
    e.device_seen = true;
    e.device_done = true;
    note_api_wait(id);
  } else {
    if (multi) graphs_.push_back(id);
    if (device_seen) {
      e.device_seen = true;
      e.streams.assign(1, early.stream);
    }
  }
  evict_if_full();
}

void LaunchTracker::nest(uint32_t inner, uint32_t outer) {
  if (inner == 0 || outer == 0 || inner == outer) return;
  auto in = entries_.find(inner);
  if (in == entries_.end()) {
    // Its record came already: the outer call's work is done too; else a
    // record of it that comes later completes the outer call.
    if (early_[inner % kEarlySlots].correlation_id == inner) {
      const auto o = entries_.find(outer);
      if (o != entries_.end() && !o->second.graph && !o->second.device_done) device_delivered(o);
    } else if (const auto o = entries_.find(outer); o != entries_.end()) {
      o->second.alias = inner;
      aliases_[inner] = outer;
    }
    return;
  }
  const Entry moved = in->second;
  erase(in);
  on_enqueue(inner, moved.start_ns, moved.thread, moved.graph, moved.context, moved.stream, moved.name, moved.ref,
             moved.api_pending, outer);
}

bool LaunchTracker::later_api_record_seen(uint64_t thread, uint32_t corr) const {
  const auto latest = api_latest_.find(thread);
  return latest != api_latest_.end() && latest->second > corr;
}

void LaunchTracker::device_delivered(Iter it) {
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
      erase(it);
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
    erase(it);  // (a stale api_waits_ id is dropped by release_api_waits)
  } else {
    e.api_pending = false;
  }
}

void LaunchTracker::on_capture_begin(uint64_t thread, int64_t t_ns, StreamRef ref) {
  streams_.capture_begin(ref, thread, t_ns);
}

void LaunchTracker::on_capture_end(uint64_t thread, int64_t t_ns, StreamRef ref) {
  const StreamRegistry::Ended ended = streams_.capture_end(ref, thread, t_ns);
  // Calls on the captured streams inside the capture were learnt before its
  // end: they will never produce records.
  for (auto it = entries_.begin(); it != entries_.end();) {
    const Entry& e = it->second;
    auto next = std::next(it);
    if (ended.begin_ns <= e.start_ns && e.start_ns < t_ns && streams_.captured(e.ref, e.thread, e.start_ns)) erase(it);
    it = next;
  }
}

void LaunchTracker::complete_graphs(uint32_t corr, uint32_t stream, uint32_t context) {
  // Later work on a stream a graph was launched on, or ran on, means the
  // whole graph finished.
  for (size_t i = 0; i < graphs_.size();) {
    const uint32_t g = graphs_[i];
    auto it = entries_.find(g);
    if (it == entries_.end()) {
      graphs_.erase(graphs_.begin() + static_cast<long>(i));
      continue;
    }
    Entry& e = it->second;
    resolve(e);
    bool done = false;
    if (g < corr) {
      const bool same_context = e.context == 0 || context == 0 || e.context == context;
      const bool on_launch_stream = e.stream != kUnknownStream && e.stream == stream && same_context;
      if (on_launch_stream || (e.device_seen && std::find(e.streams.begin(), e.streams.end(), stream) != e.streams.end())) {
        done = true;
      } else if (!e.device_seen && stale_graph_ids_) {
        // No record of its own will come (CUPTI 13.0): later work of its
        // context, on its stream when known, finished after it.
        done = same_context && (e.stream == kUnknownStream || e.stream == stream);
      }
    }
    if (done) {
      graphs_.erase(graphs_.begin() + static_cast<long>(i));
      e.graph = false;  // out of graphs_ already
      device_delivered(it);
    } else {
      ++i;
    }
  }
}

int64_t LaunchTracker::launch_start_ns(uint32_t corr) const {
  auto it = entries_.find(corr);
  if (it == entries_.end()) {
    const auto alias = aliases_.find(corr);
    if (alias == aliases_.end()) return INT64_MIN;
    it = entries_.find(alias->second);
    if (it == entries_.end()) return INT64_MIN;
  }
  return it->second.start_ns;
}

void LaunchTracker::on_device(uint32_t corr, uint32_t stream, uint32_t context) {
  ++device_records_;
  if (const uint64_t key = stream_key(context, stream); key != seen_key_ || seen_slot_ == nullptr) {
    seen_slot_ = &stream_seen_[key];
    seen_key_ = key;
  }
  seen_slot_->progress_ns = now_ns_;
  seen_slot_->latest_corr = std::max(seen_slot_->latest_corr, corr);
  if (context != 0) {
    if (context_latest_.size() >= kContextsKept && context_latest_.count(context) == 0) context_latest_.clear();
    uint32_t& latest = context_latest_[context];
    latest = std::max(latest, corr);
  }
  early_[corr % kEarlySlots] = {corr, stream, context};  // the call may be learnt later
  auto it = entries_.find(corr);
  if (it == entries_.end()) {
    const auto alias = aliases_.find(corr);
    if (alias != aliases_.end()) it = entries_.find(alias->second);
  }
  // Its call's stream handle stands for this stream: learnt before the
  // graphs look (a graph launched on that handle waits for it). A call
  // that named no stream says where its thread's such calls run.
  if (it != entries_.end() && !it->second.graph) {
    const Entry& e = it->second;
    streams_.learn(e.ref, e.thread, stream, context);
    if (e.ref.kind == kStreamNone) {
      if (thread_streams_.size() >= kThreadsKept && thread_streams_.count(e.thread) == 0) thread_streams_.clear();
      ThreadStream& t = thread_streams_[e.thread];
      if (t.stream == stream && t.context == context) {
        ++t.run;
      } else {
        t = {context, stream, 1};
      }
    }
  }
  const uint32_t key = it != entries_.end() ? it->first : 0;
  if (!graphs_.empty()) complete_graphs(corr, stream, context);
  if (key == 0) return;
  it = entries_.find(key);  // (complete_graphs erases only graphs launched before this record's call)
  if (it == entries_.end()) return;
  Entry& e = it->second;
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
    if (s.context == context && s.stream == kUnknownStream) {
      s.end_ns = std::max(s.end_ns, end_ns);
      return;
    }
  }
  syncs_.push_back({end_ns, context, kUnknownStream});
}

void LaunchTracker::on_stream_sync(int64_t end_ns, StreamRef ref, uint64_t thread) {
  const ResolvedStream r = streams_.resolve(ref, thread);
  if (r.stream == kUnknownStream) return;  // which stream it waited on is unknown: no evidence
  for (Sync& s : syncs_) {
    if (s.context == r.context && s.stream == r.stream) {
      s.end_ns = std::max(s.end_ns, end_ns);
      return;
    }
  }
  syncs_.push_back({end_ns, r.context, r.stream});
}

void LaunchTracker::mark_overdue(Entry& e, int64_t t_ns, bool count_owed) {
  if (e.overdue_since_ns != kNever) return;
  e.overdue_since_ns = t_ns;
  if (count_owed && !e.device_seen) {
    ++owed_;
    owed_earliest_ns_ = std::min(owed_earliest_ns_, e.start_ns);
  }
}

void LaunchTracker::on_flush_drained(int64_t flush_start_ns) {
  release_api_waits();
  // Syncs that ended before the flush began: the device finished what was
  // enqueued before them in their context (on their stream).
  for (auto s = syncs_.begin(); s != syncs_.end();) {
    if (flush_start_ns < s->end_ns) {
      ++s;
      continue;
    }
    for (auto& [corr, e] : entries_) {
      if (!waits_for_device(e) || e.start_ns >= s->end_ns) continue;
      resolve(e);
      const bool same_context = s->context == 0 || e.context == 0 || e.context == s->context;
      const bool same_stream = s->stream == kUnknownStream || e.stream == s->stream;
      if (same_context && same_stream) mark_overdue(e, flush_start_ns, /*count_owed=*/true);
    }
    s = syncs_.erase(s);
  }
  // A record of a later call on a call's stream: the stream ran past it.
  int scanned = 0;
  for (auto& [corr, e] : entries_) {
    if (++scanned > kEvidenceScan) break;
    if (!waits_for_device(e) || e.overdue_since_ns != kNever || e.graph) continue;
    resolve(e);
    uint32_t stream = e.stream, context = e.context;
    if (stream == kUnknownStream && e.ref.kind == kStreamNone) {
      // Its parameters named no stream: where its thread's such calls have
      // all been running lately, if they agree.
      const auto t = thread_streams_.find(e.thread);
      if (t != thread_streams_.end() && t->second.run >= kInferRun) {
        stream = t->second.stream;
        context = t->second.context;
      }
    }
    if (stream == kUnknownStream) continue;
    const auto seen = stream_seen_.find(stream_key(context, stream));
    if (seen != stream_seen_.end() && seen->second.latest_corr > corr) mark_overdue(e, flush_start_ns, false);
  }
}

template <class Pred>
LaunchTracker::Released LaunchTracker::release_if(Pred pred) {
  Released out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (waits_for_device(it->second) && pred(it->first, it->second)) {
      if (it->second.graph && it->second.device_seen) {
        // A graph (many records, no count) whose own records came: the
        // device finished it and nothing proves a record missing. Done.
        erase(it);
        it = next;
        continue;
      }
      if (out.count++ == 0) {
        out.earliest_start_ns = it->second.start_ns;
        out.correlation_id = it->first;
        out.name = it->second.name;
        out.stream = it->second.stream;
      }
      erase(it);
    }
    it = next;
  }
  return out;
}

LaunchTracker::Released LaunchTracker::on_forced_flush_drained(int64_t flush_start_ns) {
  on_flush_drained(flush_start_ns);
  return release_overdue(kNever);
}

LaunchTracker::Released LaunchTracker::release_overdue(int64_t overdue_before_ns, int64_t started_before_ns) {
  return release_if([&](uint32_t, const Entry& e) {
    return e.overdue_since_ns != kNever && (overdue_before_ns == kNever || e.overdue_since_ns < overdue_before_ns) &&
           e.start_ns < started_before_ns;
  });
}

LaunchTracker::Released LaunchTracker::release_unproven(int64_t started_before_ns) {
  return release_if([&](uint32_t corr, const Entry& e) {
    if (e.overdue_since_ns != kNever || e.stream != kUnknownStream || e.start_ns >= started_before_ns) return false;
    const auto latest = context_latest_.find(e.context);
    return latest != context_latest_.end() && latest->second > corr;
  });
}

size_t LaunchTracker::overdue() const {
  size_t n = 0;
  for (const auto& kv : entries_) n += kv.second.overdue_since_ns != kNever && waits_for_device(kv.second);
  return n;
}

bool LaunchTracker::running_work_waiting() const {
  for (const auto& kv : entries_) {
    if (waits_for_device(kv.second) && kv.second.overdue_since_ns == kNever) return true;
  }
  return false;
}

LaunchTracker::Waiting LaunchTracker::oldest_waiting(bool device_only) {
  Iter best = entries_.end();
  int scanned = 0;
  for (auto it = entries_.begin(); it != entries_.end() && scanned <= kWatermarkScan; ++it, ++scanned) {
    const Entry& e = it->second;
    if (device_only && (!waits_for_device(e) || e.overdue_since_ns != kNever)) continue;
    if (best == entries_.end() || e.start_ns < best->second.start_ns) best = it;
  }
  Waiting w;
  if (best == entries_.end()) return w;
  Entry& e = best->second;
  resolve(e);
  w.correlation_id = best->first;
  w.start_ns = e.start_ns;
  w.context = e.context;
  w.stream = e.stream;
  w.name = e.name;
  w.thread = e.thread;
  w.overdue = e.overdue_since_ns != kNever;
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
