// Input pipelines: the waits for each DataLoader's batches, their folds
// over steps and runs, and the periodic stall they may show
// (docs/findings.md, "Input pipeline").
//
// Internal to the analysis core, pure. A batch wait is an outermost
// RangeCategory::kDataloader range of a thread (PyTorch's and gpuutil's
// "enumerate(DataLoader)#<Iter>.__next__"); a window's waits are the ones
// that end in it, so consecutive windows count each batch once.
//
// Contract: a LoaderWaits keeps a reference to its store, which must
// outlive it unchanged; add() only reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuutil/events.h"
#include "gpuutil/report.h"

namespace gpuutil {

class LoaderWaits {
 public:
  explicit LoaderWaits(const EventStore& store);
  // Appends the waits ending in [lo_ns, hi_ns), in end order, to the
  // loaders of `into` (one per (store rank, range name), made as needed).
  void add(int64_t lo_ns, int64_t hi_ns, std::vector<LoaderReport>& into) const;

 private:
  struct Wait {
    int64_t end_ns;
    int64_t dur_ns;
    NameId name;
  };
  const EventStore& store_;
  std::vector<Wait> waits_;  // by end
};

// The loader of `loaders` for (rank, name), appended when missing.
LoaderReport& loader_of(std::vector<LoaderReport>& loaders, int32_t rank, const std::string& name);
// One more batch wait, in order (batch_waits_ns keeps at least the latest
// kBatchWaitsKept, up to twice that; finish_loaders trims it to them).
void add_batch_wait(LoaderReport& loader, int64_t wait_ns);
// Folds `step` (a later report's loader) into `run`: counts and waits
// appended, settings replaced when the later report has any.
void fold_loader(LoaderReport& run, const LoaderReport& step);

// Sorts `loaders` by (rank, name), gives each its settings (from
// `settings` by name, else what the name says: the single-process
// iterator has 0 workers) and its periodic stall.
void finish_loaders(std::vector<LoaderReport>& loaders,
                    const std::vector<std::pair<std::string, LoaderSettings>>& settings);

// Thresholds of periodic_stall (docs/findings.md, "Input pipeline").
inline constexpr int64_t kStallFloorNs = 1'000'000;  // a slow batch waits >= 1 ms
inline constexpr int64_t kStallOverOthers = 5;       // slow batches' median wait >= 5x the others'
inline constexpr int64_t kMaxStallPeriod = 16;
inline constexpr uint64_t kMinStallBatches = 3;

// A periodic stall in the latest kBatchWaitsKept of `waits_ns` (in batch
// order), or nullopt. The waits split in two groups where the groups are
// farthest apart for their sizes (Otsu's between-group variance over the
// waits); slow batches are the upper group's, waiting >= 1 ms. They stall
// periodically with period k (2..16) when k is the most common distance
// between consecutive slow batches and at least 3/4 of the distances are a
// multiple of k (a slow batch that came quickly leaves 2k; each new
// epoch's iterator may shift the phase), there are >= 3 of them and at least
// half of the n/k a period would give, they wait >= half of all the
// waiting, and their median wait is >= 5x the others'.
std::optional<PeriodicStall> periodic_stall(const std::vector<int64_t>& waits_ns);

}  // namespace gpuutil
