// gpuutil and another CUPTI client in one process, on the fake CUPTI
// (tests/fake_cupti, its second client behaving as Kineto does): gpuutil
// never damages the other client's trace, and never reports steps whose
// records went to the other client as zero GPU activity
// (docs/live-collection.md, "Coexistence").
//  - suspending for a client found running leaves its kinds, per-id
//    enables and clock as it set them;
//  - a client that takes CUPTI from another thread (Kineto's on-demand
//    tracing) is detected: by gpuutil's buffers going silent, or at once by
//    its own clock; those steps say cupti_taken_over and gpu_collection_off;
//  - Kineto's cuptiFinalize (TEARDOWN_CUPTI=1) after gpuutil resumed is
//    detected, and gpuutil attaches again;
//  - per-thread buffers are asked for again after Kineto reset them;
//  - KINETO_USE_DAEMON and TEARDOWN_CUPTI are named in the reports.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fake_cupti_client.h"
#include "fake_cupti_matrix.h"
#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"

namespace gpuutil {
namespace {

using testing::FakeCupti;
using testing::ScopedCell;

LiveOptions pool() {
  LiveOptions o;
  o.nvtx = false;
  o.cupti_buffer_count = 8;
  o.cupti_buffer_bytes = 256 << 10;
  return o;
}

// An environment variable for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

// One step of the test's loop: `kernels` launches of 100 us, a device
// sync, the step boundary gpuutil's Python and C++ front ends make.
struct Loop {
  FakeCupti& fake;
  Session& session;
  LiveCollector& live;
  void step(int n, int kernels) {
    session.begin_step(n, session_now_ns());
    for (int i = 0; i < kernels; ++i) fake.launch("gemm", 7, 100'000, 5000);
    fake.synchronize();
    end(session_now_ns());
  }
  void end(int64_t t) {
    session.end_step(t);
    live.step_boundary(t);
    usleep(30'000);  // the drain thread flushes and looks
  }
};

bool says(const StepOutput& o, Diag d) { return o.report.diagnostics.count(d) > 0; }
uint64_t kernels(const StepOutput& o) {
  const auto& d = o.report.steps[0].devices;
  return d.empty() ? 0 : d[0].kernels;
}

// What a step says about GPU collection, for failure messages.
std::string said(const StepOutput& o) { return o.json.substr(0, 1500); }

TEST(CuptiCoexistence, SuspendingForAClientFoundRunningLeavesItsKindsIdsAndClockAsItSetThem) {
  FakeCupti& fake = FakeCupti::get();
  ScopedCell cell(fake_matrix::cell("client=own_clock"));
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  Loop loop{fake, session, live};
  loop.step(0, 1);
  live.wait_complete(session_now_ns(), 1000);  // every gpuutil buffer back before the other client starts
  fake.second_client_start();
  const fake_cupti_stats before = fake.stats();
  // Found at a step boundary (gpuutil.torch's guard): it may have started
  // any time in the step.
  live.suspend("torch.profiler (or another Kineto client) was found running", session_now_ns() - 1000);
  const fake_cupti_stats after = fake.stats();
  EXPECT_EQ(after.enabled_kinds_mask, before.enabled_kinds_mask) << "its kinds stay enabled";
  EXPECT_EQ(after.runtime_cbids_enabled, before.runtime_cbids_enabled) << "no per-id disable strips its API records";
  EXPECT_EQ(after.driver_cbids_enabled, before.driver_cbids_enabled);
  EXPECT_EQ(after.forced_flushes, before.forced_flushes) << "no forced flush hands it unfinished records";
  EXPECT_EQ(after.timestamp_callback_set, before.timestamp_callback_set);
  const int64_t their_clock_before = fake.now_ns();
  loop.step(1, 3);
  const fake_cupti_client_stats theirs = fake.second_client_stop();
  EXPECT_LT(std::abs(fake.now_ns() - their_clock_before), int64_t(100'000) * 1'000'000) << "still its clock";
  EXPECT_EQ(theirs.kernels, 3u) << "its trace keeps every kernel";
  EXPECT_EQ(theirs.foreign_buffers_rejected, 0u);
  ASSERT_EQ(live.resume(), "");
  loop.step(2, 1);
  live.stop();
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(kernels(out[0]), 1u);
  EXPECT_TRUE(says(out[1], Diag::gpu_collection_suspended)) << said(out[1]);
  // gpuutil collects again, on the client's clock (mapped, never registered
  // over). Its registration was the second in this CUPTI's life, so the
  // first kernel record of gpuutil's next activity session is stamped on
  // CUPTI's default clock (pytorch/pytorch#192021): it is counted and kept
  // out, never placed 1000 s away from its step.
  EXPECT_EQ(fake.stats().timestamp_registrations, 2u) << "gpuutil's one, and the client's";
  uint64_t mismatched = 0;  // counted in whichever report was open when the record came
  for (const auto& o : out) mismatched += o.report.diagnostics.count(Diag::cupti_clock_mismatch);
  EXPECT_EQ(kernels(out[2]) + mismatched, 1u) << "gpuutil collects again after it stopped: " << said(out[2]);
  EXPECT_FALSE(says(out[2], Diag::gpu_collection_suspended));
}

// Kineto's on-demand tracing (dynolog, KINETO_USE_DAEMON=1) starts from a
// thread of its own while the training loop runs: gpuutil's buffer of the
// running step goes to it, and nothing reaches gpuutil again.
TEST(CuptiCoexistence, OnDemandTracingFromAnotherThreadMidStepIsATakeoverNotIdleSteps) {
  FakeCupti& fake = FakeCupti::get();
  ScopedCell cell(fake_matrix::cell("client=other_thread"));
  ScopedEnv quiet("GPUUTIL_CUPTI_TAKEOVER_MS", "300");
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  Loop loop{fake, session, live};
  loop.step(0, 1);
  session.begin_step(1, session_now_ns());
  fake.launch("gemm", 7, 100'000, 5000);  // into gpuutil's buffer
  fake.second_client_start();              // from its own thread (the cell)
  fake.launch("gemm", 7, 100'000, 5000);
  fake.synchronize();
  loop.end(session_now_ns());
  fake.second_client_stop();
  loop.step(2, 1);
  live.stop();
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(kernels(out[0]), 1u);
  EXPECT_FALSE(says(out[0], Diag::cupti_taken_over)) << said(out[0]);
  for (int i : {1, 2}) {
    EXPECT_TRUE(says(out[i], Diag::cupti_taken_over)) << "step " << i << ": " << said(out[i]);
    EXPECT_TRUE(says(out[i], Diag::gpu_collection_off)) << "step " << i << ": " << said(out[i]);
  }
  EXPECT_NE(out[1].report.diagnostics.example(Diag::cupti_taken_over).find("no activity buffer"), std::string::npos)
      << said(out[1]);
}

// Kineto registers its own (TSC) clock when it starts a trace
// (libkineto CuptiTimestamp.cpp): seen at the next flush even when none of
// gpuutil's buffers was outstanding, well before any quiet time.
TEST(CuptiCoexistence, OnDemandTracingWithKinetosOwnClockIsATakeoverAtOnce) {
  FakeCupti& fake = FakeCupti::get();
  ScopedCell cell(fake_matrix::cell("client=other_thread+own_clock"));
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  Loop loop{fake, session, live};
  loop.step(0, 1);
  live.wait_complete(session_now_ns(), 1000);
  const int64_t t0 = session_now_ns();
  fake.second_client_start();
  loop.step(1, 1);
  fake.second_client_stop();
  loop.step(2, 1);
  live.stop();
  EXPECT_LT(session_now_ns() - t0, int64_t(1'500) * 1'000'000) << "no quiet time (10 s by default) was waited out";
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(kernels(out[0]), 1u);
  for (int i : {1, 2}) {
    EXPECT_TRUE(says(out[i], Diag::cupti_taken_over)) << "step " << i << ": " << said(out[i]);
    EXPECT_TRUE(says(out[i], Diag::gpu_collection_off)) << "step " << i << ": " << said(out[i]);
  }
  EXPECT_NE(out[1].report.diagnostics.example(Diag::cupti_taken_over).find("timestamp callback"), std::string::npos)
      << said(out[1]);
}

// TEARDOWN_CUPTI=1: Kineto calls cuptiFinalize after its trace, after
// gpuutil took CUPTI back. gpuutil notices, the steps until it attached
// again say so, and it collects again (nobody holds CUPTI after a finalize).
TEST(CuptiCoexistence, KinetosCuptiFinalizeAfterGpuutilResumedIsSeenAndGpuutilAttachesAgain) {
  FakeCupti& fake = FakeCupti::get();
  ScopedCell cell(fake_matrix::cell("client=teardown"));
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  Loop loop{fake, session, live};
  loop.step(0, 1);
  live.suspend("torch.profiler started");
  fake.second_client_start();
  loop.step(1, 3);
  const fake_cupti_client_stats theirs = fake.second_client_stop();
  ASSERT_EQ(live.resume(), "");
  fake.driver<void (*)()>("fake_cupti_wait")();  // its cuptiFinalize, 20 ms after its stop
  ASSERT_EQ(fake.stats().finalized, 1u);
  for (int n = 2; n < 5; ++n) loop.step(n, 1);
  live.stop();
  EXPECT_EQ(theirs.kernels, 3u);
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(kernels(out[0]), 1u);
  EXPECT_TRUE(says(out[1], Diag::gpu_collection_suspended));
  EXPECT_TRUE(kernels(out[2]) == 1u || says(out[2], Diag::cupti_taken_over)) << said(out[2]);
  EXPECT_TRUE(says(out[2], Diag::cupti_taken_over) || says(out[3], Diag::cupti_taken_over))
      << "the finalize is said: " << said(out[2]);
  for (int i : {2, 3}) {
    EXPECT_TRUE(kernels(out[i]) == 1u || says(out[i], Diag::gpu_collection_off)) << "step " << i << ": " << said(out[i]);
  }
  EXPECT_EQ(kernels(out[4]), 1u) << "gpuutil attached again: " << said(out[4]);
  EXPECT_FALSE(says(out[4], Diag::cupti_taken_over)) << said(out[4]);
}

// Kineto sets PER_THREAD_ACTIVITY_BUFFER=0 after each trace; gpuutil asks
// for per-thread buffers again when it takes CUPTI back.
TEST(CuptiCoexistence, PerThreadBuffersAreAskedForAgainAfterAClientResetThem) {
  FakeCupti& fake = FakeCupti::get();
  ScopedCell cell(fake_matrix::cell("client=per_thread_reset"));
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  live.suspend("torch.profiler started");
  fake.second_client_start();
  fake.second_client_stop();
  ASSERT_EQ(fake.stats().per_thread_buffers, 0);
  ASSERT_EQ(live.resume(), "");
  EXPECT_EQ(fake.stats().per_thread_buffers, 1);
  live.stop();
}

TEST(CuptiCoexistence, KinetoSettingsThatChangeSharingAreNamedInEveryReport) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  ScopedEnv daemon("KINETO_USE_DAEMON", "1");
  ScopedEnv teardown("TEARDOWN_CUPTI", "1");
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  Loop loop{fake, session, live};
  loop.step(0, 1);
  live.stop();
  const auto out = session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].json.find("KINETO_USE_DAEMON=1"), std::string::npos) << said(out[0]);
  EXPECT_NE(out[0].json.find("TEARDOWN_CUPTI=1"), std::string::npos) << said(out[0]);
  EXPECT_EQ(kernels(out[0]), 1u);
}

}  // namespace
}  // namespace gpuutil
