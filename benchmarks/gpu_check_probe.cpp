// gpu_check_probe: which behaviour this CUPTI shows for each unknown of the
// fake CUPTI's matrix (tests/fake_cupti/fake_cupti_matrix.h;
// docs/live-collection.md, "The fake's matrix" and "What the first GPU run
// settles"). benchmarks/gpu_check.py runs it first, in a process of its own
// (the only CUPTI client there), and prints its table. Every row is read off
// the records and buffers CUPTI hands back, never assumed:
//
//   seal     a default flush while a kernel runs: does the buffer holding its
//            launch take a later call's record (keeps appending) or not (sealed)?
//   records  is a kernel's record in the buffer of its launch's API record?
//   buffers  do two threads' API records share a buffer, before and after the
//            first default flush (thread / global / switch)?
//   api      in that buffer, is a launch's API record before its kernel's
//            (written at the call) or after it (at the call's exit)?
//   skew     kernel start minus its launch call's end, on an idle stream
//   hold     buffers CUPTI keeps after a default flush with all work finished,
//            and how many a forced flush then returns empty
//   latency  how long after a sync a default flush first returns the records
//   names    cuptiGetCallbackName for the callback ids gpuutil classifies
//   graph    graph kernels' correlation id against their cuGraphLaunch's, in
//            the process's first and second activity session
// and what issue 36's collector relies on:
//   timestamps  whether every kernel record carries valid times (CUPTI may
//            write zeros "for lack of device memory")
//   heads    whether a buffer CUPTI holds with nothing in it reads zero at its
//            head (handed out zeroed), and one with records does not
//   streams  whether CUPTI_CBID_RESOURCE_STREAM_CREATED comes for a stream
//            created on a subscription, and whether cuptiGetStreamIdEx called
//            inside it gives the id the stream's kernel records carry
//   clock    what a second registration of the timestamp callback does to
//            the kernel records of the next activity session (how many are
//            on another clock; pytorch/pytorch#192021)
//
//   gpu_check_probe --out probe.json [--cupti-library PATH] [--fake-graph-correlation-bug]
//
// libcuda is dlopen'ed ($GPUUTIL_CHECK_LIBCUDA, else libcuda.so.1); libcupti
// from --cupti-library, else $GPUUTIL_CUPTI_LIBRARY, else the folders of
// gpu_check_cupti_dirs.h. When "libcuda" is the fake CUPTI (it exports
// fake_cupti_call_api), kernels of a chosen length and graph launches are made
// through the fake's control API (its driver surface runs every kernel for 10
// us and has no graphs), and --fake-graph-correlation-bug turns on its CUPTI
// 13.0 graph emulation; what is measured is still read from the records alone.
// Exit status: 0 when it ran (a row it could not measure says why), 2 when
// CUDA or CUPTI could not be used (one stderr line).
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_cupti.h"
#include "gpu_check_cupti_dirs.h"
#include "gpu_check_spin_ptx.h"

namespace {

using Json = nlohmann::json;

template <typename F>
bool sym(void* h, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(h, name));
  return out != nullptr;
}

struct Cupti {
  std::string path;
  CUptiResult (*get_version)(uint32_t*) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
  CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*timestamp)(uint64_t*) = nullptr;
  CUptiResult (*get_attribute)(CUpti_ActivityAttribute, size_t*, void*) = nullptr;  // optional
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;  // optional
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) = nullptr;
  CUptiResult (*stream_id)(CUcontext, CUstream, uint8_t, uint32_t*) = nullptr;
  CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc) = nullptr;

  std::string bind(void* h) {
    if (!sym(h, "cuptiGetVersion", get_version) || !sym(h, "cuptiGetResultString", result_string) ||
        !sym(h, "cuptiGetCallbackName", callback_name) ||
        !sym(h, "cuptiActivityRegisterCallbacks", register_callbacks) || !sym(h, "cuptiActivityEnable", enable) ||
        !sym(h, "cuptiActivityDisable", disable) || !sym(h, "cuptiActivityFlushAll", flush_all) ||
        !sym(h, "cuptiActivityGetNextRecord", next_record) || !sym(h, "cuptiGetTimestamp", timestamp)) {
      return "lacks a CUPTI entry point the probe needs";
    }
    sym(h, "cuptiActivityGetAttribute", get_attribute);
    sym(h, "cuptiSubscribe", subscribe);
    sym(h, "cuptiUnsubscribe", unsubscribe);
    sym(h, "cuptiEnableCallback", enable_callback);
    sym(h, "cuptiGetStreamIdEx", stream_id);
    sym(h, "cuptiActivityRegisterTimestampCallback", register_timestamp);
    return "";
  }

  std::string describe(CUptiResult r) const {
    const char* s = nullptr;
    if (result_string(r, &s) != CUPTI_SUCCESS) s = nullptr;
    return std::string(s ? s : "CUPTI_ERROR") + " (" + std::to_string(static_cast<int>(r)) + ")";
  }

  int64_t now() const {
    uint64_t t = 0;
    timestamp(&t);
    return static_cast<int64_t>(t);
  }
};

struct Driver {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;  // optional
  CUresult (*retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*set_current)(CUcontext) = nullptr;
  CUresult (*load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void**, void**) = nullptr;
  CUresult (*synchronize)() = nullptr;
  // Graphs (optional: the fake's driver surface has none).
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*begin_capture)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*end_capture)(CUstream, CUgraph*) = nullptr;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*graph_launch)(CUgraphExec, CUstream) = nullptr;
  // The fake CUPTI's control API, when "libcuda" is the fake.
  uint32_t (*fake_call)(const fake_cupti_call*) = nullptr;
  void (*fake_reset)(const fake_cupti_config*) = nullptr;

  std::string load(const char* path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) return std::string("cannot load ") + path + ": " + dlerror();
    if (!sym(h, "cuInit", init) || !sym(h, "cuDeviceGet", device_get) ||
        !sym(h, "cuDevicePrimaryCtxRetain", retain) || !sym(h, "cuCtxSetCurrent", set_current) ||
        !sym(h, "cuModuleLoadData", load_data) || !sym(h, "cuModuleGetFunction", get_function) ||
        !sym(h, "cuLaunchKernel", launch) || !sym(h, "cuCtxSynchronize", synchronize)) {
      return std::string(path) + " lacks a driver entry point";
    }
    sym(h, "cuDeviceGetAttribute", attribute);
    sym(h, "cuStreamCreate", stream_create);
    sym(h, "cuStreamBeginCapture_v2", begin_capture);
    sym(h, "cuStreamEndCapture", end_capture);
    sym(h, "cuGraphInstantiateWithFlags", instantiate);
    sym(h, "cuGraphLaunch", graph_launch);
    if (sym(h, "fake_cupti_call_api", fake_call)) sym(h, "fake_cupti_reset", fake_reset);
    return "";
  }
};

// One record as the probe keeps it.
struct Rec {
  enum Kind { kApi, kKernel, kOther } kind = kOther;
  uint32_t cbid = 0;
  uint32_t corr = 0;
  uint32_t tid = 0;
  int64_t start = 0;
  int64_t end = 0;
  uint32_t graph = 0;
  uint32_t stream = 0;
  int buffer = -1;  // delivery order of the buffer it came in
  int index = 0;    // its place in that buffer
};

struct Delivered {
  size_t valid_bytes;
  int records;
  int epoch;  // the probe's flush count when it came back
  bool head_written;  // a buffer with records: its first byte is not zero
};

constexpr size_t kBufferBytes = size_t(4) << 20;

Cupti g_cupti;
std::mutex g_mu;
std::vector<Rec> g_recs;
std::vector<Delivered> g_buffers;
std::atomic<int> g_requested{0};
std::atomic<int> g_epoch{0};
std::vector<uint8_t*> g_held;  // buffers CUPTI holds now (guarded by g_mu)

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // Handed out zeroed, so the heads row can tell a buffer CUPTI wrote into.
  *buffer = static_cast<uint8_t*>(std::calloc(1, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // by size only: the sealing row must not see count rotation
  g_requested.fetch_add(1);
  if (*buffer != nullptr) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_held.push_back(*buffer);
  }
}

// Buffers CUPTI holds whose first word is zero, and those whose is not.
std::pair<int, int> held_heads() {
  std::lock_guard<std::mutex> lock(g_mu);
  int zero = 0, written = 0;
  for (uint8_t* b : g_held) {
    uint64_t head = 0;
    std::memcpy(&head, b, sizeof head);
    (head == 0 ? zero : written) += 1;
  }
  return {zero, written};
}

// The stream CUPTI announced last (resource callback), and the id
// cuptiGetStreamIdEx gave for it inside the callback.
std::atomic<uintptr_t> g_created_stream{0};
std::atomic<uint32_t> g_created_id{UINT32_MAX};
std::atomic<int> g_created_calls{0};

void CUPTIAPI resource_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_held.erase(std::remove(g_held.begin(), g_held.end(), buffer), g_held.end());
  const int b = static_cast<int>(g_buffers.size());
  int n = 0;
  CUpti_Activity* r = nullptr;
  while (buffer != nullptr && valid > 0 && g_cupti.next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    Rec x;
    x.buffer = b;
    x.index = n++;
    if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER || r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(r);
      x.kind = Rec::kApi;
      x.cbid = a->cbid;
      x.corr = a->correlationId;
      x.tid = a->threadId;
      x.start = static_cast<int64_t>(a->start);
      x.end = static_cast<int64_t>(a->end);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      x.kind = Rec::kKernel;
      x.corr = k->correlationId;
      x.start = static_cast<int64_t>(k->start);
      x.end = static_cast<int64_t>(k->end);
      x.graph = k->graphId;
      x.stream = k->streamId;
    }
    g_recs.push_back(x);
  }
  g_buffers.push_back({valid, n, g_epoch.load(), buffer != nullptr && n > 0 && buffer[0] != 0});
  std::free(buffer);
}

void CUPTIAPI resource_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_STREAM_CREATED || data == nullptr) return;
  const auto* d = static_cast<const CUpti_ResourceData*>(data);
  uint32_t id = UINT32_MAX;
  if (g_cupti.stream_id != nullptr && g_cupti.stream_id(d->context, d->resourceHandle.stream, 0, &id) != CUPTI_SUCCESS) {
    id = UINT32_MAX;
  }
  g_created_stream = reinterpret_cast<uintptr_t>(d->resourceHandle.stream);
  g_created_id = id;
  g_created_calls.fetch_add(1);
}

// A timestamp callback on CLOCK_MONOTONIC (the clock row registers it twice).
uint64_t CUPTIAPI monotonic_clock() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

void flush(uint32_t flag) {
  g_cupti.flush_all(flag);
  g_epoch.fetch_add(1);
}

std::vector<Rec> records() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_recs;
}

int delivered() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<int>(g_buffers.size());
}

bool is_launch(uint32_t cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz;
}

bool is_graph_launch(uint32_t cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
}

std::vector<Rec> api_in(const std::vector<Rec>& rs, bool (*want)(uint32_t), int64_t a, int64_t b) {
  std::vector<Rec> out;
  for (const Rec& r : rs) {
    if (r.kind == Rec::kApi && want(r.cbid) && r.start >= a && r.start < b) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const Rec& x, const Rec& y) { return x.start < y.start; });
  return out;
}

const Rec* kernel_of(const std::vector<Rec>& rs, uint32_t corr) {
  for (const Rec& r : rs) {
    if (r.kind == Rec::kKernel && r.corr == corr) return &r;
  }
  return nullptr;
}

// Polls default flushes until `done()` or `limit_ms`; returns the ms it took, -1 if never.
template <typename F>
double poll_default_flush(F done, int limit_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    flush(0);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (done()) return ms;
    if (ms > limit_ms) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

struct Row {
  std::string row, cell, measured, settles;
};

std::string ns_text(int64_t ns) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f us", static_cast<double>(ns) / 1e3);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path, cupti_arg;
  bool graph_bug = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out_path = argv[++i];
    } else if (a == "--cupti-library" && i + 1 < argc) {
      cupti_arg = argv[++i];
    } else if (a == "--fake-graph-correlation-bug") {
      graph_bug = true;
    } else {
      std::fprintf(stderr, "gpuutil: error: gpu_check_probe: unknown argument %s (usage: gpu_check_probe --out FILE "
                           "[--cupti-library PATH] [--fake-graph-correlation-bug])\n", a.c_str());
      return 2;
    }
  }
  if (out_path.empty()) {
    std::fprintf(stderr, "gpuutil: error: gpu_check_probe: --out FILE is required\n");
    return 2;
  }
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "gpuutil: error: gpu_check_probe: %s\n", why.c_str());
    return 2;
  };

  // CUDA first: the fake's configuration must precede its CUPTI use.
  const char* cuda_lib = std::getenv("GPUUTIL_CHECK_LIBCUDA");
  Driver cu;
  if (std::string why = cu.load(cuda_lib && *cuda_lib ? cuda_lib : "libcuda.so.1"); !why.empty()) return fail(why);
  const bool fake = cu.fake_call != nullptr;
  if (graph_bug) {
    if (!fake || !cu.fake_reset) return fail("--fake-graph-correlation-bug needs the fake CUPTI as libcuda");
    fake_cupti_config cfg{};
    cfg.graph_correlation_bug = 1;
    cu.fake_reset(&cfg);
  }

  // libcupti: the one named, else the search folders.
  std::vector<std::string> candidates;
  const char* env = std::getenv("GPUUTIL_CUPTI_LIBRARY");
  if (!cupti_arg.empty()) {
    candidates.push_back(cupti_arg);
  } else if (env && *env) {
    candidates.push_back(env);
  } else {
    for (const std::string& d : gpu_check::cupti_candidate_dirs()) {
      candidates.push_back(d + "/libcupti.so.13");
      candidates.push_back(d + "/libcupti.so.12");
    }
    candidates.push_back("libcupti.so.13");
  }
  std::string tried;
  for (const std::string& p : candidates) {
    void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      tried += (tried.empty() ? "" : ", ") + p;
      continue;
    }
    if (std::string why = g_cupti.bind(h); !why.empty()) return fail(p + " " + why);
    g_cupti.path = p;
    break;
  }
  if (g_cupti.path.empty()) return fail("no libcupti could be loaded (tried " + tried + ")");
  uint32_t version = 0;
  g_cupti.get_version(&version);
  const uint32_t cupti_major = version >= 10000 ? version / 10000 : (version >= 19 ? 12 : 11);
  if (cupti_major != CUPTI_API_VERSION / 10000) {
    return fail(g_cupti.path + " is CUPTI API version " + std::to_string(version) + ", the probe was built against " +
                std::to_string(CUPTI_API_VERSION) + ": record layouts differ");
  }

  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUfunction spin = nullptr;
  if (cu.init(0) || cu.device_get(&dev, 0) || cu.retain(&ctx, dev) || cu.set_current(ctx) ||
      cu.load_data(&mod, gpu_check::kSpinPtx) || cu.get_function(&spin, mod, "spin")) {
    return fail("CUDA setup failed (no GPU, or the PTX did not JIT)");
  }
  int clock_khz = 0;
  if (cu.attribute) cu.attribute(&clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev);
  if (clock_khz <= 0) clock_khz = 1'980'000;

  // A kernel of about `ns` on `stream` (nullptr: the legacy default stream;
  // the fake numbers it `fake_stream`).
  auto kernel = [&](int64_t ns, CUstream stream, uint32_t fake_stream = 7) {
    if (fake) {
      fake_cupti_work w{};
      w.kind = FAKE_CUPTI_KERNEL;
      w.name = "spin";
      w.stream = fake_stream;
      w.duration_ns = ns;
      w.latency_ns = 4000;  // as the fake's cuLaunchKernel
      w.grid[0] = w.block[0] = 1;
      fake_cupti_call c{};
      c.domain = CUPTI_CB_DOMAIN_DRIVER_API;
      c.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
      c.api_ns = 3000;
      c.work = &w;
      c.n_work = 1;
      cu.fake_call(&c);
      return;
    }
    unsigned long long cycles = static_cast<unsigned long long>(ns) * static_cast<unsigned long long>(clock_khz) /
                                1'000'000ULL;
    void* params[] = {&cycles};
    cu.launch(spin, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr);
  };

  // A graph of four short kernels, captured before tracing starts.
  constexpr int kGraphNodes = 4;
  CUgraphExec graph_exec = nullptr;
  CUstream graph_stream = nullptr;
  std::string graph_why;
  if (!fake) {
    CUgraph graph = nullptr;
    if (!cu.stream_create || !cu.begin_capture || !cu.end_capture || !cu.instantiate || !cu.graph_launch) {
      graph_why = "libcuda lacks the graph entry points";
    } else if (cu.stream_create(&graph_stream, 1 /* CU_STREAM_NON_BLOCKING */) ||
               cu.begin_capture(graph_stream, CU_STREAM_CAPTURE_MODE_GLOBAL)) {
      graph_why = "stream capture could not begin";
    } else {
      for (int i = 0; i < kGraphNodes; ++i) kernel(20'000, graph_stream);
      if (cu.end_capture(graph_stream, &graph) || cu.instantiate(&graph_exec, graph, 0)) {
        graph_why = "the captured graph could not be instantiated";
      }
    }
  }
  auto graph_launch = [&]() {
    if (fake) {
      std::vector<fake_cupti_work> ws(kGraphNodes);
      for (fake_cupti_work& w : ws) {
        w.kind = FAKE_CUPTI_KERNEL;
        w.name = "spin";
        w.stream = 13;
        w.duration_ns = 20'000;
        w.latency_ns = 4000;
        w.graph_id = 1;
      }
      fake_cupti_call c{};
      c.domain = CUPTI_CB_DOMAIN_DRIVER_API;
      c.cbid = CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch;
      c.api_ns = 3000;
      c.work = ws.data();
      c.n_work = kGraphNodes;
      cu.fake_call(&c);
    } else if (graph_exec) {
      cu.graph_launch(graph_exec, graph_stream);
    }
    cu.synchronize();
  };

  kernel(50'000, nullptr);  // warm-up, untraced: module load and first-launch costs
  cu.synchronize();

  if (CUptiResult r = g_cupti.register_callbacks(requested, completed); r != CUPTI_SUCCESS) {
    return fail("cuptiActivityRegisterCallbacks returned " + g_cupti.describe(r));
  }
  auto enable_all = [&]() -> std::string {
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_DRIVER}) {
      if (CUptiResult r = g_cupti.enable(k); r != CUPTI_SUCCESS) {
        return "cuptiActivityEnable(" + std::to_string(static_cast<int>(k)) + ") returned " + g_cupti.describe(r) +
               (r == CUPTI_ERROR_UNKNOWN ? ": no NVIDIA driver/GPU visible" : "");
      }
    }
    return "";
  };
  auto disable_all = [&]() {
    g_cupti.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    g_cupti.disable(CUPTI_ACTIVITY_KIND_DRIVER);
  };
  if (std::string why = enable_all(); !why.empty()) return fail(why);
  int per_thread_attr = -1;
  if (g_cupti.get_attribute) {
    uint8_t v = 0;
    size_t size = sizeof v;
    if (g_cupti.get_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &v) == CUPTI_SUCCESS) {
      per_thread_attr = v;
    }
  }

  // 1. Two threads' API records before the first default flush.
  const int64_t t0 = g_cupti.now();
  cu.set_current(ctx);
  std::thread([&] { cu.set_current(ctx); }).join();
  const int64_t t1 = g_cupti.now();

  // 2. Launches onto an idle stream, each waited for: placement, order, skew.
  constexpr int kLaunches = 8;
  for (int i = 0; i < kLaunches; ++i) {
    kernel(50'000, nullptr);
    cu.synchronize();
  }
  const int64_t t2 = g_cupti.now();
  auto all_kernels_of = [&](int64_t a, int64_t b) {
    const std::vector<Rec> rs = records();
    const std::vector<Rec> launches = api_in(rs, is_launch, a, b);
    if (launches.empty()) return false;
    for (const Rec& l : launches) {
      if (!kernel_of(rs, l.corr)) return false;
    }
    return true;
  };
  const double latency_ms = poll_default_flush([&] { return all_kernels_of(t1, t2); }, 2000);
  for (int i = 0; i < 3; ++i) flush(0);  // whatever else a default flush returns
  const int kept_after_default = g_requested.load() - delivered();
  const std::pair<int, int> heads = held_heads();  // all work finished: what CUPTI keeps holds no record
  const int before_forced = delivered();
  flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  int empty_from_forced = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (size_t i = static_cast<size_t>(before_forced); i < g_buffers.size(); ++i) {
      empty_from_forced += g_buffers[i].records == 0;
    }
  }
  const int kept_after_forced = g_requested.load() - delivered();

  // 3. Two threads' API records after it.
  const int64_t t3 = g_cupti.now();
  cu.set_current(ctx);
  std::thread([&] { cu.set_current(ctx); }).join();
  const int64_t t4 = g_cupti.now();
  flush(0);

  // 4. A default flush while a kernel runs, then one more call.
  const int64_t long_ns = 300'000'000;
  const int64_t t5 = g_cupti.now();
  kernel(long_ns, nullptr);
  const int seal_epoch = g_epoch.load();
  flush(0);
  CUfunction again = nullptr;
  cu.get_function(&again, mod, "spin");  // the marker call
  cu.synchronize();
  const int64_t t6 = g_cupti.now();
  poll_default_flush([&] { return all_kernels_of(t5, t6); }, 3000);

  // 5. A graph in this (the first) activity session and in a second one.
  const int64_t t7 = g_cupti.now();
  graph_launch();
  const int64_t t8 = g_cupti.now();
  poll_default_flush([&] { return true; }, 0);
  disable_all();
  flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::string second_session;
  if (std::string why = enable_all(); !why.empty()) second_session = why;
  const int64_t t9 = g_cupti.now();
  graph_launch();
  const int64_t t10 = g_cupti.now();
  flush(0);
  disable_all();
  flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);

  // 6. A stream created on a subscription (its resource callback), a kernel on it.
  std::string streams_why;
  CUpti_SubscriberHandle sub = nullptr;
  const bool subscribed = g_cupti.subscribe != nullptr && g_cupti.enable_callback != nullptr &&
                          g_cupti.subscribe(&sub, &resource_callback, nullptr) == CUPTI_SUCCESS;
  if (subscribed) g_cupti.enable_callback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_CREATED);
  CUstream made = nullptr;
  const int64_t t11 = g_cupti.now();
  if (std::string why = enable_all(); !why.empty()) {
    streams_why = why;
  } else if (!subscribed) {
    streams_why = "no subscription (cuptiSubscribe missing or refused)";
  } else if (!cu.stream_create || cu.stream_create(&made, 1 /* CU_STREAM_NON_BLOCKING */)) {
    streams_why = "cuStreamCreate missing or failed";
  } else {
    kernel(50'000, made, g_created_id.load());
    cu.synchronize();
  }
  const int64_t t12 = g_cupti.now();
  poll_default_flush([&] { return true; }, 0);
  disable_all();
  flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (subscribed) g_cupti.unsubscribe(sub);

  // 7. The timestamp callback registered, then registered again: kernel
  // records of the activity session after each, on the registered clock or not.
  int wrong_clock[2] = {-1, -1};
  int clock_kernels[2] = {0, 0};
  if (g_cupti.register_timestamp != nullptr) {
    for (int round = 0; round < 2; ++round) {
      if (g_cupti.register_timestamp(&monotonic_clock) != CUPTI_SUCCESS) break;
      const size_t first = records().size();
      if (!enable_all().empty()) break;
      for (int i = 0; i < 4; ++i) kernel(20'000, nullptr);
      cu.synchronize();
      disable_all();
      flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      const int64_t now = static_cast<int64_t>(monotonic_clock());
      const std::vector<Rec> after = records();
      wrong_clock[round] = 0;
      for (size_t i = first; i < after.size(); ++i) {
        if (after[i].kind != Rec::kKernel) continue;
        ++clock_kernels[round];
        wrong_clock[round] += std::llabs(after[i].start - now) > int64_t(1'000'000'000) ? 1 : 0;
      }
    }
  }
  const std::vector<Rec> rs = records();

  std::vector<Row> rows;
  // buffers
  {
    auto set_current = [](uint32_t c) { return c == CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent; };
    const std::vector<Rec> p1 = api_in(rs, set_current, t0, t1), p2 = api_in(rs, set_current, t3, t4);
    Row r{"buffers", "", "", "where API records go: per thread (CUDA 13's default), one global buffer, or a switch"};
    if (p1.size() != 2 || p2.size() != 2 || p1[0].tid == p1[1].tid) {
      r.cell = "n/a";
      r.measured = "not measured: " + std::to_string(p1.size()) + " and " + std::to_string(p2.size()) +
                   " cuCtxSetCurrent records from two threads";
    } else {
      const bool s1 = p1[0].buffer == p1[1].buffer, s2 = p2[0].buffer == p2[1].buffer;
      r.cell = !s1 && !s2 ? "buffers=thread" : s1 && s2 ? "buffers=global" : !s1 && s2 ? "buffers=switch" : "other";
      r.measured = std::string("two threads' records ") + (s1 ? "share" : "do not share") +
                   " a buffer before the first default flush, " + (s2 ? "share" : "do not share") + " one after it";
    }
    if (per_thread_attr >= 0) r.measured += "; PER_THREAD_ACTIVITY_BUFFER reads " + std::to_string(per_thread_attr);
    rows.push_back(r);
  }
  // records, api, skew
  {
    const std::vector<Rec> launches = api_in(rs, is_launch, t1, t2);
    int same = 0, other = 0, api_first = 0, kernel_first = 0, missing = 0, before_end = 0, before_start = 0;
    std::vector<int64_t> lead_end;
    int64_t min_start = INT64_MAX;
    std::string example;
    for (const Rec& l : launches) {
      const Rec* k = kernel_of(rs, l.corr);
      if (!k) {
        ++missing;
        continue;
      }
      (k->buffer == l.buffer ? same : other) += 1;
      if (k->buffer == l.buffer) (l.index < k->index ? api_first : kernel_first) += 1;
      lead_end.push_back(k->start - l.end);
      min_start = std::min(min_start, k->start - l.start);
      before_end += k->start < l.end;
      before_start += k->start < l.start;
      if (example.empty()) {
        example = "first launch: API record #" + std::to_string(l.index) + " of buffer " + std::to_string(l.buffer) +
                  ", kernel record #" + std::to_string(k->index) + " of buffer " + std::to_string(k->buffer);
      }
    }
    const std::string counted = std::to_string(launches.size()) + " launches onto an idle stream";
    Row rec{"records", "", "", "whether a launch's kernel record can hold back the buffer its launch thread writes"};
    if (same + other == 0) {
      rec.cell = "n/a";
      rec.measured = "not measured: no kernel record matched " + counted;
    } else {
      rec.cell = other == 0 ? "records=thread" : same == 0 ? "records=device" : "mixed";
      rec.measured = std::to_string(same) + " of " + std::to_string(same + other) +
                     " kernel records in their launch's buffer (" + example + ")";
      if (missing) rec.measured += "; " + std::to_string(missing) + " launches without a kernel record";
    }
    rows.push_back(rec);
    Row api{"api", "", "", "whether a launch's API record can precede the device records it reserved"};
    if (api_first + kernel_first == 0) {
      api.cell = "n/a";
      api.measured = "not observable: no kernel record shares its launch's buffer";
    } else {
      api.cell = kernel_first == 0 ? "api=start" : api_first == 0 ? "api=exit" : "mixed";
      api.measured = "API record before its kernel's in " + std::to_string(api_first) + " of " +
                     std::to_string(api_first + kernel_first) + " buffers";
    }
    rows.push_back(api);
    Row skew{"skew", "", "", "how far before its launch call's end a kernel may start (the collector must accept it)"};
    if (lead_end.empty()) {
      skew.cell = "n/a";
      skew.measured = "not measured: " + counted + ", none matched";
    } else {
      std::sort(lead_end.begin(), lead_end.end());
      const int64_t lead = std::max<int64_t>(0, -lead_end.front());
      skew.cell = "skew=" + std::to_string(lead);
      skew.measured = "kernel start - launch end: min " + ns_text(lead_end.front()) + ", median " +
                      ns_text(lead_end[lead_end.size() / 2]) + "; before the launch's end in " +
                      std::to_string(before_end) + " of " + std::to_string(lead_end.size()) +
                      ", before its start in " + std::to_string(before_start) + " (min start lead " +
                      ns_text(min_start) + ")";
    }
    rows.push_back(skew);
  }
  // hold, latency
  {
    Row r{"hold", kept_after_default > 0 ? "hold=1" : "hold=0", "",
          "whether a buffer CUPTI keeps can look like a withheld one to the buffer watermark"};
    r.measured = "after default flushes with all work finished CUPTI kept " + std::to_string(kept_after_default) +
                 " of " + std::to_string(g_requested.load()) + " buffers requested so far; a forced flush returned " +
                 std::to_string(empty_from_forced) + " empty, " + std::to_string(kept_after_forced) + " still kept";
    rows.push_back(r);
    char b[160];
    if (latency_ms < 0) {
      std::snprintf(b, sizeof b, "records of finished kernels not returned by default flushes within 2 s");
    } else {
      std::snprintf(b, sizeof b, "records of finished kernels returned %.1f ms after the sync, by default flushes", latency_ms);
    }
    rows.push_back({"latency", "-", b, "how soon a step's records can be in after its work finished"});
  }
  // seal
  {
    auto marker = [](uint32_t c) { return c == CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction; };
    const std::vector<Rec> launches = api_in(rs, is_launch, t5, t6), marks = api_in(rs, marker, t5, t6);
    Row r{"seal", "", "", "whether a withheld buffer keeps growing, so only its kernels' end releases what follows"};
    if (launches.empty() || marks.empty()) {
      r.cell = "n/a";
      r.measured = "not measured: the long launch or the marker call has no record";
    } else {
      const Rec& l = launches.front();
      const int epoch = [&] {
        std::lock_guard<std::mutex> lock(g_mu);
        return g_buffers[static_cast<size_t>(l.buffer)].epoch;
      }();
      const bool withheld = epoch > seal_epoch;
      if (!withheld) {
        r.cell = "n/a";
        r.measured = "nothing withheld: the launch's buffer came back at the flush made while its " +
                     std::to_string(long_ns / 1'000'000) + " ms kernel ran";
      } else {
        const bool same = marks.front().buffer == l.buffer;
        r.cell = same ? "seal=0" : "seal=1";
        r.measured = std::string("a default flush while a ") + std::to_string(long_ns / 1'000'000) +
                     " ms kernel ran withheld its launch's buffer; the next call's record went " +
                     (same ? "into that same buffer (keeps appending)" : "into another buffer (sealed)");
      }
    }
    rows.push_back(r);
  }
  // graph
  Json graph_json = Json::object();
  {
    Row r{"graph", "", "", "whether graph launches can be matched by correlation id (CUPTI 13.0: not after the first session)"};
    auto session = [&](int64_t a, int64_t b) -> std::string {
      const std::vector<Rec> launches = api_in(rs, is_graph_launch, a, b);
      std::vector<uint32_t> ids;
      for (const Rec& k : rs) {
        // By end time: a kernel launched after `a` ends after it, one waited for before `b` ends before it.
        if (k.kind == Rec::kKernel && k.graph != 0 && k.end > a && k.end <= b) ids.push_back(k.corr);
      }
      if (launches.empty() || ids.empty()) {
        return "not measured (" + std::to_string(launches.size()) + " graph launch records, " +
               std::to_string(ids.size()) + " graph kernel records)";
      }
      const uint32_t want = launches.front().corr;
      const long bad = std::count_if(ids.begin(), ids.end(), [want](uint32_t c) { return c != want; });
      return bad == 0 ? "matched" : "stale (" + std::to_string(bad) + " of " + std::to_string(ids.size()) + " kernels)";
    };
    if (!graph_why.empty()) {
      r.cell = "n/a";
      r.measured = "not measured: " + graph_why;
    } else {
      const std::string s1 = session(t7, t8);
      const std::string s2 = second_session.empty() ? session(t9, t10) : "not measured: " + second_session;
      graph_json = {{"session1", s1}, {"session2", s2}};
      r.cell = s1 == "matched" && s2 == "matched" ? "graph=matched"
               : s1 == "matched" && s2.rfind("stale", 0) == 0 ? "graph=stale_after_first"
                                                                : "other";
      r.measured = "first activity session: " + s1 + "; second: " + s2;
    }
    rows.push_back(r);
  }
  // names
  Json names = Json::array();
  {
    struct Id {
      CUpti_CallbackDomain domain;
      uint32_t cbid;
      const char* header;
    };
#define GPU_CHECK_RT(n) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##n, #n}
#define GPU_CHECK_DRV(n) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##n, #n}
    const Id ids[] = {GPU_CHECK_RT(cudaLaunchKernel_v7000),       GPU_CHECK_RT(cudaLaunchKernelExC_v11060),
                      GPU_CHECK_RT(cudaMemcpyAsync_v3020),        GPU_CHECK_RT(cudaMemsetAsync_v3020),
                      GPU_CHECK_RT(cudaStreamSynchronize_v3020),  GPU_CHECK_RT(cudaDeviceSynchronize_v3020),
                      GPU_CHECK_RT(cudaEventSynchronize_v3020),   GPU_CHECK_RT(cudaGraphLaunch_v10000),
                      GPU_CHECK_DRV(cuLaunchKernel),              GPU_CHECK_DRV(cuLaunchKernelEx),
                      GPU_CHECK_DRV(cuGraphLaunch),               GPU_CHECK_DRV(cuMemcpyHtoDAsync_v2),
                      GPU_CHECK_DRV(cuMemsetD32Async),            GPU_CHECK_DRV(cuCtxSynchronize),
                      GPU_CHECK_DRV(cuStreamSynchronize)};
#undef GPU_CHECK_RT
#undef GPU_CHECK_DRV
    int exact = 0, unversioned = 0, other = 0;
    std::string first_other;
    for (const Id& id : ids) {
      const char* got = nullptr;
      if (g_cupti.callback_name(id.domain, id.cbid, &got) != CUPTI_SUCCESS) got = nullptr;
      const std::string g = got ? got : "";
      const std::string h = id.header;
      const size_t v = h.rfind("_v");
      if (g == h) {
        ++exact;
      } else if (v != std::string::npos && g == h.substr(0, v)) {
        ++unversioned;
      } else {
        ++other;
        if (first_other.empty()) first_other = h + " -> \"" + g + "\"";
      }
      names.push_back({{"domain", id.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver"},
                       {"cbid", id.cbid},
                       {"header", h},
                       {"name", got ? Json(g) : Json(nullptr)}});
    }
    Row r{"names", other ? "other" : unversioned ? "names=unversioned" : "names=header", "",
          "whether api_role() recognises what cuptiGetCallbackName returns"};
    r.measured = std::to_string(exact) + " of " + std::to_string(std::size(ids)) + " as the header spells them, " +
                 std::to_string(unversioned) + " without the _vNNNN suffix, " + std::to_string(other) + " otherwise" +
                 (first_other.empty() ? "" : " (" + first_other + ")");
    rows.push_back(r);
  }

  // timestamps
  {
    int kernels = 0, invalid = 0;
    for (const Rec& r : rs) {
      if (r.kind != Rec::kKernel) continue;
      ++kernels;
      invalid += r.start == 0 || r.end == 0 || r.end < r.start ? 1 : 0;
    }
    rows.push_back({"timestamps", invalid == 0 ? "timestamps=valid" : "timestamps=invalid",
                    std::to_string(invalid) + " of " + std::to_string(kernels) +
                        " kernel records with a zero or reversed time",
                    "whether a record can arrive without times (it still completes its launch; its time is not counted)"});
  }
  // heads
  {
    int written_returned = 0, returned_with_records = 0;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      for (const Delivered& d : g_buffers) {
        if (d.records == 0) continue;
        ++returned_with_records;
        written_returned += d.head_written ? 1 : 0;
      }
    }
    Row r{"heads", "", "", "whether gpuutil, without the callback API, may skip a held buffer whose head is still zero"};
    r.cell = heads.second == 0 && written_returned == returned_with_records ? "heads=zero_until_written" : "other";
    r.measured = "with all work finished CUPTI held " + std::to_string(heads.first + heads.second) + " buffers, " +
                 std::to_string(heads.second) + " of them written at their head; " + std::to_string(written_returned) +
                 " of " + std::to_string(returned_with_records) + " returned buffers with records had a written head";
    rows.push_back(r);
  }
  // streams
  {
    Row r{"streams", "", "", "whether stream ids can be learnt when streams are created, never from a handle later"};
    if (!streams_why.empty()) {
      r.cell = "n/a";
      r.measured = "not measured: " + streams_why;
    } else {
      const uint32_t id = g_created_id.load();
      int on_it = 0, kernels = 0;
      for (const Rec& k : rs) {
        if (k.kind != Rec::kKernel || k.end <= t11 || k.end > t12) continue;
        ++kernels;
        on_it += k.stream == id ? 1 : 0;
      }
      const bool came = g_created_calls.load() > 0 && g_created_stream.load() == reinterpret_cast<uintptr_t>(made);
      r.cell = came && id != UINT32_MAX && kernels > 0 && on_it == kernels ? "streams=created_callback"
               : came                                                     ? "streams=callback_id_differs"
                                                                          : "streams=no_callback";
      r.measured = std::string("STREAM_CREATED ") + (came ? "came" : "did not come") + " for the new stream (" +
                   std::to_string(g_created_calls.load()) + " calls), cuptiGetStreamIdEx in it gave " +
                   (id == UINT32_MAX ? std::string("nothing") : std::to_string(id)) + "; " + std::to_string(on_it) +
                   " of " + std::to_string(kernels) + " kernel records on it carry that id";
    }
    rows.push_back(r);
  }
  // clock
  {
    Row r{"clock", "", "", "whether a re-registered timestamp callback leaves later records on another clock"};
    if (wrong_clock[0] < 0 || wrong_clock[1] < 0) {
      r.cell = "n/a";
      r.measured = "not measured: cuptiActivityRegisterTimestampCallback missing or refused";
    } else {
      r.cell = "reregistration=" + std::to_string(wrong_clock[0]) + "_then_" + std::to_string(wrong_clock[1]);
      r.measured = "kernel records more than 1 s off the registered clock: " + std::to_string(wrong_clock[0]) +
                   " of " + std::to_string(clock_kernels[0]) + " after the first registration, " +
                   std::to_string(wrong_clock[1]) + " of " + std::to_string(clock_kernels[1]) + " after the second";
    }
    rows.push_back(r);
  }

  Json j;
  j["cupti"] = {{"path", g_cupti.path}, {"version", version}, {"compiled_version", CUPTI_API_VERSION}};
  j["fake"] = fake;
  j["graph"] = graph_json;
  j["names"] = names;
  j["rows"] = Json::array();
  for (const Row& r : rows) {
    j["rows"].push_back({{"row", r.row}, {"cell", r.cell}, {"measured", r.measured}, {"settles", r.settles}});
  }
  // The measured settings in the matrix's own spelling and order (fake_cupti_matrix.h).
  std::string cell;
  for (const char* name : {"seal", "records", "buffers", "api", "skew", "hold"}) {
    for (const Row& r : rows) {
      if (r.row == name && r.cell.find('=') != std::string::npos) cell += (cell.empty() ? "" : ",") + r.cell;
    }
  }
  j["cell"] = cell;
  j["counts"] = {{"records", rs.size()}, {"buffers_requested", g_requested.load()}, {"buffers_returned", delivered()}};
  std::ofstream(out_path) << j.dump(1) << "\n";
  return 0;
}
