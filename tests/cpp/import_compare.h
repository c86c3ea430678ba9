// Shared by the import-pass tests (test_import_parallel.cpp,
// test_import_stream.cpp): first_difference() compares two import results
// field by field (every event, name, thread, device, step, diagnostic and
// its example, ok and the error), and the planted Kineto documents they
// cut in awkward places.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>

#include "gpuutil/kineto_import.h"

namespace gpuutil::test {

template <typename T>
std::string differs(const char* what, size_t index, const T& a, const T& b) {
  std::ostringstream out;
  out << what << "[" << index << "]: " << a << " vs " << b;
  return out.str();
}

#define GPUUTIL_SAME(what, i, x, y) \
  if (!((x) == (y))) return differs(what, i, (x), (y))

inline std::string first_difference(const ImportResult& a, const ImportResult& b) {
  GPUUTIL_SAME("ok", 0, a.ok, b.ok);
  GPUUTIL_SAME("error", 0, a.error, b.error);
  const EventStore& s = a.store;
  const EventStore& t = b.store;
  GPUUTIL_SAME("source", 0, s.source, t.source);
  GPUUTIL_SAME("steps_source", 0, s.steps_source, t.steps_source);
  GPUUTIL_SAME("rank", 0, s.rank, t.rank);
  for (size_t d = 0; d < kDiagCount; ++d) {
    GPUUTIL_SAME("diagnostic count", d, s.diagnostics.count(static_cast<Diag>(d)), t.diagnostics.count(static_cast<Diag>(d)));
    GPUUTIL_SAME("diagnostic example", d, s.diagnostics.example(static_cast<Diag>(d)), t.diagnostics.example(static_cast<Diag>(d)));
  }
  GPUUTIL_SAME("names.size", 0, s.names.size(), t.names.size());
  for (NameId i = 0; i < s.names.size(); ++i) GPUUTIL_SAME("name", i, s.names.view(i), t.names.view(i));
  GPUUTIL_SAME("activities.size", 0, s.activities.size(), t.activities.size());
  for (size_t i = 0; i < s.activities.size(); ++i) {
    const DeviceActivity& x = s.activities[i];
    const DeviceActivity& y = t.activities[i];
    GPUUTIL_SAME("activity.start_ns", i, x.start_ns, y.start_ns);
    GPUUTIL_SAME("activity.end_ns", i, x.end_ns, y.end_ns);
    GPUUTIL_SAME("activity.correlation_id", i, x.correlation_id, y.correlation_id);
    GPUUTIL_SAME("activity.bytes", i, x.bytes, y.bytes);
    GPUUTIL_SAME("activity.name", i, x.name, y.name);
    GPUUTIL_SAME("activity.device", i, x.device, y.device);
    GPUUTIL_SAME("activity.stream", i, x.stream, y.stream);
    GPUUTIL_SAME("activity.kind", i, static_cast<int>(x.kind), static_cast<int>(y.kind));
    GPUUTIL_SAME("activity.direction", i, static_cast<int>(x.direction), static_cast<int>(y.direction));
    GPUUTIL_SAME("activity.is_communication", i, x.is_communication, y.is_communication);
    for (int k = 0; k < 3; ++k) {
      GPUUTIL_SAME("activity.grid", i, x.grid[k], y.grid[k]);
      GPUUTIL_SAME("activity.block", i, x.block[k], y.block[k]);
    }
    GPUUTIL_SAME("activity.registers_per_thread", i, x.registers_per_thread, y.registers_per_thread);
    GPUUTIL_SAME("activity.shared_memory_bytes", i, x.shared_memory_bytes, y.shared_memory_bytes);
    GPUUTIL_SAME("activity.graph_id", i, x.graph_id, y.graph_id);
  }
  GPUUTIL_SAME("api_calls.size", 0, s.api_calls.size(), t.api_calls.size());
  for (size_t i = 0; i < s.api_calls.size(); ++i) {
    const HostApiCall& x = s.api_calls[i];
    const HostApiCall& y = t.api_calls[i];
    GPUUTIL_SAME("api.start_ns", i, x.start_ns, y.start_ns);
    GPUUTIL_SAME("api.end_ns", i, x.end_ns, y.end_ns);
    GPUUTIL_SAME("api.correlation_id", i, x.correlation_id, y.correlation_id);
    GPUUTIL_SAME("api.name", i, x.name, y.name);
    GPUUTIL_SAME("api.thread", i, x.thread, y.thread);
    GPUUTIL_SAME("api.kind", i, static_cast<int>(x.kind), static_cast<int>(y.kind));
    GPUUTIL_SAME("api.sync", i, static_cast<int>(x.sync), static_cast<int>(y.sync));
  }
  GPUUTIL_SAME("ranges.size", 0, s.ranges.size(), t.ranges.size());
  for (size_t i = 0; i < s.ranges.size(); ++i) {
    const HostRange& x = s.ranges[i];
    const HostRange& y = t.ranges[i];
    GPUUTIL_SAME("range.start_ns", i, x.start_ns, y.start_ns);
    GPUUTIL_SAME("range.end_ns", i, x.end_ns, y.end_ns);
    GPUUTIL_SAME("range.name", i, x.name, y.name);
    GPUUTIL_SAME("range.thread", i, x.thread, y.thread);
    GPUUTIL_SAME("range.category", i, static_cast<int>(x.category), static_cast<int>(y.category));
    GPUUTIL_SAME("range.flops", i, x.flops, y.flops);
  }
  GPUUTIL_SAME("steps.size", 0, s.steps.size(), t.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    GPUUTIL_SAME("step.step", i, s.steps[i].step, t.steps[i].step);
    GPUUTIL_SAME("step.start_ns", i, s.steps[i].start_ns, t.steps[i].start_ns);
    GPUUTIL_SAME("step.end_ns", i, s.steps[i].end_ns, t.steps[i].end_ns);
  }
  GPUUTIL_SAME("counters.size", 0, s.counters.size(), t.counters.size());
  GPUUTIL_SAME("threads.size", 0, s.threads.size(), t.threads.size());
  for (size_t i = 0; i < s.threads.size(); ++i) {
    GPUUTIL_SAME("thread.pid", i, s.threads[i].pid, t.threads[i].pid);
    GPUUTIL_SAME("thread.tid", i, s.threads[i].tid, t.threads[i].tid);
    GPUUTIL_SAME("thread.name", i, s.threads[i].name, t.threads[i].name);
  }
  GPUUTIL_SAME("devices.size", 0, s.devices.size(), t.devices.size());
  for (size_t i = 0; i < s.devices.size(); ++i) {
    const DeviceInfo& x = s.devices[i];
    const DeviceInfo& y = t.devices[i];
    GPUUTIL_SAME("device.id", i, x.id, y.id);
    GPUUTIL_SAME("device.name", i, x.name, y.name);
    GPUUTIL_SAME("device.compute_major", i, x.compute_major, y.compute_major);
    GPUUTIL_SAME("device.compute_minor", i, x.compute_minor, y.compute_minor);
    GPUUTIL_SAME("device.sm_count", i, x.sm_count, y.sm_count);
    GPUUTIL_SAME("device.max_threads_per_sm", i, x.max_threads_per_sm, y.max_threads_per_sm);
    GPUUTIL_SAME("device.max_blocks_per_sm", i, x.max_blocks_per_sm, y.max_blocks_per_sm);
    GPUUTIL_SAME("device.registers_per_sm", i, x.registers_per_sm, y.registers_per_sm);
    GPUUTIL_SAME("device.shared_memory_per_sm_bytes", i, x.shared_memory_per_sm_bytes, y.shared_memory_per_sm_bytes);
    GPUUTIL_SAME("device.warp_size", i, x.warp_size, y.warp_size);
    GPUUTIL_SAME("device.total_memory_bytes", i, x.total_memory_bytes, y.total_memory_bytes);
  }
  return "";
}

#undef GPUUTIL_SAME

// One complete event, Kineto layout (an object over several lines).
inline std::string kineto_event(int i, const std::string& name, const std::string& extra_args = "") {
  const char* cats[] = {"cpu_op", "cuda_runtime", "kernel", "user_annotation", "gpu_memcpy", "ac2g"};
  const std::string cat = cats[i % 6];
  std::string e = "  {\n    \"ph\": \"" + std::string(cat == "ac2g" ? "s" : "X") + "\", \"cat\": \"" + cat +
                  "\", \"name\": \"" + name + "\", \"pid\": " + (cat == "kernel" || cat == "gpu_memcpy" ? "0" : "100") +
                  ", \"tid\": " + (cat == "kernel" || cat == "gpu_memcpy" ? "7" : std::to_string(100 + i % 3)) +
                  ",\n    \"ts\": " + std::to_string(1000 + 10 * i) + ".5, \"dur\": " + std::to_string(1 + i % 7) +
                  ",\n    \"args\": {\n      \"External id\": " + std::to_string(i) + ", \"correlation\": " +
                  std::to_string(5000 + i / 2) + ", \"device\": 0, \"stream\": 7" + extra_args + "\n    }\n  }";
  return e;
}

// Events 0..n-1 with step ranges every 10 events, a few malformed ones and
// thread names, joined the way Kineto joins them.
inline std::string kineto_events(int n, const std::string& extra_args = "") {
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += ",\n";
    if (i % 10 == 0) {
      out += "  {\n    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#" + std::to_string(i / 10) +
             "\", \"pid\": 100, \"tid\": 100,\n    \"ts\": " + std::to_string(1000 + 10 * i) + ", \"dur\": 95\n  }";
    } else if (i % 17 == 0) {
      out += "  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"bad" + std::to_string(i) +
             "\", \"pid\": 100, \"tid\": 100,\n    \"ts\": \"oops\", \"dur\": 1\n  }";
    } else if (i % 23 == 0) {
      out += "  {\n    \"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 100, \"tid\": " + std::to_string(100 + i % 3) +
             ",\n    \"args\": {\"name\": \"thread " + std::to_string(i) + "\"}\n  }";
    } else if (i % 29 == 0) {
      out += "  {\n    \"ph\": \"Q\", \"name\": \"odd phase\"\n  }";
    } else {
      out += kineto_event(i, "op_" + std::to_string(i % 13), extra_args);
    }
  }
  return out;
}

inline constexpr char kDeviceProperties[] =
    "  \"deviceProperties\": [\n    {\n      \"id\": 0, \"name\": \"Tesla V100\", \"totalGlobalMem\": 16945512448,\n"
    "      \"computeMajor\": 7, \"computeMinor\": 0, \"numSms\": 80\n    }\n  ]";

inline std::string kineto_doc(int n, const std::string& before, const std::string& after, const std::string& extra_args = "") {
  std::string doc = "{\n  \"schemaVersion\": 1,\n";
  if (!before.empty()) doc += before + ",\n";
  doc += "  \"traceEvents\": [\n" + kineto_events(n, extra_args) + "\n  ]";
  if (!after.empty()) doc += ",\n" + after;
  doc += "\n}\n";
  return doc;
}

// Every truncation of `doc` from `from_bytes` on, as is and closed again
// with `]}`: `compare(text, &taken)` imports `text` by the pass under test
// and serially, returns their difference ("" when identical) and sets
// `taken` when the pass under test produced the result itself. Stops at
// the first difference (a failed assertion); returns how many truncations
// the pass took.
template <typename Compare>
size_t every_truncation_taken(const std::string& doc, size_t from_bytes, Compare compare) {
  size_t taken = 0;
  for (size_t n = from_bytes; n <= doc.size(); ++n) {
    const std::string cut = doc.substr(0, n);
    bool took = false;
    EXPECT_EQ(compare(cut, &took), "") << "truncated at " << n;
    if (::testing::Test::HasFailure()) break;
    EXPECT_EQ(compare(cut + "\n  ]\n}\n", &took), "") << "closed at " << n;
    if (::testing::Test::HasFailure()) break;
    taken += took;
  }
  return taken;
}

}  // namespace gpuutil::test
