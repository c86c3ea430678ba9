// Test-side handle on the fake CUPTI: points GPUUTIL_CUPTI_LIBRARY at it
// (the product's run-time loading path) and resolves its control API.
#pragma once

#include <cupti.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <stdexcept>
#include <string>

#include "fake_cupti.h"

namespace gpuutil::testing {

struct FakeCupti {
  void (*reset)(const fake_cupti_config*) = nullptr;
  fake_cupti_stats (*stats)() = nullptr;
  int (*run)(const fake_cupti_scenario*) = nullptr;
  void (*wait)() = nullptr;
  void (*launch)(const char*, uint32_t, int64_t, int64_t) = nullptr;
  int64_t (*now_ns)() = nullptr;
  uint32_t (*call)(const fake_cupti_call*) = nullptr;
  uint32_t (*call_failed)(const fake_cupti_call*, int) = nullptr;
  int (*configure)(const fake_cupti_matrix*) = nullptr;
  fake_cupti_matrix (*matrix)() = nullptr;
  uint32_t (*cbid)(const char*, int*) = nullptr;
  void (*device_work)(const fake_cupti_work*, uint32_t) = nullptr;
  void (*device_synchronize)() = nullptr;
  void (*second_client_start)() = nullptr;
  fake_cupti_client_stats (*second_client_stop)() = nullptr;
  void (*other_subscriber)(const char*) = nullptr;
  uint32_t (*launch_cbid)(int) = nullptr;
  void (*destroy_stream)(uint32_t, uint32_t) = nullptr;
  void* (*stream_handle)(uint32_t, uint32_t) = nullptr;
  int (*inject)(const char*, int) = nullptr;
  void* handle = nullptr;

  // Loads the fake (GPUUTIL_FAKE_CUPTI, compiled in) and selects it for the collector.
  static FakeCupti& get() {
    static FakeCupti f = load();
    setenv("GPUUTIL_CUPTI_LIBRARY", GPUUTIL_FAKE_CUPTI, 1);
    return f;
  }

  // cudaDeviceSynchronize from the calling thread: blocks until the
  // simulated device finished everything launched, with its API record.
  void synchronize() const {
    fake_cupti_call c{};
    c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020;
    c.api_ns = 1000;
    c.sync = FAKE_CUPTI_SYNC_DEVICE;
    call(&c);
  }

  // One runtime API call `call_cbid` from the calling thread at explicit session
  // times: API [t, t + 5 us); its work of `kind` (a kernel: 132 x 256
  // threads; a copy: 1 MiB) at [start, end) on `stream` of `device`, or no
  // work when `name` is null.
  uint32_t call_at(uint32_t call_cbid, int kind, const char* name, uint32_t stream, int64_t t, int64_t start, int64_t end,
                   uint32_t graph_id = 0, uint32_t device = 0) const {
    fake_cupti_work w{};
    w.kind = kind;
    w.name = name;
    w.device = device;
    w.stream = stream;
    w.start_ns = start;
    w.end_ns = end;
    w.grid[0] = 132;
    w.block[0] = 256;
    w.bytes = 1 << 20;
    w.graph_id = graph_id;
    fake_cupti_call c{};
    c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    c.cbid = call_cbid;
    c.start_ns = t;
    c.end_ns = t + 5000;
    c.work = &w;
    c.n_work = name != nullptr ? 1 : 0;
    return call(&c);
  }

  // A symbol of the fake's libcuda surface (cuLaunchKernel, ...).
  template <class F>
  F driver(const char* name) const {
    return reinterpret_cast<F>(dlsym(handle, name));
  }

 private:
  template <class F>
  static void bind(void* h, const char* name, F& out) {
    out = reinterpret_cast<F>(dlsym(h, name));
    if (!out) throw std::runtime_error(std::string("the fake CUPTI lacks ") + name);
  }

  static FakeCupti load() {
    void* h = dlopen(GPUUTIL_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error(std::string("cannot load the fake CUPTI: ") + dlerror());
    FakeCupti f;
    f.handle = h;
    bind(h, "fake_cupti_reset", f.reset);
    bind(h, "fake_cupti_get_stats", f.stats);
    bind(h, "fake_cupti_run_scenario", f.run);
    bind(h, "fake_cupti_wait", f.wait);
    bind(h, "fake_cupti_launch_kernel", f.launch);
    bind(h, "fake_cupti_now_ns", f.now_ns);
    bind(h, "fake_cupti_call_api", f.call);
    bind(h, "fake_cupti_call_api_failed", f.call_failed);
    bind(h, "fake_cupti_configure", f.configure);
    bind(h, "fake_cupti_get_matrix", f.matrix);
    bind(h, "fake_cupti_cbid", f.cbid);
    bind(h, "fake_cupti_device_work", f.device_work);
    bind(h, "fake_cupti_device_synchronize", f.device_synchronize);
    bind(h, "fake_cupti_second_client_start", f.second_client_start);
    bind(h, "fake_cupti_second_client_stop", f.second_client_stop);
    bind(h, "fake_cupti_other_subscriber", f.other_subscriber);
    bind(h, "fake_cupti_launch_cbid", f.launch_cbid);
    bind(h, "fake_cupti_destroy_stream", f.destroy_stream);
    bind(h, "fake_cupti_stream_handle", f.stream_handle);
    bind(h, "fake_cupti_inject", f.inject);
    return f;
  }
};

// A matrix cell for one scope (a test): chosen at construction, and the
// run's own cell (GPUUTIL_FAKE_CUPTI_MATRIX, or the defaults) back after.
struct ScopedCell {
  explicit ScopedCell(const fake_cupti_matrix& cell) { FakeCupti::get().configure(&cell); }
  ~ScopedCell() { FakeCupti::get().configure(nullptr); }
  ScopedCell(const ScopedCell&) = delete;
  ScopedCell& operator=(const ScopedCell&) = delete;
};

}  // namespace gpuutil::testing
