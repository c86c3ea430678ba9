// Streams and contexts of the fake CUPTI as the application sees them:
// handles, the parameter structs the callback API passes, and
// cuptiGetStreamIdEx.
//
// The fake's device work names streams by CUPTI's stream id (what activity
// records carry). A real application names them by handle (CUstream), and
// CUPTI's callback API passes that handle in the call's generated *_params
// struct (generated_cuda_runtime_api_meta.h, generated_cuda_meta.h);
// cuptiGetStreamIdEx turns a handle into the id. Here:
//  - stream id 7 is every context's legacy default stream (as the fake
//    driver reports it): NULL in a call, or CU_STREAM_LEGACY in a _ptsz call;
//  - each thread has a per-thread default stream with an id of its own
//    (fake_cupti_per_thread_stream): NULL in a _ptsz call,
//    CU_STREAM_PER_THREAD otherwise; cuptiGetStreamIdEx resolves a per-thread
//    handle to the *calling* thread's stream, as CUDA does;
//  - any other id has one opaque handle per (device, id), made when first
//    used (announced to subscribers with CUPTI_CBID_RESOURCE_STREAM_CREATED,
//    on the creating thread) and stable until fake_cupti_destroy_stream
//    (CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING first); a destroyed
//    stream's handle is recycled for the next stream made, as a real
//    allocator may, so a handle kept past its stream names another one;
//  - each device has one context handle (CUpti_CallbackData::context), and
//    cuptiGetContextId gives device + 1 (the activity records' contextId).
//  - cuptiGetStreamIdEx on a destroyed stream's handle is counted
//    (stats.stream_ids_after_destroy): real CUPTI promises nothing for it.
// The parameters carry the call's stream at its real offset for the launch,
// copy, memset and graph-launch calls gpuutil reads, with the byte count of
// copies and memsets; every other call gets the byte count at offset 16.
#include <cupti.h>  // with the generated *_params structs

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "fake_state.h"

namespace fake {

namespace {

struct StreamObject {
  uint32_t magic;
  uint32_t device;
  uint32_t id;
};
constexpr uint32_t kStreamMagic = 0x5354524d;  // "STRM"
constexpr uint32_t kDeadMagic = 0x44454144;    // "DEAD": destroyed, waiting to be recycled
constexpr uint32_t kLegacyStream = 7;
constexpr uint32_t kContexts = 16;

struct ContextObject {
  uint32_t device;
};
ContextObject g_contexts[kContexts] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};

std::mutex g_streams_mu;
// Live streams by (device, id); objects are never freed (clients may keep
// handles), destroyed ones wait in g_free for reuse.
std::map<std::pair<uint32_t, uint32_t>, StreamObject*>& streams() {
  static auto* m = new std::map<std::pair<uint32_t, uint32_t>, StreamObject*>();
  return *m;
}
std::vector<StreamObject*>& free_objects() {
  static auto* v = new std::vector<StreamObject*>();
  return *v;
}
std::atomic<uint64_t> g_stream_generation{0};  // bumped at each destroy (per-thread caches go stale)

std::atomic<uint32_t> g_next_per_thread{900};

bool is_ptsz(const char* name) { return name != nullptr && std::string_view(name).find("_ptsz") != std::string_view::npos; }

// Fills the generated struct of `name` when it is one gpuutil reads the stream from.
template <typename P>
void put(unsigned char* out, const P& p) {
  static_assert(sizeof(P) <= kParamsBytes, "params buffer too small");
  std::memcpy(out, &p, sizeof(P));
}

// Which generated struct a callback's parameters are.
enum class Layout : uint8_t {
  kCount16, kLaunch, kLaunchExC, kMemcpy, kMemset, kGraph, kCuLaunch, kCuLaunchEx, kCuMemcpy, kCuMemcpyV2, kCuMemset,
  kCuGraph
};

Layout layout_by_name(std::string_view n) {
  auto is = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view x : names) {
      if (n == x) return true;
    }
    return false;
  };
  if (is({"cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000"})) return Layout::kLaunch;
  if (is({"cudaLaunchKernelExC_v11060", "cudaLaunchKernelExC_ptsz_v11060"})) return Layout::kLaunchExC;
  if (is({"cudaMemcpyAsync_v3020", "cudaMemcpyAsync_ptsz_v7000"})) return Layout::kMemcpy;
  if (is({"cudaMemsetAsync_v3020", "cudaMemsetAsync_ptsz_v7000"})) return Layout::kMemset;
  if (is({"cudaGraphLaunch_v10000", "cudaGraphLaunch_ptsz_v10000"})) return Layout::kGraph;
  if (is({"cuLaunchKernel", "cuLaunchKernel_ptsz"})) return Layout::kCuLaunch;
  if (is({"cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"})) return Layout::kCuLaunchEx;
  if (is({"cuMemcpyAsync", "cuMemcpyAsync_ptsz"})) return Layout::kCuMemcpy;
  if (is({"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz",
          "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz"})) {
    return Layout::kCuMemcpyV2;  // the three share one layout
  }
  if (is({"cuMemsetD8Async", "cuMemsetD8Async_ptsz", "cuMemsetD16Async", "cuMemsetD16Async_ptsz", "cuMemsetD32Async",
          "cuMemsetD32Async_ptsz"})) {
    return Layout::kCuMemset;  // the three share one layout
  }
  if (is({"cuGraphLaunch", "cuGraphLaunch_ptsz"})) return Layout::kCuGraph;
  return Layout::kCount16;
}

struct CallParams {
  Layout layout = Layout::kCount16;
  bool ptsz = false;  // a _ptsz variant: NULL is the per-thread default stream
};

// By callback id, built once (a launch pays no name lookup).
CallParams params_of(int domain, uint32_t cbid) {
  static const auto* tables = [] {
    auto* t = new std::vector<CallParams>[2];
    for (int d = 0; d < 2; ++d) {
      const auto dom = d == 0 ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
      t[d].assign(callback_id_count(dom), CallParams{});
      for (uint32_t id = 0; id < t[d].size(); ++id) {
        const char* n = callback_name(dom, id);
        if (n != nullptr) t[d][id] = {layout_by_name(n), is_ptsz(n)};
      }
    }
    return t;
  }();
  const auto& t = tables[domain == CUPTI_CB_DOMAIN_RUNTIME_API ? 0 : 1];
  return cbid < t.size() ? t[cbid] : CallParams{};
}

}  // namespace

CUstream stream_handle(uint32_t device, uint32_t id) {
  // Launches come in runs on one stream: the last answer is kept per thread.
  thread_local uint32_t last_device = UINT32_MAX, last_id = UINT32_MAX;
  thread_local uint64_t last_generation = UINT64_MAX;
  thread_local CUstream last = nullptr;
  const uint64_t generation = g_stream_generation.load();
  if (device == last_device && id == last_id && generation == last_generation) return last;
  StreamObject* created = nullptr;
  CUstream h;
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    StreamObject*& slot = streams()[{device, id}];
    if (slot == nullptr) {
      if (!free_objects().empty()) {
        slot = free_objects().back();  // a recycled handle
        free_objects().pop_back();
      } else {
        slot = new StreamObject{};
      }
      *slot = StreamObject{kStreamMagic, device, id};
      created = slot;
    }
    h = reinterpret_cast<CUstream>(slot);
  }
  last_device = device;
  last_id = id;
  last_generation = generation;
  last = h;
  if (created != nullptr) resource_callback(CUPTI_CBID_RESOURCE_STREAM_CREATED, context_handle(device), h);
  return h;
}

uint32_t stream_id_of(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY) return kLegacyStream;
  if (s == CU_STREAM_PER_THREAD) return fake_cupti_per_thread_stream();
  return reinterpret_cast<const StreamObject*>(s)->id;
}

CUcontext context_handle(uint32_t device) { return reinterpret_cast<CUcontext>(&g_contexts[device % kContexts]); }

void build_params(const fake_cupti_call* call, unsigned char* out, CUcontext* context) {
  std::memset(out, 0, kParamsBytes);
  const bool has_work = call->n_work > 0 && call->work != nullptr;
  const uint32_t device = has_work ? call->work[0].device : call->sync_device;
  *context = context_handle(device);
  const size_t count = has_work ? size_t(call->work[0].bytes) : 0;
  std::memcpy(out + 16, &count, sizeof(count));  // every other call: the byte count at offset 16
  if (!has_work) return;
  const CallParams cp = params_of(call->domain, call->cbid);
  const Layout layout = cp.layout;
  if (layout == Layout::kCount16) return;
  const bool ptsz = cp.ptsz;
  const uint32_t id = call->work[0].stream;
  CUstream h;
  if (id == kLegacyStream) {
    h = ptsz ? CU_STREAM_LEGACY : nullptr;
  } else if (id == fake_cupti_per_thread_stream()) {
    h = ptsz ? nullptr : CU_STREAM_PER_THREAD;
  } else {
    h = stream_handle(device, id);
  }
  const cudaStream_t rh = reinterpret_cast<cudaStream_t>(h);
  // The launch config of the Ex calls lives as long as the call: in the
  // buffer, past the struct that points at it.
  unsigned char* config_at = out + kParamsBytes / 2;
  if (layout == Layout::kLaunch) {
    cudaLaunchKernel_v7000_params p{};
    p.stream = rh;
    put(out, p);
  } else if (layout == Layout::kLaunchExC) {
    cudaLaunchConfig_t c{};
    c.stream = rh;
    put(config_at, c);
    cudaLaunchKernelExC_v11060_params p{};
    p.config = reinterpret_cast<const cudaLaunchConfig_t*>(config_at);
    put(out, p);
  } else if (layout == Layout::kMemcpy) {
    cudaMemcpyAsync_v3020_params p{};
    p.count = count;
    p.stream = rh;
    put(out, p);
  } else if (layout == Layout::kMemset) {
    cudaMemsetAsync_v3020_params p{};
    p.count = count;
    p.stream = rh;
    put(out, p);
  } else if (layout == Layout::kGraph) {
    cudaGraphLaunch_v10000_params p{};
    p.stream = rh;
    put(out, p);
  } else if (layout == Layout::kCuLaunch) {
    cuLaunchKernel_params p{};
    p.hStream = h;
    put(out, p);
  } else if (layout == Layout::kCuLaunchEx) {
    CUlaunchConfig c{};
    c.hStream = h;
    put(config_at, c);
    cuLaunchKernelEx_params p{};
    p.config = reinterpret_cast<const CUlaunchConfig*>(config_at);
    put(out, p);
  } else if (layout == Layout::kCuMemcpy) {
    cuMemcpyAsync_params p{};
    p.ByteCount = count;
    p.hStream = h;
    put(out, p);
  } else if (layout == Layout::kCuMemcpyV2) {
    cuMemcpyDtoDAsync_v2_params p{};  // the three share one layout
    p.ByteCount = count;
    p.hStream = h;
    put(out, p);
  } else if (layout == Layout::kCuMemset) {
    cuMemsetD32Async_params p{};  // the three share one layout
    p.N = count;
    p.hStream = h;
    put(out, p);
  } else if (layout == Layout::kCuGraph) {
    cuGraphLaunch_params p{};
    p.hStream = h;
    put(out, p);
  }
}

}  // namespace fake

using namespace fake;

extern "C" {

uint32_t fake_cupti_per_thread_stream(void) {
  thread_local uint32_t id = g_next_per_thread.fetch_add(1);
  return id;
}

CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t per_thread, uint32_t* stream_id) {
  if (stream_id == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (stream == CU_STREAM_LEGACY || (stream == nullptr && per_thread == 0)) {
    *stream_id = kLegacyStream;
    return CUPTI_SUCCESS;
  }
  if (stream == CU_STREAM_PER_THREAD || stream == nullptr) {
    *stream_id = fake_cupti_per_thread_stream();  // the calling thread's, as CUDA resolves it
    return CUPTI_SUCCESS;
  }
  const auto* s = reinterpret_cast<const StreamObject*>(stream);
  uint32_t device, id;
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    if (s->magic == kDeadMagic) {
      State& state = st();
      std::lock_guard<std::mutex> state_lock(state.mu);
      ++state.stats.stream_ids_after_destroy;  // undefined in CUDA: counted here
      return CUPTI_ERROR_INVALID_STREAM;
    }
    const auto it = streams().find({s->device, s->id});
    if (it == streams().end() || it->second != s) return CUPTI_ERROR_INVALID_STREAM;
    device = s->device;
    id = s->id;
  }
  if (context != nullptr && context != context_handle(device)) return CUPTI_ERROR_INVALID_STREAM;
  *stream_id = id;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t* context_id) {
  if (context == nullptr || context_id == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  for (uint32_t d = 0; d < kContexts; ++d) {
    if (context == context_handle(d)) {
      *context_id = d + 1;
      return CUPTI_SUCCESS;
    }
  }
  return CUPTI_ERROR_INVALID_CONTEXT;
}

void* fake_cupti_stream_handle(uint32_t device, uint32_t id) { return stream_handle(device, id); }

void fake_cupti_destroy_stream(uint32_t device, uint32_t id) {
  CUstream h = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    const auto it = streams().find({device, id});
    if (it == streams().end()) return;
    h = reinterpret_cast<CUstream>(it->second);
  }
  resource_callback(CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, context_handle(device), h);
  std::lock_guard<std::mutex> lock(g_streams_mu);
  const auto it = streams().find({device, id});
  if (it == streams().end()) return;
  it->second->magic = kDeadMagic;
  free_objects().push_back(it->second);
  streams().erase(it);
  g_stream_generation.fetch_add(1);
}

}  // extern "C"
