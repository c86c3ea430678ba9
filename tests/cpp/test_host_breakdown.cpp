// Host breakdown per step and thread: planted timelines with answers known
// by construction (priority over nested ranges, clipping, culprits), and the
// exact-sum identity on every shared real trace.
#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "analysis/host_breakdown.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "planted.h"
#include "traces.h"

namespace gpuutil {
namespace {

using test::Planted;
using test::us;

int64_t cat(const HostThreadStepReport& h, HostCategory c) { return h.breakdown_ns[static_cast<size_t>(c)]; }

int64_t sum(const HostThreadStepReport& h) {
  return std::accumulate(h.breakdown_ns.begin(), h.breakdown_ns.end(), int64_t{0});
}

const NamedTime* culprit(const HostThreadStepReport& h, HostCategory c, const std::string& name) {
  for (const auto& n : h.culprits[static_cast<size_t>(c)]) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

// One step of a plain loop, 0..100 us:
//
//   0    10          40           70   75       90   100
//   |DL  |  forward   |  backward  |    |optimizer|    |
//              [item]       [nccl:all_reduce]
//            25..30        50..60
//
// host_sync wins inside forward, collective inside backward; gaps are other.
TEST(HostBreakdown, NestedRangesFollowPriorityAndSumToWall) {
  Planted p;
  p.step(0, 0, 100);
  p.range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 10, 0, false);
  p.range("## forward ##", 10, 40, 0, false);
  p.range("aten::linear", 12, 20);
  p.range("aten::item", 25, 30);
  p.range("aten::_local_scalar_dense", 26, 30);
  p.range("## backward ##", 40, 70, 0, false);
  p.range("nccl:all_reduce", 50, 60);
  p.range("Optimizer.step#SGD.step", 75, 90, 0, false);
  p.range("aten::add_", 76, 80);
  p.range("aten::zeros", 92, 95);

  const HostBreakdownIndex index(p.store());
  const auto hosts = index.step(0, us(100), 5);
  ASSERT_EQ(hosts.size(), 1u);
  const auto& h = hosts[0];
  EXPECT_EQ(h.wall_ns, us(100));
  EXPECT_EQ(sum(h), h.wall_ns);
  EXPECT_EQ(cat(h, HostCategory::kDataloader), us(10));
  EXPECT_EQ(cat(h, HostCategory::kForward), us(25));
  EXPECT_EQ(cat(h, HostCategory::kHostSync), us(5));
  EXPECT_EQ(cat(h, HostCategory::kBackward), us(20));
  EXPECT_EQ(cat(h, HostCategory::kCollective), us(10));
  EXPECT_EQ(cat(h, HostCategory::kOptimizer), us(15));
  EXPECT_EQ(cat(h, HostCategory::kOther), us(15));  // 70..75 and 90..100

  // The outermost host-sync op is the culprit, not the nested one.
  const NamedTime* item = culprit(h, HostCategory::kHostSync, "aten::item");
  ASSERT_NE(item, nullptr);
  EXPECT_EQ(item->ns, us(5));
  EXPECT_EQ(item->count, 1u);
  EXPECT_EQ(culprit(h, HostCategory::kHostSync, "aten::_local_scalar_dense"), nullptr);
  ASSERT_NE(culprit(h, HostCategory::kCollective, "nccl:all_reduce"), nullptr);
  ASSERT_NE(culprit(h, HostCategory::kDataloader, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"),
            nullptr);
  // "other" time is named by the op that covered it.
  const NamedTime* zeros = culprit(h, HostCategory::kOther, "aten::zeros");
  ASSERT_NE(zeros, nullptr);
  EXPECT_EQ(zeros->ns, us(3));
}

// Lightning runs forward and backward inside Optimizer.step(closure): the
// optimizer only keeps what its children do not claim.
TEST(HostBreakdown, BackwardAndForwardInsideOptimizerClosureAreNotOptimizer) {
  Planted p;
  p.range("Optimizer.step#Adam.step", 0, 100, 0, false);
  p.range("## forward ##", 0, 30, 0, false);
  p.range("## backward ##", 30, 80, 0, false);
  const auto hosts = HostBreakdownIndex(p.store()).step(0, us(100), 5);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(cat(hosts[0], HostCategory::kForward), us(30));
  EXPECT_EQ(cat(hosts[0], HostCategory::kBackward), us(50));
  EXPECT_EQ(cat(hosts[0], HostCategory::kOptimizer), us(20));
  EXPECT_EQ(sum(hosts[0]), us(100));
}

// A range that straddles the window edge counts only inside the window.
TEST(HostBreakdown, RangesAreClippedToTheStepWindow) {
  Planted p;
  p.range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 30, 0, false);
  p.range("## backward ##", 80, 150, 0, false);
  const auto hosts = HostBreakdownIndex(p.store()).step(us(20), us(100), 5);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(cat(hosts[0], HostCategory::kDataloader), us(10));
  EXPECT_EQ(cat(hosts[0], HostCategory::kBackward), us(20));
  EXPECT_EQ(cat(hosts[0], HostCategory::kOther), us(50));
  EXPECT_EQ(sum(hosts[0]), us(80));
}

// A blocking cudaMemcpy counts as host_sync and is named by the op that
// issued it (the op is the culprit, not the runtime call).
TEST(HostBreakdown, BlockingCopyIsHostSyncNamedByItsOp) {
  Planted p;
  p.range("aten::to", 10, 50);
  p.api("cudaMemcpy", 20, 45);
  p.api("cudaLaunchKernel", 12, 13);
  const auto hosts = HostBreakdownIndex(p.store()).step(0, us(60), 5);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(cat(hosts[0], HostCategory::kHostSync), us(25));
  const NamedTime* to = culprit(hosts[0], HostCategory::kHostSync, "aten::to");
  ASSERT_NE(to, nullptr);
  EXPECT_EQ(to->ns, us(25));
  EXPECT_EQ(sum(hosts[0]), us(60));
}

// Each thread is reported on its own; a thread with nothing in the window
// is not reported, and step ranges alone do not make a thread a reported one.
TEST(HostBreakdown, ThreadsAreReportedSeparately) {
  Planted p;
  const uint32_t bwd = p.thread("autograd");
  const uint32_t idle = p.thread("idle");
  p.range("ProfilerStep#3", 0, 100, 0, false);
  p.range("## forward ##", 0, 40, 0, false);
  p.range("autograd::engine::evaluate_function: AddmmBackward0", 40, 90, bwd);
  p.range("aten::mm", 200, 300, idle);
  const auto hosts = HostBreakdownIndex(p.store()).step(0, us(100), 5);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].thread, 0u);
  EXPECT_EQ(cat(hosts[0], HostCategory::kForward), us(40));
  EXPECT_EQ(cat(hosts[0], HostCategory::kOther), us(60));
  EXPECT_EQ(hosts[1].thread, bwd);
  EXPECT_EQ(hosts[1].name, "autograd");
  EXPECT_EQ(cat(hosts[1], HostCategory::kBackward), us(50));
  EXPECT_EQ(sum(hosts[1]), us(100));
}

// Overlapping (not nested) ranges of the same category still count once.
TEST(HostBreakdown, OverlappingRangesAreNotDoubleCounted) {
  Planted p;
  p.range("aten::item", 10, 30);
  p.range("aten::item", 20, 40);
  const auto hosts = HostBreakdownIndex(p.store()).step(0, us(50), 5);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(cat(hosts[0], HostCategory::kHostSync), us(30));
  EXPECT_EQ(sum(hosts[0]), us(50));
  const NamedTime* item = culprit(hosts[0], HostCategory::kHostSync, "aten::item");
  ASSERT_NE(item, nullptr);
  EXPECT_EQ(item->count, 2u);
}

TEST(HostBreakdown, AnalyzeFillsStepHostReports) {
  Planted p;
  p.step(0, 0, 100).step(1, 100, 200);
  p.range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 30, 0, false);
  p.range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 110, 0, false);
  const Report r = analyze(p.store());
  ASSERT_EQ(r.steps.size(), 2u);
  ASSERT_EQ(r.steps[0].host.size(), 1u);
  ASSERT_EQ(r.steps[1].host.size(), 1u);
  EXPECT_EQ(cat(r.steps[0].host[0], HostCategory::kDataloader), us(30));
  EXPECT_EQ(cat(r.steps[1].host[0], HostCategory::kDataloader), us(10));
  EXPECT_EQ(r.steps[1].host[0].wall_ns, r.steps[1].wall_ns);
}

// The identity holds on every real trace, on every step and thread.
TEST(HostBreakdown, SumsToWallOnEverySharedTrace) {
  GPUUTIL_REQUIRE_TRACES();
  size_t checked = 0;
  for (const auto& path : test::all_traces()) {
    SCOPED_TRACE(path);
    ImportResult imp = import_kineto_file(path);
    if (!imp.ok) continue;
    const Report r = analyze(imp.store);
    for (const auto& s : r.steps) {
      for (const auto& h : s.host) {
        EXPECT_EQ(h.wall_ns, s.wall_ns);
        EXPECT_EQ(sum(h), h.wall_ns);
        for (int64_t v : h.breakdown_ns) EXPECT_GE(v, 0);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 10u);
}

}  // namespace
}  // namespace gpuutil
