// Unit behaviour of the CUPTI collector's parts: the lock-free buffer pool
// under concurrent producers, and the record decoder's mapping of genuine
// CUPTI structs onto the event model (names, classification, directions,
// communication kernels, the name-pointer cache).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "collectors/cupti/buffer_pool.h"
#include "collectors/cupti/record_decoder.h"
#include "gpuutil/session.h"

namespace gpuutil::cupti {
namespace {

TEST(CuptiBufferPool, ConcurrentAcquireCompleteNeverLosesOrDuplicatesABuffer) {
  BufferPool pool(8, 4096);
  ASSERT_TRUE(pool.ok());
  std::atomic<bool> go{true};
  std::atomic<uint64_t> completed{0}, starved{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 3; ++t) {
    producers.emplace_back([&] {
      while (go.load()) {
        uint8_t* b = pool.acquire(0);
        if (!b) {
          starved.fetch_add(1);
          std::this_thread::yield();
          continue;
        }
        std::memset(b, 0xab, 16);
        ASSERT_TRUE(pool.complete(b, 16));
        completed.fetch_add(1);
      }
    });
  }
  uint64_t drained = 0;
  while (drained < 5000) {
    uint8_t* b;
    size_t valid;
    if (pool.take_completed(b, valid)) {
      ASSERT_EQ(valid, 16u);
      ASSERT_EQ(b[0], 0xab);
      std::memset(b, 0, 16);
      pool.release(b);
      ++drained;
    } else {
      std::this_thread::yield();
    }
  }
  go = false;
  for (auto& t : producers) t.join();
  uint8_t* b;
  size_t valid;
  while (pool.take_completed(b, valid)) {
    pool.release(b);
    ++drained;
  }
  EXPECT_EQ(drained, completed.load());
  EXPECT_EQ(pool.outstanding(), 0u);
  std::set<uint8_t*> all;
  for (size_t i = 0; i < pool.count(); ++i) all.insert(pool.acquire(0));
  EXPECT_EQ(all.size(), 8u);            // every buffer came back exactly once
  EXPECT_EQ(pool.acquire(0), nullptr);   // and there are no extras
}

TEST(CuptiBufferPool, AnEmptyFreeRingHandsOutNeverUsedReservedBuffersUntilMaxCount) {
  // The drain thread never runs here: the requesting thread itself draws
  // from the reservation, and only the (max_count + 1)th request starves.
  BufferPool pool(2, 4096, 5);
  ASSERT_TRUE(pool.ok());
  std::set<uint8_t*> got;
  for (int i = 0; i < 5; ++i) {
    uint8_t* b = pool.acquire(0);
    ASSERT_NE(b, nullptr) << i;
    std::memset(b, i, 4096);  // the whole buffer is usable
    got.insert(b);
  }
  EXPECT_EQ(got.size(), 5u);
  EXPECT_EQ(pool.count(), 5u);
  EXPECT_EQ(pool.outstanding(), 5u);
  EXPECT_EQ(pool.acquire(0), nullptr);
  EXPECT_EQ(pool.grow(8), 0u);  // nothing left to add
  for (uint8_t* b : got) ASSERT_TRUE(pool.complete(b, 8));
  uint8_t* b;
  size_t valid;
  while (pool.take_completed(b, valid)) pool.release(b);
  EXPECT_EQ(pool.free_count(), 5u);
}

TEST(CuptiBufferPool, ReservedClaimsRacingTheDrainThreadsGrowNeverHandOutABufferTwice) {
  for (int round = 0; round < 20; ++round) {
    BufferPool pool(1, 256, 200);
    std::atomic<bool> go{false};
    std::vector<std::vector<uint8_t*>> held(3);
    std::vector<std::thread> producers;
    for (int t = 0; t < 3; ++t) {
      producers.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        while (uint8_t* b = pool.acquire(0)) held[t].push_back(b);  // never given back
      });
    }
    std::thread drain([&] {
      while (!go.load()) std::this_thread::yield();
      while (pool.grow(3) > 0) {
      }
    });
    go = true;
    for (auto& t : producers) t.join();
    drain.join();
    uint8_t* b;
    while ((b = pool.acquire(0)) != nullptr) held[0].push_back(b);  // whatever grow freed last
    std::set<uint8_t*> all;
    size_t n = 0;
    for (const auto& v : held) {
      n += v.size();
      all.insert(v.begin(), v.end());
    }
    ASSERT_EQ(n, 200u) << "round " << round;
    ASSERT_EQ(all.size(), 200u) << "round " << round;  // no buffer twice
    EXPECT_EQ(pool.count(), 200u);
    EXPECT_EQ(pool.outstanding(), 200u);
  }
}

TEST(CuptiBufferPool, ForeignAndMisalignedBuffersAreRejected) {
  BufferPool pool(2, 1024);
  uint8_t local[64];
  EXPECT_FALSE(pool.complete(local, 8));
  EXPECT_FALSE(pool.complete(nullptr, 8));
  uint8_t* b = pool.acquire(0);
  EXPECT_FALSE(pool.complete(b + 8, 8));
  EXPECT_TRUE(pool.complete(b, 8));
}

// A buffer walker for hand-built record arrays (the function table lets
// tests replace any CUPTI entry point).
size_t size_of(const CUpti_Activity* r) {
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME: return sizeof(CUpti_ActivityAPI);
    default: return sizeof(CUpti_ActivityExternalCorrelation);
  }
}
CUptiResult walk(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  uint8_t* p = *record ? reinterpret_cast<uint8_t*>(*record) + size_of(*record) : buffer;
  if (p >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(p);
  return CUPTI_SUCCESS;
}
CUptiResult names(CUpti_CallbackDomain, uint32_t cbid, const char** name) {
  if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020) *name = "cudaStreamSynchronize_v3020";
  else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) *name = "cudaLaunchKernel_v7000";
  else return CUPTI_ERROR_INVALID_PARAMETER;
  return CUPTI_SUCCESS;
}

struct Buffer {
  std::vector<uint8_t> bytes;
  template <typename T>
  void add(const T& r) {
    const auto* p = reinterpret_cast<const uint8_t*>(&r);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
};

CuptiApi test_api() {
  CuptiApi api;
  api.ActivityGetNextRecord = &walk;
  api.GetCallbackName = &names;
  return api;
}

TEST(CuptiRecordDecoder, GenuineRecordsBecomeEventsWithClassification) {
  Buffer b;
  CUpti_ActivityAPI sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  sync.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;
  sync.start = 100;
  sync.end = 900;
  sync.threadId = 42;
  b.add(sync);
  CUpti_ActivityAPI odd = sync;
  odd.cbid = 9999;  // no name from CUPTI: kept as "cudaApi#9999", kind other
  b.add(odd);
  CUpti_ActivityAPI launch = sync;
  launch.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  launch.start = 50;
  launch.end = 60;
  launch.correlationId = 5;
  b.add(launch);
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 200;
  k.end = 700;
  k.name = "ncclDevKernel_AllGather_RING_LL";
  k.correlationId = 5;
  k.gridX = 4;
  k.gridY = k.gridZ = k.blockX = k.blockY = k.blockZ = 1;
  k.staticSharedMemory = 100;
  k.dynamicSharedMemory = 28;
  b.add(k);
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;  // the host side is pageable: the call blocks
  m.bytes = 4096;
  m.start = 300;
  m.end = 400;
  b.add(m);
  CUpti_ActivityExternalCorrelation x{};
  x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  b.add(x);

  Session s(SessionOptions{});
  const CuptiApi api = test_api();
  RecordDecoder d(api, s, 1);
  d.decode_buffer(b.bytes.data(), b.bytes.size());
  EXPECT_EQ(d.stats().records, 6u);
  EXPECT_EQ(d.stats().api_calls, 3u);
  EXPECT_EQ(d.stats().activities, 2u);

  s.begin_step(0, 0);
  s.end_step(1000);
  const auto out = s.finish(1000);
  ASSERT_EQ(out.size(), 1u);
  const auto& dev = out[0].report.steps[0].devices.at(0);
  EXPECT_EQ(dev.communication_total_ns, 500);  // NCCL kernel recognised
  EXPECT_EQ(dev.memcpy_bytes[static_cast<size_t>(MemcpyDirection::kDeviceToHost)], 4096u);
  EXPECT_EQ(dev.pageable_memcpys, 1u);  // from the record's memory kinds
  EXPECT_EQ(dev.pageable_memcpy_bytes, 4096u);
  // The sync API record was classified as a synchronization: the GPU idles
  // [700, 900) while thread 42 is blocked in it.
  EXPECT_GE(dev.breakdown.idle_ns[static_cast<size_t>(IdleCause::kHostSync)], 200) << out[0].json;
  // The kernel matched its launch by correlation id; only the memcpy
  // (correlation 0) has no launching call.
  EXPECT_EQ(out[0].report.diagnostics.count(Diag::launch_unmatched), 1u);
}

TEST(CuptiRecordDecoder, ReusedNamePointerWithNewTextIsNotServedFromTheCache) {
  char name[32] = "gemm_a";
  Buffer b;
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 10;
  k.end = 20;
  k.name = name;
  b.add(k);
  Session s(SessionOptions{});
  const CuptiApi api = test_api();
  RecordDecoder d(api, s, 1);
  d.decode_buffer(b.bytes.data(), b.bytes.size());
  std::strcpy(name, "ncclDevKernel_Broadcast");  // same address, module reloaded
  d.decode_buffer(b.bytes.data(), b.bytes.size());
  s.begin_step(0, 0);
  s.end_step(100);
  const auto out = s.finish(100);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].json.find("gemm_a"), std::string::npos);
  EXPECT_NE(out[0].json.find("ncclDevKernel_Broadcast"), std::string::npos);
  EXPECT_EQ(out[0].report.steps[0].devices.at(0).communication_total_ns, 10);
}

TEST(CuptiRecordDecoder, ZeroAndReversedTimestampsAreCountedAndSkipped) {
  Buffer b;
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = "k";
  k.start = 0;
  k.end = 10;
  b.add(k);
  k.start = 50;
  k.end = 40;
  b.add(k);
  Session s(SessionOptions{});
  const CuptiApi api = test_api();
  RecordDecoder d(api, s, 1);
  d.decode_buffer(b.bytes.data(), b.bytes.size());
  EXPECT_EQ(d.stats().stored, 0u);
  s.begin_step(0, 0);
  const auto out = s.finish(100);
  EXPECT_EQ(out.at(0).report.diagnostics.count(Diag::cupti_timestamp_invalid), 2u);
}

}  // namespace
}  // namespace gpuutil::cupti
