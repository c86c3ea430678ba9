// Culprit keys: what an idle culprit names, packed in one integer.
//
// Internal to the analysis core. Most culprits are a range or call name (a
// NameId of the store). When no range and no Python frame covers the host
// time, the culprit is the thread itself, with the coarse phase it was in
// as context ("## forward ##" never names time by itself): such names do
// not exist in the store's name table, so the key carries (thread, phase)
// and culprit_name() spells it out. Contract: keys compare equal exactly
// when they name the same thing; culprit_name never returns "".
#pragma once

#include <cstdint>
#include <string>

#include "gpuutil/events.h"

namespace gpuutil {

using CulpritKey = uint64_t;

inline constexpr CulpritKey kThreadCulpritBit = CulpritKey{1} << 63;
// No host events at all for the thread that should explain the gap.
inline constexpr CulpritKey kNoHostCulprit = kThreadCulpritBit | (CulpritKey{0xffffffffu} << 32);

inline CulpritKey range_culprit(NameId name) { return name; }
// The thread (index into store.threads), with `phase` (kNoName = none).
inline CulpritKey thread_culprit(uint32_t thread, NameId phase) {
  return kThreadCulpritBit | (CulpritKey{thread} << 32) | phase;
}

// The culprit as users read it: the range name, or
// "thread 23695 (python3.8), in ## forward ##, no inner range".
std::string culprit_name(const EventStore& store, CulpritKey key);

}  // namespace gpuutil
