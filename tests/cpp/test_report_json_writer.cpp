// Tests of the streaming JSON writer behind the report exporter
// (src/export/json_writer.h) and of report_to_json built on it.
//
// The exporter promises the bytes nlohmann::ordered_json::dump printed for
// the same document, so every check here compares against nlohmann:
//   - single values (integers at their limits, doubles including -0.0,
//     extremes, integral values and non-finite ones, strings with every
//     control character, quotes, backslashes, DEL, UTF-8 and invalid UTF-8)
//     and nested containers, compact and pretty;
//   - every shared real trace: the report re-parsed by nlohmann and dumped
//     again gives the same bytes (compact), and the pretty report is
//     nlohmann's pretty dump of the compact one;
//   - a planted report with every optional set, then every optional unset.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "export/json_writer.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report.h"
#include "gpuutil/report_json.h"
#include "gpuutil/run_totals.h"
#include "traces.h"

namespace gpuutil {
namespace {

using nlohmann::ordered_json;

std::string nl_dump(const ordered_json& j, int indent = -1) {
  return j.dump(indent, ' ', false, ordered_json::error_handler_t::replace);
}

template <typename T>
std::string writer_dump(const T& v) {
  std::string out;
  JsonWriter w(out);
  w.value(v);
  w.finish();
  return out;
}

// The same value as the only element of an array and of an object, so the
// separators around it are covered too.
template <typename T>
void expect_like_nlohmann(const T& v, const ordered_json& expected) {
  EXPECT_EQ(writer_dump(v), nl_dump(expected));
  for (const int indent : {-1, 0, 2}) {
    std::string out;
    JsonWriter w(out, indent);
    w.begin_object();
    w.key("k");
    w.begin_array();
    w.value(v);
    w.value(v);
    w.end_array();
    w.member("v", v);
    w.end_object();
    w.finish();
    ordered_json doc = ordered_json::object();
    doc["k"] = ordered_json::array({expected, expected});
    doc["v"] = expected;
    EXPECT_EQ(out, nl_dump(doc, indent)) << "indent " << indent;
  }
}

TEST(JsonWriter, IntegersMatchNlohmannAtTheirLimits) {
  for (const int64_t v : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{42}, int64_t{-1234567890123},
                          std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    expect_like_nlohmann(v, ordered_json(v));
  }
  for (const uint64_t v : {uint64_t{0}, uint64_t{7}, uint64_t{1} << 63, std::numeric_limits<uint64_t>::max()}) {
    expect_like_nlohmann(v, ordered_json(v));
  }
  for (const int32_t v : {std::numeric_limits<int32_t>::min(), int32_t{-3}, std::numeric_limits<int32_t>::max()}) {
    expect_like_nlohmann(v, ordered_json(v));
  }
  expect_like_nlohmann(std::numeric_limits<uint32_t>::max(), ordered_json(std::numeric_limits<uint32_t>::max()));
}

TEST(JsonWriter, DoublesMatchNlohmannAndNonFiniteIsNull) {
  const std::vector<double> values = {0.0,
                                      -0.0,
                                      1e-300,
                                      1e300,
                                      -1e300,
                                      0.1,
                                      1.0 / 3.0,
                                      2.0,
                                      -2.0,
                                      100.0,
                                      1e15,
                                      1e16,
                                      1e17,
                                      123456789012345678.0,
                                      0.0001,
                                      0.00001,
                                      std::numeric_limits<double>::min(),
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::max(),
                                      std::numeric_limits<double>::lowest(),
                                      std::numeric_limits<double>::epsilon()};
  for (const double v : values) expect_like_nlohmann(v, ordered_json(v));
  for (const double v : {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                         std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(writer_dump(v), "null");
    expect_like_nlohmann(v, ordered_json(nullptr));
  }
  // Random bit patterns: every exponent, subnormals, NaN payloads.
  std::mt19937_64 rng(20240601);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    ASSERT_EQ(writer_dump(v), nl_dump(ordered_json(v))) << "bits " << bits;
  }
}

TEST(JsonWriter, StringsMatchNlohmannEscapingAndUtf8Replacement) {
  std::vector<std::string> values = {"",
                                     "plain",
                                     "void at::native::vectorized_elementwise_kernel<4, float>(int, float*)",
                                     "quote\"inside",
                                     "back\\slash",
                                     "\\\"",
                                     "slash/stays",
                                     "del\x7f",
                                     "\xc3\xa9t\xc3\xa9",                  // 2-byte UTF-8
                                     "\xe4\xb8\xad\xe6\x96\x87",           // 3-byte
                                     "\xf0\x9f\x98\x80 emoji",             // 4-byte
                                     "bad \xff byte",                      // invalid lead byte
                                     "cut \xc3",                           // truncated at the end
                                     "cut \xe4\xb8 mid",                   // truncated in the middle
                                     "\xc0\xaf overlong",                  // overlong encoding
                                     "\xed\xa0\x80 surrogate",             // UTF-16 surrogate
                                     "\x80\x80\x80",                       // stray continuation bytes
                                     std::string("nul\0inside", 10)};
  for (int c = 0; c < 0x20; ++c) values.push_back(std::string("c") + static_cast<char>(c) + "c");
  for (int c = 0; c < 256; ++c) values.push_back(std::string(1, static_cast<char>(c)));
  for (const auto& s : values) {
    expect_like_nlohmann(s, ordered_json(s));
    expect_like_nlohmann(std::string_view(s), ordered_json(s));
    // As a key, too.
    std::string out;
    JsonWriter w(out);
    w.begin_object();
    w.member(s, 1);
    w.end_object();
    w.finish();
    ordered_json doc = ordered_json::object();
    doc[s] = 1;
    EXPECT_EQ(out, nl_dump(doc));
  }
  expect_like_nlohmann("literal", ordered_json("literal"));  // not value(bool)
}

// The writer checks 8 bytes at a time for anything to escape: every byte
// value, at every position of the first two words and the tail, is seen.
TEST(JsonWriter, EveryByteAtEveryWordPositionIsEscapedLikeNlohmann) {
  for (int c = 0; c < 256; ++c) {
    for (size_t pos = 0; pos < 19; ++pos) {
      std::string s(19, 'a');
      s[pos] = static_cast<char>(c);
      ASSERT_EQ(writer_dump(s), nl_dump(ordered_json(s))) << "byte " << c << " at " << pos;
    }
  }
}

// The report's own keys are literals, written without an escape scan; a
// name known only at run time takes the scanning path. Both write the same
// bytes in every layout, first member or later, at any spare room.
TEST(JsonWriter, LiteralKeysWriteTheSameBytesAsRuntimeKeys) {
  for (const int indent : {-1, 0, 2}) {
    for (const size_t prefix : {size_t{0}, size_t{1}, size_t{250}, size_t{253}, size_t{255}}) {
      std::string literal(prefix, 'p'), runtime(prefix, 'p');
      const std::string names[] = {"a", "steps_wall_ns", ""};
      {
        JsonWriter w(literal, indent);
        w.begin_object();
        w.member("a", 1);
        w.member("steps_wall_ns", int64_t{2});
        w.key("");
        w.begin_array();
        w.end_array();
        w.end_object();
        w.finish();
      }
      {
        JsonWriter w(runtime, indent);
        w.begin_object();
        w.member(std::string_view(names[0]), 1);
        w.member(names[1], int64_t{2});
        w.key(std::string_view(names[2]));
        w.begin_array();
        w.end_array();
        w.end_object();
        w.finish();
      }
      EXPECT_EQ(literal, runtime) << "indent " << indent << ", prefix " << prefix;
      EXPECT_EQ(literal.substr(prefix), nlohmann::ordered_json::parse(literal.substr(prefix)).dump(indent))
          << "indent " << indent;
    }
  }
}

TEST(JsonWriter, NullBoolAndNestedContainersMatchNlohmannCompactAndPretty) {
  for (const int indent : {-1, 0, 1, 2, 4}) {
    std::string out = "prefix ";  // the writer appends
    JsonWriter w(out, indent);
    w.begin_object();
    w.member("t", true);
    w.member("f", false);
    w.key("n");
    w.null();
    w.member("np", nullptr);
    w.key("empty_object");
    w.begin_object();
    w.end_object();
    w.key("empty_array");
    w.begin_array();
    w.end_array();
    w.key("arrays");
    w.begin_array();
    w.begin_array();
    w.end_array();
    w.begin_object();
    w.member("x", int64_t{1});
    w.end_object();
    w.begin_array();
    w.value(1.5);
    w.null();
    w.value("s");
    w.end_array();
    w.end_array();
    w.end_object();
    w.finish();

    ordered_json doc = ordered_json::object();
    doc["t"] = true;
    doc["f"] = false;
    doc["n"] = nullptr;
    doc["np"] = nullptr;
    doc["empty_object"] = ordered_json::object();
    doc["empty_array"] = ordered_json::array();
    doc["arrays"] = ordered_json::array(
        {ordered_json::array(), ordered_json::object({{"x", 1}}), ordered_json::array({1.5, nullptr, "s"})});
    EXPECT_EQ(out, "prefix " + nl_dump(doc, indent)) << "indent " << indent;
  }
  // A top-level scalar and a top-level empty container.
  EXPECT_EQ(writer_dump(true), "true");
  std::string out;
  JsonWriter w(out, 2);
  w.begin_array();
  w.end_array();
  w.finish();
  EXPECT_EQ(out, "[]");
}

// The report re-parsed by nlohmann and dumped again is the same bytes: keys
// in order, numbers and strings exactly as nlohmann writes them.
void expect_round_trip_identity(const Report& report) {
  const std::string compact = report_to_json(report);
  ordered_json parsed;
  ASSERT_NO_THROW(parsed = ordered_json::parse(compact));
  EXPECT_EQ(nl_dump(parsed), compact);
  EXPECT_EQ(report_to_json(report, 2), nl_dump(parsed, 2));
  EXPECT_EQ(report_to_json(report, 0), nl_dump(parsed, 0));
  RunTotals totals;
  totals.add(report);
  totals.add(report);
  const std::string totals_json = run_totals_to_json(totals);
  ordered_json totals_parsed;
  ASSERT_NO_THROW(totals_parsed = ordered_json::parse(totals_json));
  EXPECT_EQ(nl_dump(totals_parsed), totals_json);
}

TEST(ReportJsonWriter, EverySharedTraceRoundTripsByteIdenticalThroughNlohmann) {
  GPUUTIL_REQUIRE_TRACES();
  const auto traces = test::all_traces();
  ASSERT_FALSE(traces.empty()) << "no traces in " << test::traces_dir();
  for (const auto& path : traces) {
    SCOPED_TRACE(path);
    const ImportResult imp = import_kineto_file(path);
    ASSERT_TRUE(imp.ok) << imp.error;
    AnalysisOptions options;
    expect_round_trip_identity(analyze(imp.store, options));
    options.flops_per_step = 3.3e12;  // fills flops, peak and mfu
    options.peak_tflops = 312.0;
    expect_round_trip_identity(analyze(imp.store, options));
  }
}

NamedTime named(const std::string& name, int64_t ns, uint64_t count) { return {name, ns, count}; }

// One step, one device, one host thread; every optional set (with awkward
// values) or every optional unset.
Report planted_report(bool set) {
  Report r;
  r.sources.push_back({"/traces/r\xc3\xa9sum\xc3\xa9 \"a\".json.gz", 3, "ProfilerStep", 10, 20, 30});
  r.flops_source = set ? "user" : "";
  StepReport step;
  step.step = 7;
  step.start_ns = std::numeric_limits<int64_t>::max() - 10;
  step.end_ns = std::numeric_limits<int64_t>::max();
  step.wall_ns = 10;
  DeviceStepReport d;
  d.device = 1;
  d.rank = 3;
  d.name = "NVIDIA H100 80GB HBM3";
  d.wall_ns = 10;
  d.busy_ns = 4;
  d.breakdown.compute_ns = 2;
  d.breakdown.communication_ns = 1;
  d.breakdown.memory_ns = 1;
  d.breakdown.idle_ns[0] = 6;
  d.culprits[0] = {named("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 6, 1)};
  d.culprits[static_cast<size_t>(IdleCause::kUnattributed)] = {named("bad \xff name\t", 1, std::numeric_limits<uint64_t>::max())};
  d.kernels = 3;
  d.memcpys = 1;
  d.short_kernels = 1;
  d.memcpy_bytes[1] = 1 << 20;
  d.memcpy_ns[1] = 3;
  d.memcpy_bytes[2] = 5;  // ns 0: gbps null
  d.communication_total_ns = set ? 3 : 0;
  d.communication_overlap_ns = set ? 1 : 0;
  d.top_kernels = {named("void gemm<float, 128>(float const*, float*)", 2, 2), named("", 0, 0)};
  if (set) {
    d.sm_efficiency_est = 0.1;
    d.achieved_occupancy_est = 2.0;
    d.launch_latency_p50_ns = std::numeric_limits<int64_t>::min();
    d.launch_latency_p95_ns = 0;
    d.flops = 1e300;
    d.peak_flops_per_s = std::numeric_limits<double>::infinity();  // set but not finite: null
    d.mfu = -0.0;
    auto& h = d.health;
    h.nvml_utilization_pct = 1.0 / 3.0;
    h.sm_clock_mhz = 1980;
    h.sm_clock_max_mhz = 1980;
    h.mem_clock_mhz = 2619;
    h.mem_clock_max_mhz = 2619;
    h.power_w = 612.5;
    h.energy_j = 1e-300;
    h.temperature_c = std::numeric_limits<double>::quiet_NaN();
    h.throttle_power_ns = 5;
    h.throttle_thermal_ns = 0;
    h.fb_used_bytes = 8.0e10;
    h.allocated_bytes = 1.0;
    h.reserved_bytes = 2.5e9;
    h.peak_allocated_bytes = 3.0e9;
    h.gpm_sm_util_pct = 99.9;
    h.gpm_sm_occupancy_pct = 50;
    h.gpm_tensor_util_pct = 0.001;
    h.gpm_dram_bw_util_pct = 12.25;
  }
  step.devices.push_back(d);
  HostThreadStepReport h;
  h.rank = 3;
  h.thread = std::numeric_limits<uint32_t>::max();
  h.tid = -1;
  h.name = set ? "python main" : "";
  h.wall_ns = 10;
  h.breakdown_ns[1] = 10;
  h.culprits[1] = {named("aten::mm", 10, 4)};
  step.host.push_back(h);
  r.steps.push_back(step);
  r.summary.steps = 1;
  r.summary.steps_wall_ns = 10;
  r.summary.trace_span_ns = 12;
  r.summary.outside_steps_ns = 2;
  if (set) r.summary.step_wall_p50_ns = 10;
  DeviceSummary s;
  s.device = 1;
  s.rank = 3;
  s.name = d.name;
  s.wall_ns = set ? 10 : 0;  // 0: busy_pct and idle_pct null
  s.breakdown = d.breakdown;
  s.culprits = d.culprits;
  s.kernels = 3;
  s.sm_efficiency_est = d.sm_efficiency_est;
  s.achieved_occupancy_est = d.achieved_occupancy_est;
  s.mfu = d.mfu;
  r.summary.devices.push_back(s);
  if (set) {
    r.findings.push_back({"idle_dataloader", "GPU idle \"waiting\" on data", "6 of 10 ns\n", "more workers", 6, 0.6});
    r.findings.push_back({"nan_share", "t", "e", "f", 0, std::numeric_limits<double>::quiet_NaN()});
    r.diagnostics.add(static_cast<Diag>(0), 2, "event #12: \x01 odd");
    r.diagnostics.add(static_cast<Diag>(kDiagCount - 1), std::numeric_limits<uint64_t>::max());
  }
  return r;
}

TEST(ReportJsonWriter, PlantedReportWithEveryOptionalSetRoundTripsAndKeepsTheRules) {
  const Report r = planted_report(true);
  expect_round_trip_identity(r);
  const std::string text = report_to_json(r);
  const auto j = ordered_json::parse(text);
  const auto& d = j["steps"][0]["devices"][0];
  EXPECT_EQ(d["sm_efficiency_est"].dump(), "0.1");
  EXPECT_EQ(d["achieved_occupancy_est"].dump(), "2.0");
  EXPECT_EQ(d["launch_latency_ns"]["p50"].get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(d["peak_flops_per_s"].is_null());  // Inf
  EXPECT_TRUE(d["health"]["temperature_c"].is_null());  // NaN
  EXPECT_EQ(d["health"]["throttle_thermal_ns"].get<int64_t>(), 0);
  EXPECT_TRUE(d["memcpy"]["dtoh"]["gbps"].is_null());
  EXPECT_EQ(d["culprits"]["unattributed"][0]["name"].get<std::string>(), "bad \xef\xbf\xbd name\t");
  EXPECT_NE(text.find("\"mfu\":-0.0"), std::string::npos);
  EXPECT_NE(text.find("\"flops\":1e+300"), std::string::npos);
  EXPECT_NE(text.find("\"energy_j\":1e-300"), std::string::npos);
  EXPECT_TRUE(j["findings"][1]["share_of_wall"].is_null());
  EXPECT_EQ(j["summary"]["top_finding"]["id"].get<std::string>(), "idle_dataloader");
  EXPECT_EQ(j["flops_source"].get<std::string>(), "user");
  EXPECT_EQ(j["diagnostics"].size(), 2u);
  EXPECT_TRUE(j["diagnostics"][1]["example"].is_null());
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_EQ(text.find("NaN"), std::string::npos);
  EXPECT_EQ(text.find("Infinity"), std::string::npos);
}

TEST(ReportJsonWriter, PlantedReportWithEveryOptionalUnsetRoundTripsWithNulls) {
  const Report r = planted_report(false);
  expect_round_trip_identity(r);
  const auto j = ordered_json::parse(report_to_json(r));
  const auto& d = j["steps"][0]["devices"][0];
  for (const char* k : {"sm_efficiency_est", "achieved_occupancy_est", "flops", "peak_flops_per_s", "mfu", "health"}) {
    EXPECT_TRUE(d[k].is_null()) << k;
  }
  EXPECT_TRUE(d["launch_latency_ns"]["p50"].is_null());
  EXPECT_TRUE(d["launch_latency_ns"]["p95"].is_null());
  EXPECT_TRUE(d["communication"]["overlap_pct"].is_null());
  EXPECT_TRUE(j["flops_source"].is_null());
  EXPECT_TRUE(j["summary"]["step_wall_p50_ns"].is_null());
  EXPECT_TRUE(j["summary"]["top_finding"].is_null());
  EXPECT_TRUE(j["summary"]["devices"][0]["busy_pct"].is_null());
  EXPECT_TRUE(j["summary"]["devices"][0]["idle_pct"].is_null());
  EXPECT_TRUE(j["findings"].empty());
  EXPECT_TRUE(j["diagnostics"].empty());
  expect_round_trip_identity(Report{});
}

}  // namespace
}  // namespace gpuutil
