// The C++ session API (gpuutil/profiler.h) as a LibTorch training loop uses
// it: RAII steps, JSON Lines output, host-only mode that says why in every
// report, and safe use from several threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "fake_cupti_client.h"
#include "gpuutil/profiler.h"

namespace gpuutil {
namespace {

TEST(ProfilerApi, HostOnlyModeReportsEveryStepWithTheReason) {
  setenv("GPUUTIL_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13", 1);
  ProfilerOptions o;
  o.live.nvtx = false;
  Profiler p(o);
  const std::string why = p.start();
  testing::FakeCupti::get();  // restores GPUUTIL_CUPTI_LIBRARY for later tests
  ASSERT_FALSE(why.empty());
  for (int i = 0; i < 3; ++i) StepScope s(p, i);
  p.stop();
  const auto out = p.take_reports();
  ASSERT_EQ(out.size(), 3u);
  for (const auto& r : out) {
    EXPECT_EQ(r.report.diagnostics.count(Diag::gpu_collection_off), 1u);
    EXPECT_EQ(r.report.diagnostics.example(Diag::gpu_collection_off), why);
  }
}

TEST(ProfilerApi, JsonLinesSinkGetsOneLinePerStepWithKernelsFromTheFake) {
  testing::FakeCupti& fake = testing::FakeCupti::get();
  fake.reset(nullptr);
  const std::string path = ::testing::TempDir() + "/gpuutil_profiler_api.jsonl";
  {
    ProfilerOptions o;
    o.session.jsonl_path = path;
    o.live.nvtx = false;
    o.live.cupti_buffer_count = 4;
    o.live.cupti_buffer_bytes = 64 << 10;
    Profiler p(o);
    ASSERT_EQ(p.start(), "");
    for (int i = 0; i < 5; ++i) {
      StepScope s(p, 100 + i);
      fake.launch("gemm", 7, 1000, 100);
      fake.launch("gemm", 7, 1000, 100);
      fake.synchronize();  // the step waits for its kernels (.item(), a loss print)
    }
  }  // destructor stops and reports the rest
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["steps"][0]["step"], 100 + n);
    EXPECT_EQ(j["steps"][0]["devices"][0]["kernels"], 2);
    ++n;
  }
  EXPECT_EQ(n, 5);
  std::remove(path.c_str());
}

TEST(ProfilerApi, StepsTakeReportsAndLaunchesFromManyThreadsAreSafe) {
  testing::FakeCupti& fake = testing::FakeCupti::get();
  fake.reset(nullptr);
  ProfilerOptions o;
  o.live.nvtx = false;
  o.live.cupti_buffer_count = 8;
  o.live.cupti_buffer_bytes = 64 << 10;
  Profiler p(o);
  ASSERT_EQ(p.start(), "");
  std::atomic<bool> go{true};
  std::atomic<int64_t> next_step{0};
  std::atomic<size_t> taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {  // two launcher threads that also mark steps
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        StepScope s(p, next_step.fetch_add(1));
        fake.launch("k", 7, 100, 50);
      }
    });
  }
  threads.emplace_back([&] {  // a reporter thread
    while (go.load()) taken += p.take_reports().size();
  });
  threads[0].join();
  threads[1].join();
  go = false;
  threads[2].join();
  p.stop();
  taken += p.take_reports().size();
  // Steps from two threads interleave: every begin closes the open step, so
  // at least one report per begin_step pair and never more than 400.
  EXPECT_GE(taken.load(), 200u);
  EXPECT_LE(taken.load(), 400u);
  EXPECT_EQ(fake.stats().enabled_kinds_mask, 0u);
}

}  // namespace
}  // namespace gpuutil
