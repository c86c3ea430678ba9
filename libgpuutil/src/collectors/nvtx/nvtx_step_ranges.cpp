// gpuutil's step ranges in the "gpuutil" NVTX domain (visible in Nsight
// Systems; skipped by our own collector). Header-only NVTX: when no tool is
// injected every call is a cheap no-op.
#include <cstdio>

#include "collectors/nvtx/nvtx_collector.h"
#include "nvtx3/nvToolsExt.h"

namespace gpuutil::nvtx {

namespace {
nvtxDomainHandle_t domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("gpuutil");
  return d;
}
}  // namespace

void push_step_range(int64_t step) {
  char name[40];
  std::snprintf(name, sizeof(name), "gpuutil.step#%lld", static_cast<long long>(step));
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  nvtxDomainRangePushEx(domain(), &a);
}

void pop_step_range() { nvtxDomainRangePop(domain()); }

}  // namespace gpuutil::nvtx
