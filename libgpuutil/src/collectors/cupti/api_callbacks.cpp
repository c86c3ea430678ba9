// Launches learnt at API exit (see api_callbacks.h).
#include "collectors/cupti/api_callbacks.h"

#include <pthread.h>

#include <cstring>
#include <string_view>

#include "gpuutil/range_classify.h"

namespace gpuutil::cupti {

namespace {

// "cudaMemcpyAsync_ptsz_v7000" -> "cudaMemcpyAsync"; "cuMemcpyHtoDAsync_v2" -> "cuMemcpyHtoDAsync".
std::string_view base_name(std::string_view n) {
  for (;;) {
    const size_t u = n.rfind('_');
    if (u == std::string_view::npos) return n;
    const std::string_view tail = n.substr(u + 1);
    const bool version = tail.size() >= 2 && tail[0] == 'v' && tail[1] >= '0' && tail[1] <= '9';
    if (!version && tail != "ptsz" && tail != "ptds") return n;
    n = n.substr(0, u);
  }
}

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

}  // namespace

void CallRoles::build(const CuptiApi& api, bool driver) {
  auto fill = [&](CUpti_CallbackDomain domain, uint32_t count, std::vector<uint8_t>& table, std::vector<uint32_t>& ids) {
    table.assign(count, 0);
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
      if ((f & kCallEnqueue) && count_at_16(base_name(n))) f |= kCallCountAt16;
      if (role.traced && !(f & kCallEnqueue)) f |= kCallHostRecord;
      table[id] = f;
      if (f != 0) ids.push_back(id);
    }
  };
  fill(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, runtime_, runtime_ids_);
  if (driver) {
    fill(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, driver_, driver_ids_);
  } else {
    driver_.clear();
    driver_ids_.clear();
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
  out.name[0] = '\0';
  if (d.symbolName != nullptr) {
    size_t i = 0;
    for (; i + 1 < sizeof(out.name) && d.symbolName[i] != '\0'; ++i) out.name[i] = d.symbolName[i];
    out.name[i] = '\0';
  }
  return true;
}

}  // namespace gpuutil::cupti
