// NVML sampler (libgpuutil/src/collectors/nvml) against the fake NVML
// (tests/fake_nvml), loaded through the production path: dlopen of
// GPUUTIL_NVML_LIBRARY. Covers every field, GPM opt-in, a missing library,
// NOT_SUPPORTED and NO_PERMISSION, the polling-interval floor, bounded
// memory, and counters becoming per-step device health in the report.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gpuutil/nvml_sampler.h"
#include "gpuutil/analysis.h"
#include "planted.h"

namespace gpuutil {
namespace {

// Test controls exported by the fake.
struct FakeControls {
  void (*reset)() = nullptr;
  int (*util_calls)() = nullptr;
  int64_t (*min_util_gap_ns)() = nullptr;
  int (*gpm_metrics_calls)() = nullptr;
};

FakeControls controls() {
  static FakeControls c = [] {
    FakeControls f;
    void* h = dlopen(GPUUTIL_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << dlerror();
    f.reset = reinterpret_cast<void (*)()>(dlsym(h, "fake_nvml_reset"));
    f.util_calls = reinterpret_cast<int (*)()>(dlsym(h, "fake_nvml_util_calls"));
    f.min_util_gap_ns = reinterpret_cast<int64_t (*)()>(dlsym(h, "fake_nvml_min_util_gap_ns"));
    f.gpm_metrics_calls = reinterpret_cast<int (*)()>(dlsym(h, "fake_nvml_gpm_metrics_calls"));
    return f;
  }();
  return c;
}

class NvmlSamplerTest : public ::testing::Test {
 protected:
  void use(const char* scenario) {
    setenv("GPUUTIL_NVML_LIBRARY", GPUUTIL_FAKE_NVML, 1);
    setenv("FAKE_NVML_SCENARIO", scenario, 1);
    controls().reset();
  }
  void TearDown() override {
    unsetenv("GPUUTIL_NVML_LIBRARY");
    unsetenv("FAKE_NVML_SCENARIO");
  }
  // A sampler on a fake clock that advances 100 ms per pass.
  NvmlSamplerOptions fake_clock(bool gpm) {
    NvmlSamplerOptions o;
    o.gpm = gpm;
    o.now_ns = [this] { return clock_ns_; };
    return o;
  }
  void passes(NvmlSampler& s, int n) {
    for (int i = 0; i < n; ++i) {
      s.sample_once();
      clock_ns_ += 100'000'000;
    }
  }
  int64_t clock_ns_ = 0;
};

// (device, counter) -> values in time order.
std::map<std::pair<int32_t, std::string>, std::vector<double>> by_counter(const EventStore& s) {
  std::map<std::pair<int32_t, std::string>, std::vector<double>> out;
  for (const auto& c : s.counters) out[{c.device, std::string(s.names.view(c.counter))}].push_back(c.value);
  return out;
}

TEST_F(NvmlSamplerTest, MissingLibraryFailsOpenWithTheReason) {
  setenv("GPUUTIL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  NvmlSampler s;
  EXPECT_FALSE(s.open());
  EXPECT_NE(s.error().find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos) << s.error();
  EXPECT_FALSE(s.start());
  s.sample_once();  // inert, no crash
  EventStore store;
  s.drain(store);
  EXPECT_TRUE(store.counters.empty());
}

TEST_F(NvmlSamplerTest, DefaultLibraryNameIsTheDriversSoname) {
  unsetenv("GPUUTIL_NVML_LIBRARY");
  NvmlSamplerOptions o;
  o.gpm = true;
  NvmlSampler s(o);
  if (!s.open()) {  // no driver on this machine
    EXPECT_NE(s.error().find("libnvidia-ml.so.1"), std::string::npos) << s.error();
    return;
  }
  // A GPU machine: the real NVML through the same table. The hand-declared
  // ABI must read plausible values; fields may be unsupported, never errors.
  s.sample_once();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // GPM needs two samples >= 100 ms apart
  s.sample_once();
  EventStore store;
  s.drain(store);
  const auto c = by_counter(store);
  ASSERT_GT(s.device_count(), 0);
  ASSERT_TRUE(c.count({0, "sm_clock_max_mhz"})) << ::testing::PrintToString(s.problems());
  EXPECT_GT(c.at({0, "sm_clock_max_mhz"})[0], 100);
  EXPECT_LT(c.at({0, "sm_clock_max_mhz"})[0], 5000);
  ASSERT_TRUE(c.count({0, "fb_used_bytes"}));
  EXPECT_GT(c.at({0, "fb_used_bytes"})[0], 0);
  if (c.count({0, "nvml_utilization_gpu_pct"})) {
    EXPECT_LE(c.at({0, "nvml_utilization_gpu_pct"})[0], 100);
  }
  if (c.count({0, "gpm_sm_util_pct"})) {
    EXPECT_LE(c.at({0, "gpm_sm_util_pct"})[0], 100.0 + 1e-6);
  }
  for (int f = 0; f < kNvmlFieldCount; ++f) {
    EXPECT_NE(s.status(0, static_cast<NvmlField>(f)), NvmlStatus::kError)
        << counter_name(static_cast<NvmlField>(f)) << ": " << ::testing::PrintToString(s.problems());
  }
}

TEST_F(NvmlSamplerTest, NoDevicesFailsOpen) {
  use("no_devices");
  NvmlSampler s;
  EXPECT_FALSE(s.open());
  EXPECT_NE(s.error().find("no devices"), std::string::npos) << s.error();
}

TEST_F(NvmlSamplerTest, EveryFieldIsSampled) {
  use("ok");
  NvmlSampler s(fake_clock(/*gpm=*/true));
  ASSERT_TRUE(s.open()) << s.error();
  ASSERT_EQ(s.device_count(), 2);
  passes(s, 3);
  EventStore store;
  s.drain(store);
  const auto c = by_counter(store);
  auto values = [&](int32_t dev, const char* name) {
    auto it = c.find({dev, name});
    EXPECT_NE(it, c.end()) << "device " << dev << " " << name;
    return it == c.end() ? std::vector<double>{} : it->second;
  };
  EXPECT_EQ(values(0, "nvml_utilization_gpu_pct"), (std::vector<double>{40, 40, 40}));
  EXPECT_EQ(values(1, "nvml_utilization_gpu_pct"), (std::vector<double>{41, 41, 41}));
  EXPECT_EQ(values(0, "sm_clock_mhz")[0], 1410);
  EXPECT_EQ(values(0, "sm_clock_max_mhz")[0], 1980);
  EXPECT_EQ(values(0, "mem_clock_mhz")[0], 1215);
  EXPECT_EQ(values(0, "mem_clock_max_mhz")[0], 1593);
  EXPECT_EQ(values(0, "clock_event_reasons")[0], 4);  // SW power cap
  EXPECT_EQ(values(0, "throttle_power_total_ns"), (std::vector<double>{10e6, 20e6, 30e6}));
  EXPECT_EQ(values(0, "throttle_thermal_total_ns"), (std::vector<double>{5e6, 10e6, 15e6}));
  EXPECT_EQ(values(0, "power_w")[0], 250.0);
  EXPECT_EQ(values(1, "power_w")[0], 251.0);
  EXPECT_EQ(values(0, "energy_total_j"), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(values(0, "temperature_c")[0], 65);
  EXPECT_EQ(values(0, "fb_used_bytes")[0], 8.0 * (1LL << 30));
  // GPM: device 0 only, one value per pair of samples (3 passes -> 2).
  EXPECT_EQ(values(0, "gpm_sm_util_pct"), (std::vector<double>{55, 55}));
  EXPECT_EQ(values(0, "gpm_sm_occupancy_pct"), (std::vector<double>{33, 33}));
  EXPECT_EQ(values(0, "gpm_tensor_util_pct"), (std::vector<double>{22, 22}));
  EXPECT_EQ(values(0, "gpm_dram_bw_util_pct"), (std::vector<double>{44, 44}));
  EXPECT_EQ(c.count({1, "gpm_sm_util_pct"}), 0u);
  EXPECT_EQ(s.status(1, NvmlField::kGpmSmUtil), NvmlStatus::kNotSupported);
  EXPECT_EQ(s.status(0, NvmlField::kGpmSmUtil), NvmlStatus::kOk);
  // Timestamps come from the session clock given.
  EXPECT_EQ(store.counters.front().ts_ns, 0);
  EXPECT_EQ(store.counters.back().ts_ns, 200'000'000);
  for (int f = 0; f < kNvmlFieldCount; ++f) {
    EXPECT_EQ(s.status(0, static_cast<NvmlField>(f)), NvmlStatus::kOk) << counter_name(static_cast<NvmlField>(f));
  }
}

TEST_F(NvmlSamplerTest, GpmIsOptIn) {
  use("ok");
  NvmlSampler s(fake_clock(/*gpm=*/false));
  ASSERT_TRUE(s.open());
  passes(s, 3);
  EventStore store;
  s.drain(store);
  EXPECT_EQ(by_counter(store).count({0, "gpm_sm_util_pct"}), 0u);
  EXPECT_EQ(controls().gpm_metrics_calls(), 0);
  EXPECT_EQ(s.status(0, NvmlField::kGpmSmUtil), NvmlStatus::kUnknown);
}

TEST_F(NvmlSamplerTest, NotSupportedFieldsAreReportedOnceAndSkipped) {
  use("not_supported");
  NvmlSampler s(fake_clock(/*gpm=*/true));
  ASSERT_TRUE(s.open());
  passes(s, 3);
  EventStore store;
  s.drain(store);
  const auto c = by_counter(store);
  for (NvmlField f : {NvmlField::kPower, NvmlField::kEnergy, NvmlField::kThrottlePower, NvmlField::kThrottleThermal,
                      NvmlField::kGpmSmUtil, NvmlField::kGpmDramBwUtil}) {
    EXPECT_EQ(s.status(0, f), NvmlStatus::kNotSupported) << counter_name(f);
    EXPECT_EQ(c.count({0, counter_name(f)}), 0u) << counter_name(f);
  }
  // Other fields keep working.
  EXPECT_EQ(c.at({0, "sm_clock_mhz"}).size(), 3u);
  EXPECT_EQ(c.at({0, "temperature_c"}).size(), 3u);
  // One problem line per field and device, not one per pass.
  const auto problems = s.problems();
  int power_lines = 0;
  for (const auto& p : problems) power_lines += p.find("device 0 power_w: NOT_SUPPORTED") != std::string::npos;
  EXPECT_EQ(power_lines, 1);
  bool gpm_line = false;
  for (const auto& p : problems) gpm_line |= p.find("device 0 gpm: NOT_SUPPORTED") != std::string::npos;
  EXPECT_TRUE(gpm_line) << ::testing::PrintToString(problems);
}

TEST_F(NvmlSamplerTest, NoPermissionFieldsAreReportedAndSkipped) {
  use("no_permission");
  NvmlSampler s(fake_clock(/*gpm=*/true));
  ASSERT_TRUE(s.open());
  passes(s, 2);
  EventStore store;
  s.drain(store);
  const auto c = by_counter(store);
  EXPECT_EQ(s.status(0, NvmlField::kTemperature), NvmlStatus::kNoPermission);
  EXPECT_EQ(s.status(1, NvmlField::kClockEventReasons), NvmlStatus::kNoPermission);
  EXPECT_EQ(s.status(0, NvmlField::kGpmSmOccupancy), NvmlStatus::kNoPermission);
  EXPECT_EQ(c.count({0, "temperature_c"}), 0u);
  EXPECT_EQ(c.count({0, "gpm_sm_occupancy_pct"}), 0u);
  EXPECT_EQ(c.at({0, "power_w"}).size(), 2u);
  bool line = false;
  for (const auto& p : s.problems()) line |= p.find("device 0 temperature_c: NO_PERMISSION") != std::string::npos;
  EXPECT_TRUE(line);
}

TEST_F(NvmlSamplerTest, NeverPollsFasterThanTheAveragingWindow) {
  use("ok");
  NvmlSamplerOptions o;
  o.interval_ns = 1'000'000;  // 1 ms asked
  NvmlSampler s(o);
  EXPECT_EQ(s.interval_ns(), NvmlSampler::kMinIntervalNs);
  ASSERT_TRUE(s.open());
  ASSERT_TRUE(s.start());
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  s.stop();
  const int calls = controls().util_calls();
  EXPECT_GE(calls, 2);
  EXPECT_LE(calls, 4);
  EXPECT_GE(controls().min_util_gap_ns(), NvmlSampler::kMinIntervalNs - 5'000'000);
}

TEST_F(NvmlSamplerTest, BufferIsBoundedAndCountsDrops) {
  use("ok");
  NvmlSamplerOptions o = fake_clock(false);
  o.max_samples = 10;
  NvmlSampler s(o);
  ASSERT_TRUE(s.open());
  passes(s, 5);
  EventStore store;
  s.drain(store);
  EXPECT_EQ(store.counters.size(), 10u);
  EXPECT_GT(s.dropped(), 0u);
  EXPECT_EQ(store.counters.back().ts_ns, 400'000'000);  // newest kept
}

TEST_F(NvmlSamplerTest, CountersBecomePerStepDeviceHealth) {
  use("ok");
  NvmlSampler s(fake_clock(false));
  ASSERT_TRUE(s.open());
  passes(s, 3);  // samples at 0, 100, 200 ms
  test::Planted p;
  p.step(0, 0, 100'000).step(1, 100'000, 200'000);
  p.kernel("gemm", 0, 200'000);
  s.drain(p.store());
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  ASSERT_EQ(r.steps.size(), 2u);
  const DeviceHealth& h = r.steps[0].devices[0].health;
  ASSERT_TRUE(h.any());
  EXPECT_EQ(h.throttle_power_ns, 10'000'000);
  EXPECT_EQ(h.throttle_thermal_ns, 5'000'000);
  EXPECT_DOUBLE_EQ(*h.energy_j, 1.0);
  EXPECT_DOUBLE_EQ(*h.nvml_utilization_pct, 40);
  EXPECT_DOUBLE_EQ(*h.sm_clock_mhz, 1410);
  EXPECT_DOUBLE_EQ(*h.power_w, 250);
  EXPECT_DOUBLE_EQ(*h.temperature_c, 65);
  EXPECT_DOUBLE_EQ(*h.fb_used_bytes, 8.0 * (1LL << 30));
  EXPECT_FALSE(h.gpm_sm_util_pct.has_value());
}

}  // namespace
}  // namespace gpuutil
