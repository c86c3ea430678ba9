// One rank's offline analysis (gpuutil/analyze_rank.h), the fan-out's unit
// of work: the batches of ranks analysed one by one, fed to a
// ClusterAssembler, give exactly the cross-rank view of the same traces
// analysed together; a document in memory gives what its file gives; the
// rank can be overridden; the summary carries no per-step detail; an
// unreadable input is one line naming it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gpuutil/analyze_rank.h"
#include "gpuutil/analyze_traces.h"
#include "gpuutil/cluster.h"
#include "traces.h"

namespace gpuutil {
namespace {

const char* kRank0 = "hta_sampled_rank0.json.gz";
const char* kRank1 = "hta_sampled_rank1.json.gz";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST(AnalyzeRank, BatchesOfRanksAnalysedAloneGiveTheCombinedAnalysisClusterView) {
  GPUUTIL_REQUIRE_TRACES();
  const std::vector<std::string> paths{test::trace_path(kRank0), test::trace_path(kRank1)};
  const AnalyzeTracesResult combined =
      analyze_traces({TraceInput{paths[0], nullptr}, TraceInput{paths[1], nullptr}}, AnalysisOptions{});
  ASSERT_TRUE(combined.ok) << combined.error;
  const nlohmann::json report = nlohmann::json::parse(combined.json);
  ASSERT_TRUE(report["summary"].contains("ranks"));

  ClusterOptions options;
  options.world_size = 2;
  options.window_steps = size_t{1} << 40;  // every step kept, as the offline view does
  ClusterAssembler assembler(options);
  for (auto it = paths.rbegin(); it != paths.rend(); ++it) {  // arrival order does not matter
    const RankAnalysis one = analyze_rank(TraceInput{*it, nullptr}, AnalysisOptions{});
    ASSERT_TRUE(one.ok) << one.error;
    EXPECT_GT(one.steps, 0u);
    ASSERT_EQ(ingest_rank_batch_json(assembler, one.batch_json), "");
  }
  assembler.advance(/*final=*/true);
  const nlohmann::json view = nlohmann::json::parse(cluster_view_to_json(assembler.view()));
  EXPECT_EQ(view["ranks"], report["summary"]["ranks"]);
  EXPECT_EQ(view["cluster"], report["summary"]["cluster"]);
  nlohmann::json stragglers = nlohmann::json::array();
  for (const auto& f : report["findings"]) {
    if (f["id"] == "straggler") stragglers.push_back(f);
  }
  EXPECT_EQ(view["findings"], stragglers);
}

TEST(AnalyzeRank, ADocumentInMemoryGivesWhatItsFileGives) {
  GPUUTIL_REQUIRE_TRACES();
  const std::string path = test::trace_path(kRank1);
  const std::string bytes = read_file(path);
  ASSERT_FALSE(bytes.empty());
  const RankAnalysis from_file = analyze_rank(TraceInput{path, nullptr}, AnalysisOptions{});
  const RankAnalysis from_bytes = analyze_rank_bytes(bytes, path, AnalysisOptions{});
  ASSERT_TRUE(from_file.ok && from_bytes.ok) << from_file.error << from_bytes.error;
  EXPECT_EQ(from_file.rank, 1);
  EXPECT_EQ(from_bytes.batch_json, from_file.batch_json);
  EXPECT_EQ(from_bytes.summary_json, from_file.summary_json);
}

TEST(AnalyzeRank, TheRankOverrideNamesTheBatchAndTheSummaryHasNoSteps) {
  GPUUTIL_REQUIRE_TRACES();
  const RankAnalysis one = analyze_rank(TraceInput{test::trace_path(kRank0), nullptr}, AnalysisOptions{}, {}, 5);
  ASSERT_TRUE(one.ok) << one.error;
  EXPECT_EQ(one.rank, 5);
  const nlohmann::json batch = nlohmann::json::parse(one.batch_json);
  EXPECT_EQ(batch["rank"], 5);
  EXPECT_EQ(batch["host"], kRank0);
  EXPECT_TRUE(batch["finished"].get<bool>());
  EXPECT_EQ(batch["steps"].size(), one.steps);
  const nlohmann::json summary = nlohmann::json::parse(one.summary_json);
  EXPECT_TRUE(summary["steps"].empty());
  EXPECT_EQ(summary["summary"]["steps"], one.steps);
  EXPECT_EQ(summary["summary"]["devices"][0]["rank"], 5);
  EXPECT_FALSE(summary["summary"].contains("cluster"));
}

TEST(AnalyzeRank, AnUnreadableInputIsOneLineNamingIt) {
  const RankAnalysis missing = analyze_rank(TraceInput{"/nonexistent/rank7.json.gz", nullptr}, AnalysisOptions{});
  EXPECT_FALSE(missing.ok);
  EXPECT_EQ(missing.error.rfind("cannot read /nonexistent/rank7.json.gz: ", 0), 0u) << missing.error;
  const RankAnalysis broken = analyze_rank_bytes(std::string("\x1f\x8b\x08\x00garbage\n", 12), "s3://b/r.json.gz",
                                                 AnalysisOptions{});
  EXPECT_FALSE(broken.ok);
  EXPECT_EQ(broken.error.rfind("cannot read s3://b/r.json.gz: ", 0), 0u) << broken.error;
  EXPECT_EQ(broken.error.find('\n'), std::string::npos);
  EXPECT_TRUE(broken.batch_json.empty() && broken.summary_json.empty());
}

}  // namespace
}  // namespace gpuutil
