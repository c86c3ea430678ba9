// The LibTorch hook's range queues (python/gpuutil/torch/csrc/hook_ring.h),
// driven as the hook drives them: application threads call record(), one
// consumer drains (gpuutil does at step ends). Each test uses its own Tag,
// so its slab and queues are its own.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "hook_ring.h"

namespace {

// What a drain handed over, in order.
struct Drained {
  struct Range {
    std::string name;
    int64_t start_ns, end_ns, thread_key;
    int kind;
  };
  std::vector<Range> ranges;
  static void sink(void* ctx, const char* name, int64_t start_ns, int64_t end_ns, int64_t thread_key, int64_t,
                   int kind) {
    static_cast<Drained*>(ctx)->ranges.push_back({name, start_ns, end_ns, thread_key, kind});
  }
};

template <class Rings>
uint64_t drain(Drained* out) {
  return Rings::drain_into(&Drained::sink, out);
}

int64_t this_key() { return static_cast<int64_t>(static_cast<uint32_t>(pthread_self())); }

TEST(HookQueue, AThreadBuffersFarMoreThanTheOldFixedRingBetweenDrainsAndReadsItBackInOrder) {
  struct Tag {};
  using Rings = gpuutil_hook::RingSet<Tag>;
  constexpr int64_t kRanges = 100'000;  // the fixed per-thread ring held 4,096
  for (int64_t i = 0; i < kRanges; ++i) Rings::record("aten::mm", i, i + 1, 2);
  Drained d;
  EXPECT_EQ(drain<Rings>(&d), 0u) << "no range dropped";
  ASSERT_EQ(d.ranges.size(), static_cast<size_t>(kRanges));
  for (int64_t i = 0; i < kRanges; ++i) {
    ASSERT_EQ(d.ranges[i].start_ns, i) << "in order";
    ASSERT_EQ(d.ranges[i].end_ns, i + 1);
  }
  EXPECT_EQ(d.ranges[0].name, "aten::mm");
  EXPECT_EQ(d.ranges[0].kind, 2);
  EXPECT_EQ(d.ranges[0].thread_key, this_key()) << "keyed by (uint32_t)pthread_self(), as CUPTI records";
  // Every segment read past is back; the thread keeps the one its last range is in.
  EXPECT_EQ(Rings::segments_free(), Rings::segments() - 1);
  Drained again;
  EXPECT_EQ(drain<Rings>(&again), 0u);
  EXPECT_TRUE(again.ranges.empty()) << "a drain hands each range over once";
}

TEST(HookQueue, LongNamesAreTruncatedAndNulTerminated) {
  struct Tag {};
  using Rings = gpuutil_hook::RingSet<Tag>;
  const std::string longest(300, 'x');
  Rings::record(longest.c_str(), 1, 2, 0);
  Rings::record("", 3, 4, 1);
  Drained d;
  drain<Rings>(&d);
  ASSERT_EQ(d.ranges.size(), 2u);
  EXPECT_EQ(d.ranges[0].name, longest.substr(0, GPUUTIL_HOOK_NAME_BYTES));
  EXPECT_EQ(d.ranges[1].name, "");
}

TEST(HookQueue, AUsedUpSlabDropsAndCountsTheRestThenRecordsAgainOnceDrained) {
  struct Tag {};
  using Rings = gpuutil_hook::RingSet<Tag, 16, 8>;  // 128 ranges in all
  for (int64_t i = 0; i < 200; ++i) Rings::record("r", i, i, 0);
  Drained d;
  EXPECT_EQ(drain<Rings>(&d), 72u) << "the 72 ranges past the slab are counted";
  ASSERT_EQ(d.ranges.size(), 128u);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(d.ranges[i].start_ns, i) << "the first 128 are kept, in order";
  Drained d2;
  for (int64_t i = 0; i < 100; ++i) Rings::record("r", 1000 + i, 0, 0);
  EXPECT_EQ(drain<Rings>(&d2), 0u) << "the drain gave the segments back";
  ASSERT_EQ(d2.ranges.size(), 100u);
  EXPECT_EQ(d2.ranges.front().start_ns, 1000);
  EXPECT_EQ(d2.ranges.back().start_ns, 1099);
  Drained d3;
  EXPECT_EQ(drain<Rings>(&d3), 0u) << "dropped counts are handed over once";
}

TEST(HookQueue, WarmSegmentsAreReusedSoMemoryIsTheDeepestBacklog) {
  struct Tag {};
  using Rings = gpuutil_hook::RingSet<Tag, 64, 64>;
  size_t read = 0;
  for (int round = 0; round < 50; ++round) {
    const int n = round == 7 ? 2000 : 300;  // one deep backlog among shallow ones
    for (int i = 0; i < n; ++i) Rings::record("r", i, i, 0);
    Drained d;
    EXPECT_EQ(drain<Rings>(&d), 0u);
    read += d.ranges.size();
  }
  EXPECT_EQ(read, 49u * 300 + 2000);
  // 2,000 ranges take 32 segments (and a 33rd where a round starts inside
  // a held one): never-used segments are claimed only for the deepest round.
  EXPECT_LE(Rings::segments_touched(), 33u);
  EXPECT_GE(Rings::segments_touched(), 32u);
}

TEST(HookQueue, ThreadsRecordingWhileTheConsumerDrainsAtRandomLoseNothingAndKeepOrder) {
  struct Tag {};
  // A slab that holds all 1.2M ranges, so no schedule of this host can
  // make a drop; what is pinned is order and completeness while segments
  // pass between producers and the consumer.
  using Rings = gpuutil_hook::RingSet<Tag, 1024, 2048>;
  constexpr int kThreads = 4;
  constexpr int64_t kEach = 300'000;
  std::atomic<int> done{0};
  std::atomic<int64_t> read_total{0};
  std::vector<std::thread> producers;
  std::vector<int64_t> keys(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([t, &done, &keys, &read_total] {
      keys[t] = this_key();
      for (int64_t i = 0; i < kEach; ++i) {
        // The threads together stay at most 30,000 ranges each ahead of
        // what the consumer has read, so drains land mid-run on any host.
        while (i % 1000 == 0 && read_total.load() + kThreads * 30'000 < kThreads * i) std::this_thread::yield();
        Rings::record("aten::add", i, t, 1);
      }
      done.fetch_add(1);
    });
  }
  std::map<int64_t, int64_t> next_by_key;  // next expected sequence number per thread
  std::mt19937 rng(7);
  uint64_t dropped = 0;
  size_t mid_run_drains = 0;  // drains that read ranges while producers still ran
  for (bool last = false; !last;) {
    last = done.load() == kThreads;
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
    Drained d;
    dropped += drain<Rings>(&d);
    mid_run_drains += !last && !d.ranges.empty() ? 1 : 0;
    read_total.fetch_add(static_cast<int64_t>(d.ranges.size()));
    for (const auto& r : d.ranges) {
      int64_t& next = next_by_key[r.thread_key];
      ASSERT_EQ(r.start_ns, next) << "thread " << r.end_ns << ": ranges in order, none missing";
      ++next;
    }
  }
  for (auto& p : producers) p.join();
  Drained tail;
  dropped += drain<Rings>(&tail);
  EXPECT_TRUE(tail.ranges.empty());
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(next_by_key.size(), static_cast<size_t>(kThreads));
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next_by_key[keys[t]], kEach) << "thread " << t;
  EXPECT_GE(mid_run_drains, 1u) << "the consumer drained while the producers ran";
}

TEST(HookQueue, AFinishedThreadHandsItsQueueAndSegmentsToTheNextThread) {
  struct Tag {};
  using Rings = gpuutil_hook::RingSet<Tag, 16, 8>;
  size_t read = 0;
  for (int t = 0; t < 200; ++t) {  // 200 short-lived threads through 8 segments
    std::thread([t] {
      for (int i = 0; i < 20; ++i) Rings::record("gloo:all_reduce", t, i, 0);
    }).join();
    Drained d;
    EXPECT_EQ(drain<Rings>(&d), 0u) << "thread " << t;
    read += d.ranges.size();
    // A second drain returns the exited thread's last segment and header.
    drain<Rings>(&d);
  }
  EXPECT_EQ(read, 200u * 20);
  EXPECT_EQ(Rings::queues_made(), 1u) << "one header, reused by every thread";
  EXPECT_EQ(Rings::segments_free(), Rings::segments()) << "no segment left with a thread that ended";
}

TEST(HookQueue, AThreadEndingBeforeTheDrainKeepsItsRangesUntilRead) {
  struct Tag {};
  using Rings = gpuutil_hook::RingSet<Tag, 16, 8>;
  int64_t key = 0;
  std::thread([&key] {
    key = this_key();
    for (int i = 0; i < 40; ++i) Rings::record("r", i, 0, 0);
  }).join();
  std::thread([] { Rings::record("other", 99, 0, 0); }).join();  // may not take the header yet
  Drained d;
  EXPECT_EQ(drain<Rings>(&d), 0u);
  ASSERT_EQ(d.ranges.size(), 41u);
  int64_t next = 0;
  for (const auto& r : d.ranges) {
    if (r.name == "r") {
      EXPECT_EQ(r.start_ns, next++);
      EXPECT_EQ(r.thread_key, key);
    }
  }
  EXPECT_EQ(next, 40);
  EXPECT_EQ(Rings::queues_made(), 2u) << "the second thread could not take a header still holding ranges";
}

}  // namespace
