// Perfetto / Chrome trace export (libgpuutil/src/export/perfetto.cpp).
//
// Structural test: the output parses as Chrome Trace Event Format; slices
// nest per track (no two slices on one (pid, tid) partially overlap); there
// is a process per GPU and a thread per stream; the idle-cause slices add
// up, per step and cause, to the report's idle breakdown; counters appear.
// Run on a planted timeline and on every real GPU trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/perfetto.h"
#include "planted.h"
#include "traces.h"

namespace gpuutil {
namespace {

using Json = nlohmann::json;
using test::Planted;

// Every X slice per (pid, tid), asserted to nest: a slice starting inside
// another must end inside it too. Returns the number of slices checked.
size_t expect_slices_nest(const Json& doc) {
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> tracks;
  for (const auto& e : doc.at("traceEvents")) {
    EXPECT_TRUE(e.contains("ph") && e.contains("pid"));
    if (e["ph"] != "X") continue;
    const double ts = e.at("ts").get<double>();
    const double dur = e.at("dur").get<double>();
    EXPECT_GE(dur, 0);
    tracks[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back({ts, ts + dur});
  }
  size_t n = 0;
  constexpr double kEps = 1e-6;  // µs rounding of ns
  for (auto& [key, v] : tracks) {
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> open_ends;
    for (const auto& [s, e] : v) {
      while (!open_ends.empty() && open_ends.back() <= s + kEps) open_ends.pop_back();
      if (!open_ends.empty()) {
        EXPECT_LE(e, open_ends.back() + kEps) << "partial overlap on pid " << key.first << " tid " << key.second
                                                << " at ts " << s;
      }
      open_ends.push_back(e);
      ++n;
    }
  }
  return n;
}

std::map<std::string, std::string> thread_names(const Json& doc, int64_t pid) {
  std::map<std::string, std::string> out;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid) {
      out[std::to_string(e["tid"].get<int64_t>())] = e["args"]["name"].get<std::string>();
    }
  }
  return out;
}

Planted planted_two_streams() {
  Planted p;
  p.step(0, 0, 1000).step(1, 1000, 2000);
  p.range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 300, 0, false);
  p.kernel("gemm", 300, 700, 299, 0, 0, 7);
  p.kernel("copy_kernel", 400, 600, 399, 0, 0, 9);
  p.range("aten::item", 700, 1050);
  p.api("cudaStreamSynchronize", 700, 1050);
  p.kernel("gemm", 1100, 1900, 1099, 0, 0, 7);
  p.kernel("gemm", 1500, 1600, -1, 0, 0, 7);  // nested on stream 7 (skew in a trace)
  p.kernel("gemm", 1850, 1950, -1, 0, 0, 7);  // partially overlaps: goes to another lane
  p.store().counters.push_back({test::us(500), p.store().names.intern("power_w"), 0, 412.5});
  return p;
}

TEST(Perfetto, PlantedTimelineIsChromeTraceWithNestedSlicesPerTrack) {
  Planted p = planted_two_streams();
  const std::string text = timeline_to_chrome_trace({&p.store()}, AnalysisOptions{});
  const Json doc = Json::parse(text);  // throws on invalid JSON
  ASSERT_TRUE(doc["traceEvents"].is_array());
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  EXPECT_GT(expect_slices_nest(doc), 5u);

  // One process for the one GPU, threads: steps, idle causes, streams 7, 7 #1, 9;
  // and the host process.
  std::map<std::string, int64_t> pids;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") pids[e["args"]["name"].get<std::string>()] = e["pid"].get<int64_t>();
  }
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_EQ(pids.count("rank 0 host"), 1u);
  int64_t gpu_pid = -1;
  for (const auto& [name, pid] : pids) {
    if (name.rfind("rank 0 GPU 0", 0) == 0) gpu_pid = pid;
  }
  const auto names = thread_names(doc, gpu_pid);
  std::set<std::string> got;
  for (const auto& [tid, name] : names) got.insert(name);
  EXPECT_EQ(got, (std::set<std::string>{"steps", "idle causes", "stream 7", "stream 7 #1", "stream 9"}));

  // Counter present.
  bool counter = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "C" && e["name"] == "power_w") counter = e["args"]["value"] == 412.5;
  }
  EXPECT_TRUE(counter);
}

TEST(Perfetto, AHostOnlyTraceExportsItsHostThreadsAndSteps) {
  // A CPU torch.profiler trace: no device activity; the export used to be
  // an empty traceEvents array (issue 26, item 11).
  Planted p;
  p.step(0, 0, 1000).step(1, 1000, 2000);
  p.range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 300, 0, false);
  p.range("aten::linear", 300, 600);
  p.range("aten::addmm", 350, 550);
  p.range("aten::relu", 500, 700);  // overlaps aten::linear's end: another lane
  p.range("autograd::engine::evaluate_function: AddmmBackward0", 1100, 1800);
  const Json doc = Json::parse(timeline_to_chrome_trace({&p.store()}, AnalysisOptions{}));
  EXPECT_GE(expect_slices_nest(doc), 7u);  // 5 ranges + 2 steps
  int64_t host_pid = -1;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "rank 0 host");
      host_pid = e["pid"].get<int64_t>();
    }
  }
  ASSERT_GE(host_pid, 0);
  std::set<std::string> names;
  size_t steps = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    EXPECT_EQ(e["pid"], host_pid);
    names.insert(e["name"].get<std::string>());
    steps += e["cat"] == "step";
  }
  EXPECT_EQ(steps, 2u);
  EXPECT_TRUE(names.count("aten::relu") && names.count("aten::addmm"));
  std::set<std::string> threads;
  for (const auto& [tid, name] : thread_names(doc, host_pid)) threads.insert(name);
  EXPECT_EQ(threads.size(), 3u);  // steps, the thread, its second lane
}

TEST(Perfetto, IdleSlicesSumToTheReportPerStepAndCause) {
  Planted p = planted_two_streams();
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  const Json doc = Json::parse(timeline_to_chrome_trace({&p.store()}, AnalysisOptions{}));
  std::map<std::pair<int64_t, std::string>, int64_t> idle_ns;  // (step, cause)
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "idle") continue;
    idle_ns[{e["args"]["step"].get<int64_t>(), e["name"].get<std::string>()}] +=
        std::llround(e["dur"].get<double>() * 1000.0);
  }
  int64_t checked = 0;
  for (const auto& step : r.steps) {
    for (int c = 0; c < kIdleCauseCount; ++c) {
      const int64_t want = step.devices[0].breakdown.idle_ns[static_cast<size_t>(c)];
      const int64_t got = idle_ns[{step.step, to_string(static_cast<IdleCause>(c))}];
      EXPECT_EQ(got, want) << "step " << step.step << " cause " << to_string(static_cast<IdleCause>(c));
      checked += want;
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_GT((idle_ns[{0, "dataloader"}]), 0);
  EXPECT_GT((idle_ns[{1, "host_sync"}]), 0);
}

TEST(Perfetto, IdleSegmentsDoNotChangeTheAccounting) {
  // The same store analysed twice gives identical idle numbers whether or not
  // an exporter asked for segments in between.
  Planted p = planted_two_streams();
  const Report before = analyze({&p.store()}, AnalysisOptions{});
  (void)timeline_to_chrome_trace({&p.store()}, AnalysisOptions{});
  const Report after = analyze({&p.store()}, AnalysisOptions{});
  for (size_t i = 0; i < before.steps.size(); ++i) {
    EXPECT_EQ(before.steps[i].devices[0].breakdown.idle_ns, after.steps[i].devices[0].breakdown.idle_ns);
  }
}

TEST(Perfetto, EveryRealTraceExportsNestedSlices) {
  GPUUTIL_REQUIRE_TRACES();
  for (const auto& path : test::all_traces()) {
    SCOPED_TRACE(path);
    auto imp = import_kineto_file(path);
    if (!imp.ok) continue;  // unreadable inputs are the importer tests' business
    const Json doc = Json::parse(timeline_to_chrome_trace({&imp.store}, AnalysisOptions{}));
    const size_t slices = expect_slices_nest(doc);
    EXPECT_GE(slices, imp.store.activities.size());
  }
}

}  // namespace
}  // namespace gpuutil
