// The fake CUPTI itself: it must behave like libcupti at the points where a
// collector can go wrong (docs/live-collection.md, "What the fake
// reproduces"), or tests on it prove nothing. These tests drive it as a bare
// CUPTI client would, through its CUPTI entry points.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <dlfcn.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_cupti_client.h"
#include "fake_cupti_matrix.h"

namespace gpuutil {
namespace {

using testing::FakeCupti;

// A minimal CUPTI client on the fake's entry points.
struct Client {
  static inline std::mutex mu;
  static inline std::vector<std::vector<uint8_t>> records;  // delivered records, in order
  static inline std::vector<uint8_t*> foreign;
  static inline bool probe_stats = false;  // call back into the fake from inside callbacks
  static inline size_t max_records = 0;    // what bufferRequested answers
  static inline int buffers = 0;           // buffers delivered back
  static inline int empty_buffers = 0;     // of which empty

  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
  CUptiResult (*enable)(CUpti_ActivityKind);
  CUptiResult (*disable)(CUpti_ActivityKind);
  CUptiResult (*flush)(uint32_t);
  CUptiResult (*next)(uint8_t*, size_t, CUpti_Activity**);
  CUptiResult (*enable_runtime)(CUpti_CallbackId, uint8_t);
  CUptiResult (*set_thread_id_type)(CUpti_ActivityThreadIdType);
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, CUpti_SubscriberParams*);
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
  CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char**);
  CUptiResult (*version)(uint32_t*);
  CUptiResult (*set_attribute)(CUpti_ActivityAttribute, size_t*, void*);
  CUptiResult (*get_attribute)(CUpti_ActivityAttribute, size_t*, void*);
  CUptiResult (*finalize)();
  CUptiResult (*timestamp_callback)(CUpti_TimestampCallbackFunc);

  static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max) {
    if (probe_stats) FakeCupti::get().stats();  // deadlocks if the fake holds its lock here
    *buffer = new uint8_t[64 << 10];
    *size = 64 << 10;
    *max = max_records;
  }
  static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid);

  explicit Client(const FakeCupti& f) {
    auto get = [&](const char* n, auto& out) { out = reinterpret_cast<std::decay_t<decltype(out)>>(dlsym(f.handle, n)); };
    get("cuptiActivityRegisterCallbacks", register_callbacks);
    get("cuptiActivityEnable", enable);
    get("cuptiActivityDisable", disable);
    get("cuptiActivityFlushAll", flush);
    get("cuptiActivityGetNextRecord", next);
    get("cuptiActivityEnableRuntimeApi", enable_runtime);
    get("cuptiSetThreadIdType", set_thread_id_type);
    get("cuptiSubscribe_v2", subscribe);
    get("cuptiUnsubscribe", unsubscribe);
    get("cuptiGetCallbackName", callback_name);
    get("cuptiGetVersion", version);
    get("cuptiActivitySetAttribute", set_attribute);
    get("cuptiActivityGetAttribute", get_attribute);
    get("cuptiFinalize", finalize);
    get("cuptiActivityRegisterTimestampCallback", timestamp_callback);
    std::lock_guard<std::mutex> lock(mu);
    records.clear();
    foreign.clear();
    probe_stats = false;
    max_records = 0;
    buffers = 0;
    empty_buffers = 0;
  }
  void attach(bool api = true) {
    register_callbacks(&requested, &completed);
    enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    enable(CUPTI_ACTIVITY_KIND_MEMCPY);
    if (api) enable(CUPTI_ACTIVITY_KIND_RUNTIME);
  }
  void detach() {
    for (auto k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_RUNTIME,
                   CUPTI_ACTIVITY_KIND_DRIVER}) {
      disable(k);
    }
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  static std::vector<std::vector<uint8_t>> taken() {
    std::lock_guard<std::mutex> lock(mu);
    return records;
  }
  static std::vector<const CUpti_ActivityKernel10*> kernels(const std::vector<std::vector<uint8_t>>& recs) {
    std::vector<const CUpti_ActivityKernel10*> out;
    for (const auto& r : recs) {
      if (reinterpret_cast<const CUpti_Activity*>(r.data())->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        out.push_back(reinterpret_cast<const CUpti_ActivityKernel10*>(r.data()));
      }
    }
    return out;
  }
  static std::vector<CUpti_ActivityKind> kinds(const std::vector<std::vector<uint8_t>>& recs) {
    std::vector<CUpti_ActivityKind> out;
    for (const auto& r : recs) out.push_back(reinterpret_cast<const CUpti_Activity*>(r.data())->kind);
    return out;
  }
  static int delivered() {
    std::lock_guard<std::mutex> lock(mu);
    return buffers;
  }
  static std::vector<const CUpti_ActivityAPI*> apis(const std::vector<std::vector<uint8_t>>& recs) {
    std::vector<const CUpti_ActivityAPI*> out;
    for (const auto& r : recs) {
      const auto k = reinterpret_cast<const CUpti_Activity*>(r.data())->kind;
      if (k == CUPTI_ACTIVITY_KIND_RUNTIME || k == CUPTI_ACTIVITY_KIND_DRIVER) {
        out.push_back(reinterpret_cast<const CUpti_ActivityAPI*>(r.data()));
      }
    }
    return out;
  }
};

Client* g_client = nullptr;

void CUPTIAPI Client::completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (probe_stats) FakeCupti::get().stats();
  if (buffer == nullptr) return;
  CUpti_Activity* r = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  ++buffers;
  if (valid == 0) ++empty_buffers;
  while (g_client->next(buffer, valid, &r) == CUPTI_SUCCESS) {
    const auto* p = reinterpret_cast<const uint8_t*>(r);
    const size_t bytes = r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ? sizeof(CUpti_ActivityKernel10)
                         : r->kind == CUPTI_ACTIVITY_KIND_MEMCPY          ? sizeof(CUpti_ActivityMemcpy6)
                         : r->kind == CUPTI_ACTIVITY_KIND_MEMCPY2         ? sizeof(CUpti_ActivityMemcpyPtoP4)
                                                                         : sizeof(CUpti_ActivityAPI);
    records.emplace_back(p, p + bytes);
  }
  delete[] buffer;
}

struct FakeCuptiTest : ::testing::Test {
  FakeCupti& fake = FakeCupti::get();
  std::unique_ptr<Client> client;
  void SetUp() override {
    fake.configure(nullptr);
    fake.reset(nullptr);
    client = std::make_unique<Client>(fake);
    g_client = client.get();
  }
  void TearDown() override {
    client->detach();
    fake.configure(nullptr);
  }
  // Chooses a matrix cell for this test (the fixture puts the run's back).
  void cell(const char* text) {
    const fake_cupti_matrix m = fake_matrix::cell(text);
    fake.configure(&m);
    fake.reset(nullptr);
  }
  // cudaLaunchKernel at explicit session times from the calling thread.
  uint32_t launch_at(const char* name, int64_t t, int64_t start, int64_t end) {
    return fake.call_at(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, FAKE_CUPTI_KERNEL, name, 7, t, start, end);
  }
};

int64_t mono_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

TEST_F(FakeCuptiTest, DefaultFlushWithholdsABufferHoldingAnUnfinishedKernel) {
  client->attach();
  fake.launch("long", 7, 40'000'000, 1000);  // runs 40 ms
  client->flush(0);
  EXPECT_TRUE(Client::taken().empty()) << "the buffer with the running kernel (and its API record) is withheld";
  EXPECT_GE(fake.stats().buffers_withheld, 1u);
  usleep(50'000);
  client->flush(0);
  const auto recs = Client::taken();
  ASSERT_EQ(Client::kernels(recs).size(), 1u);
  ASSERT_EQ(Client::apis(recs).size(), 1u);
  EXPECT_GT(Client::kernels(recs)[0]->end, Client::kernels(recs)[0]->start);
}

TEST_F(FakeCuptiTest, ForcedFlushDeliversUnfinishedWorkWithZeroTimestamps) {
  client->attach();
  fake.launch("running", 7, 500'000'000, 1000);  // started, not finished
  fake.launch("queued", 7, 1000, 1000);          // behind it on the stream: not started
  client->flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const auto recs = Client::taken();
  const auto k = Client::kernels(recs);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_NE(k[0]->start, 0u);
  EXPECT_EQ(k[0]->end, 0u);
  EXPECT_EQ(k[1]->start, 0u);
  EXPECT_EQ(k[1]->end, 0u);
  EXPECT_EQ(fake.stats().records_incomplete_forced, 2u);
}

TEST_F(FakeCuptiTest, WithoutAFlushOnlyFullCompleteBuffersAreHandedOver) {
  client->attach();
  fake.launch("k", 7, 1000, 1000);
  usleep(20'000);  // the worker runs every millisecond
  EXPECT_TRUE(Client::taken().empty()) << "a partial buffer waits for a flush";
  for (int i = 0; i < 400; ++i) fake.launch("k", 7, 100, 100);  // > 64 KiB of records: buffers fill
  usleep(20'000);
  EXPECT_FALSE(Client::kernels(Client::taken()).empty()) << "full, complete buffers go out on the worker thread";
}

TEST_F(FakeCuptiTest, DeviceBufferModeDeliversDeviceRecordsInCompletionOrderAfterTheirApiRecords) {
  fake_cupti_config cfg{};
  cfg.device_records = FAKE_CUPTI_DEVICE_RECORDS_IN_DEVICE_BUFFER;
  fake.reset(&cfg);
  client->attach();
  fake.launch("slow", 7, 30'000'000, 1000);
  fake.launch("fast", 8, 1'000'000, 1000);
  client->flush(0);
  auto recs = Client::taken();
  EXPECT_EQ(Client::apis(recs).size(), 2u) << "API records are complete at once";
  EXPECT_TRUE(Client::kernels(recs).empty());
  usleep(40'000);
  client->flush(0);
  recs = Client::taken();
  const auto k = Client::kernels(recs);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_STREQ(k[0]->name, "fast");
  EXPECT_STREQ(k[1]->name, "slow");
}

TEST_F(FakeCuptiTest, ApiRecordsCarryTheCallingThreadsPthreadSelfOrItsOsTid) {
  client->attach();
  uint32_t self = 0, tid = 0;
  std::thread t([&] {
    self = static_cast<uint32_t>(pthread_self());
    tid = static_cast<uint32_t>(syscall(SYS_gettid));
    fake.launch("k", 7, 1000, 100);
    client->set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    fake.launch("k", 7, 1000, 100);
    client->set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT);
  });
  t.join();
  fake.device_synchronize();
  client->flush(0);
  const auto recs = Client::taken();
  const auto a = Client::apis(recs);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0]->threadId, self);
  EXPECT_EQ(a[1]->threadId, tid);
}

TEST_F(FakeCuptiTest, PerCallbackIdEnablesTraceOnlyThoseCallsAndTheKindOverridesThem) {
  client->attach(/*api=*/false);
  // The fake launches through CUDA 13's <<<>>> id (__cudaLaunchKernel) in its default cell.
  const uint32_t launch = fake.launch_cbid(0);
  EXPECT_EQ(launch, uint32_t(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000));
  client->enable_runtime(launch, 1);
  fake.launch("k", 7, 1000, 100);
  fake.synchronize();  // cudaDeviceSynchronize: not enabled
  client->flush(0);
  const auto recs = Client::taken();
  auto a = Client::apis(recs);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]->cbid, launch);
  EXPECT_EQ(fake.stats().runtime_cbids_enabled, 1u);
  client->enable(CUPTI_ACTIVITY_KIND_RUNTIME);
  EXPECT_EQ(fake.stats().runtime_cbids_enabled, uint32_t(CUPTI_RUNTIME_TRACE_CBID_SIZE) - 1);
}

TEST_F(FakeCuptiTest, CallbacksAreNeverCalledWithTheFakesLockHeld) {
  Client::probe_stats = true;  // each callback calls back into the fake
  client->attach();
  for (int i = 0; i < 600; ++i) fake.launch("k", 7, 100, 100);
  fake.device_synchronize();
  client->flush(0);
  EXPECT_EQ(Client::kernels(Client::taken()).size(), 600u);
  Client::probe_stats = false;
}

TEST_F(FakeCuptiTest, ASecondClientTakesOverAndLosesRecordsWrittenIntoBuffersTheFirstHandedOut) {
  client->attach();
  fake.launch("mine", 7, 30'000'000, 100);  // the thread's buffer is the first client's
  fake.second_client_start();
  fake.launch("theirs", 7, 1000, 100);  // still written into that buffer
  fake.device_synchronize();
  const fake_cupti_client_stats st = fake.second_client_stop();
  EXPECT_EQ(st.foreign_buffers_rejected, 1u) << "the first client's buffer was completed to it and rejected";
  EXPECT_EQ(st.kernels, 0u) << "both kernels were in that buffer";
  EXPECT_TRUE(Client::kernels(Client::taken()).empty()) << "the first client lost them too";
  EXPECT_EQ(fake.stats().enabled_kinds_mask, 0u) << "its stop disabled the kinds the first client had enabled";
}

TEST_F(FakeCuptiTest, ASecondClientGetsEveryRecordWhenTheFirstForceFlushedBeforeIt) {
  client->attach();
  fake.launch("mine", 7, 1000, 100);
  fake.device_synchronize();
  client->detach();  // disable + forced flush: every buffer back
  fake.second_client_start();
  fake.launch("theirs", 7, 1000, 100);
  fake.launch("theirs", 7, 1000, 100);
  fake.device_synchronize();
  const fake_cupti_client_stats st = fake.second_client_stop();
  EXPECT_EQ(st.kernels, 2u);
  EXPECT_EQ(st.foreign_buffers_rejected, 0u);
  const auto recs = Client::taken();
  EXPECT_EQ(Client::kernels(recs).size(), 1u);
}

TEST_F(FakeCuptiTest, OneSubscriberAtATime) {
  CUpti_SubscriberHandle a = nullptr, b = nullptr;
  char other[64] = {0};
  CUpti_SubscriberParams p{};
  p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  p.subscriberName = "first";
  ASSERT_EQ(client->subscribe(&a, nullptr, nullptr, &p), CUPTI_SUCCESS);
  p.oldSubscriberName = other;
  p.oldSubscriberSize = sizeof(other);
  EXPECT_EQ(client->subscribe(&b, nullptr, nullptr, &p), CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_EQ(client->unsubscribe(a), CUPTI_SUCCESS);
  fake.other_subscriber("Nsight Systems");
  EXPECT_EQ(client->subscribe(&b, nullptr, nullptr, &p), CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_STREQ(other, "CUPTI for Nsight Systems");
  fake.other_subscriber(nullptr);
}

TEST_F(FakeCuptiTest, AGraphLaunchIsOneApiRecordAndManyKernelsWithItsCorrelationId) {
  client->attach();
  fake_cupti_work w[3] = {};
  for (auto& x : w) {
    x.kind = FAKE_CUPTI_KERNEL;
    x.name = "graph_node";
    x.stream = 7;
    x.duration_ns = 1000;
    x.graph_id = 5;
  }
  fake_cupti_call c{};
  c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
  c.api_ns = 2000;
  c.work = w;
  c.n_work = 3;
  const uint32_t corr = fake.call(&c);
  fake.device_synchronize();
  client->flush(0);
  const auto recs = Client::taken();
  ASSERT_EQ(Client::apis(recs).size(), 1u);
  const auto k = Client::kernels(recs);
  ASSERT_EQ(k.size(), 3u);
  for (const auto* x : k) EXPECT_EQ(x->correlationId, corr);
}

TEST_F(FakeCuptiTest, Cupti13_0GraphCorrelationIdsAreStaleInEveryActivitySessionAfterTheFirst) {
  fake_cupti_config cfg{};
  cfg.version = 130001;
  cfg.graph_correlation_bug = 1;
  fake.reset(&cfg);
  fake_cupti_work w{};
  w.kind = FAKE_CUPTI_KERNEL;
  w.name = "graph_node";
  w.stream = 7;
  w.duration_ns = 1000;
  w.graph_id = 5;
  fake_cupti_call c{};
  c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
  c.work = &w;
  c.n_work = 1;
  std::vector<uint32_t> launched;
  for (int session = 0; session < 3; ++session) {
    client->attach();
    launched.push_back(fake.call(&c));
    fake.device_synchronize();
    client->detach();
  }
  const auto recs = Client::taken();
  const auto k = Client::kernels(recs);
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[0]->correlationId, launched[0]) << "the first session is right";
  // Sessions counted since the library loaded: all later ones are wrong.
  EXPECT_NE(k[2]->correlationId, launched[2]);
}

TEST_F(FakeCuptiTest, CallbackNamesAndVersionsAreTheRealOnes) {
  const char* name = nullptr;
  ASSERT_EQ(client->callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &name),
            CUPTI_SUCCESS);
  EXPECT_STREQ(name, "cudaLaunchKernel_v7000");
  ASSERT_EQ(client->callback_name(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &name),
            CUPTI_SUCCESS);
  EXPECT_STREQ(name, "cuLaunchKernelEx");
  int domain = 0;
  EXPECT_EQ(fake.cbid("cudaLaunchKernel", &domain), uint32_t(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_EQ(domain, CUPTI_CB_DOMAIN_RUNTIME_API);
  EXPECT_EQ(fake.cbid("cuLaunchKernel", &domain), uint32_t(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_EQ(domain, CUPTI_CB_DOMAIN_DRIVER_API);
  fake_cupti_config cfg{};
  cfg.version = 27;  // CUPTI 12.9
  fake.reset(&cfg);
  uint32_t v = 0;
  client->version(&v);
  EXPECT_EQ(v, 27u);
}

// ---- the matrix: what the headers leave open, one setting each ----

TEST_F(FakeCuptiTest, ASealingDefaultFlushClosesTheStraddlingBufferSoItComesBackOnceItsWorkFinished) {
  client->attach();
  const int64_t t = mono_now();
  launch_at("first", t, t + 1000, t + 30'000'000);
  client->flush(0);  // seals the buffer holding the running kernel
  launch_at("second", t + 10'000, t + 30'000'000, t + 60'000'000);  // a new buffer: the GPU never idles
  while (mono_now() < t + 40'000'000) usleep(2'000);
  client->flush(0);
  const auto k = Client::kernels(Client::taken());
  ASSERT_EQ(k.size(), 1u) << "the sealed buffer is complete once the first kernel ended";
  EXPECT_STREQ(k[0]->name, "first");
}

TEST_F(FakeCuptiTest, AnUnsealingDefaultFlushWithholdsEveryRecordWhileTheBufferStraddlesRunningWork) {
  cell("seal=0");
  client->attach();
  const int64_t t = mono_now();
  launch_at("first", t, t + 1000, t + 30'000'000);
  client->flush(0);  // left open: the next records go into the same buffer
  launch_at("second", t + 10'000, t + 30'000'000, t + 60'000'000);
  while (mono_now() < t + 40'000'000) usleep(2'000);
  client->flush(0);
  EXPECT_TRUE(Client::taken().empty()) << "the first kernel finished, but shares a buffer with a running one";
  EXPECT_GE(fake.stats().buffers_left_open, 2u);
  while (mono_now() < t + 65'000'000) usleep(2'000);
  client->flush(0);
  EXPECT_EQ(Client::kernels(Client::taken()).size(), 2u) << "a buffer found complete is returned";
  EXPECT_EQ(Client::delivered(), 1);
}

TEST_F(FakeCuptiTest, ABufferIsHandedOverOnceItHoldsMaxNumRecords) {
  Client::max_records = 4;
  client->attach();
  for (int i = 0; i < 5; ++i) fake.launch("k", 7, 1000, 100);  // an API and a kernel record each
  fake.device_synchronize();
  for (int i = 0; i < 100 && Client::delivered() < 2; ++i) usleep(2'000);  // no flush: the worker hands them over
  EXPECT_EQ(Client::delivered(), 2) << "8 of the 10 records, in two buffers of 4";
  EXPECT_EQ(fake.stats().buffers_full_by_count, 2u);
  EXPECT_EQ(Client::taken().size(), 8u);
}

TEST_F(FakeCuptiTest, GlobalBuffersTakeEveryThreadsRecordsAndPerThreadOnesKeepThemApart) {
  for (const char* c : {"default", "buffers=global"}) {
    SCOPED_TRACE(c);
    cell(c);
    client = std::make_unique<Client>(fake);
    g_client = client.get();
    client->attach();
    std::thread a([&] { fake.launch("a", 7, 1000, 100); });
    a.join();
    std::thread b([&] { fake.launch("b", 8, 1000, 100); });
    b.join();
    fake.device_synchronize();
    client->flush(0);
    EXPECT_EQ(Client::apis(Client::taken()).size(), 2u);
    EXPECT_EQ(Client::delivered(), std::string(c) == "default" ? 2 : 1);
    client->detach();
  }
}

TEST_F(FakeCuptiTest, SwitchingToGlobalBuffersHappensAtTheFirstDefaultFlushOrWhenAClientSetsTheAttribute) {
  cell("buffers=switch");
  client->attach();
  EXPECT_EQ(fake.stats().per_thread_buffers, 1);
  client->flush(0);
  EXPECT_EQ(fake.stats().per_thread_buffers, 0);
  fake.reset(nullptr);  // the cell starts again per thread
  uint8_t v = 0;
  size_t size = sizeof(v);
  ASSERT_EQ(client->set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &v), CUPTI_SUCCESS);
  v = 1;
  ASSERT_EQ(client->get_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &v), CUPTI_SUCCESS);
  EXPECT_EQ(v, 0);
  client->flush(0);
  EXPECT_EQ(fake.stats().per_thread_buffers, 0) << "set by a client: no longer the cell's switch";
}

TEST_F(FakeCuptiTest, AnApiRecordWrittenAtExitFollowsItsDeviceRecordsAndIsNotWrittenBeforeTheCallEnds) {
  for (const char* c : {"default", "api=exit"}) {
    SCOPED_TRACE(c);
    cell(c);
    client = std::make_unique<Client>(fake);
    g_client = client.get();
    client->attach();
    const int64_t t = mono_now();
    fake_cupti_work w{};
    w.kind = FAKE_CUPTI_KERNEL;
    w.name = "k";
    w.stream = 7;
    w.duration_ns = 1000;
    w.latency_ns = 100;
    fake_cupti_call call{};
    call.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    call.api_ns = 20'000'000;  // a launch that takes 20 ms
    call.work = &w;
    call.n_work = 1;
    fake.call(&call);
    const bool at_exit = std::string(c) == "api=exit";
    if (at_exit) {
      EXPECT_GE(mono_now() - t, 20'000'000) << "the call returned, and its record was written, at its end";
    }
    fake.device_synchronize();
    client->flush(0);
    const auto kinds = Client::kinds(Client::taken());
    ASSERT_EQ(kinds.size(), 2u);
    EXPECT_EQ(kinds[0], at_exit ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_RUNTIME);
    client->detach();
  }
}

TEST_F(FakeCuptiTest, SkewMovesDeviceTimestampsBeforeTheLaunchCallThatQueuedThem) {
  cell("skew=3000");
  client->attach();
  const int64_t t = mono_now();
  launch_at("k", t, t + 4000, t + 12'000);  // API [t, t + 5 us), kernel 4 us after the call began
  fake.device_synchronize();
  client->flush(0);
  const auto recs = Client::taken();
  ASSERT_EQ(Client::kernels(recs).size(), 1u);
  ASSERT_EQ(Client::apis(recs).size(), 1u);
  const int64_t k_start = int64_t(Client::kernels(recs)[0]->start);
  const int64_t api_start = int64_t(Client::apis(recs)[0]->start);
  EXPECT_EQ(k_start - api_start, 4000 - 3000) << "the kernel appears to start 4 us before its launch call ended";
}

// A client clock 1000 s ahead of the monotonic one whose first read, in
// the fake's offset measurement, is followed by a 3 ms preemption.
std::atomic<bool> g_preempt_next_read{false};
uint64_t CUPTIAPI clock_ahead_preempted_once() {
  const int64_t t = mono_now() + 1'000'000'000'000;
  if (g_preempt_next_read.exchange(false)) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  return static_cast<uint64_t>(t);
}

TEST_F(FakeCuptiTest, APreemptionWhileTheFakeMeasuresTheClientsClockShiftsNoRecord) {
  // The offset of the client's clock is measured from the most tightly
  // bracketed read; a read preempted inside its bracket (a loaded host)
  // once moved every record up to half the preemption earlier, so an API
  // record started before the client's clock read just before its call.
  client->attach();
  g_preempt_next_read = true;
  ASSERT_EQ(client->timestamp_callback(&clock_ahead_preempted_once), CUPTI_SUCCESS);
  ASSERT_FALSE(g_preempt_next_read.load()) << "the fake read the client's clock when it was registered";
  const int64_t t = mono_now();
  launch_at("k", t, t + 4000, t + 12'000);
  fake.device_synchronize();
  client->flush(0);
  const auto recs = Client::taken();
  ASSERT_EQ(Client::apis(recs).size(), 1u);
  const int64_t api_start = int64_t(Client::apis(recs)[0]->start);
  EXPECT_LT(std::llabs(api_start - (t + 1'000'000'000'000)), 20'000) << "API start off by " << api_start - t - 1'000'000'000'000 << " ns";
}

TEST_F(FakeCuptiTest, AHeldEmptyBufferComesBackOnlyWithAForcedFlush) {
  cell("hold=1");
  client->attach();
  fake.launch("k", 7, 1000, 100);
  fake.device_synchronize();
  client->flush(0);
  EXPECT_EQ(Client::kernels(Client::taken()).size(), 1u);
  EXPECT_EQ(fake.stats().buffers_held, 1) << "the prefetched spare stays with CUPTI";
  EXPECT_EQ(Client::empty_buffers, 0);
  client->flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  EXPECT_EQ(fake.stats().buffers_held, 0);
  EXPECT_EQ(Client::empty_buffers, 1);
}

TEST_F(FakeCuptiTest, AFailedCallCarriesItsReturnValueAndEnqueuesNothing) {
  client->attach();
  fake_cupti_work w{};
  w.kind = FAKE_CUPTI_KERNEL;
  w.name = "never_runs";
  w.stream = 7;
  w.duration_ns = 1000;
  fake_cupti_call c{};
  c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  c.api_ns = 1000;
  c.work = &w;
  c.n_work = 1;
  fake.call_failed(&c, 98);  // cudaErrorInvalidDeviceFunction
  fake.device_synchronize();
  client->flush(0);
  const auto recs = Client::taken();
  ASSERT_EQ(Client::apis(recs).size(), 1u);
  EXPECT_EQ(Client::apis(recs)[0]->returnValue, 98u);
  EXPECT_TRUE(Client::kernels(recs).empty());
}

TEST_F(FakeCuptiTest, PeerCopiesArriveAsMemcpy2OnlyWhileThatKindIsEnabledAndRecordsCarryTheirDevicesContext) {
  client->attach();
  auto peer_copy = [&] {
    fake_cupti_work w{};
    w.kind = FAKE_CUPTI_MEMCPY_PEER;
    w.device = 1;
    w.stream = 9;
    w.bytes = 1 << 20;
    w.duration_ns = 1000;
    fake_cupti_call c{};
    c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000;
    c.api_ns = 1000;
    c.work = &w;
    c.n_work = 1;
    fake.call(&c);
  };
  peer_copy();
  auto enable = fake.driver<CUptiResult (*)(CUpti_ActivityKind)>("cuptiActivityEnable");
  enable(CUPTI_ACTIVITY_KIND_MEMCPY2);
  peer_copy();
  fake.device_synchronize();
  client->flush(0);
  std::vector<CUpti_ActivityMemcpyPtoP4> copies;
  for (const auto& r : Client::taken()) {
    if (reinterpret_cast<const CUpti_Activity*>(r.data())->kind != CUPTI_ACTIVITY_KIND_MEMCPY2) continue;
    CUpti_ActivityMemcpyPtoP4 m;
    std::memcpy(&m, r.data(), sizeof(m));
    copies.push_back(m);
  }
  ASSERT_EQ(copies.size(), 1u) << "the first copy ran while MEMCPY2 was off: no record";
  EXPECT_EQ(copies[0].srcDeviceId, 1u);
  EXPECT_EQ(copies[0].dstDeviceId, 0u);
  EXPECT_EQ(copies[0].contextId, 2u);
  auto disable = fake.driver<CUptiResult (*)(CUpti_ActivityKind)>("cuptiActivityDisable");
  disable(CUPTI_ACTIVITY_KIND_MEMCPY2);
}

TEST_F(FakeCuptiTest, FinalizeDropsKindsCallbacksClockSubscriptionAndTheBuffersItHeld) {
  client->attach();
  CUpti_SubscriberHandle h = nullptr;
  CUpti_SubscriberParams p{};
  p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  ASSERT_EQ(client->subscribe(&h, nullptr, nullptr, &p), CUPTI_SUCCESS);
  client->timestamp_callback([]() -> uint64_t { return 42; });
  fake.launch("held", 7, 1000, 100);  // in a buffer CUPTI holds
  ASSERT_EQ(client->finalize(), CUPTI_SUCCESS);
  const fake_cupti_stats st = fake.stats();
  EXPECT_EQ(st.enabled_kinds_mask, 0u);
  EXPECT_EQ(st.callbacks_registered, 0);
  EXPECT_EQ(st.timestamp_callback_set, 0);
  EXPECT_EQ(st.subscribed, 0);
  EXPECT_EQ(st.buffers_lost_at_finalize, 1u);
  EXPECT_EQ(st.finalized, 1u);
  EXPECT_EQ(client->flush(0), CUPTI_ERROR_INVALID_OPERATION) << "no callbacks registered any more";
  EXPECT_TRUE(Client::taken().empty()) << "the held buffer never comes back";
  EXPECT_GT(fake.now_ns(), 1'000'000'000'000'000'000) << "CUPTI's own clock again";
}

TEST_F(FakeCuptiTest, TheSecondClientResetsPerThreadBuffersUsesItsOwnClockAndTearsCuptiDown) {
  cell("client=teardown+per_thread_reset+other_thread+own_clock");
  fake.second_client_start();
  fake.launch("theirs", 7, 1000, 100);
  fake.device_synchronize();
  const fake_cupti_client_stats theirs = fake.second_client_stop();
  EXPECT_EQ(theirs.kernels, 1u);
  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  const int64_t realtime = int64_t(rt.tv_sec) * 1'000'000'000 + rt.tv_nsec;
  EXPECT_NEAR(double(theirs.last_record_end_ns - realtime), 1000e9, 10e9) << "its records are on its own clock";
  EXPECT_EQ(fake.stats().per_thread_buffers, 0);
  EXPECT_EQ(fake.stats().finalized, 0u) << "the teardown comes after the stop";
  auto wait = fake.driver<void (*)()>("fake_cupti_wait");
  wait();
  EXPECT_EQ(fake.stats().finalized, 1u);
  EXPECT_EQ(fake.stats().per_thread_buffers, 1) << "cuptiFinalize puts the attribute back to its default";
}

// ---- issue 36: what the matrix gained ----

// Subscriber side of the callback API, recorded: (domain, cbid, site, correlation id).
struct Seen {
  int domain;
  uint32_t cbid;
  int site;
  uint32_t corr;
};
std::mutex g_seen_mu;
std::vector<Seen> g_seen;
void CUPTIAPI record_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  std::lock_guard<std::mutex> lock(g_seen_mu);
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    g_seen.push_back({int(domain), cbid, -1, 0});
    return;
  }
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  g_seen.push_back({int(domain), cbid, int(d->callbackSite), d->correlationId});
}

struct Subscription {
  FakeCupti& fake;
  CUpti_SubscriberHandle h = nullptr;
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult result = CUPTI_ERROR_UNKNOWN;
  Subscription(FakeCupti& f, bool multi) : fake(f) {
    auto subscribe_v2 = reinterpret_cast<CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                                                         CUpti_SubscriberParams*)>(dlsym(f.handle, "cuptiSubscribe_v2"));
    enable_callback = reinterpret_cast<decltype(enable_callback)>(dlsym(f.handle, "cuptiEnableCallback"));
    unsubscribe = reinterpret_cast<decltype(unsubscribe)>(dlsym(f.handle, "cuptiUnsubscribe"));
    struct {
      CUpti_SubscriberParams base;
      uint8_t allow;
    } p{};
    p.base.structSize = multi ? offsetof(decltype(p), allow) + 1 : CUpti_SubscriberParams_STRUCT_SIZE;
    p.allow = multi ? 1 : 0;
    result = subscribe_v2(&h, &record_callback, nullptr, &p.base);
  }
  ~Subscription() {
    if (result == CUPTI_SUCCESS) unsubscribe(h);
  }
  void on(CUpti_CallbackDomain domain, uint32_t cbid) { enable_callback(1, h, domain, cbid); }
};

TEST_F(FakeCuptiTest, TheDefaultCellLaunchesThroughCuda13sTripleChevronIdAndRuntimeLaunchesThroughCudaLaunchKernel) {
  EXPECT_EQ(fake.launch_cbid(0), uint32_t(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000));
  EXPECT_EQ(fake.launch_cbid(1), uint32_t(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000));
  cell("launch=runtime");
  EXPECT_EQ(fake.launch_cbid(0), uint32_t(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
}

// A runtime launch calls the driver inside: the driver callbacks come
// between the runtime call's enter and exit, with a correlation id of their
// own, and the kernel record carries the outer (nested=outer) or the inner
// (nested=inner) id.
TEST_F(FakeCuptiTest, NestedDriverCallsComeInsideTheRuntimeCallWithTheirOwnIdAndTheRecordCarriesOneOfThem) {
  for (const char* c : {"nested=outer", "nested=inner"}) {
    cell(c);
    {
      std::lock_guard<std::mutex> lock(g_seen_mu);
      g_seen.clear();
      std::lock_guard<std::mutex> records(Client::mu);
      Client::records.clear();
    }
    Subscription sub(fake, false);
    ASSERT_EQ(sub.result, CUPTI_SUCCESS);
    sub.on(CUPTI_CB_DOMAIN_RUNTIME_API, fake.launch_cbid(0));
    sub.on(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
    client->attach();
    fake.launch("k", 7, 1000, 100);
    fake.device_synchronize();
    client->flush(0);
    std::vector<Seen> seen;
    {
      std::lock_guard<std::mutex> lock(g_seen_mu);
      seen = g_seen;
    }
    ASSERT_EQ(seen.size(), 4u) << c;
    EXPECT_EQ(seen[0].domain, int(CUPTI_CB_DOMAIN_RUNTIME_API));
    EXPECT_EQ(seen[1].domain, int(CUPTI_CB_DOMAIN_DRIVER_API));
    EXPECT_EQ(seen[1].site, int(CUPTI_API_ENTER));
    EXPECT_EQ(seen[2].domain, int(CUPTI_CB_DOMAIN_DRIVER_API));
    EXPECT_EQ(seen[2].site, int(CUPTI_API_EXIT));
    EXPECT_EQ(seen[3].domain, int(CUPTI_CB_DOMAIN_RUNTIME_API));
    EXPECT_NE(seen[0].corr, seen[1].corr);
    const auto k = Client::kernels(Client::taken());
    ASSERT_EQ(k.size(), 1u);
    EXPECT_EQ(k[0]->correlationId, std::string(c) == "nested=outer" ? seen[0].corr : seen[1].corr) << c;
    client->detach();
  }
}

TEST_F(FakeCuptiTest, ALazyDefaultFlushReturnsNothingEveryOtherTime) {
  cell("flush=lazy");
  client->attach();
  fake.launch("k", 7, 1000, 100);
  fake.device_synchronize();
  client->flush(0);
  EXPECT_TRUE(Client::taken().empty()) << "the first default flush returned nothing, though all is complete";
  client->flush(0);
  EXPECT_EQ(Client::kernels(Client::taken()).size(), 1u);
  EXPECT_EQ(fake.stats().flushes_returning_nothing, 1u);
}

TEST_F(FakeCuptiTest, GraphNodesRecordsCarryInternalStreamIdsUnderGraphsInternal) {
  cell("graphs=internal");
  client->attach();
  const int64_t t = mono_now() + 1'000'000;
  fake_cupti_work nodes[2] = {};
  for (int i = 0; i < 2; ++i) {
    nodes[i].kind = FAKE_CUPTI_KERNEL;
    nodes[i].name = "node";
    nodes[i].stream = 7;
    nodes[i].graph_id = 3;
    nodes[i].start_ns = t + (i + 1) * 10'000;
    nodes[i].end_ns = t + (i + 2) * 10'000;
  }
  fake_cupti_call g{};
  g.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
  g.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
  g.start_ns = t;
  g.end_ns = t + 5000;
  g.work = nodes;
  g.n_work = 2;
  fake.call(&g);
  fake.device_synchronize();
  client->flush(0);
  const auto k = Client::kernels(Client::taken());
  ASSERT_EQ(k.size(), 2u);
  for (const auto* r : k) EXPECT_EQ(r->streamId, 1007u) << "an internal stream, not the launch stream 7";
}

// CUPTI 13.2: a second subscriber is let in only when every subscriber
// asked for multiple subscribers; before 13.2 (and with one that did not
// ask) the second gets MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED. Each gets its
// own callbacks.
TEST_F(FakeCuptiTest, MultipleSubscribersOnlyWhenEveryOneAskedAndOnlyFromCupti13_2) {
  {
    Subscription a(fake, true), b(fake, true);
    EXPECT_EQ(a.result, CUPTI_SUCCESS);
    EXPECT_EQ(b.result, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) << "13.0/13.1: one subscriber";
  }
  cell("subscribers=multi");
  uint32_t v = 0;
  client->version(&v);
  EXPECT_EQ(v, 130200u);
  {
    Subscription a(fake, true), b(fake, true);
    EXPECT_EQ(a.result, CUPTI_SUCCESS);
    EXPECT_EQ(b.result, CUPTI_SUCCESS);
    EXPECT_EQ(fake.stats().subscribers, 2u);
    {
      std::lock_guard<std::mutex> lock(g_seen_mu);
      g_seen.clear();
    }
    a.on(CUPTI_CB_DOMAIN_RUNTIME_API, fake.launch_cbid(0));
    b.on(CUPTI_CB_DOMAIN_RUNTIME_API, fake.launch_cbid(0));
    fake.launch("k", 7, 1000, 100);
    std::lock_guard<std::mutex> lock(g_seen_mu);
    EXPECT_EQ(g_seen.size(), 4u) << "enter and exit to each subscriber";
  }
  {
    Subscription a(fake, true), old_style(fake, false);
    EXPECT_EQ(a.result, CUPTI_SUCCESS);
    EXPECT_EQ(old_style.result, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) << "it did not ask";
  }
}

// Kineto before its lazy subscription: subscribes at its first start and
// keeps it; if that fails (someone holds the subscription), it traces CPU-only.
TEST_F(FakeCuptiTest, AClientThatKeepsItsSubscriptionHoldsItAfterStopOrGoesCpuOnlyWithoutIt) {
  cell("client=keeps_subscription");
  fake.second_client_start();
  fake.launch("k", 7, 1000, 100);
  fake.device_synchronize();
  fake_cupti_client_stats theirs = fake.second_client_stop();
  EXPECT_EQ(theirs.kernels, 1u);
  EXPECT_EQ(fake.stats().subscribers, 1u) << "kept after its stop";
  Subscription later(fake, false);
  EXPECT_EQ(later.result, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  fake.reset(nullptr);  // a fresh process, as far as tests go
  EXPECT_EQ(fake.stats().subscribers, 0u);
  {
    Subscription first(fake, false);
    ASSERT_EQ(first.result, CUPTI_SUCCESS);
    fake.second_client_start();
    fake.launch("k", 7, 1000, 100);
    fake.device_synchronize();
    theirs = fake.second_client_stop();
    EXPECT_EQ(fake.stats().second_client_cpu_only, 1);
    EXPECT_EQ(theirs.kernels, 0u) << "CPU-only: no GPU activity";
  }
}

// pytorch/pytorch#192021's standalone repro: each timestamp-callback
// registration after the first leaves that many kernel records at the head
// of every later activity session on CUPTI's default clock.
TEST_F(FakeCuptiTest, EachClockReRegistrationLeavesThatManyKernelRecordsOfLaterSessionsOnTheDefaultClock) {
  auto session_clock = []() -> uint64_t { return uint64_t(mono_now()); };
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(client->timestamp_callback(+session_clock), CUPTI_SUCCESS);
    client->attach();
    for (int k = 0; k < 4; ++k) fake.launch("k", 7, 1000, 100);
    fake.device_synchronize();
    client->detach();
    const auto kernels = Client::kernels(Client::taken());
    int wrong = 0;
    for (const auto* r : kernels) wrong += std::llabs(int64_t(r->start) - mono_now()) > int64_t(1'000'000'000) ? 1 : 0;
    EXPECT_EQ(wrong, round) << "round " << round;
    std::lock_guard<std::mutex> lock(Client::mu);
    Client::records.clear();
  }
  EXPECT_EQ(fake.stats().timestamp_registrations, 3u);
}

TEST_F(FakeCuptiTest, LostDroppedAndUntimedKernelRecords) {
  client->attach();
  fake.inject("lose_records", 1);
  fake.inject("drop_records", 1);
  fake.inject("no_timing_records", 1);
  for (int k = 0; k < 5; ++k) fake.launch("k", 7, 1000, 100);
  fake.device_synchronize();
  client->flush(0);
  const auto kernels = Client::kernels(Client::taken());
  ASSERT_EQ(kernels.size(), 3u) << "one lost, one dropped";
  EXPECT_EQ(kernels[0]->start, 0u);
  EXPECT_EQ(kernels[0]->end, 0u) << "no timing: start = end = 0, delivered as usual";
  size_t dropped = 0;
  auto get_dropped = reinterpret_cast<CUptiResult (*)(CUcontext, uint32_t, size_t*)>(
      dlsym(fake.handle, "cuptiActivityGetNumDroppedRecords"));
  get_dropped(nullptr, 0, &dropped);
  EXPECT_EQ(dropped, 1u) << "only the dropped one is reported";
  EXPECT_EQ(fake.stats().records_lost, 2u);
}

TEST_F(FakeCuptiTest, CuptiZeroesBuffersOnTheRequestingThreadUnlessTheClientPromisedZeroedOnes) {
  client->attach();
  fake.launch("k", 7, 1000, 100);
  EXPECT_GE(fake.stats().buffers_zeroed_by_cupti, 1u) << "the default: CUPTI zeroes (the client's are not)";
  client->detach();
  fake.reset(nullptr);
  uint8_t one = 1;
  size_t size = sizeof(one);
  client->set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &one);
  client->attach();
  fake.launch("k", 7, 1000, 100);
  EXPECT_EQ(fake.stats().buffers_zeroed_by_cupti, 0u);
  EXPECT_GE(fake.stats().buffers_not_zeroed, 1u) << "this client's `new uint8_t[]` buffers are not zeroed: caught";
  one = 0;
  client->set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &one);
}

// Streams announce their creation and destruction to subscribers; a
// destroyed stream's handle is recycled; asking CUPTI about a handle whose
// stream is gone is counted.
TEST_F(FakeCuptiTest, StreamsAnnounceThemselvesAndARecycledHandleNamesTheNewStream) {
  {
    std::lock_guard<std::mutex> lock(g_seen_mu);
    g_seen.clear();
  }
  Subscription sub(fake, false);
  sub.on(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_CREATED);
  sub.on(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING);
  void* a = fake.stream_handle(0, 41);
  EXPECT_EQ(fake.stream_handle(0, 41), a) << "stable while it lives";
  auto stream_id = reinterpret_cast<CUptiResult (*)(CUcontext, CUstream, uint8_t, uint32_t*)>(
      dlsym(fake.handle, "cuptiGetStreamIdEx"));
  uint32_t id = 0;
  ASSERT_EQ(stream_id(nullptr, static_cast<CUstream>(a), 0, &id), CUPTI_SUCCESS);
  EXPECT_EQ(id, 41u);
  fake.destroy_stream(0, 41);
  EXPECT_NE(stream_id(nullptr, static_cast<CUstream>(a), 0, &id), CUPTI_SUCCESS);
  EXPECT_EQ(fake.stats().stream_ids_after_destroy, 1u);
  void* b = fake.stream_handle(0, 42);
  EXPECT_EQ(b, a) << "recycled";
  ASSERT_EQ(stream_id(nullptr, static_cast<CUstream>(b), 0, &id), CUPTI_SUCCESS);
  EXPECT_EQ(id, 42u);
  std::lock_guard<std::mutex> lock(g_seen_mu);
  ASSERT_EQ(g_seen.size(), 3u);
  EXPECT_EQ(g_seen[0].cbid, uint32_t(CUPTI_CBID_RESOURCE_STREAM_CREATED));
  EXPECT_EQ(g_seen[1].cbid, uint32_t(CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING));
  EXPECT_EQ(g_seen[2].cbid, uint32_t(CUPTI_CBID_RESOURCE_STREAM_CREATED));
}

TEST(FakeCuptiMatrix, EveryCellHasOneSpellingThatTheFakeReadsFromItsEnvironment) {
  for (const fake_cupti_matrix& m : fake_matrix::full_cells()) {
    fake_cupti_matrix back{};
    ASSERT_EQ(fake_matrix::parse(fake_matrix::name(m), back), "") << fake_matrix::name(m);
    EXPECT_EQ(fake_matrix::name(back), fake_matrix::name(m));
  }
  EXPECT_EQ(fake_matrix::full_cells().size(), 96u);
  for (const fake_cupti_matrix& m : fake_matrix::ci_cells()) {
    fake_cupti_matrix back{};
    ASSERT_EQ(fake_matrix::parse(fake_matrix::name(m), back), "") << fake_matrix::name(m);
    EXPECT_EQ(fake_matrix::name(back), fake_matrix::name(m));
  }
  fake_cupti_matrix m{};
  EXPECT_EQ(fake_matrix::parse("seal=2", m), "seal takes 0|1, not \"2\"");
  EXPECT_EQ(fake_matrix::parse("client=nsight", m),
            "client takes kineto or teardown+per_thread_reset+other_thread+own_clock+keeps_subscription, not \"nsight\"");
  EXPECT_EQ(fake_matrix::parse("nested=both", m), "nested takes 0|outer|inner, not \"both\"");
  EXPECT_NE(fake_matrix::parse("colour=red", m).find("unknown setting \"colour\""), std::string::npos);
  FakeCupti& fake = FakeCupti::get();
  setenv("GPUUTIL_FAKE_CUPTI_MATRIX", "seal=0,buffers=global,skew=3000,client=teardown", 1);
  fake.configure(nullptr);
  EXPECT_EQ(fake_matrix::name(fake.matrix()), "seal=0,buffers=global,skew=3000,client=teardown");
  unsetenv("GPUUTIL_FAKE_CUPTI_MATRIX");
  fake.configure(nullptr);
  EXPECT_EQ(fake_matrix::name(fake.matrix()), "default");
}

}  // namespace
}  // namespace gpuutil
