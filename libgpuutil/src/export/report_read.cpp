// Reads a gpuutil.report/1 document back into a Report (see
// gpuutil/report_read.h): simdjson's DOM, the keys report_json.cpp writes,
// read by name so that key order and unknown keys do not matter. Type
// errors throw std::runtime_error inside and become the one-line error.
#include "gpuutil/report_read.h"

#include <simdjson.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace gpuutil {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

[[noreturn]] void bad(const char* key, const char* what) {
  throw std::runtime_error(std::string("'") + key + "' must be " + what);
}

bool has(const object& o, const char* key, element* out) {
  return o.at_key(key).get(*out) == simdjson::SUCCESS && !out->is_null();
}

template <typename Int>
void read_int(const object& o, const char* key, Int* out) {
  element e;
  if (!has(o, key, &e)) return;
  int64_t v = 0;
  uint64_t u = 0;
  double d = 0;
  if (e.get_int64().get(v) == simdjson::SUCCESS) {
    *out = static_cast<Int>(v);
  } else if (e.get_uint64().get(u) == simdjson::SUCCESS) {
    *out = static_cast<Int>(u);
  } else if (e.get_double().get(d) == simdjson::SUCCESS && std::isfinite(d) && std::fabs(d) < 9.2e18) {
    *out = static_cast<Int>(d);  // a writer that printed an integer as 1.0e6
  } else {
    bad(key, "an integer");
  }
}

void read_double(const object& o, const char* key, std::optional<double>* out) {
  element e;
  if (!has(o, key, &e)) return;
  double v = 0;
  if (e.get_double().get(v) != simdjson::SUCCESS) bad(key, "a number or null");
  *out = v;
}

void read_double(const object& o, const char* key, double* out) {
  std::optional<double> v;
  read_double(o, key, &v);
  if (v) *out = *v;
}

void read_optional_int(const object& o, const char* key, std::optional<int64_t>* out) {
  element e;
  if (!has(o, key, &e)) return;
  int64_t v = 0;
  read_int(o, key, &v);
  *out = v;
}

void read_string(const object& o, const char* key, std::string* out) {
  element e;
  if (!has(o, key, &e)) return;
  std::string_view v;
  if (e.get_string().get(v) != simdjson::SUCCESS) bad(key, "a string");
  *out = std::string(v);
}

void read_bool(const object& o, const char* key, bool* out) {
  element e;
  if (!has(o, key, &e)) return;
  if (e.get_bool().get(*out) != simdjson::SUCCESS) bad(key, "true or false");
}

bool read_object(const object& o, const char* key, object* out) {
  element e;
  if (!has(o, key, &e)) return false;
  if (e.get_object().get(*out) != simdjson::SUCCESS) bad(key, "an object");
  return true;
}

bool read_array(const object& o, const char* key, array* out) {
  element e;
  if (!has(o, key, &e)) return false;
  if (e.get_array().get(*out) != simdjson::SUCCESS) bad(key, "an array");
  return true;
}

object as_object(const element& e, const char* what) {
  object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) throw std::runtime_error(std::string(what) + " must be an object");
  return o;
}

std::vector<NamedTime> named_times(const object& o, const char* key) {
  std::vector<NamedTime> out;
  array a;
  if (!read_array(o, key, &a)) return out;
  for (const element e : a) {
    const object n = as_object(e, "a culprit");
    NamedTime t;
    read_string(n, "name", &t.name);
    read_int(n, "ns", &t.ns);
    read_int(n, "count", &t.count);
    out.push_back(std::move(t));
  }
  return out;
}

DeviceHealth health_of(const object& h) {
  DeviceHealth x;
  read_double(h, "nvml_utilization_pct", &x.nvml_utilization_pct);
  read_double(h, "sm_clock_mhz", &x.sm_clock_mhz);
  read_double(h, "sm_clock_max_mhz", &x.sm_clock_max_mhz);
  read_double(h, "mem_clock_mhz", &x.mem_clock_mhz);
  read_double(h, "mem_clock_max_mhz", &x.mem_clock_max_mhz);
  read_double(h, "power_w", &x.power_w);
  read_double(h, "energy_j", &x.energy_j);
  read_double(h, "temperature_c", &x.temperature_c);
  read_optional_int(h, "throttle_power_ns", &x.throttle_power_ns);
  read_optional_int(h, "throttle_thermal_ns", &x.throttle_thermal_ns);
  read_double(h, "fb_used_bytes", &x.fb_used_bytes);
  read_double(h, "allocated_bytes", &x.allocated_bytes);
  read_double(h, "reserved_bytes", &x.reserved_bytes);
  read_double(h, "peak_allocated_bytes", &x.peak_allocated_bytes);
  read_double(h, "gpm_sm_util_pct", &x.gpm_sm_util_pct);
  read_double(h, "gpm_sm_occupancy_pct", &x.gpm_sm_occupancy_pct);
  read_double(h, "gpm_tensor_util_pct", &x.gpm_tensor_util_pct);
  read_double(h, "gpm_dram_bw_util_pct", &x.gpm_dram_bw_util_pct);
  return x;
}

DeviceStepReport device_of(const object& o) {
  DeviceStepReport d;
  read_int(o, "device", &d.device);
  read_int(o, "rank", &d.rank);
  read_string(o, "name", &d.name);
  read_int(o, "wall_ns", &d.wall_ns);
  read_int(o, "busy_ns", &d.busy_ns);
  object b;
  if (read_object(o, "breakdown_ns", &b)) {
    read_int(b, "compute", &d.breakdown.compute_ns);
    read_int(b, "communication", &d.breakdown.communication_ns);
    read_int(b, "memory", &d.breakdown.memory_ns);
    for (int c = 0; c < kIdleCauseCount; ++c) {
      const std::string key = std::string("idle_") + to_string(static_cast<IdleCause>(c));
      read_int(b, key.c_str(), &d.breakdown.idle_ns[static_cast<size_t>(c)]);
    }
  }
  object culprits;
  if (read_object(o, "culprits", &culprits)) {
    for (int c = 0; c < kIdleCauseCount; ++c) {
      d.culprits[static_cast<size_t>(c)] = named_times(culprits, to_string(static_cast<IdleCause>(c)));
    }
  }
  read_int(o, "kernels", &d.kernels);
  read_int(o, "memcpys", &d.memcpys);
  read_int(o, "memsets", &d.memsets);
  read_int(o, "short_kernels", &d.short_kernels);
  read_int(o, "persistent_kernel_ns", &d.persistent_kernel_ns);
  read_double(o, "sm_efficiency_est", &d.sm_efficiency_est);
  read_double(o, "achieved_occupancy_est", &d.achieved_occupancy_est);
  object pageable;
  if (read_object(o, "pageable_memcpy", &pageable)) {
    read_int(pageable, "count", &d.pageable_memcpys);
    read_int(pageable, "bytes", &d.pageable_memcpy_bytes);
  }
  object memcpy;
  if (read_object(o, "memcpy", &memcpy)) {
    for (int i = 0; i < kMemcpyDirectionCount; ++i) {
      object dir;
      if (!read_object(memcpy, to_string(static_cast<MemcpyDirection>(i)), &dir)) continue;
      read_int(dir, "bytes", &d.memcpy_bytes[static_cast<size_t>(i)]);
      read_int(dir, "ns", &d.memcpy_ns[static_cast<size_t>(i)]);
    }
  }
  object comm;
  if (read_object(o, "communication", &comm)) {
    read_int(comm, "total_ns", &d.communication_total_ns);
    read_int(comm, "overlap_ns", &d.communication_overlap_ns);
  }
  d.top_kernels = named_times(o, "top_kernels");
  object latency;
  if (read_object(o, "launch_latency_ns", &latency)) {
    read_optional_int(latency, "p50", &d.launch_latency_p50_ns);
    read_optional_int(latency, "p95", &d.launch_latency_p95_ns);
  }
  read_int(o, "graph_kernels", &d.graph_kernels);
  if (read_object(o, "graph_launch_latency_ns", &latency)) {
    read_optional_int(latency, "p50", &d.graph_launch_latency_p50_ns);
    read_optional_int(latency, "p95", &d.graph_launch_latency_p95_ns);
  }
  read_double(o, "flops", &d.flops);
  read_double(o, "peak_flops_per_s", &d.peak_flops_per_s);
  read_double(o, "mfu", &d.mfu);
  read_double(o, "hardware_flops", &d.hardware_flops);
  read_double(o, "hfu", &d.hfu);
  read_int(o, "total_memory_bytes", &d.total_memory_bytes);
  object health;
  if (read_object(o, "health", &health)) d.health = health_of(health);
  return d;
}

HostThreadStepReport host_of(const object& o) {
  HostThreadStepReport h;
  read_int(o, "rank", &h.rank);
  read_int(o, "thread", &h.thread);
  read_int(o, "tid", &h.tid);
  read_string(o, "name", &h.name);
  read_int(o, "wall_ns", &h.wall_ns);
  object b;
  if (read_object(o, "breakdown_ns", &b)) {
    for (int c = 0; c < kHostCategoryCount; ++c) {
      read_int(b, to_string(static_cast<HostCategory>(c)), &h.breakdown_ns[static_cast<size_t>(c)]);
    }
  }
  object culprits;
  if (read_object(o, "culprits", &culprits)) {
    for (int c = 0; c < kHostCategoryCount; ++c) {
      h.culprits[static_cast<size_t>(c)] = named_times(culprits, to_string(static_cast<HostCategory>(c)));
    }
  }
  return h;
}

StepReport step_of(const object& o) {
  StepReport s;
  read_int(o, "step", &s.step);
  read_int(o, "start_ns", &s.start_ns);
  read_int(o, "end_ns", &s.end_ns);
  read_int(o, "wall_ns", &s.wall_ns);
  element detail;
  if (has(o, "detail", &detail)) {
    bool v = false;
    read_bool(o, "detail", &v);
    s.detail = v;
  }
  read_bool(o, "compile_warmup", &s.compile_warmup);
  read_bool(o, "complete", &s.complete);
  array a;
  if (read_array(o, "devices", &a)) {
    for (const element e : a) s.devices.push_back(device_of(as_object(e, "a device")));
  }
  if (read_array(o, "host", &a)) {
    for (const element e : a) s.host.push_back(host_of(as_object(e, "a host thread")));
  }
  return s;
}

void read_report(const object& j, Report* r) {
  std::string schema;
  read_string(j, "schema", &schema);
  if (schema.rfind("gpuutil.report/", 0) != 0) throw std::runtime_error("not a gpuutil.report document");
  array a;
  if (read_array(j, "sources", &a)) {
    for (const element e : a) {
      const object o = as_object(e, "a source");
      SourceInfo src;
      read_string(o, "path", &src.path);
      read_int(o, "rank", &src.rank);
      read_string(o, "steps_source", &src.steps_source);
      read_int(o, "activities", &src.activities);
      read_int(o, "api_calls", &src.api_calls);
      read_int(o, "ranges", &src.ranges);
      r->sources.push_back(std::move(src));
    }
  }
  read_string(j, "flops_source", &r->flops_source);
  object w;
  if (read_object(j, "workload", &w)) {
    read_string(w, "kind", &r->workload.kind);
    read_string(w, "evidence", &r->workload.evidence);
    read_int(w, "capture_ns", &r->workload.capture_ns);
  }
  if (read_array(j, "loaders", &a)) {
    for (const element e : a) {
      const object o = as_object(e, "a loader");
      LoaderReport l;
      read_int(o, "rank", &l.rank);
      read_string(o, "name", &l.name);
      object st;
      if (read_object(o, "settings", &st)) {
        read_optional_int(st, "num_workers", &l.settings.num_workers);
        read_optional_int(st, "prefetch_factor", &l.settings.prefetch_factor);
        bool v = false;
        element b;
        if (has(st, "pin_memory", &b)) {
          read_bool(st, "pin_memory", &v);
          l.settings.pin_memory = v;
        }
        if (has(st, "persistent_workers", &b)) {
          read_bool(st, "persistent_workers", &v);
          l.settings.persistent_workers = v;
        }
      }
      read_int(o, "batches", &l.batches);
      read_int(o, "wait_ns", &l.wait_ns);
      array waits;
      if (read_array(o, "batch_waits_ns", &waits)) {
        for (const element w : waits) {
          int64_t v = 0;
          if (w.get_int64().get(v) != simdjson::SUCCESS) bad("batch_waits_ns", "an array of integers");
          l.batch_waits_ns.push_back(v);
        }
      }
      // periodic_stall is derived from the waits again where it is needed.
      r->loaders.push_back(std::move(l));
    }
  }
  if (read_array(j, "steps", &a)) {
    for (const element e : a) r->steps.push_back(step_of(as_object(e, "a step")));
  }
  object s;
  if (read_object(j, "summary", &s)) {
    read_int(s, "steps", &r->summary.steps);
    read_int(s, "steps_wall_ns", &r->summary.steps_wall_ns);
    read_int(s, "trace_span_ns", &r->summary.trace_span_ns);
    read_int(s, "outside_steps_ns", &r->summary.outside_steps_ns);
    read_optional_int(s, "step_wall_p50_ns", &r->summary.step_wall_p50_ns);
  }
  if (read_array(j, "findings", &a)) {
    for (const element e : a) {
      const object o = as_object(e, "a finding");
      Finding f;
      read_string(o, "id", &f.id);
      read_string(o, "title", &f.title);
      read_string(o, "evidence", &f.evidence);
      read_string(o, "fix", &f.fix);
      read_int(o, "recoverable_ns", &f.recoverable_ns);
      read_double(o, "share_of_wall", &f.share_of_wall);
      read_int(o, "rank", &f.rank);
      read_string(o, "host", &f.host);
      read_string(o, "cause", &f.cause);
      r->findings.push_back(std::move(f));
    }
  }
}

}  // namespace

bool report_from_json(std::string_view json, Report* out, std::string* error) {
  try {
    simdjson::dom::parser parser;
    element root;
    if (const auto e = parser.parse(json.data(), json.size()).get(root)) {
      throw std::runtime_error(std::string("not JSON (") + simdjson::error_message(e) + ")");
    }
    *out = Report{};
    read_report(as_object(root, "a report"), out);
    return true;
  } catch (const std::exception& e) {
    if (error != nullptr) {
      *error = e.what();
      for (char& c : *error) {
        if (c == '\n' || c == '\r') c = ' ';
      }
    }
    return false;
  }
}

}  // namespace gpuutil
