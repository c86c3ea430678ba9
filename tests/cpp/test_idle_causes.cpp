// Planted-timeline tests of the idle-cause rules for work that was already
// queued when the GPU went idle (docs/accounting.md, "Idle causes"): graph
// launches behind a blocking host copy, kernels waiting on a collective,
// late launches, pageable async copies, and graph launch latency.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "gpuutil/analysis.h"
#include "planted.h"
#include "step_checks.h"

namespace gpuutil {
namespace {

using test::Planted;
using test::us;

using test::culprit_ns;
using test::expect_identities;
using test::idle;
using test::top_culprit;

// The A100 pattern of issue 11: the step's graph was launched early; the
// host then sat in a pageable device-to-host copy (the DMA is short, the
// host-side copy out of the staging buffer is long) and the graph's kernels
// ran only after it.
//   device: k0 [0,100)  copy [110,130)                 g1 [500,600) g2 [600,700)
//   host:   cudaGraphLaunch [50,60)  aten::to [108,482) > cudaMemcpyAsync [110,480)
TEST(IdleCauses, GraphQueuedBeforeAGapBehindABlockingHostCopyIsHostSyncNotLaunch) {
  Planted p;
  p.step(1, 0, 1000).kernel("k0", 0, 100);
  const uint64_t graph = p.enqueue("cudaGraphLaunch", 50, 60);
  p.kernel_of(graph, "g1", 500, 600, 8).kernel_of(graph, "g2", 600, 700, 8);
  p.range("aten::to", 108, 482);
  const uint64_t copy = p.enqueue("cudaMemcpyAsync", 110, 480);
  p.memcpy_of(copy, 110, 130, MemcpyDirection::kDeviceToHost, 1 << 20, /*pageable=*/true, 9);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  // [130,480): the host is stuck in the pageable copy while the graph waits.
  EXPECT_EQ(idle(d, IdleCause::kHostSync), us(350));
  EXPECT_EQ(top_culprit(d, IdleCause::kHostSync), "aten::to");
  // [480,500): nothing on the host explains it: the queued graph waited on
  // its dependency; with no op or range around the graph launch the
  // culprit is the waiting work itself.
  EXPECT_EQ(idle(d, IdleCause::kDependency), us(20));
  EXPECT_EQ(top_culprit(d, IdleCause::kDependency), "g1");
  // Only the copy's own dispatch, [108,110), is launch time.
  EXPECT_EQ(idle(d, IdleCause::kLaunch), us(2));
  EXPECT_EQ(idle(d, IdleCause::kHost), us(8) + us(300));  // [100,108) and the tail [700,1000)
  expect_identities(d);
}

// A kernel queued early waits (via an event) for work behind a collective
// the host is blocked in; once the host is out, what is left is dependency.
TEST(IdleCauses, PreEnqueuedKernelWaitingOnACollectiveIsCollective) {
  Planted p;
  p.step(1, 0, 1000).kernel("k0", 0, 100);
  p.range("aten::mm", 18, 26);
  const uint64_t mm = p.enqueue("cudaLaunchKernel", 20, 25);
  p.kernel_of(mm, "gemm", 420, 500);
  p.range("c10d::allreduce_", 100, 400);
  p.api("cudaEventRecord", 400, 405);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  EXPECT_EQ(idle(d, IdleCause::kCollective), us(300));
  EXPECT_EQ(top_culprit(d, IdleCause::kCollective), "c10d::allreduce_");
  EXPECT_EQ(idle(d, IdleCause::kDependency), us(20));
  EXPECT_EQ(top_culprit(d, IdleCause::kDependency), "aten::mm");
  EXPECT_EQ(idle(d, IdleCause::kLaunch), 0);
  expect_identities(d);
}

// The host asked for the next kernel only after the GPU went idle: launch.
TEST(IdleCauses, GenuinelyLateLaunchIsStillLaunch) {
  Planted p;
  p.step(1, 0, 1000).kernel("k0", 0, 100);
  p.range("aten::mm", 290, 310).kernel("gemm", 310, 400, 300);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  EXPECT_EQ(idle(d, IdleCause::kLaunch), us(20));
  EXPECT_EQ(top_culprit(d, IdleCause::kLaunch), "aten::mm");
  EXPECT_EQ(idle(d, IdleCause::kHost), us(190) + us(600));
  EXPECT_EQ(idle(d, IdleCause::kDependency), 0);
  expect_identities(d);
}

// Work queued just before the gap was still being submitted (it started as
// soon as the device picks work up, the window's fastest launch): launch.
// (Gaps of 20 us and more: shorter ones are kernel-to-kernel gaps, below.)
TEST(IdleCauses, WorkQueuedButStillInSubmissionIsLaunchNotDependency) {
  Planted p;
  p.step(1, 0, 300).kernel("k0", 0, 100).kernel("k1", 130, 140, 98).kernel("k2", 200, 210, 195);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  // k2's late launch sets the floor: 5 us from call to start. k1, queued
  // at 98, could not start before 103: [100,103) is launch; it started at
  // 130, so [103,130) is a dependency of k1 (stream order behind nothing
  // visible). [140,195) is host time before k2's call, [195,200) launch.
  EXPECT_EQ(idle(d, IdleCause::kLaunch), us(3) + us(5));
  EXPECT_EQ(idle(d, IdleCause::kDependency), us(27));
  EXPECT_EQ(idle(d, IdleCause::kKernelGap), 0);
  expect_identities(d);
}

// Issue 26, item 6: back-to-back kernels queued well ahead, separated by
// 2-19 us on the device (an H100 inference forward: the largest idle cause
// of its step was "dependency"). That is the device's own turnaround from
// one queued kernel to the next (HTA's "kernel wait"): idle_kernel_gap,
// not a dependency, and no finding.
TEST(IdleCauses, SubTwentyMicrosecondGapsBetweenQueuedKernelsAreKernelGapsNotDependency) {
  Planted p;
  p.step(1, 0, 3000);
  p.range("aten::linear", 0, 400);
  double t = 20;
  int64_t gaps_ns = 0;
  for (int i = 0; i < 60; ++i) {
    p.kernel("gemm", t, t + 8, 10 + i * 5.0);  // each queued well before the one ahead of it ends
    const double gap = 2 + (i % 18);           // 2..19 us
    if (i < 59) gaps_ns += us(gap);
    t += 8 + gap;
  }
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  EXPECT_EQ(idle(d, IdleCause::kKernelGap), gaps_ns);  // exactly the 59 gaps between kernels
  EXPECT_EQ(idle(d, IdleCause::kDependency), 0);
  EXPECT_EQ(top_culprit(d, IdleCause::kKernelGap), "aten::linear");
  expect_identities(d);
  for (const auto& f : r.findings) {
    EXPECT_NE(f.id, "idle_dependency") << f.title;
    EXPECT_EQ(f.id.find("kernel_gap"), std::string::npos) << f.title;
  }
}

// Issue 26, item 3, at the size of the A100 trace (459 ms over its steps):
// each step's CUDA graph is launched early, 66 ms before the GPU runs dry;
// the main thread then blocks in a device-to-host copy (.cpu() of a result)
// queued behind the graph, so the copy waits on the GPU and returns only
// after the graph ran. The GPU did not wait for the host: the host waited
// for the GPU. The gap is the graph's dependency, not a host sync.
//   device: k0 [0,70) ms  ........ gap 60 ms ........  g1 [130,150) g2 [150,170) copy [170,171)
//   host:   cudaGraphLaunch [4 ms]     aten::to [66, 171.95) > cudaMemcpyAsync (pageable) [66.01, 171.9)
TEST(IdleCauses, PreQueuedGraphBehindACopyThatWaitsOnTheGpuIsDependencyNotHostSync) {
  Planted p;
  constexpr int kSteps = 8;
  constexpr double kStepUs = 172'000;
  for (int s = 0; s < kSteps; ++s) {
    const double t = s * kStepUs;
    p.step(s, t, t + kStepUs);
    p.kernel("k0", t + 100, t + 70'000, t + 90);
    const uint64_t graph = p.enqueue("cudaGraphLaunch", t + 4'000, t + 4'020);
    p.kernel_of(graph, "g1", t + 130'000, t + 150'000, 8).kernel_of(graph, "g2", t + 150'000, t + 170'000, 8);
    p.range("aten::to", t + 66'000, t + 171'950);
    const uint64_t copy = p.enqueue("cudaMemcpyAsync", t + 66'010, t + 171'900);
    p.memcpy_of(copy, t + 170'000, t + 171'000, MemcpyDirection::kDeviceToHost, 4 << 20, /*pageable=*/true, 8);
  }
  const Report r = analyze(p.store());
  ASSERT_EQ(r.steps.size(), static_cast<size_t>(kSteps));
  for (const auto& step : r.steps) {
    const auto& d = step.devices.at(0);
    SCOPED_TRACE("step " + std::to_string(step.step));
    // [70,130) ms: the graph was queued 66 ms before; no launch optimization
    // and no removed .cpu() would start it sooner.
    EXPECT_EQ(idle(d, IdleCause::kDependency), us(60'000));
    EXPECT_EQ(top_culprit(d, IdleCause::kDependency), "g1");
    // Only the last millisecond, the host still copying after the GPU
    // finished (and the drain behind it), is host_sync.
    EXPECT_LE(idle(d, IdleCause::kHostSync), us(1'000));
    expect_identities(d);
  }
  const auto& run = r.summary.devices.at(0);
  EXPECT_EQ(run.breakdown.idle_ns[static_cast<size_t>(IdleCause::kDependency)], kSteps * us(60'000));  // 480 ms
  for (const auto& f : r.findings) EXPECT_NE(f.id, "idle_host_sync") << f.title << ": " << f.fix;
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings.front().id, "idle_dependency");
}

// The same graph, but the copy ends before the graph starts: the host's
// copy held the stream the graph waits on (issue 11): host_sync stays.
TEST(IdleCauses, PreQueuedGraphBehindACopyThatEndsBeforeItStartsIsStillHostSync) {
  Planted p;
  p.step(1, 0, 172'000).kernel("k0", 100, 70'000, 90);
  const uint64_t graph = p.enqueue("cudaGraphLaunch", 4'000, 4'020);
  p.kernel_of(graph, "g1", 130'000, 150'000, 8);
  p.range("aten::to", 66'000, 129'990);
  const uint64_t copy = p.enqueue("cudaMemcpyAsync", 66'010, 129'980);
  p.memcpy_of(copy, 70'000, 71'000, MemcpyDirection::kDeviceToHost, 4 << 20, /*pageable=*/true, 9);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  EXPECT_EQ(idle(d, IdleCause::kHostSync), us(129'980 - 71'000));  // the host-side copy after its DMA
  EXPECT_EQ(top_culprit(d, IdleCause::kHostSync), "aten::to");
  EXPECT_EQ(idle(d, IdleCause::kDependency), us(130'000 - 129'980));
  expect_identities(d);
}

// Issue 26, item 6: the first use of a GEMM shape stalls aten::mm 1.4-2.4 ms
// on the host before its launch (B200; repeats take 49 us), and a one-off
// aten::mm took 1.68 ms. That is host work of aten::mm whichever side of the
// launch call it falls on: before the call it was idle_launch, after it
// idle_host. Only the usual dispatch (the window's median, 49 us) before a
// stalled call is launch.
Report gemm_run(bool stall_before_call) {
  Planted p;
  p.step(1, 0, 20'000);
  double t = 0;
  for (int i = 0; i < 30; ++i) {
    const double stall = i == 5 ? 1'400 : i == 15 ? 1'680 : i == 25 ? 2'400 : 0;
    const double call = t + 49 + (stall_before_call ? stall : 0);
    const double op_end = call + 10 + (stall_before_call ? 0 : stall);
    p.range("aten::mm", t, op_end);
    p.kernel("gemm", call + 8, call + 28, call);
    t = op_end + 1;
  }
  return analyze(p.store());
}


TEST(IdleCauses, FirstUseGemmStallIsHostWorkOfTheOpOnEitherSideOfTheLaunchCall) {
  const Report before = gemm_run(true);
  const Report after = gemm_run(false);
  const auto& b = before.steps.at(0).devices.at(0);
  const auto& a = after.steps.at(0).devices.at(0);
  expect_identities(b);
  expect_identities(a);
  const int64_t stalls = us(1'400 + 1'680 + 2'400);
  // Named alike: host work of aten::mm, within the few microseconds the
  // kernel itself still ran into the stall.
  for (const auto* d : {&b, &a}) {
    EXPECT_GE(culprit_ns(*d, IdleCause::kHost, "aten::mm"), stalls - 3 * us(18));
    EXPECT_LE(culprit_ns(*d, IdleCause::kHost, "aten::mm"), stalls);
    EXPECT_LT(idle(*d, IdleCause::kLaunch), us(30 * 57));  // what dispatching 30 kernels costs, no stall
  }
  EXPECT_EQ(idle(b, IdleCause::kLaunch), idle(a, IdleCause::kLaunch));
  EXPECT_LE(std::abs(culprit_ns(b, IdleCause::kHost, "aten::mm") - culprit_ns(a, IdleCause::kHost, "aten::mm")),
            3 * us(1));
}

// Issue 26, item 6 (V100 ResNet): an allocator stall of 1-2 ms inside the
// launching op, before its launch (a cudaMalloc on a cache miss under
// aten::empty). It is host work named by the allocating op, not launch.
TEST(IdleCauses, AllocatorStallBeforeTheLaunchIsHostWorkOfTheAllocatingOp) {
  Planted p;
  p.step(1, 0, 10'000);
  double t = 0;
  for (int i = 0; i < 20; ++i) {
    const double stall = i == 10 ? 1'500 : 0;
    const double call = t + 20 + stall;
    p.range("aten::conv2d", t, call + 10);
    if (stall > 0) {
      p.range("aten::empty", t + 5, t + 5 + stall);
      p.api("cudaMalloc", t + 6, t + 4 + stall);
    }
    p.kernel("implicit_gemm", call + 6, call + 40, call);
    t = call + 11;
  }
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  EXPECT_GE(culprit_ns(d, IdleCause::kHost, "aten::empty"), us(1'500 - 40));
  for (const auto& c : d.culprits[static_cast<size_t>(IdleCause::kLaunch)]) EXPECT_LT(c.ns, us(20 * 30)) << c.name;
}

// Kineto names a pageable copy "Memcpy HtoD (Pageable -> Device)" and CUPTI
// records the memory kinds; either way the async call blocks the host.
TEST(IdleCauses, PageableAsyncCopyIsAHostSyncAndAPinnedOneIsNot) {
  Planted p;
  p.step(1, 0, 1000).kernel("k0", 0, 100);
  const uint64_t pageable = p.enqueue("cudaMemcpyAsync", 100, 300);
  p.memcpy_of(pageable, 290, 300, MemcpyDirection::kHostToDevice, 4096, true);
  const uint64_t pinned = p.enqueue("cudaMemcpyAsync", 400, 410);
  p.memcpy_of(pinned, 412, 420, MemcpyDirection::kHostToDevice, 8192, false);
  const Report r = analyze(p.store());
  const auto& s = r.steps.at(0);
  const auto& d = s.devices.at(0);
  EXPECT_EQ(d.pageable_memcpys, 1u);
  EXPECT_EQ(d.pageable_memcpy_bytes, 4096u);
  // Device: [100,290) the host is stuck in the pageable call: host_sync;
  // [300,400), the host's time after the call returned, is host time
  // (host sync only while a blocking call runs, issue 37).
  EXPECT_EQ(idle(d, IdleCause::kHostSync), us(190));
  EXPECT_EQ(idle(d, IdleCause::kHost), us(100) + us(580));
  EXPECT_EQ(top_culprit(d, IdleCause::kHostSync), "cudaMemcpyAsync");
  // The pinned call returns at once: its gap is launch and host time.
  EXPECT_EQ(idle(d, IdleCause::kLaunch), us(12));
  expect_identities(d);
  // Host: the pageable call is a sync on the thread's breakdown, the pinned one is not.
  ASSERT_EQ(s.host.size(), 1u);
  EXPECT_EQ(s.host[0].breakdown_ns[static_cast<size_t>(HostCategory::kHostSync)], us(200));
}

// Every kernel of a graph carries the graph launch's correlation id: the
// graph's first kernel measures its launch; plain launches are apart.
TEST(IdleCauses, GraphKernelsAreCountedApartAndTheirLatencyIsTheFirstKernels) {
  Planted p;
  p.step(1, 0, 1000).kernel("k0", 5, 100, 0);
  const uint64_t graph = p.enqueue("cudaGraphLaunch", 200, 210);
  p.kernel_of(graph, "g1", 300, 400, 8).kernel_of(graph, "g2", 400, 900, 8);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  EXPECT_EQ(d.kernels, 3u);
  EXPECT_EQ(d.graph_kernels, 2u);
  ASSERT_TRUE(d.graph_launch_latency_p50_ns.has_value());
  EXPECT_EQ(*d.graph_launch_latency_p50_ns, us(100));
  ASSERT_TRUE(d.launch_latency_p50_ns.has_value());
  EXPECT_EQ(*d.launch_latency_p50_ns, us(5));
}

// Two activities start at the same instant (1 us trace resolution): one was
// queued early, one launched late. The answer must not depend on the order
// the records arrived in (live CUPTI delivers them in completion order).
TEST(IdleCauses, TiedNextWorkGivesTheSameAnswerInAnyRecordOrder) {
  auto build = [](bool reversed) {
    Planted p;
    p.step(1, 0, 1000).kernel("k0", 0, 100);
    const uint64_t early = p.enqueue("cudaLaunchKernel", 20, 25);
    p.range("aten::add", 380, 395);
    const uint64_t late = p.enqueue("cudaLaunchKernel", 390, 395);
    if (reversed) {
      p.kernel_of(late, "late", 400, 450, 9).kernel_of(early, "early", 400, 500, 7);
    } else {
      p.kernel_of(early, "early", 400, 500, 7).kernel_of(late, "late", 400, 450, 9);
    }
    return analyze(p.store());
  };
  const Report a = build(false);
  const Report b = build(true);
  const auto& da = a.steps.at(0).devices.at(0);
  const auto& db = b.steps.at(0).devices.at(0);
  EXPECT_EQ(da.breakdown.idle_ns, db.breakdown.idle_ns);
  // The late launch decides: the GPU could not run both before it.
  EXPECT_EQ(idle(da, IdleCause::kLaunch), us(20));
  EXPECT_EQ(idle(da, IdleCause::kDependency), 0);
}

}  // namespace
}  // namespace gpuutil
