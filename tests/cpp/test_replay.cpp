// Real GPU traces replayed through the live path (tests/replay): each step's
// per-device breakdown_ns from the live Session must equal the offline
// analysis of the same trace exactly. The replay hands the collector the
// recorded timestamps (API records and device records through the faithful
// fake CUPTI, host ranges through the LibTorch hook's ring), so any
// difference is the live path's own: a record lost, late, pruned too early,
// a thread keyed twice, a step reported before its data arrived.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "replay.h"
#include "traces.h"

namespace gpuutil {
namespace {

// Every CUDA trace with steps in ../shared/traces (ROCm traces have no CUDA
// API names for the fake CUPTI to replay).
const char* const kCudaTracesWithSteps[] = {
    "hta_event_sync_a100.json.gz",
    "hta_nccl_a100_rank0.json.gz",
    "hta_sampled_rank0.json.gz",
    "hta_sampled_rank1.json.gz",
    "hta_train_v100_dataloader_nccl_rank1.json.gz",
    "hta_train_v100_ns_resolution.json.gz",
    "kineto_resnet50_nw4_v100.json.gz",
    "tracelens_h100_bert_small_inference.json.gz",
};

void expect_replay_equals_analyze(const std::string& path, int device_records, int64_t scale = 1) {
  ImportResult in = import_kineto_file(path);
  ASSERT_TRUE(in.ok) << in.error;
  const EventStore store = scale == 1 ? std::move(in.store) : replay::scaled(in.store, scale);
  const Report offline = analyze(store);
  replay::ReplayOptions o;
  o.device_records = device_records;
  const replay::ReplayResult r = replay::replay(store, o);
  ASSERT_EQ(r.error, "");
  // Calls CUPTI could not name when recording ("INVALID") are not replayed.
  EXPECT_LT(r.stats.api_unknown, r.stats.api_calls / 100 + 1);
  const replay::Comparison c = replay::compare(offline, r.steps);
  EXPECT_TRUE(c.problems.empty()) << c.problems.front();
  EXPECT_EQ(c.steps, int64_t(offline.steps.size()));
  for (const auto& b : c.buckets) {
    EXPECT_EQ(b.max_abs_ns, 0) << b.bucket << " differs by " << b.max_abs_ns << " ns in step " << b.step;
  }
  for (const auto& o2 : r.steps) {
    EXPECT_EQ(o2.report.diagnostics.count(Diag::cupti_records_late), 0u);
    EXPECT_EQ(o2.report.diagnostics.count(Diag::cupti_records_dropped), 0u);
    EXPECT_EQ(o2.report.diagnostics.count(Diag::cupti_completion_timeout), 0u);
    EXPECT_EQ(o2.report.diagnostics.count(Diag::torch_ranges_dropped), 0u);
    EXPECT_EQ(o2.report.diagnostics.count(Diag::session_events_dropped), 0u);
  }
}

class ReplayTrace : public ::testing::TestWithParam<const char*> {};

TEST_P(ReplayTrace, LiveStepsEqualOfflineAnalysisExactly) {
  GPUUTIL_REQUIRE_TRACES();
  expect_replay_equals_analyze(test::trace_path(GetParam()), 0);
}

INSTANTIATE_TEST_SUITE_P(SharedCudaTraces, ReplayTrace, ::testing::ValuesIn(kCudaTracesWithSteps),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string n = p.param;
                           n = n.substr(0, n.find('.'));
                           for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

TEST(Replay, DeviceRecordsWrittenAtCompletionGiveTheSameSteps) {
  GPUUTIL_REQUIRE_TRACES();
  for (const char* name : {"hta_train_v100_dataloader_nccl_rank1.json.gz", "hta_sampled_rank0.json.gz"}) {
    SCOPED_TRACE(name);
    expect_replay_equals_analyze(test::trace_path(name), 1);
  }
}

TEST(Replay, ALongTraceCompressedInTimeEqualsTheSameCompressionAnalysedOffline) {
  // 43 s of AlexNet with CUDA syncs (one whole-trace step), played 5x faster.
  GPUUTIL_REQUIRE_TRACES();
  expect_replay_equals_analyze(test::trace_path("hta_alexnet_a100_sync.json.gz"), 0, 5);
}

TEST(Replay, EveryCudaTraceWithStepsIsInTheList) {
  GPUUTIL_REQUIRE_TRACES();
  for (const std::string& path : test::all_traces()) {
    ImportResult in = import_kineto_file(path);
    if (!in.ok || in.store.activities.empty() || in.store.steps_source == "whole_trace" ||
        in.store.diagnostics.count(Diag::rocm_trace) > 0) {
      continue;
    }
    const std::string name = std::filesystem::path(path).filename().string();
    bool listed = false;
    for (const char* n : kCudaTracesWithSteps) listed = listed || name == n;
    EXPECT_TRUE(listed) << name << " is a CUDA trace with steps: add it to kCudaTracesWithSteps";
  }
}

}  // namespace
}  // namespace gpuutil
