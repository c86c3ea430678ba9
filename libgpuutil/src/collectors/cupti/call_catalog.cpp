// Callback roles from the CUPTI headers and callback names (see call_catalog.h).
#include "collectors/cupti/call_catalog.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>

#include "gpuutil/range_classify.h"
// The generated parameter structs (generated_cuda_runtime_api_meta.h,
// generated_cuda_meta.h) come with cupti.h.

namespace gpuutil::cupti {

namespace {

#define GPUUTIL_OFF(type, member) static_cast<int16_t>(offsetof(type, member))
#define GPUUTIL_CALL_PARAMS(name, stream, config, config_stream, count, event) \
  {#name, {stream, config, config_stream, count, event}},
const NamedCallParams kTable[] = {
#include "cupti_call_params.inc"
};
#undef GPUUTIL_CALL_PARAMS
#undef GPUUTIL_OFF

// kTable sorted by name, for lookups (built once).
const std::vector<const NamedCallParams*>& sorted() {
  static const std::vector<const NamedCallParams*> s = [] {
    std::vector<const NamedCallParams*> v;
    for (const NamedCallParams& p : kTable) v.push_back(&p);
    std::sort(v.begin(), v.end(), [](const NamedCallParams* a, const NamedCallParams* b) {
      return std::strcmp(a->name, b->name) < 0;
    });
    return v;
  }();
  return s;
}

}  // namespace

CallParams call_params(std::string_view callback_name) {
  const auto& s = sorted();
  const auto it = std::lower_bound(s.begin(), s.end(), callback_name,
                                   [](const NamedCallParams* p, std::string_view n) { return std::string_view(p->name) < n; });
  return it != s.end() && std::string_view((*it)->name) == callback_name ? (*it)->params : CallParams{};
}

const NamedCallParams* call_params_table(size_t* count) {
  *count = sizeof(kTable) / sizeof(kTable[0]);
  return kTable;
}

uint16_t CallRoles::flags_of(std::string_view name, const CallParams& params) {
  const ApiRole role = api_role(name);
  const ApiClass cls = classify_api(name);
  uint16_t f = 0;
  if (role.expects_record) f |= kCallEnqueue;
  if (role.multi_record) f |= kCallGraph;
  if (role.capture == CaptureMark::kBegin) f |= kCallCaptureBegin;
  if (role.capture == CaptureMark::kEnd) f |= kCallCaptureEnd;
  if (cls.kind == HostApiKind::kSynchronize && (cls.sync == SyncKind::kDevice || cls.sync == SyncKind::kContext)) {
    f |= kCallSync;
  }
  if (cls.kind == HostApiKind::kSynchronize && cls.sync == SyncKind::kStream && params.has_stream()) f |= kCallStreamSync;
  if (role.category == ApiCategory::kEventRecord && params.event >= 0) f |= kCallEventRecord;
  if (role.category == ApiCategory::kStreamWait && params.event >= 0) f |= kCallStreamWait;
  if ((f & kCallEnqueue) && params.count >= 0 &&
      (role.category == ApiCategory::kCopy || role.category == ApiCategory::kMemset)) {
    f |= kCallCount;
  }
  if (f != 0 && name.find("_ptsz") != std::string_view::npos) f |= kCallPerThreadStream;
  if (role.traced && !(f & kCallEnqueue)) f |= kCallHostRecord;
  if (role.traced && (f & kCallEnqueue)) f |= kCallApiRecord;
  return f;
}

void CallRoles::build(const CuptiApi& api, bool driver) {
  auto fill = [&](CUpti_CallbackDomain domain, uint32_t count, std::vector<uint16_t>& table, std::vector<uint32_t>& ids,
                  std::vector<CallParams>& params) {
    table.assign(count, 0);
    params.assign(count, CallParams{});
    ids.clear();
    if (api.GetCallbackName == nullptr) return;
    for (uint32_t id = 1; id < count; ++id) {
      const char* name = nullptr;
      if (api.GetCallbackName(domain, id, &name) != CUPTI_SUCCESS || name == nullptr) continue;
      const std::string_view n(name);
      params[id] = call_params(n);
      table[id] = flags_of(n, params[id]);
      if (table[id] != 0) ids.push_back(id);
    }
  };
  fill(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, runtime_, runtime_ids_, runtime_params_);
  if (driver) {
    fill(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, driver_, driver_ids_, driver_params_);
  } else {
    driver_.clear();
    driver_ids_.clear();
    driver_params_.clear();
  }
}

}  // namespace gpuutil::cupti
