// The live GPU path against a fake CUPTI that behaves like the real one
// (tests/fake_cupti), under every cell of the fake's matrix that CI runs
// (fake_cupti_matrix.h: each behaviour the CUPTI headers leave open is a
// setting): the thread id CUPTI records, device records that arrive only
// once the device finished, withheld buffers, a never-idle pipelined loop,
// driver-API launches, CUDA graphs and stream capture, calls that never
// yield a device record, another CUPTI client taking over, CUPTI's clock
// and version numbering. Each test pins a behaviour a real training job
// depends on and that the collector once got wrong, or still gets wrong
// under some cell: those cells are skipped with "issue 27: <why>" until
// the collector is fixed (docs/live-collection.md, "The fake's matrix").
//
// GPUUTIL_FAKE_CUPTI_CELLS=full runs every cell (the longer run).
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "collectors/torch/hook_drain.h"
#include "fake_cupti_client.h"
#include "fake_cupti_matrix.h"
#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"
#include "gpuutil/report_json.h"
#include "gpuutil/run_totals.h"
#include "gpuutil/thread_key.h"
#include "hook_ring.h"
#include "live_helpers.h"
#include "matrix_cell.h"

namespace gpuutil {
namespace {

using testing::cell_name;
using testing::FakeCupti;
using testing::MatrixTest;

using testing::collect;
using testing::collect_for;
using testing::count;
using testing::kMs;
using testing::launch_at;
using testing::pool;
using testing::sleep_until;

int64_t idle(const DeviceStepReport& d, IdleCause c) { return d.breakdown.idle_ns[static_cast<size_t>(c)]; }

// The cell a test runs under, chosen for the test's whole length.
class Faithful : public MatrixTest {};

INSTANTIATE_TEST_SUITE_P(Matrix, Faithful, ::testing::ValuesIn(fake_matrix::cells_for_run()), cell_name);

// ---- thread identity ----

struct TestHookTag {};
using TestRings = gpuutil_hook::RingSet<TestHookTag>;
const GpuutilHookApi kTestHookApi = {GPUUTIL_HOOK_API_VERSION, &TestRings::drain_into};

TEST_P(Faithful, DataloaderRangeFromTheTorchHookPathAndALaunchFromTheSameThreadLandOnOneSessionThread) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  torch_hook::HookDrain hook(session, &kTestHookApi);
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  std::thread training([&] {
    // What the LibTorch hook records for a DataLoader wait, then the step's
    // launch: both from this one real thread.
    const int64_t a = session_now_ns();
    usleep(20'000);
    TestRings::record("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", a, session_now_ns(), 0);
    fake.launch("gemm", 7, 2 * kMs, 5000);
    fake.synchronize();
  });
  training.join();
  session.end_step(session_now_ns());
  hook.drain();
  live.stop();
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u);
  const DeviceStepReport& d = out[0].report.steps[0].devices.at(0);
  EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);
  // The gap before the kernel is the DataLoader wait of the launching thread.
  EXPECT_GE(idle(d, IdleCause::kDataloader), 19 * kMs) << out[0].json.substr(0, 2000);
  // Keyed apart, the 20 ms wait would land here; scheduling noise on a busy
  // machine adds a few ms.
  EXPECT_LT(idle(d, IdleCause::kHost), 10 * kMs);
}

TEST_P(Faithful, ThreadsAreJoinedByOsTidWhenAnotherToolSwitchedCuptiToOsThreadIds) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  auto set_type = fake.driver<CUptiResult (*)(CUpti_ActivityThreadIdType)>("cuptiSetThreadIdType");
  set_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  // A host range from this thread, keyed as every host source keys it.
  const uint32_t me = session.thread_index(getpid(), this_thread_key(), "main", this_os_tid());
  usleep(10'000);
  HostRange r;
  r.name = session.intern("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  r.start_ns = t0;
  r.end_ns = session_now_ns();
  r.thread = me;
  r.category = RangeCategory::kDataloader;
  session.add_range(r);
  fake.launch("gemm", 7, kMs, 5000);
  fake.synchronize();
  session.end_step(session_now_ns());
  live.stop();
  set_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT);
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::cupti_thread_ids_os), 1u);
  EXPECT_GE(idle(out[0].report.steps[0].devices.at(0), IdleCause::kDataloader), 9 * kMs);
}

// ---- completeness: device records arrive once the device finished ----

// The host runs ahead: each 10 ms step launches its kernel 1 ms before the
// step ends, and the kernel runs 6 ms, into the next step. Nobody syncs.
//
// The launches and step ends carry planted session times, so the planted
// timeline must stay causal: each launch must really return before the
// planted end of its step. On a loaded machine the thread can wake late
// and launch after that end, which no real program does (its step end is
// taken after the launch returns): a flush between the planted and the real
// launch time then rightly finds the step complete without it. Such a run
// is discarded and the scenario played again (up to 5 times, then skipped
// with the reason); it fails only on a causal run.
std::optional<std::vector<StepOutput>> play_pipelined_loop() {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  EXPECT_EQ(live.start(), "");
  const int steps = 8;
  const int64_t t0 = session_now_ns() + 2 * kMs;
  std::vector<StepOutput> out;
  bool causal = true;
  for (int n = 0; n < steps; ++n) {
    const int64_t h = t0 + n * 10 * kMs;
    session.begin_step(n, h);
    sleep_until(h + 9 * kMs);
    launch_at(fake, "gemm", 7, h + 9 * kMs, h + 9 * kMs + 10'000, h + 15 * kMs + 10'000);
    if (session_now_ns() > h + 9 * kMs + 800'000) causal = false;  // returned too close to (or past) the step's end
    sleep_until(h + 10 * kMs);
    session.end_step(h + 10 * kMs);
    for (auto& o : collect(session, live)) out.push_back(std::move(o));
  }
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  if (!causal) return std::nullopt;
  return out;
}

TEST_P(Faithful, APipelinedLoopReportsEveryKernelInTheStepsItRunsIn) {
  std::optional<std::vector<StepOutput>> played;
  for (int attempt = 0; attempt < 5 && !played; ++attempt) played = play_pipelined_loop();
  if (!played) GTEST_SKIP() << "5 runs in a row launched past their planted step end (machine too loaded)";
  const std::vector<StepOutput>& out = *played;
  const int steps = 8;
  const int64_t skew = cell().skew_ns;  // the kernels appear this much earlier
  ASSERT_EQ(out.size(), size_t(steps));
  for (int n = 0; n < steps; ++n) {
    const auto& r = out[size_t(n)].report;
    ASSERT_EQ(r.steps[0].step, n);
    const DeviceStepReport& d = r.steps[0].devices.at(0);
    // Its own kernel's first 1 ms - 10 us, and the previous kernel's last 5 ms + 10 us.
    EXPECT_EQ(d.breakdown.compute_ns, n == 0 ? kMs - 10'000 + skew : 6 * kMs) << "step " << n;
    EXPECT_EQ(d.kernels, 1u) << "step " << n << ": kernels starting in it";
    EXPECT_EQ(r.diagnostics.count(Diag::cupti_records_late), 0u);
    EXPECT_EQ(r.diagnostics.count(Diag::cupti_completion_timeout), 0u);
  }
}

// The headline (issue 27): a training loop that never lets the GPU
// idle. The host runs ahead of the GPU (it keeps 25 ms of work queued),
// launches two 5 ms kernels per 10 ms step and never syncs, so the
// device is busy for every nanosecond of every step after the first launch:
// each step's compute must equal its wall (within 2%), under both sealing
// behaviours, both device-record placements and both buffer placements.
// The collector's completion bound is scaled down to 100 ms (the issue's own
// reproduction), so a 0.4 s loop shows what the 2 s bound does to a long run.
class NeverIdle : public Faithful {};

std::vector<fake_cupti_matrix> never_idle_cells() {
  if (std::getenv("GPUUTIL_FAKE_CUPTI_CELLS") != nullptr) return fake_matrix::cells_for_run();
  std::vector<fake_cupti_matrix> out;
  for (const char* seal : {"seal=1", "seal=0"})
    for (const char* records : {"records=thread", "records=device"})
      for (const char* buffers : {"buffers=thread", "buffers=global"})
        out.push_back(fake_matrix::cell(std::string(seal) + "," + records + "," + buffers));
  return out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, NeverIdle, ::testing::ValuesIn(never_idle_cells()), cell_name);

TEST_P(NeverIdle, ALoopThatNeverLetsTheGpuIdleReportsComputeEqualToWallInEveryStep) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveOptions options = pool();
  options.cupti_completion_wait_ms = 100;
  LiveCollector live(session, options);
  ASSERT_EQ(live.start(), "");
  const int steps = 40;
  std::vector<StepOutput> out;
  int64_t begin = session_now_ns();
  int64_t queued_until = begin;  // when the GPU runs out of work
  for (int n = 0; n < steps; ++n) {
    session.begin_step(n, begin);
    // Keep the GPU 25 ms ahead whatever the host's own pace (a loaded
    // machine oversleeps): two 5 ms kernels in a steady step.
    while (queued_until < session_now_ns() + 25 * kMs) {
      fake.launch("gemm", 7, 5 * kMs, 5000);
      queued_until = std::max(queued_until, session_now_ns() + 5000) + 5 * kMs;
    }
    sleep_until(begin + 10 * kMs);
    const int64_t end = session_now_ns();
    session.end_step(end);
    begin = end;
    for (auto& o : collect(session, live)) out.push_back(std::move(o));
  }
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  ASSERT_EQ(out.size(), size_t(steps));
  int idle_steps = 0;
  std::string which;
  for (const auto& o : out) {
    const StepReport& s = o.report.steps[0];
    const int64_t compute = s.devices.empty() ? 0 : s.devices[0].breakdown.compute_ns;
    if (double(compute) >= 0.98 * double(s.wall_ns)) continue;
    ++idle_steps;
    which += " " + std::to_string(s.step) + ":" + std::to_string(compute / 1000) + "us";
  }
  EXPECT_EQ(idle_steps, 0) << "of " << steps << " steps on a GPU that never idled, these had under 98% compute "
                           << "(step:compute of a ~10 ms wall):" << which;
  EXPECT_EQ(count(out, Diag::cupti_records_late), 0u);
  EXPECT_EQ(count(out, Diag::cupti_completion_timeout), 0u);
}

// ---- completeness: waiting never turns busy time into idle (issue 27) ----

// The host runs 300 ms ahead of the GPU (three 10 ms kernels per 10 ms
// step, 15 steps), 3x the completion bound the collector used to give up
// after (scaled here to 100 ms, as in NeverIdle). The GPU never idles from
// the first kernel on, and keeps progressing: every step must come out with
// compute equal to its wall, none late, none incomplete, none timed out.
TEST_P(Faithful, ABacklogThreeTimesTheOldBoundReportsNoBusyTimeAsIdle) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveOptions options = pool();
  options.cupti_completion_wait_ms = 100;
  LiveCollector live(session, options);
  ASSERT_EQ(live.start(), "");
  const int steps = 15;
  std::vector<StepOutput> out;
  int64_t begin = session_now_ns();
  for (int n = 0; n < steps; ++n) {
    session.begin_step(n, begin);
    for (int k = 0; k < 3; ++k) fake.launch("gemm", 7, 10 * kMs, 5000);
    sleep_until(begin + 10 * kMs);
    const int64_t end = session_now_ns();
    session.end_step(end);
    begin = end;
    for (auto& o : collect(session, live)) out.push_back(std::move(o));
  }
  // The GPU works through the backlog (about 300 ms more): the reports come
  // as it does, without a stop forcing them.
  for (int i = 0; i < 1500 && out.size() < size_t(steps); ++i) {
    usleep(2'000);
    for (auto& o : collect(session, live)) out.push_back(std::move(o));
  }
  EXPECT_EQ(out.size(), size_t(steps)) << "every step is reported once the GPU caught up, before stop()";
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  ASSERT_EQ(out.size(), size_t(steps));
  std::string which;
  for (const auto& o : out) {
    const StepReport& st = o.report.steps[0];
    EXPECT_TRUE(st.complete) << "step " << st.step;
    const int64_t compute = st.devices.empty() ? 0 : st.devices[0].breakdown.compute_ns;
    if (double(compute) < 0.98 * double(st.wall_ns)) which += " " + std::to_string(st.step) + ":" + std::to_string(compute / 1000) + "us";
  }
  EXPECT_EQ(which, "") << "steps on a GPU that never idled reported with idle time (step:compute of ~10 ms)";
  EXPECT_EQ(count(out, Diag::cupti_records_late), 0u);
  EXPECT_EQ(count(out, Diag::cupti_completion_timeout), 0u);
  EXPECT_EQ(count(out, Diag::cupti_step_incomplete), 0u);
}

// CUPTI writes a call's API record when the call returns, after the
// device record the call reserved in the same per-thread buffer. A flush
// between the two (here: flushes every millisecond while a launch takes
// 30 ms to return) closes the buffer holding the kernel's record, so the
// API record opens the next one, which the next step's 150 ms kernel keeps
// held. The kernel's record alone must not complete the launch: step 0 is
// reported only with its launch's API record (its launch latency), and no
// record comes late. Failed under api=exit with per-thread records before
// the tracker waited for both (once in ctest -j4 runs on 2 cores).
TEST_P(Faithful, ALaunchWaitsForItsApiRecordWhenAFlushSplitsItFromItsKernel) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  const auto flush_all = fake.driver<CUptiResult (*)(uint32_t)>("cuptiActivityFlushAll");
  ASSERT_NE(flush_all, nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  std::vector<StepOutput> out;
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  std::atomic<bool> returned{false};
  std::thread flusher([&] {
    while (!returned.load()) {
      flush_all(0);
      usleep(1'000);
    }
  });
  fake_cupti_work w{};
  w.kind = FAKE_CUPTI_KERNEL;
  w.name = "x";
  w.stream = 7;
  w.duration_ns = 1 * kMs;
  w.latency_ns = 5000;
  w.grid[0] = 132;
  w.block[0] = 256;
  fake_cupti_call c{};
  c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  c.api_ns = 30 * kMs;
  c.work = &w;
  c.n_work = 1;
  fake.call(&c);
  returned = true;
  flusher.join();
  const int64_t t1 = session_now_ns();
  session.end_step(t1);
  session.begin_step(1, t1);
  fake.launch("y", 7, 150 * kMs, 5000);
  sleep_until(t1 + 10 * kMs);
  session.end_step(session_now_ns());
  for (auto& o : collect_for(session, live, 2, 3000)) out.push_back(std::move(o));
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(count(out, Diag::cupti_records_late), 0u) << "the launch's API record came after its step was reported";
  const StepReport& st = out[0].report.steps[0];
  EXPECT_TRUE(st.complete);
  ASSERT_EQ(st.devices.size(), 1u);
  EXPECT_TRUE(st.devices[0].launch_latency_p50_ns.has_value()) << "step 0 was reported without its launch's API record";
  EXPECT_EQ(st.devices[0].kernels, 1u);
}

// With the held-steps bound forced down to one step, steps whose kernel
// still runs are reported at once as incomplete (complete: false, the
// diagnostic, no findings), kept out of the run's totals; the kernel's
// records, arriving later, are counted late, never silently pruned.
TEST_P(Faithful, AForcedBoundReportsStepsIncompleteAndKeepsThemOutOfTotals) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveOptions o = pool();
  o.cupti_max_held_steps = 1;
  LiveCollector live(session, o);
  ASSERT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  launch_at(fake, "long_kernel", 7, t0 + kMs, t0 + 2 * kMs, t0 + 200 * kMs);  // runs 198 ms
  std::vector<StepOutput> out;
  for (int n = 0; n < 3; ++n) {
    sleep_until(t0 + (n + 1) * 5 * kMs);
    session.end_step(t0 + (n + 1) * 5 * kMs);
    session.begin_step(n + 1, t0 + (n + 1) * 5 * kMs);
    for (auto& r : collect(session, live)) out.push_back(std::move(r));
  }
  for (int i = 0; i < 50 && out.size() < 2; ++i) {
    usleep(2'000);
    for (auto& r : collect(session, live)) out.push_back(std::move(r));
  }
  EXPECT_LT(session_now_ns(), t0 + 200 * kMs) << "reported before the kernel finished";
  ASSERT_EQ(out.size(), 2u) << "steps 0 and 1: more than one step waited";
  for (const auto& r : out) {
    EXPECT_FALSE(r.report.steps[0].complete) << "step " << r.report.steps[0].step;
    EXPECT_NE(r.json.find("\"complete\":false"), std::string::npos) << r.json.substr(0, 400);
    EXPECT_EQ(r.report.diagnostics.count(Diag::cupti_step_incomplete), 1u);
    EXPECT_NE(r.report.diagnostics.example(Diag::cupti_step_incomplete).find("long_kernel"), std::string::npos)
        << r.report.diagnostics.example(Diag::cupti_step_incomplete);
    EXPECT_TRUE(r.report.findings.empty());
  }
  EXPECT_EQ(session.run_totals().steps, 0u) << "incomplete steps are kept out of the run's totals";
  EXPECT_EQ(session.steps_incomplete(), 2u);
  sleep_until(t0 + 210 * kMs);
  session.end_step(session_now_ns());
  live.flush();
  live.stop();
  const auto rest = session.finish(session_now_ns());
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_GE(count(rest, Diag::cupti_records_late), 1u) << "the kernel and its launch arrived after step 0 was reported";
  // It still counts where it can: step 3, which it overlaps, complete.
  EXPECT_TRUE(rest[1].report.steps[0].complete);
  EXPECT_EQ(rest[1].report.steps[0].devices.at(0).breakdown.compute_ns,
            200 * kMs - cell().skew_ns - rest[1].report.steps[0].start_ns + t0);
  // The run's time still adds up exactly: the incomplete steps' wall is
  // outside time, named "incomplete" (live totals and the fold of the
  // reports read back alike).
  std::vector<Report> reports;
  int64_t incomplete_ns = 0;
  uint64_t incomplete = 0;
  const std::vector<const std::vector<StepOutput>*> parts = {&out, &rest};
  for (const std::vector<StepOutput>* part : parts) {
    for (const auto& r : *part) {
      reports.push_back(r.report);
      if (!r.report.steps[0].complete) {
        incomplete_ns += r.report.steps[0].wall_ns;
        ++incomplete;
      }
    }
  }
  const int64_t run_wall_ns = rest.back().report.steps[0].end_ns - t0;
  const size_t kIncomplete = static_cast<size_t>(OutsideKind::kIncomplete);
  for (const RunTotals& t : {session.run_totals(), run_totals_of_reports(reports)}) {
    EXPECT_EQ(t.steps_wall_ns + t.outside_steps_ns, run_wall_ns);
    EXPECT_EQ(t.outside_named_ns[kIncomplete], incomplete_ns);
    EXPECT_EQ(t.incomplete_steps, incomplete);
    int64_t named = 0;
    for (int64_t ns : t.outside_named_ns) named += ns;
    EXPECT_EQ(named, t.outside_steps_ns) << "the named parts sum to the outside time";
  }
  EXPECT_GE(incomplete, 2u);
  const std::string json = run_totals_to_json(session.run_totals());
  EXPECT_NE(json.find("\"incomplete\":" + std::to_string(incomplete_ns)), std::string::npos) << json.substr(0, 400);
  EXPECT_NE(json.find("\"incomplete_steps\":" + std::to_string(incomplete)), std::string::npos);
}

// A kernel that never finishes (a hang, a collective waiting on a rank that
// never comes) is named, with its stream's oldest waiting launch, once no
// device record arrived for stuck_after_ms; its steps are incomplete, not idle.
// Options that name a launch stuck after 100 ms without a device record.
LiveOptions stuck_after_100ms() {
  LiveOptions o = pool();
  o.cupti_stuck_after_ms = 100;
  o.cupti_completion_wait_ms = 50;
  return o;
}

// The first gpu_stuck example among `out`, "" when none.
std::string stuck_example(const std::vector<StepOutput>& out) {
  for (const auto& r : out) {
    if (r.report.diagnostics.count(Diag::gpu_stuck) > 0) return r.report.diagnostics.example(Diag::gpu_stuck);
  }
  return "";
}

TEST_P(Faithful, AHungKernelIsNamedAsStuck) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, stuck_after_100ms());
  ASSERT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  launch_at(fake, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7, t0 + kMs, t0 + 2 * kMs, t0 + 3600'000 * kMs);
  std::vector<StepOutput> out;
  for (int n = 0; n < 3; ++n) {
    sleep_until(t0 + (n + 1) * 10 * kMs);
    session.end_step(t0 + (n + 1) * 10 * kMs);
    session.begin_step(n + 1, t0 + (n + 1) * 10 * kMs);
    for (auto& r : collect(session, live)) out.push_back(std::move(r));
  }
  for (int i = 0; i < 150; ++i) {
    usleep(2'000);
    for (auto& r : collect(session, live)) out.push_back(std::move(r));
  }
  EXPECT_TRUE(out.empty()) << "nothing is given up while fewer steps than the bound wait";
  session.end_step(session_now_ns());
  live.stop();
  for (auto& r : session.finish(session_now_ns())) out.push_back(std::move(r));
  fake.reset(nullptr);  // the hung kernel
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(count(out, Diag::gpu_stuck) >= 1, true);
  const std::string example = stuck_example(out);
  bool finding = false;
  for (const auto& r : out) {
    for (const auto& f : r.report.findings) finding = finding || (f.id == "gpu_stuck" && f.title.find("GPU stuck in ncclDevKernel") == 0);
    EXPECT_FALSE(r.report.steps[0].complete) << "step " << r.report.steps[0].step << ": its kernel never finished";
  }
  EXPECT_EQ(example.rfind("GPU stuck in ncclDevKernel_AllReduce_Sum_f32_RING_LL on ", 0), 0u) << example;
  EXPECT_TRUE(finding) << "a gpu_stuck finding names the kernel";
  EXPECT_EQ(live.counters().stuck, 1u);
}

// A launch learnt at API exit names its stream by the handle in the call's
// parameters; the collector turns it into CUPTI's stream id (the one the
// stream's device records carry) only when it names the launch stuck.
// Runs `warmup` at the start and `hang` 20 ms later (once the warm-up's
// records are in: a record never shares a buffer with the hung one), in
// steps of 10 ms, with `beside` called every 2 ms, for `iterations` x 2 ms;
// returns the gpu_stuck example.
using FakeAt = std::function<void(FakeCupti&, int64_t)>;
std::string stuck_on(const FakeAt& warmup, const FakeAt& hang, const FakeAt& beside = nullptr,
                     uint64_t* stuck = nullptr, int64_t stuck_after_ms = 100, int iterations = 150) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveOptions options = stuck_after_100ms();
  options.cupti_stuck_after_ms = stuck_after_ms;
  LiveCollector live(session, options);
  EXPECT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  if (warmup) warmup(fake, t0);
  std::vector<StepOutput> out;
  for (int i = 0; i < iterations; ++i) {
    usleep(2'000);
    if (i == 10) hang(fake, session_now_ns());
    if (beside) beside(fake, session_now_ns());
    if (i % 5 == 4) {
      session.end_step(session_now_ns());
      session.begin_step(i / 5 + 1, session_now_ns());
    }
    for (auto& r : collect(session, live)) out.push_back(std::move(r));
  }
  session.end_step(session_now_ns());
  live.stop();
  for (auto& r : session.finish(session_now_ns())) out.push_back(std::move(r));
  if (stuck != nullptr) *stuck = live.counters().stuck;
  fake.reset(nullptr);  // the hung work
  return stuck_example(out);
}

// A kernel that finishes at once on `stream` (cbid: the launch call).
FakeAt finishes_on(uint32_t stream, uint32_t cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
  return [=](FakeCupti& fake, int64_t t) { launch_at(fake, "warmup", stream, t, t + 10'000, t + 20'000, cbid); };
}

// A kernel `name` on `stream` that never finishes.
FakeAt hangs_on(const char* name, uint32_t stream, uint32_t cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
  return [=](FakeCupti& fake, int64_t t) { launch_at(fake, name, stream, t, t + kMs, t + 3600'000 * kMs, cbid); };
}

TEST(CuptiFaithful, AHungKernelOnAStreamOfItsOwnIsNamedWithTheStreamIdItsRecordsCarry) {
  const std::string example = stuck_on(finishes_on(13), hangs_on("hung_matmul", 13));
  EXPECT_EQ(example.rfind("GPU stuck in hung_matmul on stream 13 since ", 0), 0u) << example;
}

// CUPTI names a kernel only for launches (symbolName); a hung copy is
// named for what it is, with the call that made it, never "unnamed". On the
// legacy default stream (a NULL handle) it is that context's stream 7.
TEST(CuptiFaithful, AHungCopyIsNamedAsTheCopyItIsWithTheCallThatMadeIt) {
  const std::string example = stuck_on(nullptr, [](FakeCupti& fake, int64_t t) {
    fake.call_at(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, FAKE_CUPTI_MEMCPY, "copy", 7, t, t + kMs,
                 t + 3600'000 * kMs);
  });
  EXPECT_EQ(example.rfind("GPU stuck in a copy (cudaMemcpyAsync) on stream 7 since ", 0), 0u) << example;
}

TEST(CuptiFaithful, AHungCopyOnAStreamOfItsOwnIsNamedWithItsStream) {
  const std::string example = stuck_on(nullptr, [](FakeCupti& fake, int64_t t) {
    fake.call_at(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, FAKE_CUPTI_MEMCPY, "copy", 14, t, t + kMs,
                 t + 3600'000 * kMs);
  });
  EXPECT_EQ(example.rfind("GPU stuck in a copy (cudaMemcpyAsync) on stream 14 since ", 0), 0u) << example;
}

// The per-thread default stream (a _ptsz call with a NULL stream) can only
// be resolved on its own thread: its id comes from an earlier launch's record.
TEST(CuptiFaithful, AHungKernelOnThePerThreadDefaultStreamIsNamedWithThatStream) {
  const auto per_thread = FakeCupti::get().driver<uint32_t (*)()>("fake_cupti_per_thread_stream");
  ASSERT_NE(per_thread, nullptr);
  const uint32_t mine = per_thread();
  constexpr uint32_t kPtsz = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000;
  const std::string example = stuck_on(finishes_on(mine, kPtsz), hangs_on("hung_ptsz", mine, kPtsz));
  EXPECT_EQ(example.rfind("GPU stuck in hung_ptsz on stream " + std::to_string(mine) + " since ", 0), 0u) << example;
}

// A hung stream is named while another stream, fed from another thread
// (its records in a buffer of their own), keeps finishing work: the wait is
// judged by progress on the stuck launch's own stream. Named after 500 ms:
// longer than the drain thread's longest flush interval (200 ms), so the
// busy stream's records arrive well within it.
TEST(CuptiFaithful, AHungStreamIsNamedWhileAnotherStreamKeepsDelivering) {
  std::atomic<bool> quit{false};
  std::thread busy;
  uint64_t stuck = 0;
  const std::string example = stuck_on(
      [&](FakeCupti& fake, int64_t t) {
        finishes_on(13)(fake, t);
        busy = std::thread([&] {
          while (!quit.load()) {
            const int64_t now = session_now_ns();
            launch_at(FakeCupti::get(), "busy", 7, now, now + 10'000, now + 60'000);
            usleep(2'000);
          }
        });
      },
      hangs_on("ncclDevKernel_AllReduce", 13), nullptr, &stuck, 500, 600);
  quit = true;
  busy.join();
  EXPECT_EQ(example.rfind("GPU stuck in ncclDevKernel_AllReduce on stream 13 since ", 0), 0u) << example;
  EXPECT_EQ(stuck, 1u);
}

TEST_P(Faithful, StopWaitsForRunningWorkSoNothingArrivesUnfinished) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  fake.launch("still_running", 7, 80 * kMs, 5000);
  session.end_step(session_now_ns() + 100 * kMs);
  live.stop();  // before the kernel finished
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].report.steps[0].devices.at(0).kernels, 1u);
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::cupti_timestamp_invalid), 0u);
  EXPECT_EQ(live.counters().records_unfinished, 0u);
}

// ---- driver API, graphs, capture ----

TEST_P(Faithful, DriverApiLaunchIsMatchedToItsKernel) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  auto load = fake.driver<CUresult (*)(CUmodule*, const void*)>("cuModuleLoadData");
  auto get_function = fake.driver<CUresult (*)(CUfunction*, CUmodule, const char*)>("cuModuleGetFunction");
  auto launch = fake.driver<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                         unsigned, CUstream, void**, void**)>("cuLaunchKernel");
  auto sync = fake.driver<CUresult (*)()>("cuCtxSynchronize");
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  CUmodule module = nullptr;
  CUfunction f = nullptr;
  ASSERT_EQ(load(&module, ".version 8.0"), CUDA_SUCCESS);
  ASSERT_EQ(get_function(&f, module, "triton_poi_fused_add_0"), CUDA_SUCCESS);
  session.begin_step(0, session_now_ns());
  for (int i = 0; i < 3; ++i) launch(f, 64, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr);
  sync();
  session.end_step(session_now_ns());
  live.stop();
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u);
  const auto& r = out[0].report;
  EXPECT_EQ(r.steps[0].devices.at(0).kernels, 3u);
  EXPECT_EQ(r.diagnostics.count(Diag::launch_unmatched), 0u) << out[0].json.substr(0, 3000);
  EXPECT_TRUE(r.steps[0].devices.at(0).launch_latency_p50_ns.has_value());
  EXPECT_GT(live.counters().driver_cbids, 0u);
}

TEST_P(Faithful, AGraphLaunchIsCompleteOnlyOnceLaterWorkOnItsStreamArrived) {
  // Device records written at completion (whatever the cell says): the
  // graph's first nodes arrive while its last node, inside the step, still
  // runs.
  FakeCupti& fake = FakeCupti::get();
  fake_cupti_config cfg{};
  cfg.device_records = FAKE_CUPTI_DEVICE_RECORDS_IN_DEVICE_BUFFER;
  fake.reset(&cfg);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns() + kMs;
  fake_cupti_work nodes[3] = {};
  for (int i = 0; i < 3; ++i) {
    nodes[i].kind = FAKE_CUPTI_KERNEL;
    nodes[i].name = "graph_node";
    nodes[i].stream = 7;
    nodes[i].graph_id = 9;
    nodes[i].start_ns = t0 + (10 * i + 1) * kMs;
    nodes[i].end_ns = t0 + (10 * i + 10) * kMs;
  }
  fake_cupti_call g{};
  g.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  g.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
  g.start_ns = t0;
  g.end_ns = t0 + 10'000;
  g.work = nodes;
  g.n_work = 3;
  session.begin_step(0, t0);
  sleep_until(t0);
  fake.call(&g);
  sleep_until(t0 + 25 * kMs);
  session.end_step(t0 + 25 * kMs);
  session.begin_step(1, t0 + 25 * kMs);
  // Nodes 1 and 2 finished; node 3 runs until t0 + 30 ms.
  std::vector<StepOutput> early;
  for (int i = 0; i < 3; ++i) {
    usleep(1'000);
    for (auto& o : collect(session, live)) early.push_back(std::move(o));
  }
  EXPECT_TRUE(early.empty()) << "step 0 must wait for the graph's last node";
  launch_at(fake, "after_graph", 7, t0 + 26 * kMs, t0 + 30 * kMs, t0 + 31 * kMs);
  sleep_until(t0 + 35 * kMs);
  std::vector<StepOutput> out;
  for (int i = 0; i < 200 && out.empty(); ++i) {
    usleep(2'000);
    out = collect(session, live);
  }
  ASSERT_EQ(out.size(), 1u);
  const DeviceStepReport& d = out[0].report.steps[0].devices.at(0);
  EXPECT_EQ(d.kernels, 3u);
  // [1,10) [11,20) [21,25), each moved earlier by the cell's skew.
  EXPECT_EQ(d.breakdown.compute_ns, 9 * kMs + 9 * kMs + 4 * kMs + cell().skew_ns);
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::cupti_completion_timeout), 0u);
  session.end_step(session_now_ns());
  live.stop();
}

TEST_P(Faithful, LaunchesDuringStreamCaptureNeverHoldReportsBack) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveOptions o = pool();
  o.cupti_completion_wait_ms = 5000;  // a wait would show as a late report, not a timeout
  LiveCollector live(session, o);
  ASSERT_EQ(live.start(), "");
  auto api = [&](uint32_t cbid, int captured, int n_work) {
    fake_cupti_work w{};
    w.kind = FAKE_CUPTI_KERNEL;
    w.name = "captured";
    w.stream = 7;
    w.duration_ns = kMs;
    fake_cupti_call c{};
    c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    c.cbid = cbid;
    c.api_ns = 2000;
    c.captured = captured;
    c.work = &w;
    c.n_work = n_work;
    fake.call(&c);
  };
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, 0, 0);
  for (int i = 0; i < 4; ++i) api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1, 1);
  api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, 0, 0);
  usleep(2'000);
  session.end_step(session_now_ns());
  const int64_t asked = session_now_ns();
  const auto out = collect_for(session, live, 1, 400);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_LT(session_now_ns() - asked, 1000 * kMs) << "reported without waiting for kernels that never run";
  live.stop();
}

// ---- calls that never yield a device record hold nothing ----

// A step with one ordinary kernel and one call that will never have a
// device record (`odd`): the step must be reported as soon as the kernel's
// records are in, not once the completion bound (2 s) ran out, and no
// timeout is counted. Returns the step's report.
std::optional<StepOutput> step_with(const std::function<void(FakeCupti&, int64_t)>& odd) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  EXPECT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  launch_at(fake, "gemm", 7, t0, t0 + 10'000, t0 + kMs);
  odd(fake, t0 + 20'000);
  sleep_until(t0 + 3 * kMs);
  session.end_step(session_now_ns());
  session.begin_step(1, session_now_ns());
  auto out = collect_for(session, live, 1, 500);
  session.end_step(session_now_ns());
  live.stop();
  session.finish(session_now_ns());
  if (out.empty()) return std::nullopt;
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::cupti_completion_timeout), 0u);
  return std::move(out[0]);
}

TEST_P(Faithful, AFailedLaunchHoldsNothing) {
  const auto out = step_with([](FakeCupti& fake, int64_t t) {
    fake_cupti_work w{};
    w.kind = FAKE_CUPTI_KERNEL;
    w.name = "bad_config";
    w.stream = 7;
    w.duration_ns = kMs;
    fake_cupti_call c{};
    c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    c.start_ns = t;
    c.end_ns = t + 5000;
    c.work = &w;
    c.n_work = 1;
    fake.call_failed(&c, 9);  // cudaErrorInvalidConfiguration: an API record, no kernel
  });
  ASSERT_TRUE(out) << "the step waited for a kernel that a failed launch never ran";
  EXPECT_EQ(out->report.steps[0].devices.at(0).kernels, 1u);
}

TEST_P(Faithful, AZeroByteCopyHoldsNothing) {
  const auto out = step_with([](FakeCupti& fake, int64_t t) {
    // cudaMemcpyAsync of 0 bytes: CUDA returns at once and enqueues nothing.
    fake.call_at(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, FAKE_CUPTI_MEMCPY, nullptr, 7, t, 0, 0);
  });
  ASSERT_TRUE(out) << "the step waited for a copy record that a zero-byte copy never produces";
}

TEST_P(Faithful, APeerCopyIsCountedAndHoldsNothing) {
  const auto out = step_with([](FakeCupti& fake, int64_t t) {
    // A MEMCPY2 record, which arrives only if that kind is enabled.
    fake.call_at(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000, FAKE_CUPTI_MEMCPY_PEER, "peer", 9, t, t + 10'000,
                 t + 500'000);
  });
  ASSERT_TRUE(out) << "the step waited for a peer copy's record (MEMCPY2 not enabled)";
  EXPECT_EQ(out->report.steps[0].devices.at(0).memcpys, 1u);
}

TEST_P(Faithful, ASyncOnOneDeviceCompletesOnlyThatDevicesLaunches) {
  // Device 1 runs a 150 ms kernel; device 0 a short one, then the host syncs
  // device 0 only. Step 0 must wait for device 1's record, not be reported
  // without it.
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  fake.call_at(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, FAKE_CUPTI_KERNEL, "long_on_1", 7, t0, t0 + 10'000,
               t0 + 150 * kMs, 0, /*device=*/1);
  launch_at(fake, "short_on_0", 7, t0 + 10'000, t0 + 20'000, t0 + kMs);
  fake_cupti_call sync{};
  sync.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  sync.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020;
  sync.api_ns = 1000;
  sync.sync = FAKE_CUPTI_SYNC_DEVICE;
  sync.sync_device = 0;
  fake.call(&sync);
  const int64_t end = session_now_ns();
  session.end_step(end);
  session.begin_step(1, end);
  auto out = collect_for(session, live, 1, 1000);
  sleep_until(t0 + 160 * kMs);
  session.end_step(session_now_ns());
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  ASSERT_EQ(out.size(), 2u);
  const StepReport& s0 = out[0].report.steps[0];
  bool device1 = false;
  for (const auto& d : s0.devices) device1 = device1 || (d.device == 1 && d.kernels == 1);
  EXPECT_TRUE(device1) << "step 0 was reported without device 1's kernel: " << out[0].json.substr(0, 1500);
  EXPECT_EQ(count(out, Diag::cupti_records_late), 0u);
}

// ---- another CUPTI client (torch.profiler / Kineto) ----

// The CI cells, and the default cell with each way Kineto can behave as a
// second client (fake_cupti.h, FAKE_CUPTI_CLIENT_*).
class Coexistence : public Faithful {
 protected:
  bool client(int flag) const { return (cell().second_client & flag) != 0; }
};

std::vector<fake_cupti_matrix> coexistence_cells() {
  std::vector<fake_cupti_matrix> out = fake_matrix::cells_for_run();
  for (const char* c : {"client=teardown", "client=per_thread_reset", "client=other_thread", "client=own_clock"}) {
    out.push_back(fake_matrix::cell(c));
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Coexistence, ::testing::ValuesIn(coexistence_cells()), cell_name);

// Whether a step's report shows its one kernel, or says GPU collection was
// off or taken over (never zero activity as if it were a measurement).
// `mismatched`: kernel records counted in any report as stamped on the
// wrong clock (after another client's clock registration, the first kernels
// of gpuutil's next activity session are; counted and kept out: said).
::testing::AssertionResult kernel_or_collection_off(const StepOutput& o, uint64_t mismatched = 0) {
  const auto& devices = o.report.steps[0].devices;
  if (!devices.empty() && devices[0].kernels == 1) return ::testing::AssertionSuccess();
  if (mismatched > 0) return ::testing::AssertionSuccess();
  for (const char* said : {"gpu_collection_off", "gpu_collection_suspended", "cupti_taken_over"}) {
    if (o.json.find(said) != std::string::npos) return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "step " << o.report.steps[0].step
                                       << " reports no kernel and no reason: " << o.json.substr(0, 1500);
}

TEST_P(Coexistence, TorchProfilerStartingDuringAProfileGetsEveryKernelAndGpuutilResumesAfter) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  auto step = [&](int n, int kernels, auto&& inside) {
    session.begin_step(n, session_now_ns());
    inside();
    for (int i = 0; i < kernels; ++i) fake.launch("gemm", 7, 100'000, 5000);
    fake.synchronize();
    session.end_step(session_now_ns());
  };
  step(0, 1, [] {});
  // What gpuutil.torch's guard does before torch.profiler prepares its trace:
  live.suspend("torch.profiler started");
  EXPECT_EQ(fake.stats().enabled_kinds_mask, 0u);
  fake.second_client_start();
  step(1, 3, [] {});
  const fake_cupti_client_stats theirs = fake.second_client_stop();
  ASSERT_EQ(live.resume(), "");
  // Kineto's cuptiFinalize (TEARDOWN_CUPTI=1) comes after gpuutil resumed.
  fake.driver<void (*)()>("fake_cupti_wait")();
  step(2, 1, [] {});
  live.stop();
  EXPECT_EQ(theirs.kernels, 3u) << "torch.profiler's trace keeps its kernels";
  EXPECT_EQ(theirs.foreign_buffers_rejected, 0u) << "gpuutil gave every buffer back before it started";
  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  const int64_t realtime_now = int64_t(rt.tv_sec) * 1'000'000'000 + rt.tv_nsec;
  // A client that registers its clock (Kineto registers its TSC clock at
  // every trace start) gets its records on it; one that does not gets the
  // clock CUPTI has: gpuutil's, registered once and never reset (a reset
  // is a re-registration, which leaves later sessions' first kernels on
  // the wrong clock, pytorch/pytorch#192021).
  const int64_t their_clock = client(FAKE_CUPTI_CLIENT_OWN_CLOCK) ? realtime_now + 1000'000 * kMs : session_now_ns();
  EXPECT_LT(std::abs(theirs.last_record_end_ns - their_clock), 10'000 * kMs)
      << "its records are on the clock CUPTI had when it traced";
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].report.steps[0].devices.at(0).kernels, 1u);
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::gpu_collection_suspended), 0u);
  EXPECT_EQ(out[1].report.diagnostics.count(Diag::gpu_collection_suspended), 1u);
  EXPECT_EQ(out[1].report.diagnostics.example(Diag::gpu_collection_suspended), "torch.profiler started");
  EXPECT_TRUE(kernel_or_collection_off(out[2], count(out, Diag::cupti_clock_mismatch)))
      << "gpuutil collects again after it stopped, or says why not";
  EXPECT_EQ(live.counters().buffers_foreign, 0u);
}

TEST_P(Coexistence, GpuutilStartingWhileTorchProfilerRunsLeavesItAloneThenTakesOver) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  fake.second_client_start();
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start("torch.profiler was running when gpuutil started"), "");
  EXPECT_EQ(fake.stats().subscribed, 0);
  session.begin_step(0, session_now_ns());
  fake.launch("theirs", 7, 100'000, 5000);
  fake.launch("theirs", 7, 100'000, 5000);
  fake.synchronize();
  session.end_step(session_now_ns());
  const fake_cupti_client_stats theirs = fake.second_client_stop();
  ASSERT_EQ(live.resume(), "");
  fake.driver<void (*)()>("fake_cupti_wait")();
  session.begin_step(1, session_now_ns());
  fake.launch("mine", 7, 100'000, 5000);
  fake.synchronize();
  session.end_step(session_now_ns());
  live.stop();
  EXPECT_EQ(theirs.kernels, 2u);
  EXPECT_EQ(theirs.foreign_buffers_rejected, 0u);
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::gpu_collection_suspended), 1u);
  EXPECT_TRUE(out[0].report.steps[0].devices.empty() || out[0].report.steps[0].devices[0].kernels == 0u);
  EXPECT_TRUE(kernel_or_collection_off(out[1]));
}

TEST_P(Coexistence, AnotherClientsBufferHandedToGpuutilIsCountedAndLeftAlone) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  live.suspend("torch.profiler started");
  fake.second_client_start();
  session.begin_step(0, session_now_ns());
  fake.launch("theirs", 7, 1000, 100);  // into a buffer the other client gave
  fake.synchronize();
  ASSERT_EQ(live.resume(), "");  // taken back too early: the other client still holds a buffer
  fake.launch("mine", 7, 1000, 100);
  fake.synchronize();
  session.end_step(session_now_ns());
  live.stop();  // its forced flush hands the other client's buffer(s) to gpuutil
  fake.second_client_stop();
  // The thread's buffer; with device buffers, also a device's buffer the
  // other client gave if the kernel was written before gpuutil resumed; with
  // held spares, its spare.
  EXPECT_GE(live.counters().buffers_foreign, 1u);
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::cupti_foreign_buffers), live.counters().buffers_foreign);
}

// Kineto's on-demand tracing (dynolog, KINETO_USE_DAEMON) starts CUPTI from
// its own thread without anything gpuutil can see: gpuutil's buffers end up
// in Kineto's completion callback and its kinds are disabled at Kineto's
// stop. The steps after that must say GPU collection was taken over, never
// report zero activity as if it were measured.
TEST_P(Coexistence, ATraceStartedBehindGpuutilsBackIsReportedAsATakeoverNotAsIdleSteps) {
  // Kineto registers its own clock when it traces: seen at once. Without
  // it, and with nothing of gpuutil's outstanding when it starts (the idle
  // gap between these steps; hold=1: only held empty buffers), the next
  // step's launch is finished by its sync yet its record never reaches
  // gpuutil, and no buffer came back or was asked for: seen at the flush
  // after that sync, well inside the 10 s takeover quiet time. A takeover
  // in a running step is seen from the silent buffers
  // (test_cupti_coexistence.cpp).
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  auto step = [&](int n) {
    session.begin_step(n, session_now_ns());
    fake.launch("gemm", 7, 100'000, 5000);
    fake.synchronize();
    session.end_step(session_now_ns());
    live.wait_complete(session_now_ns(), 1000);  // the step boundary of a loop that waits for its reports
  };
  step(0);
  std::thread([&] { fake.second_client_start(); }).join();
  step(1);
  std::thread([&] { fake.second_client_stop(); }).join();
  step(2);
  const int64_t before_stop = session_now_ns();
  live.stop();
  EXPECT_LT(session_now_ns() - before_stop, 1000 * kMs) << "stop() waited for records that went to the other client";
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].report.steps[0].devices.at(0).kernels, 1u);
  EXPECT_TRUE(kernel_or_collection_off(out[1]));
  EXPECT_TRUE(kernel_or_collection_off(out[2]));
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::cupti_taken_over), 0u) << "no false alarm before it started";
}

// ---- CUPTI versions and clocks (no matrix setting reaches them) ----

TEST(CuptiFaithful, LegacyCuptiVersionNumbersAreNamedAsTheirReleases) {
  FakeCupti& fake = FakeCupti::get();
  fake_cupti_config cfg{};
  cfg.version = 27;  // what CUPTI 12.9 reports
  fake.reset(&cfg);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  const std::string why = live.start();
  EXPECT_NE(why.find("CUPTI 12.9 (API version 27)"), std::string::npos) << why;
  EXPECT_NE(why.find("13.0 Update 1 (API version 130001)"), std::string::npos) << why;
}

// One registration per process (issue 36, item 6): gpuutil puts the
// session clock in place while CUPTI has its own, and never changes it
// again: not at stop, not at the next profile. A re-registration leaves the
// head of later activity sessions on the wrong clock (pytorch#192021).
TEST(CuptiFaithful, TheSessionClockIsRegisteredOnceAndStaysAfterStop) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  for (int profile = 0; profile < 3; ++profile) {
    Session session(SessionOptions{});
    LiveCollector live(session, pool());
    ASSERT_EQ(live.start(), "");
    EXPECT_LT(std::abs(fake.now_ns() - session_now_ns()), 100 * kMs) << "records on the session clock while profiling";
    live.stop();
    EXPECT_LT(std::abs(fake.now_ns() - session_now_ns()), 100 * kMs) << "and after: nothing was registered over it";
  }
  EXPECT_EQ(fake.stats().timestamp_registrations, 1u) << "three profiles, one registration";
}

TEST(CuptiFaithful, GraphsWithCupti13_0InALaterProfileAreFlagged) {
  FakeCupti& fake = FakeCupti::get();
  fake_cupti_config cfg{};
  cfg.version = 130001;
  cfg.graph_correlation_bug = 1;
  fake.reset(&cfg);
  for (int profile = 0; profile < 2; ++profile) {
    Session session(SessionOptions{});
    LiveCollector live(session, pool());
    ASSERT_EQ(live.start(), "");
    const int64_t t = session_now_ns();
    session.begin_step(0, t);
    launch_at(fake, "graph_node", 7, t, t + 10'000, t + 20'000, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 3);
    fake.synchronize();
    session.end_step(session_now_ns());
    live.stop();
    const auto out = session.finish(session_now_ns());
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].report.diagnostics.count(Diag::cupti_graph_correlation), 1u);
    const std::string& example = out[0].report.diagnostics.example(Diag::cupti_graph_correlation);
    if (profile == 1) {
      EXPECT_NE(example.find("wrong correlation ids"), std::string::npos) << example;
    }
  }
}

}  // namespace
}  // namespace gpuutil
