// Correlation id -> host API call index, the join between a device record
// and the call that enqueued it.
//
// Internal to the analysis core. CUPTI and Kineto hand out correlation ids
// densely, so a flat table indexed by (id - min) is the fast path; a hash
// map covers sparse ids. Contract: build from the store's calls, insert the
// calls that enqueue work, then find(); find() returns kNoLaunch for an id
// nobody inserted.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "gpuutil/events.h"

namespace gpuutil {

inline constexpr uint32_t kNoLaunch = 0xffffffffu;

class CorrelationIndex {
 public:
  explicit CorrelationIndex(const std::vector<HostApiCall>& calls) {
    uint64_t lo = UINT64_MAX, hi = 0;
    size_t n = 0;
    for (const auto& c : calls) {
      if (c.correlation_id == 0) continue;
      lo = std::min(lo, c.correlation_id);
      hi = std::max(hi, c.correlation_id);
      ++n;
    }
    if (n > 0 && hi - lo < 4 * n + 4096) {
      base_ = lo;
      flat_.assign(hi - lo + 1, kNoLaunch);
    } else {
      sparse_.reserve(n);
    }
  }
  void insert(uint64_t id, uint32_t index) {
    if (!flat_.empty()) {
      flat_[id - base_] = index;
    } else {
      sparse_.emplace(id, index);
    }
  }
  uint32_t find(uint64_t id) const {
    if (!flat_.empty()) return (id >= base_ && id - base_ < flat_.size()) ? flat_[id - base_] : kNoLaunch;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? kNoLaunch : it->second;
  }
  bool empty() const { return flat_.empty() && sparse_.empty(); }

 private:
  uint64_t base_ = 0;
  std::vector<uint32_t> flat_;
  std::unordered_map<uint64_t, uint32_t> sparse_;
};

}  // namespace gpuutil
