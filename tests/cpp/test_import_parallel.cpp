// The parallel import (traceEvents cut into chunks parsed on several
// threads) gives exactly the serial import's result: every event and its
// order, the interned names, threads, devices, rank, steps, diagnostics with
// their examples, ok and the error text.
//
// Checked on every shared real trace (with 2, 3 and 4 threads), on planted
// documents built to put cut candidates in awkward places (escaped and raw
// newlines in strings, objects nested in args, keys before and after
// traceEvents, a second traceEvents array, a bare array root, tiny arrays,
// non-object elements, invalid UTF-8, trailing bytes), on every truncation
// of a small trace, and on randomly mutated Kineto documents. The parallel
// pass is forced on small documents with ImportOptions; the process-wide
// pass counters show whether it produced the result or fell back to the
// serial pass, so each planted case also pins which of the two happened.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "collectors/replay/import_passes.h"
#include "collectors/replay/parallel_split.h"
#include "collectors/replay/trace_bytes.h"
#include "gpuutil/kineto_import.h"
#include "mutation.h"
#include "traces.h"

namespace gpuutil {
namespace {

ImportOptions serial_options() {
  ImportOptions o;
  o.threads = 1;
  return o;
}

ImportOptions parallel_options(unsigned threads) {
  ImportOptions o;
  o.threads = threads;
  o.parallel_min_bytes = 0;
  return o;
}

// ---------------------------------------------------------------- comparison

template <typename T>
std::string differs(const char* what, size_t index, const T& a, const T& b) {
  std::ostringstream out;
  out << what << "[" << index << "]: " << a << " vs " << b;
  return out.str();
}

#define GPUUTIL_SAME(what, i, x, y) \
  if (!((x) == (y))) return differs(what, i, (x), (y))

std::string first_difference(const ImportResult& a, const ImportResult& b) {
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

// Which pass produced a result.
enum class Pass { kSplit, kFallback, kSerialOnly };

// Imports `doc` serially and in parallel with `threads`; returns the
// difference ("" when identical) and which pass the parallel import took.
std::string compare_json(const std::string& doc, unsigned threads, Pass* pass = nullptr) {
  const ImportResult serial = import_kineto_json(doc, "<doc>", serial_options());
  const replay::ImportPassCounts before = replay::import_pass_counts();
  const ImportResult parallel = import_kineto_json(doc, "<doc>", parallel_options(threads));
  const replay::ImportPassCounts after = replay::import_pass_counts();
  if (pass != nullptr) {
    *pass = after.split_done > before.split_done           ? Pass::kSplit
            : after.split_abandoned > before.split_abandoned ? Pass::kFallback
                                                             : Pass::kSerialOnly;
  }
  return first_difference(serial, parallel);
}

// Every thread count a test tries: the automatic 2 and more chunks, so the
// middle-chunk path is exercised as well.
constexpr unsigned kThreadCounts[] = {2, 3, 4, 7};

// Expects identical results for every thread count, and `expected` as the
// pass the 2-thread import took.
void expect_same(const std::string& doc, Pass expected, const char* label) {
  for (const unsigned threads : kThreadCounts) {
    Pass pass = Pass::kSerialOnly;
    EXPECT_EQ(compare_json(doc, threads, &pass), "") << label << ", " << threads << " threads";
    if (threads == 2) {
      EXPECT_EQ(static_cast<int>(pass), static_cast<int>(expected)) << label;
    }
  }
}

// ---------------------------------------------------------------- planted documents

// One complete event, Kineto layout (an object over several lines).
std::string kineto_event(int i, const std::string& name, const std::string& extra_args = "") {
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
std::string kineto_events(int n, const std::string& extra_args = "") {
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

const char kDeviceProperties[] =
    "  \"deviceProperties\": [\n    {\n      \"id\": 0, \"name\": \"Tesla V100\", \"totalGlobalMem\": 16945512448,\n"
    "      \"computeMajor\": 7, \"computeMinor\": 0, \"numSms\": 80\n    }\n  ]";

std::string kineto_doc(int n, const std::string& before, const std::string& after, const std::string& extra_args = "") {
  std::string doc = "{\n  \"schemaVersion\": 1,\n";
  if (!before.empty()) doc += before + ",\n";
  doc += "  \"traceEvents\": [\n" + kineto_events(n, extra_args) + "\n  ]";
  if (!after.empty()) doc += ",\n" + after;
  doc += "\n}\n";
  return doc;
}

TEST(ParallelImport, PlannedTraceSplitsAndMatchesSerial) {
  const std::string doc = kineto_doc(200, std::string(kDeviceProperties) + ",\n  \"distributedInfo\": {\"rank\": 3}",
                                     "  \"traceName\": \"t.json\"");
  ASSERT_TRUE(import_kineto_json(doc, "<doc>", serial_options()).ok);
  expect_same(doc, Pass::kSplit, "planted");
  const ImportResult r = import_kineto_json(doc, "<doc>", parallel_options(2));
  EXPECT_EQ(r.store.rank, 3);
  EXPECT_EQ(r.store.devices.size(), 1u);
  EXPECT_GT(r.store.steps.size(), 10u);
  EXPECT_GT(r.store.diagnostics.count(Diag::event_malformed), 5u);
}

TEST(ParallelImport, MetadataAfterTraceEventsIsStillRead) {
  const std::string doc = kineto_doc(150, "", std::string(kDeviceProperties) +
                                                  ",\n  \"distributedInfo\": {\"rank\": 5},\n  \"roctracer_version\": 4,\n"
                                                  "  \"traceName\": \"x\"");
  expect_same(doc, Pass::kSplit, "metadata after");
  const ImportResult r = import_kineto_json(doc, "<doc>", parallel_options(2));
  EXPECT_EQ(r.store.rank, 5);
  EXPECT_EQ(r.store.devices.size(), 1u);
  EXPECT_EQ(r.store.diagnostics.count(Diag::rocm_trace), 1u);
}

TEST(ParallelImport, SecondTraceEventsArrayAfterTheSplitOne) {
  const std::string doc =
      kineto_doc(150, "", "  \"traceEvents\": [\n" + kineto_events(12) + "\n  ],\n  \"traceName\": \"x\"");
  expect_same(doc, Pass::kSplit, "second array");
  // And a small first array before the split one.
  const std::string before = kineto_doc(150, "  \"traceEvents\": [\n" + kineto_events(3) + "\n  ]", "");
  expect_same(before, Pass::kSplit, "first array before");
}

TEST(ParallelImport, EscapedNewlinesInStringsAreNoCutCandidates) {
  // `},\n  {` spelled with escapes inside names: not raw newlines, so never
  // a cut; the document still splits between real events.
  const std::string doc = kineto_doc(150, "", "", ", \"note\": \"a},\\n  {b},\\r\\n{c\"");
  expect_same(doc, Pass::kSplit, "escaped newlines");
  const std::string tricky_names = kineto_doc(150, "", "", ", \"name\": \"x\\\"},\\n  {\\\"\"");
  expect_same(tricky_names, Pass::kSplit, "escaped quotes and newlines");
  EXPECT_EQ(replay::find_event_separator("{\"a\": \"},\\n  {\"}", 0, 100), std::string_view::npos);
  EXPECT_EQ(replay::find_event_separator("[{},{}]", 0, 100), std::string_view::npos);
  EXPECT_EQ(replay::find_event_separator("[{},\n{}]", 0, 100), std::string_view::npos);  // one byte only
  EXPECT_EQ(replay::find_event_separator("[{} ,\n {}]", 0, 100), 4u);
}

TEST(ParallelImport, RawNewlineInsideAStringFallsBackToTheSerialError) {
  // Invalid JSON: a raw newline inside a string that looks like a cut.
  std::string doc = kineto_doc(150, "", "");
  const size_t middle = doc.find("},\n  {", doc.size() / 2);
  ASSERT_NE(middle, std::string::npos);
  const size_t name = doc.find("\"name\": \"", middle);
  doc.insert(name + 9, "x},\n  {y");
  ASSERT_FALSE(import_kineto_json(doc, "<doc>", serial_options()).ok);
  for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(doc, threads), "") << threads;
}

TEST(ParallelImport, CutInsideNestedArgsFallsBackToSerial) {
  // Every event's args hold a list of objects laid out like events: cuts
  // land inside args as well as between events.
  const std::string nested = ",\n      \"list\": [\n        {\"a\": 1},\n        {\"b\": {\"c\": [1, {\"d\": 2}]}}\n      ]";
  const std::string doc = kineto_doc(150, "", "  \"traceName\": \"x\"", nested);
  for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(doc, threads), "") << threads;
  // A document whose only event-like separators are inside one event's args.
  const std::string one = "{\n  \"traceEvents\": [\n" + kineto_event(1, "k", nested) + "\n  ]\n}\n";
  for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(one, threads), "") << threads;
}

TEST(ParallelImport, SeparatorsOutsideTraceEventsFallBack) {
  // Cuts that land in a big array of objects before traceEvents.
  std::string big = "  \"other\": [\n";
  for (int i = 0; i < 400; ++i) big += std::string(i ? ",\n" : "") + "    {\"i\": " + std::to_string(i) + "}";
  big += "\n  ]";
  const std::string doc = kineto_doc(20, big, "");
  expect_same(doc, Pass::kFallback, "separators before traceEvents");
  const std::string after = kineto_doc(20, "", big);
  for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(after, threads), "") << threads;
  // Nested inside another top-level object: not read at all, like serial.
  const std::string nested = "{\n  \"wrapper\": {\n  \"traceEvents\": [\n" + kineto_events(100) + "\n  ]\n  }\n}\n";
  for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(nested, threads), "") << threads;
}

TEST(ParallelImport, BareArrayRoot) {
  const std::string doc = "[\n" + kineto_events(150) + "\n]\n";
  expect_same(doc, Pass::kSplit, "bare array");
  for (const std::string& trailing : {std::string("\n]"), std::string(" x"), std::string("\n{}")}) {
    for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(doc + trailing, threads), "") << trailing;
  }
}

TEST(ParallelImport, TinyArrays) {
  for (int n = 0; n <= 6; ++n) {
    const std::string doc = kineto_doc(n, "", "  \"traceName\": \"x\"");
    for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(doc, threads), "") << n << " events";
  }
  for (const char* doc : {"{\"traceEvents\": []}", "[]", "{}", "[\n  {},\n  {}\n]", "{\n  \"traceEvents\": [\n  {},\n  {}\n  ]\n}"}) {
    for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(doc, threads), "") << doc;
  }
}

TEST(ParallelImport, NonObjectElementsAfterTheCutKeepTheirIndices) {
  std::string events = kineto_events(150);
  const size_t late = events.find("},\n  {", events.size() * 3 / 4);
  ASSERT_NE(late, std::string::npos);
  events.insert(late + 2, "\n  17, \"text\", [1, 2], null, true,");
  const std::string doc = "{\n  \"traceEvents\": [\n" + events + "\n  ]\n}\n";
  expect_same(doc, Pass::kSplit, "non-objects");
  const ImportResult r = import_kineto_json(doc, "<doc>", parallel_options(2));
  EXPECT_TRUE(r.ok);
  EXPECT_GE(r.store.diagnostics.count(Diag::event_malformed), 5u);
}

TEST(ParallelImport, InvalidUtf8InALaterChunkIsRepairedLikeSerial) {
  std::string doc = kineto_doc(150, "", "  \"traceName\": \"x\"");
  const size_t at = doc.find("op_", doc.size() * 3 / 4);
  ASSERT_NE(at, std::string::npos);
  doc[at + 1] = static_cast<char>(0xC3);  // a lead byte without its continuation
  expect_same(doc, Pass::kFallback, "invalid utf-8");
  const ImportResult r = import_kineto_json(doc, "<doc>", parallel_options(2));
  EXPECT_TRUE(r.ok) << r.error;
}

TEST(ParallelImport, ByteOrderMarkAndTrailingBytes) {
  const std::string doc = kineto_doc(150, "", "");
  expect_same("\xEF\xBB\xBF" + doc, Pass::kSplit, "bom");
  for (const std::string& trailing : {std::string("}"), std::string("x"), std::string("\n,\"a\": 1}"), std::string("\0", 1)}) {
    for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(doc + trailing, threads), "") << trailing;
  }
  // Broken key/value syntax after the events array (On Demand skips an
  // unread value loosely: `"a": }` passes serially, and must in parallel).
  for (const std::string& after : {std::string("  \"a\": }"), std::string("  \"a\" 1"), std::string("  \"a\": 1},{\"b\": 2")}) {
    const std::string bad = kineto_doc(150, "", after);
    for (const unsigned threads : kThreadCounts) EXPECT_EQ(compare_json(bad, threads), "") << after;
  }
}

TEST(ParallelImport, DeepNestingAroundTheCut) {
  std::string deep = ", \"deep\": ";
  for (int i = 0; i < 3000; ++i) deep += "{\"a\": ";
  deep += "1";
  for (int i = 0; i < 3000; ++i) deep += "}";
  const std::string doc = kineto_doc(60, "", "", deep);
  expect_same(doc, Pass::kSplit, "deep args");
}

TEST(ParallelImport, EveryTruncationMatchesSerial) {
  // Truncated at every byte, as is and closed again with `]}`: the parallel
  // pass must refuse, fall back or succeed exactly like serial.
  const std::string doc = kineto_doc(24, std::string(kDeviceProperties), "  \"traceName\": \"x\"");
  size_t split = 0;
  for (size_t n = 0; n <= doc.size(); ++n) {
    const std::string cut = doc.substr(0, n);
    Pass pass = Pass::kSerialOnly;
    ASSERT_EQ(compare_json(cut, 2, &pass), "") << "truncated at " << n;
    ASSERT_EQ(compare_json(cut + "\n  ]\n}\n", 3, &pass), "") << "closed at " << n;
    split += pass == Pass::kSplit;
  }
  EXPECT_GT(split, 0u);
}

// ---------------------------------------------------------------- real traces

TEST(ParallelImport, EveryRealTraceMatchesSerial) {
  GPUUTIL_REQUIRE_TRACES();
  const std::vector<std::string> paths = test::all_traces();
  ASSERT_FALSE(paths.empty());
  size_t large = 0;
  for (const std::string& path : paths) {
    const ImportResult serial = import_kineto_file(path, serial_options());
    for (const unsigned threads : {2u, 3u, 4u}) {
      const replay::ImportPassCounts before = replay::import_pass_counts();
      const ImportResult parallel = import_kineto_file(path, parallel_options(threads));
      const replay::ImportPassCounts after = replay::import_pass_counts();
      EXPECT_EQ(first_difference(serial, parallel), "") << path << ", " << threads << " threads";
      EXPECT_EQ(after.split_abandoned, before.split_abandoned) << path << ": parallel attempt abandoned";
    }
    // The traces big enough for the automatic mode really take the split.
    replay::TraceBytes bytes;
    std::string error;
    ASSERT_TRUE(replay::read_trace_file(path, &bytes, &error)) << error;
    if (bytes.size >= ImportOptions{}.parallel_min_bytes) {
      ++large;
      ImportOptions two;
      two.threads = 2;
      const replay::ImportPassCounts before = replay::import_pass_counts();
      const ImportResult parallel = import_kineto_file(path, two);
      EXPECT_EQ(replay::import_pass_counts().split_done, before.split_done + 1) << path;
      EXPECT_EQ(first_difference(serial, parallel), "") << path;
    }
  }
  EXPECT_GE(large, 1u);
}

// ---------------------------------------------------------------- mutation fuzz

TEST(ParallelImportFuzz, MutatedKinetoTraceMatchesSerial) {
  const std::string path = test::trace_path("hta_event_sync_a100.json.gz");
  replay::TraceBytes plain;
  std::string error;
  if (!replay::read_trace_file(path, &plain, &error)) GTEST_SKIP() << error;
  const std::string seed_doc(plain.view());
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(0x5eed5011);
  size_t i = 0;
  size_t split = 0;
  for (; i < 200000; ++i) {
    if ((i & 63) == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > 4.0) break;
    std::string doc = seed_doc;
    const size_t mutations = 1 + rng() % 3;
    for (size_t m = 0; m < mutations; ++m) test::mutate(&doc, rng);
    Pass pass = Pass::kSerialOnly;
    const std::string diff = compare_json(doc, 2 + static_cast<unsigned>(i % 3), &pass);
    if (!diff.empty()) {
      ADD_FAILURE() << "iteration " << i << ": " << diff;
      break;
    }
    split += pass == Pass::kSplit;
  }
  std::printf("[ fuzz     ] %zu mutated inputs, %zu took the parallel pass\n", i, split);
  EXPECT_GT(split, 0u);
}

}  // namespace
}  // namespace gpuutil
