// Host breakdown: where each training thread's time went during a step.
//
// Internal to the analysis core, pure. For one step window and each host
// thread with ranges in it, every nanosecond of the window goes to exactly
// one HostCategory (dataloader, forward, backward, optimizer, host_sync,
// collective, other), so the categories sum to the window's wall time
// exactly. Where ranges nest, the highest-priority category wins (see
// docs/accounting.md, "Host breakdown"); the range that won a stretch of
// time is its culprit. A thread blocked at the end of backward on the
// collectives it issued there (DDP's reducer over gloo) is in `collective`
// for that stretch (collective_waits.h).
//
// Contract: build a HostBreakdownIndex once per store (it keeps a reference
// to the store, which must outlive it), then call step() per window from
// any thread; both only read the store.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/autograd_phases.h"
#include "analysis/collective_waits.h"
#include "gpuutil/events.h"
#include "gpuutil/report.h"

namespace gpuutil {

// The host category a range category counts as (kOp/kAnnotation/kStep are
// kOther).
HostCategory host_category(RangeCategory c);

class HostBreakdownIndex {
 public:
  explicit HostBreakdownIndex(const EventStore& store);

  struct Item {
    int64_t start_ns;
    int64_t end_ns;
    NameId name;
    HostCategory category;
    bool is_op;    // a framework op: names "other" time and API-level syncs
    bool is_api;   // a blocking runtime call (named by its enclosing op)
  };
  // Working memory step() reuses across calls (one per calling thread); its
  // contents between calls mean nothing.
  struct Scratch {
    using Key = std::tuple<int64_t, int64_t, uint32_t>;  // outermost first
    std::vector<Item> items;
    std::vector<uint32_t> ends;  // item indices by (end_ns, index)
    std::array<std::vector<Key>, kHostCategoryCount + 1> active;  // + ops
    std::vector<uint8_t> credited;
    struct Tally {
      NameId name;
      uint32_t category;
      int64_t ns;
      uint64_t count;
    };
    std::vector<Tally> tally;
    std::vector<uint32_t> slot;  // name * 8 + category -> index in tally + 1
  };

  // One report per thread with at least one range (or blocking API call)
  // overlapping [start_ns, end_ns), in thread order. Each report's
  // breakdown_ns sums to end_ns - start_ns.
  std::vector<HostThreadStepReport> step(int64_t start_ns, int64_t end_ns, size_t top_n) const;
  // The same, reusing `scratch` between calls (same results).
  std::vector<HostThreadStepReport> step(int64_t start_ns, int64_t end_ns, size_t top_n, Scratch& scratch) const;

 private:
  // A store range, a blocking API call, or a wait for collectives the
  // thread issued (collective_waits.h; index into waits_).
  // Or a forward/backward phase of a trace without module ranges
  // (autograd_phases.h; index into phases_).
  enum class Source : uint8_t { kRange, kApi, kWait, kPhase };
  struct Ref {
    uint32_t index;
    Source source;
  };
  Item item(Ref r) const;
  int64_t start_of(Ref r) const {
    switch (r.source) {
      case Source::kApi: return store_.api_calls[r.index].start_ns;
      case Source::kWait: return waits_[r.index].start_ns;
      case Source::kPhase: return phases_[r.index].start_ns;
      case Source::kRange: break;
    }
    return store_.ranges[r.index].start_ns;
  }
  const EventStore& store_;
  std::vector<CollectiveWait> waits_;
  std::vector<AutogradPhase> phases_;
  std::vector<std::vector<Ref>> by_thread_;  // sorted by start_ns
  std::vector<int64_t> max_duration_ns_;     // longest item per thread
};

}  // namespace gpuutil
