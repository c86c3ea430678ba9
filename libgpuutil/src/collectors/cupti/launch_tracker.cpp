// Enqueued device work still waiting for its records (see launch_tracker.h).
#include "collectors/cupti/launch_tracker.h"

#include <algorithm>
#include <limits>

namespace gpuutil::cupti {

namespace {
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr size_t kCapturesKept = 64;  // per thread
constexpr int kWatermarkScan = 64;    // entries looked at past the first (call-order inversions)
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
    ++timed_out_;
    erase(entries_.begin());
  }
}

void LaunchTracker::on_enqueue(uint32_t corr, int64_t start_ns, uint64_t thread, bool graph) {
  if (captured(thread, start_ns)) return;  // recorded into a graph: nothing runs now
  const EarlyRecord early = early_[corr % kEarlySlots];
  const bool device_seen = early.correlation_id == corr && corr != 0;
  if (device_seen && !graph) return;  // its record is already here
  Entry& e = entries_[corr];
  e.start_ns = start_ns;
  e.thread = thread;
  e.graph = graph;
  if (device_seen) {
    e.device_seen = true;
    e.streams.assign(1, early.stream);
    graphs_.push_back(corr);
  }
  evict_if_full();
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
  // Launches from this thread inside the capture were recorded before its
  // end record arrived: they will never produce records.
  const int64_t begin = open->begin_ns, end = open->end_ns;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const Entry& e = it->second;
    auto next = std::next(it);
    if (e.thread == thread && begin <= e.start_ns && e.start_ns < end) erase(it);
    it = next;
  }
}

void LaunchTracker::on_device(uint32_t corr, uint32_t stream) {
  // Later work on a stream a graph ran on means the whole graph finished.
  for (size_t i = 0; i < graphs_.size();) {
    const uint32_t g = graphs_[i];
    auto it = entries_.find(g);
    if (it == entries_.end()) {
      graphs_.erase(graphs_.begin() + static_cast<long>(i));
      continue;
    }
    const auto& streams = it->second.streams;
    if (g < corr && std::find(streams.begin(), streams.end(), stream) != streams.end()) {
      entries_.erase(it);
      graphs_.erase(graphs_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  auto it = entries_.find(corr);
  if (it == entries_.end()) {
    early_[corr % kEarlySlots] = {corr, stream};  // the API record may still come
    return;
  }
  Entry& e = it->second;
  if (!e.graph) {
    entries_.erase(it);
    return;
  }
  if (!e.device_seen) graphs_.push_back(corr);
  e.device_seen = true;
  if (std::find(e.streams.begin(), e.streams.end(), stream) == e.streams.end()) e.streams.push_back(stream);
}

void LaunchTracker::on_flush_drained(int64_t flush_start_ns) {
  if (synced_until_ns_ == INT64_MIN || flush_start_ns < synced_until_ns_) return;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->second.start_ns < synced_until_ns_) erase(it);
    it = next;
  }
}

int64_t LaunchTracker::oldest_waiting_ns(int64_t now_ns, int64_t max_wait_ns) {
  const int64_t stale_before = now_ns - max_wait_ns;
  int64_t oldest = kNever;
  int scanned = 0;
  for (auto it = entries_.begin(); it != entries_.end() && scanned <= kWatermarkScan;) {
    if (it->second.start_ns < stale_before) {
      ++timed_out_;
      auto next = std::next(it);
      erase(it);
      it = next;
      continue;
    }
    oldest = std::min(oldest, it->second.start_ns);
    ++scanned;
    ++it;
  }
  return oldest;
}

uint64_t LaunchTracker::take_timed_out() {
  const uint64_t n = timed_out_;
  timed_out_ = 0;
  return n;
}

}  // namespace gpuutil::cupti
