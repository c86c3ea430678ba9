// Run totals of a live session: what `prof.summary()` reports over every
// step, not only the steps whose reports are still kept in memory.
//
// Pure accumulation over step reports (no I/O, no locks): the Session adds
// each report it produces, under its own lock.
//
// Contract:
// - Sums are exact integer ns: for every device, sum(breakdown) == wall_ns,
//   and for every host thread, sum(breakdown_ns) == wall_ns, because every
//   added step report satisfies the same identities.
// - Memory is bounded by the number of distinct devices, host threads and
//   finding ids, never by the number of steps.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "gpuutil/report.h"

namespace gpuutil {

struct DeviceTotals {
  std::string name;
  int64_t wall_ns = 0;
  Breakdown breakdown;
};

struct HostThreadTotals {
  std::string name;
  uint64_t steps = 0;
  int64_t wall_ns = 0;
  std::array<int64_t, kHostCategoryCount> breakdown_ns{};
};

struct FindingTotals {
  std::string title;
  std::string fix;
  int64_t recoverable_ns = 0;
  uint64_t steps = 0;  // reports in which the finding appeared
};

struct RunTotals {
  uint64_t steps = 0;
  int64_t steps_wall_ns = 0;
  std::map<std::pair<int32_t, int32_t>, DeviceTotals> devices;       // (rank, device)
  std::map<std::pair<int32_t, int64_t>, HostThreadTotals> threads;   // (rank, tid)
  std::map<std::string, FindingTotals> findings;                     // by finding id

  // Adds every step, device, host thread and finding of `report`.
  void add(const Report& report);
};

}  // namespace gpuutil
