// Spelling out culprit keys, and finding regions (see culprit.h).
#include "analysis/culprit.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace gpuutil {

std::string culprit_name(const EventStore& store, CulpritKey key) {
  if ((key & kThreadCulpritBit) == 0) {
    const std::string_view name = store.names.view(static_cast<NameId>(key));
    return name.empty() ? "(no name in the trace)" : std::string(name);
  }
  if (key == kNoHostCulprit) return "(no host events for the launching thread)";
  if (key == kUnlaunchedTransferCulprit) return "(a copy or memset with no launch record)";
  const auto thread = static_cast<uint32_t>((key >> 32) & 0x7fffffffu);
  const auto phase = static_cast<NameId>(key & 0xffffffffu);
  std::string out;
  if (thread < store.threads.size() && !store.threads[thread].name.empty()) {
    out = store.threads[thread].name;
  } else if (thread < store.threads.size()) {
    out = "thread " + std::to_string(store.threads[thread].display_tid());
  } else {
    out = "thread #" + std::to_string(thread);
  }
  if (phase != kNoName) out += ", in " + std::string(store.names.view(phase));
  out += ", no op or range";
  return out;
}

bool dispatcher_op_name(std::string_view name) {
  const size_t sep = name.find("::");
  return sep != std::string_view::npos && sep > 0 && sep + 2 < name.size() &&
         name.find(' ') == std::string_view::npos;
}

std::vector<uint8_t> region_flags(const std::vector<UnitRange>& units, std::vector<int64_t> queue_starts_ns,
                                  const NameTable& names) {
  std::vector<uint8_t> region(units.size(), 0);
  if (units.empty() || queue_starts_ns.empty()) return region;
  std::sort(queue_starts_ns.begin(), queue_starts_ns.end());
  std::vector<uint32_t> order(units.size());
  std::iota(order.begin(), order.end(), 0u);
  // Outermost first: earliest start, then latest end.
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const UnitRange& x = units[a];
    const UnitRange& y = units[b];
    return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;
  });
  struct Open {
    uint32_t unit;
    uint32_t children = 0;  // units inside (through regions) that queue work
    bool queues = false;    // it, or something inside it, queues work
  };
  std::vector<Open> stack;
  // Closes the innermost open unit: it counts for its parent when it queues
  // work (a region counts as the units inside it).
  const auto close = [&]() {
    const Open done = stack.back();
    stack.pop_back();
    const UnitRange& u = units[done.unit];
    const bool is_region = u.op && done.children >= kRegionMinUnits && !dispatcher_op_name(names.view(u.name));
    region[done.unit] = is_region ? 1 : 0;
    if (stack.empty() || !done.queues) return;
    stack.back().queues = true;
    stack.back().children += is_region ? done.children : 1;
  };
  const auto close_until = [&](int64_t t_ns) {  // every open unit that ended by t
    while (!stack.empty() && units[stack.back().unit].end_ns <= t_ns) close();
  };
  size_t call = 0;
  const auto calls_before = [&](int64_t t_ns) {  // queue calls starting before t
    for (; call < queue_starts_ns.size() && queue_starts_ns[call] < t_ns; ++call) {
      close_until(queue_starts_ns[call]);
      if (!stack.empty()) stack.back().queues = true;
    }
  };
  for (uint32_t i : order) {
    const UnitRange& u = units[i];
    if (u.end_ns <= u.start_ns) continue;
    calls_before(u.start_ns);
    close_until(u.start_ns);
    // An improperly nested unit (starting inside the open one, ending after
    // it) is treated as nested: it closes when its parent does at the latest.
    stack.push_back({i});
  }
  calls_before(std::numeric_limits<int64_t>::max());
  while (!stack.empty()) close();
  return region;
}

}  // namespace gpuutil
