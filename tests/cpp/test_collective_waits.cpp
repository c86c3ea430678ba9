// The host breakdown of a training thread that waits at the end of backward
// for the gradient all-reduces DDP's reducer issued (collective_waits.h):
// planted from a measured step of a 2-rank DDP job over gloo (three
// buckets, rank 1 slowed by 32 ms per step in its DataLoader; the fast
// rank's timeline as torch.profiler recorded it, in us).
#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "analysis/collective_waits.h"
#include "analysis/host_breakdown.h"
#include "planted.h"

namespace gpuutil {
namespace {

using test::Planted;
using test::us;

int64_t cat(const HostThreadStepReport& h, HostCategory c) { return h.breakdown_ns[static_cast<size_t>(c)]; }

const NamedTime* culprit(const HostThreadStepReport& h, HostCategory c, const std::string& name) {
  for (const auto& n : h.culprits[static_cast<size_t>(c)]) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

// The fast rank's step: buckets 0 and 1 run at once on gloo's two worker
// threads and wait for the slow rank until ~41 ms; bucket 2 was issued at
// 7.9 ms but queued until worker 1 finished bucket 0 (40.974 -> 40.996 ms).
// The main thread's backward (6.3 -> 44.2 ms) computes until 7.9 ms and
// then blocks in the reducer.
Planted fast_rank_step(bool with_enqueue_ranges) {
  Planted p;
  const uint32_t w1 = p.thread("pt_gloo_runloop");
  const uint32_t w2 = p.thread("pt_gloo_runloop");
  p.step(0, 0, 44'900);
  p.range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 5'036, 0, false);
  p.range("DistributedDataParallel.forward", 5'083, 6'025, 0, false);
  p.range("## backward ##", 6'300, 44'200, 0, false);
  if (with_enqueue_ranges) {  // the detail tier: the reducer's c10d::allreduce_ calls
    p.range("c10d::allreduce_", 6'979, 7'151);
    p.range("c10d::allreduce_", 7'585, 7'684);
    p.range("c10d::allreduce_", 7'890, 7'903);
  }
  p.range("gloo:all_reduce", 7'038, 40'974, w1, false);
  p.range("gloo:all_reduce", 7'614, 41'592, w2, false);
  p.range("gloo:all_reduce", 40'996, 44'969, w1, false);
  p.range("Optimizer.step#SGD.step", 44'284, 44'780, 0, false);
  return p;
}

TEST(HostBreakdownCollectiveWait, DdpReducerWaitAtTheEndOfBackwardIsCollectiveNotBackward) {
  Planted p = fast_rank_step(/*with_enqueue_ranges=*/false);
  const HostBreakdownIndex index(p.store());
  const auto hosts = index.step(0, us(44'900), 5);
  ASSERT_EQ(hosts.size(), 3u);
  const auto& main = hosts[0];
  EXPECT_EQ(std::accumulate(main.breakdown_ns.begin(), main.breakdown_ns.end(), int64_t{0}), main.wall_ns);
  // Without enqueue ranges the thread's last issue is the latest collective
  // that started on a free worker: bucket 1 at 7.614 ms (bucket 2 queued).
  EXPECT_EQ(cat(main, HostCategory::kCollective), us(44'200 - 7'614));
  EXPECT_EQ(cat(main, HostCategory::kBackward), us(7'614 - 6'300));
  const NamedTime* c = culprit(main, HostCategory::kCollective, "gloo:all_reduce");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ns, us(44'200 - 7'614));
  // The worker threads are unchanged: in their collectives.
  EXPECT_EQ(cat(hosts[1], HostCategory::kCollective), us((40'974 - 7'038) + (44'900 - 40'996)));
  EXPECT_EQ(cat(hosts[2], HostCategory::kCollective), us(41'592 - 7'614));
}

TEST(HostBreakdownCollectiveWait, TheThreadsLastEnqueueRangeStartsTheWaitWhenRecorded) {
  Planted p = fast_rank_step(/*with_enqueue_ranges=*/true);
  const HostBreakdownIndex index(p.store());
  const auto hosts = index.step(0, us(44'900), 5);
  const auto& main = hosts[0];
  // Collective: the three enqueue calls and the wait from the last one's
  // end (7.903 ms) on.
  EXPECT_EQ(cat(main, HostCategory::kCollective), us((7'151 - 6'979) + (7'684 - 7'585) + (44'200 - 7'890)));
  EXPECT_EQ(cat(main, HostCategory::kBackward), us(44'200 - 6'300) - cat(main, HostCategory::kCollective));
}

TEST(HostBreakdownCollectiveWait, CollectivesThatStartedBeforeBackwardOrOnTheSameThreadAreNoWait) {
  Planted p;
  const uint32_t w1 = p.thread("pt_gloo_runloop");
  p.step(0, 0, 100);
  p.range("gloo:broadcast", 5, 60, w1, false);  // issued before backward began
  p.range("## backward ##", 10, 80, 0, false);
  p.range("gloo:all_reduce", 20, 30, 0, false);  // the thread's own (a synchronous collective)
  const HostBreakdownIndex index(p.store());
  const auto hosts = index.step(0, us(100), 5);
  const auto& main = hosts[0];
  EXPECT_EQ(cat(main, HostCategory::kCollective), us(10));
  EXPECT_EQ(cat(main, HostCategory::kBackward), us(60));
  EXPECT_TRUE(collective_waits(p.store()).empty());
}

}  // namespace
}  // namespace gpuutil
