// Other CUPTI clients in the same process, for coexistence tests:
//  - a second activity client that does what Kineto does under
//    torch.profiler: registers its own buffer callbacks (silently replacing
//    the current ones), enables its kinds, and at its stop disables them and
//    force-flushes; its completion callback rejects buffers it did not
//    allocate ("bufferCompleted called with unknown buffer") without
//    touching them;
//  - another tool holding the CUPTI subscription (Nsight Systems, DCGM).
#include <cstdlib>
#include <set>

#include "fake_state.h"

using namespace fake;

extern "C" {
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc,
                                                    CUpti_BuffersCallbackCompleteFunc);
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind);
CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind);
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t);
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**);
}

namespace {

constexpr size_t kBufferBytes = 1 << 20;
const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_RUNTIME,
                                     CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

std::mutex g_mu;
std::set<uint8_t*> g_mine;
fake_cupti_client_stats g_stats{};

void CUPTIAPI second_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  auto* b = static_cast<uint8_t*>(std::malloc(kBufferBytes));
  std::lock_guard<std::mutex> lock(g_mu);
  g_mine.insert(b);
  *buffer = b;
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI second_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_mine.erase(buffer) == 0) {
    ++g_stats.foreign_buffers_rejected;  // not ours: left alone
    return;
  }
  ++g_stats.buffers;
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    switch (r->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        ++g_stats.kernels;
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
        if (int64_t(k->end) > g_stats.last_record_end_ns) g_stats.last_record_end_ns = int64_t(k->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: ++g_stats.memcpys; break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: ++g_stats.api_records; break;
      default: break;
    }
  }
  std::free(buffer);
}

}  // namespace

extern "C" {

void fake_cupti_second_client_start(void) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_stats = fake_cupti_client_stats{};
  }
  cuptiActivityRegisterCallbacks(&second_requested, &second_completed);
  for (CUpti_ActivityKind k : kKinds) cuptiActivityEnable(k);
}

fake_cupti_client_stats fake_cupti_second_client_stop(void) {
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mu);
  return g_stats;
}

void fake_cupti_other_subscriber(const char* name) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.other_subscriber = name ? name : "";
}

}  // extern "C"
