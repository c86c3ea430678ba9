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
  uint32_t (*cbid)(const char*, int*) = nullptr;
  void (*device_work)(const fake_cupti_work*, uint32_t) = nullptr;
  void (*device_synchronize)() = nullptr;
  void (*second_client_start)() = nullptr;
  fake_cupti_client_stats (*second_client_stop)() = nullptr;
  void (*other_subscriber)(const char*) = nullptr;
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
    bind(h, "fake_cupti_cbid", f.cbid);
    bind(h, "fake_cupti_device_work", f.device_work);
    bind(h, "fake_cupti_device_synchronize", f.device_synchronize);
    bind(h, "fake_cupti_second_client_start", f.second_client_start);
    bind(h, "fake_cupti_second_client_stop", f.second_client_stop);
    bind(h, "fake_cupti_other_subscriber", f.other_subscriber);
    return f;
  }
};

}  // namespace gpuutil::testing
