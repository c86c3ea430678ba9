// LaunchTracker's rules on their own, without CUPTI or the fake: which
// launches still wait for records after a given sequence of calls learnt at
// API exit, API records and device records. The faithful suite
// (test_cupti_faithful.cpp) covers the same rules end to end under the
// fake's matrix; these pin the API-record wait added after stop 34 (a
// launch waits for its device record and, when learnt at API exit with its
// API record traced, for that record too) and its ways out.
#include <gtest/gtest.h>

#include "collectors/cupti/launch_tracker.h"

namespace gpuutil::cupti {
namespace {

constexpr uint64_t kThread = 7;

void enqueue(LaunchTracker& t, uint32_t corr, int64_t start_ns, bool api_record, uint64_t thread = kThread) {
  t.on_enqueue(corr, start_ns, thread, /*graph=*/false, 1, kUnknownStream, 0, {}, api_record);
}

TEST(LaunchTrackerApiRecord, ALaunchWithItsKernelDoneStillWaitsForItsApiRecord) {
  LaunchTracker t;
  enqueue(t, 10, 1000, true);
  t.on_device(10, 7, 1);
  EXPECT_EQ(t.waiting(), 1u) << "the kernel's record alone does not complete a launch learnt at API exit";
  EXPECT_EQ(t.oldest_waiting_ns(), 1000) << "it holds the watermark";
  EXPECT_FALSE(t.running_work_waiting()) << "but no device work waits";
  t.on_api_record(10, kThread);
  EXPECT_EQ(t.waiting(), 0u);
}

TEST(LaunchTrackerApiRecord, AnApiRecordBeforeTheKernelLeavesOnlyTheKernelToWaitFor) {
  LaunchTracker t;
  enqueue(t, 10, 1000, true);
  t.on_api_record(10, kThread);
  EXPECT_EQ(t.waiting(), 1u);
  EXPECT_TRUE(t.running_work_waiting());
  t.on_device(10, 7, 1);
  EXPECT_EQ(t.waiting(), 0u);
}

TEST(LaunchTrackerApiRecord, RecordsThatCameBeforeTheCallWasLearntCompleteItAtOnce) {
  LaunchTracker t;
  t.on_api_record(10, kThread);
  t.on_device(10, 7, 1);
  enqueue(t, 10, 1000, true);
  EXPECT_EQ(t.waiting(), 0u);
}

TEST(LaunchTrackerApiRecord, AKernelBeforeTheCallWasLearntLeavesTheApiRecordToWaitFor) {
  LaunchTracker t;
  t.on_device(10, 7, 1);
  enqueue(t, 10, 1000, true);
  EXPECT_EQ(t.waiting(), 1u);
  t.on_api_record(10, kThread);
  EXPECT_EQ(t.waiting(), 0u);
}

TEST(LaunchTrackerApiRecord, ALaterApiRecordOfTheSameThreadEndsTheWaitForALostOne) {
  LaunchTracker t;
  enqueue(t, 10, 1000, true);
  t.on_device(10, 7, 1);
  t.on_api_record(11, kThread + 1);  // another thread's later record says nothing about this one
  t.on_flush_drained(5000);
  EXPECT_EQ(t.waiting(), 1u);
  t.on_api_record(12, kThread);  // written after 10's: 10's came before or was lost
  t.on_flush_drained(6000);
  EXPECT_EQ(t.waiting(), 0u) << "a dropped API record must not hold its steps";
  // And a call learnt only after a later record of its thread came waits
  // for nothing but its kernel.
  enqueue(t, 9, 900, true);
  t.on_device(9, 7, 1);
  EXPECT_EQ(t.waiting(), 0u);
}

TEST(LaunchTrackerApiRecord, CallsLearntFromTheirApiRecordsWaitForTheKernelOnly) {
  LaunchTracker t;
  enqueue(t, 10, 1000, false);
  t.on_device(10, 7, 1);
  EXPECT_EQ(t.waiting(), 0u);
}

TEST(LaunchTrackerApiRecord, AStuckGpuIsTheOldestLaunchWhoseDeviceWorkIsMissing) {
  LaunchTracker t;
  enqueue(t, 10, 1000, true);  // its kernel finished; its API record sits in a held buffer
  t.on_device(10, 7, 1);
  enqueue(t, 11, 2000, true);  // its kernel hangs
  EXPECT_EQ(t.oldest_waiting().correlation_id, 10u) << "the watermark: the oldest call missing any record";
  EXPECT_EQ(t.oldest_waiting(/*device_only=*/true).correlation_id, 11u) << "what the GPU is stuck in";
}

// Issue 36: a sync and a drained default flush are no proof that records
// came (a default flush returns no buffer that still holds an unfinished
// record, and per-thread buffers mix the finished step's records with the
// next step's running ones). They make a launch overdue; a forced flush
// after the sync (every buffer comes back) releases what is still missing.
TEST(LaunchTrackerApiRecord, ADeviceSyncAndADrainedDefaultFlushCompleteNothing) {
  LaunchTracker t;
  enqueue(t, 10, 1000, true);
  t.on_device(10, 7, 1);  // waits for its API record
  enqueue(t, 11, 1500, true);  // waits for both
  t.on_device_sync(3000, 1);
  t.on_flush_drained(4000);
  EXPECT_EQ(t.waiting(), 2u) << "nothing is presumed delivered";
  EXPECT_EQ(t.overdue(), 1u) << "11's device work is known finished";
  EXPECT_FALSE(t.running_work_waiting());
  int64_t since = 0;
  EXPECT_EQ(t.take_owed(&since), 1u);
  EXPECT_EQ(since, 1500);
  const LaunchTracker::Released r = t.on_forced_flush_drained(5000);
  EXPECT_EQ(r.count, 1u) << "a forced flush returned every buffer: 11's record is missing";
  EXPECT_EQ(r.correlation_id, 11u);
  EXPECT_EQ(t.waiting(), 1u) << "10 still waits for its API record (a later record of its thread ends that)";
}

// A graph has many records and no count: its own records coming proves the
// device ran it, so when the evidence ends its wait (a forced flush after a
// sync, or the missing bound) it is done, not a missing record. One whose
// records never came is missing. (Found by the GPU check's graph scenario
// on the fake: the last replay before the stop was counted missing.)
TEST(LaunchTrackerApiRecord, AGraphWhoseRecordsCameIsDoneAtTheForcedFlushNotMissing) {
  LaunchTracker t;
  t.on_enqueue(10, 1000, kThread, /*graph=*/true, 1, 7, 0, {}, false);
  t.on_device(10, 7, 1);
  t.on_device(10, 7, 1);
  t.on_enqueue(11, 2000, kThread, /*graph=*/true, 1, 7, 0, {}, false);
  EXPECT_EQ(t.waiting(), 2u) << "a graph's own records do not say its last one came";
  t.on_device_sync(3000, 1);
  t.on_flush_drained(4000);
  EXPECT_EQ(t.overdue(), 2u);
  const LaunchTracker::Released r = t.on_forced_flush_drained(5000);
  EXPECT_EQ(r.count, 1u) << "only the graph none of whose records came is missing";
  EXPECT_EQ(r.correlation_id, 11u);
  EXPECT_EQ(t.waiting(), 0u);
}

TEST(LaunchTrackerApiRecord, WaitsForManyLostRecordsStayBounded) {
  LaunchTracker t;
  // 20,000 launches whose kernels came and whose API records were all lost,
  // then one later API record of the thread: nothing waits, nothing is kept.
  for (uint32_t c = 1; c <= 20'000; ++c) {
    enqueue(t, c, int64_t(c) * 10, true);
    t.on_device(c, 7, 1);
  }
  EXPECT_EQ(t.waiting(), 20'000u);
  t.on_api_record(20'001, kThread);
  t.on_flush_drained(1'000'000);
  EXPECT_EQ(t.waiting(), 0u);
}

}  // namespace
}  // namespace gpuutil::cupti
