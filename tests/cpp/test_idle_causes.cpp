// Planted-timeline tests of the idle-cause rules for work that was already
// queued when the GPU went idle (docs/accounting.md, "Idle causes"): graph
// launches behind a blocking host copy, kernels waiting on a collective,
// late launches, pageable async copies, and graph launch latency.
#include <gtest/gtest.h>

#include <algorithm>

#include "gpuutil/analysis.h"
#include "planted.h"

namespace gpuutil {
namespace {

using test::Planted;
using test::us;

int64_t idle(const DeviceStepReport& d, IdleCause c) { return d.breakdown.idle_ns[static_cast<size_t>(c)]; }

std::string top_culprit(const DeviceStepReport& d, IdleCause c) {
  const auto& v = d.culprits[static_cast<size_t>(c)];
  return v.empty() ? "" : v.front().name;
}

void expect_identities(const DeviceStepReport& d) {
  EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);
  EXPECT_EQ(d.breakdown.busy_ns(), d.busy_ns);
  for (auto v : d.breakdown.idle_ns) EXPECT_GE(v, 0);
}

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
TEST(IdleCauses, WorkQueuedButStillInSubmissionIsLaunchNotDependency) {
  Planted p;
  p.step(1, 0, 100).kernel("k0", 0, 10).kernel("k1", 11, 20, 6).kernel("k2", 25, 30, 16);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  // [10,11): k1 (queued at 6, latency floor 5) could not start before 11.
  // [20,21): k2 queued at 16 could start at 21, it started at 25: [21,25)
  // is a dependency of k2 (stream order behind nothing visible).
  EXPECT_EQ(idle(d, IdleCause::kLaunch), us(2));
  EXPECT_EQ(idle(d, IdleCause::kDependency), us(4));
  expect_identities(d);
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
  // [300,400) the host's work right after it is the sync's drain (the
  // drain rule of docs/accounting.md): host_sync too.
  EXPECT_EQ(idle(d, IdleCause::kHostSync), us(190) + us(100));
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
