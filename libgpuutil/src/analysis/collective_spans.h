// Collective instances of one source, for the cross-rank view
// (gpuutil/cluster.h): what each rank spent in each collective.
//
// From GPU communication kernels (NCCL, RCCL, DeepEP..., and kernels
// launched inside host collective ranges) when the source has any,
// grouped by their stream's ordinal among the source's collective streams
// (one stream per communicator, i.e. per process group and device; stream
// ids differ between ranks, their order of first use does not); else from
// host-side collective execution ranges ("gloo:*", which gloo records on
// its worker thread from start to completion), grouped by name
// ("gloo:all_reduce", "gloo:broadcast"): gloo runs a process group's
// collectives on several worker threads at once, in the order they were
// issued. Host "nccl:*" / "c10d::*" ranges only enqueue and are not
// instances. Each instance keeps its start within the step, so that the
// cross-rank view counts instances that overlap in time once.
//
// Internal to the analysis core; pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpuutil/events.h"
#include "gpuutil/report.h"

namespace gpuutil {

class CollectiveSpans {
 public:
  // `in_collective`: kernels launched inside host collective ranges
  // (HostTimelines::in_collective; null: none).
  explicit CollectiveSpans(const EventStore& s, const std::vector<uint8_t>* in_collective = nullptr);
  // Instances starting in [lo, hi), in start order, with their starts as
  // offsets from lo; at most `cap` (the rest counted in `dropped`).
  RankCollectives in(int64_t lo, int64_t hi, int32_t rank, size_t cap = 4096) const;
  bool empty() const { return spans_.empty(); }

 private:
  struct Span {
    int64_t start_ns;
    int64_t dur_ns;
    uint32_t group;
  };
  std::vector<Span> spans_;  // by start
  std::vector<std::string> groups_;
};

}  // namespace gpuutil
