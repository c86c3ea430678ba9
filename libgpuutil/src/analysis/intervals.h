// Sorted disjoint interval lists and the set operations the accounting needs.
//
// Internal to the analysis core. An IntervalList is sorted by start, with
// non-overlapping, non-touching, non-empty half-open intervals. All lengths
// are integer nanoseconds, so sums of disjoint pieces are exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuutil {

struct Interval {
  int64_t start_ns;
  int64_t end_ns;
};
using IntervalList = std::vector<Interval>;

// Sorts `raw` (any order, may overlap, may contain empty intervals) and
// returns the union as an IntervalList.
IntervalList union_of(std::vector<Interval> raw);
// a ∪ b, a \ b and a ∩ b for IntervalLists; linear time.
IntervalList union_of(const IntervalList& a, const IntervalList& b);
IntervalList difference(const IntervalList& a, const IntervalList& b);
IntervalList intersection(const IntervalList& a, const IntervalList& b);

// Total length of `list` inside [lo_ns, hi_ns).
int64_t covered_ns(const IntervalList& list, int64_t lo_ns, int64_t hi_ns);
// Index of the first interval with end_ns > t_ns (list.size() if none).
size_t first_ending_after(const IntervalList& list, int64_t t_ns);
// Index of the interval containing t_ns (start <= t < end), or -1.
long containing(const IntervalList& list, int64_t t_ns);

}  // namespace gpuutil
