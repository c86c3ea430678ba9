// Run totals of a live session (what prof.summary() reports): exact sums
// over every reported step for devices, host threads and findings; steps
// closed in one call (automatic steps); standing diagnostics counted once in
// every report; the JSON shape prof.summary() reads.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpuutil/range_classify.h"
#include "gpuutil/report_json.h"
#include "gpuutil/run_totals.h"
#include "gpuutil/session.h"
#include "session_events.h"

namespace gpuutil {
namespace {

using testing::kernel;
using testing::range;

// Step i: [1000 i, 1000 i + 1000); a 300 ns DataLoader wait, then a kernel
// of 500 ns; 200 ns of nothing at the end.
void planted_step(Session& s, uint32_t thread, int step) {
  const int64_t t0 = step * 1000;
  s.add_range(range(s, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0, t0 + 300, thread, false));
  s.add_activity(kernel(s, t0 + 400, t0 + 900));
  s.close_step(step, t0, t0 + 1000);
}

TEST(RunTotals, SumsEveryReportedStepExactly) {
  Session s(SessionOptions{});
  const uint32_t t = s.thread_index(1, 7, "main");
  for (int step = 0; step < 5; ++step) planted_step(s, t, step);
  const auto out = s.collect();  // nothing complete yet
  EXPECT_TRUE(out.empty());
  s.mark_complete_until(5000);
  ASSERT_EQ(s.collect().size(), 5u);

  const RunTotals totals = s.run_totals();
  EXPECT_EQ(totals.steps, 5u);
  EXPECT_EQ(totals.steps_wall_ns, 5000);
  ASSERT_EQ(totals.devices.size(), 1u);
  const DeviceTotals& d = totals.devices.begin()->second;
  EXPECT_EQ(d.wall_ns, 5000);
  EXPECT_EQ(d.breakdown.compute_ns, 2500);
  EXPECT_EQ(d.breakdown.idle_ns[static_cast<size_t>(IdleCause::kDataloader)], 1500);
  EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);  // the identity survives summing
  ASSERT_EQ(totals.threads.size(), 1u);
  const auto& [key, h] = *totals.threads.begin();
  EXPECT_EQ(key.second, 7);
  EXPECT_EQ(h.name, "main");
  EXPECT_EQ(h.steps, 5u);
  EXPECT_EQ(h.wall_ns, 5000);
  int64_t host_sum = 0;
  for (int64_t v : h.breakdown_ns) host_sum += v;
  EXPECT_EQ(host_sum, h.wall_ns);
  EXPECT_EQ(h.breakdown_ns[static_cast<size_t>(HostCategory::kDataloader)], 1500);
  // The DataLoader finding appears in every step; its recoverable time sums.
  ASSERT_EQ(totals.findings.count("idle_dataloader"), 1u);
  EXPECT_EQ(totals.findings.at("idle_dataloader").steps, 5u);
  EXPECT_GT(totals.findings.at("idle_dataloader").recoverable_ns, 0);
}

TEST(RunTotals, JsonHasTheShapeSummaryReads) {
  Session s(SessionOptions{});
  const uint32_t t = s.thread_index(1, 7, "main");
  for (int step = 0; step < 3; ++step) planted_step(s, t, step);
  s.mark_complete_until(3000);
  s.collect();
  const auto j = nlohmann::json::parse(run_totals_to_json(s.run_totals()));
  EXPECT_EQ(j["steps"], 3);
  EXPECT_EQ(j["steps_wall_ns"], 3000);
  ASSERT_EQ(j["devices"].size(), 1u);
  int64_t sum = 0;
  for (const auto& [k, v] : j["devices"][0]["breakdown_ns"].items()) sum += v.get<int64_t>();
  EXPECT_EQ(sum, j["devices"][0]["wall_ns"].get<int64_t>());
  EXPECT_DOUBLE_EQ(j["devices"][0]["busy_pct"].get<double>(), 50.0);
  ASSERT_EQ(j["host"].size(), 1u);
  EXPECT_EQ(j["host"][0]["tid"], 7);
  EXPECT_EQ(j["host"][0]["breakdown_ns"]["dataloader"], 900);
  ASSERT_FALSE(j["findings"].empty());
  EXPECT_EQ(j["findings"][0]["steps"], 3);
}

TEST(RunTotals, EmptySessionHasNullRatiosNotNaN) {
  RunTotals totals;
  Report r;
  StepReport step;
  DeviceStepReport d;  // zero wall: busy_pct must be null
  step.devices.push_back(d);
  r.steps.push_back(step);
  totals.add(r);
  const auto j = nlohmann::json::parse(run_totals_to_json(totals));
  EXPECT_TRUE(j["devices"][0]["busy_pct"].is_null());
}

TEST(Session, CloseStepRecordsAWholeStepAndClosesAnOpenOne) {
  Session s(SessionOptions{});
  s.begin_step(0, 0);
  s.close_step(1, 400, 1000);  // closes step 0 at 400 first
  s.mark_complete_until(1000);
  const auto out = s.collect();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].report.steps[0].wall_ns, 400);
  EXPECT_EQ(out[1].report.steps[0].step, 1);
  EXPECT_EQ(out[1].report.steps[0].wall_ns, 600);
  EXPECT_FALSE(s.step_open());
}

TEST(Session, StandingDiagnosticIsCountedOnceInEveryReport) {
  Session s(SessionOptions{});
  s.add_standing_diagnostic(Diag::gpu_collection_off, "CUPTI: no driver");
  s.add_standing_diagnostic(Diag::gpu_collection_off, "CUPTI: no driver");  // a restart: not twice
  for (int step = 0; step < 3; ++step) s.close_step(step, step * 10, step * 10 + 10);
  s.mark_complete_until(30);
  const auto out = s.collect();
  ASSERT_EQ(out.size(), 3u);
  for (const auto& o : out) {
    EXPECT_EQ(o.report.diagnostics.count(Diag::gpu_collection_off), 1u);
    EXPECT_EQ(o.report.diagnostics.example(Diag::gpu_collection_off), "CUPTI: no driver");
  }
}

}  // namespace
}  // namespace gpuutil
