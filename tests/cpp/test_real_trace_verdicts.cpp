// The regression table of the shared real traces (issue 37): for every
// trace in ../shared/traces, the top finding a performance engineer would
// fix first, a word its evidence names, and the idle share of wall time by
// cause, as written down with the reason in data/real_trace_verdicts.json.
// A rule change that moves a verdict fails here and must update the table
// and its "why". Every trace in the folder must have a row.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report_json.h"
#include "traces.h"

namespace gpuutil {
namespace {

constexpr double kTolerancePp = 0.25;

nlohmann::json verdicts() {
  std::ifstream in(std::string(GPUUTIL_TEST_DATA_DIR) + "/real_trace_verdicts.json");
  EXPECT_TRUE(in.good()) << "data/real_trace_verdicts.json missing";
  return nlohmann::json::parse(in);
}

TEST(RealTraceVerdicts, EverySharedTraceHasARow) {
  GPUUTIL_REQUIRE_TRACES();
  const nlohmann::json table = verdicts();
  for (const auto& path : test::all_traces()) {
    const std::string name = std::filesystem::path(path).filename().string();
    EXPECT_TRUE(table["traces"].contains(name)) << name << " has no row in data/real_trace_verdicts.json";
  }
}

TEST(RealTraceVerdicts, TopFindingAndIdleCausesMatchTheTable) {
  GPUUTIL_REQUIRE_TRACES();
  const nlohmann::json table = verdicts();
  for (const auto& [name, row] : table["traces"].items()) {
    SCOPED_TRACE(name);
    ImportResult imp = import_kineto_file(test::trace_path(name));
    ASSERT_TRUE(imp.ok) << imp.error;
    const Report r = analyze({&imp.store}, AnalysisOptions{});
    if (row["top_finding"].is_null()) {
      EXPECT_TRUE(r.findings.empty()) << "top finding " << r.findings.front().id << ": " << r.findings.front().title;
    } else {
      ASSERT_FALSE(r.findings.empty());
      EXPECT_EQ(r.findings.front().id, row["top_finding"].get<std::string>()) << r.findings.front().title;
      EXPECT_NE(r.findings.front().evidence.find(row["evidence_names"].get<std::string>()), std::string::npos)
          << r.findings.front().evidence;
      // The JSON report leads with the same finding (what every other
      // surface reads: analyze --json, the HTML, the trackers).
      const auto json = nlohmann::json::parse(report_to_json(r));
      EXPECT_EQ(json["summary"]["top_finding"]["id"], row["top_finding"]);
    }
    if (!row.contains("idle_pct")) continue;
    ASSERT_FALSE(r.summary.devices.empty());
    const auto& d = r.summary.devices.front();
    for (int c = 0; c < kIdleCauseCount; ++c) {
      const char* cause = to_string(static_cast<IdleCause>(c));
      const double want = row["idle_pct"].value(cause, 0.0);
      const double got = 100.0 * static_cast<double>(d.breakdown.idle_ns[c]) / static_cast<double>(d.wall_ns);
      EXPECT_NEAR(got, want, kTolerancePp) << "idle_" << cause << " share of wall (pp)";
    }
  }
}

}  // namespace
}  // namespace gpuutil
