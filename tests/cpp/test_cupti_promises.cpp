// The live GPU path held to what CUPTI and the CUDA 13 headers promise, and
// to nothing else (issue 36). Each test plants, on the fake CUPTI, one thing
// real CUPTI does or may do that the collector once assumed away, and pins
// what the report must then say:
//   1. CUDA 13's <<<>>> launches go through __cudaLaunchKernel (a name the
//      classifier did not know): they are traced and waited for;
//   2. a device sync and one drained default flush are no proof that the
//      records came (the next step's running kernel holds the buffer);
//   3. a record that never comes (lost, dropped, untimed) never freezes
//      reporting: 1,100 steps stay complete;
//   4. a client that keeps CUPTI's subscription (Kineto before its lazy
//      subscription) leaves gpuutil right without API callbacks, in every
//      cell (hold=1 included), and is never left CPU-only by gpuutil;
//   5. a long kernel with the host blocked in a sync is named stuck, never
//      called a takeover;
//   6. CUPTI's clock is registered once per process; records stamped on
//      another clock are counted and kept out of steps;
//   7. a stream's id comes from its creation (resource callback); a handle
//      is never passed to CUPTI after its stream may be gone;
//   8. a sync covers the work of the stream's own context, not of the
//      calling thread's current one;
//   9. gpuutil hands CUPTI zeroed buffers, so CUPTI never zeroes one on the
//      application's thread.
// Items with cell-dependent behaviour run under every CI cell of the fake's
// matrix (fake_cupti_matrix.h). Each was checked to fail on the collector
// before issue 36 (docs/live-collection.md, "What CUPTI promises").
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "fake_cupti_client.h"
#include "fake_cupti_matrix.h"
#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"
#include "live_helpers.h"
#include "matrix_cell.h"

namespace gpuutil {
namespace {

using testing::cell_name;
using testing::collect;
using testing::collect_for;
using testing::count;
using testing::FakeCupti;
using testing::kMs;
using testing::launch_at;
using testing::MatrixTest;
using testing::pool;
using testing::sleep_until;

class Promises : public MatrixTest {};
INSTANTIATE_TEST_SUITE_P(Matrix, Promises, ::testing::ValuesIn(fake_matrix::cells_for_run()), cell_name);

const DeviceStepReport* device(const StepOutput& o, int32_t d = 0) {
  for (const auto& dev : o.report.steps[0].devices) {
    if (dev.device == d) return &dev;
  }
  return nullptr;
}

uint64_t kernels(const StepOutput& o, int32_t d = 0) {
  const DeviceStepReport* dev = device(o, d);
  return dev == nullptr ? 0 : dev->kernels;
}

// cudaDeviceSynchronize of `device` from the calling thread.
void device_sync(FakeCupti& fake, uint32_t device = 0) {
  fake_cupti_call c{};
  c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020;
  c.api_ns = 1000;
  c.sync = FAKE_CUPTI_SYNC_DEVICE;
  c.sync_device = device;
  fake.call(&c);
}

// ---- 1. CUDA 13's <<<>>> launches ----

// The host runs ahead: the kernel launched in step 0 runs into step 1. Step
// 0 must wait for its record, whichever call launched it. Before issue 36,
// __cudaLaunchKernel (the default cell's launch) was neither traced nor
// learnt: step 0 came out at once with 0 ms of compute, its kernel late.
TEST_P(Promises, AKernelLaunchedThroughTheCellsLaunchCallIsWaitedForAndCounted) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns() + kMs;
  session.begin_step(0, t0);
  sleep_until(t0);
  launch_at(fake, "aten_vectorized_elementwise_kernel", 7, t0 + 100'000, t0 + 2 * kMs, t0 + 60 * kMs);
  sleep_until(t0 + 10 * kMs);
  session.end_step(t0 + 10 * kMs);
  session.begin_step(1, t0 + 10 * kMs);
  const auto out = collect_for(session, live, 1, 2000);
  session.end_step(session_now_ns());
  live.stop();
  session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u);
  ASSERT_NE(device(out[0]), nullptr) << out[0].json.substr(0, 1500);
  EXPECT_EQ(kernels(out[0]), 1u);
  EXPECT_EQ(device(out[0])->breakdown.compute_ns, 8 * kMs + cell().skew_ns);
  EXPECT_EQ(count(out, Diag::cupti_records_late), 0u);
  EXPECT_GT(live.counters().calls_learnt, 0u);
}

// ---- 2. a sync and a drained default flush presume nothing ----

// A launching thread (the autograd engine's, a pipeline stage) ends step 0
// with a short kernel; the main thread ends the step in a device sync; the
// launching thread then starts step 1 at once with a 200 ms kernel, into
// the same per-thread buffer as step 0's last record, so a default flush
// withholds that buffer until the long kernel finishes (the sync's own API
// record, in the main thread's buffer, comes back at once). Step 0 must come
// out with its kernel. Before issue 36 the sync and the drained flush were
// taken as proof that step 0's records came: step 0 came out without its
// kernel, the record counted late.
TEST_P(Promises, ADeviceSyncAndADefaultFlushAreNoProofThatAStepsRecordsCame) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  const int64_t t0 = session_now_ns() + kMs;
  session.begin_step(0, t0);
  sleep_until(t0);
  std::atomic<int> phase{0};
  std::thread launcher([&] {
    const int64_t t = session_now_ns();
    launch_at(fake, "step0_last_kernel", 7, t + 10'000, t + 100'000, t + kMs);
    phase = 1;
    while (phase.load() != 2) usleep(100);
    const int64_t u = session_now_ns();
    launch_at(fake, "step1_first_kernel", 7, u + 10'000, u + 100'000, u + 200 * kMs);
  });
  while (phase.load() != 1) usleep(100);
  device_sync(fake);  // returns once step 0's kernel finished
  const int64_t synced = session_now_ns();
  phase = 2;
  launcher.join();
  session.end_step(synced);
  session.begin_step(1, synced);
  const auto out = collect_for(session, live, 1, 3000);
  sleep_until(synced + 210 * kMs);
  session.end_step(session_now_ns());
  live.stop();
  session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u) << "step 0 is reported once its records came (within 3 s)";
  EXPECT_EQ(kernels(out[0]), 1u) << "step 0 reported without its kernel: " << out[0].json.substr(0, 1500);
  EXPECT_EQ(count(out, Diag::cupti_records_late), 0u);
  EXPECT_EQ(count(out, Diag::cupti_record_missing), 0u);
}

// ---- 3. a record that never comes never freezes the run ----

// 1,100 steps of 1 ms, one kernel each (the cell's launch call, on one
// stream); step 100's record is lost (never written, never reported) and
// step 500's carries no timing (start = end = 0: "for lack of device
// memory"). Every step must be reported complete, and most of them while
// the loop runs. Before issue 36 the lost record held every later step,
// until the held-steps bound (1,000) reported them incomplete.
TEST(CuptiPromises, AThousandStepsAfterALostRecordAndAnUntimedKernelAreAllComplete) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  constexpr int kSteps = 1100;
  std::vector<StepOutput> out;
  for (int n = 0; n < kSteps; ++n) {
    // Times from the real call (a late thread keeps the timeline causal).
    const int64_t t = session_now_ns();
    session.begin_step(n, t);
    if (n == 100) fake.inject("lose_records", 1);
    if (n == 500) fake.inject("no_timing_records", 1);
    fake.launch("train_kernel", 7, 200'000, 30'000);
    sleep_until(t + kMs);
    session.end_step(session_now_ns());
    if (n % 10 == 9) {
      for (auto& o : collect(session, live)) out.push_back(std::move(o));
    }
  }
  for (auto& o : collect_for(session, live, kSteps - out.size(), 3000)) out.push_back(std::move(o));
  const size_t while_running = out.size();
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  ASSERT_EQ(out.size(), size_t(kSteps));
  EXPECT_GE(while_running, size_t(kSteps - 10)) << "reported while the run went on, not at its end";
  int incomplete = 0;
  uint64_t kernels_seen = 0;
  for (const auto& o : out) {
    incomplete += o.report.steps[0].complete ? 0 : 1;
    kernels_seen += kernels(o);
  }
  EXPECT_EQ(incomplete, 0) << "every step after the lost record is complete";
  EXPECT_EQ(kernels_seen, uint64_t(kSteps - 2))
      << "all but the lost and the untimed one; late " << count(out, Diag::cupti_records_late) << ", missing "
      << count(out, Diag::cupti_record_missing) << ", mismatched " << count(out, Diag::cupti_clock_mismatch);
  EXPECT_EQ(count(out, Diag::cupti_record_missing), 1u);
  for (const auto& o : out) {
    if (o.report.diagnostics.count(Diag::cupti_record_missing) == 0) continue;
    EXPECT_NE(o.report.diagnostics.example(Diag::cupti_record_missing).find("train_kernel"), std::string::npos)
        << o.report.diagnostics.example(Diag::cupti_record_missing);
  }
  EXPECT_EQ(count(out, Diag::cupti_timestamp_invalid), 1u);
  EXPECT_EQ(count(out, Diag::cupti_step_incomplete), 0u);
  EXPECT_EQ(live.counters().records_missing, 1u);
}

// The same loss on a stream the launch call names, in a loop that ends each
// step in a device sync: the sync says the device finished it; after
// cupti_missing_after_ms its record is no longer waited for.
TEST(CuptiPromises, ALostRecordBehindASyncIsReleasedAfterTheMissingBound) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveOptions options = pool();
  options.cupti_missing_after_ms = 100;
  LiveCollector live(session, options);
  ASSERT_EQ(live.start(), "");
  std::vector<StepOutput> out;
  for (int n = 0; n < 30; ++n) {
    const int64_t t = session_now_ns();
    session.begin_step(n, t);
    if (n == 3) fake.inject("drop_records", 1);  // dropped, and reported by CUPTI
    launch_at(fake, "synced_kernel", 9, t + 10'000, t + 50'000, t + 500'000,
              CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    device_sync(fake);
    sleep_until(t + 10 * kMs);
    session.end_step(session_now_ns());
    for (auto& o : collect(session, live)) out.push_back(std::move(o));
  }
  for (auto& o : collect_for(session, live, 30 - out.size(), 2000)) out.push_back(std::move(o));
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  ASSERT_EQ(out.size(), 30u);
  for (const auto& o : out) EXPECT_TRUE(o.report.steps[0].complete) << o.report.steps[0].step;
  EXPECT_EQ(count(out, Diag::cupti_record_missing), 1u);
  EXPECT_GE(count(out, Diag::cupti_records_dropped), 1u);
}

// ---- 4. a client that keeps the subscription ----

// Kineto before its lazy subscription subscribes when its profiler first
// starts and never lets go (FAKE_CUPTI_CLIENT_KEEPS_SUBSCRIPTION). gpuutil
// steps aside before it starts (the guard's suspend releases the
// subscription, so Kineto is not CPU-only), then runs without API
// callbacks: its steps must still come out, each with its kernel, while the
// loop runs, in every cell. Before issue 36 a held prefetched buffer
// (hold=1) kept the watermark back for good.
TEST_P(Promises, AClientThatKeepsTheSubscriptionLeavesGpuutilRightWithoutCallbacks) {
  FakeCupti& fake = FakeCupti::get();
  fake_cupti_matrix m = cell();
  m.second_client |= FAKE_CUPTI_CLIENT_KEEPS_SUBSCRIPTION;
  fake.configure(&m);
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  auto step = [&](int n) {
    const int64_t t = session_now_ns();
    session.begin_step(n, t);
    launch_at(fake, "gemm", 7, t + 10'000, t + 100'000, t + 3 * kMs);
    sleep_until(t + 5 * kMs);
    session.end_step(session_now_ns());
  };
  step(0);
  live.suspend("torch.profiler started");
  EXPECT_EQ(fake.stats().subscribers, 0u) << "the subscription is free when the client starts";
  fake.second_client_start();
  step(1);
  const fake_cupti_client_stats theirs = fake.second_client_stop();
  EXPECT_EQ(fake.stats().second_client_cpu_only, 0) << "the client traced the GPU";
  EXPECT_EQ(theirs.kernels, 1u);
  ASSERT_EQ(live.resume(), "");
  EXPECT_FALSE(live.counters().api_callbacks_on) << "the client kept the subscription";
  std::vector<StepOutput> out;
  for (int n = 2; n < 12; ++n) {
    step(n);
    for (auto& o : collect(session, live)) out.push_back(std::move(o));
  }
  for (auto& o : collect_for(session, live, 12 - out.size(), 1500)) out.push_back(std::move(o));
  const size_t while_running = out.size();
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  EXPECT_EQ(while_running, 12u) << "every step came out while the run went on";
  ASSERT_EQ(out.size(), 12u);
  for (const auto& o : out) {
    const int64_t n = o.report.steps[0].step;
    if (n == 1) continue;  // the client's
    EXPECT_TRUE(o.report.steps[0].complete) << n;
    EXPECT_EQ(kernels(o) + o.report.diagnostics.count(Diag::cupti_clock_mismatch), 1u) << "step " << n << ": "
                                                                                       << o.json.substr(0, 1200);
  }
  EXPECT_EQ(count(out, Diag::cupti_records_late), 0u);
  EXPECT_GE(count(out, Diag::cupti_subscriber_other), 1u) << "the reports say who holds the subscription";
  fake.configure(nullptr);
}

// ---- 5. stuck, never a takeover, with the host blocked ----

// An NCCL kernel spins 700 ms for a late peer while the host blocks in a
// device sync; nothing else happens. gpuutil's buffer stays with CUPTI and
// no buffer is asked for: no other client is in sight. It must be named
// stuck (after 300 ms here) and its communication time kept in its step.
// Before issue 36 the quiet buffers were called a takeover (after 100 ms
// here): cupti_taken_over, the step's GPU time dropped.
TEST(CuptiPromises, ALongCollectiveWithTheHostBlockedInASyncIsStuckNeverATakeover) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  setenv("GPUUTIL_CUPTI_TAKEOVER_MS", "100", 1);
  Session session(SessionOptions{});
  LiveOptions options = pool();
  options.cupti_stuck_after_ms = 300;
  LiveCollector live(session, options);
  ASSERT_EQ(live.start(), "");
  unsetenv("GPUUTIL_CUPTI_TAKEOVER_MS");
  const int64_t t0 = session_now_ns() + kMs;
  session.begin_step(0, t0);
  sleep_until(t0);
  // NCCL launches through the driver API (cuLaunchKernelEx).
  fake_cupti_work w{};
  w.kind = FAKE_CUPTI_KERNEL;
  w.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  w.stream = 20;
  w.start_ns = t0 + kMs;
  w.end_ns = t0 + 700 * kMs;
  w.grid[0] = 16;
  w.block[0] = 512;
  fake_cupti_call nccl{};
  nccl.domain = CUPTI_CB_DOMAIN_DRIVER_API;
  nccl.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx;
  nccl.start_ns = t0 + 10'000;
  nccl.end_ns = t0 + 20'000;
  nccl.work = &w;
  nccl.n_work = 1;
  fake.call(&nccl);
  sleep_until(t0 + 5 * kMs);
  session.end_step(t0 + 5 * kMs);
  session.begin_step(1, t0 + 5 * kMs);
  std::vector<StepOutput> out;
  for (auto& o : collect(session, live)) out.push_back(std::move(o));  // the boundary: flushing starts
  device_sync(fake);  // blocks until the collective is done
  session.end_step(session_now_ns());
  for (auto& o : collect_for(session, live, 2 - out.size(), 2000)) out.push_back(std::move(o));
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(count(out, Diag::cupti_taken_over), 0u) << out[0].json.substr(0, 1500);
  EXPECT_EQ(count(out, Diag::gpu_collection_off), 0u);
  EXPECT_GE(count(out, Diag::gpu_stuck), 1u) << "the hang is named";
  EXPECT_EQ(live.counters().stuck, 1u);
  ASSERT_NE(device(out[1]), nullptr);
  EXPECT_GT(device(out[1])->breakdown.communication_ns, 600 * kMs) << "the straggler step keeps its collective";
}

// ---- 6. one clock registration per process ----

// Three times: gpuutil steps aside, a client registers its own clock
// (Kineto registers its TSC clock at each trace start), traces, stops, and
// gpuutil takes CUPTI back. gpuutil registers its clock once, never again;
// CUPTI's records are then on the client's clock (mapped), and each
// registration after the first leaves kernel records at the head of later
// sessions on CUPTI's default clock (pytorch/pytorch#192021): those are
// counted and kept out of steps. Before issue 36 gpuutil registered at
// every attach and reset the clock at every suspend: more wrong-clock
// records, and none of them caught (they landed far outside the steps).
TEST(CuptiPromises, TheClockIsRegisteredOnceAndRecordsOnAnotherClockAreCountedAndKeptOut) {
  FakeCupti& fake = FakeCupti::get();
  testing::ScopedCell scoped(fake_matrix::cell("client=own_clock"));
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, pool());
  ASSERT_EQ(live.start(), "");
  int64_t n = 0;
  int gpuutil_kernels = 0;
  auto step = [&](bool gpuutils) {
    const int64_t t = session_now_ns();
    session.begin_step(n++, t);
    for (int k = 0; k < 3; ++k) fake.launch("gemm", 7, 200'000, 5000);
    fake.synchronize();
    session.end_step(session_now_ns());
    if (gpuutils) gpuutil_kernels += 3;
  };
  for (int cycle = 0; cycle < 3; ++cycle) {
    step(true);
    live.suspend("torch.profiler started");
    fake.second_client_start();
    step(false);
    fake.second_client_stop();
    ASSERT_EQ(live.resume(), "");
  }
  step(true);
  step(true);
  live.stop();
  const auto out = session.finish(session_now_ns());
  EXPECT_EQ(fake.stats().timestamp_registrations, 4u) << "gpuutil's one and the client's three";
  EXPECT_GT(fake.stats().records_on_wrong_clock, 0u) << "the client's re-registrations left some";
  uint64_t counted = 0;
  for (const auto& o : out) {
    if (o.report.diagnostics.count(Diag::gpu_collection_suspended) == 0) counted += kernels(o);
  }
  const uint64_t mismatched = count(out, Diag::cupti_clock_mismatch);
  EXPECT_EQ(counted + mismatched, uint64_t(gpuutil_kernels))
      << "every kernel of gpuutil's steps is in its step, or counted as on another clock";
  EXPECT_GT(mismatched, 0u) << "gpuutil's next sessions began with wrong-clock records";
}

// ---- 7. streams from their creation ----

// A stream is created while gpuutil runs (CUPTI's STREAM_CREATED resource
// callback), a kernel on it hangs, the stream is destroyed and its handle
// recycled for a new stream. The hang is named with the stream it ran on,
// and CUPTI is never asked about the handle after the stream went. Before
// issue 36 the handle was resolved when the launch was named stuck: the
// recycled handle named the new stream.
TEST(CuptiPromises, AStreamIsNamedFromItsCreationNeverFromAHandleItsDestructionRecycled) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveOptions options = pool();
  options.cupti_stuck_after_ms = 100;
  options.cupti_completion_wait_ms = 50;
  LiveCollector live(session, options);
  ASSERT_EQ(live.start(), "");
  void* h21 = fake.stream_handle(0, 21);  // created now: STREAM_CREATED
  const int64_t t0 = session_now_ns();
  session.begin_step(0, t0);
  launch_at(fake, "hung_on_21", 21, t0 + 10'000, t0 + kMs, t0 + 3600'000 * kMs,
            CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  usleep(20'000);
  fake.destroy_stream(0, 21);
  void* h22 = fake.stream_handle(0, 22);
  EXPECT_EQ(h22, h21) << "the fake recycles the destroyed stream's handle";
  std::vector<StepOutput> out;
  for (int i = 0; i < 150; ++i) {
    usleep(2'000);
    if (i % 10 == 9) {
      session.end_step(session_now_ns());
      session.begin_step(i / 10 + 1, session_now_ns());
    }
    for (auto& o : collect(session, live)) out.push_back(std::move(o));
  }
  session.end_step(session_now_ns());
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  std::string example;
  for (const auto& o : out) {
    if (example.empty() && o.report.diagnostics.count(Diag::gpu_stuck) > 0) example = o.report.diagnostics.example(Diag::gpu_stuck);
  }
  EXPECT_EQ(example.rfind("GPU stuck in hung_on_21 on stream 21 since ", 0), 0u) << example;
  EXPECT_EQ(fake.stats().stream_ids_after_destroy, 0u) << "no handle passed to CUPTI after its stream went";
  EXPECT_GE(live.counters().streams_created, 1u);
  fake.reset(nullptr);  // the hung kernel
}

// ---- 8. syncs scoped by the stream's context ----

// On CUDA 13 a launch may target a stream of a device that is not current:
// a 400 ms kernel on device 0's stream 30, launched (by a worker thread)
// while device 1 is current; then a sync of device 1, which waits for
// nothing of device 0's. Step 0 must wait for the kernel. Before issue 36 the launch
// took the calling thread's context, and the sync (with the flush after
// it) completed it: step 0 came out without its kernel.
TEST(CuptiPromises, ASyncOfTheCurrentDeviceDoesNotCoverALaunchOnAnotherDevicesStream) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveOptions options = pool();
  options.cupti_missing_after_ms = 100;
  LiveCollector live(session, options);
  ASSERT_EQ(live.start(), "");
  fake.stream_handle(0, 30);  // device 0's stream, created now
  const int64_t t0 = session_now_ns() + kMs;
  session.begin_step(0, t0);
  sleep_until(t0);
  fake_cupti_work w{};
  w.kind = FAKE_CUPTI_KERNEL;
  w.name = "on_device_0";
  w.device = 0;
  w.stream = 30;
  w.start_ns = t0 + 100'000;
  w.end_ns = t0 + 400 * kMs;
  w.grid[0] = 132;
  w.block[0] = 256;
  fake_cupti_call c{};
  c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  c.start_ns = t0 + 10'000;
  c.end_ns = t0 + 20'000;
  c.work = &w;
  c.n_work = 1;
  c.current_device = 2;  // device 1 is current
  // Launched from another thread (the sync's own API record then comes back
  // at once, in the main thread's buffer, and holds nothing).
  std::thread([&] { fake.call(&c); }).join();
  device_sync(fake, 1);  // device 1 (current on both threads): idle
  sleep_until(t0 + 5 * kMs);
  session.end_step(t0 + 5 * kMs);
  session.begin_step(1, t0 + 5 * kMs);
  const auto out = collect_for(session, live, 1, 2000);
  sleep_until(t0 + 410 * kMs);
  session.end_step(session_now_ns());
  live.stop();
  session.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(kernels(out[0], 0), 1u) << "step 0 reported without device 0's kernel: " << out[0].json.substr(0, 1500);
  EXPECT_EQ(count(out, Diag::cupti_record_missing), 0u);
  EXPECT_EQ(count(out, Diag::cupti_records_late), 0u);
}

// ---- 9. buffers zeroed by gpuutil, never on the application's thread ----

// CUPTI zeroes each buffer it is handed on the thread that needs it
// (cupti_activity.h, ZEROED_OUT_ACTIVITY_BUFFER = 0, the default), i.e. in
// the middle of a launch. gpuutil asks for = 1 and zeroes what CUPTI wrote
// when a buffer comes back, on its drain thread. Before issue 36 every
// buffer request zeroed 256 KiB on the launching thread here.
TEST(CuptiPromises, BuffersAreZeroedOnTheDrainThreadNeverOnTheLaunchingOne) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveOptions options = pool();
  options.cupti_buffer_bytes = 16 << 10;  // many buffers
  options.cupti_max_buffer_count = 64;
  LiveCollector live(session, options);
  ASSERT_EQ(live.start(), "");
  std::vector<StepOutput> out;
  for (int n = 0; n < 20; ++n) {
    const int64_t t = session_now_ns();
    session.begin_step(n, t);
    for (int k = 0; k < 200; ++k) fake.launch("small", 7, 2'000, 1000);
    fake.synchronize();
    session.end_step(session_now_ns());
    for (auto& o : collect(session, live)) out.push_back(std::move(o));
  }
  live.stop();
  for (auto& o : session.finish(session_now_ns())) out.push_back(std::move(o));
  const fake_cupti_stats s = fake.stats();
  EXPECT_GT(s.buffers_requested, 20u) << "enough buffers to show it";
  EXPECT_EQ(s.buffers_zeroed_by_cupti, 0u) << "CUPTI zeroed buffers on the launching thread";
  EXPECT_EQ(s.buffers_not_zeroed, 0u) << "a buffer came back into use with CUPTI's records still in it";
  uint64_t seen = 0;
  for (const auto& o : out) seen += kernels(o);
  EXPECT_EQ(seen, 20u * 200u);
}

}  // namespace
}  // namespace gpuutil
