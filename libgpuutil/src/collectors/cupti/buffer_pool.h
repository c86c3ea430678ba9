// The preallocated activity-buffer pool CUPTI's callbacks draw from.
//
// All buffer memory is one mmap'd block reserved at start() for up to
// max_count buffers (MAP_NORESERVE: only buffers ever handed out cost
// memory); `count` of them are free at first, and the drain thread adds more
// with grow() when CUPTI holds many at once (a GPU running behind the host
// keeps buffers with unfinished records). CUPTI's buffer-requested callback
// pops a free buffer, or, when none is free (the drain thread descheduled
// under load), claims a never-used one of the reservation with one
// compare-and-swap; it never allocates, never maps, and finds no buffer only
// once all max_count are out. The
// buffer-completed callback pushes (buffer, valid bytes) onto the completed
// queue (never decodes). Both queues are bounded lock-free MPMC rings
// (Vyukov) with twice as many cells as buffers; every buffer is in exactly
// one place (free ring, CUPTI, completed ring, drain thread), so a push never
// finds the ring full. A push that meets a cell whose previous value is
// still being popped waits for that pop to finish (a tiny spin on the
// pool's own ring; no lock is shared with anyone).
//
// Contract: acquire()/complete() may be called from any thread, concurrently
// (CUPTI's threads and the application's threads). take_completed() and
// release() are called by the single drain thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "collectors/cupti/mpmc_ring.h"

namespace gpuutil::cupti {

// The pool's queues of buffer indexes (mpmc_ring.h).
using IndexRing = MpmcRing<uint64_t>;

class BufferPool {
 public:
  // count buffers of buffer_bytes each (buffer_bytes rounded up to 8), up to
  // max_count (>= count) with grow().
  BufferPool(size_t count, size_t buffer_bytes, size_t max_count = 0);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  bool ok() const { return base_ != nullptr; }
  size_t buffer_bytes() const { return buffer_bytes_; }
  size_t count() const { return count_.load(std::memory_order_acquire); }  // buffers in use so far
  size_t max_count() const { return max_count_; }
  // Drain thread: adds up to n more buffers (bounded by max_count); returns
  // how many were added. Safe against concurrent acquire() claims.
  size_t grow(size_t n);
  // Buffers free now (approximate while callbacks run).
  size_t free_count() const { return count() - outstanding(); }

  // Hot path (CUPTI callbacks): a free buffer, else a never-used one of the
  // reservation (count() grows by one), or nullptr when all max_count are out.
  // now_ns (session clock) is remembered until the buffer comes back.
  uint8_t* acquire(int64_t now_ns);
  // Hot path: hands a filled buffer to the drain thread. Returns false when
  // `buffer` is not one of ours (foreign, NULL, misaligned).
  bool complete(uint8_t* buffer, size_t valid_bytes);

  // Drain thread: next completed buffer, or false when none.
  bool take_completed(uint8_t*& buffer, size_t& valid_bytes);
  // Drain thread: returns a decoded buffer to the free ring, zeroing its
  // first zero_bytes (what CUPTI wrote: buffers are handed out zeroed,
  // untouched pages of the mapping are zero already).
  void release(uint8_t* buffer, size_t zero_bytes = 0);

  // Buffers currently outside the pool (in CUPTI or queued), for stop().
  size_t outstanding() const { return outstanding_.load(std::memory_order_acquire); }
  // When the oldest buffer CUPTI still holds was handed out (INT64_MAX when
  // CUPTI holds none): records newer than that may still be in it.
  // written_only: only buffers CUPTI has written into (their first word is
  // no longer zero; buffers are handed out zeroed): a prefetched buffer
  // CUPTI keeps empty hides no record.
  int64_t oldest_held_since_ns(bool written_only = false) const;
  // Buffers CUPTI holds now went to another client (it took CUPTI over):
  // no longer waited for (oldest_held_since_ns() skips them). They stay
  // outstanding and are never reused unless they come back. Called while
  // CUPTI calls none of this pool's callbacks.
  void forget_held();
  // Whether `buffer` is one of this pool's buffers.
  bool owns(const uint8_t* buffer) const { return index_of(buffer) >= 0; }

 private:
  int64_t index_of(const uint8_t* buffer) const;

  uint8_t* base_ = nullptr;
  std::atomic<size_t> count_;
  size_t max_count_;
  size_t buffer_bytes_;
  size_t map_bytes_ = 0;
  IndexRing free_;
  IndexRing completed_;  // value = index << 32 | valid bytes (buffers < 4 GiB)
  std::atomic<size_t> outstanding_{0};
  std::unique_ptr<std::atomic<int64_t>[]> held_since_ns_;  // per buffer; INT64_MAX when not with CUPTI
};

}  // namespace gpuutil::cupti
