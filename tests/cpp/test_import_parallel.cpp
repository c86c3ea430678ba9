// The piece pass (traceEvents cut into pieces, read in runs on one or
// several threads, each run with one reused parser) gives exactly the
// serial import's result: every event and its order, the interned names,
// threads, devices, rank, steps, diagnostics with their examples, ok and the
// error text.
//
// Checked on every shared real trace (with 2, 3 and 4 threads, with and
// without pieces, and on one thread in pieces), on planted
// documents built to put cut candidates in awkward places (escaped and raw
// newlines in strings, objects nested in args, keys before and after
// traceEvents, a second traceEvents array, a bare array root, tiny arrays,
// non-object elements, invalid UTF-8, trailing bytes), on every truncation
// of a small trace, and on randomly mutated Kineto documents. The piece
// pass is forced on small documents with ImportOptions (tiny pieces cut
// nearly every event boundary); the process-wide
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

#include "import/kineto/import_passes.h"
#include "import/kineto/parallel_split.h"
#include "import/source/trace_bytes.h"
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
  o.piece_bytes = 0;
  return o;
}

// A way to run the piece pass: threads, and the piece size (0: one piece
// per thread).
struct Split {
  Split(unsigned t, size_t p = 0) : threads(t), piece_bytes(p) {}  // NOLINT(google-explicit-constructor)
  unsigned threads;
  size_t piece_bytes;
};

std::ostream& operator<<(std::ostream& os, const Split& s) {
  return os << s.threads << " threads, pieces of " << s.piece_bytes << " bytes";
}

ImportOptions parallel_options(Split split) {
  ImportOptions o;
  o.threads = split.threads;
  o.parallel_min_bytes = 0;
  o.piece_bytes = split.piece_bytes;
  return o;
}

// Which pass produced a result.
enum class Pass { kSplit, kFallback, kSerialOnly };

// Imports `doc` serially and with `split`; returns the difference ("" when
// identical) and which pass the split import took.
std::string compare_json(const std::string& doc, Split split, Pass* pass = nullptr) {
  const ImportResult serial = import_kineto_json(doc, "<doc>", serial_options());
  const replay::ImportPassCounts before = replay::import_pass_counts();
  const ImportResult parallel = import_kineto_json(doc, "<doc>", parallel_options(split));
  const replay::ImportPassCounts after = replay::import_pass_counts();
  if (pass != nullptr) {
    *pass = after.split_done > before.split_done           ? Pass::kSplit
            : after.split_abandoned > before.split_abandoned ? Pass::kFallback
                                                             : Pass::kSerialOnly;
  }
  return first_difference(serial, parallel);
}

// Pieces this small put a cut at nearly every event boundary of a planted
// document (its events are about 250 bytes).
constexpr size_t kTinyPieceBytes = 100;

// Every way a test tries: the automatic 2 threads and more runs, so the
// middle-run path is exercised as well, each in one piece per thread and
// in tiny pieces, and one thread in tiny pieces.
const Split kThreadCounts[] = {{2}, {3}, {4}, {7}, {1, kTinyPieceBytes}, {2, kTinyPieceBytes}, {3, kTinyPieceBytes}};

// Expects identical results for every way, and `expected` as the pass the
// 2-thread import took.
void expect_same(const std::string& doc, Pass expected, const char* label) {
  for (const Split split : kThreadCounts) {
    Pass pass = Pass::kSerialOnly;
    EXPECT_EQ(compare_json(doc, split, &pass), "") << label << ", " << split;
    if (split.threads == 2 && split.piece_bytes == 0) {
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
  for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(doc, threads), "") << threads;
}

TEST(ParallelImport, CutInsideNestedArgsFallsBackToSerial) {
  // Every event's args hold a list of objects laid out like events: cuts
  // land inside args as well as between events.
  const std::string nested = ",\n      \"list\": [\n        {\"a\": 1},\n        {\"b\": {\"c\": [1, {\"d\": 2}]}}\n      ]";
  const std::string doc = kineto_doc(150, "", "  \"traceName\": \"x\"", nested);
  for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(doc, threads), "") << threads;
  // A document whose only event-like separators are inside one event's args.
  const std::string one = "{\n  \"traceEvents\": [\n" + kineto_event(1, "k", nested) + "\n  ]\n}\n";
  for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(one, threads), "") << threads;
}

TEST(ParallelImport, SeparatorsOutsideTraceEventsFallBack) {
  // Cuts that land in a big array of objects before traceEvents.
  std::string big = "  \"other\": [\n";
  for (int i = 0; i < 400; ++i) big += std::string(i ? ",\n" : "") + "    {\"i\": " + std::to_string(i) + "}";
  big += "\n  ]";
  const std::string doc = kineto_doc(20, big, "");
  expect_same(doc, Pass::kFallback, "separators before traceEvents");
  const std::string after = kineto_doc(20, "", big);
  for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(after, threads), "") << threads;
  // Nested inside another top-level object: not read at all, like serial.
  const std::string nested = "{\n  \"wrapper\": {\n  \"traceEvents\": [\n" + kineto_events(100) + "\n  ]\n  }\n}\n";
  for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(nested, threads), "") << threads;
}

TEST(ParallelImport, BareArrayRoot) {
  const std::string doc = "[\n" + kineto_events(150) + "\n]\n";
  expect_same(doc, Pass::kSplit, "bare array");
  for (const std::string& trailing : {std::string("\n]"), std::string(" x"), std::string("\n{}")}) {
    for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(doc + trailing, threads), "") << trailing;
  }
}

TEST(ParallelImport, TinyArrays) {
  for (int n = 0; n <= 6; ++n) {
    const std::string doc = kineto_doc(n, "", "  \"traceName\": \"x\"");
    for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(doc, threads), "") << n << " events";
  }
  for (const char* doc : {"{\"traceEvents\": []}", "[]", "{}", "[\n  {},\n  {}\n]", "{\n  \"traceEvents\": [\n  {},\n  {}\n  ]\n}"}) {
    for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(doc, threads), "") << doc;
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
    for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(doc + trailing, threads), "") << trailing;
  }
  // Broken key/value syntax after the events array (On Demand skips an
  // unread value loosely: `"a": }` passes serially, and must in parallel).
  for (const std::string& after : {std::string("  \"a\": }"), std::string("  \"a\" 1"), std::string("  \"a\": 1},{\"b\": 2")}) {
    const std::string bad = kineto_doc(150, "", after);
    for (const Split threads : kThreadCounts) EXPECT_EQ(compare_json(bad, threads), "") << after;
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
  size_t n = 0;
  const size_t split = test::every_truncation_taken(doc, 0, [&n](const std::string& text, bool* took) {
    Pass pass = Pass::kSerialOnly;
    // As is with 2 threads, closed with 3; every other byte in tiny pieces.
    const Split way(n % 2 == 0 ? 2 : 3, (n / 2) % 2 == 0 ? 0 : kTinyPieceBytes);
    ++n;
    const std::string diff = compare_json(text, way, &pass);
    *took = pass == Pass::kSplit;
    return diff;
  });
  EXPECT_GT(split, 0u);
}

TEST(PieceImport, OneThreadInPiecesReadsEveryPieceWithOneParser) {
  const std::string doc = kineto_doc(200, std::string(kDeviceProperties), "  \"traceName\": \"t.json\"");
  replay::SplitPlan plan;
  ASSERT_TRUE(plan.make(doc, 1, 0.5, kTinyPieceBytes));
  EXPECT_EQ(plan.group_count(), 1u);
  EXPECT_GT(plan.piece_count(), 150u);  // about one cut per event
  // Piece 0 holds the keys before the events array whole.
  EXPECT_GT(plan.first_close_offset(), doc.find("\"traceEvents\""));
  Pass pass = Pass::kSerialOnly;
  EXPECT_EQ(compare_json(doc, Split(1, kTinyPieceBytes), &pass), "");
  EXPECT_EQ(static_cast<int>(pass), static_cast<int>(Pass::kSplit));
  // Under twice the piece size a document is read in one piece: serially.
  EXPECT_EQ(compare_json(doc, Split(1, doc.size()), &pass), "");
  EXPECT_EQ(static_cast<int>(pass), static_cast<int>(Pass::kSerialOnly));
}

TEST(PieceImport, GroupsArePiecesInOrderAndEachPiecePlantsAnArray) {
  const std::string doc = kineto_doc(300, "", "  \"traceName\": \"x\"");
  replay::SplitPlan plan;
  ASSERT_TRUE(plan.make(doc, 3, 0.5, 2000));
  ASSERT_EQ(plan.group_count(), 3u);
  EXPECT_EQ(plan.group_first_piece(0), 0u);
  size_t pieces = 0;
  for (size_t g = 0; g < plan.group_count(); ++g) {
    EXPECT_LT(plan.group_first_piece(g), plan.group_end_piece(g)) << "group " << g << " is empty";
    pieces += plan.group_end_piece(g) - plan.group_first_piece(g);
  }
  EXPECT_EQ(pieces, plan.piece_count());
  EXPECT_GT(plan.piece_count(), 20u);
  std::string planted = doc;
  plan.plant(planted.data());
  for (size_t i = 1; i < plan.piece_count(); ++i) {
    const replay::ChunkSpan span = plan.piece(i);
    EXPECT_EQ(planted[span.begin_offset], '[') << "piece " << i;
    // Object root: each cut reads `]}[`; the `}` closes piece 0's root
    // object and lies in no later piece.
    EXPECT_EQ(plan.piece(i - 1).end_offset + (i == 1 ? 0 : 1), span.begin_offset)
        << "piece " << i << " does not follow its neighbour";
  }
  plan.restore(planted.data());
  EXPECT_EQ(planted, doc);
}

TEST(PieceImport, EscapedStringsInAWorkersPiecesOutliveTheReusedParser) {
  // Every name has escapes, so simdjson unescapes it into the parser's
  // string buffer, which the worker's next piece overwrites: the worker
  // must keep its own copy until the events are mapped.
  std::string events;
  for (int i = 0; i < 300; ++i) {
    if (i > 0) events += ",\n  ";
    events += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\\u00e9rnel_\\\"" + std::to_string(i) +
              "\\\"\", \"pid\": 0, \"tid\": 7, \"ts\": " + std::to_string(1000 + 10 * i) +
              ", \"dur\": 5, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": " + std::to_string(i + 1) + "}}";
  }
  const std::string doc = "{\n  \"traceEvents\": [\n  " + events + "\n  ]\n}\n";
  const ImportResult serial = import_kineto_json(doc, "<doc>", serial_options());
  ASSERT_TRUE(serial.ok) << serial.error;
  ASSERT_EQ(serial.store.activities.size(), 300u);
  for (const Split way : {Split(2, kTinyPieceBytes), Split(3, kTinyPieceBytes), Split(2, 1000)}) {
    Pass pass = Pass::kSerialOnly;
    EXPECT_EQ(compare_json(doc, way, &pass), "") << way;
    EXPECT_EQ(static_cast<int>(pass), static_cast<int>(Pass::kSplit)) << way;
  }
  const ImportResult pieces = import_kineto_json(doc, "<doc>", parallel_options(Split(2, kTinyPieceBytes)));
  EXPECT_EQ(pieces.store.names.view(pieces.store.activities.back().name), "k\u00e9rnel_\"299\"");
}

// ---------------------------------------------------------------- real traces

TEST(ParallelImport, EveryRealTraceMatchesSerial) {
  GPUUTIL_REQUIRE_TRACES();
  const std::vector<std::string> paths = test::all_traces();
  ASSERT_FALSE(paths.empty());
  size_t large = 0;
  for (const std::string& path : paths) {
    const ImportResult serial = import_kineto_file(path, serial_options());
    const size_t default_piece = ImportOptions{}.piece_bytes;
    for (const Split way : {Split(2), Split(3), Split(4), Split(1, default_piece), Split(2, default_piece),
                            Split(2, 4096)}) {
      const replay::ImportPassCounts before = replay::import_pass_counts();
      const ImportResult parallel = import_kineto_file(path, parallel_options(way));
      const replay::ImportPassCounts after = replay::import_pass_counts();
      EXPECT_EQ(first_difference(serial, parallel), "") << path << ", " << way;
      EXPECT_EQ(after.split_abandoned, before.split_abandoned) << path << ": piece pass abandoned, " << way;
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
        const Split way(1 + static_cast<unsigned>(n % 3), (n / 3) % 2 == 0 ? 0 : kTinyPieceBytes);
        const std::string diff = compare_json(doc, way.threads == 1 && way.piece_bytes == 0 ? Split(2) : way, &pass);
        *took = pass == Pass::kSplit;
        return diff;
      });
  std::printf("[ fuzz     ] %zu mutated inputs, %zu took the parallel pass\n", i, split);
  EXPECT_GT(split, 0u);
}

}  // namespace
}  // namespace gpuutil
