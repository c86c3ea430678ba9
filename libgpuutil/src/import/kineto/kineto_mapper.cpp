// Kineto event -> EventStore mapping (see kineto_mapper.h and
// docs/trace-import.md for the per-category rules).
#include "import/kineto/kineto_mapper.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "import/kineto/decimal_time.h"
#include "import/kineto/step_windows.h"
#include "gpuutil/range_classify.h"

namespace gpuutil::replay {

namespace {

bool fits_int32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

uint32_t to_u32_or_zero(int64_t v) {
  return (v >= 0 && v <= int64_t{std::numeric_limits<uint32_t>::max()}) ? static_cast<uint32_t>(v) : 0;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "stream 7" (Kineto device rows) -> 7.
bool parse_stream_label(std::string_view text, int64_t* out) {
  constexpr std::string_view kPrefix = "stream ";
  if (!starts_with(text, kPrefix)) return false;
  text.remove_prefix(kPrefix.size());
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return parse_int64(text, out);
}

// A device-row id: integer, numeric string, or "stream N".
bool device_row_id(const JsonId& id, int64_t* out) {
  if (id.state != FieldState::kOk) return false;
  if (!id.is_string) {
    *out = id.number;
    return true;
  }
  return parse_int64(id.text, out) || parse_stream_label(id.text, out);
}

MemcpyDirection direction_from(std::string_view text) {
  struct Rule {
    std::string_view token;
    MemcpyDirection direction;
  };
  constexpr Rule kRules[] = {
      {"HtoD", MemcpyDirection::kHostToDevice},  {"DtoH", MemcpyDirection::kDeviceToHost},
      {"DtoD", MemcpyDirection::kDeviceToDevice}, {"HtoH", MemcpyDirection::kHostToHost},
      {"PtoP", MemcpyDirection::kPeerToPeer},    {"Peer", MemcpyDirection::kPeerToPeer},
  };
  for (const Rule& r : kRules) {
    if (text.find(r.token) != std::string_view::npos) return r.direction;
  }
  return MemcpyDirection::kUnknown;
}

}  // namespace

void KinetoMapper::note(Diag d, uint64_t index, const char* what, std::string_view detail) {
  if (!store_->diagnostics.example(d).empty()) {
    store_->diagnostics.add(d);
    return;
  }
  std::string example = "event #" + std::to_string(index) + ": " + what;
  if (!detail.empty()) {
    example += " (";
    example.append(detail.substr(0, 80));
    example += ")";
  }
  store_->diagnostics.add(d, 1, example);
}

void KinetoMapper::consume(const RawEvent& e, uint64_t index) {
  if (e.ph_state != FieldState::kOk) {
    note(Diag::event_malformed, index, "missing or non-string \"ph\"");
    return;
  }
  if (e.ph.size() == 1) {
    switch (e.ph[0]) {
      case 'X':
        complete_event(e, index);
        return;
      case 'M':
        metadata_event(e, index);
        return;
      case 's':  // flow start / step / finish: correlation arrows
      case 't':
      case 'f':
      case 'i':  // instant events (memory, iteration markers)
      case 'I':
        return;
      default:
        break;
    }
  }
  note(Diag::event_unknown_phase, index, "phase", e.ph);
}

bool KinetoMapper::is_inert(const RawEvent& e) {
  if (e.ph_state != FieldState::kOk || e.ph.size() != 1) return false;
  switch (e.ph[0]) {
    case 's':
    case 't':
    case 'f':
    case 'i':
    case 'I':
      return true;
    case 'X':  // complete_event() returns first thing for these
      return e.cat_state == FieldState::kOk && classify_category(e.cat) == EventClass::kKnownUnused;
    default:
      return false;
  }
}

void KinetoMapper::complete_event(const RawEvent& e, uint64_t index) {
  if (e.cat_state == FieldState::kWrongType) {
    note(Diag::event_malformed, index, "non-string \"cat\"");
    return;
  }
  const EventClass cls = e.cat_state == FieldState::kOk ? classify_category(e.cat) : EventClass::kUnknown;
  if (cls == EventClass::kKnownUnused) return;
  if (cls == EventClass::kUnknown) {
    note(Diag::event_unknown_category, index, "category", e.cat_state == FieldState::kOk ? e.cat : "<none>");
    return;
  }
  if (e.name_state != FieldState::kOk) {
    note(Diag::event_malformed, index, "missing or non-string \"name\"");
    return;
  }
  if (e.ts_state != FieldState::kOk || e.dur_state != FieldState::kOk) {
    note(Diag::event_malformed, index, e.ts_state != FieldState::kOk ? "missing or non-number \"ts\"" :
                                                                       "missing or non-number \"dur\"", e.name);
    return;
  }
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  const DecimalStatus ts_status = parse_us_to_ns(e.ts_token, &start_ns);
  const DecimalStatus dur_status = parse_us_to_ns(e.dur_token, &dur_ns);
  if (ts_status == DecimalStatus::kInvalid || dur_status == DecimalStatus::kInvalid) {
    note(Diag::event_malformed, index, "unparsable number", ts_status == DecimalStatus::kInvalid ? e.ts_token : e.dur_token);
    return;
  }
  if (ts_status == DecimalStatus::kOutOfRange || dur_status == DecimalStatus::kOutOfRange) {
    note(Diag::event_timestamp_out_of_range, index, "time beyond int64 ns",
         ts_status == DecimalStatus::kOutOfRange ? e.ts_token : e.dur_token);
    return;
  }
  if (dur_ns < 0) {
    note(Diag::event_negative_duration, index, "negative dur", e.name);
    return;
  }
  if (dur_ns > kMaxEventDurationNs) {
    note(Diag::event_huge_duration, index, "dur longer than a day", e.name);
    return;
  }
  int64_t end_ns = 0;
  if (__builtin_add_overflow(start_ns, dur_ns, &end_ns)) {
    note(Diag::event_timestamp_out_of_range, index, "ts + dur beyond int64 ns", e.name);
    return;
  }
  if (start_ns < kMinEventTimeNs || end_ns > kMaxEventTimeNs) {
    // Differences with the trace's other events would overflow.
    note(Diag::event_timestamp_out_of_range, index, "time beyond the +-2^61..2^62 ns kept", e.name);
    return;
  }
  if (e.args.state == FieldState::kWrongType) {
    note(Diag::event_malformed, index, "\"args\" is not an object", e.name);
    return;
  }

  switch (cls) {
    case EventClass::kKernel:
    case EventClass::kMemcpy:
    case EventClass::kMemset:
      device_event(e, cls, start_ns, end_ns, index);
      return;
    case EventClass::kRuntime:
    case EventClass::kOperator:
    case EventClass::kUserAnnotation:
    case EventClass::kPythonFunction: {
      uint32_t thread = 0;
      if (!thread_index(e, &thread)) {
        note(Diag::event_malformed, index, "host event without a usable pid/tid", e.name);
        return;
      }
      if (cls == EventClass::kRuntime) {
        api_event(e, thread, start_ns, end_ns);
      } else {
        range_event(e, cls, thread, start_ns, end_ns);
      }
      return;
    }
    case EventClass::kKnownUnused:
    case EventClass::kUnknown:
      return;
  }
}

void KinetoMapper::device_event(const RawEvent& e, EventClass cls, int64_t start_ns, int64_t end_ns,
                                uint64_t index) {
  const EventArgs& a = e.args;
  int64_t device = 0;
  if (a.device.has) {
    device = a.device.value;
  } else if (!device_row_id(e.pid, &device)) {
    note(Diag::event_malformed, index, "device event without args.device or numeric pid", e.name);
    return;
  }
  int64_t stream = 0;
  if (a.stream.has) {
    stream = a.stream.value;
  } else if (!device_row_id(e.tid, &stream)) {
    note(Diag::event_malformed, index, "device event without args.stream or stream tid", e.name);
    return;
  }
  if (!fits_int32(device) || !fits_int32(stream)) {
    note(Diag::event_malformed, index, "device or stream id out of range", e.name);
    return;
  }

  DeviceActivity act;
  act.start_ns = start_ns;
  act.end_ns = end_ns;
  act.name = store_->names.intern(e.name);
  act.device = static_cast<int32_t>(device);
  act.stream = static_cast<int32_t>(stream);
  if (a.correlation.has && a.correlation.value > 0) act.correlation_id = static_cast<uint64_t>(a.correlation.value);
  if (a.bytes.has && a.bytes.value > 0) act.bytes = static_cast<uint64_t>(a.bytes.value);
  switch (cls) {
    case EventClass::kKernel:
      act.kind = ActivityKind::kKernel;
      act.is_communication = is_communication(act.name, e.name);
      if (a.has_grid) {
        for (int i = 0; i < 3; ++i) act.grid[i] = to_u32_or_zero(a.grid[i]);
      }
      if (a.has_block) {
        for (int i = 0; i < 3; ++i) act.block[i] = to_u32_or_zero(a.block[i]);
      }
      if (a.registers_per_thread.has) act.registers_per_thread = to_u32_or_zero(a.registers_per_thread.value);
      if (a.shared_memory_bytes.has) act.shared_memory_bytes = to_u32_or_zero(a.shared_memory_bytes.value);
      if (a.graph_id.has) act.graph_id = to_u32_or_zero(a.graph_id.value);
      break;
    case EventClass::kMemcpy:
      act.kind = ActivityKind::kMemcpy;
      act.direction = direction_from(e.name);
      if (act.direction == MemcpyDirection::kUnknown) act.direction = direction_from(a.kind);
      // Kineto names the memory kinds: "Memcpy HtoD (Pageable -> Device)".
      act.host_pageable = e.name.find("Pageable") != std::string_view::npos;
      break;
    default:
      act.kind = ActivityKind::kMemset;
      break;
  }
  store_->activities.push_back(act);
}

KinetoMapper::NameFacts& KinetoMapper::facts(NameId id) {
  if (id >= name_facts_.size()) name_facts_.resize(static_cast<size_t>(id) + 1 + name_facts_.size() / 2);
  return name_facts_[id];
}

bool KinetoMapper::is_communication(NameId id, std::string_view name) {
  NameFacts& f = facts(id);
  if (!(f.known & 1)) {
    f.communication = is_communication_kernel(name);
    f.known |= 1;
  }
  return f.communication;
}

ApiClass KinetoMapper::api_class(NameId id, std::string_view name) {
  NameFacts& f = facts(id);
  if (!(f.known & 2)) {
    f.api = classify_api(name);
    f.known |= 2;
  }
  return f.api;
}

RangeCategory KinetoMapper::range_category(NameId id, std::string_view name, bool is_op) {
  NameFacts& f = facts(id);
  const uint8_t bit = is_op ? 4 : 8;
  if (!(f.known & bit)) {
    (is_op ? f.op_category : f.range_category) = classify_range(name, is_op);
    f.known |= bit;
  }
  return is_op ? f.op_category : f.range_category;
}

void KinetoMapper::api_event(const RawEvent& e, uint32_t thread, int64_t start_ns, int64_t end_ns) {
  HostApiCall call;
  call.start_ns = start_ns;
  call.end_ns = end_ns;
  call.name = store_->names.intern(e.name);
  call.thread = thread;
  if (e.args.correlation.has && e.args.correlation.value > 0) {
    call.correlation_id = static_cast<uint64_t>(e.args.correlation.value);
  }
  const ApiClass api = api_class(call.name, e.name);
  call.kind = api.kind;
  call.sync = api.sync;
  call.graph = api.graph;
  if (starts_with(e.name, "hip")) rocm_ = true;
  store_->api_calls.push_back(call);
}

void KinetoMapper::range_event(const RawEvent& e, EventClass cls, uint32_t thread, int64_t start_ns,
                               int64_t end_ns) {
  HostRange range;
  range.start_ns = start_ns;
  range.end_ns = end_ns;
  range.name = store_->names.intern(e.name);
  range.thread = thread;
  range.category = cls == EventClass::kPythonFunction ? RangeCategory::kPython
                                                      : range_category(range.name, e.name, cls == EventClass::kOperator);
  if (e.args.has_flops && std::isfinite(e.args.flops) && e.args.flops > 0) range.flops = e.args.flops;
  range.autograd = cls == EventClass::kOperator && e.args.sequence.has;
  if (range.category == RangeCategory::kStep) {
    const int64_t step = parse_step_number(e.name);
    if (step >= 0) step_candidates_.push_back(StepWindow{step, start_ns, end_ns});
  }
  store_->ranges.push_back(range);
}

void KinetoMapper::metadata_event(const RawEvent& e, uint64_t index) {
  if (e.name_state != FieldState::kOk) {
    note(Diag::event_malformed, index, "metadata event without a string \"name\"");
    return;
  }
  const bool is_thread = e.name == "thread_name";
  const bool is_process = e.name == "process_name";
  if (!is_thread && !is_process) return;  // sort indices, labels: display only
  int64_t pid = 0;
  int64_t tid = 0;
  if (!e.args.has_name || !host_id(e.pid, &pid) || (is_thread && !host_id(e.tid, &tid))) {
    note(Diag::event_malformed, index, "metadata event without pid/tid or args.name", e.name);
    return;
  }
  if (is_thread) {
    thread_names_[{pid, tid}] = std::string(e.args.name);
  } else {
    process_names_[pid] = std::string(e.args.name);
  }
}

bool KinetoMapper::host_id(const JsonId& id, int64_t* out) {
  if (id.state != FieldState::kOk) return false;
  if (!id.is_string) {
    *out = id.number;
    return true;
  }
  if (parse_int64(id.text, out)) return true;
  // A label ("PyTorch Profiler"): ids from the bottom of the int64 range,
  // far from any real pid/tid.
  auto it = label_ids_.find(std::string(id.text));
  if (it == label_ids_.end()) {
    const int64_t synthetic = std::numeric_limits<int64_t>::min() + 1 + static_cast<int64_t>(label_ids_.size());
    it = label_ids_.emplace(std::string(id.text), synthetic).first;
  }
  *out = it->second;
  return true;
}

bool KinetoMapper::thread_index(const RawEvent& e, uint32_t* out) {
  int64_t pid = 0;
  int64_t tid = 0;
  if (!host_id(e.pid, &pid) || !host_id(e.tid, &tid)) return false;
  const ThreadKey key{pid, tid};
  if (last_thread_ != UINT32_MAX && key == last_key_) {
    *out = last_thread_;
    return true;
  }
  auto it = thread_of_.find(key);
  if (it == thread_of_.end()) {
    const auto index = static_cast<uint32_t>(store_->threads.size());
    store_->threads.push_back(HostThread{pid, tid, {}});
    it = thread_of_.emplace(key, index).first;
  }
  last_key_ = key;
  last_thread_ = it->second;
  *out = it->second;
  return true;
}

void KinetoMapper::finish_thread_names() {
  for (HostThread& t : store_->threads) {
    auto it = thread_names_.find({t.pid, t.tid});
    if (it != thread_names_.end()) {
      t.name = it->second;
      continue;
    }
    auto p = process_names_.find(t.pid);
    if (p != process_names_.end()) t.name = p->second;
  }
}

void KinetoMapper::finish_devices() {
  std::vector<DeviceInfo>& devices = store_->devices;
  // ROCm traces list the profiled GPU's properties under id 0 while its
  // activities carry the physical device index (e.g. 2). With exactly one
  // described device and exactly one device doing work, they are the same
  // GPU: adopt the activity's id.
  if (devices.size() == 1 && !store_->activities.empty()) {
    const int32_t used = store_->activities.front().device;
    bool single = true;
    for (const DeviceActivity& a : store_->activities) single = single && a.device == used;
    if (single && devices[0].id != used) devices[0].id = used;
  }
}

void KinetoMapper::finish() {
  finish_thread_names();
  if (rocm_) store_->diagnostics.add(Diag::rocm_trace, 1, "HIP runtime names mapped to launch/copy/sync kinds");
  finish_devices();

  std::stable_sort(store_->activities.begin(), store_->activities.end(),
                   [](const DeviceActivity& a, const DeviceActivity& b) { return a.start_ns < b.start_ns; });
  std::stable_sort(store_->api_calls.begin(), store_->api_calls.end(),
                   [](const HostApiCall& a, const HostApiCall& b) { return a.start_ns < b.start_ns; });
  // Parents before children: earlier start first, then the longer range.
  std::stable_sort(store_->ranges.begin(), store_->ranges.end(), [](const HostRange& a, const HostRange& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  build_step_windows(std::move(step_candidates_), store_);
}

}  // namespace gpuutil::replay
