// Set operations on sorted disjoint interval lists (see intervals.h).
#include "analysis/intervals.h"

#include <algorithm>

namespace gpuutil {

IntervalList union_of(std::vector<Interval> raw) {
  raw.erase(std::remove_if(raw.begin(), raw.end(), [](const Interval& i) { return i.end_ns <= i.start_ns; }),
            raw.end());
  if (!std::is_sorted(raw.begin(), raw.end(),
                      [](const Interval& x, const Interval& y) { return x.start_ns < y.start_ns; })) {
    std::sort(raw.begin(), raw.end(), [](const Interval& x, const Interval& y) { return x.start_ns < y.start_ns; });
  }
  // Compact in place: no second allocation.
  size_t n = 0;
  for (size_t k = 0; k < raw.size(); ++k) {
    if (n > 0 && raw[k].start_ns <= raw[n - 1].end_ns) {
      raw[n - 1].end_ns = std::max(raw[n - 1].end_ns, raw[k].end_ns);
    } else {
      raw[n++] = raw[k];
    }
  }
  raw.resize(n);
  return raw;
}

IntervalList union_of(const IntervalList& a, const IntervalList& b) {
  std::vector<Interval> all;
  all.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(all),
             [](const Interval& x, const Interval& y) { return x.start_ns < y.start_ns; });
  return union_of(std::move(all));
}

IntervalList difference(const IntervalList& a, const IntervalList& b) {
  IntervalList out;
  size_t j = 0;
  for (const auto& x : a) {
    int64_t cur = x.start_ns;
    while (j < b.size() && b[j].end_ns <= cur) ++j;
    size_t k = j;
    while (k < b.size() && b[k].start_ns < x.end_ns) {
      if (b[k].start_ns > cur) out.push_back({cur, b[k].start_ns});
      cur = std::max(cur, b[k].end_ns);
      if (cur >= x.end_ns) break;
      ++k;
    }
    if (cur < x.end_ns) out.push_back({cur, x.end_ns});
  }
  return out;
}

IntervalList intersection(const IntervalList& a, const IntervalList& b) {
  IntervalList out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].start_ns, b[j].start_ns);
    const int64_t hi = std::min(a[i].end_ns, b[j].end_ns);
    if (lo < hi) out.push_back({lo, hi});
    if (a[i].end_ns < b[j].end_ns) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

size_t first_ending_after(const IntervalList& list, int64_t t_ns) {
  return static_cast<size_t>(
      std::upper_bound(list.begin(), list.end(), t_ns, [](int64_t t, const Interval& i) { return t < i.end_ns; }) -
      list.begin());
}

long containing(const IntervalList& list, int64_t t_ns) {
  const size_t i = first_ending_after(list, t_ns);
  if (i < list.size() && list[i].start_ns <= t_ns) return static_cast<long>(i);
  return -1;
}

int64_t covered_ns(const IntervalList& list, int64_t lo_ns, int64_t hi_ns) {
  int64_t total = 0;
  for (size_t i = first_ending_after(list, lo_ns); i < list.size() && list[i].start_ns < hi_ns; ++i) {
    total += std::min(list[i].end_ns, hi_ns) - std::max(list[i].start_ns, lo_ns);
  }
  return total;
}

}  // namespace gpuutil
