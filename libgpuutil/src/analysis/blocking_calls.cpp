// Host API calls that block the host (see blocking_calls.h).
#include "analysis/blocking_calls.h"

namespace gpuutil {

std::vector<uint8_t> blocking_api_calls(const EventStore& store, const CorrelationIndex& launches) {
  std::vector<uint8_t> out(store.api_calls.size(), 0);
  for (size_t i = 0; i < store.api_calls.size(); ++i) {
    const auto k = store.api_calls[i].kind;
    out[i] = k == HostApiKind::kSynchronize || k == HostApiKind::kBlockingCopy;
  }
  for (const auto& a : store.activities) {
    if (a.kind != ActivityKind::kMemcpy || !a.host_pageable || a.correlation_id == 0) continue;
    const uint32_t call = launches.find(a.correlation_id);
    if (call != kNoLaunch && store.api_calls[call].kind == HostApiKind::kAsyncCopy) out[call] = 1;
  }
  return out;
}

std::vector<uint8_t> blocking_api_calls(const EventStore& store) {
  CorrelationIndex launches(store.api_calls);
  for (uint32_t i = 0; i < store.api_calls.size(); ++i) {
    const auto& c = store.api_calls[i];
    if (c.correlation_id != 0 && c.kind == HostApiKind::kAsyncCopy) launches.insert(c.correlation_id, i);
  }
  return blocking_api_calls(store, launches);
}

}  // namespace gpuutil
