// Builder for planted timelines: EventStores whose answers are known by
// construction, for the accounting tests. Times are given in microseconds
// (as doubles for readability) and stored as exact integer ns.
#pragma once

#include <cmath>
#include <string>

#include "gpuutil/events.h"
#include "gpuutil/range_classify.h"

namespace gpuutil::test {

inline int64_t us(double v) { return static_cast<int64_t>(std::llround(v * 1000.0)); }

class Planted {
 public:
  Planted() {
    store_.threads.push_back({1, 1, "main"});
    DeviceInfo d;
    d.id = 0;
    d.name = "Planted GPU";
    d.compute_major = 8;
    d.sm_count = 100;
    d.max_threads_per_sm = 2048;
    d.registers_per_sm = 65536;
    d.shared_memory_per_sm_bytes = 167936;
    d.warp_size = 32;
    store_.devices.push_back(d);
  }

  EventStore& store() { return store_; }

  uint32_t thread(const std::string& name) {
    store_.threads.push_back({1, static_cast<int64_t>(store_.threads.size() + 1), name});
    return static_cast<uint32_t>(store_.threads.size() - 1);
  }

  Planted& step(int64_t n, double start_us, double end_us) {
    store_.steps.push_back({n, us(start_us), us(end_us)});
    return *this;
  }

  // A kernel, with an optional launching call on `thread` at launch_us.
  Planted& kernel(const std::string& name, double start_us, double end_us, double launch_us = -1,
                  uint32_t thread = 0, int32_t device = 0, int32_t stream = 7, uint32_t blocks = 1000) {
    DeviceActivity a;
    a.kind = ActivityKind::kKernel;
    a.name = store_.names.intern(name);
    a.start_ns = us(start_us);
    a.end_ns = us(end_us);
    a.device = device;
    a.stream = stream;
    a.is_communication = is_communication_kernel(name);
    a.grid[0] = blocks;
    a.grid[1] = a.grid[2] = 1;
    a.block[0] = 256;
    a.block[1] = a.block[2] = 1;
    a.registers_per_thread = 32;
    if (launch_us >= 0) {
      a.correlation_id = ++next_corr_;
      api("cudaLaunchKernel", launch_us, launch_us + 0.005, thread, a.correlation_id);
    }
    store_.activities.push_back(a);
    return *this;
  }

  Planted& memcpy(double start_us, double end_us, MemcpyDirection dir, uint64_t bytes, int32_t device = 0) {
    DeviceActivity a;
    a.kind = ActivityKind::kMemcpy;
    a.name = store_.names.intern("Memcpy");
    a.start_ns = us(start_us);
    a.end_ns = us(end_us);
    a.device = device;
    a.direction = dir;
    a.bytes = bytes;
    store_.activities.push_back(a);
    return *this;
  }

  // An async copy: a cudaMemcpyAsync call on `thread` over [call_start_us,
  // call_end_us) and the copy it enqueued over [start_us, end_us);
  // `pageable`: the host side is pageable (not pinned) memory.
  Planted& async_copy(double call_start_us, double call_end_us, double start_us, double end_us,
                      MemcpyDirection dir, uint64_t bytes, bool pageable, uint32_t thread = 0, int32_t device = 0) {
    DeviceActivity a;
    a.kind = ActivityKind::kMemcpy;
    a.name = store_.names.intern("Memcpy");
    a.start_ns = us(start_us);
    a.end_ns = us(end_us);
    a.device = device;
    a.stream = 7;
    a.direction = dir;
    a.bytes = bytes;
    a.host_pageable = pageable;
    a.correlation_id = ++next_corr_;
    api("cudaMemcpyAsync", call_start_us, call_end_us, thread, a.correlation_id);
    store_.activities.push_back(a);
    return *this;
  }

  Planted& api(const std::string& name, double start_us, double end_us, uint32_t thread = 0,
               uint64_t correlation = 0) {
    HostApiCall c;
    c.name = store_.names.intern(name);
    c.start_ns = us(start_us);
    c.end_ns = us(end_us);
    c.thread = thread;
    c.correlation_id = correlation;
    const ApiClass k = classify_api(name);
    c.kind = k.kind;
    c.sync = k.sync;
    c.graph = k.graph;
    store_.api_calls.push_back(c);
    return *this;
  }

  // A host API call that enqueues work; returns its correlation id for the
  // device records it produced (kernel_of, memcpy_of).
  uint64_t enqueue(const std::string& api_name, double start_us, double end_us, uint32_t thread = 0) {
    const uint64_t corr = ++next_corr_;
    api(api_name, start_us, end_us, thread, corr);
    return corr;
  }

  // A kernel enqueued by the call with correlation id `corr`.
  Planted& kernel_of(uint64_t corr, const std::string& name, double start_us, double end_us, int32_t stream = 7) {
    kernel(name, start_us, end_us, -1, 0, 0, stream);
    store_.activities.back().correlation_id = corr;
    return *this;
  }

  // A copy enqueued by the call with correlation id `corr`; `pageable` when
  // its host side is pageable memory.
  Planted& memcpy_of(uint64_t corr, double start_us, double end_us, MemcpyDirection dir, uint64_t bytes,
                     bool pageable, int32_t stream = 7) {
    memcpy(start_us, end_us, dir, bytes);
    auto& a = store_.activities.back();
    a.correlation_id = corr;
    a.host_pageable = pageable;
    a.stream = stream;
    return *this;
  }

  // A host range; category from PyTorch's naming rules.
  Planted& range(const std::string& name, double start_us, double end_us, uint32_t thread = 0, bool is_op = true) {
    HostRange r;
    r.name = store_.names.intern(name);
    r.start_ns = us(start_us);
    r.end_ns = us(end_us);
    r.thread = thread;
    r.category = classify_range(name, is_op);
    store_.ranges.push_back(r);
    return *this;
  }

 private:
  EventStore store_;
  uint64_t next_corr_ = 0;
};

}  // namespace gpuutil::test
