// The cross-rank view (gpuutil/cluster.h): planted rank steps with known
// answers (stragglers and their causes, wait vs transfer per collective
// instance, concurrent instances of multi-bucket DDP counted once,
// missing/short/late ranks, bounded memory, clock offsets), the rank-batch
// JSON (round trip, malformed input rejected whole, fuzzing) and the offline
// view of real NCCL rank traces (several streams, several buckets).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/cluster.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report_json.h"
#include "traces.h"

namespace gpuutil {
namespace {

constexpr int64_t kMs = 1'000'000;

// A host-basis step: `extra_dataloader_ns` on top of a 10 ms base step, and
// one gloo all-reduce of `coll_ns`.
RankStep host_step(int64_t step, int64_t extra_dataloader_ns, int64_t coll_ns, int64_t start_ns = 0) {
  RankStep s;
  s.step = step;
  s.start_ns = start_ns;
  s.basis = "host";
  const int64_t dataloader = 1 * kMs + extra_dataloader_ns;
  s.categories_ns = {{"dataloader", dataloader}, {"forward", 3 * kMs}, {"backward", 5 * kMs},
                     {"optimizer", 1 * kMs},     {"collective", coll_ns}};
  s.wall_ns = dataloader + 9 * kMs + coll_ns;
  s.collectives = {{"gloo", coll_ns}};
  return s;
}

const Finding* straggler(const ClusterView& v) {
  for (const auto& f : v.findings) {
    if (f.id == "straggler") return &f;
  }
  return nullptr;
}

TEST(Cluster, PlantedDataloaderStragglerIsNamedWithItsCauseAndTheOthersWaitItsDelay) {
  ClusterOptions o;
  o.world_size = 4;
  ClusterAssembler a(o);
  for (int32_t r = 0; r < 4; ++r) a.set_host(r, "node" + std::to_string(r / 2));
  for (int64_t step = 0; step < 10; ++step) {
    for (int32_t r = 0; r < 4; ++r) {
      // The others wait 40 ms in the all-reduce for rank 2; the transfer is 1 ms.
      a.add(r, r == 2 ? host_step(step, 40 * kMs, 1 * kMs) : host_step(step, 0, 41 * kMs));
    }
  }
  a.advance();
  const ClusterView v = a.view();
  ASSERT_EQ(v.ranks.size(), 4u);
  EXPECT_EQ(v.steps_compared, 10u);
  EXPECT_EQ(v.collective_instances, 10u);
  EXPECT_EQ(v.collective_mismatches, 0u);
  for (const auto& r : v.ranks) {
    EXPECT_EQ(r.collective_transfer_ns, 10 * kMs) << r.rank;
    EXPECT_EQ(*r.collective_wait_p50_ns, r.rank == 2 ? 0 : 40 * kMs) << r.rank;
    EXPECT_EQ(*r.own_p50_ns, r.rank == 2 ? 51 * kMs : 11 * kMs) << r.rank;
  }
  EXPECT_DOUBLE_EQ(*v.ranks[2].relative_perf, 11.0 / 51.0);
  EXPECT_DOUBLE_EQ(*v.ranks[0].relative_perf, 1.0);
  const Finding* f = straggler(v);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->host, "node1");
  EXPECT_EQ(f->cause, "dataloader");
  EXPECT_EQ(f->recoverable_ns, 3 * 10 * 40 * kMs);  // what it cost the other three ranks
  EXPECT_NE(f->title.find("Rank 2 (node1)"), std::string::npos);
  EXPECT_NE(f->fix.find("num_workers"), std::string::npos);
  ASSERT_FALSE(v.recent.empty());
  EXPECT_EQ(v.recent.back().straggler, 2);
}

// Issue 37: with two ranks the evidence said "the other 1 ranks wait".
TEST(Cluster, TwoRankStragglerEvidenceSpeaksOfTheOtherRankInTheSingular) {
  ClusterOptions o;
  o.world_size = 2;
  ClusterAssembler a(o);
  for (int64_t step = 0; step < 10; ++step) {
    for (int32_t r = 0; r < 2; ++r) a.add(r, r == 1 ? host_step(step, 40 * kMs, 1 * kMs) : host_step(step, 0, 41 * kMs));
  }
  a.advance();
  const Finding* f = straggler(a.view());
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->evidence.find("; the other rank waits a median 40.0 ms per step"), std::string::npos) << f->evidence;
  EXPECT_EQ(f->evidence.find("1 ranks"), std::string::npos) << f->evidence;
}

// The view of one step of two ranks, each `wall_ns` long, with these
// collective instances.
ClusterView one_step_of_two_ranks(int64_t wall_ns, std::vector<CollectiveSample> rank0,
                                  std::vector<CollectiveSample> rank1) {
  ClusterOptions o;
  o.world_size = 2;
  ClusterAssembler a(o);
  RankStep r0, r1;
  r0.step = r1.step = 0;
  r0.wall_ns = r1.wall_ns = wall_ns;
  r0.collectives = std::move(rank0);
  r1.collectives = std::move(rank1);
  a.add(0, r0);
  a.add(1, r1);
  a.advance();
  return a.view();
}

TEST(Cluster, WaitIsTimeBeyondTheMinimumOfEachInstanceMatchedByOrderWithinItsGroup) {
  // Group order matters, not global order: rank 1 interleaves differently.
  const ClusterView v = one_step_of_two_ranks(
      100 * kMs, {{"gpu stream #0", 10 * kMs}, {"gpu stream #1", 3 * kMs}, {"gpu stream #0", 2 * kMs}},
      {{"gpu stream #1", 5 * kMs}, {"gpu stream #0", 4 * kMs}, {"gpu stream #0", 7 * kMs},
       {"gpu stream #0", 1 * kMs}});  // one instance rank 0 did not have
  EXPECT_EQ(v.collective_instances, 3u);
  EXPECT_EQ(v.collective_mismatches, 1u);
  // stream #0: (10, 4) -> min 4; (2, 7) -> min 2. stream #1: (3, 5) -> min 3.
  EXPECT_EQ(v.ranks[0].collective_wait_ns, 6 * kMs + 0 + 0);
  EXPECT_EQ(v.ranks[1].collective_wait_ns, 0 + 5 * kMs + 2 * kMs);
  EXPECT_EQ(v.ranks[0].collective_transfer_ns, 9 * kMs);
  EXPECT_EQ(v.ranks[1].collective_transfer_ns, 9 * kMs);
}

// One step of DDP over gloo with three gradient buckets and gloo's two
// worker threads, as measured on a 2-rank torchrun job (tests/python
// dist_job.py --hidden 512 --depth 3 --bucket-cap-mb 0.25 --batch-size 16):
// rank 1's DataLoader takes 32 ms more per step. Times from the step start.
// Rank 0 (fast) has its buckets ready at 5, 6 and 7 ms; buckets 0 and 1 run
// at once on the two worker threads and both wait for rank 1, bucket 2
// queues until a worker is free (38.5 ms). Rank 1 arrives at 37, 38, 39 ms;
// each all-reduce then moves its bytes in 1.5 ms.
std::pair<RankStep, RankStep> ddp_three_bucket_step(int64_t step) {
  RankStep fast, slow;
  fast.step = slow.step = step;
  fast.basis = slow.basis = "host";
  fast.wall_ns = slow.wall_ns = 42 * kMs;
  fast.categories_ns = {{"dataloader", 3 * kMs}, {"forward", 1 * kMs}, {"backward", 3 * kMs},
                        {"collective", 33 * kMs}, {"optimizer", 1 * kMs}, {"other", 1 * kMs}};
  slow.categories_ns = {{"dataloader", 35 * kMs}, {"forward", 1 * kMs}, {"backward", 3 * kMs},
                        {"collective", 1 * kMs},  {"optimizer", 1 * kMs}, {"other", 1 * kMs}};
  const auto us = [](int64_t x) { return x * 1000; };
  fast.collectives = {{"gloo:all_reduce", us(33'500), us(5'000)},
                      {"gloo:all_reduce", us(33'500), us(6'000)},
                      {"gloo:all_reduce", us(2'000), us(38'500)}};
  slow.collectives = {{"gloo:all_reduce", us(1'500), us(37'000)},
                      {"gloo:all_reduce", us(1'500), us(38'000)},
                      {"gloo:all_reduce", us(1'500), us(39'000)}};
  return {fast, slow};
}

TEST(Cluster, ConcurrentGlooBucketsOfAFastRankWaitForTheStragglerOnceNotOncePerBucket) {
  ClusterOptions o;
  o.world_size = 2;
  ClusterAssembler a(o);
  for (int64_t step = 0; step < 20; ++step) {
    auto [fast, slow] = ddp_three_bucket_step(step);
    a.add(0, fast);
    a.add(1, slow);
  }
  a.advance();
  const ClusterView v = a.view();
  ASSERT_EQ(v.ranks.size(), 2u);
  EXPECT_EQ(v.collective_instances, 3u * 20u);
  EXPECT_EQ(v.collective_mismatches, 0u);
  const RankSummary& r0 = v.ranks[0];
  const RankSummary& r1 = v.ranks[1];
  // Rank 0 is in collectives from 5 ms on and none of them moves data until
  // bucket 0's transfer begins at 37 ms: it waits 32 ms, not 32 + 32 + 0.5
  // (bucket 1's and bucket 2's waits fall under transfers).
  EXPECT_EQ(*r0.collective_wait_p50_ns, 32 * kMs);
  EXPECT_LE(*r0.collective_wait_p50_ns, *r0.step_wall_p50_ns);
  EXPECT_EQ(*r0.own_p50_ns, 10 * kMs);
  EXPECT_EQ(*r1.collective_wait_p50_ns, 0);
  EXPECT_EQ(*r1.own_p50_ns, 42 * kMs);
  // Time in collectives (the union of the instances) = wait + transfer.
  EXPECT_EQ(r0.collective_wait_ns + r0.collective_transfer_ns, 20 * 35'500'000);  // [5, 40.5) ms
  EXPECT_EQ(r1.collective_wait_ns + r1.collective_transfer_ns, 20 * 3'500'000);   // [37, 40.5) ms
  ASSERT_TRUE(r0.relative_perf.has_value() && r1.relative_perf.has_value());
  EXPECT_DOUBLE_EQ(*r0.relative_perf, 1.0);
  EXPECT_DOUBLE_EQ(*r1.relative_perf, 10.0 / 42.0);
  const Finding* f = straggler(v);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->cause, "dataloader");
  // Rank 1's own time exceeds rank 0's by what was planted.
  EXPECT_EQ(*r1.own_p50_ns - *r0.own_p50_ns, 32 * kMs);
  for (const auto& step : v.recent) {
    for (const auto& sr : step.ranks) {
      EXPECT_LE(sr.collective_wait_ns, sr.wall_ns);
      EXPECT_EQ(sr.own_ns, sr.wall_ns - sr.collective_wait_ns);
    }
  }
}

TEST(Cluster, WaitOfAnInstanceThatRunsPastTheStepEndCountsOnlyInsideTheWall) {
  const ClusterView v = one_step_of_two_ranks(10 * kMs, {{"gpu stream #0", 8 * kMs, 6 * kMs}},  // 4 ms past the end
                                              {{"gpu stream #0", 1 * kMs, 9 * kMs}});
  EXPECT_EQ(v.ranks[0].collective_wait_ns, 4 * kMs);  // [6, 13) ms clipped to [6, 10)
  EXPECT_EQ(*v.ranks[0].own_p50_ns, 6 * kMs);
  EXPECT_EQ(v.ranks[1].collective_transfer_ns, 1 * kMs);
}

TEST(Cluster, ExtremeInstanceTimesFromAnotherProcessStayInsideTheWall) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const ClusterView v = one_step_of_two_ranks(10 * kMs, {{"g", kMax, kMax}, {"g", kMax, 0}, {"h", -5, -7}},
                                              {{"g", 0, kMax}, {"g", 1, std::nullopt}, {"h", 3, std::nullopt}});
  for (const auto& r : v.ranks) {
    EXPECT_GE(r.collective_wait_ns, 0);
    EXPECT_LE(r.collective_wait_ns, 10 * kMs);
    EXPECT_GE(*r.own_p50_ns, 0);
  }
}

TEST(Cluster, ComputeStragglerOnAThrottledGpuIsThrottling) {
  ClusterOptions o;
  o.world_size = 3;
  ClusterAssembler a(o);
  for (int64_t step = 0; step < 6; ++step) {
    for (int32_t r = 0; r < 3; ++r) {
      RankStep s;
      s.step = step;
      s.basis = "device";
      const int64_t compute = r == 1 ? 30 * kMs : 20 * kMs;
      const int64_t comm = r == 1 ? 2 * kMs : 12 * kMs;
      s.categories_ns = {{"compute", compute}, {"communication", comm}, {"launch", 1 * kMs}};
      s.wall_ns = compute + comm + 1 * kMs;
      s.collectives = {{"gpu stream #0", comm}};
      s.throttled = r == 1;
      a.add(r, s);
    }
  }
  a.advance();
  const ClusterView v = a.view();
  const Finding* f = straggler(v);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->cause, "throttling");
  EXPECT_NE(f->fix.find("throttled"), std::string::npos);
}

TEST(Cluster, BalancedRanksWithJitterBelowTheThresholdHaveNoStraggler) {
  ClusterOptions o;
  o.world_size = 8;
  ClusterAssembler a(o);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> jitter(0, kMs / 4);  // < 5% of a ~12 ms step
  for (int64_t step = 0; step < 50; ++step) {
    for (int32_t r = 0; r < 8; ++r) a.add(r, host_step(step, jitter(rng), 1 * kMs + jitter(rng)));
  }
  a.advance();
  const ClusterView v = a.view();
  EXPECT_EQ(straggler(v), nullptr);
  EXPECT_EQ(v.steps_compared, 50u);
  for (const auto& r : v.ranks) EXPECT_GT(*r.relative_perf, 0.9);
}

TEST(Cluster, SilentRanksAreWaitedForUntilFinishedOrLostThenNamed) {
  ClusterOptions o;
  o.world_size = 4;
  ClusterAssembler a(o);
  for (int64_t step = 0; step < 10; ++step) {
    for (int32_t r = 0; r < 3; ++r) {
      if (r == 1 && step >= 5) continue;  // rank 1 stops profiling after 5 steps
      a.add(r, host_step(step, 0, 1 * kMs));
    }
  }
  a.mark_finished(1);
  a.advance();
  EXPECT_EQ(a.view().steps_compared, 0u) << "rank 3 has not been heard from or declared lost: wait";
  a.mark_finished(3, /*heard_from=*/false);  // the leader's timeout
  a.advance();
  const ClusterView v = a.view();
  EXPECT_EQ(v.steps_compared, 10u);
  EXPECT_EQ(v.missing_ranks, std::vector<int32_t>{3});
  EXPECT_EQ(v.short_ranks, std::vector<int32_t>{1});
  EXPECT_EQ(v.ranks.size(), 3u);
  EXPECT_EQ(v.ranks[1].steps, 5u);
  EXPECT_TRUE(v.ranks[1].finished);
  EXPECT_EQ(a.pending_steps(), 0u);
}

TEST(Cluster, HeldStepsAreBoundedByTheWindowAndLateOnesAreCountedNotKept) {
  ClusterOptions o;
  o.world_size = 2;
  o.window_steps = 16;
  ClusterAssembler a(o);
  for (int64_t step = 0; step < 1000; ++step) {
    a.add(0, host_step(step, 0, 1 * kMs));  // rank 1 is silent (hung, or slow to publish)
    a.advance();
    ASSERT_LE(a.pending_steps(), o.window_steps + 1);
  }
  EXPECT_EQ(a.view().ranks[0].steps, 1000u - a.pending_steps());
  a.add(1, host_step(3, 0, 1 * kMs));  // long compared without it
  EXPECT_EQ(a.late(), 1u);
  a.add(0, host_step(999, 0, 1 * kMs));
  EXPECT_EQ(a.duplicates(), 1u);
  a.add(7, host_step(0, 0, 1 * kMs));
  a.add(-1, host_step(0, 0, 1 * kMs));
  EXPECT_EQ(a.foreign(), 2u);
  a.advance(/*final=*/true);
  EXPECT_EQ(a.pending_steps(), 0u);
}

TEST(Cluster, ClockOffsetsPutStepStartsOnTheLeadersTimeline) {
  ClusterOptions o;
  o.world_size = 2;
  ClusterAssembler a(o);
  const int64_t node1_clock_ahead_ns = 7'000 * kMs;  // 7 s: another machine's CLOCK_MONOTONIC
  a.set_clock_offset(0, 0, 0);
  a.set_clock_offset(1, -node1_clock_ahead_ns, 50'000);
  for (int64_t step = 0; step < 5; ++step) {
    const int64_t t = 1'000 * kMs + step * 20 * kMs;
    a.add(0, host_step(step, 0, 1 * kMs, t));
    a.add(1, host_step(step, 0, 1 * kMs, t + node1_clock_ahead_ns + 3 * kMs));  // starts 3 ms later
  }
  a.advance();
  const ClusterView v = a.view();
  EXPECT_EQ(*v.ranks[0].start_skew_p50_ns, 0);
  EXPECT_EQ(*v.ranks[1].start_skew_p50_ns, 3 * kMs);
  EXPECT_EQ(*v.ranks[1].clock_uncertainty_ns, 50'000);
  // Durations never needed the offsets: the waits are the same without them.
  EXPECT_EQ(v.ranks[1].collective_wait_ns, 0);
}

TEST(ClusterJson, RankBatchRoundTripsThroughTheAssembler) {
  RankBatch b;
  b.rank = 1;
  b.host = "node-\"7\"";
  b.clock_offset_ns = -12345;
  b.clock_uncertainty_ns = 678;
  for (int64_t step = 0; step < 3; ++step) b.steps.push_back(host_step(step, step * kMs, 2 * kMs, 1000 + step));
  b.steps[1].throttled = true;
  b.steps[2].collectives_dropped = 4;
  const std::string text = rank_batch_to_json(b);
  ClusterOptions o;
  o.world_size = 2;
  ClusterAssembler a(o);
  int32_t rank = -1;
  bool finished = true;
  EXPECT_EQ(ingest_rank_batch_json(a, text, &rank, &finished), "");
  EXPECT_EQ(rank, 1);
  EXPECT_FALSE(finished);
  EXPECT_EQ(a.pending_steps(), 3u);
  a.advance(/*final=*/true);
  const ClusterView v = a.view();
  ASSERT_EQ(v.ranks.size(), 1u);
  EXPECT_EQ(v.ranks[0].host, b.host);
  EXPECT_EQ(*v.ranks[0].clock_offset_ns, -12345);
  EXPECT_EQ(v.ranks[0].throttled_steps, 1u);
  EXPECT_EQ(v.collectives_dropped, 4u);
  int64_t dataloader = 0;
  for (const auto& [name, ns] : v.ranks[0].breakdown_ns) dataloader += name == "dataloader" ? ns : 0;
  EXPECT_EQ(dataloader, 3 * kMs + 3 * kMs);
  const auto j = nlohmann::json::parse(cluster_view_to_json(v));
  EXPECT_EQ(j["ranks"][0]["host"], b.host);
  EXPECT_EQ(j["cluster"]["world_size"], 2);
  EXPECT_EQ(j["cluster"]["missing_ranks"], nlohmann::json::array({0}));
}

TEST(ClusterJson, CollectiveStartsCrossTheStoreSoConcurrentBucketsStillCountOnce) {
  ClusterOptions o;
  o.world_size = 2;
  ClusterAssembler a(o);
  RankBatch b0, b1;
  b0.rank = 0;
  b1.rank = 1;
  for (int64_t step = 0; step < 5; ++step) {
    auto [fast, slow] = ddp_three_bucket_step(step);
    b0.steps.push_back(fast);
    b1.steps.push_back(slow);
  }
  const std::string text = rank_batch_to_json(b0);
  EXPECT_NE(text.find("[\"gloo:all_reduce\",33500000,5000000]"), std::string::npos) << text;
  ASSERT_EQ(ingest_rank_batch_json(a, text), "");
  ASSERT_EQ(ingest_rank_batch_json(a, rank_batch_to_json(b1)), "");
  a.advance();
  const ClusterView v = a.view();
  EXPECT_EQ(*v.ranks[0].collective_wait_p50_ns, 32 * kMs);
  EXPECT_EQ(*v.ranks[0].own_p50_ns, 10 * kMs);
}

// What rank_batch_to_json wrote when it built an nlohmann::json DOM: the
// reference its streaming writer must still match byte for byte.
std::string rank_batch_reference_json(const RankBatch& b) {
  using nlohmann::json;
  json j;
  j["rank"] = b.rank;
  j["host"] = b.host;
  j["finished"] = b.finished;
  j["clock_offset_ns"] = b.clock_offset_ns ? json(*b.clock_offset_ns) : json(nullptr);
  j["clock_uncertainty_ns"] = b.clock_uncertainty_ns ? json(*b.clock_uncertainty_ns) : json(nullptr);
  json steps = json::array();
  for (const auto& s : b.steps) {
    json cats = json::object();
    for (const auto& [name, ns] : s.categories_ns) cats[name] = ns;
    json coll = json::array();
    for (const auto& c : s.collectives) {
      coll.push_back(c.start_offset_ns ? json::array({c.group, c.dur_ns, *c.start_offset_ns})
                                       : json::array({c.group, c.dur_ns}));
    }
    steps.push_back({{"step", s.step}, {"start_ns", s.start_ns}, {"wall_ns", s.wall_ns}, {"basis", s.basis},
                     {"categories_ns", std::move(cats)}, {"collectives", std::move(coll)},
                     {"collectives_dropped", s.collectives_dropped}, {"throttled", s.throttled}});
  }
  j["steps"] = std::move(steps);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

TEST(ClusterJson, RankBatchBytesAreWhatTheDomWroteAndParseBack) {
  RankBatch b;
  b.rank = 3;
  b.host = "node\x01-\xff\xfe-\"q\"";  // a control byte, invalid UTF-8, quotes
  for (int64_t step = 0; step < 4; ++step) b.steps.push_back(host_step(step, step * kMs, 2 * kMs, -7 + step));
  b.steps[0].categories_ns.emplace_back("dataloader", 5);  // a repeated name: the last one counts
  b.steps[0].categories_ns.emplace_back("aaa_first", 1);
  b.steps[1].collectives.push_back({"gloo:all_reduce \xe2\x82\xac", 42, std::nullopt});
  b.steps[1].collectives.push_back({"gloo:broadcast", 7, 1234});
  b.steps[2].throttled = true;
  b.steps[3].collectives_dropped = 9;
  b.steps[3].basis = "device";
  EXPECT_EQ(rank_batch_to_json(b), rank_batch_reference_json(b));
  b.clock_offset_ns = -5;
  b.clock_uncertainty_ns = 6;
  b.finished = true;
  b.steps.clear();
  EXPECT_EQ(rank_batch_to_json(b), rank_batch_reference_json(b));

  // And the reference's bytes ingest as the batch.
  RankBatch c;
  c.rank = 1;
  c.host = "h";
  c.steps.push_back(host_step(0, 3 * kMs, kMs));
  c.steps[0].categories_ns.emplace_back("dataloader", 2 * kMs);
  ClusterOptions o;
  o.world_size = 2;
  ClusterAssembler a(o);
  int32_t rank = -1;
  bool finished = true;
  ASSERT_EQ(ingest_rank_batch_json(a, rank_batch_reference_json(c), &rank, &finished), "");
  EXPECT_EQ(rank, 1);
  EXPECT_FALSE(finished);
  a.advance(/*final=*/true);
  const ClusterView v = a.view();
  ASSERT_EQ(v.ranks.size(), 1u);
  int64_t dataloader = 0;
  for (const auto& [name, ns] : v.ranks[0].breakdown_ns) dataloader += name == "dataloader" ? ns : 0;
  EXPECT_EQ(dataloader, 2 * kMs);  // the repeated name's last value, as nlohmann's DOM kept it
}

TEST(ClusterJson, MalformedBatchesAreRejectedWholeWithOneLineErrorsAndFuzzingNeverCrashes) {
  RankBatch b;
  b.rank = 0;
  b.host = "h";
  for (int64_t step = 0; step < 4; ++step) b.steps.push_back(host_step(step, 0, kMs));
  const std::string good = rank_batch_to_json(b);
  ClusterOptions o;
  o.world_size = 2;
  ClusterAssembler a(o);
  const std::vector<std::string> bad = {
      "",
      "[]",
      "{\"rank\": \"0\", \"steps\": []}",
      "{\"rank\": 0}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": -5}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": 5, \"collectives\": [[\"g\"]]}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": 5, \"collectives\": [[\"g\", 1, -2]]}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": 5, \"collectives\": [[\"g\", 1, \"2\"]]}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": 5, \"collectives\": [[\"g\", 1, 2, 3]]}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": 5, \"categories_ns\": {\"x\": -1}}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": 5, \"basis\": 7}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": 5, \"throttled\": 1}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1.5, \"start_ns\": 0, \"wall_ns\": 5}]}",
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": 18446744073709551615}]}",
      "{\"rank\": 4294967296, \"steps\": []}",
      "{\"rank\": 0, \"host\": 3, \"steps\": []}",
      "{\"rank\": 0, \"steps\": []} trailing",
      "{\"rank\": 0, \"steps\": [], \"clock_offset_ns\": \"5\"}",
      // A good step, then a bad one: nothing of the batch may be added.
      "{\"rank\": 0, \"steps\": [{\"step\": 1, \"start_ns\": 0, \"wall_ns\": 5}, {\"step\": 2}]}",
  };
  for (const auto& text : bad) {
    const std::string error = ingest_rank_batch_json(a, text);
    EXPECT_FALSE(error.empty()) << text;
    EXPECT_EQ(error.find('\n'), std::string::npos);
    EXPECT_EQ(a.pending_steps(), 0u) << text;
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < 3000; ++i) {
    std::string t = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % t.size();
      switch (rng() % 3) {
        case 0: t[pos] = static_cast<char>(rng() % 256); break;
        case 1: t.erase(pos, 1 + rng() % 8); break;
        default: t.resize(pos); break;
      }
      if (t.empty()) break;
    }
    ClusterAssembler fuzz(o);
    const std::string error = ingest_rank_batch_json(fuzz, t);
    if (!error.empty()) {
      EXPECT_EQ(fuzz.pending_steps(), 0u);
    }
    fuzz.advance(true);
    (void)cluster_view_to_json(fuzz.view());
  }
}

TEST(ClusterReal, HtaSampledRanksAreComparedCollectiveByCollective) {
  GPUUTIL_REQUIRE_TRACES();
  ImportResult r0 = import_kineto_file(test::trace_path("hta_sampled_rank0.json.gz"));
  ImportResult r1 = import_kineto_file(test::trace_path("hta_sampled_rank1.json.gz"));
  ASSERT_TRUE(r0.ok) << r0.error;
  ASSERT_TRUE(r1.ok) << r1.error;
  r0.store.rank = 0;
  r1.store.rank = 1;
  const Report report = analyze({&r0.store, &r1.store}, AnalysisOptions{});
  ASSERT_NE(report.cluster, nullptr);
  const ClusterView& v = *report.cluster;
  EXPECT_EQ(v.world_size, 2);
  EXPECT_TRUE(v.missing_ranks.empty());
  EXPECT_EQ(v.steps_compared, report.steps.size());
  EXPECT_GT(v.collective_instances, 0u);
  EXPECT_EQ(v.collective_mismatches, 0u) << "NCCL kernels run in the same order on every rank";
  ASSERT_EQ(v.ranks.size(), 2u);
  // The minimum of each instance is the transfer: the same on both ranks.
  EXPECT_EQ(v.ranks[0].collective_transfer_ns, v.ranks[1].collective_transfer_ns);
  // Identities, per rank and step: the rank step's categories sum to its
  // wall, and wait + transfer is its time in collective kernels.
  for (const auto& step : report.steps) {
    for (int32_t rank = 0; rank < 2; ++rank) {
      const auto rs = rank_step_of(step, rank);
      ASSERT_TRUE(rs.has_value());
      EXPECT_EQ(rs->basis, "device");
      int64_t sum = 0;
      for (const auto& [name, ns] : rs->categories_ns) sum += ns;
      EXPECT_EQ(sum, rs->wall_ns) << "step " << step.step << " rank " << rank;
    }
  }
  // No two of a rank's collective kernels overlap and none runs past its
  // step's end here, so the union is the sum of their durations.
  int64_t kernel_ns[2] = {0, 0};
  for (const auto& step : report.steps) {
    for (const auto& rc : step.collectives) {
      std::set<std::string> groups;
      for (const auto& c : rc.samples) {
        kernel_ns[rc.rank] += c.dur_ns;
        groups.insert(c.group);
        ASSERT_TRUE(c.start_offset_ns.has_value());
        EXPECT_LE(*c.start_offset_ns + c.dur_ns, step.wall_ns);
      }
      // Two NCCL streams (two communicators): stream ids 84 and 203 on both ranks.
      EXPECT_EQ(groups, (std::set<std::string>{"gpu stream #0", "gpu stream #1"}));
    }
  }
  for (int32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(v.ranks[rank].collective_wait_ns + v.ranks[rank].collective_transfer_ns, kernel_ns[rank]);
    EXPECT_GT(v.ranks[rank].collective_wait_ns, 0);
    EXPECT_LE(*v.ranks[rank].collective_wait_p50_ns, *v.ranks[rank].step_wall_p50_ns);
    EXPECT_GE(*v.ranks[rank].own_p50_ns, 0);
  }
  for (const auto& step : v.recent) {
    for (const auto& sr : step.ranks) {
      EXPECT_LE(sr.collective_wait_ns, sr.wall_ns);
      EXPECT_EQ(sr.own_ns, sr.wall_ns - sr.collective_wait_ns);
    }
  }
  ASSERT_TRUE(v.ranks[0].relative_perf.has_value() && v.ranks[1].relative_perf.has_value());
  const double best = std::max(*v.ranks[0].relative_perf, *v.ranks[1].relative_perf);
  EXPECT_DOUBLE_EQ(best, 1.0) << "the fastest rank scores 1.0";
  // In the report: summary.ranks and summary.cluster.
  const auto j = nlohmann::json::parse(report_to_json(report));
  ASSERT_TRUE(j["summary"].contains("ranks"));
  EXPECT_EQ(j["summary"]["ranks"].size(), 2u);
  EXPECT_EQ(j["summary"]["ranks"][1]["host"], "hta_sampled_rank1.json.gz");
  EXPECT_EQ(j["summary"]["cluster"]["world_size"], 2);
}

// A real rank trace as two ranks: rank 0 as recorded, rank 1 a peer that
// reached every collective late, halfway through rank 0's kernel (its kernel
// starts there and ends with rank 0's, so it waited for nobody). Rank 0's
// wait in each instance is then the first half of its kernel, exactly.
ImportResult late_peer_of(const std::string& trace) {
  ImportResult peer = import_kineto_file(test::trace_path(trace));
  peer.store.rank = 1;
  for (auto& a : peer.store.activities) {
    if (a.kind == ActivityKind::kKernel && a.is_communication) a.start_ns += (a.end_ns - a.start_ns) / 2;
  }
  return peer;
}

// Each collective kernel again on another stream at the same time: a second
// communicator (process group) whose collectives run beside the first's.
void add_concurrent_communicator(EventStore& s) {
  const size_t n = s.activities.size();
  for (size_t i = 0; i < n; ++i) {
    if (s.activities[i].kind != ActivityKind::kKernel || !s.activities[i].is_communication) continue;
    DeviceActivity copy = s.activities[i];
    copy.stream += 100'000;
    copy.correlation_id = 0;
    s.activities.push_back(copy);
  }
}

// Rank 0's expected wait: the first half of each of its collective kernels
// on one stream (none overlaps another or crosses a step end: checked).
int64_t half_of_collective_kernels(const EventStore& s, int64_t* instances) {
  int64_t wait = 0;
  *instances = 0;
  for (const auto& a : s.activities) {
    if (a.kind != ActivityKind::kKernel || !a.is_communication) continue;
    for (const auto& w : s.steps) {
      if (a.start_ns < w.start_ns || a.start_ns >= w.end_ns) continue;
      EXPECT_LE(a.end_ns, w.end_ns);
      wait += (a.end_ns - a.start_ns) / 2;
      ++*instances;
    }
  }
  return wait;
}

void expect_coherent(const ClusterView& v) {
  ASSERT_EQ(v.ranks.size(), 2u);
  for (const auto& r : v.ranks) {
    EXPECT_LE(*r.collective_wait_p50_ns, *r.step_wall_p50_ns) << r.rank;
    EXPECT_GE(*r.own_p50_ns, 0) << r.rank;
  }
  for (const auto& step : v.recent) {
    for (const auto& sr : step.ranks) {
      EXPECT_LE(sr.collective_wait_ns, sr.wall_ns);
      EXPECT_EQ(sr.own_ns, sr.wall_ns - sr.collective_wait_ns);
    }
  }
  ASSERT_TRUE(v.ranks[0].relative_perf.has_value());
  EXPECT_DOUBLE_EQ(*v.ranks[0].relative_perf, 1.0) << "rank 0 waited for its late peer: its own time is the smaller";
  EXPECT_EQ(*v.ranks[1].collective_wait_p50_ns, 0);
}

TEST(ClusterReal, NcclA100FiveBucketAllReducesAreMatchedBucketByBucket) {
  GPUUTIL_REQUIRE_TRACES();
  // A 2-rank DDP job's rank 0: per step 2 broadcasts and 5 bucket all-reduces
  // (2.0M to 7.9M floats) on one NCCL stream.
  ImportResult r0 = import_kineto_file(test::trace_path("hta_nccl_a100_rank0.json.gz"));
  ASSERT_TRUE(r0.ok) << r0.error;
  ImportResult r1 = late_peer_of("hta_nccl_a100_rank0.json.gz");
  const Report report = analyze({&r0.store, &r1.store}, AnalysisOptions{});
  ASSERT_NE(report.cluster, nullptr);
  const ClusterView& v = *report.cluster;
  int64_t instances = 0;
  const int64_t wait = half_of_collective_kernels(r0.store, &instances);
  EXPECT_EQ(instances, 7 * 3);
  EXPECT_EQ(v.collective_instances, static_cast<uint64_t>(instances));
  EXPECT_EQ(v.collective_mismatches, 0u);
  EXPECT_EQ(v.ranks[0].collective_wait_ns, wait);
  expect_coherent(v);
}

TEST(ClusterReal, CollectivesOnTwoNcclStreamsAtOnceWaitForTheLatePeerOnce) {
  GPUUTIL_REQUIRE_TRACES();
  // A real DDP rank (V100, NCCL all-reduces and send/recv, 6 steps), with
  // every collective doubled onto a second communicator's stream on both
  // ranks: rank 0's wait is the same as with one stream, not twice it.
  const std::string trace = "hta_train_v100_dataloader_nccl_rank1.json.gz";
  ImportResult r0 = import_kineto_file(test::trace_path(trace));
  ASSERT_TRUE(r0.ok) << r0.error;
  r0.store.rank = 0;
  int64_t instances = 0;
  const int64_t wait = half_of_collective_kernels(r0.store, &instances);
  ImportResult r1 = late_peer_of(trace);
  add_concurrent_communicator(r0.store);
  add_concurrent_communicator(r1.store);
  const Report report = analyze({&r0.store, &r1.store}, AnalysisOptions{});
  ASSERT_NE(report.cluster, nullptr);
  const ClusterView& v = *report.cluster;
  EXPECT_EQ(v.collective_instances, 2u * static_cast<uint64_t>(instances));
  EXPECT_EQ(v.collective_mismatches, 0u);
  EXPECT_EQ(v.ranks[0].collective_wait_ns, wait);
  expect_coherent(v);
}

TEST(ClusterReal, OneRankReportsHaveNoClusterSection) {
  GPUUTIL_REQUIRE_TRACES();
  ImportResult r0 = import_kineto_file(test::trace_path("hta_sampled_rank0.json.gz"));
  ASSERT_TRUE(r0.ok);
  const Report report = analyze({&r0.store}, AnalysisOptions{});
  EXPECT_EQ(report.cluster, nullptr);
  const auto j = nlohmann::json::parse(report_to_json(report));
  EXPECT_FALSE(j["summary"].contains("ranks"));
  EXPECT_FALSE(j["summary"].contains("cluster"));
}

}  // namespace
}  // namespace gpuutil
