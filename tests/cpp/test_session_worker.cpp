// The session's background reporter (Session::start_worker): the same
// reports, byte for byte and in step order, as the synchronous collect();
// analysis on the worker thread, not the caller's; a busy worker never
// blocks the application's threads; finish() loses no step.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "gpuutil/analysis.h"
#include "gpuutil/range_classify.h"
#include "gpuutil/report_json.h"
#include "gpuutil/session.h"
#include "session_events.h"

namespace gpuutil {
namespace {

using testing::kernel;
using testing::range;

// Steps [k*1000, k*1000+1000) with a DataLoader range and a kernel each.
void add_steps(Session& s, uint32_t thread, int from, int to) {
  for (int step = from; step < to; ++step) {
    const int64_t t0 = step * 1000;
    s.begin_step(step, t0);
    s.add_range(range(s, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0, t0 + 300, thread, false));
    s.add_activity(kernel(s, t0 + 400, t0 + 900));
    s.end_step(t0 + 1000);
  }
}

std::vector<std::string> jsons(const std::vector<StepOutput>& outs) {
  std::vector<std::string> v;
  for (const auto& o : outs) v.push_back(o.json);
  return v;
}

// Takes the worker's outputs until `n` arrived (bounded wait).
std::vector<StepOutput> take_until(Session& s, size_t n) {
  std::vector<StepOutput> all;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
    for (auto& o : s.take_outputs()) all.push_back(std::move(o));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return all;
}

TEST(SessionWorker, ReportsAreTheSynchronousOnesByteForByteInStepOrder) {
  Session sync(SessionOptions{});
  Session bg(SessionOptions{});
  bg.start_worker();
  const uint32_t ts = sync.thread_index(1, 1, "main");
  const uint32_t tb = bg.thread_index(1, 1, "main");
  std::vector<StepOutput> a, b;
  for (int batch = 0; batch < 5; ++batch) {  // batches of 1..5 steps, each requested at its end
    const int from = batch * (batch + 1) / 2, to = from + batch + 1;
    add_steps(sync, ts, from, to);
    add_steps(bg, tb, from, to);
    sync.mark_complete_until(to * 1000);
    for (auto& o : sync.collect()) a.push_back(std::move(o));
    bg.mark_complete_until(to * 1000);
    bg.request_report();
    for (auto& o : take_until(bg, static_cast<size_t>(to) - b.size())) b.push_back(std::move(o));
  }
  ASSERT_EQ(a.size(), 15u);
  EXPECT_EQ(jsons(a), jsons(b));
  EXPECT_EQ(bg.steps_reported(), 15u);
}

TEST(SessionWorker, AnalysesOnItsOwnThreadAndCollectGetsWhatItMadeFirst) {
  Session s(SessionOptions{});
  std::atomic<int> off_thread{0}, on_thread{0};
  const auto caller = std::this_thread::get_id();
  s.set_step_callback([&](const StepOutput&) { (std::this_thread::get_id() == caller ? on_thread : off_thread)++; });
  s.start_worker();
  const uint32_t t = s.thread_index(1, 1, "main");
  add_steps(s, t, 0, 3);
  s.mark_complete_until(3000);
  s.request_report();
  while (s.steps_reported() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(off_thread.load(), 3);
  add_steps(s, t, 3, 5);
  s.mark_complete_until(5000);
  const auto out = s.collect();  // the worker's 3 (not taken yet, JSON only), then 2 analysed here
  ASSERT_EQ(out.size(), 5u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(nlohmann::json::parse(out[i].json)["steps"][0]["step"], static_cast<int64_t>(i));
    EXPECT_EQ(out[i].report.steps.empty(), i < 3);
  }
  EXPECT_EQ(on_thread.load(), 2);
}

TEST(SessionWorker, TheApplicationNeverWaitsForABusyWorker) {
  // The worker held up inside a batch (its step callback blocks, after the
  // results were recorded): steps and ranges are still accepted meanwhile.
  Session s(SessionOptions{});
  std::atomic<bool> release{false}, in_batch{false};
  s.set_step_callback([&](const StepOutput&) {
    in_batch = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  s.start_worker();
  const uint32_t t = s.thread_index(1, 1, "main");
  add_steps(s, t, 0, 2);
  s.mark_complete_until(2000);
  s.request_report();
  while (!in_batch) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  add_steps(s, t, 2, 200);  // would block on the lock if the worker held it
  const auto spent = std::chrono::steady_clock::now() - t0;
  release = true;
  EXPECT_LT(spent, std::chrono::seconds(2));
  s.mark_complete_until(200'000);
  EXPECT_EQ(s.finish(200'000).size(), 200u);
}

// The events of step k of a pipelined GPU, in [k*1000, k*1000+1000): an op
// that launches a kernel, and the kernel launched in the step before,
// running now. `Sink` is a Session or StoreSink (the same events straight
// into an EventStore, the reference).
template <typename Sink>
void add_pipelined_step(Sink& s, uint32_t thread, int step) {
  const int64_t t0 = step * 1000;
  HostRange r;
  r.name = s.intern("aten::mm");
  r.start_ns = t0 + 10;
  r.end_ns = t0 + 200;
  r.thread = thread;
  r.category = classify_range("aten::mm", true);
  s.add_range(r);
  HostApiCall c;
  c.start_ns = t0 + 100;
  c.end_ns = t0 + 150;
  c.correlation_id = uint64_t(step) + 1;
  c.name = s.intern("cudaLaunchKernel");
  c.thread = thread;
  c.kind = HostApiKind::kLaunch;
  s.add_api_call(c);
  if (step > 0) {
    DeviceActivity k;
    k.name = s.intern("gemm");
    k.start_ns = t0 + 50;
    k.end_ns = t0 + 700;
    k.correlation_id = uint64_t(step);
    s.add_activity(k);
  }
}

struct StoreSink {
  EventStore& store;
  NameId intern(std::string_view name) { return store.names.intern(name); }
  void add_range(const HostRange& r) { store.ranges.push_back(r); }
  void add_api_call(const HostApiCall& c) { store.api_calls.push_back(c); }
  void add_activity(const DeviceActivity& a) { store.activities.push_back(a); }
};

TEST(SessionWorker, EventsAddedWhileABatchIsAnalysedAreNeitherLostNorPrunedEarly) {
  // The worker takes the added events out of the session at each batch and
  // prunes them without the lock while the application keeps adding: a
  // producer thread asks for a report every step, so batches overlap its
  // adds. Each step is declared complete once the kernel launched in it
  // arrived (as CUPTI's flush would). Every step's accounting must be what
  // the engine gives for that step over all the events, analysed offline
  // (a lost event, a repeated one, or a launch pruned before its kernel
  // came would change it), and nothing may stay pending at the end. (The
  // report's "sources" and "workload" describe the batch the step was
  // analysed in, so they differ with batch sizes.)
  constexpr int kSteps = 300;
  EventStore all;
  all.threads.push_back({1, 1, "main", 0});
  all.source = "live";
  StoreSink sink{all};
  for (int step = 0; step < kSteps; ++step) add_pipelined_step(sink, 0, step);

  Session bg(SessionOptions{});
  bg.start_worker();
  const uint32_t tb = bg.thread_index(1, 1, "main");
  ASSERT_EQ(tb, 0u);
  std::thread producer([&] {
    for (int step = 0; step < kSteps; ++step) {
      bg.begin_step(step, step * 1000);
      add_pipelined_step(bg, tb, step);
      bg.end_step(step * 1000 + 1000);
      if (step > 0) bg.mark_complete_until(step * 1000);  // the previous step: its kernel is in
      bg.request_report();
    }
  });
  std::vector<StepOutput> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (bg.steps_reported() < 250 && std::chrono::steady_clock::now() < deadline) {  // take while the producer runs
    for (auto& o : bg.take_outputs()) got.push_back(std::move(o));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  producer.join();
  for (auto& o : bg.finish(kSteps * 1000)) got.push_back(std::move(o));
  ASSERT_EQ(got.size(), size_t(kSteps));
  for (size_t i = 0; i < got.size(); ++i) {
    all.steps = {{int64_t(i), int64_t(i) * 1000, int64_t(i) * 1000 + 1000}};
    const auto want = nlohmann::json::parse(report_to_json(analyze(all, AnalysisOptions{})));
    const auto have = nlohmann::json::parse(got[i].json);
    ASSERT_EQ(have["steps"], want["steps"]) << "step " << i;
  }
  EXPECT_EQ(bg.pending_events(), 0u);
}

TEST(SessionWorker, FinishStopsTheWorkerAndLosesNoStep) {
  Session s(SessionOptions{});
  s.start_worker();
  const uint32_t t = s.thread_index(1, 1, "main");
  add_steps(s, t, 0, 50);
  s.mark_complete_until(20'000);
  s.request_report();  // a batch may be in flight while finish() runs
  const auto out = s.finish(50'000);
  ASSERT_EQ(out.size(), 50u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(nlohmann::json::parse(out[i].json)["steps"][0]["step"], static_cast<int64_t>(i));
  }
}

}  // namespace
}  // namespace gpuutil
