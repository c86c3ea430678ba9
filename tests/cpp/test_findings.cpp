// Finding rules (libgpuutil/src/analysis/findings.cpp, docs/findings.md):
// every rule fires on a planted case and stays silent on a healthy one.
//
// Three kinds of input: synthetic run reports (derive_findings is a pure
// function of the Report, so the numbers are exact), planted event stores
// with counter samples run through analyze() (exercises device health from
// CounterSamples end to end), and the real GPU traces in ../shared/traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/findings.h"
#include "analysis/host_findings.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report.h"
#include "planted.h"
#include "traces.h"

namespace gpuutil {
namespace {

using test::Planted;

constexpr int64_t kStepNs = 100'000'000;  // 100 ms
constexpr int kSteps = 10;

// A run of kSteps identical steps on one device: fully busy computing,
// wide kernels, good occupancy, 60% MFU, unless the test changes it.
struct Synth {
  Breakdown per_step;
  std::optional<double> sm_eff = 0.95;
  std::optional<double> occupancy = 0.6;
  std::optional<double> mfu = 0.6;
  std::array<std::vector<NamedTime>, kIdleCauseCount> culprits;
  DeviceHealth health;
  int64_t total_memory_bytes = 80LL << 30;
  uint64_t kernels = 100, short_kernels = 0;
  uint64_t pageable_memcpys = 0, pageable_memcpy_bytes = 0;  // per step
  Workload workload;

  Synth() { per_step.compute_ns = kStepNs; }
  Synth& kind(const char* k, int64_t capture_ns = 0) {
    workload.kind = k;
    workload.capture_ns = capture_ns;
    return *this;
  }
  // Moves `share` of each step from compute to idle cause c.
  Synth& idle(IdleCause c, double share) {
    const auto ns = static_cast<int64_t>(share * kStepNs);
    per_step.compute_ns -= ns;
    per_step.idle_ns[static_cast<size_t>(c)] += ns;
    return *this;
  }
  Synth& comm(double share) {
    const auto ns = static_cast<int64_t>(share * kStepNs);
    per_step.compute_ns -= ns;
    per_step.communication_ns += ns;
    return *this;
  }

  Report report() const {
    Report r;
    DeviceSummary s;
    s.name = "Synthetic GPU";
    for (int i = 0; i < kSteps; ++i) {
      StepReport st;
      st.step = i;
      st.start_ns = i * kStepNs;
      st.end_ns = st.start_ns + kStepNs;
      st.wall_ns = kStepNs;
      DeviceStepReport d;
      d.wall_ns = kStepNs;
      d.breakdown = per_step;
      d.busy_ns = per_step.busy_ns();
      d.health = health;
      d.total_memory_bytes = total_memory_bytes;
      d.kernels = kernels;
      d.short_kernels = short_kernels;
      d.pageable_memcpys = pageable_memcpys;
      d.pageable_memcpy_bytes = pageable_memcpy_bytes;
      d.sm_efficiency_est = sm_eff;
      d.mfu = mfu;
      st.devices.push_back(d);
      r.steps.push_back(st);
      s.wall_ns += kStepNs;
      s.breakdown += per_step;
      s.kernels += kernels;
    }
    s.culprits = culprits;
    s.sm_efficiency_est = sm_eff;
    s.achieved_occupancy_est = occupancy;
    s.mfu = mfu;
    r.summary.steps = kSteps;
    r.summary.steps_wall_ns = kSteps * kStepNs;
    r.summary.devices.push_back(s);
    r.workload = workload;
    return r;
  }
};

std::vector<std::string> ids(const std::vector<Finding>& fs) {
  std::vector<std::string> out;
  for (const auto& f : fs) out.push_back(f.id);
  return out;
}

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  for (const auto& f : fs) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

TEST(Findings, HealthyRunHasNoFinding) {
  const auto fs = derive_findings(Synth().report());
  EXPECT_TRUE(fs.empty()) << ::testing::PrintToString(ids(fs));
}

TEST(Findings, HealthyRunWithHealthyCountersHasNoFinding) {
  Synth s;
  s.health.sm_clock_mhz = 1980;
  s.health.sm_clock_max_mhz = 1980;
  s.health.throttle_power_ns = 0;
  s.health.throttle_thermal_ns = 0;
  s.health.allocated_bytes = 60.0 * (1LL << 30);
  s.health.reserved_bytes = 62.0 * (1LL << 30);
  s.health.fb_used_bytes = 64.0 * (1LL << 30);
  const auto fs = derive_findings(s.report());
  EXPECT_TRUE(fs.empty()) << ::testing::PrintToString(ids(fs));
}

struct IdleCase {
  IdleCause cause;
  const char* id;
  const char* fix_word;
};

TEST(Findings, EachIdleCauseFiresAboveFivePercentWithItsFix) {
  const IdleCase cases[] = {
      {IdleCause::kDataloader, "idle_dataloader", "num_workers"},
      {IdleCause::kHostSync, "idle_host_sync", ".item()"},
      {IdleCause::kLaunch, "idle_launch", "CUDA graphs"},
      {IdleCause::kCollective, "idle_collective", "overlap"},
      {IdleCause::kHost, "idle_host", "CPU work"},
  };
  for (const auto& c : cases) {
    const auto fs = derive_findings(Synth().idle(c.cause, 0.10).report());
    ASSERT_EQ(fs.size(), 1u) << c.id;
    EXPECT_EQ(fs[0].id, c.id);
    EXPECT_NE(fs[0].fix.find(c.fix_word), std::string::npos) << fs[0].fix;
    EXPECT_EQ(fs[0].recoverable_ns, kSteps * kStepNs / 10);
    EXPECT_NEAR(fs[0].share_of_wall, 0.10, 1e-9);
    EXPECT_NE(fs[0].title.find("Moderately"), std::string::npos) << fs[0].title;
    EXPECT_NE(fs[0].evidence.find("10.0 ms per step"), std::string::npos) << fs[0].evidence;
  }
}

TEST(Findings, IdleThresholdsFollowXprof) {
  EXPECT_TRUE(derive_findings(Synth().idle(IdleCause::kDataloader, 0.049).report()).empty());
  const auto moderate = derive_findings(Synth().idle(IdleCause::kDataloader, 0.05).report());
  ASSERT_EQ(moderate.size(), 1u);
  EXPECT_NE(moderate[0].title.find("Moderately"), std::string::npos);
  const auto high = derive_findings(Synth().idle(IdleCause::kDataloader, 0.20).report());
  ASSERT_EQ(high.size(), 1u);
  EXPECT_NE(high[0].title.find("Highly"), std::string::npos);
}

TEST(Findings, HostSyncNamesTheCulpritOps) {
  Synth s;
  s.idle(IdleCause::kHostSync, 0.3);
  s.culprits[static_cast<size_t>(IdleCause::kHostSync)] = {
      {"aten::item", 200'000'000, 10}, {"aten::_local_scalar_dense", 80'000'000, 10}, {"", 5, 1},
      {"cudaStreamSynchronize", 20'000'000, 10}};
  const auto fs = derive_findings(s.report());
  const Finding* f = find(fs, "idle_host_sync");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->evidence.find("culprit ops: aten::item (200.0 ms, x10), aten::_local_scalar_dense"),
            std::string::npos)
      << f->evidence;
  EXPECT_NE(f->evidence.find("cudaStreamSynchronize"), std::string::npos);
}

TEST(Findings, ExposedCommunicationFiresOnlyAboveThreshold) {
  EXPECT_TRUE(derive_findings(Synth().comm(0.04).report()).empty());
  const auto fs = derive_findings(Synth().comm(0.15).report());
  ASSERT_EQ(ids(fs), std::vector<std::string>{"exposed_communication"});
  EXPECT_NE(fs[0].fix.find("bucket_cap_mb"), std::string::npos);
  EXPECT_EQ(fs[0].recoverable_ns, static_cast<int64_t>(0.15 * kStepNs) * kSteps);
}

TEST(Findings, BusyButLowSmEfficiencyFires) {
  Synth s;
  s.sm_eff = 0.30;
  const auto fs = derive_findings(s.report());
  ASSERT_NE(find(fs, "low_sm_efficiency"), nullptr) << ::testing::PrintToString(ids(fs));
  EXPECT_NE(find(fs, "low_sm_efficiency")->fix.find("fuse"), std::string::npos);
  // Not busy enough to judge: silent.
  Synth idle_run;
  idle_run.sm_eff = 0.30;
  idle_run.idle(IdleCause::kUnattributed, 0.6);
  EXPECT_EQ(find(derive_findings(idle_run.report()), "low_sm_efficiency"), nullptr);
}

TEST(Findings, BusyButLowOccupancyFires) {
  Synth s;
  s.occupancy = 0.10;
  const auto fs = derive_findings(s.report());
  ASSERT_EQ(ids(fs), std::vector<std::string>{"low_occupancy"});
  EXPECT_GT(fs[0].recoverable_ns, 0);
}

TEST(Findings, BusyButLowMfuFiresWithPrecisionFix) {
  Synth s;
  s.mfu = 0.12;
  const auto fs = derive_findings(s.report());
  ASSERT_EQ(ids(fs), std::vector<std::string>{"low_mfu"});
  EXPECT_NE(fs[0].fix.find("bf16"), std::string::npos);
  EXPECT_NE(fs[0].fix.find("tensor-core"), std::string::npos);
  // busy 100%, MFU 12% vs target 50%: 76% of busy time recoverable.
  EXPECT_NEAR(fs[0].share_of_wall, 0.76, 1e-6);
  Synth unknown;
  unknown.mfu = std::nullopt;
  EXPECT_TRUE(derive_findings(unknown.report()).empty());
}

TEST(Findings, ThrottlingFromCounterDurations) {
  Synth s;
  s.health.throttle_power_ns = 30'000'000;  // 30% of each step
  s.health.throttle_thermal_ns = 0;
  s.health.sm_clock_mhz = 1400;
  s.health.sm_clock_max_mhz = 1980;
  s.health.power_w = 700;
  const auto fs = derive_findings(s.report());
  const Finding* f = find(fs, "throttling");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(ids(fs));
  EXPECT_NE(f->title.find("Power throttling"), std::string::npos) << f->title;
  EXPECT_NE(f->fix.find("not a code problem"), std::string::npos);
  EXPECT_NE(f->evidence.find("mean SM clock 1400 of 1980 MHz"), std::string::npos) << f->evidence;
  EXPECT_GT(f->recoverable_ns, 0);
  // A short blip stays silent.
  Synth blip;
  blip.health.throttle_thermal_ns = 1'000'000;
  EXPECT_TRUE(derive_findings(blip.report()).empty());
}

TEST(Findings, ReservedFarAboveAllocatedFires) {
  Synth s;
  s.health.allocated_bytes = 10.0 * (1LL << 30);
  s.health.reserved_bytes = 30.0 * (1LL << 30);
  const auto fs = derive_findings(s.report());
  ASSERT_EQ(ids(fs), std::vector<std::string>{"reserved_memory"});
  EXPECT_NE(fs[0].fix.find("expandable_segments"), std::string::npos);
  EXPECT_NE(fs[0].evidence.find("30.00 GiB"), std::string::npos) << fs[0].evidence;
}

TEST(Findings, SmallJobOnBigGpuFires) {
  Synth s;
  s.sm_eff = 0.10;
  s.health.fb_used_bytes = 4.0 * (1LL << 30);  // of 80 GiB
  const auto fs = derive_findings(s.report());
  ASSERT_NE(find(fs, "small_job"), nullptr) << ::testing::PrintToString(ids(fs));
  EXPECT_NE(find(fs, "small_job")->fix.find("MIG"), std::string::npos);
  // Big footprint: not a small job.
  s.health.fb_used_bytes = 70.0 * (1LL << 30);
  EXPECT_EQ(find(derive_findings(s.report()), "small_job"), nullptr);
}

TEST(Findings, RankedByRecoverableTime) {
  const auto fs = derive_findings(
      Synth().idle(IdleCause::kDataloader, 0.08).idle(IdleCause::kHostSync, 0.25).comm(0.12).report());
  ASSERT_EQ(ids(fs), (std::vector<std::string>{"idle_host_sync", "exposed_communication", "idle_dataloader"}));
}

// --- workload-aware fixes (docs/findings.md, "Workload") --------------------

bool has(const std::string& text, const char* word) { return text.find(word) != std::string::npos; }

TEST(FindingsWorkload, InferenceIdleCausesGetBatchingAndGraphsNotOptimizers) {
  for (const IdleCause c : {IdleCause::kDataloader, IdleCause::kLaunch, IdleCause::kHost}) {
    const auto fs = derive_findings(Synth().kind("inference").idle(c, 0.10).report());
    ASSERT_EQ(fs.size(), 1u) << to_string(c);
    EXPECT_TRUE(has(fs[0].fix, "continuous batching")) << fs[0].fix;
    EXPECT_TRUE(has(fs[0].fix, "queue-delay budget")) << fs[0].fix;
    EXPECT_TRUE(has(fs[0].fix, "model instances")) << fs[0].fix;
    EXPECT_TRUE(has(fs[0].fix, "MIG/MPS")) << fs[0].fix;
    EXPECT_FALSE(has(fs[0].fix, "optimizer")) << fs[0].fix;
    if (c != IdleCause::kDataloader) {
      EXPECT_TRUE(has(fs[0].fix, "CUDA graphs")) << fs[0].fix;
      EXPECT_TRUE(has(fs[0].fix, "torch.compile(mode=\"reduce-overhead\")")) << fs[0].fix;
    }
    EXPECT_EQ(fs[0].recoverable_ns, kSteps * kStepNs / 10);  // the numbers do not change with the kind
  }
}

TEST(FindingsWorkload, OptimizerFixOnlyForTraining) {
  const auto host_fix = [](const char* kind) {
    const auto fs = derive_findings(Synth().kind(kind).idle(IdleCause::kHost, 0.10).report());
    return fs.size() == 1 ? fs[0].fix : std::string("<none>");
  };
  EXPECT_TRUE(has(host_fix("training"), "fused/foreach optimizers"));
  EXPECT_FALSE(has(host_fix("unknown"), "optimizer"));
  EXPECT_FALSE(has(host_fix("inference"), "optimizer"));
  // The DataLoader fix stays the worker/pinning fix for training.
  const auto fs = derive_findings(Synth().kind("training").idle(IdleCause::kDataloader, 0.10).report());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_TRUE(has(fs[0].fix, "num_workers") && has(fs[0].fix, "pin_memory=True") && has(fs[0].fix, "prefetch_factor"));
  EXPECT_FALSE(has(fs[0].fix, "batching"));
}

TEST(FindingsWorkload, InferenceCommunicationFixIsNotAboutGradients) {
  const auto fs = derive_findings(Synth().kind("inference").comm(0.15).report());
  ASSERT_EQ(ids(fs), std::vector<std::string>{"exposed_communication"});
  EXPECT_FALSE(has(fs[0].fix, "gradient")) << fs[0].fix;
  EXPECT_TRUE(has(fs[0].fix, "tensor/pipeline parallelism")) << fs[0].fix;
}

TEST(FindingsWorkload, InferenceWithLargeUnexplainedIdleFiresIdleServing) {
  // 30% idle nobody explains (a server waiting for requests).
  const auto fs = derive_findings(Synth().kind("inference").idle(IdleCause::kUnattributed, 0.30).report());
  ASSERT_EQ(ids(fs), std::vector<std::string>{"idle_serving"});
  EXPECT_EQ(fs[0].recoverable_ns, static_cast<int64_t>(0.30 * kStepNs) * kSteps);
  EXPECT_TRUE(has(fs[0].fix, "continuous batching")) << fs[0].fix;
  EXPECT_TRUE(has(fs[0].title, "30.0%")) << fs[0].title;
  // Not for training, and not when a cause rule already claims the idle.
  EXPECT_TRUE(derive_findings(Synth().kind("training").idle(IdleCause::kUnattributed, 0.30).report()).empty());
  const auto launch = derive_findings(Synth().kind("inference").idle(IdleCause::kLaunch, 0.30).report());
  EXPECT_EQ(ids(launch), std::vector<std::string>{"idle_launch"});
  // Below 20% idle: silent.
  EXPECT_TRUE(derive_findings(Synth().kind("inference").idle(IdleCause::kUnattributed, 0.19).report()).empty());
}

TEST(FindingsWorkload, CaptureRunChargesNoIdleOnlyNotesTheCapture) {
  const int64_t capture_ns = static_cast<int64_t>(0.9 * kStepNs) * kSteps;
  const auto fs = derive_findings(
      Synth().kind("capture", capture_ns).idle(IdleCause::kHost, 0.6).idle(IdleCause::kLaunch, 0.3).report());
  ASSERT_EQ(ids(fs), std::vector<std::string>{"graph_capture"});
  EXPECT_EQ(fs[0].recoverable_ns, 0);
  EXPECT_TRUE(has(fs[0].title, "90.0% of the analysed time")) << fs[0].title;
  EXPECT_TRUE(has(fs[0].fix, "profile the replays")) << fs[0].fix;
}

TEST(FindingsWorkload, CaptureTimeIsTakenOutOfRecoverableIdle) {
  // 30% idle host, 10% of the run inside capture windows: 20% recoverable.
  const int64_t wall_ns = kSteps * kStepNs;
  const auto fs =
      derive_findings(Synth().kind("training", wall_ns / 10).idle(IdleCause::kHost, 0.30).report());
  const Finding* f = find(fs, "idle_host");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(ids(fs));
  EXPECT_EQ(f->recoverable_ns, wall_ns / 5);
  EXPECT_TRUE(has(f->evidence, "after excluding 100.0 ms of CUDA-graph capture")) << f->evidence;
  EXPECT_TRUE(has(f->title, "20.0%")) << f->title;
  ASSERT_NE(find(fs, "graph_capture"), nullptr);
  EXPECT_EQ(find(fs, "graph_capture")->recoverable_ns, 0);
  // Capture covering the idle entirely leaves nothing to recover.
  const auto covered =
      derive_findings(Synth().kind("training", 3 * wall_ns / 10).idle(IdleCause::kHost, 0.30).report());
  EXPECT_EQ(ids(covered), std::vector<std::string>{"graph_capture"});
}

// --- pageable copies ---------------------------------------------------------

TEST(FindingsPageable, PageableCopiesFireWithPinnedMemoryAdvice) {
  Synth s;
  s.pageable_memcpys = 2;
  s.pageable_memcpy_bytes = 4u << 20;  // 4 MiB per step
  s.idle(IdleCause::kHostSync, 0.02);  // under the idle_host_sync threshold
  const auto fs = derive_findings(s.report());
  ASSERT_EQ(ids(fs), std::vector<std::string>{"pageable_copy"});
  EXPECT_TRUE(has(fs[0].fix, "DataLoader(pin_memory=True)")) << fs[0].fix;
  EXPECT_TRUE(has(fs[0].fix, "tensor.pin_memory()")) << fs[0].fix;
  EXPECT_TRUE(has(fs[0].fix, "non_blocking=True) only from pinned buffers")) << fs[0].fix;
  EXPECT_TRUE(has(fs[0].evidence, "2.0 copies (4.0 MiB) per step")) << fs[0].evidence;
  EXPECT_TRUE(has(fs[0].evidence, "20 copies, 40.0 MiB in all")) << fs[0].evidence;
  EXPECT_TRUE(has(fs[0].evidence, "idle host_sync")) << fs[0].evidence;
  EXPECT_TRUE(has(fs[0].evidence, "2.0 ms per step")) << fs[0].evidence;
  EXPECT_EQ(fs[0].recoverable_ns, 0);  // its time is idle_host_sync's
}

TEST(FindingsPageable, HostSyncFindingPointsAtPageableCopies) {
  Synth s;
  s.pageable_memcpys = 1;
  s.pageable_memcpy_bytes = 64u << 20;
  s.idle(IdleCause::kHostSync, 0.10);
  const auto fs = derive_findings(s.report());
  const Finding* f = find(fs, "idle_host_sync");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(has(f->fix, "pin the host side of copies")) << f->fix;
  EXPECT_NE(find(fs, "pageable_copy"), nullptr);
}

TEST(FindingsPageable, NoPageableCopyOrScalarReadsOnlyIsSilent) {
  EXPECT_TRUE(derive_findings(Synth().report()).empty());
  // .item()-sized reads (8 bytes each): pinning would not help; that cost is the sync.
  Synth scalars;
  scalars.pageable_memcpys = 10;
  scalars.pageable_memcpy_bytes = 80;
  EXPECT_TRUE(derive_findings(scalars.report()).empty());
  // Just under 1 MiB per step: silent; at 1 MiB: fires.
  Synth under;
  under.pageable_memcpys = 1;
  under.pageable_memcpy_bytes = (1u << 20) - 1;
  EXPECT_TRUE(derive_findings(under.report()).empty());
  under.pageable_memcpy_bytes = 1u << 20;
  EXPECT_EQ(ids(derive_findings(under.report())), std::vector<std::string>{"pageable_copy"});
}

// --- planted event stores through analyze(): counters become health -------

Planted busy_store() {
  Planted p;
  p.step(0, 0, 1000).step(1, 1000, 2000);
  p.kernel("gemm", 0, 1000).kernel("gemm", 1000, 2000);
  return p;
}

void counter(EventStore& s, const char* name, double ts_us, double value) {
  s.counters.push_back({test::us(ts_us), s.names.intern(name), 0, value});
}

TEST(FindingsPlanted, ThrottleCountersBecomeStepHealthAndAFinding) {
  Planted p = busy_store();
  auto& s = p.store();
  // Cumulative power-throttle ns: +400 us during step 0, +300 us during step 1.
  counter(s, "throttle_power_total_ns", 0, 0);
  counter(s, "throttle_power_total_ns", 1000, 400'000);
  counter(s, "throttle_power_total_ns", 2000, 700'000);
  counter(s, "sm_clock_mhz", 500, 1200);
  counter(s, "sm_clock_max_mhz", 500, 1800);
  counter(s, "sm_clock_mhz", 1500, 1400);
  counter(s, "sm_clock_max_mhz", 1500, 1800);
  const Report r = analyze({&s}, AnalysisOptions{});
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].devices[0].health.throttle_power_ns, 400'000);
  EXPECT_EQ(r.steps[1].devices[0].health.throttle_power_ns, 300'000);
  EXPECT_DOUBLE_EQ(*r.steps[0].devices[0].health.sm_clock_mhz, 1200);
  EXPECT_FALSE(r.steps[0].devices[0].health.throttle_thermal_ns.has_value());
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].id, "throttling");
}

TEST(FindingsPlanted, SameStoreWithoutCountersIsSilent) {
  Planted p = busy_store();
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  EXPECT_TRUE(r.findings.empty()) << ::testing::PrintToString(ids(r.findings));
  EXPECT_FALSE(r.steps[0].devices[0].health.any());
}

TEST(FindingsPlanted, AllocatorCountersFireReservedMemory) {
  Planted p = busy_store();
  auto& s = p.store();
  counter(s, "torch_allocated_bytes", 900, 2.0 * (1LL << 30));
  counter(s, "torch_reserved_bytes", 900, 9.0 * (1LL << 30));
  const Report r = analyze({&s}, AnalysisOptions{});
  ASSERT_EQ(ids(r.findings), std::vector<std::string>{"reserved_memory"});
  EXPECT_DOUBLE_EQ(*r.steps[0].devices[0].health.reserved_bytes, 9.0 * (1LL << 30));
  EXPECT_FALSE(r.steps[1].devices[0].health.reserved_bytes.has_value());
}

TEST(FindingsPlanted, DataloaderGapFiresIdleDataloader) {
  Planted p;
  p.step(0, 0, 1000);
  p.range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 400, 0, false);
  p.kernel("gemm", 400, 1000, 399);
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].id, "idle_dataloader");
  EXPECT_NE(r.findings[0].title.find("Highly"), std::string::npos);
  EXPECT_NE(r.findings[0].evidence.find("enumerate(DataLoader)"), std::string::npos) << r.findings[0].evidence;
}

// A 4 MiB input batch copied from pageable memory: the cudaMemcpyAsync
// blocks the host until the copy is done, behind the queued k0.
Planted pageable_copy_store(bool pageable) {
  Planted p;
  p.step(0, 0, 1000);
  p.range("aten::linear", 0, 2).kernel("gemm", 2, 300, 1);
  p.range("aten::to", 50, 400).async_copy(50, 400, 300, 390, MemcpyDirection::kHostToDevice, 4u << 20, pageable);
  p.range("aten::linear", 400, 402).kernel("gemm", 405, 1000, 401);
  return p;
}

TEST(FindingsPlanted, PageableInputCopyFiresPageableCopyWithPinnedAdvice) {
  Planted p = pageable_copy_store(true);
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  ASSERT_EQ(r.steps.at(0).devices.at(0).pageable_memcpys, 1u);
  EXPECT_GT(r.summary.devices.at(0).breakdown.idle_ns[static_cast<size_t>(IdleCause::kHostSync)], 0);
  const Finding* f = find(r.findings, "pageable_copy");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(ids(r.findings));
  EXPECT_TRUE(has(f->fix, "pin_memory=True")) << f->fix;
  EXPECT_TRUE(has(f->evidence, "1.0 copies (4.0 MiB) per step")) << f->evidence;
  EXPECT_TRUE(has(f->evidence, "idle host_sync")) << f->evidence;
}

TEST(FindingsPlanted, PinnedInputCopyHasNoPageableFinding) {
  Planted p = pageable_copy_store(false);
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  EXPECT_EQ(r.steps.at(0).devices.at(0).pageable_memcpys, 0u);
  EXPECT_EQ(find(r.findings, "pageable_copy"), nullptr) << ::testing::PrintToString(ids(r.findings));
}

// Issue 37, item 7: "low occupancy" fired on a 99%-busy run whose GEMMs are
// persistent kernels (one 384-thread block with 160 KiB of shared memory per
// SM, by design). Their occupancy is their design: no finding, and the
// estimate leaves them out (persistent_kernel_ns). The same kernels in an
// uneven grid are an ordinary low-occupancy launch.
Report persistent_gemm_run(uint32_t blocks) {
  Planted p;
  p.store().devices[0].sm_count = 108;
  for (int s = 0; s < 4; ++s) {
    const double t = s * 10'000.0;
    p.step(s, t, t + 10'000);
    for (int k = 0; k < 10; ++k) {
      p.kernel("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_persistent", t + 1'000.0 * k + 5, t + 1'000.0 * (k + 1),
               t + 1'000.0 * k);
      auto& a = p.store().activities.back();
      a.grid[0] = blocks;
      a.block[0] = 384;
      a.registers_per_thread = 168;
      a.shared_memory_bytes = 160 * 1024;
    }
  }
  return analyze(p.store());
}

TEST(Findings, PersistentGemmsAtLowOccupancyByDesignAreNoLowOccupancyFinding) {
  const Report persistent = persistent_gemm_run(108);
  const auto& d = persistent.steps.at(0).devices.at(0);
  EXPECT_EQ(d.persistent_kernel_ns, test::us(9'950));
  EXPECT_FALSE(d.achieved_occupancy_est.has_value());
  EXPECT_EQ(find(persistent.findings, "low_occupancy"), nullptr) << ::testing::PrintToString(ids(persistent.findings));
  const Report uneven = persistent_gemm_run(150);
  EXPECT_EQ(uneven.steps.at(0).devices.at(0).persistent_kernel_ns, 0);
  EXPECT_NE(find(uneven.findings, "low_occupancy"), nullptr) << ::testing::PrintToString(ids(uneven.findings));
}

// --- real GPU traces --------------------------------------------------------

Report analyze_trace(const std::string& name) {
  auto imp = import_kineto_file(test::trace_path(name));
  EXPECT_TRUE(imp.ok) << imp.error;
  return analyze({&imp.store}, AnalysisOptions{});
}

// hta_event_sync_a100 (3.2 ms): the host blocks in aten::item and two
// synchronizes, 54 us of device idle in all; 2.2 ms of the step is the
// first allocation (aten::empty). Host sync lasts while the host is blocked
// (issue 37): the host work after each sync was host sync under the old
// drain rule, which made "host sync" a finding here. The finding is the
// allocation; aten::item still leads the host-sync culprits.
TEST(FindingsRealTraces, SyncDemoTraceNamesItemAsHostSyncCulpritAndTheAllocationFirst) {
  GPUUTIL_REQUIRE_TRACES();
  const Report r = analyze_trace("hta_event_sync_a100.json.gz");
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].id, "idle_host");
  EXPECT_TRUE(has(r.findings[0].evidence, "aten::empty")) << r.findings[0].evidence;
  const auto& sync = r.summary.devices.at(0).culprits[static_cast<size_t>(IdleCause::kHostSync)];
  ASSERT_FALSE(sync.empty());
  EXPECT_EQ(sync.front().name, "aten::item");
  EXPECT_EQ(r.summary.devices.at(0).breakdown.idle_ns[static_cast<size_t>(IdleCause::kHostSync)], 54'000);
}

// The AlexNet benchmark's idle is the first use of CUDA and cuDNN: 29.9 s in
// the first aten::to's allocation (CUDA context creation under
// aten::empty_strided) and seconds in the first convolutions (cuDNN), all
// before their launch calls. That is host work of those ops, not launch
// latency (issue 26, item 6): it was "98.4% launch-bound".
TEST(FindingsRealTraces, AlexnetFirstUseInitialisationIsHostWorkNotLaunch) {
  GPUUTIL_REQUIRE_TRACES();
  const Report r = analyze_trace("hta_alexnet_a100_sync.json.gz");
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].id, "idle_host");
  EXPECT_NE(r.findings[0].title.find("Highly"), std::string::npos);
  EXPECT_TRUE(has(r.findings[0].evidence, "aten::empty_strided")) << r.findings[0].evidence;
  const Finding* launch = find(r.findings, "idle_launch");
  ASSERT_NE(launch, nullptr);
  EXPECT_LT(launch->share_of_wall, 0.10);
}

TEST(FindingsRealTraces, DistributedTraceHasExposedCommunication) {
  GPUUTIL_REQUIRE_TRACES();
  const Report r = analyze_trace("hta_sampled_rank0.json.gz");
  EXPECT_NE(find(r.findings, "exposed_communication"), nullptr) << ::testing::PrintToString(ids(r.findings));
}

TEST(FindingsRealTraces, ResnetPageableInputCopiesFirePageableCopy) {
  GPUUTIL_REQUIRE_TRACES();
  // DataLoader without pin_memory: the input batch is copied from pageable memory.
  const Report r = analyze_trace("kineto_resnet50_nw4_v100.json.gz");
  const Finding* f = find(r.findings, "pageable_copy");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(ids(r.findings));
  EXPECT_TRUE(has(f->fix, "pin_memory=True")) << f->fix;
  // .item()-sized pageable reads alone do not fire it.
  EXPECT_EQ(find(analyze_trace("hta_event_sync_a100.json.gz").findings, "pageable_copy"), nullptr);
}

TEST(FindingsRealTraces, CompiledTritonTraceIsSilent) {
  GPUUTIL_REQUIRE_TRACES();
  const Report r = analyze_trace("tracelens_mi300x_torch_compile_triton.json.gz");
  EXPECT_FALSE(r.steps.empty());
  EXPECT_TRUE(r.findings.empty()) << ::testing::PrintToString(ids(r.findings));
}

}  // namespace
}  // namespace gpuutil

// Host-only runs (no device): findings from the main thread's breakdown.
namespace host_only {

gpuutil::Report host_report(int64_t dataloader_ms, int64_t sync_ms, int64_t optimizer_ms, int steps = 4) {
  using namespace gpuutil;
  constexpr int64_t kMs = 1'000'000;
  Report r;
  for (int i = 0; i < steps; ++i) {
    StepReport st;
    st.step = i;
    st.wall_ns = 100 * kMs;
    HostThreadStepReport main;
    main.name = "main";
    main.wall_ns = st.wall_ns;
    main.breakdown_ns[static_cast<int>(HostCategory::kDataloader)] = dataloader_ms * kMs;
    main.breakdown_ns[static_cast<int>(HostCategory::kHostSync)] = sync_ms * kMs;
    main.breakdown_ns[static_cast<int>(HostCategory::kOptimizer)] = optimizer_ms * kMs;
    main.breakdown_ns[static_cast<int>(HostCategory::kForward)] = 10 * kMs;
    main.breakdown_ns[static_cast<int>(HostCategory::kOther)] =
        st.wall_ns - (dataloader_ms + sync_ms + optimizer_ms + 10) * kMs;
    main.culprits[static_cast<int>(HostCategory::kDataloader)] = {{"enumerate(DataLoader)#__next__", dataloader_ms * kMs, 1}};
    HostThreadStepReport worker;  // a busy-looking helper thread with no classified time
    worker.name = "pin_memory";
    worker.wall_ns = st.wall_ns;
    worker.breakdown_ns[static_cast<int>(HostCategory::kOther)] = st.wall_ns;
    st.host = {worker, main};
    r.steps.push_back(st);
  }
  r.summary.steps = static_cast<uint64_t>(steps);
  r.summary.steps_wall_ns = steps * 100 * kMs;
  r.summary.trace_span_ns = r.summary.steps_wall_ns;
  return r;
}

const gpuutil::Finding* find(const std::vector<gpuutil::Finding>& v, const std::string& id) {
  for (const auto& f : v) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

TEST(FindingsHostOnly, DataloaderSyncAndOptimizerOfTheMainThreadAreFindingsAboveTheirThresholds) {
  const auto findings = gpuutil::derive_findings(host_report(40, 6, 25));
  const auto* dl = find(findings, "host_dataloader");
  ASSERT_NE(dl, nullptr);
  EXPECT_EQ(dl->recoverable_ns, 4 * 40'000'000);
  EXPECT_NEAR(dl->share_of_wall, 0.40, 1e-9);
  EXPECT_NE(dl->evidence.find("enumerate(DataLoader)#__next__"), std::string::npos);
  EXPECT_NE(dl->fix.find("num_workers"), std::string::npos);
  const auto* sync = find(findings, "host_sync");
  ASSERT_NE(sync, nullptr);
  EXPECT_EQ(sync->recoverable_ns, 4 * 6'000'000);
  const auto* opt = find(findings, "host_optimizer");
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->recoverable_ns, 4 * 25'000'000 / 2);
  EXPECT_EQ(findings.front().id, "host_dataloader");  // ranked by recoverable time
}

// A one-step report (every live report) names the same top culprit as the
// sums over several steps do: the most time, then the smallest name.
TEST(FindingsHostOnly, OneStepAndManyStepsNameTheSameTopCulpritTiesByName) {
  for (const int steps : {1, 3}) {
    gpuutil::Report r = host_report(40, 6, 25, steps);
    for (auto& st : r.steps) {
      st.host[1].culprits[static_cast<int>(gpuutil::HostCategory::kDataloader)] = {
          {"loader_b", 20'000'000, 1}, {"loader_a", 20'000'000, 1}, {"loader_c", 1'000'000, 1}};
    }
    const auto* dl = find(gpuutil::derive_findings(r), "host_dataloader");
    ASSERT_NE(dl, nullptr) << steps << " steps";
    EXPECT_NE(dl->evidence.find("top range: loader_a"), std::string::npos) << steps << " steps: " << dl->evidence;
  }
}

TEST(FindingsHostOnly, BelowTheThresholdsThereIsNoHostFinding) {
  const auto findings = gpuutil::derive_findings(host_report(4, 4, 19));
  EXPECT_EQ(find(findings, "host_dataloader"), nullptr);
  EXPECT_EQ(find(findings, "host_sync"), nullptr);
  EXPECT_EQ(find(findings, "host_optimizer"), nullptr);
}

TEST(FindingsHostOnly, ARunWithADeviceGetsDeviceFindingsNotHostOnes) {
  gpuutil::Report r = host_report(40, 6, 25);
  gpuutil::DeviceSummary d;
  d.wall_ns = r.summary.steps_wall_ns;
  d.breakdown.compute_ns = d.wall_ns;
  r.summary.devices.push_back(d);
  const auto findings = gpuutil::derive_findings(r);
  EXPECT_EQ(find(findings, "host_dataloader"), nullptr);
}

TEST(FindingsHostOnly, TimeOutsideStepsIsAFindingOfEveryRunFromTenPercent) {
  gpuutil::Report r = host_report(0, 0, 0);
  r.summary.trace_span_ns = 500'000'000;
  r.summary.outside_steps_ns = 50'000'000;  // exactly 10% of the span
  const auto* f = find(gpuutil::derive_findings(r), "outside_steps");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->recoverable_ns, r.summary.outside_steps_ns);
  r.summary.outside_steps_ns -= 1'000'000;
  EXPECT_EQ(find(gpuutil::derive_findings(r), "outside_steps"), nullptr);
  EXPECT_EQ(gpuutil::outside_steps_finding(1, 100, 50), std::nullopt) << "one step has no 'between'";
}

}  // namespace host_only
