// NVTX queue drain -> HostRange (see nvtx_collector.h).
#include "collectors/nvtx/nvtx_collector.h"

#include <dlfcn.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "gpuutil/clock.h"
#include "gpuutil/range_classify.h"

namespace gpuutil::nvtx {

namespace {
// The rings have one consumer: at most one collector drains them.
std::atomic<bool> g_collector_active{false};
}  // namespace

NvtxCollector::NvtxCollector(EventSink& session, NvtxCollectorOptions options)
    : session_(session), options_(std::move(options)) {}

NvtxCollector::~NvtxCollector() {
  if (owner_pid_ != 0 && owner_pid_ != getpid()) {
    new (&drain_) std::thread();  // forked child: the thread is the parent's
    return;
  }
  stop();
}

std::string NvtxCollector::start() {
  if (running_) return "";
  std::string path = options_.library;
  const char* env = std::getenv("NVTX_INJECTION64_PATH");
  if (path.empty()) {
    if (!env || !*env) return "NVTX_INJECTION64_PATH is not set: import gpuutil before the first NVTX call";
    path = env;
  } else if (env && *env && path != env) {
    return std::string("NVTX_INJECTION64_PATH is owned by another tool (") + env +
           ", e.g. Nsight Systems): gpuutil does not collect NVTX ranges";
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = dlerror();
    return "cannot load " + path + ": " + (err ? err : "dlopen failed");
  }
  auto get = reinterpret_cast<const Abi* (*)()>(dlsym(h, "gpuutil_nvtx_abi"));
  if (!get) {
    return "NVTX_INJECTION64_PATH names " + path +
           ", which is not gpuutil's (another tool such as Nsight Systems owns NVTX injection)";
  }
  abi_ = get();
  if (!abi_ || abi_->version != kAbiVersion) return "libgpuutil_nvtx ABI version mismatch: " + path;
  if (!abi_->rings || !abi_->slab || abi_->segments == 0) return "libgpuutil_nvtx could not map its rings";
  bool expected = false;
  if (!g_collector_active.compare_exchange_strong(expected, true)) {
    return "another gpuutil NVTX collector is already active in this process";
  }
  owner_pid_ = getpid();
  tick0_ = abi_->now_ticks();
  ns0_ = session_now_ns();
  ns_per_tick_ = abi_->ticks_are_tsc ? 0.0 : 1.0;
  // Skip whatever was recorded before this session.
  const uint32_t n = abi_->rings_claimed->load(std::memory_order_acquire);
  threads_.assign(kMaxRings, ThreadState{});
  for (uint32_t i = 0; i < n && i < kMaxRings; ++i) {
    Ring& r = abi_->rings[i];
    const uint32_t state = r.state.load(std::memory_order_acquire);
    if (state != kRingLive && state != kRingExited) continue;  // free, or being taken (read from its start)
    consume_to(*abi_, r, r.head.load(std::memory_order_acquire));
    threads_[i].dropped_seen = r.dropped.load();
    threads_[i].generation = r.generation;
  }
  without_ring_seen_ = abi_->threads_without_ring->load();
  registrations_lost_seen_ = abi_->registrations_lost->load();
  abi_->recording->store(1, std::memory_order_release);
  quit_ = false;
  running_ = true;
  drain_ = std::thread([this] {
    const int min_ms = std::max(1, options_.drain_poll_ms);
    const int max_ms = std::max(min_ms, options_.drain_poll_max_ms);
    int poll_ms = min_ms;
    while (!quit_.load(std::memory_order_acquire)) {
      // Sleep until the poll interval passes, a producer gets kWakeSegments
      // ahead, or stop(): all three bump or time out the futex word.
      const uint32_t seen = abi_->wake->load(std::memory_order_acquire);
      if (!quit_.load(std::memory_order_acquire)) {
        timespec timeout{poll_ms / 1000, (poll_ms % 1000) * 1'000'000L};
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(abi_->wake), FUTEX_WAIT_PRIVATE, seen, &timeout, nullptr, 0);
      }
      uint64_t fill;
      {
        std::lock_guard<std::mutex> lock(drain_mu_);
        fill = drain_locked();
        hand_over(/*wait=*/false);
      }
      // Backlog under a segment at the last drain: poll less often. The
      // producers' wake covers bursts between polls.
      if (fill > kSegmentEntries) {
        poll_ms = min_ms;
      } else {
        poll_ms = std::min(max_ms, poll_ms * 2);
      }
    }
  });
  return "";
}

void NvtxCollector::calibrate() {
  if (!abi_->ticks_are_tsc) return;
  const uint64_t t = abi_->now_ticks();
  const int64_t n = session_now_ns();
  if (t > tick0_ && n > ns0_ + 100'000) ns_per_tick_ = double(n - ns0_) / double(t - tick0_);
}

int64_t NvtxCollector::to_ns(uint64_t ticks) const {
  if (!abi_->ticks_are_tsc) return static_cast<int64_t>(ticks);
  return ns0_ + static_cast<int64_t>((static_cast<double>(static_cast<int64_t>(ticks - tick0_))) * ns_per_tick_);
}

uint64_t NvtxCollector::drain_locked() {
  if (!abi_) return 0;
  uint64_t most = 0;
  calibrate();
  if (abi_->ticks_are_tsc && ns_per_tick_ == 0.0) {
    // Not enough baseline for the tick rate yet: wait >= 0.1 ms, then fit.
    const int64_t until = ns0_ + 200'000;
    while (session_now_ns() < until) {
    }
    calibrate();
  }
  const uint32_t n = abi_->rings_claimed->load(std::memory_order_acquire);
  const int64_t pid = getpid();
  uint64_t too_deep = 0;  // pushes beyond kMaxOpenDepth in this drain
  for (uint32_t i = 0; i < n && i < kMaxRings; ++i) {
    Ring& r = abi_->rings[i];
    const uint32_t state = r.state.load(std::memory_order_acquire);
    if (state != kRingLive && state != kRingExited) continue;  // free, or being taken by a new thread
    ThreadState& ts = threads_[i];
    if (ts.generation != r.generation) {  // a new thread took the ring since the last drain
      ts = ThreadState{};
      ts.generation = r.generation;
    }
    const uint64_t head = r.head.load(std::memory_order_acquire);
    uint64_t tail = r.tail.load(std::memory_order_relaxed);
    most = std::max(most, head - tail);
    if (tail != head && !ts.known) {
      ts.thread = session_.thread_index(pid, static_cast<int64_t>(r.tid), {}, static_cast<int64_t>(r.os_tid));
      ts.known = true;
    }
    for (; tail != head; ++tail) {
      const Entry& e = consume_entry(*abi_, r, tail);
      OpenStack& stack = ts.stacks[e.domain];
      if (e.type == kPush) {
        if (stack.open.size() >= kMaxOpenDepth) {
          ++stack.beyond;
          ++too_deep;
          continue;
        }
        Open& o = stack.open.emplace_back();
        o.ticks = e.ticks;
        std::memcpy(o.name, e.name, kNameBytes);
        o.name[kNameBytes - 1] = '\0';
        continue;
      }
      if (stack.beyond > 0) {  // closes a push that was too deep to keep
        --stack.beyond;
        continue;
      }
      if (stack.open.empty()) continue;  // pop without push (began before the session)
      const Open o = stack.open.back();
      stack.open.pop_back();
      const char* domain = e.domain < kMaxDomains ? abi_->domain_names[e.domain] : "";
      if (std::strcmp(domain, "gpuutil") == 0) continue;  // our own step ranges
      EventSink::StagedRange& h = staged_.emplace_back();
      h.start_ns = to_ns(o.ticks);
      h.end_ns = std::max(h.start_ns, to_ns(e.ticks));
      static_assert(sizeof h.name >= kNameBytes, "a ring entry's name fits a staged range");
      std::memcpy(h.name, o.name, kNameBytes);
      h.thread = ts.thread;
      h.category = std::strcmp(domain, "NCCL") == 0 ? RangeCategory::kCollective : classify_range(o.name, false);
      ranges_stored_.fetch_add(1, std::memory_order_relaxed);
      if (staged_.size() >= kStageBatch) hand_over(/*wait=*/staged_.size() >= kStageMax);
    }
    r.tail.store(tail, std::memory_order_release);
    const uint64_t dropped = r.dropped.load(std::memory_order_relaxed);
    if (dropped > ts.dropped_seen) {
      session_.count(Diag::nvtx_records_dropped, dropped - ts.dropped_seen, "NVTX queue segments used up");
      ts.dropped_seen = dropped;
    }
    if (state == kRingExited) {
      // Its thread ended and every entry is read: the segment it ended in
      // goes back, ranges it left open are dropped with its state, and the
      // ring is free for the next thread.
      if (head != 0) abi_->free_segment(r.read_segment);
      ts = ThreadState{};
      ts.generation = r.generation;
      r.state.store(kRingFree, std::memory_order_release);
    }
  }
  if (too_deep > 0) {
    session_.count(Diag::nvtx_records_dropped, too_deep, "NVTX ranges nested more than 1024 deep on one thread");
  }
  const uint64_t without = abi_->threads_without_ring->load();
  if (without > without_ring_seen_) {
    session_.count(Diag::nvtx_records_dropped, without - without_ring_seen_,
                   "more threads recording at once than NVTX queues (256)");
    without_ring_seen_ = without;
  }
  const uint64_t lost = abi_->registrations_lost->load(std::memory_order_relaxed);
  if (lost > registrations_lost_seen_) {
    session_.count(Diag::nvtx_registrations_lost, lost - registrations_lost_seen_,
                   "NVTX domain or string registrations beyond gpuutil's tables");
    registrations_lost_seen_ = lost;
  }
  return most;
}

void NvtxCollector::hand_over(bool wait) {
  // The session is busy while a report is analysed: staging then goes on
  // (up to kStageMax ranges) so the rings keep draining; past that, wait.
  if (!staged_.empty()) session_.add_staged_ranges(staged_, wait);
}

void NvtxCollector::drain_now() {
  if (!running_ || owner_pid_ != getpid()) return;
  std::lock_guard<std::mutex> lock(drain_mu_);
  drain_locked();
  hand_over(/*wait=*/true);  // a step boundary: everything recorded so far is in the session
}

void NvtxCollector::stop() {
  if (!running_) return;
  running_ = false;
  if (owner_pid_ != getpid()) {
    new (&drain_) std::thread();
    return;
  }
  abi_->recording->store(0, std::memory_order_release);
  quit_.store(true, std::memory_order_release);
  abi_->wake->fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(abi_->wake), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
  drain_.join();
  std::lock_guard<std::mutex> lock(drain_mu_);
  drain_locked();
  hand_over(/*wait=*/true);
  threads_.clear();
  g_collector_active.store(false);
}

}  // namespace gpuutil::nvtx
