// The cross-rank view: which rank is slow, why, and what it costs the others
// (docs/distributed.md).
//
// Each rank contributes one compact RankStep per finished step (built from
// its StepReport by rank_step_of(); live ranks send them through the job's
// c10d store, offline analysis takes them from the trace files). The
// ClusterAssembler matches the ranks' steps by step number and their
// collective instances by order within each group (a process group's
// stream, or one kind of gloo collective), splits every rank's time in
// collectives into transfer (the minimum across ranks for that instance)
// and wait (the rest, at the instance's start), and scores ranks by their
// own time per step (wall minus collective wait). Instances of one rank
// that run at the same time (several streams, gloo's worker threads) are
// counted once: a rank waits while it is in collectives and none of them
// moves data (the union of its instances' waits less the union of their
// transfers) inside its step window, so 0 <= wait <= wall and own time
// >= 0. It never
// compares timestamps across ranks, so it needs no synchronised clocks;
// clock offsets, when a rank measured one against the leader, only place
// step starts on a common timeline (skew).
//
// Pure and vendor-free: no I/O, no threads, no globals. Memory is bounded:
// each rank keeps at most `window_steps` unfinished steps, plus fixed-size
// run totals and the last `window_steps` own-time samples for its medians.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuutil/report.h"

namespace gpuutil {

// What one rank publishes about one step. Contract: wall_ns >= 0, every
// category value >= 0, collectives in start order within each group, their
// start_offset_ns (when set) from this step's start in the rank's clock.
struct RankStep {
  int64_t step = 0;
  int64_t start_ns = 0;  // the rank's clock (CLOCK_MONOTONIC there): not comparable across machines
  int64_t wall_ns = 0;
  std::string basis;  // "device" (a GPU's breakdown) or "host" (the busiest host thread's)
  // Where the rank's step went, in the basis' categories ("compute",
  // "dataloader", "host_sync", ...; "communication"/"collective" are waits
  // or transfers, never a straggler's cause).
  std::vector<std::pair<std::string, int64_t>> categories_ns;
  std::vector<CollectiveSample> collectives;
  uint64_t collectives_dropped = 0;  // instances beyond the per-step cap, not sent
  bool throttled = false;            // the rank's GPU was power/thermal-throttled or clocked < 90% of max
};

// The RankStep of `rank` in a (possibly multi-rank) step report. Uses the
// rank's busiest device when it has one, else its busiest host thread.
// Returns nullopt when the step has nothing from that rank.
std::optional<RankStep> rank_step_of(const StepReport& step, int32_t rank);

struct ClusterOptions {
  int32_t world_size = 1;          // ranks expected; those that never report are "missing"
  size_t window_steps = 128;       // unfinished steps kept per rank, and samples behind the medians
  size_t recent_steps = 8;         // per-step detail kept for the newest finished steps
  int64_t straggler_min_excess_ns = 100'000;  // own time per step above the median rank, floor
  double straggler_min_excess_share = 0.05;   // ... and at least this share of the median step wall
};

// One rank over the run (summary.ranks[] in the report).
struct RankSummary {
  int32_t rank = 0;
  std::string host;
  uint64_t steps = 0;  // steps compared with the other ranks
  int64_t steps_wall_ns = 0;  // sum of their walls
  int64_t last_step = -1;
  bool finished = false;  // the rank said it stopped profiling
  std::optional<int64_t> step_wall_p50_ns;
  std::optional<int64_t> own_p50_ns;             // wall - collective wait, median per step
  std::optional<int64_t> collective_wait_p50_ns;  // per step; <= step_wall_p50_ns
  int64_t collective_wait_ns = 0;                 // sum over compared steps
  int64_t collective_transfer_ns = 0;             // sum over compared steps (time some collective moved data)
  std::string basis;
  std::vector<std::pair<std::string, int64_t>> breakdown_ns;  // sums over compared steps
  std::optional<double> relative_perf;  // min over ranks of own_p50 / this rank's own_p50 (NVRx's score): 1.0 for the fastest
  std::optional<int64_t> clock_offset_ns;       // add to this rank's clock to get the leader's
  std::optional<int64_t> clock_uncertainty_ns;  // half the best round trip
  std::optional<int64_t> start_skew_p50_ns;     // step start after the earliest rank (needs clock offsets)
  uint64_t throttled_steps = 0;
};

struct ClusterStepRank {
  int32_t rank = 0;
  int64_t wall_ns = 0;
  int64_t collective_wait_ns = 0;
  int64_t own_ns = 0;
  std::optional<int64_t> start_skew_ns;
};

struct ClusterStep {
  int64_t step = 0;
  std::vector<ClusterStepRank> ranks;
  std::optional<int32_t> straggler;  // the rank with the largest own time, when it stands out
};

struct ClusterView {
  int32_t world_size = 0;
  std::vector<int32_t> missing_ranks;  // never reported
  std::vector<int32_t> short_ranks;    // reported fewer steps than others, or stopped early
  uint64_t steps_compared = 0;
  uint64_t collective_instances = 0;   // matched across ranks
  uint64_t collective_mismatches = 0;  // instances one rank had and another did not
  uint64_t collectives_dropped = 0;
  uint64_t late_steps = 0;             // rank steps that arrived after their step was compared
  int64_t straggler_threshold_ns = 0;  // own time above the median rank that makes a straggler
  std::vector<RankSummary> ranks;      // by rank, reporting ranks only
  std::vector<ClusterStep> recent;     // newest finished steps, oldest first
  std::vector<Finding> findings;       // "straggler" findings, most costly first
};

// Accumulates RankSteps from every rank and renders the view. Not
// thread-safe: one owner (the leader's exchange thread, or analyze()).
class ClusterAssembler {
 public:
  explicit ClusterAssembler(ClusterOptions options);

  void set_host(int32_t rank, std::string host);
  // Adds one step of one rank, in any order. A repeated (rank, step) is
  // ignored and counted (duplicates()); so are ranks outside
  // [0, world_size) (foreign()) and steps already compared without this
  // rank (late()).
  void add(int32_t rank, RankStep step);
  // The rank stopped (heard_from: it said so) or was declared lost by the
  // caller (heard_from false): steps it did not send are no longer waited
  // for.
  void mark_finished(int32_t rank, bool heard_from = true);
  void set_clock_offset(int32_t rank, int64_t offset_ns, int64_t uncertainty_ns);
  // Finishes every step that every rank still expected to has reported, and
  // steps older than the window. With `final`, finishes every step held.
  void advance(bool final = false);
  ClusterView view() const;

  uint64_t duplicates() const { return duplicates_; }
  uint64_t foreign() const { return foreign_; }
  uint64_t late() const { return late_; }
  size_t pending_steps() const;  // held, not yet finished (bounded by window_steps per rank)

 private:
  struct Ring {  // the newest `cap` samples
    std::vector<int64_t> v;
    size_t next = 0;
    void push(int64_t x, size_t cap);
  };
  struct RankState {
    bool seen = false;
    bool finished = false;
    std::string host;
    std::map<int64_t, RankStep> pending;  // by step
    int64_t last_step = -1;
    uint64_t steps = 0;
    int64_t wall_ns = 0;
    std::string basis;
    std::map<std::string, int64_t> breakdown_ns;
    int64_t wait_ns = 0;
    int64_t transfer_ns = 0;
    uint64_t throttled_steps = 0;
    Ring wall, own, wait, skew;
    std::optional<int64_t> clock_offset_ns, clock_uncertainty_ns;
  };
  void finish_step(int64_t step);

  ClusterOptions options_;
  std::vector<RankState> ranks_;
  std::vector<ClusterStep> recent_;
  uint64_t instances_ = 0, mismatches_ = 0, dropped_ = 0, duplicates_ = 0, foreign_ = 0, late_ = 0;
  int64_t last_finished_step_ = INT64_MIN;
};

// Straggler findings for a view (filled into view().findings;
// cluster_findings.cpp): each rank whose own time per step exceeds the
// median rank's by at least view.straggler_threshold_ns while the others
// wait in collectives, with the category that explains the excess.
std::vector<Finding> straggler_findings(const ClusterView& view);

// The cross-rank view of an analysed multi-rank report (offline: one trace
// per rank). Hosts are the sources' file names. Returns nullopt for one rank.
std::optional<ClusterView> cluster_view_of(const Report& report);

// JSON. rank_steps_to_json: {"rank", "host", "steps": [...], "finished",
// "clock_offset_ns", "clock_uncertainty_ns"} as a live rank publishes it;
// ingest_rank_steps_json parses that into an assembler and returns "" or a
// one-line error (nothing is added on error). cluster_view_to_json: the
// "summary.ranks"/"summary.cluster"/"findings" object of a cluster record
// (docs/report-schema.md, "Cluster").
struct RankBatch {
  int32_t rank = 0;
  std::string host;
  std::vector<RankStep> steps;
  bool finished = false;
  std::optional<int64_t> clock_offset_ns, clock_uncertainty_ns;
};
std::string rank_batch_to_json(const RankBatch& batch);
// `rank`/`finished`, when given, receive the batch's rank and finished flag.
std::string ingest_rank_batch_json(ClusterAssembler& assembler, const std::string& json, int32_t* rank = nullptr,
                                   bool* finished = nullptr);
std::string cluster_view_to_json(const ClusterView& view, int indent = -1);

}  // namespace gpuutil
