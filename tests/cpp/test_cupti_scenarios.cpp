// End to end on a simulated GPU: fake CUPTI -> CUPTI collector -> Session
// (the accounting engine) -> per-step reports. Planted causes must come out
// attributed (under every cell of the fake's matrix CI runs, see
// tests/cpp/matrix_cell.h), faults counted, and nothing lost at a sustained
// 1M records/s (on the run's cell: GPUUTIL_FAKE_CUPTI_MATRIX).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "fake_cupti_client.h"
#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"
#include "gpuutil/thread_key.h"
#include "matrix_cell.h"

namespace gpuutil {
namespace {

using testing::cell_name;
using testing::FakeCupti;

class ScenarioCell : public testing::MatrixTest {};
INSTANTIATE_TEST_SUITE_P(Matrix, ScenarioCell, ::testing::ValuesIn(fake_matrix::cells_for_run()), cell_name);

// Feeds the scenario's host side (steps, ranges) into the session. The hook
// runs on the scenario's own thread, which also makes its CUDA calls: its
// ranges are keyed the way every live source keys them (this_thread_key()).
struct HostFeed {
  Session* session;
  static void hook(void* ctx, int type, int64_t step, const char* name, int64_t a, int64_t b) {
    auto* f = static_cast<HostFeed*>(ctx);
    if (type == 0) f->session->begin_step(step, a);
    if (type == 1) f->session->end_step(b);
    if (type == 2) {
      HostRange r;
      r.name = f->session->intern(name);
      r.start_ns = a;
      r.end_ns = b;
      r.thread = f->session->thread_index(getpid(), this_thread_key(), "scenario", this_os_tid());
      r.category = RangeCategory::kDataloader;
      f->session->add_range(r);
    }
  }
};

LiveOptions small_pool() {
  LiveOptions o;
  o.cupti_buffer_count = 8;
  o.cupti_buffer_bytes = 256 << 10;
  return o;
}

int64_t idle(const DeviceStepReport& d, IdleCause c) { return d.breakdown.idle_ns[static_cast<size_t>(c)]; }

TEST_P(ScenarioCell, PlantedDataloaderRangeIsAttributedToIdleDataloaderWithinLaunchLatency) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, small_pool());
  ASSERT_EQ(live.start(), "");
  HostFeed feed{&session};
  fake_cupti_scenario sc{};
  sc.steps = 5;
  sc.dataloader_ns = 20'000'000;
  sc.kernels_per_step = 10;
  sc.kernel_ns = 1'000'000;
  sc.launch_api_ns = 5'000;
  sc.launch_latency_ns = 10'000;
  sc.streams = 2;
  sc.nccl_kernels_per_step = 1;
  sc.nccl_ns = 500'000;
  sc.sync_at_step_end = 1;
  sc.hook = &HostFeed::hook;
  sc.hook_ctx = &feed;
  ASSERT_EQ(fake.run(&sc), 0);
  fake.wait();
  live.flush();
  live.stop();
  const auto out = session.finish(INT64_MAX / 2);
  ASSERT_EQ(out.size(), 5u);
  for (const auto& o : out) {
    ASSERT_EQ(o.report.steps.size(), 1u);
    ASSERT_EQ(o.report.steps[0].devices.size(), 1u) << o.json;
    const DeviceStepReport& d = o.report.steps[0].devices[0];
    EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);
    EXPECT_NEAR(double(idle(d, IdleCause::kDataloader)), 20e6, double(sc.launch_latency_ns)) << o.json;
    // 10 x 1 ms on two streams, the second stream one launch behind: 5 ms +
    // one launch call of compute; the NCCL kernel is communication.
    EXPECT_EQ(d.breakdown.compute_ns, 5'000'000 + sc.launch_api_ns);
    EXPECT_EQ(d.communication_total_ns, 500'000);
    EXPECT_EQ(d.kernels, 11u);
    EXPECT_EQ(o.report.diagnostics.count(Diag::launch_unmatched), 0u);
  }
  EXPECT_EQ(fake.stats().records_lost_no_buffer, 0u);
}

TEST(CuptiScenario, ZeroRecordsLostAtOneMillionRecordsPerSecondSustained) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  ProfilerOptions po;
  po.live = small_pool();
  po.live.cupti_buffer_count = 16;
  Profiler prof(po);
  ASSERT_EQ(prof.start(), "");
  fake_cupti_scenario sc{};
  sc.stream_records = 2'000'000;  // 2 s at 1M records/s
  sc.records_per_s = 1e6;
  const int64_t t0 = session_now_ns();
  ASSERT_EQ(fake.run(&sc), 0);
  int64_t step = 0;
  while (fake.stats().records_emitted < sc.stream_records) {
    StepScope s(prof, step++);
    usleep(10'000);
  }
  fake.wait();
  const double seconds = double(session_now_ns() - t0) / 1e9;
  prof.stop();
  const fake_cupti_stats st = fake.stats();
  const LiveCounters c = prof.collector().counters();
  EXPECT_EQ(st.records_emitted, sc.stream_records);
  EXPECT_EQ(st.records_lost_no_buffer, 0u);
  EXPECT_EQ(c.buffers_starved, 0u);
  EXPECT_EQ(c.records_dropped, 0u);
  EXPECT_EQ(c.records_decoded, sc.stream_records);
  EXPECT_EQ(c.events_stored, sc.stream_records);
  // 2M records paced at 1M/s: finishing within 2.2 s means >= 0.9M records/s
  // were actually produced and decoded on average.
  EXPECT_LT(seconds, 2.2) << "the fake could not sustain 1M records/s: " << double(sc.stream_records) / seconds;
  uint64_t kernels = 0;
  for (const auto& o : prof.take_reports()) {
    EXPECT_EQ(o.report.diagnostics.count(Diag::session_events_dropped), 0u);
    for (const auto& st2 : o.report.steps)
      for (const auto& d : st2.devices) kernels += d.kernels;
  }
  // Kernels between two steps (while the loop collects reports) belong to no
  // step, so reports hold most but not all of them, and never more.
  EXPECT_GT(kernels, 0u);
  EXPECT_LE(kernels, sc.stream_records);
}

// The drain thread is the only one that flushes and frees buffers; the
// fake holds it in one flush for 300 ms (as a loaded host would) while the
// stream goes on at 1M records/s, over seven times what the 16 free buffers
// hold. CUPTI's buffer requests are served from the reservation meanwhile.
TEST(CuptiScenario, ADrainThreadHeldOffLongerThanTheFreeBuffersLastLosesNoRecord) {
  FakeCupti& fake = FakeCupti::get();
  fake_cupti_config cfg{};
  cfg.flush_stalls = 1;
  cfg.flush_stall_ms = 300;
  fake.reset(&cfg);
  ProfilerOptions po;
  po.live = small_pool();
  po.live.cupti_buffer_count = 16;  // 4 MiB: about 40 ms of this stream
  Profiler prof(po);
  ASSERT_EQ(prof.start(), "");
  fake_cupti_scenario sc{};
  sc.stream_records = 1'000'000;
  sc.records_per_s = 1e6;
  ASSERT_EQ(fake.run(&sc), 0);
  int64_t step = 0;
  while (fake.stats().records_emitted < sc.stream_records) {
    StepScope s(prof, step++);
    usleep(10'000);
  }
  fake.wait();
  const uint64_t pool_before_stop = prof.collector().counters().buffers_in_pool;
  prof.stop();
  const fake_cupti_stats st = fake.stats();
  const LiveCounters c = prof.collector().counters();
  EXPECT_EQ(st.flushes_stalled, 1u);
  EXPECT_EQ(st.records_emitted, sc.stream_records);
  EXPECT_EQ(st.buffers_denied, 0u);
  EXPECT_EQ(st.records_lost_no_buffer, 0u);
  EXPECT_EQ(c.buffers_starved, 0u);
  EXPECT_EQ(c.records_decoded, sc.stream_records);
  EXPECT_GT(pool_before_stop, 16u);  // the pool grew while the drain slept
}

TEST(CuptiScenario, DropsForcedByBufferStarvationAreCountedAndReported) {
  FakeCupti& fake = FakeCupti::get();
  fake_cupti_config cfg{};
  cfg.emit_threads = 4;  // four CUDA-13 per-thread buffers wanted at once
  fake.reset(&cfg);
  Session session(SessionOptions{});
  LiveOptions o = small_pool();
  o.cupti_buffer_count = 2;  // the pool can serve only two
  o.cupti_max_buffer_count = 2;
  LiveCollector live(session, o);
  ASSERT_EQ(live.start(), "");
  session.begin_step(0, session_now_ns());
  fake_cupti_scenario sc{};
  sc.stream_records = 20'000;
  sc.records_per_s = 1e7;
  ASSERT_EQ(fake.run(&sc), 0);
  fake.wait();
  live.flush();
  session.end_step(session_now_ns());
  live.stop();
  const auto out = session.finish(INT64_MAX / 2);
  const fake_cupti_stats st = fake.stats();
  const LiveCounters c = live.counters();
  ASSERT_GT(st.records_lost_no_buffer, 0u);
  EXPECT_EQ(c.buffers_starved, st.buffers_denied);
  EXPECT_EQ(c.records_dropped, st.records_lost_no_buffer);
  EXPECT_EQ(c.records_decoded + st.records_lost_no_buffer, st.records_emitted);
  uint64_t starved = 0, dropped = 0;
  for (const auto& r : out) {
    starved += r.report.diagnostics.count(Diag::cupti_buffer_starved);
    dropped += r.report.diagnostics.count(Diag::cupti_records_dropped);
    EXPECT_NE(r.json.find("cupti_records_dropped"), std::string::npos);
  }
  EXPECT_EQ(starved, st.buffers_denied);
  EXPECT_EQ(dropped, st.records_lost_no_buffer);
}

TEST(CuptiScenario, FaultyBuffersAndRecordsAreCountedNeverCrash) {
  FakeCupti& fake = FakeCupti::get();
  fake_cupti_config cfg{};
  cfg.null_buffers = 1;
  cfg.overlong_buffers = 1;
  cfg.truncated_buffers = 1;
  cfg.zero_timestamps = 3;
  cfg.unknown_kinds = 2;
  cfg.out_of_order = 3;
  cfg.dropped_records = 17;
  fake.reset(&cfg);
  Session session(SessionOptions{});
  LiveOptions o = small_pool();
  o.cupti_buffer_bytes = 16 << 10;  // many small buffers: every fault gets a buffer
  o.cupti_buffer_count = 64;
  LiveCollector live(session, o);
  ASSERT_EQ(live.start(), "");
  session.begin_step(0, session_now_ns());
  fake_cupti_scenario sc{};
  sc.stream_records = 5'000;
  sc.records_per_s = 1e7;
  ASSERT_EQ(fake.run(&sc), 0);
  fake.wait();
  live.flush();
  session.end_step(session_now_ns());
  live.stop();
  const auto out = session.finish(INT64_MAX / 2);
  ASSERT_EQ(out.size(), 1u);
  const Diagnostics& d = out[0].report.diagnostics;
  EXPECT_EQ(d.count(Diag::cupti_timestamp_invalid), 3u);
  EXPECT_EQ(d.count(Diag::cupti_record_unknown_kind), 2u);
  // 17 planted drops plus any record the fake could not place (no buffer).
  EXPECT_EQ(d.count(Diag::cupti_records_dropped), 17u + fake.stats().records_lost_no_buffer);
  // NULL buffer, over-long buffer, truncated last record; plus the NULL
  // completion's real buffer, which CUPTI never returned and stop() kept.
  EXPECT_GE(d.count(Diag::cupti_buffer_invalid), 3u);
  // Every record either arrived or is counted as lost for want of a buffer
  // (a loaded machine starves the small pool); the faulty buffers and
  // planted drops account for the rest, a few hundred at most.
  EXPECT_GT(out[0].report.steps[0].devices.at(0).kernels + fake.stats().records_lost_no_buffer, 4000u);
  EXPECT_EQ(d.count(Diag::session_events_dropped), 0u);
}

TEST_P(ScenarioCell, RecordsCarryTheSessionClockThroughTheTimestampCallback) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session session(SessionOptions{});
  LiveCollector live(session, small_pool());
  ASSERT_EQ(live.start(), "");
  EXPECT_EQ(fake.stats().timestamp_callback_set, 1);
  const int64_t before = session_now_ns();
  const int64_t fake_now = fake.now_ns();
  const int64_t after = session_now_ns();
  EXPECT_GE(fake_now, before);
  EXPECT_LE(fake_now, after);
  session.begin_step(0, before);
  fake.launch("k", 7, 1000, 1000 + cell().skew_ns);  // the skew moves it 1 us after the launch began
  live.flush();
  session.end_step(session_now_ns() + 10'000);
  live.stop();
  const auto out = session.finish(INT64_MAX / 2);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].report.steps[0].devices.size(), 1u);
  EXPECT_EQ(out[0].report.steps[0].devices[0].kernels, 1u);
  EXPECT_EQ(out[0].report.steps[0].devices[0].breakdown.compute_ns, 1000);
}

}  // namespace
}  // namespace gpuutil
