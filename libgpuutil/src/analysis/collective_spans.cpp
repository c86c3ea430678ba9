// Collective instances of one source (collective_spans.h).
#include "analysis/collective_spans.h"

#include "analysis/device_timeline.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>

namespace gpuutil {

CollectiveSpans::CollectiveSpans(const EventStore& s, const std::vector<uint8_t>* in_collective) {
  std::map<std::pair<int32_t, int32_t>, int64_t> first_use;  // (device, stream) -> first start
  for (uint32_t i = 0; i < s.activities.size(); ++i) {
    const auto& a = s.activities[i];
    if (!is_communication_work(s, i, in_collective) || a.end_ns <= a.start_ns) continue;
    auto [it, inserted] = first_use.try_emplace({a.device, a.stream}, a.start_ns);
    if (!inserted) it->second = std::min(it->second, a.start_ns);
  }
  if (!first_use.empty()) {
    std::vector<std::pair<int64_t, std::pair<int32_t, int32_t>>> order;
    for (const auto& [key, t] : first_use) order.emplace_back(t, key);
    std::sort(order.begin(), order.end());
    std::map<std::pair<int32_t, int32_t>, uint32_t> ordinal;
    for (const auto& [t, key] : order) {
      ordinal[key] = static_cast<uint32_t>(groups_.size());
      groups_.push_back("gpu stream #" + std::to_string(groups_.size()));
    }
    for (uint32_t i = 0; i < s.activities.size(); ++i) {
      const auto& a = s.activities[i];
      if (!is_communication_work(s, i, in_collective) || a.end_ns <= a.start_ns) continue;
      spans_.push_back({a.start_ns, a.end_ns - a.start_ns, ordinal[{a.device, a.stream}]});
    }
  } else {
    std::map<std::string_view, uint32_t> by_name;
    for (const auto& r : s.ranges) {
      if (r.category != RangeCategory::kCollective || r.end_ns < r.start_ns) continue;
      const std::string_view name = s.names.view(r.name);
      if (name.substr(0, 5) != "gloo:") continue;
      auto [it, inserted] = by_name.try_emplace(name, static_cast<uint32_t>(groups_.size()));
      if (inserted) groups_.emplace_back(name);
      spans_.push_back({r.start_ns, r.end_ns - r.start_ns, it->second});
    }
  }
  std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.group < b.group;
  });
}

RankCollectives CollectiveSpans::in(int64_t lo, int64_t hi, int32_t rank, size_t cap) const {
  RankCollectives out;
  out.rank = rank;
  auto it = std::lower_bound(spans_.begin(), spans_.end(), lo,
                             [](const Span& s, int64_t t) { return s.start_ns < t; });
  for (; it != spans_.end() && it->start_ns < hi; ++it) {
    if (out.samples.size() >= cap) {
      ++out.dropped;
      continue;
    }
    out.samples.push_back({groups_[it->group], it->dur_ns, it->start_ns - lo});
  }
  return out;
}

}  // namespace gpuutil
