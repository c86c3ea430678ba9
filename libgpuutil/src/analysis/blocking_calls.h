// Which host API calls block the calling thread until the device is done:
// synchronizations, synchronous copies, and async copies whose host side is
// pageable memory (the driver stages those through a pinned buffer and
// returns only when the host side is done, docs/accounting.md).
//
// Internal to the analysis core; a pure function of the store. The pageable
// test joins each copy call to its memcpy record by correlation id, since
// only the record knows the memory kinds.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/correlation_index.h"
#include "gpuutil/events.h"

namespace gpuutil {

// One entry per store.api_calls, 1 = blocks the host. `launches` maps
// correlation ids to the calls that enqueue work.
std::vector<uint8_t> blocking_api_calls(const EventStore& store, const CorrelationIndex& launches);

// The same, building the correlation join itself.
std::vector<uint8_t> blocking_api_calls(const EventStore& store);

}  // namespace gpuutil
