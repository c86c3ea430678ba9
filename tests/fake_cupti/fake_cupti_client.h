// Test-side handle on the fake CUPTI: points GPUUTIL_CUPTI_LIBRARY at it
// (the product's run-time loading path) and resolves its control API.
#pragma once

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

  // Loads the fake (GPUUTIL_FAKE_CUPTI, compiled in) and selects it for the collector.
  static FakeCupti& get() {
    static FakeCupti f = load();
    setenv("GPUUTIL_CUPTI_LIBRARY", GPUUTIL_FAKE_CUPTI, 1);
    return f;
  }

 private:
  static FakeCupti load() {
    void* h = dlopen(GPUUTIL_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error(std::string("cannot load the fake CUPTI: ") + dlerror());
    FakeCupti f;
    f.reset = reinterpret_cast<decltype(f.reset)>(dlsym(h, "fake_cupti_reset"));
    f.stats = reinterpret_cast<decltype(f.stats)>(dlsym(h, "fake_cupti_get_stats"));
    f.run = reinterpret_cast<decltype(f.run)>(dlsym(h, "fake_cupti_run_scenario"));
    f.wait = reinterpret_cast<decltype(f.wait)>(dlsym(h, "fake_cupti_wait"));
    f.launch = reinterpret_cast<decltype(f.launch)>(dlsym(h, "fake_cupti_launch_kernel"));
    f.now_ns = reinterpret_cast<decltype(f.now_ns)>(dlsym(h, "fake_cupti_now_ns"));
    if (!f.reset || !f.stats || !f.run || !f.wait || !f.launch || !f.now_ns) {
      throw std::runtime_error("the fake CUPTI lacks its control API");
    }
    return f;
  }
};

}  // namespace gpuutil::testing
