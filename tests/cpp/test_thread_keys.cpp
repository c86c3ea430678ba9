// Thread keys carry a generation (gpuutil/event_sink.h, thread_index): glibc
// gives the pthread_t of a thread that exited to the next one it makes, so
// the key (uint32_t)pthread_self() alone would merge a short-lived thread
// into the first one that had its key, under the first one's name. The OS
// tid is the key's generation: the session, the LibTorch hook's drain and
// the CUPTI decoder's thread cache all tell the two threads apart.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectors/cupti/record_decoder.h"
#include "collectors/torch/hook_drain.h"
#include "gpuutil/session.h"
#include "gpuutil/thread_key.h"
#include "session_events.h"

namespace gpuutil {
namespace {

using testing::range;

struct Met {
  int64_t key = 0;
  int64_t os_tid = 0;
  uint32_t index = 0;
};

// Runs on a thread of its own, to its end: registers it by name the way the
// live sources do (its key and its OS tid) and records one range on it.
Met meet_on_a_new_thread(Session& s, const char* name, int64_t start_ns) {
  Met m;
  std::thread t([&] {
    m.key = this_thread_key();
    m.os_tid = this_os_tid();
    m.index = s.thread_index(getpid(), m.key, name, m.os_tid);
    s.add_range(range(s, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", start_ns, start_ns + 100,
                      m.index, false));
  });
  t.join();
  return m;
}

// (tid, name) of every host thread in the one step of `out`, sorted.
std::vector<std::pair<int64_t, std::string>> host_threads(const std::vector<StepOutput>& out) {
  std::vector<std::pair<int64_t, std::string>> threads;
  for (const auto& h : out.at(0).report.steps.at(0).host) threads.emplace_back(h.tid, h.name);
  std::sort(threads.begin(), threads.end());
  return threads;
}

TEST(ThreadKeys, AThreadThatReusesAnExitedThreadsPthreadIsANewThreadWithItsOwnName) {
  Session s(SessionOptions{});
  s.begin_step(0, 0);
  const Met first = meet_on_a_new_thread(s, "first", 100);
  const Met second = meet_on_a_new_thread(s, "second", 300);
  // glibc caches the stack (and the thread descriptor in it) of a joined
  // thread and hands it to the next thread: the same pthread_t.
  ASSERT_EQ(first.key, second.key) << "glibc did not reuse the pthread_t; the test cannot show the merge";
  ASSERT_NE(first.os_tid, second.os_tid);
  EXPECT_NE(first.index, second.index);
  EXPECT_EQ(s.thread_generation(), 1u);
  s.end_step(1000);
  const auto out = s.finish(1000);
  std::vector<std::pair<int64_t, std::string>> expected{{first.os_tid, "first"}, {second.os_tid, "second"}};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(host_threads(out), expected) << out.at(0).json;
}

TEST(ThreadKeys, AKeyWithoutAnOsTidNamesItsNewestThreadAndAdoptionStartsNoGeneration) {
  Session s(SessionOptions{});
  const uint32_t old_thread = s.thread_index(1, 7, "old", 1001);
  EXPECT_EQ(s.thread_index(1, 7), old_thread);
  EXPECT_EQ(s.thread_index(1, 7, "renamed?", 1001), old_thread);  // the same generation: same thread, first name
  const uint32_t new_thread = s.thread_index(1, 7, "new", 1002);
  EXPECT_NE(new_thread, old_thread);
  EXPECT_EQ(s.thread_generation(), 1u);
  EXPECT_EQ(s.thread_index(1, 7), new_thread);  // CUPTI's API records: the newest
  EXPECT_EQ(s.thread_index(1, 7, {}, 1002), new_thread);
  // A key first met without an OS tid (CUPTI) is that thread's once it comes.
  const uint32_t cupti_first = s.thread_index(1, 8);
  EXPECT_EQ(s.thread_index(1, 8, "named later", 2001), cupti_first);
  // A thread first met by OS tid (CUPTI in OS-tid mode) is adopted by its key.
  const uint32_t by_os_tid = s.thread_index_for_os_tid(1, 3001);
  EXPECT_EQ(s.thread_index(1, 9, "adopted", 3001), by_os_tid);
  EXPECT_EQ(s.thread_generation(), 1u);
}

TEST(ThreadKeys, AThreadShownWithAnotherTidIsOneThreadForTheSourcesThatGiveItsOwnTid) {
  // The trace replay names its threads as the traced ones (another
  // process's tid) while the hook rings on them give their own gettid.
  Session s(SessionOptions{});
  const uint32_t shown = s.thread_index_with_generation(1, 7, "thread 23695 (python3.8)", 23695, 5001);
  EXPECT_EQ(s.thread_index(1, 7, "test_replay", 5001), shown);
  EXPECT_EQ(s.thread_generation(), 0u);
  EXPECT_NE(s.thread_index(1, 7, "next", 5002), shown);  // a later thread with that pthread_t
  EXPECT_EQ(s.thread_generation(), 1u);
}

// A LibTorch hook whose one drain delivers two ranges with one thread key
// and two OS tids (two threads, one after the other, the same pthread_t).
constexpr int64_t kKey = 0x5eed;
uint64_t drain_two_generations(gpuutil_hook_range_fn sink, void* ctx) {
  sink(ctx, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 200, kKey, 4000001, 0);
  sink(ctx, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 300, 400, kKey, 4000002, 0);
  return 0;
}
const GpuutilHookApi kTwoGenerations{GPUUTIL_HOOK_API_VERSION, &drain_two_generations};

TEST(ThreadKeys, TheTorchHooksDrainPutsAReusedKeysRangesOnTwoThreads) {
  Session s(SessionOptions{});
  torch_hook::HookDrain drain(s, &kTwoGenerations);
  s.begin_step(0, 0);
  EXPECT_EQ(drain.drain(), 2u);
  s.end_step(1000);
  const auto out = s.finish(1000);
  const auto threads = host_threads(out);
  ASSERT_EQ(threads.size(), 2u) << out.at(0).json;
  EXPECT_EQ(threads[0].first, 4000001);
  EXPECT_EQ(threads[1].first, 4000002);
}

// CUPTI's API records carry the key only: a record decoded after a source
// met the key's new thread belongs to that thread, even though the decoder
// had cached the key for the old one.
CUptiResult walk_api_records(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  uint8_t* p = *record ? reinterpret_cast<uint8_t*>(*record) + sizeof(CUpti_ActivityAPI) : buffer;
  if (p >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(p);
  return CUPTI_SUCCESS;
}
CUptiResult sync_name(CUpti_CallbackDomain, uint32_t, const char** name) {
  *name = "cudaStreamSynchronize_v3020";
  return CUPTI_SUCCESS;
}
CUpti_ActivityAPI sync_record(uint32_t key, uint64_t start, uint64_t end) {
  CUpti_ActivityAPI a{};
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;
  a.start = start;
  a.end = end;
  a.threadId = key;
  return a;
}

TEST(ThreadKeys, TheCuptiDecoderGivesAReusedKeysLaterRecordsToItsNewThread) {
  Session s(SessionOptions{});
  cupti::CuptiApi api;
  api.ActivityGetNextRecord = &walk_api_records;
  api.GetCallbackName = &sync_name;
  cupti::RecordDecoder decoder(api, s, 1);
  s.thread_index(1, kKey, "old", 5001);
  s.begin_step(0, 0);
  CUpti_ActivityAPI before = sync_record(kKey, 100, 200);
  decoder.decode_buffer(reinterpret_cast<uint8_t*>(&before), sizeof(before));  // cached: kKey -> "old"
  s.thread_index(1, kKey, "new", 5002);
  CUpti_ActivityAPI after = sync_record(kKey, 300, 450);
  decoder.decode_buffer(reinterpret_cast<uint8_t*>(&after), sizeof(after));
  s.end_step(1000);
  const auto out = s.finish(1000);
  const auto& host = out.at(0).report.steps.at(0).host;
  ASSERT_EQ(host.size(), 2u) << out.at(0).json;
  for (const auto& h : host) {
    const int64_t sync_ns = h.breakdown_ns[static_cast<size_t>(HostCategory::kHostSync)];
    EXPECT_EQ(sync_ns, h.name == "old" ? 100 : 150) << h.name << ": " << out.at(0).json;
  }
}

}  // namespace
}  // namespace gpuutil
