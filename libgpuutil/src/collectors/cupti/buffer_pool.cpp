// Lock-free buffer pool for CUPTI activity buffers (see buffer_pool.h).
#include "collectors/cupti/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace gpuutil::cupti {

BufferPool::BufferPool(size_t count, size_t buffer_bytes, size_t max_count)
    : count_(count),
      max_count_(std::max(count, max_count)),
      buffer_bytes_((buffer_bytes + 7) & ~size_t(7)),
      free_(2 * std::max(count, max_count)),
      completed_(2 * std::max(count, max_count)) {
  map_bytes_ = max_count_ * buffer_bytes_;
  void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  base_ = static_cast<uint8_t*>(p);
  held_since_ns_.reset(new std::atomic<int64_t>[max_count_]);
  for (size_t i = 0; i < max_count_; ++i) held_since_ns_[i].store(INT64_MAX, std::memory_order_relaxed);
  for (size_t i = 0; i < count; ++i) free_.push(i);
}

size_t BufferPool::grow(size_t n) {
  // Claims [have, have + add) against acquire()'s one-buffer claims, then
  // frees them; a claimed index is never pushed twice.
  size_t have = count_.load(std::memory_order_acquire);
  size_t add;
  do {
    add = std::min(n, max_count_ - have);
    if (add == 0) return 0;
  } while (!count_.compare_exchange_weak(have, have + add, std::memory_order_acq_rel));
  for (size_t i = have; i < have + add; ++i) free_.push(i);
  return add;
}

BufferPool::~BufferPool() {
  if (base_) munmap(base_, map_bytes_);
}

int64_t BufferPool::index_of(const uint8_t* buffer) const {
  if (!base_ || buffer < base_ || buffer >= base_ + map_bytes_) return -1;
  const size_t off = static_cast<size_t>(buffer - base_);
  if (off % buffer_bytes_ != 0) return -1;
  return static_cast<int64_t>(off / buffer_bytes_);
}

uint8_t* BufferPool::acquire(int64_t now_ns) {
  uint64_t i;
  if (!free_.pop(i)) {
    // The drain thread has not freed or added buffers in time (it may be
    // descheduled): claim a never-used buffer of the reservation here. One
    // compare-and-swap; the memory is already mapped (MAP_NORESERVE), so
    // nothing is allocated or mapped on the callback.
    size_t have = count_.load(std::memory_order_acquire);
    do {
      if (have >= max_count_) return nullptr;
    } while (!count_.compare_exchange_weak(have, have + 1, std::memory_order_acq_rel));
    i = have;
  }
  held_since_ns_[i].store(now_ns, std::memory_order_release);
  outstanding_.fetch_add(1, std::memory_order_acq_rel);
  return base_ + i * buffer_bytes_;
}

bool BufferPool::complete(uint8_t* buffer, size_t valid_bytes) {
  const int64_t i = index_of(buffer);
  if (i < 0) return false;
  if (valid_bytes > buffer_bytes_) valid_bytes = buffer_bytes_;  // never read past the buffer
  held_since_ns_[i].store(INT64_MAX, std::memory_order_release);
  return completed_.push((static_cast<uint64_t>(i) << 32) | static_cast<uint64_t>(valid_bytes));
}

bool BufferPool::take_completed(uint8_t*& buffer, size_t& valid_bytes) {
  uint64_t v;
  if (!completed_.pop(v)) return false;
  buffer = base_ + (v >> 32) * buffer_bytes_;
  valid_bytes = static_cast<size_t>(v & 0xffffffffu);
  return true;
}

int64_t BufferPool::oldest_held_since_ns(bool written_only) const {
  int64_t oldest = INT64_MAX;
  const size_t n = count();
  for (size_t i = 0; i < n && base_; ++i) {
    const int64_t t = held_since_ns_[i].load(std::memory_order_acquire);
    if (t >= oldest) continue;
    if (written_only) {
      // CUPTI may be writing it now: one relaxed word read, only ever
      // compared with zero (a buffer is handed out zeroed).
      const auto* head = reinterpret_cast<const uint64_t*>(base_ + size_t(i) * buffer_bytes_);
      if (__atomic_load_n(head, __ATOMIC_RELAXED) == 0) continue;
    }
    oldest = t;
  }
  return oldest;
}

void BufferPool::forget_held() {
  const size_t n = count();
  for (size_t i = 0; i < n && base_; ++i) held_since_ns_[i].store(INT64_MAX, std::memory_order_release);
}

void BufferPool::release(uint8_t* buffer, size_t zero_bytes) {
  const int64_t i = index_of(buffer);
  if (i < 0) return;
  // Handed out zeroed again (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER:
  // CUPTI then does not zero it on the application's thread).
  if (zero_bytes > 0) std::memset(buffer, 0, std::min(zero_bytes, buffer_bytes_));
  free_.push(static_cast<uint64_t>(i));
  outstanding_.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace gpuutil::cupti
