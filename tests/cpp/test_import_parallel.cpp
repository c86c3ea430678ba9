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
#include "import_compare.h"
#include "gpuutil/kineto_import.h"
#include "mutation.h"
#include "traces.h"

namespace gpuutil {
namespace {

using test::first_difference;
using test::kDeviceProperties;
using test::kineto_doc;
using test::kineto_event;
using test::kineto_events;

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
  unsigned threads = 2;
  const size_t split = test::every_truncation_taken(doc, 0, [&threads](const std::string& text, bool* took) {
    Pass pass = Pass::kSerialOnly;
    const std::string diff = compare_json(text, threads, &pass);
    threads = threads == 2 ? 3 : 2;  // as is with 2 threads, closed with 3
    *took = pass == Pass::kSplit;
    return diff;
  });
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
  const auto [i, split] =
      test::differential_fuzz({seed_doc}, 0x5eed5011, 4.0, [](const std::string& doc, size_t n, bool* took) {
        Pass pass = Pass::kSerialOnly;
        const std::string diff = compare_json(doc, 2 + static_cast<unsigned>(n % 3), &pass);
        *took = pass == Pass::kSplit;
        return diff;
      });
  std::printf("[ fuzz     ] %zu mutated inputs, %zu took the parallel pass\n", i, split);
  EXPECT_GT(split, 0u);
}

}  // namespace
}  // namespace gpuutil
