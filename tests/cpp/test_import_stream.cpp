// The streaming import (the document read and parsed a window at a time)
// gives exactly the serial import's result: every event and its order, the
// interned names, threads, devices, rank, steps, diagnostics with their
// examples, ok and the error text; and it holds a window, not the document.
//
// Checked on every shared real trace (gzip inflated as it streams, and the
// same trace as a plain file, with windows of 4 KiB, 64 KiB and the
// default), on the planted documents of the parallel-pass tests (cuts in
// awkward places), events larger than the window, one-line documents,
// every truncation of a small trace, gzip faults, and randomly mutated
// documents. The process-wide pass counters pin which pass produced each
// result: the stream itself, or the whole-document pass after the stream
// gave up. Peak memory is checked against the whole-document pass on a
// 48 MB document.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "import/kineto/import_passes.h"
#include "import/source/trace_bytes.h"
#include "import/source/trace_source.h"
#include "gpuutil/kineto_import.h"
#include "gzip_bytes.h"
#include "import_compare.h"
#include "mutation.h"
#include "peak_rss.h"
#include "traces.h"

namespace gpuutil {
namespace {

using test::first_difference;
using test::gzip_bytes;
using test::kDeviceProperties;
using test::kineto_doc;
using test::kineto_event;
using test::kineto_events;

ImportOptions serial_options() {
  ImportOptions o;
  o.threads = 1;
  o.piece_bytes = 0;
  o.stream_min_bytes = SIZE_MAX;
  return o;
}

ImportOptions stream_options(size_t window_bytes) {
  ImportOptions o;
  o.threads = 1;
  o.stream_min_bytes = 0;
  o.stream_window_bytes = window_bytes;
  return o;
}

// Streaming with a second thread allowed: a gzip stream is inflated ahead
// of the parse (TraceSource::read_ahead).
ImportOptions stream_ahead_options(size_t window_bytes) {
  ImportOptions o = stream_options(window_bytes);
  o.threads = 2;
  return o;
}

// Which pass produced a streaming import's result.
enum class Pass { kStream, kAbandoned, kWhole };

const char* pass_name(Pass p) {
  return p == Pass::kStream ? "stream" : p == Pass::kAbandoned ? "abandoned" : "whole";
}

template <typename Import>
Pass observe(Import import) {
  const replay::ImportPassCounts before = replay::import_pass_counts();
  import();
  const replay::ImportPassCounts after = replay::import_pass_counts();
  if (after.stream_done > before.stream_done) return Pass::kStream;
  if (after.stream_abandoned > before.stream_abandoned) return Pass::kAbandoned;
  return Pass::kWhole;
}

// Imports `doc` serially and streamed with `window_bytes`; returns the
// difference ("" when identical) and which pass the stream took.
std::string compare_json(const std::string& doc, size_t window_bytes, Pass* pass = nullptr) {
  const ImportResult serial = import_kineto_json(doc, "<doc>", serial_options());
  ImportResult streamed;
  const Pass p = observe([&] { streamed = import_kineto_json(doc, "<doc>", stream_options(window_bytes)); });
  if (pass != nullptr) *pass = p;
  return first_difference(serial, streamed);
}

// Windows a planted document is streamed with: the smallest, and one that
// puts most of a small document in chunk 0.
constexpr size_t kWindows[] = {4096, 5000, 9000};

void expect_same(const std::string& doc, Pass expected, const char* label) {
  for (const size_t window : kWindows) {
    Pass pass = Pass::kWhole;
    EXPECT_EQ(compare_json(doc, window, &pass), "") << label << ", window " << window;
    if (window == 4096) {
      EXPECT_STREQ(pass_name(pass), pass_name(expected)) << label;
    }
  }
}


std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() / ("gpuutil_stream_" + std::to_string(::getpid()) + "_" + name)).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string planted() {
  return kineto_doc(200, std::string(kDeviceProperties) + ",\n  \"distributedInfo\": {\"rank\": 3}",
                    "  \"traceName\": \"t.json\"");
}

// ---------------------------------------------------------------- planted documents

TEST(StreamImport, PlantedTraceStreamsInPiecesAndMatchesSerial) {
  const std::string doc = planted();
  ASSERT_GT(doc.size(), 3 * 4096u);
  expect_same(doc, Pass::kStream, "planted");
  const ImportResult r = import_kineto_json(doc, "<doc>", stream_options(4096));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.store.rank, 3);
  EXPECT_EQ(r.store.devices.size(), 1u);
  EXPECT_GT(r.store.steps.size(), 10u);
  EXPECT_GT(r.store.diagnostics.count(Diag::event_malformed), 5u);
}

TEST(StreamImport, KeysAfterTraceEventsAndASecondArray) {
  expect_same(kineto_doc(150, "", std::string(kDeviceProperties) +
                                      ",\n  \"distributedInfo\": {\"rank\": 5},\n  \"roctracer_version\": 4,\n"
                                      "  \"traceName\": \"x\""),
              Pass::kStream, "metadata after");
  expect_same(kineto_doc(150, "", "  \"traceEvents\": [\n" + kineto_events(12) + "\n  ],\n  \"traceName\": \"x\""),
              Pass::kStream, "second array");
  expect_same(kineto_doc(150, "  \"traceEvents\": [\n" + kineto_events(3) + "\n  ]", ""), Pass::kStream,
              "first array before");
}

TEST(StreamImport, EscapedAndRawNewlinesInStrings) {
  expect_same(kineto_doc(150, "", "", ", \"note\": \"a},\\n  {b},\\r\\n{c\""), Pass::kStream, "escaped");
  // A raw newline inside a string that looks like a separator: invalid
  // JSON, which the stream gives up on and the serial pass reports.
  std::string doc = kineto_doc(150, "", "");
  const size_t name = doc.find("\"name\": \"", doc.size() / 2);
  doc.insert(name + 9, "x},\n  {y");
  ASSERT_FALSE(import_kineto_json(doc, "<doc>", serial_options()).ok);
  for (const size_t window : kWindows) EXPECT_EQ(compare_json(doc, window), "") << window;
}

TEST(StreamImport, SeparatorsInsideArgsAndOutsideTraceEvents) {
  const std::string nested = ",\n      \"list\": [\n        {\"a\": 1},\n        {\"b\": {\"c\": [1, {\"d\": 2}]}}\n      ]";
  Pass pass = Pass::kWhole;
  EXPECT_EQ(compare_json(kineto_doc(150, "", "  \"traceName\": \"x\"", nested), 4096, &pass), "");
  EXPECT_STREQ(pass_name(pass), "abandoned");
  std::string big = "  \"other\": [\n";
  for (int i = 0; i < 600; ++i) big += std::string(i ? ",\n" : "") + "    {\"i\": " + std::to_string(i) + "}";
  big += "\n  ]";
  // Separators before the traceEvents key are never a first cut: the
  // window grows past the key and the stream goes on from there.
  expect_same(kineto_doc(150, big, ""), Pass::kStream, "separators before traceEvents");
  for (const size_t window : kWindows) EXPECT_EQ(compare_json(kineto_doc(60, "", big), window), "") << window;
  const std::string wrapped = "{\n  \"wrapper\": {\n  \"traceEvents\": [\n" + kineto_events(100) + "\n  ]\n  }\n}\n";
  for (const size_t window : kWindows) EXPECT_EQ(compare_json(wrapped, window), "") << window;
}

TEST(StreamImport, BareArrayRootAndTrailingBytes) {
  const std::string doc = "[\n" + kineto_events(150) + "\n]\n";
  expect_same(doc, Pass::kStream, "bare array");
  for (const std::string& trailing : {std::string("\n]"), std::string(" x"), std::string("\n{}")}) {
    for (const size_t window : kWindows) EXPECT_EQ(compare_json(doc + trailing, window), "") << trailing;
  }
  const std::string object = kineto_doc(150, "", "");
  expect_same("\xEF\xBB\xBF" + object, Pass::kStream, "bom");
  expect_same("\n\n   " + object, Pass::kStream, "leading whitespace");
  for (const std::string& trailing : {std::string("}"), std::string("x"), std::string("\n,\"a\": 1}"), std::string("\0", 1)}) {
    for (const size_t window : kWindows) EXPECT_EQ(compare_json(object + trailing, window), "") << trailing;
  }
  for (const std::string& after : {std::string("  \"a\": }"), std::string("  \"a\" 1"), std::string("  \"a\": 1},{\"b\": 2")}) {
    for (const size_t window : kWindows) EXPECT_EQ(compare_json(kineto_doc(150, "", after), window), "") << after;
  }
}

TEST(StreamImport, NonObjectElementsKeepTheirIndices) {
  std::string events = kineto_events(150);
  for (const double at : {0.3, 0.6, 0.9}) {
    const size_t late = events.find("},\n  {", static_cast<size_t>(events.size() * at));
    ASSERT_NE(late, std::string::npos);
    events.insert(late + 2, "\n  17, \"text\", [1, 2], null, true,");
  }
  const std::string doc = "{\n  \"traceEvents\": [\n" + events + "\n  ]\n}\n";
  expect_same(doc, Pass::kStream, "non-objects");
  const ImportResult r = import_kineto_json(doc, "<doc>", stream_options(4096));
  EXPECT_GE(r.store.diagnostics.count(Diag::event_malformed), 15u);
}

TEST(StreamImport, InvalidUtf8InALaterPieceIsRepairedLikeSerial) {
  std::string doc = kineto_doc(150, "", "  \"traceName\": \"x\"");
  const size_t at = doc.find("op_", doc.size() * 3 / 4);
  doc[at + 1] = static_cast<char>(0xC3);
  expect_same(doc, Pass::kAbandoned, "invalid utf-8");
  EXPECT_TRUE(import_kineto_json(doc, "<doc>", stream_options(4096)).ok);
}

TEST(StreamImport, EventsLargerThanTheWindowGrowIt) {
  // One event of 40 KB in the middle: the window doubles until it fits.
  const std::string big_arg = ", \"blob\": \"" + std::string(40000, 'x') + "\"";
  std::string events = kineto_events(60) + ",\n" + kineto_event(61, "huge", big_arg) + ",\n" + kineto_events(60);
  const std::string doc = "{\n  \"traceEvents\": [\n" + events + "\n  ]\n}\n";
  expect_same(doc, Pass::kStream, "event larger than the window");
  // Deep nesting around a cut.
  std::string deep = ", \"deep\": ";
  for (int i = 0; i < 3000; ++i) deep += "{\"a\": ";
  deep += "1";
  for (int i = 0; i < 3000; ++i) deep += "}";
  expect_same(kineto_doc(60, "", "", deep), Pass::kStream, "deep args");
}

TEST(StreamImport, OneLineDocumentIsReadWhole) {
  // No raw newline anywhere: no cut, so the window grows to the document
  // and the whole-document pass reads it (no stream, nothing abandoned).
  std::string doc = "{\"traceEvents\": [";
  for (int i = 0; i < 400; ++i) {
    doc += std::string(i ? "," : "") + "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op\", \"pid\": 1, \"tid\": 1, \"ts\": " +
           std::to_string(1000 + i) + ", \"dur\": 1}";
  }
  doc += "]}";
  ASSERT_GT(doc.size(), 4 * 4096u);
  expect_same(doc, Pass::kWhole, "one line");
}

TEST(StreamImport, TinyAndEmptyDocuments) {
  for (int n = 0; n <= 6; ++n) {
    for (const size_t window : kWindows) {
      EXPECT_EQ(compare_json(kineto_doc(n, "", "  \"traceName\": \"x\""), window), "") << n;
    }
  }
  for (const char* doc : {"", " ", "{\"traceEvents\": []}", "[]", "{}", "nonsense", "[\n  {},\n  {}\n]"}) {
    for (const size_t window : kWindows) EXPECT_EQ(compare_json(doc, window), "") << doc;
  }
  // Gzip magic with (almost) nothing after it: no trailer to read a size
  // from, so it streams, and fails like gunzip() does.
  for (const std::string& doc : {std::string("\x1f\x8b", 2), std::string("\x1f\x8b\x08", 3),
                                 gzip_bytes("").substr(0, 12)}) {
    const ImportResult streamed = import_kineto_json(doc, "<doc>", stream_options(4096));
    EXPECT_FALSE(streamed.ok);
    EXPECT_EQ(first_difference(import_kineto_json(doc, "<doc>", serial_options()), streamed), "") << streamed.error;
  }
}

TEST(StreamImport, EveryTruncationMatchesSerial) {
  const std::string doc = kineto_doc(40, std::string(kDeviceProperties), "  \"traceName\": \"x\"");
  ASSERT_GT(doc.size(), 4096u + 1000u);
  const size_t streamed = test::every_truncation_taken(doc, 4000, [](const std::string& text, bool* took) {
    Pass pass = Pass::kWhole;
    const std::string diff = compare_json(text, 4096, &pass);
    *took = pass == Pass::kStream;
    return diff;
  });
  EXPECT_GT(streamed, 0u);
}

// ---------------------------------------------------------------- gzip and files

TEST(StreamImport, GzipStreamsAndConcatenatedMembers) {
  const std::string doc = planted();
  const std::string gz = gzip_bytes(doc);
  ImportResult streamed;
  EXPECT_STREQ(pass_name(observe([&] { streamed = import_kineto_json(gz, "<doc>", stream_options(4096)); })), "stream");
  EXPECT_EQ(first_difference(import_kineto_json(doc, "<doc>", serial_options()), streamed), "");
  // Two members (`cat a.gz b.gz`): inflated in sequence.
  const size_t half = doc.size() / 2;
  const std::string two = gzip_bytes(doc.substr(0, half)) + gzip_bytes(doc.substr(half));
  EXPECT_STREQ(pass_name(observe([&] { streamed = import_kineto_json(two, "<doc>", stream_options(4096)); })), "stream");
  EXPECT_EQ(first_difference(import_kineto_json(doc, "<doc>", serial_options()), streamed), "");
  // Inflated ahead on a second thread: the same.
  for (const std::string* bytes : {&gz, &two}) {
    EXPECT_STREQ(pass_name(observe([&] { streamed = import_kineto_json(*bytes, "<doc>", stream_ahead_options(4096)); })),
                 "stream");
    EXPECT_EQ(first_difference(import_kineto_json(doc, "<doc>", serial_options()), streamed), "");
  }
  // Trailing garbage after the last member is ignored, as gunzip() does.
  EXPECT_EQ(first_difference(import_kineto_json(gz + "xyz", "<doc>", serial_options()),
                             import_kineto_json(gz + "xyz", "<doc>", stream_options(4096))),
            "");
}

TEST(StreamImport, GzipAndFileFaultsReadLikeTheWholeDocumentPass) {
  const std::string doc = planted();
  const std::string gz = gzip_bytes(doc);
  std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated.json.gz", gz.substr(0, gz.size() * 2 / 3)},
      {"no_trailer.json.gz", gz.substr(0, gz.size() - 4)},
      {"corrupt.json.gz", gz.substr(0, 40) + std::string(200, '\x55') + gz.substr(240)},
      {"binary.json.gz", gzip_bytes(std::string(3 * 4096, '\x07'))},
      {"binary.json", std::string(3 * 4096, '\x07')},
  };
  for (const auto& [name, bytes] : cases) {
    const std::string path = temp_file(name, bytes);
    const ImportResult whole = import_kineto_file(path, serial_options());
    const ImportResult streamed = import_kineto_file(path, stream_options(4096));
    EXPECT_FALSE(streamed.ok) << name;
    EXPECT_EQ(first_difference(whole, streamed), "") << name << ": " << streamed.error;
    const ImportResult ahead = import_kineto_file(path, stream_ahead_options(4096));
    EXPECT_EQ(first_difference(whole, ahead), "") << name << " read ahead: " << ahead.error;
    EXPECT_EQ(first_difference(import_kineto_json(bytes, "<doc>", serial_options()),
                               import_kineto_json(bytes, "<doc>", stream_options(4096))),
              "")
        << name;
    std::filesystem::remove(path);
  }
  const ImportResult dir = import_kineto_file(std::filesystem::temp_directory_path().string(), stream_options(4096));
  EXPECT_NE(dir.error.find("is a directory"), std::string::npos) << dir.error;
  const ImportResult missing = import_kineto_file("/nonexistent/trace.json", stream_options(4096));
  EXPECT_NE(missing.error.find("cannot open /nonexistent/trace.json"), std::string::npos) << missing.error;
}

// ---------------------------------------------------------------- read-ahead

// Everything `source` hands over, read `chunk` bytes at a time, with the
// bytes of a failing read: the bytes, and the error ("" when none).
std::pair<std::string, std::string> drain(replay::TraceSource& source, size_t chunk) {
  std::string out;
  std::string buffer(chunk, '\0');
  for (;;) {
    size_t got = 0;
    std::string error;
    const bool ok = source.read(buffer.data(), chunk, &got, &error);
    out.append(buffer.data(), got);
    if (!ok) return {out, error};
    if (got < chunk) return {out, ""};
  }
}

TEST(ReadAhead, HandsOverTheSameBytesWhateverTheBlockAndReadSizes) {
  const std::string doc = planted();
  const std::string gz = gzip_bytes(doc);
  const std::string two = gzip_bytes(doc.substr(0, 1000)) + gzip_bytes(doc.substr(1000));
  for (const std::string* bytes : {&gz, &two, &doc}) {
    for (const size_t block : {size_t{37}, size_t{4096}, size_t{1} << 20}) {
      for (const size_t chunk : {size_t{1}, size_t{7}, size_t{4095}, size_t{300000}}) {
        replay::TraceSource source;
        source.open_memory(*bytes);
        ASSERT_TRUE(source.read_ahead(block, 2));
        const auto [out, error] = drain(source, chunk);
        EXPECT_EQ(error, "") << "block " << block << ", reads of " << chunk;
        EXPECT_TRUE(out == doc) << "block " << block << ", reads of " << chunk << ": " << out.size() << " of "
                                << doc.size() << " bytes";
      }
    }
  }
}

TEST(ReadAhead, AFaultComesAfterEveryByteBeforeItWithTheSameError) {
  const std::string doc = planted();
  const std::string gz = gzip_bytes(doc);
  for (const std::string& bad : {gz.substr(0, gz.size() * 2 / 3), gz.substr(0, gz.size() - 4),
                                 gz.substr(0, 40) + std::string(200, '\x55') + gz.substr(240)}) {
    replay::TraceSource direct;
    direct.open_memory(bad);
    const auto [direct_bytes, direct_error] = drain(direct, 4096);
    ASSERT_NE(direct_error, "");
    for (const size_t block : {size_t{64}, size_t{4096}, size_t{65536}}) {
      replay::TraceSource ahead;
      ahead.open_memory(bad);
      ASSERT_TRUE(ahead.read_ahead(block, 3));
      const auto [bytes, error] = drain(ahead, 4096);
      EXPECT_EQ(error, direct_error) << "block " << block;
      EXPECT_TRUE(bytes == direct_bytes) << "block " << block << ": " << bytes.size() << " bytes, read directly "
                                         << direct_bytes.size();
    }
  }
}

TEST(ReadAhead, AReaderThatStopsEarlyStopsTheThread) {
  // The thread is blocked on full blocks when the source goes away; the
  // destructor must wake and join it (a hang fails by ctest's timeout).
  const std::string gz = gzip_bytes(kineto_doc(3000, "", ""));
  for (int i = 0; i < 50; ++i) {
    replay::TraceSource source;
    source.open_memory(gz);
    ASSERT_TRUE(source.read_ahead(256, 2));
    char first[10];
    size_t got = 0;
    std::string error;
    ASSERT_TRUE(source.read(first, sizeof first, &got, &error)) << error;
    EXPECT_EQ(got, sizeof first);
  }
}

// ---------------------------------------------------------------- real traces

TEST(StreamImport, EveryRealTraceMatchesSerial) {
  GPUUTIL_REQUIRE_TRACES();
  const std::vector<std::string> paths = test::all_traces();
  ASSERT_FALSE(paths.empty());
  size_t streamed = 0;
  for (const std::string& path : paths) {
    const ImportResult serial = import_kineto_file(path, serial_options());
    replay::TraceBytes plain;
    std::string error;
    ASSERT_TRUE(replay::read_trace_file(path, &plain, &error)) << error;
    const std::string plain_path = temp_file("real.json", std::string(plain.view()));
    for (const size_t window : {size_t{4096}, size_t{65536}, ImportOptions{}.stream_window_bytes}) {
      for (const std::string& file : {path, plain_path}) {
        ImportResult result;
        const Pass pass = observe([&] { result = import_kineto_file(file, stream_options(window)); });
        result.store.source = serial.store.source;  // the plain copy has another name
        EXPECT_EQ(first_difference(serial, result), "") << path << ", window " << window;
        EXPECT_NE(pass, Pass::kAbandoned) << path << ": stream abandoned, window " << window;
        streamed += pass == Pass::kStream;
      }
    }
    ImportResult ahead;
    const Pass pass =
        observe([&] { ahead = import_kineto_file(path, stream_ahead_options(ImportOptions{}.stream_window_bytes)); });
    EXPECT_EQ(first_difference(serial, ahead), "") << path << ", read ahead";
    EXPECT_NE(pass, Pass::kAbandoned) << path << ": stream abandoned, read ahead";
    std::filesystem::remove(plain_path);
  }
  EXPECT_GE(streamed, paths.size());
}

// ---------------------------------------------------------------- memory

using test::peak_rss_above;
using test::reset_peak_rss;
using test::rss_bytes;

TEST(StreamImport, HoldsAWindowNotTheDocument) {
  // A 48 MB document of events the mapper keeps little of (cpu_op events
  // with long args), streamed from a file with a 1 MiB window: the import's
  // peak memory above what was resident before stays far below the
  // document, where the whole-document pass holds all of it.
  std::string doc = "{\n  \"traceEvents\": [\n";
  const std::string args = std::string(",\n    \"args\": {\n      \"Input Dims\": [[") + std::string(300, '1') + "]]\n    }";
  for (int i = 0; doc.size() < (size_t{48} << 20); ++i) {
    if (i) doc += ",\n";
    doc += "  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op" + std::to_string(i % 50) +
           "\", \"pid\": 1, \"tid\": 1,\n    \"ts\": " + std::to_string(1000 + 2 * i) + ", \"dur\": 1" + args + "\n  }";
  }
  doc += "\n  ]\n}\n";
  const std::string path = temp_file("large.json", doc);
  const size_t doc_bytes = doc.size();
  std::string().swap(doc);
  if (!reset_peak_rss()) {
    std::filesystem::remove(path);
    GTEST_SKIP() << "cannot reset the peak RSS (/proc/self/clear_refs)";
  }
  auto peak_above_start = [&](const ImportOptions& options, ImportResult* out) {
    reset_peak_rss();
    const size_t start = rss_bytes();
    *out = import_kineto_file(path, options);
    return peak_rss_above(start);
  };
  ImportOptions streaming = stream_options(size_t{1} << 20);
  ImportResult streamed, whole;
  const size_t stream_peak = peak_above_start(streaming, &streamed);
  const size_t whole_peak = peak_above_start(serial_options(), &whole);
  std::filesystem::remove(path);
  ASSERT_TRUE(streamed.ok) << streamed.error;
  EXPECT_EQ(first_difference(whole, streamed), "");
  std::printf("[ memory   ] %.1f MB document: peak above start %.1f MB streamed, %.1f MB whole\n", doc_bytes / 1e6,
              stream_peak / 1e6, whole_peak / 1e6);
  EXPECT_GT(whole_peak, doc_bytes);      // the measure sees the document when it is held
  EXPECT_LT(stream_peak, doc_bytes / 4);  // and the stream does not hold it
}

// ---------------------------------------------------------------- mutation fuzz

TEST(StreamImportFuzz, MutatedTracesMatchSerial) {
  // A planted document (several pieces at a 4 KiB window) and a real one.
  std::vector<std::string> seeds = {planted()};
  replay::TraceBytes real;
  std::string error;
  if (replay::read_trace_file(test::trace_path("hta_event_sync_a100.json.gz"), &real, &error)) {
    seeds.emplace_back(real.view());
  }
  const auto [i, streamed] =
      test::differential_fuzz(seeds, 0x57ea3, 5.0, [](const std::string& doc, size_t n, bool* took) {
        Pass pass = Pass::kWhole;
        const std::string diff = compare_json(doc, kWindows[n % 3], &pass);
        *took = pass == Pass::kStream;
        return diff;
      });
  std::printf("[ fuzz     ] %zu mutated inputs, %zu streamed to the end\n", i, streamed);
  EXPECT_GT(streamed, 0u);
}

}  // namespace
}  // namespace gpuutil
