// Trace replay through the live path (see replay.h).
#include "replay.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <thread>
#include <unordered_map>

#include "collectors/torch/hook_drain.h"
#include "fake_cupti_client.h"
#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"
#include "gpuutil/range_classify.h"
#include "gpuutil/run_totals.h"
#include "gpuutil/thread_key.h"
#include "hook_ring.h"

namespace gpuutil::replay {

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

struct ReplayTag {};
// The LibTorch hook's queue code, one queue set for the replay. A larger
// slab than the hook's (2M ranges between drains): a recorded trace holds
// every aten op, where the hook records only the ranges its categories need.
using Rings = gpuutil_hook::RingSet<ReplayTag, 1024, 2048>;
const GpuutilHookApi kRingsApi = {GPUUTIL_HOOK_API_VERSION, &Rings::drain_into};

void sleep_until(int64_t t_ns) {
  for (int64_t now = session_now_ns(); now < t_ns; now = session_now_ns()) {
    timespec ts{0, static_cast<long>(std::min<int64_t>(t_ns - now, 1'000'000))};
    nanosleep(&ts, nullptr);
  }
}

uint8_t copy_kind(MemcpyDirection d) {
  switch (d) {
    case MemcpyDirection::kHostToDevice: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    case MemcpyDirection::kDeviceToHost: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    case MemcpyDirection::kDeviceToDevice: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    case MemcpyDirection::kHostToHost: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
    case MemcpyDirection::kPeerToPeer: return CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    default: return CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
  }
}

// One host event of a replay thread, made at `t_ns` (session clock).
struct HostEvent {
  int64_t t_ns;
  bool api;      // an API call (else a host range, recorded at its end)
  size_t index;  // into store.api_calls / store.ranges
};

// Everything prepared before the clock starts, so threads only sleep and call.
struct Plan {
  const EventStore& store;
  int64_t offset_ns;  // session time = trace time + offset
  std::vector<std::string> names;  // NUL-terminated copies, by NameId
  std::vector<std::vector<HostEvent>> threads;
  std::vector<uint32_t> trace_thread;  // by replay thread: its thread in the trace
  std::unordered_map<uint64_t, std::vector<size_t>> work_by_correlation;  // activities
  std::vector<uint32_t> cbid;   // by api call: 0 = unknown name
  std::vector<int> domain;
  std::vector<bool> owns_work;  // by api call: the call that enqueues its correlation id's activities
  std::vector<uint8_t> range_kind;  // by range: 0 user scope, 1 op
  std::vector<size_t> device_only;  // activities with no launching call
};

fake_cupti_work work_of(const Plan& p, const DeviceActivity& a) {
  fake_cupti_work w{};
  w.kind = a.kind == ActivityKind::kKernel   ? FAKE_CUPTI_KERNEL
           : a.kind == ActivityKind::kMemcpy ? FAKE_CUPTI_MEMCPY
                                             : FAKE_CUPTI_MEMSET;
  w.name = p.names[a.name].c_str();
  w.device = static_cast<uint32_t>(a.device);
  w.stream = static_cast<uint32_t>(a.stream);
  w.start_ns = a.start_ns + p.offset_ns;
  w.end_ns = a.end_ns + p.offset_ns;
  for (int i = 0; i < 3; ++i) {
    w.grid[i] = a.grid[i];
    w.block[i] = a.block[i];
  }
  w.registers_per_thread = a.registers_per_thread;
  w.shared_memory_bytes = a.shared_memory_bytes;
  w.bytes = a.bytes;
  w.copy_kind = copy_kind(a.direction);
  if (a.host_pageable) {  // the host side of the copy
    (a.direction == MemcpyDirection::kDeviceToHost ? w.dst_kind : w.src_kind) = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  }
  w.graph_id = a.graph_id;
  return w;
}

}  // namespace

namespace {

// Every time divided by k, and device activity times then moved skew_ns earlier.
EventStore retimed(const EventStore& store, int64_t k, int64_t skew_ns) {
  EventStore out;
  for (NameId id = 0; id < store.names.size(); ++id) out.names.intern(store.names.view(id));
  auto s = [k](int64_t t) { return t / k; };
  for (DeviceActivity a : store.activities) {
    a.start_ns = s(a.start_ns) - skew_ns;
    a.end_ns = s(a.end_ns) - skew_ns;
    out.activities.push_back(a);
  }
  for (HostApiCall c : store.api_calls) {
    c.start_ns = s(c.start_ns);
    c.end_ns = s(c.end_ns);
    out.api_calls.push_back(c);
  }
  for (HostRange r : store.ranges) {
    r.start_ns = s(r.start_ns);
    r.end_ns = s(r.end_ns);
    out.ranges.push_back(r);
  }
  for (StepWindow w : store.steps) {
    w.start_ns = s(w.start_ns);
    w.end_ns = s(w.end_ns);
    out.steps.push_back(w);
  }
  for (CounterSample c : store.counters) {
    c.ts_ns = s(c.ts_ns);
    out.counters.push_back(c);
  }
  out.devices = store.devices;
  out.threads = store.threads;
  out.diagnostics = store.diagnostics;
  out.rank = store.rank;
  out.source = store.source;
  out.steps_source = store.steps_source;
  return out;
}

}  // namespace

EventStore scaled(const EventStore& store, int64_t time_scale) { return retimed(store, time_scale, 0); }

EventStore skewed(const EventStore& store, int64_t skew_ns) { return retimed(store, 1, skew_ns); }

ReplayResult replay(const EventStore& store, const ReplayOptions& options) {
  ReplayResult result;
  if (store.steps.empty()) {
    result.error = "the trace has no steps to replay";
    return result;
  }
  testing::FakeCupti& fake = testing::FakeCupti::get();
  const testing::ScopedCell cell(options.cell);
  fake.reset(nullptr);

  // ---- plan ----
  int64_t t0 = kNever;
  for (const auto& a : store.activities) t0 = std::min(t0, a.start_ns);
  for (const auto& c : store.api_calls) t0 = std::min(t0, c.start_ns);
  for (const auto& r : store.ranges) t0 = std::min(t0, r.start_ns);
  for (const auto& w : store.steps) t0 = std::min(t0, w.start_ns);
  Plan p{store, session_now_ns() + options.lead_ns - t0, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  for (NameId id = 0; id < store.names.size(); ++id) p.names.emplace_back(store.names.view(id));
  for (size_t i = 0; i < store.activities.size(); ++i) {
    const uint64_t corr = store.activities[i].correlation_id;
    if (corr != 0) p.work_by_correlation[corr].push_back(i);
  }
  p.threads.resize(store.threads.size());
  p.cbid.resize(store.api_calls.size());
  p.domain.resize(store.api_calls.size());
  std::unordered_map<NameId, std::pair<uint32_t, int>> cbids;
  std::unordered_map<uint64_t, size_t> launched;  // correlation id -> the replayed call that enqueues it
  p.owns_work.assign(store.api_calls.size(), false);
  for (size_t i = 0; i < store.api_calls.size(); ++i) {
    const HostApiCall& c = store.api_calls[i];
    auto it = cbids.find(c.name);
    if (it == cbids.end()) {
      int domain = 0;
      const uint32_t id = fake.cbid(p.names[c.name].c_str(), &domain);
      it = cbids.emplace(c.name, std::make_pair(id, domain)).first;
    }
    p.cbid[i] = it->second.first;
    p.domain[i] = it->second.second;
    if (p.cbid[i] == 0) {
      ++result.stats.api_unknown;
      continue;
    }
    if (c.correlation_id != 0 && p.work_by_correlation.count(c.correlation_id) &&
        launched.emplace(c.correlation_id, i).second) {
      p.owns_work[i] = true;
    }
    if (c.thread < p.threads.size()) p.threads[c.thread].push_back({c.end_ns + p.offset_ns, true, i});
  }
  p.range_kind.resize(store.ranges.size());
  for (size_t i = 0; i < store.ranges.size(); ++i) {
    const HostRange& r = store.ranges[i];
    // The hook reports ops (FUNCTION scope) as kind 1: pick the kind under
    // which the live drain classifies the name as the importer did.
    p.range_kind[i] = classify_range(p.names[r.name], true) == r.category ? 1 : 0;
    if (r.thread < p.threads.size()) p.threads[r.thread].push_back({r.end_ns + p.offset_ns, false, i});
  }
  for (size_t i = 0; i < store.activities.size(); ++i) {
    const uint64_t corr = store.activities[i].correlation_id;
    if (corr == 0 || !launched.count(corr)) p.device_only.push_back(i);
  }
  std::sort(p.device_only.begin(), p.device_only.end(),
            [&](size_t a, size_t b) { return store.activities[a].start_ns < store.activities[b].start_ns; });
  for (auto& events : p.threads) {
    std::stable_sort(events.begin(), events.end(),
                     [](const HostEvent& a, const HostEvent& b) { return a.t_ns < b.t_ns; });
  }
  for (uint32_t t = 0; t < p.threads.size(); ++t) {
    if (!p.threads[t].empty()) p.trace_thread.push_back(t);
  }
  p.threads.erase(std::remove_if(p.threads.begin(), p.threads.end(), [](const auto& e) { return e.empty(); }),
                  p.threads.end());
  result.stats.threads = static_cast<int>(p.threads.size());
  result.stats.device_only = p.device_only.size();

  // ---- the live path ----
  ProfilerOptions po;
  po.session.rank = store.rank;
  po.live.nvtx = false;
  Profiler prof(po);
  const std::string why = prof.start();
  if (!why.empty()) {
    result.error = "GPU collection did not start on the fake CUPTI: " + why;
    return result;
  }
  prof.session().set_devices(store.devices);
  torch_hook::HookDrain hook(prof.session(), &kRingsApi, /*skip_optimizer_step=*/false);
  Rings::drain_into([](void*, const char*, int64_t, int64_t, int64_t, int64_t, int) {}, nullptr);  // earlier replays

  const auto wall0 = std::chrono::steady_clock::now();
  std::vector<std::atomic<int64_t>> progress(p.threads.size());
  std::atomic<int64_t> lateness{0};
  std::atomic<uint64_t> api_calls{0}, ranges{0};
  std::vector<std::thread> workers;
  for (size_t ti = 0; ti < p.threads.size(); ++ti) {
    progress[ti].store(p.threads[ti].front().t_ns);
    workers.emplace_back([&, ti] {
      // Named as the trace's thread, before any source meets it, so culprits
      // that name a thread read the same live and offline; its generation is
      // its own OS tid, which the hook rings give (gpuutil/event_sink.h).
      const HostThread& as = store.threads[p.trace_thread[ti]];
      prof.session().thread_index_with_generation(getpid(), this_thread_key(), as.name, as.display_tid(), this_os_tid());
      std::vector<fake_cupti_work> work;
      const auto& events = p.threads[ti];
      for (size_t e = 0; e < events.size(); ++e) {
        const HostEvent& ev = events[e];
        sleep_until(ev.t_ns);
        const int64_t late = session_now_ns() - ev.t_ns;
        if (late > lateness.load(std::memory_order_relaxed)) lateness.store(late, std::memory_order_relaxed);
        if (ev.api) {
          const HostApiCall& c = store.api_calls[ev.index];
          work.clear();
          if (p.owns_work[ev.index]) {
            auto it = p.work_by_correlation.find(c.correlation_id);
            if (it != p.work_by_correlation.end()) {
              for (size_t a : it->second) work.push_back(work_of(p, store.activities[a]));
            }
          }
          fake_cupti_call call{};
          call.domain = p.domain[ev.index];
          call.cbid = p.cbid[ev.index];
          call.start_ns = c.start_ns + p.offset_ns;
          call.end_ns = c.end_ns + p.offset_ns;
          call.work = work.data();
          call.n_work = static_cast<int>(work.size());
          fake.call(&call);
          api_calls.fetch_add(1, std::memory_order_relaxed);
        } else {
          const HostRange& r = store.ranges[ev.index];
          Rings::record(p.names[r.name].c_str(), r.start_ns + p.offset_ns, r.end_ns + p.offset_ns,
                        p.range_kind[ev.index]);
          ranges.fetch_add(1, std::memory_order_relaxed);
        }
        progress[ti].store(e + 1 < events.size() ? events[e + 1].t_ns : kNever, std::memory_order_release);
      }
    });
  }
  // Every thread has made its calls up to and including t.
  auto all_past = [&](int64_t t) {
    for (;;) {
      bool ok = true;
      for (auto& pr : progress) ok = ok && pr.load(std::memory_order_acquire) > t;
      if (ok) return;
      hook.drain();
      timespec ts{0, 100'000};
      nanosleep(&ts, nullptr);
    }
  };
  // The main thread: device work with no launching call, step boundaries,
  // and the drains the PyTorch collector does at step ends.
  size_t next_device = 0;
  auto device_only_until = [&](int64_t t) {
    for (; next_device < p.device_only.size(); ++next_device) {
      const DeviceActivity& a = store.activities[p.device_only[next_device]];
      if (a.start_ns + p.offset_ns > t) break;
      const fake_cupti_work w = work_of(p, a);
      fake.device_work(&w, 0);
    }
  };
  auto wait_until = [&](int64_t t) {
    for (int64_t now = session_now_ns(); now < t; now = session_now_ns()) {
      device_only_until(now);
      hook.drain();
      sleep_until(std::min(t, now + 2'000'000));
    }
    device_only_until(t);
  };
  std::vector<StepWindow> steps = store.steps;
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  for (const StepWindow& w : steps) {
    wait_until(w.start_ns + p.offset_ns);
    prof.begin_step(w.step, w.start_ns + p.offset_ns);
    const int64_t end = w.end_ns + p.offset_ns;
    wait_until(end);
    all_past(end);
    hook.drain();
    prof.end_step(end);
    if (options.progress) std::fprintf(stderr, "[replay] step %lld\n", static_cast<long long>(w.step));
  }
  for (auto& t : workers) t.join();
  device_only_until(kNever);
  hook.drain();
  prof.stop();
  result.steps = prof.take_reports();
  result.stats.api_calls = api_calls.load();
  result.stats.ranges = ranges.load();
  result.stats.max_lateness_ns = lateness.load();
  result.stats.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return result;
}

int64_t Comparison::max_abs_ns() const {
  int64_t m = 0;
  for (const auto& b : buckets) m = std::max(m, b.max_abs_ns);
  return m;
}

namespace {

constexpr size_t kDifferencesDescribed = 12;

std::string describe(const std::vector<NamedTime>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    s += (i ? ", " : "") + v[i].name + " " + std::to_string(v[i].ns) + " ns x" + std::to_string(v[i].count);
  }
  return s + "]";
}

// A name without CUPTI's version suffix: cuptiGetCallbackName says
// "cudaDeviceSynchronize_v3020" where Kineto's traces say
// "cudaDeviceSynchronize".
std::string unversioned(const std::string& name) {
  const size_t v = name.rfind("_v");
  if (v == std::string::npos || v + 2 == name.size()) return name;
  for (size_t i = v + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, v);
}

bool same(const std::vector<NamedTime>& a, const std::vector<NamedTime>& b, bool ignore_version_suffix) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool names = ignore_version_suffix ? unversioned(a[i].name) == unversioned(b[i].name) : a[i].name == b[i].name;
    if (!names || a[i].ns != b[i].ns || a[i].count != b[i].count) return false;
  }
  return true;
}

std::string describe(const std::optional<int64_t>& v) { return v ? std::to_string(*v) + " ns" : "none"; }

// Culprits, launch latency and counts of one step and device.
void compare_device(Comparison& c, int64_t step, const DeviceStepReport& live, const DeviceStepReport& off) {
  const std::string where = "step " + std::to_string(step) + " device " + std::to_string(off.device) + ": ";
  auto differ = [&](const char* what, const std::string& text) {
    ++c.differing[what];
    if (c.differences.size() < kDifferencesDescribed) c.differences.push_back(where + text);
  };
  for (int i = 0; i < kIdleCauseCount; ++i) {
    const auto& a = live.culprits[size_t(i)];
    const auto& b = off.culprits[size_t(i)];
    if (same(a, b, false)) continue;
    differ(same(a, b, true) ? "culprit_names" : "culprits",
           std::string("idle_") + to_string(IdleCause(i)) + " culprits: live " + describe(a) + ", offline " + describe(b));
    break;
  }
  const std::pair<const char*, std::pair<std::optional<int64_t>, std::optional<int64_t>>> latencies[] = {
      {"launch latency p50", {live.launch_latency_p50_ns, off.launch_latency_p50_ns}},
      {"launch latency p95", {live.launch_latency_p95_ns, off.launch_latency_p95_ns}},
      {"graph launch latency p50", {live.graph_launch_latency_p50_ns, off.graph_launch_latency_p50_ns}},
      {"graph launch latency p95", {live.graph_launch_latency_p95_ns, off.graph_launch_latency_p95_ns}}};
  for (const auto& [what, v] : latencies) {
    if (v.first != v.second) {
      differ("launch_latency", std::string(what) + ": live " + describe(v.first) + ", offline " + describe(v.second));
      break;
    }
  }
  if (live.kernels != off.kernels || live.memcpys != off.memcpys || live.memsets != off.memsets ||
      live.graph_kernels != off.graph_kernels) {
    differ("counts", "kernels/memcpys/memsets/graph kernels: live " + std::to_string(live.kernels) + "/" +
                         std::to_string(live.memcpys) + "/" + std::to_string(live.memsets) + "/" +
                         std::to_string(live.graph_kernels) + ", offline " + std::to_string(off.kernels) + "/" +
                         std::to_string(off.memcpys) + "/" + std::to_string(off.memsets) + "/" +
                         std::to_string(off.graph_kernels));
  }
}

std::string describe(const std::vector<Finding>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].id + " " + std::to_string(v[i].recoverable_ns) + " ns";
  return s + "]";
}

// The run's findings as every surface shows them (run_totals.h), from the
// live step reports and from the offline report.
void compare_findings(Comparison& c, const Report& offline, const std::vector<StepOutput>& live) {
  std::vector<Report> reports;
  for (const auto& o : live) reports.push_back(o.report);
  const std::vector<Finding> l = run_findings(run_totals_of_reports(reports));
  const std::vector<Finding> o = run_findings(run_totals_of_reports({offline}));
  bool equal = l.size() == o.size();
  for (size_t i = 0; equal && i < l.size(); ++i) equal = l[i].id == o[i].id && l[i].recoverable_ns == o[i].recoverable_ns;
  if (!equal) {
    ++c.differing["findings"];
    c.differences.push_back("run findings: live " + describe(l) + ", offline " + describe(o));
  }
}

}  // namespace

bool no_cupti_data_in_a_step(const std::vector<StepOutput>& live, const Report& offline) {
  std::map<int64_t, bool> offline_busy;  // step -> any device work
  for (const StepReport& s : offline.steps) {
    for (const auto& d : s.devices) offline_busy[s.step] = offline_busy[s.step] || d.busy_ns > 0;
  }
  for (const auto& o : live) {
    bool empty = !o.report.sources.empty();
    for (const auto& src : o.report.sources) empty = empty && src.activities == 0 && src.api_calls == 0;
    if (!empty) continue;
    for (const StepReport& s : o.report.steps) {
      if (offline_busy[s.step]) return true;
    }
  }
  return false;
}

Comparison compare(const Report& offline, const std::vector<StepOutput>& live) {
  Comparison c;
  std::vector<std::string> names = {"compute", "communication", "memory"};
  for (int i = 0; i < kIdleCauseCount; ++i) names.push_back(std::string("idle_") + to_string(IdleCause(i)));
  for (const auto& n : names) c.buckets.push_back({n, 0, -1, -1});
  std::map<int64_t, const StepReport*> by_step;
  for (const auto& o : live) {
    for (const auto& s : o.report.steps) by_step[s.step] = &s;
  }
  auto values = [](const Breakdown& b) {
    std::vector<int64_t> v = {b.compute_ns, b.communication_ns, b.memory_ns};
    for (int64_t x : b.idle_ns) v.push_back(x);
    return v;
  };
  for (const StepReport& off : offline.steps) {
    ++c.steps;
    auto it = by_step.find(off.step);
    if (it == by_step.end()) {
      c.problems.push_back("step " + std::to_string(off.step) + " has no live report");
      continue;
    }
    for (const DeviceStepReport& d : off.devices) {
      const DeviceStepReport* l = nullptr;
      for (const auto& x : it->second->devices) {
        if (x.device == d.device) l = &x;
      }
      if (l == nullptr) {
        c.problems.push_back("step " + std::to_string(off.step) + " device " + std::to_string(d.device) +
                             " has no live report");
        continue;
      }
      const auto a = values(l->breakdown), b = values(d.breakdown);
      for (size_t i = 0; i < a.size(); ++i) {
        const int64_t diff = std::llabs(a[i] - b[i]);
        if (diff > c.buckets[i].max_abs_ns) c.buckets[i] = {c.buckets[i].bucket, diff, off.step, d.device};
      }
      compare_device(c, off.step, *l, d);
    }
  }
  compare_findings(c, offline, live);
  if (by_step.size() != offline.steps.size()) {
    c.problems.push_back(std::to_string(by_step.size()) + " live steps for " + std::to_string(offline.steps.size()) +
                         " offline steps");
  }
  return c;
}

}  // namespace gpuutil::replay
