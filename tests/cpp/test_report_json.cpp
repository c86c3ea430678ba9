// Tests of the JSON report exporter (gpuutil.report/1).
//
// Reports are built by hand (no importer, no analysis) so every value is
// known. The tests pin the schema's shape: every documented key is present
// in order, durations are integers, empty optionals and non-finite doubles
// are null, compact output is one line, only non-zero diagnostics appear (in
// registry order), and the output round-trips through nlohmann::json.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpuutil/report.h"
#include "gpuutil/report_json.h"

namespace gpuutil {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::vector<std::string> kBreakdownKeys = {
    "compute",   "communication",  "memory",          "idle_dataloader",  "idle_host_sync",
    "idle_collective", "idle_launch", "idle_host", "idle_dependency", "idle_unattributed", "idle_kernel_gap"};
const std::vector<std::string> kCauseKeys = {"dataloader", "host_sync", "collective", "launch",
                                             "host",       "dependency", "unattributed", "kernel_gap"};

std::vector<std::string> keys_of(const ordered_json& j) {
  std::vector<std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) out.push_back(it.key());
  return out;
}

Breakdown make_breakdown(int64_t base) {
  Breakdown b;
  b.compute_ns = base * 10;
  b.communication_ns = base * 2;
  b.memory_ns = base;
  for (int i = 0; i < kIdleCauseCount; ++i) b.idle_ns[static_cast<size_t>(i)] = base + i;
  return b;
}

// A report with every field populated (two steps, one device each).
Report full_report() {
  Report r;
  r.sources.push_back({"/tmp/a.json.gz", 0, "ProfilerStep", 100, 50, 20});
  r.flops_source = "user";
  r.workload.kind = "inference";
  r.workload.evidence = "no backward or optimizer ops";
  r.workload.capture_ns = 1234;
  for (int s = 0; s < 2; ++s) {
    StepReport step;
    step.step = 10 + s;
    step.start_ns = 1'000'000'000'000LL + s * 1'000'000;
    step.end_ns = step.start_ns + 1'000'000;
    step.wall_ns = 1'000'000;
    DeviceStepReport d;
    d.device = 0;
    d.rank = 0;
    d.name = "NVIDIA H100 80GB HBM3";
    d.breakdown = make_breakdown(1000);
    d.wall_ns = d.breakdown.total_ns();
    d.busy_ns = d.breakdown.busy_ns();
    d.culprits[0].push_back({"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 3000, 1});
    d.culprits[1].push_back({"aten::item", 1001, 2});
    d.kernels = 42;
    d.memcpys = 3;
    d.memsets = 1;
    d.short_kernels = 7;
    d.sm_efficiency_est = 0.75;
    d.achieved_occupancy_est = 0.5;
    d.memcpy_bytes[static_cast<size_t>(MemcpyDirection::kHostToDevice)] = 4'000'000;
    d.memcpy_ns[static_cast<size_t>(MemcpyDirection::kHostToDevice)] = 200'000;
    d.memcpy_bytes[static_cast<size_t>(MemcpyDirection::kDeviceToHost)] = 8;
    d.memcpy_ns[static_cast<size_t>(MemcpyDirection::kDeviceToHost)] = 0;  // gbps null
    d.communication_total_ns = 2000;
    d.communication_overlap_ns = 500;
    d.top_kernels.push_back({"ampere_sgemm_128x64_tn", 5000, 4});
    d.launch_latency_p50_ns = 4000;
    d.launch_latency_p95_ns = 9000;
    d.flops = 1.5e12;
    d.peak_flops_per_s = 989e12;
    d.mfu = 0.4;
    step.devices.push_back(d);
    r.steps.push_back(step);
  }
  r.summary.steps = 2;
  r.summary.steps_wall_ns = 2'000'000;
  r.summary.trace_span_ns = 2'500'000;
  r.summary.outside_steps_ns = 500'000;
  r.summary.step_wall_p50_ns = 1'000'000;
  DeviceSummary ds;
  ds.device = 0;
  ds.rank = 0;
  ds.name = "NVIDIA H100 80GB HBM3";
  ds.breakdown = make_breakdown(2000);
  ds.wall_ns = ds.breakdown.total_ns();
  ds.culprits[static_cast<size_t>(IdleCause::kUnattributed)].push_back({"<gap>", 7, 1});
  ds.kernels = 84;
  ds.sm_efficiency_est = 0.75;
  ds.achieved_occupancy_est = 0.5;
  ds.mfu = 0.4;
  r.summary.devices.push_back(ds);
  r.findings.push_back({"idle_dataloader", "The GPU waits on the DataLoader", "6.0 ms of 2.0 ms",
                        "raise num_workers", 6000, 0.003});
  r.findings.push_back({"idle_host_sync", "Host syncs drain the GPU", "x", "remove .item()", 2002, 0.001});
  r.diagnostics.add(Diag::launch_unmatched, 3, "kernel #5: no correlation");
  r.diagnostics.add(Diag::input_unreadable, 1);  // no example
  return r;
}

ordered_json parse(const std::string& s) { return ordered_json::parse(s); }

TEST(ReportJson, TopLevelKeysInOrder) {
  const auto j = parse(report_to_json(full_report()));
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{"schema", "sources", "flops_source", "workload", "loaders", "steps",
                                                  "summary", "findings", "diagnostics"}));
  EXPECT_EQ(j["schema"], "gpuutil.report/1");
  EXPECT_EQ(j["schema"], kReportSchema);
  EXPECT_EQ(j["flops_source"], "user");
}

TEST(ReportJson, WorkloadKindEvidenceAndCaptureTime) {
  const auto j = parse(report_to_json(full_report()));
  EXPECT_EQ(keys_of(j["workload"]), (std::vector<std::string>{"kind", "evidence", "capture_ns"}));
  EXPECT_EQ(j["workload"]["kind"], "inference");
  EXPECT_EQ(j["workload"]["evidence"], "no backward or optimizer ops");
  EXPECT_TRUE(j["workload"]["capture_ns"].is_number_integer());
  EXPECT_EQ(j["workload"]["capture_ns"], 1234);
  // A default report says it does not know.
  const auto empty = parse(report_to_json(Report{}));
  EXPECT_EQ(empty["workload"]["kind"], "unknown");
  EXPECT_EQ(empty["workload"]["capture_ns"], 0);
}

TEST(ReportJson, SourceKeys) {
  const auto j = parse(report_to_json(full_report()));
  ASSERT_EQ(j["sources"].size(), 1u);
  const auto& s = j["sources"][0];
  EXPECT_EQ(keys_of(s), (std::vector<std::string>{"path", "rank", "steps_source", "activities", "api_calls",
                                                  "ranges"}));
  EXPECT_EQ(s["path"], "/tmp/a.json.gz");
  EXPECT_EQ(s["activities"], 100);
}

TEST(ReportJson, StepAndDeviceKeys) {
  const auto j = parse(report_to_json(full_report()));
  ASSERT_EQ(j["steps"].size(), 2u);
  const auto& step = j["steps"][1];
  EXPECT_EQ(keys_of(step), (std::vector<std::string>{"step", "start_ns", "end_ns", "wall_ns", "devices", "host"}));
  EXPECT_TRUE(step["host"].is_array());  // per-thread host breakdown (docs/report-schema.md)
  EXPECT_EQ(step["step"], 11);
  EXPECT_EQ(step["start_ns"].get<int64_t>(), 1'000'001'000'000LL);
  ASSERT_EQ(step["devices"].size(), 1u);
  const auto& d = step["devices"][0];
  EXPECT_EQ(keys_of(d),
            (std::vector<std::string>{"device", "rank", "name", "wall_ns", "busy_ns", "breakdown_ns", "idle_ns",
                                      "culprits", "kernels", "memcpys", "memsets", "short_kernels", "persistent_kernel_ns",
                                      "sm_efficiency_est", "achieved_occupancy_est", "memcpy", "pageable_memcpy", "communication",
                                      "top_kernels", "launch_latency_ns", "graph_kernels",
                                      "graph_launch_latency_ns", "flops", "peak_flops_per_s", "mfu",
                                      "hardware_flops", "hfu", "health"}));
  EXPECT_TRUE(d["health"].is_null());  // no counter samples in this report
  EXPECT_EQ(keys_of(d["breakdown_ns"]), kBreakdownKeys);
  EXPECT_EQ(keys_of(d["culprits"]), kCauseKeys);
  EXPECT_EQ(keys_of(d["communication"]), (std::vector<std::string>{"total_ns", "overlap_ns", "overlap_pct"}));
  EXPECT_EQ(keys_of(d["launch_latency_ns"]), (std::vector<std::string>{"p50", "p95"}));
  EXPECT_EQ(keys_of(d["culprits"]["dataloader"][0]), (std::vector<std::string>{"name", "ns", "count"}));
  EXPECT_EQ(keys_of(d["top_kernels"][0]), (std::vector<std::string>{"name", "ns", "count"}));
  EXPECT_EQ(d["culprits"]["host_sync"][0]["name"], "aten::item");
  EXPECT_EQ(d["culprits"]["host_sync"][0]["count"], 2);
  EXPECT_TRUE(d["culprits"]["launch"].is_array());
  EXPECT_TRUE(d["culprits"]["launch"].empty());
  EXPECT_DOUBLE_EQ(d["communication"]["overlap_pct"].get<double>(), 25.0);
  EXPECT_EQ(d["launch_latency_ns"]["p95"], 9000);
  EXPECT_DOUBLE_EQ(d["mfu"].get<double>(), 0.4);
}

TEST(ReportJson, StartNsIsExactLargeInteger) {
  Report r = full_report();
  r.steps[0].start_ns = 1'723'456'789'123'456'789LL;  // would lose digits through double
  const auto j = parse(report_to_json(r));
  EXPECT_TRUE(j["steps"][0]["start_ns"].is_number_integer());
  EXPECT_EQ(j["steps"][0]["start_ns"].get<int64_t>(), 1'723'456'789'123'456'789LL);
}

TEST(ReportJson, BreakdownSumsAndIdleTotal) {
  const Report r = full_report();
  const auto j = parse(report_to_json(r));
  const auto& d = j["steps"][0]["devices"][0];
  int64_t sum = 0;
  int64_t idle = 0;
  for (const auto& k : kBreakdownKeys) {
    ASSERT_TRUE(d["breakdown_ns"][k].is_number_integer()) << k;
    sum += d["breakdown_ns"][k].get<int64_t>();
    if (k.rfind("idle_", 0) == 0) idle += d["breakdown_ns"][k].get<int64_t>();
  }
  EXPECT_EQ(sum, d["wall_ns"].get<int64_t>());
  EXPECT_EQ(idle, d["idle_ns"].get<int64_t>());
  EXPECT_EQ(d["breakdown_ns"]["idle_host_sync"], 1001);
  EXPECT_EQ(d["busy_ns"], 13000);
}

TEST(ReportJson, DurationsAreIntegers) {
  const auto j = parse(report_to_json(full_report(), 2));
  const auto& d = j["steps"][0]["devices"][0];
  for (const char* k : {"wall_ns", "busy_ns", "idle_ns"}) EXPECT_TRUE(d[k].is_number_integer()) << k;
  EXPECT_TRUE(d["communication"]["total_ns"].is_number_integer());
  EXPECT_TRUE(d["communication"]["overlap_ns"].is_number_integer());
  EXPECT_TRUE(d["launch_latency_ns"]["p50"].is_number_integer());
  EXPECT_TRUE(d["culprits"]["dataloader"][0]["ns"].is_number_integer());
  EXPECT_TRUE(d["memcpy"]["htod"]["ns"].is_number_integer());
  EXPECT_TRUE(d["memcpy"]["htod"]["bytes"].is_number_integer());
  for (const char* k : {"steps_wall_ns", "trace_span_ns", "outside_steps_ns", "step_wall_p50_ns"}) {
    EXPECT_TRUE(j["summary"][k].is_number_integer()) << k;
  }
  EXPECT_TRUE(j["findings"][0]["recoverable_ns"].is_number_integer());
  // The text itself must not contain a decimal point for an integer field.
  const std::string text = report_to_json(full_report());
  EXPECT_NE(text.find("\"wall_ns\":1000000,"), std::string::npos);
}

TEST(ReportJson, MemcpyOnlyNonEmptyDirectionsAndGbps) {
  const auto j = parse(report_to_json(full_report()));
  const auto& m = j["steps"][0]["devices"][0]["memcpy"];
  EXPECT_EQ(keys_of(m), (std::vector<std::string>{"htod", "dtoh"}));
  EXPECT_EQ(keys_of(m["htod"]), (std::vector<std::string>{"bytes", "ns", "gbps"}));
  EXPECT_DOUBLE_EQ(m["htod"]["gbps"].get<double>(), 20.0);  // 4 MB in 200 us
  EXPECT_TRUE(m["dtoh"]["gbps"].is_null());
  Report r = full_report();
  r.steps[0].devices[0].memcpy_bytes = {};
  r.steps[0].devices[0].memcpy_ns = {};
  const auto j2 = parse(report_to_json(r));
  EXPECT_TRUE(j2["steps"][0]["devices"][0]["memcpy"].is_object());
  EXPECT_TRUE(j2["steps"][0]["devices"][0]["memcpy"].empty());
}

TEST(ReportJson, SummaryKeys) {
  const auto j = parse(report_to_json(full_report()));
  const auto& s = j["summary"];
  EXPECT_EQ(keys_of(s), (std::vector<std::string>{"steps", "steps_wall_ns", "trace_span_ns", "outside_steps_ns",
                                                  "last_step_backlog_ns", "last_step_unrecorded_ns",
                                                  "step_wall_p50_ns", "devices", "top_finding"}));
  ASSERT_EQ(s["devices"].size(), 1u);
  const auto& d = s["devices"][0];
  EXPECT_EQ(keys_of(d), (std::vector<std::string>{"device", "rank", "name", "wall_ns", "breakdown_ns", "busy_pct",
                                                  "idle_pct", "culprits", "kernels", "sm_efficiency_est",
                                                  "achieved_occupancy_est", "mfu", "hfu"}));
  EXPECT_EQ(keys_of(d["breakdown_ns"]), kBreakdownKeys);
  EXPECT_EQ(keys_of(d["culprits"]), kCauseKeys);
  const double busy = d["busy_pct"].get<double>();
  const double idle = d["idle_pct"].get<double>();
  EXPECT_NEAR(busy + idle, 100.0, 1e-9);
  EXPECT_EQ(d["culprits"]["unattributed"][0]["name"], "<gap>");
  // top_finding is the first (most recoverable) finding.
  EXPECT_EQ(s["top_finding"], j["findings"][0]);
  EXPECT_EQ(s["top_finding"]["id"], "idle_dataloader");
}

TEST(ReportJson, FindingKeys) {
  const auto j = parse(report_to_json(full_report()));
  ASSERT_EQ(j["findings"].size(), 2u);
  EXPECT_EQ(keys_of(j["findings"][1]),
            (std::vector<std::string>{"id", "title", "evidence", "fix", "recoverable_ns", "share_of_wall"}));
  EXPECT_EQ(j["findings"][1]["fix"], "remove .item()");
  EXPECT_DOUBLE_EQ(j["findings"][0]["share_of_wall"].get<double>(), 0.003);
}

TEST(ReportJson, NulloptIsNull) {
  Report r = full_report();
  auto& d = r.steps[0].devices[0];
  d.sm_efficiency_est.reset();
  d.achieved_occupancy_est.reset();
  d.launch_latency_p50_ns.reset();
  d.launch_latency_p95_ns.reset();
  d.flops.reset();
  d.peak_flops_per_s.reset();
  d.mfu.reset();
  d.communication_total_ns = 0;
  d.communication_overlap_ns = 0;
  r.summary.step_wall_p50_ns.reset();
  r.summary.devices[0].mfu.reset();
  r.summary.devices[0].sm_efficiency_est.reset();
  r.summary.devices[0].achieved_occupancy_est.reset();
  r.summary.devices[0].wall_ns = 0;
  r.summary.devices[0].breakdown = Breakdown{};
  r.flops_source.clear();
  r.findings.clear();
  const auto j = parse(report_to_json(r));
  const auto& jd = j["steps"][0]["devices"][0];
  for (const char* k : {"sm_efficiency_est", "achieved_occupancy_est", "flops", "peak_flops_per_s", "mfu"}) {
    ASSERT_TRUE(jd.contains(k)) << k;
    EXPECT_TRUE(jd[k].is_null()) << k;
  }
  EXPECT_TRUE(jd["launch_latency_ns"]["p50"].is_null());
  EXPECT_TRUE(jd["launch_latency_ns"]["p95"].is_null());
  EXPECT_TRUE(jd["communication"]["overlap_pct"].is_null());  // 0 / 0
  EXPECT_TRUE(j["summary"]["step_wall_p50_ns"].is_null());
  const auto& sd = j["summary"]["devices"][0];
  for (const char* k : {"mfu", "sm_efficiency_est", "achieved_occupancy_est", "busy_pct", "idle_pct"}) {
    ASSERT_TRUE(sd.contains(k)) << k;
    EXPECT_TRUE(sd[k].is_null()) << k;
  }
  ASSERT_TRUE(j.contains("flops_source"));
  EXPECT_TRUE(j["flops_source"].is_null());
  ASSERT_TRUE(j["summary"].contains("top_finding"));
  EXPECT_TRUE(j["summary"]["top_finding"].is_null());
  EXPECT_TRUE(j["findings"].is_array());
  EXPECT_TRUE(j["findings"].empty());
}

TEST(ReportJson, NonFiniteIsNull) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Report r = full_report();
  auto& d = r.steps[0].devices[0];
  d.sm_efficiency_est = nan;
  d.achieved_occupancy_est = -inf;
  d.flops = inf;
  d.peak_flops_per_s = nan;
  d.mfu = inf;
  r.summary.devices[0].mfu = nan;
  r.summary.devices[0].sm_efficiency_est = inf;
  r.findings[0].share_of_wall = nan;
  r.findings[1].share_of_wall = inf;
  const std::string text = report_to_json(r, 2);
  // Pretty output separates key and value with ": "; no value may be a
  // non-finite literal.
  for (const char* bad : {": NaN", ": nan", ": -nan", ": inf", ": -inf", ": Infinity", ": -Infinity"}) {
    EXPECT_EQ(text.find(bad), std::string::npos) << bad;
  }
  const auto j = parse(text);  // strict parser: would reject NaN/Infinity
  const auto& jd = j["steps"][0]["devices"][0];
  for (const char* k : {"sm_efficiency_est", "achieved_occupancy_est", "flops", "peak_flops_per_s", "mfu"}) {
    EXPECT_TRUE(jd[k].is_null()) << k;
  }
  EXPECT_TRUE(j["summary"]["devices"][0]["mfu"].is_null());
  EXPECT_TRUE(j["summary"]["devices"][0]["sm_efficiency_est"].is_null());
  EXPECT_TRUE(j["findings"][0]["share_of_wall"].is_null());
  EXPECT_TRUE(j["findings"][1]["share_of_wall"].is_null());
  EXPECT_TRUE(j["summary"]["top_finding"]["share_of_wall"].is_null());
}

TEST(ReportJson, CompactIsOneLine) {
  const std::string compact = report_to_json(full_report());
  EXPECT_EQ(compact.find('\n'), std::string::npos);
  EXPECT_EQ(compact, report_to_json(full_report(), -1));
  EXPECT_EQ(compact, report_to_json(full_report(), -7));
  const std::string pretty = report_to_json(full_report(), 2);
  EXPECT_NE(pretty.find('\n'), std::string::npos);
  EXPECT_NE(pretty.find("\n  \"schema\""), std::string::npos);
  EXPECT_EQ(json::parse(compact), json::parse(pretty));
  // indent 0: newlines, no indentation, same document.
  EXPECT_EQ(json::parse(report_to_json(full_report(), 0)), json::parse(compact));
}

TEST(ReportJson, DiagnosticsOnlyNonZeroInRegistryOrder) {
  const auto j = parse(report_to_json(full_report()));
  const auto& diags = j["diagnostics"];
  ASSERT_EQ(diags.size(), 2u);
  // input_unreadable comes first in the registry although it was added second.
  EXPECT_EQ(diags[0]["name"], "input_unreadable");
  EXPECT_EQ(diags[0]["severity"], "error");
  EXPECT_EQ(diags[0]["count"], 1);
  EXPECT_EQ(diags[0]["description"], diag_info(Diag::input_unreadable).description);
  EXPECT_TRUE(diags[0]["example"].is_null());
  EXPECT_EQ(keys_of(diags[1]), (std::vector<std::string>{"name", "severity", "count", "description", "example"}));
  EXPECT_EQ(diags[1]["name"], "launch_unmatched");
  EXPECT_EQ(diags[1]["severity"], "info");
  EXPECT_EQ(diags[1]["count"], 3);
  EXPECT_EQ(diags[1]["example"], "kernel #5: no correlation");
}

TEST(ReportJson, EveryDiagnosticSerialises) {
  Report r;
  for (size_t i = 0; i < kDiagCount; ++i) r.diagnostics.add(static_cast<Diag>(i), i + 1);
  const auto j = parse(report_to_json(r));
  ASSERT_EQ(j["diagnostics"].size(), kDiagCount);
  for (size_t i = 0; i < kDiagCount; ++i) {
    EXPECT_EQ(j["diagnostics"][i]["name"], diag_info(static_cast<Diag>(i)).name);
    EXPECT_EQ(j["diagnostics"][i]["count"].get<uint64_t>(), i + 1);
  }
}

TEST(ReportJson, EmptyReport) {
  const auto j = parse(report_to_json(Report{}));
  EXPECT_EQ(j["schema"], "gpuutil.report/1");
  EXPECT_TRUE(j["sources"].empty());
  EXPECT_TRUE(j["steps"].empty());
  EXPECT_TRUE(j["findings"].empty());
  EXPECT_TRUE(j["diagnostics"].empty());
  EXPECT_TRUE(j["diagnostics"].is_array());
  EXPECT_EQ(j["summary"]["steps"], 0);
  EXPECT_TRUE(j["summary"]["devices"].is_array());
  EXPECT_TRUE(j["summary"]["top_finding"].is_null());
}

TEST(ReportJson, InvalidUtf8NameIsReplacedNotThrown) {
  Report r = full_report();
  r.steps[0].devices[0].top_kernels[0].name = std::string("kern\xff\xfe", 6);
  std::string text;
  ASSERT_NO_THROW(text = report_to_json(r));
  const auto j = parse(text);
  const std::string name = j["steps"][0]["devices"][0]["top_kernels"][0]["name"];
  EXPECT_EQ(name.rfind("kern", 0), 0u);
}

TEST(ReportJson, EscapesQuotesAndControlCharacters) {
  Report r = full_report();
  r.sources[0].path = "dir/\"odd\"\tname\n.json";
  const std::string text = report_to_json(r);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_EQ(parse(text)["sources"][0]["path"], "dir/\"odd\"\tname\n.json");
}

TEST(ReportJson, RoundTrip) {
  const Report r = full_report();
  const std::string text = report_to_json(r, 4);
  const auto j = parse(text);
  // Re-dumping the parsed document with the same settings reproduces the text.
  EXPECT_EQ(j.dump(4), text);
  EXPECT_EQ(parse(j.dump()).dump(), report_to_json(r));
  const auto& d = j["steps"][0]["devices"][0];
  EXPECT_EQ(d["kernels"].get<uint64_t>(), r.steps[0].devices[0].kernels);
  EXPECT_EQ(d["short_kernels"].get<uint64_t>(), 7u);
  EXPECT_EQ(d["breakdown_ns"]["compute"].get<int64_t>(), r.steps[0].devices[0].breakdown.compute_ns);
  EXPECT_EQ(d["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(d["flops"].get<double>(), 1.5e12);
  EXPECT_DOUBLE_EQ(d["peak_flops_per_s"].get<double>(), 989e12);
}

}  // namespace
}  // namespace gpuutil
