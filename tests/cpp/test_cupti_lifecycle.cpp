// The collector's lifecycle against the fake CUPTI: degrade with a named
// reason, release CUPTI on stop and report each step within one step (under
// every cell of the fake's matrix CI runs, see tests/cpp/matrix_cell.h),
// survive 1000 start/stop cycles without growth, stop while threads
// launch, exit without stop, and fork.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "collectors/cupti/cupti_api.h"
#include "fake_cupti_client.h"
#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"
#include "matrix_cell.h"

namespace gpuutil {
namespace {

using testing::cell_name;
using testing::FakeCupti;

class LifecycleCell : public testing::MatrixTest {};
INSTANTIATE_TEST_SUITE_P(Matrix, LifecycleCell, ::testing::ValuesIn(fake_matrix::cells_for_run()), cell_name);

LiveOptions small_pool() {
  LiveOptions o;
  o.cupti_buffer_count = 4;
  o.cupti_buffer_bytes = 64 << 10;
  return o;
}

std::string start_with(const fake_cupti_config& cfg) {
  FakeCupti::get().reset(&cfg);
  Session s(SessionOptions{});
  LiveCollector live(s, small_pool());
  return live.start();
}

TEST(CuptiLifecycle, NoDriverDegradesWithTheCuptiErrorAndTheCause) {
  fake_cupti_config cfg{};
  cfg.enable_error = 999;
  const std::string why = start_with(cfg);
  EXPECT_NE(why.find("cuptiActivityEnable"), std::string::npos) << why;
  EXPECT_NE(why.find("CUPTI_ERROR_UNKNOWN (999)"), std::string::npos) << why;
  EXPECT_NE(why.find("no NVIDIA driver/GPU visible"), std::string::npos) << why;
  EXPECT_EQ(FakeCupti::get().stats().enabled_kinds_mask, 0u);
}

TEST(CuptiLifecycle, AnNvidiaToolHoldingTheSubscriptionTurnsGpuCollectionOffAndIsNamed) {
  fake_cupti_config cfg{};
  FakeCupti::get().reset(&cfg);
  FakeCupti::get().other_subscriber("Nsight Systems");
  Session s(SessionOptions{});
  LiveCollector live(s, small_pool());
  const std::string why = live.start();
  EXPECT_NE(why.find("cuptiSubscribe_v2 returned CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), std::string::npos)
      << why;
  EXPECT_NE(why.find("Nsight Systems"), std::string::npos) << why;
  EXPECT_EQ(FakeCupti::get().stats().enabled_kinds_mask, 0u);
  FakeCupti::get().other_subscriber(nullptr);
}

TEST(CuptiLifecycle, ASubscriberThatIsNoProfilerIsNotedAndCollectionGoesOn) {
  // Kineto keeps the subscription it took when torch.profiler first ran; the
  // activity API works without it.
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  fake.other_subscriber("kineto");
  Session s(SessionOptions{});
  LiveCollector live(s, small_pool());
  ASSERT_EQ(live.start(), "");
  s.begin_step(0, session_now_ns());
  fake.launch("k", 7, 1000, 100);
  fake.synchronize();
  s.end_step(session_now_ns());
  live.stop();
  fake.other_subscriber(nullptr);
  const auto out = s.finish(session_now_ns());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::cupti_subscriber_other), 1u);
  EXPECT_NE(out[0].report.diagnostics.example(Diag::cupti_subscriber_other).find("kineto"), std::string::npos);
  EXPECT_EQ(out[0].report.steps[0].devices.at(0).kernels, 1u);
}

TEST(CuptiLifecycle, SubscribesAsGpuutilAndUnsubscribesAtStop) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session s(SessionOptions{});
  LiveCollector live(s, small_pool());
  ASSERT_EQ(live.start(), "");
  EXPECT_EQ(fake.stats().subscribed, 1);
  live.stop();
  EXPECT_EQ(fake.stats().subscribed, 0);
}

TEST(CuptiLifecycle, AKindRefusedHalfwayUndoesEveryKindAlreadyEnabled) {
  fake_cupti_config cfg{};
  cfg.enable_error = 35;
  cfg.enable_error_kind = CUPTI_ACTIVITY_KIND_MEMSET;  // kernels and copies were already enabled: undone
  const std::string why = start_with(cfg);
  EXPECT_NE(why.find("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), std::string::npos) << why;
  EXPECT_EQ(FakeCupti::get().stats().enabled_kinds_mask, 0u);
  EXPECT_EQ(FakeCupti::get().stats().subscribed, 0);
}

TEST(CuptiLifecycle, InsufficientPrivilegesDegradesWithTheFix) {
  fake_cupti_config cfg{};
  cfg.enable_error = 35;
  const std::string why = start_with(cfg);
  EXPECT_NE(why.find("insufficient privileges"), std::string::npos) << why;
  EXPECT_NE(why.find("NVreg_RestrictProfilingToAdminUsers"), std::string::npos) << why;
}

TEST(CuptiLifecycle, VersionMismatchRefusesToDecode) {
  fake_cupti_config cfg{};
  cfg.version = 120008;
  const std::string why = start_with(cfg);
  EXPECT_NE(why.find("API version 120008"), std::string::npos) << why;
  EXPECT_NE(why.find("built against CUPTI 13"), std::string::npos) << why;
  EXPECT_EQ(FakeCupti::get().stats().enabled_kinds_mask, 0u);
}

TEST(CuptiLifecycle, MissingLibraryDegradesWithTheOverride) {
  setenv("GPUUTIL_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13", 1);
  Session s(SessionOptions{});
  LiveCollector live(s, small_pool());
  const std::string why = live.start();
  FakeCupti::get();  // restores the variable
  EXPECT_NE(why.find("GPUUTIL_CUPTI_LIBRARY=/nonexistent/libcupti.so.13"), std::string::npos) << why;
}

TEST(CuptiLifecycle, RealLibcuptiWithoutADriverDegradesWithUnknownError) {
  const char* real = "/usr/local/cuda/lib64/libcupti.so.13";
  if (access(real, R_OK) != 0) GTEST_SKIP() << real << " not installed";
  if (access("/dev/nvidia0", F_OK) == 0) GTEST_SKIP() << "a GPU is present";
  setenv("GPUUTIL_CUPTI_LIBRARY", real, 1);
  Session s(SessionOptions{});
  LiveCollector live(s, small_pool());
  const std::string why = live.start();
  FakeCupti::get();
  EXPECT_NE(why.find("returned CUPTI_ERROR_UNKNOWN (999): no NVIDIA driver/GPU visible"), std::string::npos) << why;
}

TEST_P(LifecycleCell, StopReleasesCuptiForALaterClient) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  Session s(SessionOptions{});
  LiveCollector live(s, small_pool());
  ASSERT_EQ(live.start(), "");
  EXPECT_NE(fake.stats().enabled_kinds_mask, 0u);
  fake.launch("k", 7, 100, 100);
  live.stop();
  const fake_cupti_stats st = fake.stats();
  EXPECT_EQ(st.enabled_kinds_mask, 0u);  // every kind disabled
  EXPECT_EQ(st.buffers_held, 0);         // every buffer flushed back
  EXPECT_GE(st.flushes, 1u);
  // A second collector (standing in for torch.profiler) can take over.
  Session s2(SessionOptions{});
  LiveCollector again(s2, small_pool());
  EXPECT_EQ(again.start(), "");
}

size_t count_dir(const char* path) {
  size_t n = 0;
  if (DIR* d = opendir(path)) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

long rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

TEST(CuptiLifecycle, ThousandStartStopCyclesKeepRssThreadsAndFdsFlat) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  auto cycle = [&](int i) {
    ProfilerOptions o;
    o.live = small_pool();
    Profiler p(o);
    ASSERT_EQ(p.start(), "");
    {
      StepScope step(p, i);
      fake.launch("k", 7, 100, 100);
    }
    p.stop();
    ASSERT_EQ(p.take_reports().size(), 1u);
  };
  for (int i = 0; i < 50; ++i) cycle(i);  // warm-up: allocator, dl caches
  const long rss0 = rss_kb();
  const size_t threads0 = count_dir("/proc/self/task"), fds0 = count_dir("/proc/self/fd");
  for (int i = 0; i < 1000; ++i) cycle(i);
  const long rss1 = rss_kb();
  EXPECT_EQ(count_dir("/proc/self/task"), threads0);
  EXPECT_EQ(count_dir("/proc/self/fd"), fds0);
  EXPECT_LE(std::abs(rss1 - rss0), rss0 / 20) << "RSS " << rss0 << " kB -> " << rss1 << " kB";
}

TEST(CuptiLifecycle, StopWhileThreadsLaunchIsSafe) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  for (int round = 0; round < 20; ++round) {
    ProfilerOptions o;
    o.live = small_pool();
    Profiler p(o);
    ASSERT_EQ(p.start(), "");
    std::atomic<bool> go{true};
    std::atomic<uint64_t> launches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        while (go.load()) {
          fake.launch("k", 7, 100, 100);
          launches.fetch_add(1);
        }
      });
    }
    p.begin_step(0);
    while (launches.load() < 2000) std::this_thread::yield();
    p.end_step();
    p.stop();  // launches continue during and after stop
    while (launches.load() < 4000) std::this_thread::yield();
    go = false;
    for (auto& t : threads) t.join();
    EXPECT_FALSE(p.running());
    EXPECT_EQ(fake.stats().enabled_kinds_mask, 0u);
    EXPECT_EQ(p.take_reports().size(), 1u);
  }
}

TEST(CuptiLifecycle, ExitWithoutStopStillFlushesTheLastStep) {
  const std::string path = ::testing::TempDir() + "/gpuutil_exit_without_stop.jsonl";
  std::remove(path.c_str());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FakeCupti& fake = FakeCupti::get();
    fake.reset(nullptr);
    ProfilerOptions o;
    o.session.jsonl_path = path;
    o.live = small_pool();
    auto* p = new Profiler(o);  // never deleted, never stopped
    if (!p->start().empty()) _exit(3);
    p->begin_step(41);
    p->end_step();
    p->begin_step(42);
    fake.launch("last_kernel", 7, 1000, 100);
    std::exit(0);  // atexit must stop the profiler and report steps 41 and 42
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(path);
  std::vector<int64_t> steps;
  std::string line;
  uint64_t kernels = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    steps.push_back(j["steps"][0]["step"]);
    for (const auto& d : j["steps"][0]["devices"]) kernels += d["kernels"].get<uint64_t>();
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{41, 42}));
  EXPECT_EQ(kernels, 1u);
  std::remove(path.c_str());
}

TEST(CuptiLifecycle, ForkAfterStartChildNeitherInheritsTheSessionNorDeadlocks) {
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  const std::string path = ::testing::TempDir() + "/gpuutil_fork.jsonl";
  std::remove(path.c_str());
  ProfilerOptions o;
  o.session.jsonl_path = path;
  o.live = small_pool();
  Profiler p(o);
  ASSERT_EQ(p.start(), "");
  std::atomic<bool> go{true};
  std::thread launcher([&] {
    while (go.load()) fake.launch("k", 7, 100, 100);
  });
  p.begin_step(1);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Everything here must be a no-op and must not block.
    const bool running = p.running();
    p.begin_step(99);
    p.end_step();
    p.stop();
    _exit(running ? 4 : 0);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 500 && done == 0; ++i) {
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) usleep(10'000);
  }
  if (done == 0) kill(child, SIGKILL);
  go = false;
  launcher.join();
  ASSERT_EQ(done, child) << "the child deadlocked";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  p.end_step();
  p.stop();
  std::ifstream in(path);
  std::string line;
  std::vector<int64_t> steps;
  while (std::getline(in, line)) steps.push_back(nlohmann::json::parse(line)["steps"][0]["step"]);
  EXPECT_EQ(steps, (std::vector<int64_t>{1}));  // nothing from the child
  std::remove(path.c_str());
}

TEST_P(LifecycleCell, EachStepIsReportedWithinOneStepOnceItsKernelsFinished) {
  // Steps of 15 ms whose kernel finishes within the step: the drain thread
  // has the records before the next step ends, so by the end of step N
  // every step up to N - 1 was reported (step N itself may be too), once.
  FakeCupti& fake = FakeCupti::get();
  fake.reset(nullptr);
  ProfilerOptions o;
  o.live = small_pool();
  Profiler p(o);
  ASSERT_EQ(p.start(), "");
  std::vector<int64_t> reported;
  for (int64_t step = 0; step < 8; ++step) {
    {
      StepScope s(p, step);
      fake.launch("k", 7, 1000, 100 + cell().skew_ns);  // never before the step began, whatever the skew
      usleep(15'000);
    }
    for (const auto& r : p.take_reports()) {
      reported.push_back(r.report.steps[0].step);
      EXPECT_EQ(r.report.steps[0].devices.at(0).kernels, 1u);
    }
    if (step == 0) continue;
    ASSERT_FALSE(reported.empty()) << "after step " << step;
    EXPECT_GE(reported.back(), step - 1) << "after step " << step;
  }
  p.stop();
  for (const auto& r : p.take_reports()) reported.push_back(r.report.steps[0].step);
  EXPECT_EQ(reported, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

}  // namespace
}  // namespace gpuutil

// Issue 14: the library search never resolves a relative directory (it
// would be the working directory: `python -c` puts "" on sys.path).
TEST(CuptiSearch, RelativeAndEmptyDirectoriesAreNeverSearched) {
  const auto paths = gpuutil::cupti::cupti_search_paths({"", ".", "nvidia/cu13/lib", "/opt/wheels/nvidia/cu13/lib"});
  ASSERT_FALSE(paths.empty());
  for (const auto& p : paths) EXPECT_EQ(p[0], '/') << p;
  EXPECT_EQ(paths.front().rfind("/opt/wheels/nvidia/cu13/lib/", 0), 0u) << paths.front();
}
