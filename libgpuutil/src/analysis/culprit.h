// Culprit keys: what an idle culprit names, packed in one integer; and
// which ranges are too coarse to be a culprit (regions).
//
// Internal to the analysis core. Most culprits are a range or call name (a
// NameId of the store). When no range and no Python frame covers the host
// time, the culprit is the thread itself, with the coarse phase it was in
// as context ("## forward ##" never names time by itself): such names do
// not exist in the store's name table, so the key carries (thread, phase)
// and culprit_name() spells it out. Contract: keys compare equal exactly
// when they name the same thing; culprit_name never returns "".
//
// A culprit names the innermost useful unit (docs/accounting.md,
// "Culprits"). An op that only wraps other separately dispatched work is a
// region, not a unit: a compiled graph's `CompiledFunctionBackward` holding
// 404 all-reduces, `Torch-Compiled Region: 0/0`, a scripted `forward`.
// region_flags() finds them; the host timelines leave them out of the ops
// that name queued work (host_timeline.h), so the unit inside names it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpuutil/events.h"

namespace gpuutil {

using CulpritKey = uint64_t;

inline constexpr CulpritKey kThreadCulpritBit = CulpritKey{1} << 63;
// No host events at all for the thread that should explain the gap.
inline constexpr CulpritKey kNoHostCulprit = kThreadCulpritBit | (CulpritKey{0xffffffffu} << 32);

// A copy or memset with no launch record (a live record carries no name,
// an imported one "Memcpy DtoD (Device -> Device)": one key for both, so a
// live step and the same trace imported name the same culprit).
inline constexpr CulpritKey kUnlaunchedTransferCulprit = kThreadCulpritBit | (CulpritKey{0xfffffffeu} << 32);

inline CulpritKey range_culprit(NameId name) { return name; }
// The thread (index into store.threads), with `phase` (kNoName = none).
inline CulpritKey thread_culprit(uint32_t thread, NameId phase) {
  return kThreadCulpritBit | (CulpritKey{thread} << 32) | phase;
}

// The culprit as users read it: the range name, or
// "thread 23695 (python3.8), in ## forward ##, no op or range".
std::string culprit_name(const EventStore& store, CulpritKey key);

// An op is a region when at least this many separately dispatched units
// inside it (ops, host syncs, collectives) each queue device work.
inline constexpr uint32_t kRegionMinUnits = 3;

// True for names of dispatcher operators, "namespace::op" with no space
// ("aten::cross_entropy_loss", "fbgemm::bounds_check_indices",
// "torch::autograd::AccumulateGrad"): the call a user made, whatever it
// runs inside (aten::cross_entropy_loss runs log_softmax and nll_loss), so
// never a region.
bool dispatcher_op_name(std::string_view name);

// One thread's range that may dispatch device work: an op (may be a
// region), a host sync or a collective (units, never regions).
struct UnitRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  NameId name = kNoName;
  bool op = false;
};

// Flags, parallel to `units` (one thread's ranges, any order), the regions
// among them: ops not named like dispatcher operators with at least
// kRegionMinUnits units directly inside them (looking through nested
// regions) that each enclose a call queuing device work. `queue_starts_ns`: start times of
// that thread's calls that queue device work (launches, copies, memsets),
// any order. Pure; O((units + calls) log).
std::vector<uint8_t> region_flags(const std::vector<UnitRange>& units, std::vector<int64_t> queue_starts_ns,
                                  const NameTable& names);

}  // namespace gpuutil
