// The per-thread range rings of gpuutil's LibTorch hook: the producer side
// (one call per finished range, on the application thread) and the consumer
// side (drain, one thread at a time). Header-only and torch-free, so the
// hook (record_function_hook.cpp, built against torch) and gpuutil's trace
// replay (which plays recorded PyTorch ranges through exactly this entry
// point, without torch) share one implementation.
//
// Hot path (record()): no allocation after a thread's first range (its ring
// is allocated once then), no locks, no Python. Each thread writes into its
// own fixed-size ring (single producer); drain() reads the rings (single
// consumer). A full ring drops the range and counts it. Rings are linked
// into a lock-free list and live until the process exits, so a thread that
// ends never leaves a dangling ring.
//
// Threads are keyed by (uint32_t)pthread_self(), the id CUPTI records in
// its API records (gpuutil/thread_key.h), so a range and the CUDA launches
// of the same thread meet on one session thread; the OS tid is kept beside
// it to name the thread.
//
// `Tag` makes independent ring sets (one per instantiation): the hook's and
// the replay's never mix.
#pragma once

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hook_abi.h"

namespace gpuutil_hook {

template <class Tag, size_t RingSize = 4096>
class RingSet {
  static_assert((RingSize & (RingSize - 1)) == 0, "RingSize must be a power of two");

 public:
  static constexpr size_t kRingSize = RingSize;
  static constexpr size_t kNameBytes = GPUUTIL_HOOK_NAME_BYTES;  // longer names are truncated

  // Producer (the calling thread): one finished range.
  static void record(const char* name, int64_t start_ns, int64_t end_ns, uint8_t kind) {
    Ring* ring = this_thread_ring();
    const uint64_t head = ring->head.load(std::memory_order_relaxed);
    if (head - ring->tail.load(std::memory_order_acquire) >= RingSize) {
      ring->dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Record& r = ring->records[head & (RingSize - 1)];
    r.start_ns = start_ns;
    r.end_ns = end_ns;
    r.kind = kind;
    size_t n = std::strlen(name);
    if (n > kNameBytes) n = kNameBytes;
    std::memcpy(r.name, name, n);
    r.name[n] = '\0';
    ring->head.store(head + 1, std::memory_order_release);
  }

  // Consumer: hands every range recorded since the last drain to `sink`,
  // oldest first per thread; returns how many were dropped meanwhile.
  static uint64_t drain_into(gpuutil_hook_range_fn sink, void* ctx) {
    uint64_t dropped = 0;
    for (Ring* r = head_.load(std::memory_order_acquire); r != nullptr; r = r->next) {
      const uint64_t head = r->head.load(std::memory_order_acquire);
      uint64_t tail = r->tail.load(std::memory_order_relaxed);
      for (; tail != head; ++tail) {
        const Record& rec = r->records[tail & (RingSize - 1)];
        sink(ctx, rec.name, rec.start_ns, rec.end_ns, r->thread_key, r->os_tid, rec.kind);
      }
      r->tail.store(tail, std::memory_order_release);
      dropped += r->dropped.exchange(0, std::memory_order_relaxed);
    }
    return dropped;
  }

 private:
  struct Record {
    int64_t start_ns;
    int64_t end_ns;
    uint8_t kind;  // 0 user scope, 1 op (FUNCTION), 2 autograd node (BACKWARD_FUNCTION)
    char name[kNameBytes + 7];
  };
  static_assert(sizeof(Record) == 128, "one record is two cache lines");

  struct Ring {
    Record records[RingSize];
    std::atomic<uint64_t> head{0};  // written by the owning thread (release)
    std::atomic<uint64_t> tail{0};  // written by the drainer (release)
    std::atomic<uint64_t> dropped{0};
    int64_t thread_key = 0;  // (uint32_t)pthread_self(): what CUPTI records
    int64_t os_tid = 0;      // gettid(): the thread's name in reports
    Ring* next = nullptr;    // immutable once published
  };

  static Ring* this_thread_ring() {
    Ring* r = t_ring_;
    if (r != nullptr) return r;
    r = new Ring();  // once per thread; owned by the list until process exit
    r->thread_key = static_cast<int64_t>(static_cast<uint32_t>(pthread_self()));
    r->os_tid = static_cast<int64_t>(::syscall(SYS_gettid));
    Ring* head = head_.load(std::memory_order_relaxed);
    do {
      r->next = head;
    } while (!head_.compare_exchange_weak(head, r, std::memory_order_release, std::memory_order_relaxed));
    t_ring_ = r;
    return r;
  }

  static inline std::atomic<Ring*> head_{nullptr};
  static inline thread_local Ring* t_ring_ = nullptr;
};

}  // namespace gpuutil_hook
