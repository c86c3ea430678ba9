// PreparedStore::analyze_window, the live session's batch analysis: one set
// of indexes over the pending events, one report per step. Its contract is
// to give exactly what analyze() gives for the same store with steps = {w};
// these tests pin that byte for byte (report JSON) on a planted timeline
// with the edge cases (an open capture window, a step past every event, a
// step with no events) and on every real trace.
#include <gtest/gtest.h>

#include <algorithm>

#include "analysis/windows.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report_json.h"
#include "planted.h"
#include "traces.h"

namespace gpuutil {
namespace {

using test::Planted;

// analyze() of `store` with steps = {w} (store.steps is restored).
std::string alone(EventStore& store, const StepWindow& w, const AnalysisOptions& o) {
  std::vector<StepWindow> saved = std::move(store.steps);
  store.steps = {w};
  std::string json = report_to_json(analyze(store, o));
  store.steps = std::move(saved);
  return json;
}

// Every window of `windows` through one PreparedStore equals analyze() alone.
void expect_same_as_alone(EventStore& store, const std::vector<StepWindow>& windows, const AnalysisOptions& o = {}) {
  std::vector<std::string> batch;
  {
    PreparedStore prepared(store, windows);
    for (const StepWindow& w : windows) batch.push_back(report_to_json(prepared.analyze_window(w, o)));
  }
  for (size_t i = 0; i < windows.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(windows[i].step));
    EXPECT_EQ(batch[i], alone(store, windows[i], o));
  }
}

TEST(AnalyzeWindow, EachStepOfABatchEqualsThatStepAnalysedAlone) {
  Planted p;
  p.step(0, 0, 100).step(1, 100, 200).step(2, 200, 300).step(3, 300, 400);
  p.kernel("gemm", 10, 60, 5).kernel("gemm", 120, 150, 110).kernel("ncclKernel_AllReduce", 150, 190, 115);
  p.kernel("gemm", 320, 330, 250);  // launched a step early
  p.api("cudaDeviceSynchronize", 160, 195);
  p.range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 60, 100, 0, false);
  p.range("Optimizer.step#AdamW.step", 195, 205, 0, false);
  p.range("## backward ##", 150, 190, 0, false);
  p.api("cudaStreamBeginCapture", 210, 211);  // still capturing when the trace ends
  EventStore& s = p.store();
  s.steps_source = "user";
  std::vector<StepWindow> windows = s.steps;
  windows.push_back({4, 400, 900'000});  // past every event
  windows.push_back({5, 900'000, 900'500});  // no events at all
  s.steps.clear();                            // a live session's store holds no steps
  AnalysisOptions o;
  o.flops_per_step = 1e9;
  expect_same_as_alone(s, windows, o);
}

TEST(AnalyzeWindow, EveryRealTraceStepEqualsThatStepAnalysedAlone) {
  GPUUTIL_REQUIRE_TRACES();
  for (const auto& path : test::all_traces()) {
    SCOPED_TRACE(path);
    ImportResult imp = import_kineto_file(path);
    ASSERT_TRUE(imp.ok) << imp.error;
    EventStore& s = imp.store;
    std::vector<StepWindow> windows = analysis_windows(s);
    if (windows.size() > 6) {  // the first three and the last three steps
      windows.erase(windows.begin() + 3, windows.end() - 3);
    }
    s.steps.clear();
    expect_same_as_alone(s, windows);
  }
}

}  // namespace
}  // namespace gpuutil
