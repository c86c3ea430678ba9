// The engine on real GPU traces (../shared/traces): every trace analyses,
// the accounting identities hold exactly for every step and device, busy
// time matches an independent computation, and idle attribution makes sense
// for a healthy and a starved input pipeline.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "traces.h"

namespace gpuutil {
namespace {

using test::all_traces;
using test::trace_path;

int64_t idle_of(const Breakdown& b, IdleCause c) { return b.idle_ns[static_cast<size_t>(c)]; }

TEST(RealTraces, EveryTraceAnalysesWithExactIdentities) {
  GPUUTIL_REQUIRE_TRACES();
  const auto paths = all_traces();
  ASSERT_GE(paths.size(), 13u) << "shared traces missing from " << test::traces_dir();
  for (const auto& path : paths) {
    SCOPED_TRACE(path);
    ImportResult imp = import_kineto_file(path);
    ASSERT_TRUE(imp.ok) << imp.error;
    const Report r = analyze(imp.store);
    EXPECT_FALSE(r.diagnostics.any_error());
    ASSERT_FALSE(r.steps.empty());
    for (const auto& s : r.steps) {
      EXPECT_EQ(s.wall_ns, s.end_ns - s.start_ns);
      EXPECT_GT(s.wall_ns, 0);
      for (const auto& d : s.devices) {
        const auto& b = d.breakdown;
        EXPECT_EQ(b.compute_ns + b.communication_ns + b.memory_ns + b.idle_total_ns(), d.wall_ns)
            << "step " << s.step << " device " << d.device;
        EXPECT_EQ(b.busy_ns(), d.busy_ns);
        for (auto v : b.idle_ns) EXPECT_GE(v, 0);
        EXPECT_GE(b.compute_ns, 0);
        EXPECT_GE(b.communication_ns, 0);
        EXPECT_GE(b.memory_ns, 0);
        EXPECT_LE(d.communication_overlap_ns, d.communication_total_ns);
        if (d.sm_efficiency_est) {
          EXPECT_GE(*d.sm_efficiency_est, 0.0);
          EXPECT_LE(*d.sm_efficiency_est, 1.0);
        }
        if (d.achieved_occupancy_est) {
          EXPECT_GE(*d.achieved_occupancy_est, 0.0);
          EXPECT_LE(*d.achieved_occupancy_est, 1.0);
        }
      }
    }
    for (const auto& d : r.summary.devices) {
      EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);
    }
    // The run: span = steps + outside + the last step's backlog and
    // unrecorded end (docs/accounting.md, "The last step").
    const Summary& sm = r.summary;
    EXPECT_EQ(sm.outside_steps_ns, std::max<int64_t>(0, sm.trace_span_ns - sm.steps_wall_ns -
                                                             sm.last_step_backlog_ns - sm.last_step_unrecorded_ns));
  }
}

// Issue 26, item 4 on a shared trace: hta_train_v100_ns_resolution's GPU
// runs ~90 ms behind the host; the 1,022 activities the last step queued ran
// 89.2 ms past its window. That was 88% of the "20.4% outside training
// steps" top finding; it is the last step's backlog now, and what is left
// outside the steps (11.6 ms: before the first step and after the backlog)
// is no finding. ResNet-50's last step has an 8.1 ms backlog.
TEST(RealTraces, DeviceBacklogAfterTheLastStepIsNotTimeOutsideSteps) {
  GPUUTIL_REQUIRE_TRACES();
  {
    ImportResult imp = import_kineto_file(trace_path("hta_train_v100_ns_resolution.json.gz"));
    ASSERT_TRUE(imp.ok) << imp.error;
    const Report r = analyze(imp.store);
    EXPECT_EQ(r.summary.last_step_backlog_ns, 89'238'254);
    EXPECT_EQ(r.summary.outside_steps_ns, 11'623'315);  // was 100'861'569
    EXPECT_EQ(r.summary.steps_wall_ns, 394'140'808);    // the host windows, unchanged
    for (const auto& f : r.findings) EXPECT_NE(f.id, "outside_steps") << f.title;
  }
  {
    ImportResult imp = import_kineto_file(trace_path("kineto_resnet50_nw4_v100.json.gz"));
    ASSERT_TRUE(imp.ok) << imp.error;
    const Report r = analyze(imp.store);
    EXPECT_EQ(r.summary.last_step_backlog_ns, 8'052'000);
    EXPECT_EQ(r.summary.outside_steps_ns, 491'000);  // was 8'543'000
  }
}

// Issue 26, item 5: no shared trace ends with an unrecorded stretch (their
// last steps record up to 10-34 us before their end, or their device runs
// past it; hta_sampled's 4.4 ms is 0.7% of its step and every step ends
// so), so none is trimmed: the rule does not fire on healthy traces.
// (The 80.4 ms V100 case is planted: PlantedAccounting.TrailingUnrecorded...)
TEST(RealTraces, NoSharedTraceEndsWithAnUnrecordedStretch) {
  GPUUTIL_REQUIRE_TRACES();
  for (const auto& path : all_traces()) {
    SCOPED_TRACE(path);
    ImportResult imp = import_kineto_file(path);
    ASSERT_TRUE(imp.ok) << imp.error;
    const Report r = analyze(imp.store);
    EXPECT_EQ(r.summary.last_step_unrecorded_ns, 0);
    EXPECT_EQ(r.diagnostics.count(Diag::trailing_unrecorded_stretch), 0u);
    if (!imp.store.steps.empty()) {
      EXPECT_EQ(r.steps.back().end_ns, imp.store.steps.back().end_ns);
    }
  }
}

// Independent check: parse the raw JSON with nlohmann (not our importer),
// take the union of kernel/memcpy/memset intervals per ProfilerStep window
// with a plain sort-and-sweep, and compare with the engine's busy_ns.
std::string gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

TEST(RealTraces, ResnetBusyTimeEqualsIndependentUnionOfDeviceIntervals) {
  GPUUTIL_REQUIRE_TRACES();
  const auto path = trace_path("kineto_resnet50_nw4_v100.json.gz");
  const auto j = nlohmann::json::parse(gunzip(path));
  std::vector<std::pair<int64_t, int64_t>> work;
  std::map<int64_t, std::pair<int64_t, int64_t>> windows;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const std::string cat = e.value("cat", "");
    const std::string name = e.value("name", "");
    // This trace has integral microsecond timestamps: exact in a double.
    const auto ts = static_cast<int64_t>(e["ts"].get<double>()) * 1000;
    const auto dur = static_cast<int64_t>(e["dur"].get<double>()) * 1000;
    if (cat == "Kernel" || cat == "Memcpy" || cat == "Memset") work.emplace_back(ts, ts + dur);
    if (name.rfind("ProfilerStep#", 0) == 0) windows[std::stoll(name.substr(13))] = {ts, ts + dur};
  }
  ASSERT_EQ(windows.size(), 6u);
  std::sort(work.begin(), work.end());

  ImportResult imp = import_kineto_file(path);
  ASSERT_TRUE(imp.ok) << imp.error;
  const Report r = analyze(imp.store);
  ASSERT_EQ(r.steps.size(), 6u);
  for (const auto& s : r.steps) {
    const auto [lo, hi] = windows.at(s.step);
    EXPECT_EQ(s.start_ns, lo);
    EXPECT_EQ(s.end_ns, hi);
    int64_t busy = 0, cur_lo = 0, cur_hi = -1;
    for (const auto& [a0, b0] : work) {
      const int64_t a = std::max(a0, lo), b = std::min(b0, hi);
      if (a >= b) continue;
      if (a > cur_hi) {
        if (cur_hi > cur_lo) busy += cur_hi - cur_lo;
        cur_lo = a;
        cur_hi = b;
      } else {
        cur_hi = std::max(cur_hi, b);
      }
    }
    if (cur_hi > cur_lo) busy += cur_hi - cur_lo;
    ASSERT_EQ(s.devices.size(), 1u);
    EXPECT_EQ(s.devices[0].busy_ns, busy) << "step " << s.step;
  }
}

// The healthy 4-worker run: the GPU is mostly busy and the DataLoader
// explains almost none of the idle time.
TEST(RealTraces, HealthyResnetRunIsNotInputBound) {
  GPUUTIL_REQUIRE_TRACES();
  ImportResult imp = import_kineto_file(trace_path("kineto_resnet50_nw4_v100.json.gz"));
  ASSERT_TRUE(imp.ok) << imp.error;
  const Report r = analyze(imp.store);
  ASSERT_EQ(r.summary.devices.size(), 1u);
  const auto& d = r.summary.devices[0];
  const double busy = static_cast<double>(d.breakdown.busy_ns()) / static_cast<double>(d.wall_ns);
  const double dl = static_cast<double>(idle_of(d.breakdown, IdleCause::kDataloader)) / static_cast<double>(d.wall_ns);
  EXPECT_GT(busy, 0.5);
  EXPECT_LT(dl, 0.05);
  for (const auto& f : r.findings) EXPECT_NE(f.id, "idle_dataloader");
}

// A starved input pipeline, synthesised from the real run: every step's
// DataLoader wait grows by 40 ms and everything after it in the step shifts
// later, as a slow loader would make it. The GPU drains during the wait, so
// the added idle time must land in idle_dataloader.
TEST(RealTraces, StarvedDataloaderRunPutsMostIdleIntoDataloader) {
  GPUUTIL_REQUIRE_TRACES();
  ImportResult imp = import_kineto_file(trace_path("kineto_resnet50_nw4_v100.json.gz"));
  ASSERT_TRUE(imp.ok) << imp.error;
  EventStore& s = imp.store;
  const int64_t delay_ns = 40'000'000;
  // DataLoader ranges, in time order: each one's end is where the shift starts.
  std::vector<int64_t> cut_points;
  for (auto& r : s.ranges) {
    if (r.category == RangeCategory::kDataloader) cut_points.push_back(r.end_ns);
  }
  std::sort(cut_points.begin(), cut_points.end());
  ASSERT_GE(cut_points.size(), 6u);
  // Cut points at or before t.
  auto cuts_upto = [&](int64_t t) {
    return static_cast<int64_t>(std::upper_bound(cut_points.begin(), cut_points.end(), t) - cut_points.begin());
  };
  auto shift = [&](int64_t t) { return t + delay_ns * cuts_upto(t); };
  auto shift_end = [&](int64_t start, int64_t end) {
    // An interval that contains a cut point (start < cut <= end) stretches:
    // the DataLoader range itself and the step around it. Others move whole.
    return shift(start) + (end - start) + delay_ns * (cuts_upto(end) - cuts_upto(start));
  };
  // Device work moves by the cuts before its LAUNCH: work queued before a
  // slow DataLoader call still runs on time; work launched after it is late.
  std::map<uint64_t, int64_t> launch_ns;
  for (const auto& c : s.api_calls) {
    if (c.correlation_id != 0) launch_ns[c.correlation_id] = c.start_ns;
  }
  for (auto& a : s.activities) {
    auto it = launch_ns.find(a.correlation_id);
    const int64_t issued = it != launch_ns.end() ? it->second : a.start_ns;
    const int64_t moved = delay_ns * cuts_upto(issued);
    a.start_ns += moved;
    a.end_ns += moved;
  }
  for (auto& c : s.api_calls) {
    const int64_t e = shift_end(c.start_ns, c.end_ns);
    c.start_ns = shift(c.start_ns);
    c.end_ns = e;
  }
  for (auto& r : s.ranges) {
    const int64_t e = shift_end(r.start_ns, r.end_ns);
    r.start_ns = shift(r.start_ns);
    r.end_ns = e;
  }
  for (auto& w : s.steps) {
    const int64_t e = shift_end(w.start_ns, w.end_ns);
    w.start_ns = shift(w.start_ns);
    w.end_ns = e;
  }
  const Report r = analyze(s);
  ASSERT_EQ(r.summary.devices.size(), 1u);
  const auto& d = r.summary.devices[0];
  EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);
  const int64_t dl = idle_of(d.breakdown, IdleCause::kDataloader);
  EXPECT_GT(dl, d.breakdown.idle_total_ns() / 2);
  EXPECT_GE(dl, static_cast<int64_t>(r.steps.size()) * delay_ns * 8 / 10);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].id, "idle_dataloader");
}

}  // namespace
}  // namespace gpuutil
