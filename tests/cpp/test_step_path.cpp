// The live step path (gpuutil/step_path.h): range slots classified once,
// automatic steps closed back to back, and when the Python side is due at a
// boundary (report batches by interval, per-step work by wake_in).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpuutil/session.h"
#include "gpuutil/step_path.h"

namespace gpuutil {
namespace {

const HostThreadStepReport& only_thread(const StepOutput& o) {
  EXPECT_EQ(o.report.steps.size(), 1u);
  EXPECT_EQ(o.report.steps[0].host.size(), 1u);
  return o.report.steps[0].host[0];
}

TEST(StepPath, SlotsAreClassifiedOnceAndReusedForTheSameName) {
  Session s(SessionOptions{});
  StepPath p(s, 0);
  const uint32_t fwd = p.slot("nn.Module: Net", false);
  EXPECT_EQ(p.slot("nn.Module: Net", false), fwd);
  EXPECT_NE(p.slot("aten::item", true), fwd);
  EXPECT_NE(p.slot("aten::item", true), p.slot("aten::item", false));  // is_op changes the category
  EXPECT_EQ(p.slot_name(fwd), "nn.Module: Net");
  EXPECT_NE(fwd, StepPath::kOverflowSlot);
}

TEST(StepPath, RangesFromSlotsLandInTheirHostCategoriesExactly) {
  Session s(SessionOptions{});
  StepPath p(s, 0);
  const uint32_t t = s.thread_index(1, 1, "main");
  p.restart(1000);
  p.add(p.slot("nn.Module: Net", false), 1000, 1300, t);
  p.add(p.slot("## backward ##", false), 1300, 1700, t);
  p.add(p.slot("Optimizer.step#SGD.step", false), 1700, 1900, t);
  p.add(p.slot("aten::item", true), 1900, 1950, t);
  EXPECT_EQ(p.close_auto_step(2000), BoundaryDue::kReport);  // interval 0: every boundary
  s.mark_complete_until(2000);
  const auto out = s.collect();
  ASSERT_EQ(out.size(), 1u);
  const auto& h = only_thread(out[0]);
  EXPECT_EQ(out[0].report.steps[0].step, 0);
  EXPECT_EQ(h.wall_ns, 1000);
  EXPECT_EQ(h.breakdown_ns[static_cast<size_t>(HostCategory::kForward)], 300);
  EXPECT_EQ(h.breakdown_ns[static_cast<size_t>(HostCategory::kBackward)], 400);
  EXPECT_EQ(h.breakdown_ns[static_cast<size_t>(HostCategory::kOptimizer)], 200);
  EXPECT_EQ(h.breakdown_ns[static_cast<size_t>(HostCategory::kHostSync)], 50);
  EXPECT_EQ(h.breakdown_ns[static_cast<size_t>(HostCategory::kOther)], 50);
  int64_t sum = 0;
  for (int64_t ns : h.breakdown_ns) sum += ns;
  EXPECT_EQ(sum, h.wall_ns);
}

TEST(StepPath, AutomaticStepsAreContiguousAndNumberedInOrder) {
  Session s(SessionOptions{});
  StepPath p(s, 0);
  p.restart(100);
  p.set_next_step(5);
  p.close_auto_step(250);
  p.close_auto_step(400);
  p.close_auto_step(1000);
  EXPECT_EQ(p.next_step(), 8);
  EXPECT_EQ(p.boundaries(), 3);
  EXPECT_EQ(p.last_boundary_ns(), 1000);
  EXPECT_EQ(p.prev_boundary_ns(), 400);
  s.mark_complete_until(1000);
  const auto out = s.collect();
  ASSERT_EQ(out.size(), 3u);
  const int64_t starts[] = {100, 250, 400}, ends[] = {250, 400, 1000};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].report.steps[0].step, static_cast<int64_t>(5 + i));
    EXPECT_EQ(out[i].report.steps[0].start_ns, starts[i]);
    EXPECT_EQ(out[i].report.steps[0].end_ns, ends[i]);
  }
  EXPECT_EQ(s.outside_steps_ns(), 0);
}

TEST(StepPath, PrevBoundaryIsFarInThePastBeforeTwoBoundaries) {
  Session s(SessionOptions{});
  StepPath p(s, 0);
  EXPECT_EQ(p.prev_boundary_ns(), StepPath::kNoBoundaryNs);
  p.close_auto_step(10);
  EXPECT_EQ(p.prev_boundary_ns(), StepPath::kNoBoundaryNs);
  p.close_auto_step(20);
  EXPECT_EQ(p.prev_boundary_ns(), 10);
}

TEST(StepPath, AReportIsDueOncePerIntervalAndPerStepWorkOnlyWhenWoken) {
  Session s(SessionOptions{});
  StepPath p(s, 1000);
  p.restart(0);
  // The first boundary reports (nothing was reported yet).
  EXPECT_EQ(p.close_auto_step(5000), BoundaryDue::kReport);
  p.wake_in(3);
  EXPECT_EQ(p.close_auto_step(5100), BoundaryDue::kNothing);
  EXPECT_EQ(p.close_auto_step(5200), BoundaryDue::kNothing);
  EXPECT_EQ(p.close_auto_step(5300), BoundaryDue::kPerStep);  // the third boundary after wake_in(3)
  EXPECT_EQ(p.close_auto_step(5400), BoundaryDue::kPerStep);  // not re-armed: due at every boundary
  p.wake_in(100);
  EXPECT_EQ(p.close_auto_step(5999), BoundaryDue::kNothing);
  EXPECT_EQ(p.close_auto_step(6000), BoundaryDue::kReport);  // 1000 ns after the last report
  EXPECT_EQ(p.close_auto_step(6500), BoundaryDue::kNothing);
  p.mark_reported(6600);  // flush() reported meanwhile
  EXPECT_EQ(p.close_auto_step(7000), BoundaryDue::kNothing);
  EXPECT_EQ(p.close_auto_step(7600), BoundaryDue::kReport);
  p.wake_in(0);  // below 1 counts as 1
  EXPECT_EQ(p.close_auto_step(7700), BoundaryDue::kPerStep);
}

TEST(StepPath, BoundariesMarkStepsUnreportedUntilTheCallerSaysOtherwise) {
  Session s(SessionOptions{});
  StepPath p(s, 1'000'000);
  EXPECT_FALSE(p.unreported());
  p.close_auto_step(10);
  EXPECT_TRUE(p.unreported());
  p.set_unreported(false);
  s.begin_step(0, 20);
  EXPECT_EQ(p.end_user_step(30), BoundaryDue::kPerStep);  // never re-armed: due at every boundary
  EXPECT_TRUE(p.unreported());
  EXPECT_FALSE(s.step_open());
}

TEST(StepPath, NamesBeyondTheTableShareTheOverflowSlotAndNothingIsLost) {
  Session s(SessionOptions{});
  StepPath p(s, 0);
  const uint32_t t = s.thread_index(1, 1, "main");
  uint32_t last = 0;
  for (uint32_t i = 0; i < StepPath::kMaxSlots + 10; ++i) last = p.slot("range " + std::to_string(i), false);
  EXPECT_EQ(last, StepPath::kOverflowSlot);
  EXPECT_EQ(p.slot("range 1", false), 2u);  // names already in the table keep their slot
  p.add(last, 0, 10, t);
  p.add(123456, 10, 20, t);  // a slot never handed out: counted as the overflow slot, not read out of bounds
  p.close_auto_step(20);
  s.mark_complete_until(20);
  const auto out = s.collect();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].report.sources.size(), 1u);
  EXPECT_EQ(out[0].report.sources[0].ranges, 2u);  // both ranges reached the session
  EXPECT_EQ(p.slot_name(123456), "gpuutil: too many range names");
}

}  // namespace
}  // namespace gpuutil
