// Launches learnt at API exit (see api_callbacks.h).
#include "collectors/cupti/api_callbacks.h"

#include <pthread.h>

#include <cstddef>
#include <cstring>
#include <string_view>

#include "gpuutil/range_classify.h"
// The generated parameter structs CUPTI passes as functionParams
// (generated_cuda_runtime_api_meta.h, generated_cuda_meta.h) come with cupti.h.

namespace gpuutil::cupti {

namespace {

// Copies and memsets whose parameter struct carries the byte count as a
// size_t at offset 16 (generated_cuda_runtime_api_meta.h, generated_cuda_meta.h:
// {dst, src, count, ...} and {ptr, value, count, ...}).
bool count_at_16(std::string_view base) {
  static constexpr std::string_view kNames[] = {
      "cudaMemcpy",        "cudaMemcpyAsync",   "cudaMemset",        "cudaMemsetAsync",  "cuMemcpy",
      "cuMemcpyAsync",     "cuMemcpyHtoD",      "cuMemcpyHtoDAsync", "cuMemcpyDtoH",     "cuMemcpyDtoHAsync",
      "cuMemcpyDtoD",      "cuMemcpyDtoDAsync", "cuMemsetD8",        "cuMemsetD8Async",  "cuMemsetD16",
      "cuMemsetD16Async",  "cuMemsetD32",       "cuMemsetD32Async"};
  for (std::string_view n : kNames) {
    if (n == base) return true;
  }
  return false;
}

struct StreamParamName {
  std::string_view name;
  StreamParam param;
};

constexpr int16_t off(size_t o) { return static_cast<int16_t>(o); }

// The calls whose parameters carry the stream they enqueue on, by their
// exact callback name (a version suffix changes the struct).
#define GPUUTIL_DIRECT(api, field, pt) \
  {#api, {off(offsetof(api##_params, field)), -1, pt}}
#define GPUUTIL_CONFIG(api, config_type, field, pt) \
  {#api, {off(offsetof(api##_params, config)), off(offsetof(config_type, field)), pt}}
const StreamParamName kStreamParams[] = {
    GPUUTIL_DIRECT(cudaLaunchKernel_v7000, stream, false),
    GPUUTIL_DIRECT(cudaLaunchKernel_ptsz_v7000, stream, true),
    GPUUTIL_CONFIG(cudaLaunchKernelExC_v11060, cudaLaunchConfig_t, stream, false),
    GPUUTIL_CONFIG(cudaLaunchKernelExC_ptsz_v11060, cudaLaunchConfig_t, stream, true),
    GPUUTIL_DIRECT(cudaMemcpyAsync_v3020, stream, false),
    GPUUTIL_DIRECT(cudaMemcpyAsync_ptsz_v7000, stream, true),
    GPUUTIL_DIRECT(cudaMemsetAsync_v3020, stream, false),
    GPUUTIL_DIRECT(cudaMemsetAsync_ptsz_v7000, stream, true),
    GPUUTIL_DIRECT(cudaGraphLaunch_v10000, stream, false),
    GPUUTIL_DIRECT(cudaGraphLaunch_ptsz_v10000, stream, true),
    GPUUTIL_DIRECT(cuLaunchKernel, hStream, false),
    GPUUTIL_DIRECT(cuLaunchKernel_ptsz, hStream, true),
    GPUUTIL_CONFIG(cuLaunchKernelEx, CUlaunchConfig, hStream, false),
    GPUUTIL_CONFIG(cuLaunchKernelEx_ptsz, CUlaunchConfig, hStream, true),
    GPUUTIL_DIRECT(cuMemcpyAsync, hStream, false),
    GPUUTIL_DIRECT(cuMemcpyAsync_ptsz, hStream, true),
    GPUUTIL_DIRECT(cuMemcpyHtoDAsync_v2, hStream, false),
    GPUUTIL_DIRECT(cuMemcpyHtoDAsync_v2_ptsz, hStream, true),
    GPUUTIL_DIRECT(cuMemcpyDtoHAsync_v2, hStream, false),
    GPUUTIL_DIRECT(cuMemcpyDtoHAsync_v2_ptsz, hStream, true),
    GPUUTIL_DIRECT(cuMemcpyDtoDAsync_v2, hStream, false),
    GPUUTIL_DIRECT(cuMemcpyDtoDAsync_v2_ptsz, hStream, true),
    GPUUTIL_DIRECT(cuMemsetD8Async, hStream, false),
    GPUUTIL_DIRECT(cuMemsetD8Async_ptsz, hStream, true),
    GPUUTIL_DIRECT(cuMemsetD16Async, hStream, false),
    GPUUTIL_DIRECT(cuMemsetD16Async_ptsz, hStream, true),
    GPUUTIL_DIRECT(cuMemsetD32Async, hStream, false),
    GPUUTIL_DIRECT(cuMemsetD32Async_ptsz, hStream, true),
    GPUUTIL_DIRECT(cuGraphLaunch, hStream, false),
    GPUUTIL_DIRECT(cuGraphLaunch_ptsz, hStream, true),
};
#undef GPUUTIL_DIRECT
#undef GPUUTIL_CONFIG

}  // namespace

StreamParam stream_param(std::string_view callback_name) {
  for (const StreamParamName& p : kStreamParams) {
    if (p.name == callback_name) return p.param;
  }
  return {};
}

bool resolve_stream(const CuptiApi& api, uint8_t kind, uint64_t handle, uint64_t context, uint32_t* stream_id) {
  if (api.GetStreamIdEx == nullptr || (kind != kStreamExplicit && kind != kStreamLegacy)) return false;
  // The legacy default stream is NULL with perThreadStream 0; the context
  // (the call's) says whose, since the drain thread has none current.
  const CUstream stream = kind == kStreamExplicit ? reinterpret_cast<CUstream>(static_cast<uintptr_t>(handle)) : nullptr;
  uint32_t id = 0;
  if (api.GetStreamIdEx(reinterpret_cast<CUcontext>(static_cast<uintptr_t>(context)), stream, 0, &id) != CUPTI_SUCCESS) {
    return false;
  }
  *stream_id = id;
  return true;
}

void CallRoles::build(const CuptiApi& api, bool driver) {
  auto fill = [&](CUpti_CallbackDomain domain, uint32_t count, std::vector<uint8_t>& table, std::vector<uint32_t>& ids,
                  std::vector<StreamParam>& streams) {
    table.assign(count, 0);
    streams.assign(count, StreamParam{});
    ids.clear();
    if (api.GetCallbackName == nullptr) return;
    for (uint32_t id = 1; id < count; ++id) {
      const char* name = nullptr;
      if (api.GetCallbackName(domain, id, &name) != CUPTI_SUCCESS || name == nullptr) continue;
      const std::string_view n(name);
      const ApiRole role = api_role(n);
      const ApiClass cls = classify_api(n);
      uint8_t f = 0;
      if (role.expects_record) f |= kCallEnqueue;
      if (role.graph_launch) f |= kCallGraph;
      if (role.capture == CaptureMark::kBegin) f |= kCallCaptureBegin;
      if (role.capture == CaptureMark::kEnd) f |= kCallCaptureEnd;
      if (cls.kind == HostApiKind::kSynchronize && (cls.sync == SyncKind::kDevice || cls.sync == SyncKind::kContext)) {
        f |= kCallSync;
      }
      if ((f & kCallEnqueue) && count_at_16(strip_api_suffixes(n))) f |= kCallCountAt16;
      if (role.traced && !(f & kCallEnqueue)) f |= kCallHostRecord;
      if (role.traced && (f & kCallEnqueue)) f |= kCallApiRecord;
      table[id] = f;
      if (f & kCallEnqueue) streams[id] = stream_param(n);
      if (f != 0) ids.push_back(id);
    }
  };
  fill(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, runtime_, runtime_ids_, runtime_stream_);
  if (driver) {
    fill(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, driver_, driver_ids_, driver_stream_);
  } else {
    driver_.clear();
    driver_ids_.clear();
    driver_stream_.clear();
  }
}

bool learn_call(const CallRoles& roles, CUpti_CallbackDomain domain, uint32_t cbid, const CUpti_CallbackData& d,
                int64_t now_ns, LearntCall& out) {
  const uint8_t f = roles.flags(domain, cbid);
  if (f == 0) return false;
  // cudaError_t and CUresult are both int-sized enums; 0 is success.
  const bool failed = d.functionReturnValue != nullptr && *static_cast<const int*>(d.functionReturnValue) != 0;
  if (failed && !(f & kCallHostRecord)) return false;  // enqueued nothing (its API record still comes)
  if (!failed && (f & kCallCountAt16) && d.functionParams != nullptr) {
    size_t count = 0;
    std::memcpy(&count, static_cast<const char*>(d.functionParams) + 16, sizeof(count));
    if (count == 0) return false;  // enqueues nothing
  }
  out.flags = failed ? uint8_t(f & kCallHostRecord) : f;
  out.correlation_id = d.correlationId;
  out.context = d.contextUid;
  out.end_ns = now_ns;
  const int64_t start = d.correlationData != nullptr ? static_cast<int64_t>(*d.correlationData) : 0;
  out.start_ns = start > 0 && start <= now_ns ? start : now_ns;
  out.thread = static_cast<uint32_t>(pthread_self());
  out.domain = static_cast<uint8_t>(domain);
  out.cbid = static_cast<uint16_t>(cbid);
  // The stream: the raw handle and the context, resolved later if ever.
  out.stream_kind = kStreamNone;
  out.stream_handle = 0;
  out.context_handle = reinterpret_cast<uintptr_t>(d.context);
  const StreamParam sp = roles.stream(domain, cbid);
  if (sp.offset >= 0 && d.functionParams != nullptr && (out.flags & kCallEnqueue)) {
    const char* at = static_cast<const char*>(d.functionParams) + sp.offset;
    if (sp.indirect >= 0) {
      const char* config = nullptr;
      std::memcpy(&config, at, sizeof(config));
      at = config != nullptr ? config + sp.indirect : nullptr;
    }
    if (at != nullptr) {
      uintptr_t h = 0;
      std::memcpy(&h, at, sizeof(h));
      // NULL is the legacy default stream, or the per-thread one in a _ptsz
      // call; 0x1 and 0x2 name them explicitly (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
      if (h == 0) {
        out.stream_kind = sp.per_thread ? kStreamPerThread : kStreamLegacy;
      } else if (h == reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY)) {
        out.stream_kind = kStreamLegacy;
      } else if (h == reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD)) {
        out.stream_kind = kStreamPerThread;
      } else {
        out.stream_kind = kStreamExplicit;
        out.stream_handle = h;
      }
    }
  }
  out.name[0] = '\0';
  if (d.symbolName != nullptr) {
    size_t i = 0;
    for (; i + 1 < sizeof(out.name) && d.symbolName[i] != '\0'; ++i) out.name[i] = d.symbolName[i];
    out.name[i] = '\0';
  }
  return true;
}

}  // namespace gpuutil::cupti
