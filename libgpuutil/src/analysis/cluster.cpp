// The cross-rank assembler (gpuutil/cluster.h): matches the ranks' steps by
// number and their collective instances by order per group, splits time in
// collectives into transfer (the minimum across ranks) and wait (the rest;
// concurrent instances' waits counted once, inside the step window), and
// keeps bounded per-rank run totals and recent samples. Straggler
// findings are derived in cluster_findings.cpp.
#include "gpuutil/cluster.h"

#include <algorithm>
#include <limits>
#include <set>

#include "analysis/intervals.h"

namespace gpuutil {

namespace {

std::optional<int64_t> median_of(std::vector<int64_t> v) {
  if (v.empty()) return std::nullopt;
  const size_t mid = (v.size() - 1) / 2;  // lower median: an observed value
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

// a + b for a, b >= 0, saturating (instance times come from other processes).
int64_t add_ns(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}

bool throttled_in(const DeviceHealth& h, int64_t wall_ns) {
  const int64_t throttle_ns = h.throttle_power_ns.value_or(0) + h.throttle_thermal_ns.value_or(0);
  if (wall_ns > 0 && throttle_ns * 100 > wall_ns) return true;
  return h.sm_clock_mhz && h.sm_clock_max_mhz && *h.sm_clock_max_mhz > 0 &&
         *h.sm_clock_mhz < 0.9 * *h.sm_clock_max_mhz;
}

}  // namespace

std::optional<RankStep> rank_step_of(const StepReport& step, int32_t rank) {
  RankStep out;
  out.step = step.step;
  out.start_ns = step.start_ns;
  const DeviceStepReport* device = nullptr;
  for (const auto& d : step.devices) {
    if (d.rank == rank && (device == nullptr || d.busy_ns > device->busy_ns)) device = &d;
  }
  const HostThreadStepReport* thread = nullptr;
  const auto classified = [](const HostThreadStepReport& h) {
    return h.wall_ns - h.breakdown_ns[static_cast<int>(HostCategory::kOther)] -
           h.breakdown_ns[static_cast<int>(HostCategory::kCollective)];
  };
  for (const auto& h : step.host) {
    if (h.rank == rank && (thread == nullptr || classified(h) > classified(*thread))) thread = &h;
  }
  if (device != nullptr) {
    out.basis = "device";
    out.wall_ns = device->wall_ns;
    const Breakdown& b = device->breakdown;
    out.categories_ns = {{"compute", b.compute_ns}, {"communication", b.communication_ns}, {"memory", b.memory_ns}};
    for (int c = 0; c < kIdleCauseCount; ++c) {
      out.categories_ns.emplace_back(to_string(static_cast<IdleCause>(c)), b.idle_ns[c]);
    }
    out.throttled = throttled_in(device->health, device->wall_ns);
  } else if (thread != nullptr) {
    out.basis = "host";
    out.wall_ns = thread->wall_ns;
    for (int c = 0; c < kHostCategoryCount; ++c) {
      out.categories_ns.emplace_back(to_string(static_cast<HostCategory>(c)), thread->breakdown_ns[c]);
    }
  } else {
    bool any = false;
    for (const auto& c : step.collectives) any = any || c.rank == rank;
    if (!any) return std::nullopt;
    out.basis = "none";
    out.wall_ns = step.wall_ns;
  }
  for (const auto& c : step.collectives) {
    if (c.rank != rank) continue;
    out.collectives = c.samples;
    out.collectives_dropped = c.dropped;
  }
  return out;
}

void ClusterAssembler::Ring::push(int64_t x, size_t cap) {
  if (cap == 0) return;
  if (v.size() < cap) {
    v.push_back(x);
  } else {
    v[next] = x;
    next = (next + 1) % cap;
  }
}

ClusterAssembler::ClusterAssembler(ClusterOptions options) : options_(options) {
  options_.world_size = std::max<int32_t>(1, options_.world_size);
  options_.window_steps = std::max<size_t>(1, options_.window_steps);
  ranks_.resize(static_cast<size_t>(options_.world_size));
}

void ClusterAssembler::set_host(int32_t rank, std::string host) {
  if (rank < 0 || rank >= options_.world_size) return;
  ranks_[static_cast<size_t>(rank)].host = std::move(host);
}

void ClusterAssembler::add(int32_t rank, RankStep step) {
  if (rank < 0 || rank >= options_.world_size) {
    ++foreign_;
    return;
  }
  RankState& r = ranks_[static_cast<size_t>(rank)];
  r.seen = true;
  r.last_step = std::max(r.last_step, step.step);
  if (step.step <= last_finished_step_) {
    ++late_;  // its step was compared without it (a lost or slow rank)
    return;
  }
  const int64_t n = step.step;
  if (!r.pending.emplace(n, std::move(step)).second) ++duplicates_;
}

void ClusterAssembler::mark_finished(int32_t rank, bool heard_from) {
  if (rank < 0 || rank >= options_.world_size) return;
  ranks_[static_cast<size_t>(rank)].finished = true;
  if (heard_from) ranks_[static_cast<size_t>(rank)].seen = true;
}

void ClusterAssembler::set_clock_offset(int32_t rank, int64_t offset_ns, int64_t uncertainty_ns) {
  if (rank < 0 || rank >= options_.world_size) return;
  ranks_[static_cast<size_t>(rank)].clock_offset_ns = offset_ns;
  ranks_[static_cast<size_t>(rank)].clock_uncertainty_ns = uncertainty_ns;
}

size_t ClusterAssembler::pending_steps() const {
  size_t n = 0;
  for (const auto& r : ranks_) n += r.pending.size();
  return n;
}

void ClusterAssembler::advance(bool final) {
  for (;;) {
    int64_t oldest = std::numeric_limits<int64_t>::max();
    size_t fullest = 0;
    for (const auto& r : ranks_) {
      if (!r.pending.empty()) oldest = std::min(oldest, r.pending.begin()->first);
      fullest = std::max(fullest, r.pending.size());
    }
    if (oldest == std::numeric_limits<int64_t>::max()) return;
    bool ready = final || fullest > options_.window_steps;
    if (!ready) {
      // Ready when every rank still expected (not finished) has reported it.
      ready = true;
      for (const auto& r : ranks_) {
        if (!r.finished && r.pending.count(oldest) == 0) ready = false;
      }
    }
    if (!ready) return;
    finish_step(oldest);
  }
}

void ClusterAssembler::finish_step(int64_t step) {
  std::vector<std::pair<int32_t, RankStep>> present;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    auto it = ranks_[i].pending.find(step);
    if (it == ranks_[i].pending.end()) continue;
    present.emplace_back(static_cast<int32_t>(i), std::move(it->second));
    ranks_[i].pending.erase(it);
  }
  last_finished_step_ = step;
  if (present.empty()) return;

  // Collective instances: matched by order within each group (a process
  // group's stream, or one kind of gloo collective). For each matched
  // instance the transfer is the minimum of the ranks' times in it; a rank
  // that spent longer arrived earlier and waited for the last one, so its
  // wait is the first (time - minimum) of its instance, the transfer the
  // rest. A rank waits when it is in collectives and none of them is moving
  // data: its wait in the step is the union of its instances' waits less
  // the union of their transfers, inside its step window. Instances that run
  // at the same time (gloo's worker threads, several NCCL streams) wait for
  // the same late rank once, so the wait can never exceed the wall.
  const size_t n = present.size();
  std::vector<std::vector<int64_t>> starts(n);  // per rank, per sample: offset from its step's start
  for (size_t i = 0; i < n; ++i) {
    int64_t next = 0;  // unset starts: one after the other from the step's start
    for (const auto& c : present[i].second.collectives) {
      starts[i].push_back(std::max<int64_t>(0, c.start_offset_ns.value_or(next)));
      next = add_ns(starts[i].back(), std::max<int64_t>(0, c.dur_ns));
    }
  }
  std::vector<std::vector<Interval>> waits(n), moves(n);
  std::set<std::string> groups;
  for (const auto& [rank, s] : present) {
    for (const auto& c : s.collectives) groups.insert(c.group);
  }
  std::vector<std::vector<size_t>> in_group(n);  // per rank: its samples of the group, in order
  for (const auto& g : groups) {
    size_t matched = std::numeric_limits<size_t>::max();
    for (size_t i = 0; i < n; ++i) {
      in_group[i].clear();
      const auto& samples = present[i].second.collectives;
      for (size_t k = 0; k < samples.size(); ++k) {
        if (samples[k].group == g) in_group[i].push_back(k);
      }
      matched = std::min(matched, in_group[i].size());
    }
    for (const auto& d : in_group) mismatches_ += d.size() - matched;
    if (n < 2) continue;  // nothing to compare with
    instances_ += matched;
    const auto dur = [&](size_t i, size_t k) {
      return std::max<int64_t>(0, present[i].second.collectives[in_group[i][k]].dur_ns);
    };
    for (size_t k = 0; k < matched; ++k) {
      int64_t lo = std::numeric_limits<int64_t>::max();
      for (size_t i = 0; i < n; ++i) lo = std::min(lo, dur(i, k));
      for (size_t i = 0; i < n; ++i) {
        const int64_t start = starts[i][in_group[i][k]];
        waits[i].push_back({start, add_ns(start, dur(i, k) - lo)});
        moves[i].push_back({add_ns(start, dur(i, k) - lo), add_ns(start, dur(i, k))});
      }
    }
  }
  std::vector<int64_t> wait(n), transfer(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t wall = present[i].second.wall_ns;
    const IntervalList waiting = union_of(std::move(waits[i])), moving = union_of(std::move(moves[i]));
    wait[i] = covered_ns(difference(waiting, moving), 0, wall);
    transfer[i] = covered_ns(moving, 0, wall);
  }

  // Step starts on the leader's clock, when every rank measured its offset.
  bool clocks = present.size() >= 2;
  for (const auto& [rank, s] : present) clocks = clocks && ranks_[static_cast<size_t>(rank)].clock_offset_ns.has_value();
  int64_t earliest = std::numeric_limits<int64_t>::max();
  if (clocks) {
    for (const auto& [rank, s] : present) {
      earliest = std::min(earliest, s.start_ns + *ranks_[static_cast<size_t>(rank)].clock_offset_ns);
    }
  }

  ClusterStep cs;
  cs.step = step;
  const size_t cap = options_.window_steps;
  for (size_t i = 0; i < n; ++i) {
    const auto& [rank, s] = present[i];
    RankState& r = ranks_[static_cast<size_t>(rank)];
    const int64_t own = s.wall_ns - wait[i];  // >= 0: the wait is time inside the wall
    ++r.steps;
    r.wall_ns += s.wall_ns;
    r.wait_ns += wait[i];
    r.transfer_ns += transfer[i];
    r.throttled_steps += s.throttled ? 1 : 0;
    dropped_ += s.collectives_dropped;
    if (r.basis.empty()) r.basis = s.basis;
    for (const auto& [name, ns] : s.categories_ns) r.breakdown_ns[name] += ns;
    r.wall.push(s.wall_ns, cap);
    r.own.push(own, cap);
    r.wait.push(wait[i], cap);
    ClusterStepRank sr;
    sr.rank = rank;
    sr.wall_ns = s.wall_ns;
    sr.collective_wait_ns = wait[i];
    sr.own_ns = own;
    if (clocks) {
      sr.start_skew_ns = s.start_ns + *r.clock_offset_ns - earliest;
      r.skew.push(*sr.start_skew_ns, cap);
    }
    cs.ranks.push_back(sr);
  }
  if (cs.ranks.size() >= 2) {
    std::vector<int64_t> owns, walls;
    for (const auto& sr : cs.ranks) {
      owns.push_back(sr.own_ns);
      walls.push_back(sr.wall_ns);
    }
    const int64_t mid = *median_of(owns);
    const auto slowest = std::max_element(cs.ranks.begin(), cs.ranks.end(),
                                          [](const auto& a, const auto& b) { return a.own_ns < b.own_ns; });
    const int64_t threshold = std::max<int64_t>(
        options_.straggler_min_excess_ns,
        static_cast<int64_t>(options_.straggler_min_excess_share * static_cast<double>(*median_of(walls))));
    if (slowest->own_ns - mid >= threshold) cs.straggler = slowest->rank;
  }
  recent_.push_back(std::move(cs));
  if (recent_.size() > options_.recent_steps) recent_.erase(recent_.begin());
}

ClusterView ClusterAssembler::view() const {
  ClusterView v;
  v.world_size = options_.world_size;
  v.steps_compared = 0;
  v.collective_instances = instances_;
  v.collective_mismatches = mismatches_;
  v.collectives_dropped = dropped_;
  v.late_steps = late_;
  v.recent = recent_;
  int64_t newest = -1;
  for (const auto& r : ranks_) newest = std::max(newest, r.last_step);
  std::vector<int64_t> walls;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const RankState& r = ranks_[i];
    const auto rank = static_cast<int32_t>(i);
    if (!r.seen) {
      v.missing_ranks.push_back(rank);
      continue;
    }
    if (r.last_step < newest) v.short_ranks.push_back(rank);
    RankSummary s;
    s.rank = rank;
    s.host = r.host;
    s.steps = r.steps;
    s.last_step = r.last_step;
    s.finished = r.finished;
    s.steps_wall_ns = r.wall_ns;
    s.step_wall_p50_ns = median_of(r.wall.v);
    s.own_p50_ns = median_of(r.own.v);
    s.collective_wait_p50_ns = median_of(r.wait.v);
    s.collective_wait_ns = r.wait_ns;
    s.collective_transfer_ns = r.transfer_ns;
    s.basis = r.basis;
    s.breakdown_ns.assign(r.breakdown_ns.begin(), r.breakdown_ns.end());
    s.clock_offset_ns = r.clock_offset_ns;
    s.clock_uncertainty_ns = r.clock_uncertainty_ns;
    s.start_skew_p50_ns = median_of(r.skew.v);
    s.throttled_steps = r.throttled_steps;
    v.steps_compared = std::max(v.steps_compared, r.steps);
    if (s.step_wall_p50_ns) walls.push_back(*s.step_wall_p50_ns);
    v.ranks.push_back(std::move(s));
  }
  // The fastest rank (smallest median own time) scores 1.0.
  int64_t best = std::numeric_limits<int64_t>::max();
  for (const auto& s : v.ranks) {
    if (s.own_p50_ns) best = std::min(best, *s.own_p50_ns);
  }
  for (auto& s : v.ranks) {
    if (!s.own_p50_ns) continue;
    s.relative_perf = *s.own_p50_ns == best ? 1.0 : static_cast<double>(best) / static_cast<double>(*s.own_p50_ns);
  }
  const auto mid_wall = median_of(walls);
  v.straggler_threshold_ns = std::max<int64_t>(
      options_.straggler_min_excess_ns,
      mid_wall ? static_cast<int64_t>(options_.straggler_min_excess_share * static_cast<double>(*mid_wall)) : 0);
  v.findings = straggler_findings(v);
  return v;
}

std::optional<ClusterView> cluster_view_of(const Report& report) {
  std::set<int32_t> ranks;
  for (const auto& s : report.sources) ranks.insert(s.rank);
  if (ranks.size() < 2 || *ranks.begin() < 0) return std::nullopt;
  ClusterOptions options;
  options.world_size = *ranks.rbegin() + 1;
  options.window_steps = std::max<size_t>(options.window_steps, report.steps.size() + 1);
  ClusterAssembler assembler(options);
  for (const auto& s : report.sources) {
    const size_t slash = s.path.find_last_of('/');
    assembler.set_host(s.rank, slash == std::string::npos ? s.path : s.path.substr(slash + 1));
  }
  for (const auto& step : report.steps) {
    for (int32_t rank : ranks) {
      if (auto rs = rank_step_of(step, rank)) assembler.add(rank, std::move(*rs));
    }
  }
  for (int32_t rank : ranks) assembler.mark_finished(rank);
  assembler.advance(/*final=*/true);
  return assembler.view();
}

}  // namespace gpuutil
