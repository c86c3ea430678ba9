// Idle-gap attribution rules (see idle_attribution.h, docs/accounting.md).
#include "analysis/idle_attribution.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <optional>

namespace gpuutil {

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

void credit(IdleAccount& out, IdleCause cause, CulpritKey name, int64_t from_ns, int64_t to_ns) {
  const int64_t ns = to_ns - from_ns;
  if (ns <= 0) return;
  if (out.segments) out.segments->push_back({from_ns, to_ns, cause, name});
  const auto c = static_cast<size_t>(cause);
  out.idle_ns[c] += ns;
  auto& t = out.culprits[c][name];
  t.ns += ns;
  t.count += 1;
}

// Where the state given by `list` next changes after t: the end of the
// interval containing t, else the start of the next one.
int64_t next_change(const NamedIntervalList& list, int64_t t) {
  const size_t i = first_ending_after(list, t);
  if (i == list.size()) return kNever;
  return list[i].start_ns <= t ? list[i].end_ns : list[i].start_ns;
}

// Credits [x, y) of plain host time on `thread` piece by piece, each piece
// named by what used the CPU: the innermost named op, range or Python frame
// (coarse phases excluded; a frame under an annotation names its time),
// else the thread itself with the phase it was in as context.
void credit_host_time(IdleAccount& out, IdleCause cause, const HostThreadTimeline& th, uint32_t thread, int64_t x,
                      int64_t y) {
  const NamedIntervalList& naming = th.naming();
  int64_t cur = x;
  while (cur < y) {
    // The piece ends where the list that names it (or any list consulted
    // before it) next changes.
    int64_t next = std::min(y, next_change(naming, cur));
    long i = find_containing(naming, cur);
    CulpritKey who = 0;
    if (i >= 0) who = range_culprit(naming[i].name);
    if (i < 0) {
      next = std::min(next, next_change(th.phases, cur));
      i = find_containing(th.phases, cur);
      who = thread_culprit(thread, i >= 0 ? th.phases[i].name : kNoName);
    }
    credit(out, cause, who, cur, next);
    cur = next;
  }
}

// What queued `work` through `call`, as a user reads it: the outermost op
// around the call (its dispatch; regions such as a compiled graph's wrapper
// are not ops here, culprit.h), else the innermost range or Python frame
// around it unless that is the region itself, else the work itself (a
// kernel name says more than "cudaLaunchKernel" or the region).
NameId queued_by(const HostThreadTimeline& th, const HostApiCall& call, const DeviceActivity& work) {
  long i = find_containing(th.ops, call.start_ns);
  if (i >= 0) return th.ops[i].name;
  const NamedIntervalList& naming = th.naming();
  i = find_containing(naming, call.start_ns);
  if (i >= 0) {
    const long r = find_containing(th.regions, call.start_ns);
    if (r < 0 || th.regions[r].name != naming[i].name) return naming[i].name;
  }
  // A kernel's own name; never a copy's or memset's (an imported trace names
  // them "Memset (Device)", CUPTI's records do not: a live step and the same
  // trace imported must name the same culprit), the call's instead.
  return work.kind == ActivityKind::kKernel && work.name != kNoName ? work.name : call.name;
}

// Another thread that explains time `thread` spent idle (inside no
// recorded range at all, steps and phases included: an autograd or worker
// thread between its work): of `others` (the window's launching threads,
// most launches first, then every other thread with events), the first
// blocked at t in a DataLoader wait, else in a collective, else in a sync,
// else the first inside a named op or range (a phase or a Python frame alone
// is no evidence: it is often a wait for `thread` itself). -1 when none.
long other_thread_at(const HostTimelines& host, const std::vector<uint32_t>& others, uint32_t thread, int64_t t) {
  for (auto state : {&HostThreadTimeline::dataloader, &HostThreadTimeline::collective, &HostThreadTimeline::sync,
                     &HostThreadTimeline::leaf}) {
    for (uint32_t m : others) {
      if (m == thread || m >= host.threads.size() || !host.threads[m].has_events) continue;
      if (find_containing(host.threads[m].*state, t) >= 0) return m;
    }
  }
  return -1;
}

// When a thread recorded nothing at t (no range, no API call): where it
// next records something, kNever when it never does.
int64_t next_recorded_ns(const HostThreadTimeline& th, int64_t t) {
  int64_t next = kNever;
  for (const NamedIntervalList* list : {&th.active, &th.calls}) {
    const size_t i = first_ending_after(*list, t);
    if (i < list->size()) next = std::min(next, std::max((*list)[i].start_ns, t));
  }
  return next;
}

// Of `thread` and `others`, all inside nothing recorded at t, the one that
// recorded something first in [t, until): it was the one coming back (the
// main thread's final synchronize after a stretch no thread recorded), not
// an idle worker. `thread` when no other comes back sooner. (Bounded by the
// piece being explained, so a live step, whose store ends with its window,
// decides as the offline analysis of the whole trace does.)
uint32_t first_back(const HostTimelines& host, const std::vector<uint32_t>& others, uint32_t thread, int64_t t,
                    int64_t until) {
  uint32_t best = thread;
  int64_t best_ns = std::min(next_recorded_ns(host.threads[thread], t), until);
  for (uint32_t m : others) {
    if (m == thread || m >= host.threads.size() || !host.threads[m].has_events) continue;
    const HostThreadTimeline& mt = host.threads[m];
    if (find_containing(mt.active, t) >= 0 || find_containing(mt.calls, t) >= 0) continue;
    const int64_t ns = next_recorded_ns(mt, t);
    if (ns < best_ns) {
      best = m;
      best_ns = ns;
    }
  }
  return best;
}

// What a gap's ending work tells the host-state rules: when it started
// (kNever: the gap ends with the window, no work) and the name a device-side
// wait for it carries.
struct GapEnd {
  int64_t work_start_ns = kNever;
  CulpritKey waiting = range_culprit(kNoName);
};

// The ending work itself as a culprit, when nothing on the host names it.
CulpritKey work_culprit(const DeviceActivity& work) {
  return work.kind == ActivityKind::kKernel ? range_culprit(work.name) : kUnlaunchedTransferCulprit;
}

// Explains [x, y) of a gap by the thread's state, interval by interval:
// DataLoader wait, collective, sync (while the blocking call runs; a sync
// the host was still in when the gap's work started did not hold the work
// back: it waited on the device, a consequence, so that stretch is
// dependency), else plain host time named by what ran. `others` (or null):
// threads that explain the time this one recorded nothing.
void split_by_host_state(const HostTimelines& host, const HostThreadTimeline& th, uint32_t thread, const GapEnd& end_of,
                         int64_t x, int64_t y, IdleAccount& out, const std::vector<uint32_t>* others) {
  int64_t cur = x;
  while (cur < y) {
    int64_t next = next_change(th.dataloader, cur);
    long i = find_containing(th.dataloader, cur);
    if (i >= 0) {
      const int64_t end = std::min(next, y);
      credit(out, IdleCause::kDataloader, th.dataloader[i].name, cur, end);
      cur = end;
      continue;
    }
    next = std::min(next, next_change(th.collective, cur));
    i = find_containing(th.collective, cur);
    if (i >= 0) {
      const int64_t end = std::min(next, y);
      credit(out, IdleCause::kCollective, th.collective[i].name, cur, end);
      cur = end;
      continue;
    }
    next = std::min(next, next_change(th.sync, cur));
    i = find_containing(th.sync, cur);
    if (i >= 0) {
      const int64_t end = std::min(next, y);
      if (th.sync[i].end_ns > end_of.work_start_ns) {
        credit(out, IdleCause::kDependency, end_of.waiting, cur, end);
      } else {
        credit(out, IdleCause::kHostSync, th.sync[i].name, cur, end);
      }
      cur = end;
      continue;
    }
    int64_t end = std::min(next, y);
    if (others != nullptr && find_containing(th.active, cur) < 0) {
      // The thread recorded nothing: it was idle, waiting for another
      // thread. The thread that was actually in something explains it;
      // when none was, the one that came back first.
      end = std::min({end, next_change(th.active, cur), next_change(th.calls, cur)});
      const long m = other_thread_at(host, *others, thread, cur);
      if (m >= 0) {
        const HostThreadTimeline& mt = host.threads[static_cast<size_t>(m)];
        end = std::min({end, next_change(mt.dataloader, cur), next_change(mt.collective, cur),
                        next_change(mt.sync, cur), next_change(mt.leaf, cur)});
        split_by_host_state(host, mt, static_cast<uint32_t>(m), end_of, cur, end, out, nullptr);
      } else {
        const uint32_t back = first_back(host, *others, thread, cur, end);
        const HostThreadTimeline& bt = host.threads[back];
        if (back != thread) end = std::min(end, next_recorded_ns(bt, cur));
        // Other threads entering something end the piece: they explain what follows.
        for (uint32_t o : *others) {
          if (o < host.threads.size() && o != thread) end = std::min(end, next_change(host.threads[o].leaf, cur));
        }
        credit_host_time(out, IdleCause::kHost, bt, back, cur, end);
      }
    } else {
      credit_host_time(out, IdleCause::kHost, th, thread, cur, end);
    }
    cur = end;
  }
}

// The next work was queued before the gap began: the GPU was not waiting
// for a launch but for what the queued work depends on. Whatever the host
// was blocked in explains it when there is something: a sync or blocking
// copy on any thread (idle_host_sync), else a collective (idle_collective);
// otherwise idle_dependency, culprit = the call that queued the work.
// A sync or collective the host is still in when the work starts (it ends
// after b) did not hold the work back: the work started without the host
// getting out. It was waiting on the GPU itself (a .item() or blocking copy
// queued behind the very work that ended the gap): a consequence of the
// dependency, not its cause, so it explains nothing here.
void split_by_dependency(const HostTimelines& host, NameId queued_by, int64_t a, int64_t b, IdleAccount& out) {
  int64_t cur = a;
  while (cur < b) {
    int64_t next = b;
    const NamedInterval* sync = nullptr;
    const NamedInterval* collective = nullptr;
    for (const auto& th : host.threads) {
      if (!th.has_events) continue;
      next = std::min({next, next_change(th.sync, cur), next_change(th.collective, cur)});
      const long s = find_containing(th.sync, cur);
      if (s >= 0 && sync == nullptr && th.sync[s].end_ns <= b) sync = &th.sync[s];
      const long c = find_containing(th.collective, cur);
      if (c >= 0 && collective == nullptr && th.collective[c].end_ns <= b) collective = &th.collective[c];
    }
    const int64_t end = std::min(next, b);
    if (sync != nullptr) {
      credit(out, IdleCause::kHostSync, sync->name, cur, end);
    } else if (collective != nullptr) {
      credit(out, IdleCause::kCollective, collective->name, cur, end);
    } else {
      credit(out, IdleCause::kDependency, queued_by, cur, end);
    }
    cur = end;
  }
}

// What the window itself says, decided by the window alone so that a live
// step (whose store holds only recent events) and the offline analysis of
// the whole trace agree:
// - thread: the thread that launched most of the device's work starting in
//   [lo, hi); -1 when none of it has a known launch;
// - submit_floor_ns: the shortest launch-call-start -> work-start time of
//   plain (non-graph) launches in the window, capped at kMaxSubmitNs: how
//   long the device takes to pick up work nothing held back. Work queued
//   before a gap could not have started earlier. A graph launch is not a
//   measure of it (a window often holds one graph launch, whose own latency
//   includes the very wait being explained), so graphs use the same floor.
// (CUDA's submission latency is a few microseconds; the cap keeps one
// delayed launch in a sparse window from hiding a real dependency.)
constexpr int64_t kMaxSubmitNs = 20'000;
// A gap shorter than this before work that was already queued is the
// device's own turnaround between back-to-back work (HTA's "kernel wait"):
// idle_kernel_gap, never a dependency.
constexpr int64_t kKernelGapNs = 20'000;
// A launching op that spent this much longer than the window's median
// dispatch before its launch call stalled on host work (first use of a GEMM
// shape, an allocator miss): that excess is host work of the op, not launch.
constexpr int64_t kDispatchStallNs = 500'000;

struct WindowFacts {
  int64_t thread = -1;
  int64_t submit_floor_ns = kMaxSubmitNs;
  // The threads that launched the window's work, most launches first,
  // then every other thread with events.
  std::vector<uint32_t> others;
};

bool from_graph(const DeviceActivity& a, const HostApiCall& call) { return a.graph_id != 0 || call.graph; }

WindowFacts window_facts(const EventStore& store, const DeviceTimeline& tl, const HostTimelines& host, int64_t lo,
                         int64_t hi) {
  WindowFacts f;
  const auto& acts = store.activities;
  std::vector<std::pair<uint32_t, uint32_t>> counts;  // (thread, launches): a handful of threads
  auto it = std::lower_bound(tl.by_start.begin(), tl.by_start.end(), lo,
                             [&](uint32_t i, int64_t t) { return acts[i].start_ns < t; });
  for (; it != tl.by_start.end() && acts[*it].start_ns < hi; ++it) {
    const uint32_t launch = host.launch_of[*it];
    if (launch == kNoLaunch) continue;
    const auto& call = store.api_calls[launch];
    const int64_t latency_ns = acts[*it].start_ns - call.start_ns;
    if (latency_ns >= 0 && !from_graph(acts[*it], call)) f.submit_floor_ns = std::min(f.submit_floor_ns, latency_ns);
    const uint32_t thread = call.thread;
    auto c = std::find_if(counts.begin(), counts.end(), [thread](const auto& p) { return p.first == thread; });
    if (c == counts.end()) {
      counts.emplace_back(thread, 1);
    } else {
      ++c->second;
    }
  }
  uint32_t best_n = 0;
  for (const auto& [thread, n] : counts) {
    if (n > best_n || (n == best_n && thread < f.thread)) {
      f.thread = thread;
      best_n = n;
    }
  }
  std::sort(counts.begin(), counts.end(),
            [](const auto& x, const auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
  for (const auto& [thread, n] : counts) f.others.push_back(thread);
  const size_t launchers = f.others.size();
  for (uint32_t t = 0; t < host.threads.size(); ++t) {
    if (host.threads[t].has_events && std::find(f.others.begin(), f.others.begin() + long(launchers), t) ==
                                          f.others.begin() + long(launchers)) {
      f.others.push_back(t);
    }
  }
  return f;
}

// How long launching ops take before their launch call in the window (the
// window's median dispatch), and each launch's own dispatch. Built only when
// a gap's op worked long enough before its call to be a stall candidate
// (rare), since it sorts the window's launches.
// Dispatch of a launch call: from its op's start, or from the end of the
// op's previous launch call when it launched several (a foreach op, a
// convolution with helper kernels), to the call.
class DispatchModel {
 public:
  DispatchModel(const EventStore& store, const DeviceTimeline& tl, const HostTimelines& host, int64_t lo, int64_t hi)
      : store_(store), host_(host) {
    const auto& acts = store.activities;
    auto it = std::lower_bound(tl.by_start.begin(), tl.by_start.end(), lo,
                               [&](uint32_t i, int64_t t) { return acts[i].start_ns < t; });
    for (; it != tl.by_start.end() && acts[*it].start_ns < hi; ++it) {
      const uint32_t launch = host.launch_of[*it];
      if (launch != kNoLaunch && !from_graph(acts[*it], store.api_calls[launch])) launches_.push_back(launch);
    }
    std::sort(launches_.begin(), launches_.end(), [&](uint32_t x, uint32_t y) { return before(x, y); });
    launches_.erase(std::unique(launches_.begin(), launches_.end()), launches_.end());
    std::vector<int64_t> all;
    all.reserve(launches_.size());
    for (uint32_t launch : launches_) {
      const int64_t d = dispatch_ns(launch);
      if (d >= 0) all.push_back(d);
    }
    if (!all.empty()) {
      const auto mid = all.begin() + static_cast<long>((all.size() - 1) / 2);  // lower median
      std::nth_element(all.begin(), mid, all.end());
      p50_ns_ = *mid;
    }
  }

  int64_t p50_ns() const { return p50_ns_; }  // -1: no launch inside an op

  // The dispatch of `launch`, -1 when no op encloses the call.
  int64_t dispatch_ns(uint32_t launch) const {
    const HostApiCall& call = store_.api_calls[launch];
    const auto& ops = host_.threads[call.thread].ops;
    const long op = find_containing(ops, call.start_ns);
    if (op < 0) return -1;
    int64_t from = ops[op].start_ns;
    // The thread's previous plain launch call (launches_ is sorted by
    // (thread, start)), if it returned inside this op.
    const auto it = std::lower_bound(launches_.begin(), launches_.end(), launch,
                                     [&](uint32_t x, uint32_t l) { return before(x, l); });
    if (it != launches_.begin()) {
      const auto& prev = store_.api_calls[*std::prev(it)];
      if (prev.thread == call.thread && prev.end_ns <= call.start_ns && prev.end_ns > from) from = prev.end_ns;
    }
    return call.start_ns - from;
  }

 private:
  bool before(uint32_t x, uint32_t y) const {
    const auto& cx = store_.api_calls[x];
    const auto& cy = store_.api_calls[y];
    if (cx.thread != cy.thread) return cx.thread < cy.thread;
    return cx.start_ns != cy.start_ns ? cx.start_ns < cy.start_ns : x < y;
  }

  const EventStore& store_;
  const HostTimelines& host_;
  std::vector<uint32_t> launches_;  // the window's plain launch calls, by (thread, start)
  int64_t p50_ns_ = -1;
};

// `dispatch`: the window's DispatchModel, built on first need.
void attribute_gap(const EventStore& store, const DeviceTimeline& tl, const HostTimelines& host,
                   const WindowFacts& facts, std::optional<DispatchModel>& dispatch, int64_t lo_ns,
                   int64_t fallback_thread, int64_t a, int64_t b, int64_t hi_ns, IdleAccount& out) {
  const auto& acts = store.activities;
  int64_t thread = -1;
  int64_t launch_from = kNever;
  GapEnd end_of;
  NameId launch_name = kNoName;
  // The work that ends the gap: the activities starting first at or after b.
  // Several may start at the same instant (1 us trace resolution); the one
  // whose enqueuing call returned last decides, so the answer does not
  // depend on the order records arrived in.
  const auto first = std::lower_bound(tl.by_start.begin(), tl.by_start.end(), b,
                                      [&](uint32_t i, int64_t t) { return acts[i].start_ns < t; });
  const HostApiCall* next_call = nullptr;
  const DeviceActivity* next_work = nullptr;
  uint32_t next_launch = kNoLaunch;
  for (auto it = first; it != tl.by_start.end() && acts[*it].start_ns == acts[*first].start_ns; ++it) {
    const uint32_t launch = host.launch_of[*it];
    if (launch == kNoLaunch) continue;
    const auto& call = store.api_calls[launch];
    // Work launched after the window ended says nothing about the window:
    // the host had not asked for it yet. (It also may not have arrived when
    // a live step is reported, so the step's result must not depend on it.)
    if (call.start_ns >= hi_ns) continue;
    if (next_call == nullptr || call.end_ns > next_call->end_ns ||
        (call.end_ns == next_call->end_ns &&
         (call.start_ns < next_call->start_ns ||
          (call.start_ns == next_call->start_ns && call.thread < next_call->thread)))) {
      next_call = &call;
      next_work = &acts[*it];
      next_launch = launch;
    }
  }
  if (next_call != nullptr) {
    const auto& call = *next_call;
    const auto& ops = host.threads[call.thread].ops;
    const long op = find_containing(ops, call.start_ns);
    launch_name = queued_by(host.threads[call.thread], call, *next_work);
    if (call.end_ns <= a) {
      // Queued before the gap began (HTA's host-wait test: the enqueuing
      // call had returned). Until the device could have picked it up (the
      // window's fastest launch-to-start) it was still being submitted:
      // launch (a loop of tiny kernels is launch-bound although each call
      // returns before the previous kernel ends). After that, a gap shorter
      // than kKernelGapNs is the device going from one piece of queued work
      // to the next; a longer one waited on a dependency, not on a launch.
      const int64_t ready_ns = std::clamp(call.start_ns + facts.submit_floor_ns, a, b);
      credit(out, IdleCause::kLaunch, launch_name, a, ready_ns);
      if (b - a < kKernelGapNs) {
        credit(out, IdleCause::kKernelGap, launch_name, ready_ns, b);
        return;
      }
      split_by_dependency(host, launch_name, ready_ns, b, out);
      return;
    }
    thread = call.thread;
    launch_from = op >= 0 ? ops[op].start_ns : call.start_ns;
    // Launch lasts while the call runs and the device picks the work up
    // (the window's fastest launch-to-start from the call's start). Work
    // that started later than that plus the device's turnaround waited on
    // the device (a stream or event dependency, work of another process,
    // a graph's upstream node) with the launch long done: that stretch is
    // explained like work queued before a gap.
    const int64_t ready_ns = std::clamp(std::max(call.end_ns, call.start_ns + facts.submit_floor_ns), a, b);
    if (b - ready_ns >= kKernelGapNs) {
      split_by_dependency(host, launch_name, ready_ns, b, out);
      b = ready_ns;
    }
    // A stall inside the launching op before its call (first use of a GEMM
    // shape, an allocator miss): the op worked far longer than dispatching
    // a kernel takes here. Only the usual dispatch is launch; the rest is
    // the op's host work, named and split like host work after a call.
    // (The op's time before the call bounds its dispatch: only a call at
    // least kDispatchStallNs into its op can be a stall.)
    if (op >= 0 && call.start_ns - ops[op].start_ns >= kDispatchStallNs && !from_graph(*next_work, call)) {
      if (!dispatch) dispatch.emplace(store, tl, host, lo_ns, hi_ns);
      const int64_t p50 = dispatch->p50_ns();
      if (p50 >= 0 && dispatch->dispatch_ns(next_launch) - p50 >= kDispatchStallNs) {
        launch_from = std::max(launch_from, call.start_ns - p50);
      }
    }
    // The enqueuing call itself blocks the host (a pageable async copy, a
    // synchronous copy): from the call on, the host is stuck in it, which
    // no launch optimization removes. host_sync, named like other syncs.
    const auto& sync = host.threads[call.thread].sync;
    const long blocked = find_containing(sync, call.start_ns);
    if (blocked >= 0) {
      const int64_t from_ns = std::clamp(std::max(call.start_ns, launch_from), a, b);
      credit(out, IdleCause::kHostSync, sync[blocked].name, from_ns, b);
      b = from_ns;
    }
  }
  if (next_call == nullptr && first != tl.by_start.end() && acts[*first].start_ns == b && b < hi_ns) {
    // Work with no usable launch record ends the gap. Where the window's
    // other work has launch records, this work was launched outside what the
    // host recorded (NCCL's follow-up copies, a graph launched before the
    // trace): a gap this short is the device's turnaround, as it is when
    // the launch is known.
    if (b - a < kKernelGapNs && facts.thread >= 0) {
      credit(out, IdleCause::kKernelGap, work_culprit(acts[*first]), a, b);
      return;
    }
    end_of.work_start_ns = b;
    end_of.waiting = work_culprit(acts[*first]);
  }
  if (thread < 0) thread = fallback_thread;
  int64_t host_end = b;
  if (launch_from != kNever) {
    host_end = std::clamp(launch_from, a, b);
    credit(out, IdleCause::kLaunch, launch_name, host_end, b);
  }
  if (host_end <= a) return;
  if (thread < 0 || static_cast<size_t>(thread) >= host.threads.size() || !host.threads[thread].has_events) {
    credit(out, IdleCause::kUnattributed, kNoHostCulprit, a, host_end);
    return;
  }
  split_by_host_state(host, host.threads[thread], static_cast<uint32_t>(thread), end_of, a, host_end, out,
                      &facts.others);
}

}  // namespace

void attribute_idle(const EventStore& store, const DeviceTimeline& device, const HostTimelines& host,
                    int64_t fallback_thread, int64_t lo_ns, int64_t hi_ns, IdleAccount& out) {
  // Gaps whose next work has no known launch are explained by the window's
  // main launching thread, else the device's, else the caller's fallback.
  const WindowFacts facts = window_facts(store, device, host, lo_ns, hi_ns);
  std::optional<DispatchModel> dispatch;
  int64_t fallback = facts.thread;
  if (fallback < 0) {
    auto m = host.main_thread_by_device.find(device.device);
    fallback = m != host.main_thread_by_device.end() ? m->second : fallback_thread;
  }
  int64_t cur = lo_ns;
  for (size_t i = first_ending_after(device.busy, lo_ns); cur < hi_ns; ++i) {
    const int64_t gap_end = (i < device.busy.size()) ? std::min(device.busy[i].start_ns, hi_ns) : hi_ns;
    if (gap_end > cur) attribute_gap(store, device, host, facts, dispatch, lo_ns, fallback, cur, gap_end, hi_ns, out);
    if (i >= device.busy.size()) break;
    cur = std::max(cur, device.busy[i].end_ns);
  }
}

}  // namespace gpuutil
