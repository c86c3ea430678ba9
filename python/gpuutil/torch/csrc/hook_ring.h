// The per-thread range queues of gpuutil's LibTorch hook: the producer side
// (one call per finished range, on the application thread) and the consumer
// side (drain, one thread at a time). Header-only and torch-free, so the
// hook (record_function_hook.cpp, built against torch) and gpuutil's trace
// replay (which plays recorded PyTorch ranges through exactly this entry
// point, without torch) share one implementation.
//
// Each recording thread owns a single-producer/single-consumer queue: a
// chain of segments (SegmentRanges 128-byte records each) drawn from one
// slab shared by every thread. The slab is one mmap made at the process's
// first range (MAP_NORESERVE: committed as pages are first written); free
// segments sit on a lock-free LIFO stack, so the warm ones are reused and
// the memory touched is the deepest backlog ever held plus a segment per
// recording thread. A queue is drained only at step ends, so between two of
// them one thread may hold the whole slab: a detail step of a large model
// (an autograd node per backward op, gradient accumulation) records far
// more than a fixed per-thread ring held. A range is lost (counted) only
// when no segment is free.
//
// Hot path (record()): no allocation after the process's first range (the
// slab) and a thread's first range (its queue header, or a reused one), no
// locks, no Python. Once per SegmentRanges ranges the producer pops a
// segment (one CAS). The consumer follows each chain and gives a segment
// back once it has read past it. A thread that exits hands its queue back
// (a thread_local destructor sets a flag); the drain that empties it
// returns its last segment and lets a new thread take the header, so
// short-lived threads leak neither segments nor headers.
//
// Threads are keyed by (uint32_t)pthread_self(), the id CUPTI records in
// its API records (gpuutil/thread_key.h), so a range and the CUDA launches
// of the same thread meet on one session thread; the OS tid is kept beside
// it to name the thread.
//
// `Tag` makes independent queue sets (one per instantiation, each with its
// own slab): the hook's and the replay's never mix.
#pragma once

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hook_abi.h"

namespace gpuutil_hook {

template <class Tag, size_t SegmentRanges = 1024, uint32_t Segments = 512>
class RingSet {
  static_assert((SegmentRanges & (SegmentRanges - 1)) == 0, "SegmentRanges must be a power of two");
  static_assert(Segments >= 8, "a slab needs a few segments");

 public:
  static constexpr size_t kSegmentRanges = SegmentRanges;
  static constexpr uint32_t kSegments = Segments;  // the most; fewer when the slab cannot be mapped
  static constexpr uint32_t kMinSegments = 8;
  static constexpr size_t kNameBytes = GPUUTIL_HOOK_NAME_BYTES;  // longer names are truncated
  static constexpr uint32_t kNoSegment = UINT32_MAX;

  // Producer (the calling thread): one finished range.
  static void record(const char* name, int64_t start_ns, int64_t end_ns, uint8_t kind) {
    Queue* q = this_thread_queue();
    if (q == nullptr) {  // no slab (mmap refused even its smallest size), or the thread is ending
      unqueued_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const uint64_t head = q->head.load(std::memory_order_relaxed);
    const size_t offset = static_cast<size_t>(head & (SegmentRanges - 1));
    if (offset == 0) {
      // The range starts a segment: take one. The consumer reads
      // first_segment / next_ only after it sees head past this range (the
      // release store below).
      const uint32_t seg = take_segment();
      if (seg == kNoSegment) {
        q->dropped.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      if (head == 0) {
        q->first_segment = seg;
      } else {
        next_[q->write_segment].store(seg, std::memory_order_relaxed);
      }
      q->write_segment = seg;
    }
    Record& r = slab_.load(std::memory_order_relaxed)[static_cast<size_t>(q->write_segment) * SegmentRanges + offset];
    r.start_ns = start_ns;
    r.end_ns = end_ns;
    r.kind = kind;
    size_t n = std::strlen(name);
    if (n > kNameBytes) n = kNameBytes;
    std::memcpy(r.name, name, n);
    r.name[n] = '\0';
    q->head.store(head + 1, std::memory_order_release);
  }

  // Producer: one range the caller could not record (the hook's nesting
  // limit); counted with the dropped ranges at the next drain.
  static void lost() { unqueued_.fetch_add(1, std::memory_order_relaxed); }

  // Consumer: hands every range recorded since the last drain to `sink`,
  // oldest first per thread; returns how many were dropped meanwhile.
  static uint64_t drain_into(gpuutil_hook_range_fn sink, void* ctx) {
    uint64_t dropped = unqueued_.exchange(0, std::memory_order_relaxed);
    for (Queue* q = queues_.load(std::memory_order_acquire); q != nullptr; q = q->next) {
      const uint32_t state = q->state.load(std::memory_order_acquire);
      if (state != kLive && state != kExited) continue;  // free, or being taken by a new thread
      const uint64_t head = q->head.load(std::memory_order_acquire);
      uint64_t tail = q->tail;
      for (; tail != head; ++tail) {
        const Record& rec = read_at(*q, tail);
        sink(ctx, rec.name, rec.start_ns, rec.end_ns, q->thread_key, q->os_tid, rec.kind);
      }
      q->tail = tail;
      dropped += q->dropped.exchange(0, std::memory_order_relaxed);
      if (state == kExited) {
        // Its thread is gone and every range is read: its last segment and
        // its header go back for other threads.
        if (head != 0) give_back(q->read_segment);
        q->state.store(kFree, std::memory_order_release);
      }
    }
    return dropped;
  }

  // For tests and benchmarks: segments in the slab (0 before the first
  // range), and how many of them no queue holds now (approximate while
  // producers run).
  static uint32_t segments() { return segments_.load(std::memory_order_acquire); }
  static uint32_t segments_free() {
    const uint32_t n = segments();
    const uint32_t claimed = claimed_.load(std::memory_order_relaxed);
    return (n > claimed ? n - claimed : 0) + free_count_.load(std::memory_order_relaxed);
  }
  // Segments ever written (the slab's committed part), and queue headers made.
  static uint32_t segments_touched() {
    const uint32_t n = segments(), claimed = claimed_.load(std::memory_order_relaxed);
    return claimed < n ? claimed : n;
  }
  static uint32_t queues_made() { return queues_made_.load(std::memory_order_relaxed); }

 private:
  struct Record {
    int64_t start_ns;
    int64_t end_ns;
    uint8_t kind;  // 0 user scope, 1 op (FUNCTION), 2 autograd node (BACKWARD_FUNCTION)
    char name[kNameBytes + 7];
  };
  static_assert(sizeof(Record) == 128, "one record is two cache lines");

  enum : uint32_t { kLive = 0, kExited = 1, kFree = 2, kTaking = 3 };

  struct alignas(64) Queue {
    std::atomic<uint64_t> head{0};     // ranges recorded; written by the owning thread (release)
    std::atomic<uint64_t> dropped{0};  // ranges lost because no segment was free
    uint32_t first_segment = kNoSegment;  // holds ranges [0, SegmentRanges); set before head moves
    uint32_t write_segment = kNoSegment;  // producer only: where range `head` goes (once head % S != 0)
    int64_t thread_key = 0;  // (uint32_t)pthread_self(): what CUPTI records
    int64_t os_tid = 0;      // gettid(): the thread's name in reports
    std::atomic<uint32_t> state{kLive};
    Queue* next = nullptr;  // immutable once published
    alignas(64) uint64_t tail = 0;        // consumer only: ranges read
    uint32_t read_segment = kNoSegment;   // consumer only: the segment range `tail` is read from
  };

  // The consumer: the range at `pos` of q (read in order, q.tail <= pos <
  // head as loaded with acquire). At a segment's first range it moves to
  // that segment and gives the one before back.
  static const Record& read_at(Queue& q, uint64_t pos) {
    const size_t offset = static_cast<size_t>(pos & (SegmentRanges - 1));
    if (offset == 0) {
      if (pos == 0) {
        q.read_segment = q.first_segment;
      } else {
        const uint32_t done = q.read_segment;
        q.read_segment = next_[done].load(std::memory_order_relaxed);
        give_back(done);
      }
    }
    return slab_.load(std::memory_order_relaxed)[static_cast<size_t>(q.read_segment) * SegmentRanges + offset];
  }

  // Producers: a warm free segment, else one never used, else kNoSegment.
  static uint32_t take_segment() {
    uint64_t top = free_top_.load(std::memory_order_acquire);
    while (static_cast<uint32_t>(top) != 0) {
      const uint32_t seg = static_cast<uint32_t>(top) - 1;
      const uint64_t below = ((top >> 32) + 1) << 32 | next_[seg].load(std::memory_order_relaxed);
      if (free_top_.compare_exchange_weak(top, below, std::memory_order_acq_rel, std::memory_order_acquire)) {
        free_count_.fetch_sub(1, std::memory_order_relaxed);
        return seg;
      }
    }
    const uint32_t n = segments_.load(std::memory_order_relaxed);
    uint32_t c = claimed_.load(std::memory_order_relaxed);
    while (c < n) {
      if (claimed_.compare_exchange_weak(c, c + 1, std::memory_order_relaxed)) return c;
    }
    return kNoSegment;
  }

  // The consumer: puts a segment it has read past on the free stack (its
  // next_ entry becomes the stack link; the tag in the top bits defeats ABA).
  static void give_back(uint32_t seg) {
    uint64_t top = free_top_.load(std::memory_order_relaxed);
    for (;;) {
      next_[seg].store(static_cast<uint32_t>(top), std::memory_order_relaxed);
      const uint64_t above = ((top >> 32) + 1) << 32 | (seg + 1);
      if (free_top_.compare_exchange_weak(top, above, std::memory_order_release, std::memory_order_relaxed)) {
        free_count_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
  }

  // The slab, mapped by the first thread that records (a racing loser
  // unmaps its own); halved while the system refuses the size.
  static bool map_slab() {
    if (slab_.load(std::memory_order_acquire) != nullptr) return true;
    for (uint32_t n = Segments; n >= kMinSegments; n /= 2) {
      void* p = mmap(nullptr, static_cast<size_t>(n) * SegmentRanges * sizeof(Record), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) continue;
      Record* expected = nullptr;
      if (mapping_.compare_exchange_strong(expected, static_cast<Record*>(p), std::memory_order_acq_rel)) {
        segments_.store(n, std::memory_order_relaxed);
        slab_.store(static_cast<Record*>(p), std::memory_order_release);
        return true;
      }
      munmap(p, static_cast<size_t>(n) * SegmentRanges * sizeof(Record));
      while (slab_.load(std::memory_order_acquire) == nullptr) {  // the winner is publishing its size
      }
      return true;
    }
    return false;
  }

  // Hands the thread's queue to the drain when the thread ends. A range
  // recorded later on that thread (by another thread_local's destructor) is
  // counted as dropped, never written into a queue another thread may own.
  struct Exit {
    Queue* queue = nullptr;
    ~Exit() {
      t_queue_ = nullptr;
      t_exited_ = true;
      if (queue != nullptr) queue->state.store(kExited, std::memory_order_release);
    }
  };

  static Queue* this_thread_queue() {
    Queue* q = t_queue_;
    if (q != nullptr) return q;
    if (t_exited_ || !map_slab()) return nullptr;
    // A header a finished thread left (its ranges all drained), else a new one.
    for (q = queues_.load(std::memory_order_acquire); q != nullptr; q = q->next) {
      uint32_t free = kFree;
      if (q->state.compare_exchange_strong(free, kTaking, std::memory_order_acquire)) break;
    }
    const bool reused = q != nullptr;
    if (reused) {
      q->head.store(0, std::memory_order_relaxed);
      q->dropped.store(0, std::memory_order_relaxed);
      q->first_segment = q->write_segment = q->read_segment = kNoSegment;
      q->tail = 0;
    } else {
      q = new Queue();  // once per thread; owned by the list until process exit
      queues_made_.fetch_add(1, std::memory_order_relaxed);
    }
    q->thread_key = static_cast<int64_t>(static_cast<uint32_t>(pthread_self()));
    q->os_tid = static_cast<int64_t>(::syscall(SYS_gettid));
    if (reused) {
      q->state.store(kLive, std::memory_order_release);
    } else {
      Queue* first = queues_.load(std::memory_order_relaxed);
      do {
        q->next = first;
      } while (!queues_.compare_exchange_weak(first, q, std::memory_order_release, std::memory_order_relaxed));
    }
    static thread_local Exit exit;  // registers the destructor on this thread's first range only
    exit.queue = q;
    t_queue_ = q;
    return q;
  }

  static inline std::atomic<Record*> mapping_{nullptr};  // claimed by the mapping thread
  static inline std::atomic<Record*> slab_{nullptr};     // published once segments_ is set
  static inline std::atomic<uint32_t> segments_{0};
  static inline std::atomic<uint32_t> claimed_{0};        // segments ever handed out: [0, claimed_)
  static inline std::atomic<uint64_t> free_top_{0};       // tag << 32 | (top segment + 1), 0 = empty
  static inline std::atomic<uint32_t> free_count_{0};
  static inline std::atomic<uint32_t> next_[Segments] = {};  // chain link, or stack link while free
  static inline std::atomic<Queue*> queues_{nullptr};
  static inline std::atomic<uint64_t> unqueued_{0};  // ranges with no queue (no slab, thread ending), lost()
  static inline std::atomic<uint32_t> queues_made_{0};
  static inline thread_local Queue* t_queue_ = nullptr;
  static inline thread_local bool t_exited_ = false;
};

}  // namespace gpuutil_hook
