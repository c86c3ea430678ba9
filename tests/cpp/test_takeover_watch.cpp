// TakeoverWatch (collectors/cupti/takeover_watch.h): when gpuutil may say
// another CUPTI client took CUPTI behind its back, from when, and when it
// must not (an idle GPU, one quiet flush, a probe that never matched).
#include "collectors/cupti/takeover_watch.h"

#include <gtest/gtest.h>

namespace gpuutil::cupti {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kQuiet = 300 * kMs;

// An observation; `calls`: API calls made after the last buffer event (learnt
// at exit), with buffers of 10 records (two buffers' worth is evidence that
// CUPTI asked another client for buffers).
TakeoverObservation seen(int64_t now_ns, int64_t last_buffer_event_ns, size_t outstanding, int64_t skew_ns = 0,
                         uint64_t calls = 0) {
  TakeoverObservation o;
  o.now_ns = now_ns;
  o.last_buffer_event_ns = last_buffer_event_ns;
  o.buffers_outstanding = outstanding;
  o.clock_skew_ns = skew_ns;
  o.calls_since_buffer_event = calls;
  o.calls_per_buffer = 10;
  return o;
}

TEST(TakeoverWatch, SilenceWhileCallsThatFillTwoBuffersAreMadeIsATakeoverFromTheLastBufferEvent) {
  TakeoverWatch w(kQuiet);
  w.attached(1000 * kMs, 0);
  // A buffer was requested at 1010 ms; then nothing for 400 ms of flushing
  // while the application made 25 calls (2.5 buffers of API records).
  EXPECT_EQ(w.observe(seen(1020 * kMs, 1010 * kMs, 1, 0, 5)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(1200 * kMs, 1010 * kMs, 1, 0, 15)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(1300 * kMs, 1010 * kMs, 1, 0, 25)), TakeoverWatch::Change::kNone) << "only 290 ms quiet";
  EXPECT_EQ(w.observe(seen(1400 * kMs, 1010 * kMs, 1, 0, 30)), TakeoverWatch::Change::kTaken);
  EXPECT_TRUE(w.taken());
  EXPECT_EQ(w.cause(), TakeoverCause::kBuffersSilent);
  EXPECT_EQ(w.since_ns(), 1010 * kMs) << "records after the last buffer gpuutil saw may have gone elsewhere";
  EXPECT_NE(w.why().find("300 ms while 1 were outstanding, 30 API calls"), std::string::npos) << w.why();
  EXPECT_EQ(w.observe(seen(1500 * kMs, 1010 * kMs, 1, 0, 40)), TakeoverWatch::Change::kNone) << "said once";
}

// Issue 36, item 5: an NCCL kernel spinning for a late peer with the host
// blocked in a sync holds its buffer and asks for no other; its silence is
// no evidence of another client, however long (the collector names it
// stuck instead). The old rule called it a takeover after quiet_ns.
TEST(TakeoverWatch, ABufferHeldSilentWithTheHostBlockedInASyncIsNeverATakeover) {
  TakeoverWatch w(kQuiet);
  w.attached(0, 0);
  for (int64_t t = 10; t < 20'000; t += 100) {
    // Three calls (the collective's launch, the sync) and nothing since.
    EXPECT_EQ(w.observe(seen(t * kMs, 5 * kMs, 1, 0, 3)), TakeoverWatch::Change::kNone) << t;
  }
  EXPECT_FALSE(w.taken());
}

TEST(TakeoverWatch, AnIdleGpuWithNoBufferOutstandingIsNeverATakeover) {
  TakeoverWatch w(kQuiet);
  w.attached(0, 0);
  for (int64_t t = 10; t < 5000; t += 100) {
    EXPECT_EQ(w.observe(seen(t * kMs, INT64_MIN, 0)), TakeoverWatch::Change::kNone) << t;
  }
  EXPECT_FALSE(w.taken());
}

TEST(TakeoverWatch, CallsLearntAtExitWithNoBufferTrafficAreATakeoverWithNothingOutstanding) {
  // The callback API on gpuutil's subscription still reports launches after
  // another client took the buffer callbacks: records are owed to gpuutil.
  TakeoverWatch w(kQuiet);
  w.attached(0, 0);
  EXPECT_EQ(w.observe(seen(10 * kMs, 5 * kMs, 0, 0, 0)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(200 * kMs, 5 * kMs, 0, 0, 0)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(400 * kMs, 5 * kMs, 0, 0, 0)), TakeoverWatch::Change::kNone)
      << "no call since the last buffer event";
  EXPECT_EQ(w.observe(seen(500 * kMs, 5 * kMs, 0, 0, 19)), TakeoverWatch::Change::kNone)
      << "19 calls: not yet two buffers of records";
  ASSERT_EQ(w.observe(seen(600 * kMs, 5 * kMs, 0, 0, 20)), TakeoverWatch::Change::kTaken);
  EXPECT_NE(w.why().find("0 were outstanding, 20 API calls"), std::string::npos) << w.why();
}

TEST(TakeoverWatch, FlushesAfterALongIdleGapMustSpanHalfTheQuietTimeAgain) {
  // The drain thread flushes only while a step waits: after a long idle
  // while, the silence before it proves nothing.
  TakeoverWatch w(kQuiet);
  w.attached(0, 0);
  EXPECT_EQ(w.observe(seen(10 * kMs, 5 * kMs, 2, 0, 0)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(5000 * kMs, 5 * kMs, 2, 0, 30)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(5005 * kMs, 5 * kMs, 2, 0, 30)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(5100 * kMs, 5 * kMs, 2, 0, 30)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(5150 * kMs, 5 * kMs, 2, 0, 30)), TakeoverWatch::Change::kTaken);
}

TEST(TakeoverWatch, BuffersFlowingAgainEndASilentTakeover) {
  // A false alarm (a client that gave the callbacks back) ends when a
  // buffer reaches gpuutil again.
  TakeoverWatch w(kQuiet);
  w.attached(0, 0);
  w.observe(seen(10 * kMs, 5 * kMs, 1, 0, 0));
  w.observe(seen(200 * kMs, 5 * kMs, 1, 0, 30));
  ASSERT_EQ(w.observe(seen(400 * kMs, 5 * kMs, 1, 0, 30)), TakeoverWatch::Change::kTaken);
  EXPECT_EQ(w.observe(seen(900 * kMs, 5 * kMs, 1, 0, 30)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(1000 * kMs, 950 * kMs, 0, 0, 0)), TakeoverWatch::Change::kBack);
  EXPECT_FALSE(w.taken());
  EXPECT_EQ(w.observe(seen(1010 * kMs, 950 * kMs, 1, 0, 0)), TakeoverWatch::Change::kNone) << "quiet counts afresh";
}

TEST(TakeoverWatch, AFlushThatFindsNoCallbacksIsATakeoverAtOnceAndStaysUntilAttachedAgain) {
  TakeoverWatch w(10'000 * kMs);
  w.attached(100 * kMs, 0);
  TakeoverObservation o = seen(150 * kMs, INT64_MIN, 0);
  o.callbacks_missing = true;
  ASSERT_EQ(w.observe(o), TakeoverWatch::Change::kTaken);
  EXPECT_EQ(w.cause(), TakeoverCause::kCallbacksGone);
  EXPECT_EQ(w.since_ns(), 100 * kMs) << "from the attach: nothing came through gpuutil's callbacks since";
  EXPECT_NE(w.why().find("cuptiFinalize"), std::string::npos) << w.why();
  EXPECT_NE(w.why().find("TEARDOWN_CUPTI=1"), std::string::npos) << w.why();
  EXPECT_EQ(w.observe(seen(200 * kMs, 190 * kMs, 0)), TakeoverWatch::Change::kNone)
      << "gone callbacks do not come back by themselves";
  EXPECT_TRUE(w.taken());
  w.attached(300 * kMs, 0);
  EXPECT_FALSE(w.taken());
}

TEST(TakeoverWatch, CuptisClockLeavingTheSessionClockIsATakeoverAtOnce) {
  // Kineto registers its own (TSC) clock when it starts a trace.
  TakeoverWatch w(10'000 * kMs);
  w.attached(0, 20'000);  // the probe read the session clock (20 us apart)
  EXPECT_EQ(w.observe(seen(10 * kMs, 5 * kMs, 0, 500'000)), TakeoverWatch::Change::kNone) << "0.5 ms: jitter";
  ASSERT_EQ(w.observe(seen(20 * kMs, 5 * kMs, 0, int64_t(1'700'000'000) * 1'000'000'000)),
            TakeoverWatch::Change::kTaken);
  EXPECT_EQ(w.cause(), TakeoverCause::kClockReplaced);
  EXPECT_EQ(w.since_ns(), 5 * kMs);
  EXPECT_NE(w.why().find("KINETO_USE_DAEMON"), std::string::npos) << w.why();
}

TEST(TakeoverWatch, AClockProbeThatDidNotMatchAtAttachIsIgnored) {
  // A CUPTI whose cuptiGetTimestamp does not follow the registered clock
  // tells nothing: the probe is off, never a false takeover.
  TakeoverWatch w(10'000 * kMs);
  w.attached(0, int64_t(1'700'000'000) * 1'000'000'000);
  EXPECT_EQ(w.observe(seen(10 * kMs, 5 * kMs, 0, 5)), TakeoverWatch::Change::kNone);
  TakeoverWatch none(10'000 * kMs);
  none.attached(0, INT64_MIN);  // no cuptiGetTimestamp
  EXPECT_EQ(none.observe(seen(10 * kMs, 5 * kMs, 0, int64_t(1) << 60)), TakeoverWatch::Change::kNone);
}

TakeoverObservation owed(int64_t now_ns, int64_t last_buffer_event_ns, size_t outstanding, int64_t launch_ns,
                              bool work_waiting, uint64_t missing = 1) {
  TakeoverObservation o = seen(now_ns, last_buffer_event_ns, outstanding);
  o.owed_records = missing;
  o.owed_since_ns = launch_ns;
  o.device_work_waiting = work_waiting;
  return o;
}

TEST(TakeoverWatch, ASynchronisedLaunchWhoseRecordCameNowhereIsATakeoverAtTheFlushAfterTheSync) {
  // Another client keeping CUPTI's clock started in the idle gap between
  // two steps: nothing of gpuutil's was outstanding, the next step's launch
  // got a buffer from that client, and a device sync finished it.
  TakeoverWatch w(10'000 * kMs);
  w.attached(0, 0);
  ASSERT_EQ(w.observe(owed(120 * kMs, 90 * kMs, 0, 100 * kMs, false)), TakeoverWatch::Change::kTaken);
  EXPECT_EQ(w.cause(), TakeoverCause::kRecordsElsewhere);
  EXPECT_EQ(w.since_ns(), 90 * kMs) << "from the last buffer gpuutil saw";
  EXPECT_NE(w.why().find("1 launches finished by a device synchronisation"), std::string::npos) << w.why();
}

TEST(TakeoverWatch, WithOnlyHeldEmptyBuffersOutstandingMissingRecordsAreATakeoverAtALaterFlush) {
  // hold=1: CUPTI keeps an empty prefetched buffer of gpuutil's. Nothing
  // runs, and a later flush still brought no buffer: a takeover.
  TakeoverWatch w(10'000 * kMs);
  w.attached(0, 0);
  EXPECT_EQ(w.observe(owed(120 * kMs, 90 * kMs, 2, 100 * kMs, false)), TakeoverWatch::Change::kNone)
      << "a launch still inside its API call may hold a buffer back: looked at again later";
  EXPECT_EQ(w.observe(owed(125 * kMs, 90 * kMs, 2, INT64_MAX, false, 0)), TakeoverWatch::Change::kNone)
      << "5 ms on: too soon";
  ASSERT_EQ(w.observe(owed(140 * kMs, 90 * kMs, 2, INT64_MAX, false, 0)), TakeoverWatch::Change::kTaken);
  EXPECT_EQ(w.cause(), TakeoverCause::kRecordsElsewhere);
}

TEST(TakeoverWatch, ASynchronisedLaunchsRecordAHeldBufferMayStillHoldIsNoTakeover) {
  TakeoverWatch w(10'000 * kMs);
  w.attached(0, 0);
  // A buffer of gpuutil's is held and a launch learnt since still waits:
  // a default flush withholds the buffer holding that unfinished record,
  // and the synchronised launch's record may be in it.
  EXPECT_EQ(w.observe(owed(120 * kMs, 90 * kMs, 1, 100 * kMs, false)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(owed(140 * kMs, 90 * kMs, 1, INT64_MAX, true, 0)), TakeoverWatch::Change::kNone);
  // Then that buffer came back: the callbacks are gpuutil's, and nothing
  // is concluded even once the GPU is idle.
  EXPECT_EQ(w.observe(owed(160 * kMs, 150 * kMs, 0, INT64_MAX, false, 0)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(owed(200 * kMs, 150 * kMs, 1, INT64_MAX, false, 0)), TakeoverWatch::Change::kNone);
  // A buffer came back (or was requested) after the launch itself.
  EXPECT_EQ(w.observe(owed(220 * kMs, 205 * kMs, 0, 200 * kMs, false)), TakeoverWatch::Change::kNone);
  EXPECT_FALSE(w.taken());
}

TEST(TakeoverWatch, BuffersReachingGpuutilAgainEndATakeoverSeenFromMissingRecords) {
  TakeoverWatch w(10'000 * kMs);
  w.attached(0, 0);
  ASSERT_EQ(w.observe(owed(120 * kMs, 90 * kMs, 0, 100 * kMs, false)), TakeoverWatch::Change::kTaken);
  EXPECT_EQ(w.observe(seen(300 * kMs, 110 * kMs, 0)), TakeoverWatch::Change::kNone);
  EXPECT_EQ(w.observe(seen(400 * kMs, 350 * kMs, 0)), TakeoverWatch::Change::kBack);
}

}  // namespace
}  // namespace gpuutil::cupti
