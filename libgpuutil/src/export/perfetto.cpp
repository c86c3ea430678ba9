// Chrome trace / Perfetto JSON of the analysed timeline (see gpuutil/perfetto.h).
//
// Reuses the analysis core's own stages (device timelines, host timelines,
// idle attribution with its segment output) so that the idle-cause track
// shows exactly the time the report accounts, piece by piece. Each rank
// also gets a host process: its steps and a thread per host thread with
// its ranges and runtime calls, in lanes where they do not nest (so a CPU
// profiler trace exports its host timeline). Serialisation is
// nlohmann::ordered_json; invalid UTF-8 in names is replaced.
#include "gpuutil/perfetto.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/device_timeline.h"
#include "analysis/host_timeline.h"
#include "analysis/windows.h"
#include "analysis/idle_attribution.h"

namespace gpuutil {

namespace {

using Json = nlohmann::ordered_json;

// Thread ids inside a GPU's process.
constexpr int64_t kStepsTid = 1;
constexpr int64_t kIdleTid = 2;
constexpr int64_t kStreamTidBase = 1000;  // + stream * 16 + lane
// The host process of a rank: rank * 1000 + kHostPid (GPU processes are
// rank * 1000 + device + 1); its threads are kHostTidBase + thread * 64 + lane.
constexpr int64_t kHostPid = 999;
constexpr int64_t kHostTidBase = 1000;
constexpr int64_t kHostLanes = 64;
// Timestamps are written relative to the earliest event of all stores (the
// origin is in otherData.time_origin_ns): absolute session-clock ns as µs
// doubles would lose sub-µs precision and make adjacent slices overlap.
double us(int64_t ns, int64_t origin_ns) { return static_cast<double>(ns - origin_ns) / 1000.0; }

Json meta(const char* what, int64_t pid, int64_t tid, const std::string& name) {
  Json j = Json::object();
  j["ph"] = "M";
  j["name"] = what;
  j["pid"] = pid;
  j["tid"] = tid;
  j["args"] = Json::object({{"name", name}});
  return j;
}

Json slice(const std::string& name, const char* cat, int64_t pid, int64_t tid, int64_t start_ns, int64_t end_ns,
           int64_t origin_ns) {
  Json j = Json::object();
  j["ph"] = "X";
  j["name"] = name;
  j["cat"] = cat;
  j["pid"] = pid;
  j["tid"] = tid;
  j["ts"] = us(start_ns, origin_ns);
  j["dur"] = us(end_ns - start_ns, 0);
  return j;
}

const char* kind_cat(const EventStore& s, uint32_t i, const std::vector<uint8_t>& in_collective) {
  const DeviceActivity& a = s.activities[i];
  if (a.kind == ActivityKind::kMemcpy) return "memcpy";
  if (a.kind == ActivityKind::kMemset) return "memset";
  return is_communication_work(s, i, &in_collective) ? "communication" : "kernel";
}

void add_store(const EventStore& s, int64_t origin_ns, Json& events) {
  const auto host = build_host_timelines(s);
  const auto devices = build_device_timelines(s, &host.in_collective);
  const int64_t fallback = busiest_thread(s);
  const auto windows = analysis_windows(s);

  std::map<int32_t, int64_t> pid_of;  // device -> pid
  auto pid_for = [&](int32_t device) {
    auto it = pid_of.find(device);
    if (it != pid_of.end()) return it->second;
    const int64_t pid = int64_t{s.rank} * 1000 + device + 1;
    pid_of.emplace(device, pid);
    std::string name = "rank " + std::to_string(s.rank) + " GPU " + std::to_string(device);
    if (const DeviceInfo* info = s.device_info(device); info && !info->name.empty()) name += " (" + info->name + ")";
    events.push_back(meta("process_name", pid, 0, name));
    Json sort = meta("process_sort_index", pid, 0, "");
    sort["args"] = Json::object({{"sort_index", pid}});
    events.push_back(std::move(sort));
    events.push_back(meta("thread_name", pid, kStepsTid, "steps"));
    events.push_back(meta("thread_name", pid, kIdleTid, "idle causes"));
    return pid;
  };

  for (const auto& tl : devices) {
    const int64_t pid = pid_for(tl.device);
    // Device work, one lane per stream unless it overlaps there.
    std::map<int32_t, std::vector<int64_t>> lane_ends;  // stream -> end of the last slice per lane
    for (uint32_t idx : tl.by_start) {
      const DeviceActivity& a = s.activities[idx];
      auto& lanes = lane_ends[a.stream];
      size_t lane = 0;
      while (lane < lanes.size() && lanes[lane] > a.start_ns) ++lane;
      if (lane == lanes.size()) {
        lanes.push_back(0);
        std::string tname = "stream " + std::to_string(a.stream);
        if (lane > 0) tname += " #" + std::to_string(lane);
        events.push_back(meta("thread_name", pid, kStreamTidBase + int64_t{a.stream} * 16 + int64_t(lane), tname));
      }
      lanes[lane] = a.end_ns;
      Json j = slice(std::string(s.names.view(a.name)), kind_cat(s, idx, host.in_collective), pid,
                     kStreamTidBase + int64_t{a.stream} * 16 + int64_t(lane), a.start_ns, a.end_ns, origin_ns);
      if (a.kind == ActivityKind::kKernel && a.blocks() > 0) {
        j["args"] = Json::object({{"grid", {a.grid[0], a.grid[1], a.grid[2]}},
                                  {"block", {a.block[0], a.block[1], a.block[2]}}});
      } else if (a.bytes > 0) {
        j["args"] = Json::object({{"bytes", a.bytes}, {"direction", to_string(a.direction)}});
      }
      events.push_back(std::move(j));
    }
    // Steps and the idle-cause track.
    for (const auto& w : windows) {
      events.push_back(slice("step " + std::to_string(w.step), "step", pid, kStepsTid, w.start_ns, w.end_ns, origin_ns));
      std::vector<IdleSegment> segments;
      IdleAccount idle;
      idle.segments = &segments;
      attribute_idle(s, tl, host, fallback, w.start_ns, w.end_ns, idle);
      std::sort(segments.begin(), segments.end(),
                [](const IdleSegment& a, const IdleSegment& b) { return a.start_ns < b.start_ns; });
      for (const auto& seg : segments) {
        Json j = slice(to_string(seg.cause), "idle", pid, kIdleTid, seg.start_ns, seg.end_ns, origin_ns);
        Json args = Json::object({{"step", w.step}});
        args["culprit"] = culprit_name(s, seg.culprit);
        j["args"] = std::move(args);
        events.push_back(std::move(j));
      }
    }
  }
  // Counters (NVML, GPM, allocator), on the device's process.
  for (const auto& c : s.counters) {
    Json j = Json::object();
    j["ph"] = "C";
    j["name"] = std::string(s.names.view(c.counter));
    j["pid"] = pid_for(c.device);
    j["tid"] = 0;
    j["ts"] = us(c.ts_ns, origin_ns);
    j["args"] = Json::object({{"value", c.value}});
    events.push_back(std::move(j));
  }
}

// The rank's host process: steps, then each host thread's ranges and
// runtime calls. A slice goes to the first lane of its thread where it
// nests (Chrome's format needs nesting per track).
void add_host(const EventStore& s, int64_t origin_ns, Json& events) {
  if (s.ranges.empty() && s.api_calls.empty()) return;
  const int64_t pid = int64_t{s.rank} * 1000 + kHostPid;
  events.push_back(meta("process_name", pid, 0, "rank " + std::to_string(s.rank) + " host"));
  Json sort = meta("process_sort_index", pid, 0, "");
  sort["args"] = Json::object({{"sort_index", int64_t{s.rank} * 1000}});  // before the rank's GPUs
  events.push_back(std::move(sort));
  events.push_back(meta("thread_name", pid, kStepsTid, "steps"));
  for (const auto& w : analysis_windows(s)) {
    events.push_back(slice("step " + std::to_string(w.step), "step", pid, kStepsTid, w.start_ns, w.end_ns, origin_ns));
  }
  struct Piece {
    int64_t start_ns, end_ns;
    uint32_t thread;
    NameId name;
    const char* cat;
  };
  std::vector<Piece> pieces;
  pieces.reserve(s.ranges.size() + s.api_calls.size());
  for (const auto& r : s.ranges) pieces.push_back({r.start_ns, r.end_ns, r.thread, r.name, to_string(r.category)});
  for (const auto& c : s.api_calls) pieces.push_back({c.start_ns, c.end_ns, c.thread, c.name, "runtime"});
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;  // outer first
  });
  std::map<uint32_t, std::vector<std::vector<int64_t>>> lanes;  // thread -> lane -> open slices' ends
  for (const Piece& p : pieces) {
    auto& thread_lanes = lanes[p.thread];
    size_t lane = 0;
    for (; lane < thread_lanes.size(); ++lane) {
      auto& open = thread_lanes[lane];
      while (!open.empty() && open.back() <= p.start_ns) open.pop_back();
      if (open.empty() || open.back() >= p.end_ns) break;  // nests here
    }
    if (lane == thread_lanes.size()) {
      if (lane == static_cast<size_t>(kHostLanes)) continue;  // pathological overlap: not drawn
      thread_lanes.emplace_back();
      std::string tname;
      if (p.thread < s.threads.size()) {
        const HostThread& t = s.threads[p.thread];
        tname = t.name.empty() ? "thread " + std::to_string(t.display_tid()) : t.name;
      } else {
        tname = "thread #" + std::to_string(p.thread);
      }
      if (lane > 0) tname += " #" + std::to_string(lane);
      events.push_back(meta("thread_name", pid, kHostTidBase + int64_t{p.thread} * kHostLanes + int64_t(lane), tname));
    }
    thread_lanes[lane].push_back(p.end_ns);
    events.push_back(slice(std::string(s.names.view(p.name)), p.cat, pid,
                           kHostTidBase + int64_t{p.thread} * kHostLanes + int64_t(lane), p.start_ns, p.end_ns,
                           origin_ns));
  }
}

}  // namespace

std::string timeline_to_chrome_trace(const std::vector<const EventStore*>& stores, const AnalysisOptions& /*options*/,
                                     int indent) {
  int64_t origin_ns = std::numeric_limits<int64_t>::max();
  for (const EventStore* s : stores) {
    for (const auto& w : analysis_windows(*s)) origin_ns = std::min(origin_ns, w.start_ns);
    for (const auto& a : s->activities) origin_ns = std::min(origin_ns, a.start_ns);
    for (const auto& c : s->counters) origin_ns = std::min(origin_ns, c.ts_ns);
    for (const auto& r : s->ranges) origin_ns = std::min(origin_ns, r.start_ns);
    for (const auto& c : s->api_calls) origin_ns = std::min(origin_ns, c.start_ns);
  }
  if (origin_ns == std::numeric_limits<int64_t>::max()) origin_ns = 0;
  Json events = Json::array();
  for (const EventStore* s : stores) {
    add_host(*s, origin_ns, events);
    add_store(*s, origin_ns, events);
  }
  Json root = Json::object();
  root["traceEvents"] = std::move(events);
  root["displayTimeUnit"] = "ns";
  root["otherData"] = Json::object({{"generator", "gpuutil"}, {"time_origin_ns", origin_ns}});
  return root.dump(indent < 0 ? -1 : indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gpuutil
