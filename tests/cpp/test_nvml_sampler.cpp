// NVML sampler (libgpuutil/src/collectors/nvml) against the fake NVML
// (tests/fake_nvml), loaded through the production path: dlopen of
// GPUUTIL_NVML_LIBRARY. Covers every field, GPM opt-in, a missing library,
// NOT_SUPPORTED and NO_PERMISSION, the polling-interval floor, bounded
// memory, counters becoming per-step device health in the report, and which
// devices are sampled under which label: the listed CUDA devices, found by
// UUID whatever NVML's enumeration order, labelled with their CUDA device
// id; unknown UUIDs; MIG devices and GPUs in MIG mode.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
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
  int (*calls)(int gpu) = nullptr;              // counter queries of GPU k
  const char* (*uuid)(int gpu) = nullptr;       // GPU k's UUID, as NVML prints it
  const char* (*mig_uuid)(int gpu) = nullptr;   // the MIG device on GPU k
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
    f.calls = reinterpret_cast<int (*)(int)>(dlsym(h, "fake_nvml_calls"));
    f.uuid = reinterpret_cast<const char* (*)(int)>(dlsym(h, "fake_nvml_uuid"));
    f.mig_uuid = reinterpret_cast<const char* (*)(int)>(dlsym(h, "fake_nvml_mig_uuid"));
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
  // The fake machine: how many GPUs, NVML's order ("1,0": index 0 is GPU 1),
  // the GPU in MIG mode ("" for none).
  void machine(int gpus, const char* order, const char* mig = "") {
    use("ok");
    setenv("FAKE_NVML_DEVICES", std::to_string(gpus).c_str(), 1);
    setenv("FAKE_NVML_ORDER", order, 1);
    setenv("FAKE_NVML_MIG", mig, 1);
  }
  void TearDown() override {
    for (const char* v : {"GPUUTIL_NVML_LIBRARY", "FAKE_NVML_SCENARIO", "FAKE_NVML_DEVICES", "FAKE_NVML_ORDER",
                          "FAKE_NVML_MIG"}) {
      unsetenv(v);
    }
  }
  // A sampler on the fake clock sampling `devices`, opened.
  std::unique_ptr<NvmlSampler> open_listed(std::vector<NvmlDeviceRef> devices, bool gpm = false) {
    NvmlSamplerOptions o = fake_clock(gpm);
    o.devices = std::move(devices);
    auto s = std::make_unique<NvmlSampler>(o);
    EXPECT_TRUE(s->open()) << s->error();
    return s;
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
  // The samples of `n` passes.
  EventStore sampled(NvmlSampler& s, int n) {
    passes(s, n);
    EventStore store;
    s.drain(store);
    return store;
  }
  int64_t clock_ns_ = 0;
};

// (device, counter) -> values in time order.
using ByCounter = std::map<std::pair<int32_t, std::string>, std::vector<double>>;
ByCounter by_counter(const EventStore& s) {
  ByCounter out;
  for (const auto& c : s.counters) out[{c.device, std::string(s.names.view(c.counter))}].push_back(c.value);
  return out;
}

// The device labels the samples carry.
std::set<int32_t> labels(const EventStore& s) {
  std::set<int32_t> out;
  for (const auto& c : s.counters) out.insert(c.device);
  return out;
}

// The problems() lines containing every one of `parts`.
int lines_with(const std::vector<std::string>& problems, std::initializer_list<const char*> parts) {
  int n = 0;
  for (const auto& p : problems) {
    bool all = true;
    for (const char* part : parts) all &= p.find(part) != std::string::npos;
    n += all;
  }
  return n;
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

// --- which devices, under which label ----------------------------------------

// NVML enumerates A (GPU 1) then B (GPU 0); the process's CUDA device 0 is B.
// NVML index 0 is A, so labelling by NVML index would give A's values to
// CUDA device 0 and sample A, which this process does not use.
TEST_F(NvmlSamplerTest, JoinedByUuidUnderAPermutedNvmlOrder) {
  machine(2, "1,0");
  const std::string b = controls().uuid(0);
  auto s = open_listed({{0, b}});
  const EventStore store = sampled(*s, 2);
  const auto c = by_counter(store);
  EXPECT_EQ(labels(store), (std::set<int32_t>{0}));
  EXPECT_EQ(c.at({0, "sm_clock_mhz"}), (std::vector<double>{1410, 1410}));  // B's; A's is 1420
  EXPECT_EQ(c.at({0, "nvml_utilization_gpu_pct"}), (std::vector<double>{40, 40}));
  EXPECT_EQ(c.at({0, "power_w"})[0], 250.0);
  EXPECT_EQ(controls().calls(1), 0) << "A (NVML index 0) must not be sampled at all";
  EXPECT_GT(controls().calls(0), 0);
  ASSERT_EQ(s->devices().size(), 1u);
  EXPECT_EQ(s->devices()[0].device, 0);
  EXPECT_EQ(s->devices()[0].uuid, b);
  EXPECT_EQ(lines_with(s->problems(), {"NVML index"}), 0) << "a listed device is not labelled by NVML index";
}

TEST_F(NvmlSamplerTest, OnlyTheListedDevicesAreSampled) {
  machine(8, "");
  auto s = open_listed({{0, controls().uuid(5)}});
  EXPECT_EQ(s->device_count(), 1);
  const EventStore store = sampled(*s, 2);
  EXPECT_EQ(labels(store), (std::set<int32_t>{0}));
  EXPECT_EQ(by_counter(store).at({0, "sm_clock_mhz"})[0], 1460);  // GPU 5's
  for (int k = 0; k < 8; ++k) {
    if (k == 5) {
      EXPECT_GT(controls().calls(k), 0);
    } else {
      EXPECT_EQ(controls().calls(k), 0) << "GPU " << k << " is not this process's and must not be sampled";
    }
  }
}

TEST_F(NvmlSamplerTest, UnknownUuidIsReportedAndTheOthersAreStillSampled) {
  machine(2, "");
  const char* unknown = "GPU-deadbeef-0000-4000-8000-000000000000";
  auto s = open_listed({{0, unknown}, {1, controls().uuid(1)}});
  const EventStore store = sampled(*s, 2);
  EXPECT_EQ(labels(store), (std::set<int32_t>{1}));
  EXPECT_EQ(by_counter(store).at({1, "sm_clock_mhz"})[0], 1420);  // GPU 1's
  EXPECT_EQ(controls().calls(0), 0);
  EXPECT_EQ(lines_with(s->problems(), {"device 0: not sampled: UUID", unknown, "NOT_FOUND"}), 1)
      << ::testing::PrintToString(s->problems());
  EXPECT_EQ(s->status(0, NvmlField::kSmClock), NvmlStatus::kUnknown);
  EXPECT_EQ(s->status(1, NvmlField::kSmClock), NvmlStatus::kOk);
}

TEST_F(NvmlSamplerTest, NoListedDeviceFoundFailsOpenWithTheReason) {
  machine(2, "");
  NvmlSamplerOptions o;
  o.devices = std::vector<NvmlDeviceRef>{{0, "GPU-deadbeef-0000-4000-8000-000000000000"}};
  NvmlSampler s(o);
  EXPECT_FALSE(s.open());
  EXPECT_NE(s.error().find("none of the 1 listed CUDA devices was found in NVML"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("NOT_FOUND"), std::string::npos) << s.error();
  s.sample_once();  // inert, no crash
  EXPECT_EQ(controls().calls(0) + controls().calls(1), 0);
}

// torch prints a UUID bare and CUDA_VISIBLE_DEVICES accepts a unique leading
// part; NVML wants its own exact spelling.
TEST_F(NvmlSamplerTest, UuidIsFoundWithoutPrefixInAnyCaseAndByAUniqueLeadingPart) {
  machine(3, "2,1,0");
  std::string bare = std::string(controls().uuid(1)).substr(4);  // torch's form
  for (char& ch : bare) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const std::string leading = std::string(controls().uuid(2)).substr(0, 8);  // "GPU-2a3c"
  auto s = open_listed({{0, bare}, {1, leading}, {2, "gpu-"}});
  const EventStore store = sampled(*s, 1);
  const auto c = by_counter(store);
  EXPECT_EQ(c.at({0, "sm_clock_mhz"})[0], 1420);  // GPU 1's
  EXPECT_EQ(c.at({1, "sm_clock_mhz"})[0], 1430);  // GPU 2's
  EXPECT_EQ(labels(store), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(lines_with(s->problems(), {"device 2: not sampled", "ambiguous: 3 NVML devices"}), 1)
      << ::testing::PrintToString(s->problems());
}

TEST_F(NvmlSamplerTest, NvmlIndexRefIsLabelledWithItsCudaDeviceId) {
  machine(2, "1,0");
  NvmlDeviceRef by_index;
  by_index.cuda_device_id = 3;
  by_index.nvml_index = 0;
  auto s = open_listed({by_index});
  const EventStore store = sampled(*s, 1);
  EXPECT_EQ(labels(store), (std::set<int32_t>{3}));
  EXPECT_EQ(by_counter(store).at({3, "sm_clock_mhz"})[0], 1420);  // NVML index 0 is GPU 1
}

// The Python collector opens NVML at profile start and lists the devices at
// the first step end, once torch has initialised CUDA.
TEST_F(NvmlSamplerTest, DevicesListedAfterOpenReplaceTheSampledSet) {
  machine(2, "1,0");
  auto s = open_listed({});
  EXPECT_EQ(s->device_count(), 0);
  EXPECT_TRUE(sampled(*s, 1).counters.empty());
  EXPECT_EQ(s->set_devices({{0, controls().uuid(0)}, {1, "GPU-deadbeef"}}), 1);
  const EventStore store = sampled(*s, 1);
  EXPECT_EQ(labels(store), (std::set<int32_t>{0}));
  EXPECT_EQ(by_counter(store).at({0, "sm_clock_mhz"})[0], 1410);  // GPU 0 (NVML index 1)
  EXPECT_EQ(lines_with(s->problems(), {"device 1: not sampled", "GPU-deadbeef"}), 1);
}

TEST_F(NvmlSamplerTest, WithoutADeviceListEveryNvmlDeviceIsLabelledByNvmlIndexAndItSaysSo) {
  machine(2, "1,0");
  NvmlSampler s(fake_clock(false));
  ASSERT_TRUE(s.open());
  const EventStore store = sampled(s, 1);
  EXPECT_EQ(labels(store), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(by_counter(store).at({0, "sm_clock_mhz"})[0], 1420);  // NVML index 0 is GPU 1
  EXPECT_EQ(lines_with(s.problems(), {"labelled by NVML index", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}), 1)
      << ::testing::PrintToString(s.problems());
}

// --- MIG -----------------------------------------------------------------------

TEST_F(NvmlSamplerTest, MigDeviceReadsItsParentsClocksAndSaysUtilisationIsNotPerInstance) {
  machine(2, "", "1");
  const std::string mig = controls().mig_uuid(1);
  auto s = open_listed({{0, mig}}, /*gpm=*/true);
  const EventStore store = sampled(*s, 3);
  const auto c = by_counter(store);
  EXPECT_EQ(labels(store), (std::set<int32_t>{0}));
  EXPECT_EQ(c.at({0, "sm_clock_mhz"})[0], 1420);  // the parent, GPU 1
  EXPECT_EQ(c.at({0, "power_w"})[0], 251.0);
  EXPECT_EQ(c.at({0, "energy_total_j"}).size(), 3u);
  EXPECT_EQ(c.at({0, "fb_used_bytes"})[0], 2.0 * (1LL << 30));  // the MIG device's own slice
  EXPECT_EQ(c.count({0, "nvml_utilization_gpu_pct"}), 0u);
  EXPECT_EQ(c.count({0, "gpm_sm_util_pct"}), 0u);
  EXPECT_EQ(s->status(0, NvmlField::kUtilizationGpu), NvmlStatus::kNotPerInstance);
  EXPECT_EQ(s->status(0, NvmlField::kGpmTensorUtil), NvmlStatus::kNotPerInstance);
  EXPECT_EQ(controls().calls(0), 0);
  ASSERT_EQ(s->devices().size(), 1u);
  EXPECT_EQ(s->devices()[0].kind, NvmlDeviceKind::kMigDevice);
  EXPECT_EQ(s->devices()[0].parent_uuid, controls().uuid(1));
  // One line, and only one, says what is and is not reported.
  const auto problems = s->problems();
  EXPECT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_EQ(lines_with(problems, {"device 0 (", mig.c_str(), "a MIG device", controls().uuid(1),
                                  "utilisation (nvml_utilization_gpu_pct, gpm_*) is not reported"}),
            1)
      << ::testing::PrintToString(problems);
}

TEST_F(NvmlSamplerTest, GpuInMigModeGivesOnlyWholeGpuCountersAndSaysSo) {
  machine(2, "", "1");
  auto s = open_listed({{0, controls().uuid(1)}});
  const EventStore store = sampled(*s, 2);
  const auto c = by_counter(store);
  EXPECT_EQ(c.at({0, "sm_clock_mhz"})[0], 1420);
  EXPECT_EQ(c.at({0, "temperature_c"}).size(), 2u);
  EXPECT_EQ(c.count({0, "nvml_utilization_gpu_pct"}), 0u);
  EXPECT_EQ(c.count({0, "fb_used_bytes"}), 0u);  // all MIG devices' memory, not this process's
  EXPECT_EQ(s->status(0, NvmlField::kFbUsed), NvmlStatus::kNotPerInstance);
  EXPECT_EQ(s->devices()[0].kind, NvmlDeviceKind::kGpuInMigMode);
  const auto problems = s->problems();
  EXPECT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_EQ(lines_with(problems, {"device 0 (", "the GPU is in MIG mode", "fb_used_bytes and utilisation", "are not reported"}), 1)
      << ::testing::PrintToString(problems);
}

}  // namespace
}  // namespace gpuutil
