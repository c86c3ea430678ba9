// A bounded lock-free multi-producer multi-consumer ring (Vyukov's), the one
// queue of the CUPTI collector's hot paths: the buffer pool's free and
// completed buffers (buffer_pool.h) and the calls learnt at API exit
// (api_callbacks.h).
//
// push() returns false only when the ring holds its capacity. A push that
// meets a cell whose previous value is still being popped waits for that
// pop to finish (a few instructions unless that thread was preempted). No
// allocation after construction, no lock.
//
// The cells are their own anonymous mapping, not malloc'd: the learnt-call
// ring is 2.2 MB (1.7 MB before issue 36), and a block that size freed into
// glibc's heap raises its mmap threshold, so every later profile start/stop
// left the heap that much larger in RSS. A mapping is returned to the OS whole when the ring goes.
//
// Contract: push() and pop() from any thread, concurrently; T is trivially
// copyable.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <thread>
#include <type_traits>

namespace gpuutil::cupti {

template <class T>
class MpmcRing {
  static_assert(std::is_trivially_copyable_v<T>, "ring values are copied bytewise");

 public:
  // Room for at least `capacity` values (rounded up to a power of two).
  explicit MpmcRing(size_t capacity) : mask_(pow2_at_least(capacity) - 1), map_bytes_((mask_ + 1) * sizeof(Cell)) {
    void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    cells_ = static_cast<Cell*>(p);
    for (size_t i = 0; i <= mask_; ++i) new (&cells_[i]) Cell{{i}, T{}};
  }
  ~MpmcRing() { munmap(cells_, map_bytes_); }  // Cell is trivially destructible
  MpmcRing(const MpmcRing&) = delete;
  MpmcRing& operator=(const MpmcRing&) = delete;

  bool push(const T& v) {
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const size_t seq = c.seq.load(std::memory_order_acquire);
      const intptr_t dif = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (dif == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.value = v;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (dif < 0) {
        // Either really full, or the cell's previous value is being popped
        // by a consumer that claimed it and has not released it yet.
        if (pos - head_.load(std::memory_order_acquire) > mask_) return false;
        std::this_thread::yield();
        pos = tail_.load(std::memory_order_relaxed);
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  bool pop(T& v) {
    size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const size_t seq = c.seq.load(std::memory_order_acquire);
      const intptr_t dif = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos + 1);
      if (dif == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          v = c.value;
          c.seq.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (dif < 0) {
        return false;  // empty
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

 private:
  static size_t pow2_at_least(size_t n) {
    size_t p = 1;
    while (p < n) p <<= 1;
    return p;
  }
  struct Cell {
    std::atomic<size_t> seq;
    T value;
  };
  static_assert(std::is_trivially_destructible_v<Cell>, "cells are unmapped, never destroyed");
  static_assert(alignof(Cell) <= 4096, "a mapping is page-aligned");
  size_t mask_;
  size_t map_bytes_;
  Cell* cells_ = nullptr;
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) std::atomic<size_t> tail_{0};
};

}  // namespace gpuutil::cupti
