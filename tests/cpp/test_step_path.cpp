// The live step path (gpuutil/step_path.h): range slots classified once,
// automatic steps closed back to back, and when the Python side is due at a
// boundary (report batches by interval, per-step work by wake_in); work
// between automatic steps that is not training (evaluation, checkpoints)
// carved out as outside steps and named, the time after the last step
// counted, one step per iteration with several optimizers, and steps that
// compiled kept out of the run's totals.
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

int64_t named(const RunTotals& t, OutsideKind k) { return t.outside_named_ns[static_cast<size_t>(k)]; }

std::vector<std::pair<int64_t, int64_t>> windows(Session& s, int64_t until_ns) {
  s.mark_complete_until(until_ns);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& o : s.collect()) out.emplace_back(o.report.steps.at(0).start_ns, o.report.steps.at(0).end_ns);
  return out;
}

// A session and its step path, the automatic sequence started at 0.
class StepPathCarve : public ::testing::Test {
 protected:
  StepPathCarve() { p.restart(0); }
  Session s{SessionOptions{}};
  StepPath p{s, 0};
};

// The issue's loop in miniature: a step, then 30 forwards under no_grad, a
// torch.save, and the next step's training forward and backward.
TEST_F(StepPathCarve, EvaluationAndCheckpointBetweenStepsAreCarvedOutAndNamed) {
  p.note_forward(ForwardKind::kTraining, 0, 10);
  p.note_backward(10);
  p.close_auto_step(30);
  for (int64_t i = 0; i < 30; ++i) p.note_forward(ForwardKind::kNoGrad, 40 + 10 * i, 45 + 10 * i);  // last ends at 335
  p.note_outside(OutsideKind::kCheckpoint, 400, 450);
  p.note_forward(ForwardKind::kTraining, 460, 470);
  p.note_backward(470);
  p.close_auto_step(500);
  EXPECT_EQ(windows(s, 500), (std::vector<std::pair<int64_t, int64_t>>{{0, 30}, {450, 500}}));
  EXPECT_EQ(s.outside_steps_ns(), 420);
  const RunTotals t = s.run_totals();
  EXPECT_EQ(t.steps_wall_ns, 80);
  EXPECT_EQ(t.outside_steps_ns, 420);
  EXPECT_EQ(named(t, OutsideKind::kEvaluation), 305);  // from the boundary through the last forward
  EXPECT_EQ(named(t, OutsideKind::kCheckpoint), 50);
  EXPECT_EQ(named(t, OutsideKind::kOther), 65);  // between the evaluation and the save
}

TEST_F(StepPathCarve, TheTimeAfterTheLastStepIsOutsideStepsNamedByWhatRan) {
  p.finish_auto(50);  // no step yet: nothing to add
  EXPECT_EQ(s.outside_steps_ns(), 0);
  p.note_backward(5);
  p.close_auto_step(100);
  p.note_forward(ForwardKind::kNoGrad, 110, 200);
  p.note_forward(ForwardKind::kNoGrad, 210, 300);
  p.note_outside(OutsideKind::kCheckpoint, 300, 350);
  p.finish_auto(400);
  EXPECT_EQ(windows(s, 400), (std::vector<std::pair<int64_t, int64_t>>{{0, 100}}));
  const RunTotals t = s.run_totals();
  EXPECT_EQ(t.outside_steps_ns, 300);
  EXPECT_EQ(named(t, OutsideKind::kEvaluation), 200);
  EXPECT_EQ(named(t, OutsideKind::kCheckpoint), 50);
  EXPECT_EQ(named(t, OutsideKind::kOther), 50);
  p.finish_auto(500);  // again: only the time since the previous call (nothing noted in it)
  EXPECT_EQ(s.outside_steps_ns(), 400);
}

TEST_F(StepPathCarve, WorkBeforeTheFirstStepIsOutsideStepsAndStartUpIsOther) {
  p.note_forward(ForwardKind::kNoGrad, 100, 150);  // a sanity-check evaluation
  p.note_forward(ForwardKind::kNoGrad, 160, 200);
  p.note_forward(ForwardKind::kTraining, 210, 250);
  p.close_auto_step(300);
  EXPECT_EQ(windows(s, 300), (std::vector<std::pair<int64_t, int64_t>>{{200, 300}}));
  const RunTotals t = s.run_totals();
  EXPECT_EQ(t.outside_steps_ns, 200);
  EXPECT_EQ(named(t, OutsideKind::kEvaluation), 100);
  EXPECT_EQ(named(t, OutsideKind::kOther), 100);  // start-up before it
}

TEST_F(StepPathCarve, OneNoGradForwardBeforeTheTrainingForwardStaysInTheStep) {
  // Distillation: the teacher's forward under no_grad, then the student's.
  p.close_auto_step(10);
  p.note_forward(ForwardKind::kNoGrad, 20, 40);
  p.note_forward(ForwardKind::kTraining, 40, 60);
  p.note_backward(60);
  p.close_auto_step(100);
  EXPECT_EQ(windows(s, 100), (std::vector<std::pair<int64_t, int64_t>>{{0, 10}, {10, 100}}));
  EXPECT_EQ(s.outside_steps_ns(), 0);
}

TEST_F(StepPathCarve, EvalModeForwardsRightBeforeABackwardAreTraining) {
  // Training with frozen batch norm: model.eval(), grad on, then backward.
  p.close_auto_step(10);
  p.note_forward(ForwardKind::kEvalMode, 20, 40);  // two outermost modules per step
  p.note_forward(ForwardKind::kEvalMode, 40, 60);
  p.note_backward(60);
  p.close_auto_step(100);
  EXPECT_EQ(windows(s, 100).back(), std::make_pair(int64_t(10), int64_t(100)));
  EXPECT_EQ(s.outside_steps_ns(), 0);
  // An evaluation loop that forgot no_grad, followed by a training forward, is evaluation.
  p.note_forward(ForwardKind::kEvalMode, 110, 120);
  p.note_forward(ForwardKind::kEvalMode, 130, 140);
  p.note_forward(ForwardKind::kTraining, 150, 160);
  p.note_backward(160);
  p.close_auto_step(200);
  EXPECT_EQ(windows(s, 200).back(), std::make_pair(int64_t(140), int64_t(200)));
  EXPECT_EQ(named(s.run_totals(), OutsideKind::kEvaluation), 40);
}

TEST_F(StepPathCarve, WorkAfterTrainingBeganStaysInTheStep) {
  p.close_auto_step(10);
  p.note_forward(ForwardKind::kTraining, 20, 30);
  p.note_forward(ForwardKind::kNoGrad, 30, 40);  // metrics under no_grad inside the step
  p.note_forward(ForwardKind::kNoGrad, 40, 50);
  p.note_outside(OutsideKind::kCheckpoint, 50, 60);
  p.close_auto_step(100);
  EXPECT_EQ(windows(s, 100).back(), std::make_pair(int64_t(10), int64_t(100)));
  EXPECT_EQ(s.outside_steps_ns(), 0);
}

TEST_F(StepPathCarve, AFrameworksMarksOwnTheTimeSinceThePreviousMark) {
  // Hugging Face: on_evaluate after the evaluation loop, then the weights'
  // write (no torch.save), torch.save of the optimizer, on_save.
  p.close_auto_step(100);
  p.note_forward(ForwardKind::kNoGrad, 120, 150);
  p.mark_outside(OutsideKind::kEvaluation, 160);
  p.note_outside(OutsideKind::kCheckpoint, 250, 280);
  p.mark_outside(OutsideKind::kCheckpoint, 300);
  p.note_forward(ForwardKind::kTraining, 320, 330);
  p.close_auto_step(400);
  EXPECT_EQ(windows(s, 400).back(), std::make_pair(int64_t(300), int64_t(400)));
  const RunTotals t = s.run_totals();
  EXPECT_EQ(named(t, OutsideKind::kEvaluation), 60);
  EXPECT_EQ(named(t, OutsideKind::kCheckpoint), 140);
  EXPECT_EQ(named(t, OutsideKind::kOther), 0);
}

TEST_F(StepPathCarve, ManyPiecesMergeIntoTheTableWithoutLosingTime) {
  p.close_auto_step(10);
  int64_t t = 10;
  for (int i = 0; i < 3 * StepPath::kMaxPieces; ++i, t += 20) {
    if (i % 2 == 0) {
      p.note_forward(ForwardKind::kNoGrad, t, t + 10);
    } else {
      p.note_outside(OutsideKind::kCheckpoint, t, t + 10);
    }
  }
  p.note_forward(ForwardKind::kTraining, t, t + 10);
  p.close_auto_step(t + 50);
  EXPECT_EQ(windows(s, t + 50).back(), std::make_pair(t - 10, t + 50));
  const RunTotals r = s.run_totals();
  EXPECT_EQ(r.outside_steps_ns, t - 20);
  EXPECT_GT(named(r, OutsideKind::kEvaluation), 0);
  EXPECT_GT(named(r, OutsideKind::kCheckpoint), 0);
  EXPECT_LE(named(r, OutsideKind::kEvaluation) + named(r, OutsideKind::kCheckpoint), r.outside_steps_ns);
}

TEST_F(StepPathCarve, TwoOptimizersPerIterationMakeOneStepPerIteration) {
  const uintptr_t d = 1, g = 2;
  // The first iteration: D ends a step (nothing known yet), G is new: it ends the iteration.
  EXPECT_EQ(p.optimizer_stepped(d), OptimizerStep::kCloses);
  EXPECT_EQ(p.optimizer_stepped(g), OptimizerStep::kCloses);
  EXPECT_EQ(p.optimizer_stepped(d), OptimizerStep::kFirstSkip);
  EXPECT_EQ(p.optimizer_stepped(g), OptimizerStep::kCloses);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(p.optimizer_stepped(d), OptimizerStep::kSkipped);
    EXPECT_EQ(p.optimizer_stepped(g), OptimizerStep::kCloses);
  }
  EXPECT_EQ(p.optimizers_seen(), 2);
}

TEST_F(StepPathCarve, ACriticSteppingFiveTimesPerGeneratorStepIsOneIteration) {
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p.optimizer_stepped(7), OptimizerStep::kCloses);
  EXPECT_EQ(p.optimizer_stepped(9), OptimizerStep::kCloses);
  int closes = 0;
  for (int it = 0; it < 10; ++it) {
    for (int i = 0; i < 5; ++i) closes += p.optimizer_stepped(7) == OptimizerStep::kCloses;
    closes += p.optimizer_stepped(9) == OptimizerStep::kCloses;
  }
  EXPECT_EQ(closes, 10);
}

TEST_F(StepPathCarve, OptimizersAtUnrelatedRatesGoBackToOneStepPerOptimizerStep) {
  EXPECT_EQ(p.optimizer_stepped(1), OptimizerStep::kCloses);
  EXPECT_EQ(p.optimizer_stepped(2), OptimizerStep::kCloses);  // a second one, once
  int skipped = 0;
  for (int i = 0; i < StepPath::kMaxSkippedSteps; ++i) skipped += p.optimizer_stepped(1) != OptimizerStep::kCloses;
  EXPECT_EQ(skipped, StepPath::kMaxSkippedSteps);
  // Past the bound every optimizer step ends a step again, for good.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p.optimizer_stepped(1), OptimizerStep::kCloses);
  EXPECT_EQ(p.optimizer_stepped(2), OptimizerStep::kCloses);
  EXPECT_EQ(p.optimizer_stepped(3), OptimizerStep::kCloses);
  EXPECT_EQ(p.optimizer_stepped(1), OptimizerStep::kCloses);
}

TEST_F(StepPathCarve, AStepThatCompiledIsReportedButKeptOutOfTheRunTotals) {
  const uint32_t th = s.thread_index(1, 1, "main");
  s.begin_interval(Diag::compile_warmup, 20, "torch.compile: frame 0/0");
  p.add(p.slot("nn.Module: Net", false), 10, 900, th);
  s.end_interval(Diag::compile_warmup, 880);
  p.close_auto_step(1000);
  for (int64_t t = 1100; t <= 1300; t += 100) {
    p.add(p.slot("nn.Module: Net", false), t - 90, t - 50, th);
    p.close_auto_step(t);
  }
  s.mark_complete_until(1300);
  const auto out = s.collect();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(out[0].report.steps[0].compile_warmup);
  EXPECT_NE(out[0].json.find("\"compile_warmup\":true"), std::string::npos);
  for (size_t i = 1; i < 4; ++i) EXPECT_FALSE(out[i].report.steps[0].compile_warmup);
  const RunTotals t = s.run_totals();
  EXPECT_EQ(t.steps, 3u);
  EXPECT_EQ(t.steps_wall_ns, 300);
  EXPECT_EQ(t.compile_warmup_steps, 1u);
  EXPECT_EQ(t.outside_steps_ns, 1000);
  EXPECT_EQ(named(t, OutsideKind::kCompileWarmup), 1000);
  int64_t forward = 0;
  for (const auto& [key, h] : t.threads) forward += h.breakdown_ns[static_cast<size_t>(HostCategory::kForward)];
  EXPECT_EQ(forward, 120);  // the warm-up's 890 ns of forward are not in the run's shares
}

}  // namespace
}  // namespace gpuutil
