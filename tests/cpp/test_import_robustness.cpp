// Bad input never crashes the Kineto importer, and what it reports is
// consistent with what it stored.
//
// Hand-picked bad inputs (broken gzip, invalid JSON, wrong field types,
// extreme numbers, empty and missing files) plus a deterministic randomized
// mutation test: a seeded PRNG truncates, flips bytes, deletes and duplicates
// spans and swaps number and string tokens of a small real trace and of a
// hand-written trace that touches every field the importer reads. Each
// result is checked for the importer's contract: ok <=> no error-severity
// diagnostic, a one-line error when not ok, and a well-formed store either
// way (end >= start, valid thread and name ids, sorted non-overlapping
// steps).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "import/source/trace_bytes.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "mutation.h"
#include "traces.h"

namespace gpuutil {
namespace {

using test::mutate;
using test::traces_dir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A temp file removed when the object goes out of scope.
class TempFile {
 public:
  explicit TempFile(const std::string& bytes) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/gpuutil_robustness_" +
            std::to_string(reinterpret_cast<uintptr_t>(this)) + ".json.gz";
    std::ofstream(path_, std::ios::binary) << bytes;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string gzip_bytes(const std::string& plain) {
  z_stream zs{};
  deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, plain.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  zs.avail_in = static_cast<uInt>(plain.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// The importer's contract, checked on any result. Returns a description of
// the first violation, or "" when the result is consistent.
std::string contract_violation(const ImportResult& r) {
  const EventStore& s = r.store;
  if (r.ok) {
    if (!r.error.empty()) return "ok with an error message";
    if (s.diagnostics.any_error()) return "ok with an error-severity diagnostic";
  } else {
    if (r.error.empty()) return "not ok without an error message";
    if (r.error.find('\n') != std::string::npos) return "multi-line error";
    if (!s.diagnostics.any_error()) return "not ok without an error-severity diagnostic";
  }
  for (const DeviceActivity& a : s.activities) {
    if (a.end_ns < a.start_ns) return "activity ends before it starts";
    if (a.name >= s.names.size()) return "activity name id out of range";
  }
  for (const HostApiCall& c : s.api_calls) {
    if (c.end_ns < c.start_ns) return "api call ends before it starts";
    if (c.thread >= s.threads.size()) return "api call thread out of range";
    if (c.name >= s.names.size()) return "api call name id out of range";
  }
  for (const HostRange& g : s.ranges) {
    if (g.end_ns < g.start_ns) return "range ends before it starts";
    if (g.thread >= s.threads.size()) return "range thread out of range";
    if (g.name >= s.names.size()) return "range name id out of range";
  }
  for (size_t i = 0; i < s.steps.size(); ++i) {
    if (s.steps[i].end_ns < s.steps[i].start_ns) return "step ends before it starts";
    if (i > 0 && s.steps[i].start_ns < s.steps[i - 1].end_ns) return "steps overlap";
  }
  // Input that could not be read at all leaves the store empty.
  const bool unread = s.diagnostics.count(Diag::input_unreadable) > 0;
  if (unread && (!s.activities.empty() || !s.ranges.empty() || !s.steps.empty())) return "unreadable input with events";
  if (!unread && s.steps_source != "ProfilerStep" && s.steps_source != "whole_trace") return "unknown steps_source";
  return "";
}

#define EXPECT_CONSISTENT(result)                                   \
  do {                                                              \
    const std::string violation_ = contract_violation(result);      \
    EXPECT_TRUE(violation_.empty()) << violation_ << " / " << (result).error; \
  } while (0)

// ---------------------------------------------------------------- files and gzip

TEST(ImportRobustness, NonexistentFile) {
  const ImportResult r = import_kineto_file("/definitely/not/here.json");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.store.diagnostics.count(Diag::input_unreadable), 1u);
  EXPECT_CONSISTENT(r);
}

TEST(ImportRobustness, DirectoryInsteadOfFile) {
  const ImportResult r = import_kineto_file("/");
  EXPECT_FALSE(r.ok);
  EXPECT_CONSISTENT(r);
}

TEST(ImportRobustness, EmptyFileAndEmptyString) {
  TempFile empty("");
  const ImportResult from_file = import_kineto_file(empty.path());
  EXPECT_FALSE(from_file.ok);
  EXPECT_EQ(from_file.store.diagnostics.count(Diag::json_invalid), 1u);
  EXPECT_CONSISTENT(from_file);
  for (const char* text : {"", " ", "\n\t  "}) {
    const ImportResult r = import_kineto_json(text);
    EXPECT_FALSE(r.ok);
    EXPECT_CONSISTENT(r);
  }
}

TEST(ImportRobustness, TruncatedGzip) {
  const std::string good = gzip_bytes(R"J({"traceEvents": []})J");
  for (size_t keep : {size_t{2}, size_t{10}, good.size() / 2, good.size() - 4, good.size() - 1}) {
    TempFile file(good.substr(0, keep));
    const ImportResult r = import_kineto_file(file.path());
    EXPECT_FALSE(r.ok) << keep;
    EXPECT_EQ(r.store.diagnostics.count(Diag::input_unreadable), 1u) << keep;
    EXPECT_EQ(r.error.find('\n'), std::string::npos);
    EXPECT_CONSISTENT(r);
  }
}

TEST(ImportRobustness, TruncatedRealGzip) {
  const std::string path = traces_dir() + "/hta_sampled_rank0.json.gz";
  const std::string bytes = read_bytes(path);
  if (bytes.empty()) GTEST_SKIP() << "missing " << path;
  TempFile file(bytes.substr(0, bytes.size() / 3));
  const ImportResult r = import_kineto_file(file.path());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("truncated gzip"), std::string::npos) << r.error;
  EXPECT_CONSISTENT(r);
}

TEST(ImportRobustness, CorruptGzip) {
  std::string bytes = gzip_bytes(std::string(R"J({"traceEvents": [)J") + std::string(5000, ' ') + "]}");
  bytes[bytes.size() - 6] = static_cast<char>(bytes[bytes.size() - 6] ^ 0x55);  // CRC
  TempFile crc(bytes);
  const ImportResult r = import_kineto_file(crc.path());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("corrupt gzip"), std::string::npos) << r.error;
  EXPECT_CONSISTENT(r);

  const std::string garbage = std::string("\x1f\x8b\x08\x00", 4) + std::string(64, '\xff');
  const ImportResult g = import_kineto_json(garbage);
  EXPECT_FALSE(g.ok);
  EXPECT_EQ(g.store.diagnostics.count(Diag::input_unreadable), 1u);
  EXPECT_CONSISTENT(g);
}

TEST(ImportRobustness, GzipOfGarbageJson) {
  const ImportResult r = import_kineto_json(gzip_bytes("not json at all"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.store.diagnostics.count(Diag::json_invalid), 1u);
  EXPECT_CONSISTENT(r);
}

// ---------------------------------------------------------------- invalid JSON

TEST(ImportRobustness, InvalidJsonDocuments) {
  const char* docs[] = {
      "{",
      "[",
      "}",
      "]",
      "}{",
      "[}",
      "{]",
      R"J({"traceEvents": [)J",
      R"J({"traceEvents": [{)J",
      R"J({"traceEvents": [{"ph": "X",)J",
      R"J({"traceEvents": [{"ph": "X", "ts": 12)J",
      R"J({"traceEvents": [{]})J",
      R"J({"traceEvents": [{"ph" "X"}]})J",
      R"J({"traceEvents": [{"ph": "X"} {"ph": "X"}]})J",
      R"J({"traceEvents": [,]})J",
      R"J({"traceEvents": [{"ph": "X",}]})J",
      R"J({"traceEvents": [{"ph": "X", "name": "unterminated}]})J",
      "{\"traceEvents\": [{\"name\": \"tab\tinside\"}]}",
      R"J({"traceEvents": []} trailing)J",
      R"J({"traceEvents": []}})J",
      R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"flops": }}]})J",
      R"J([{"ph": "X"}]])J",
      R"J({"traceEvents": [{"ph": "X", "cat": "kernel", "args": {"grid": [1, 2}}]})J",
      R"J({"deviceProperties": [{"id": 0, "numSms": }], "traceEvents": []})J",
      R"J({"distributedInfo": {"rank": ]}, "traceEvents": []})J",
  };
  for (const char* doc : docs) {
    const ImportResult r = import_kineto_json(doc);
    EXPECT_CONSISTENT(r);
    EXPECT_FALSE(r.ok) << doc;
  }
}

TEST(ImportRobustness, FaultsInsideScalarValuesOnlySpoilTheEvent) {
  // On Demand validates a scalar only when it is read: a broken string or
  // number inside an event makes that event malformed, not the document.
  for (const char* doc : {R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\qb", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})J",
                          R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1x, "dur": 1}]})J"}) {
    const ImportResult r = import_kineto_json(doc);
    EXPECT_TRUE(r.ok) << doc;
    EXPECT_EQ(r.store.diagnostics.count(Diag::event_malformed), 1u) << doc;
    EXPECT_CONSISTENT(r);
  }
  // An optional argument that does not parse is ignored.
  const ImportResult flops = import_kineto_json(
      R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"flops": 1e}}]})J");
  ASSERT_TRUE(flops.ok);
  ASSERT_EQ(flops.store.ranges.size(), 1u);
  EXPECT_EQ(flops.store.ranges[0].flops, 0.0);
  EXPECT_CONSISTENT(flops);
  // A lone invalid scalar is invalid JSON.
  for (const char* doc : {"nonsense", "tru", "1x", "\"unterminated"}) {
    const ImportResult r = import_kineto_json(doc);
    EXPECT_FALSE(r.ok) << doc;
    EXPECT_EQ(r.store.diagnostics.count(Diag::json_invalid), 1u) << doc << " -> " << r.error;
    EXPECT_CONSISTENT(r);
  }
}

TEST(ImportRobustness, NulBytesAndControlCharacters) {
  const std::string with_nul = std::string(R"J({"traceEvents": [{"name": "a)J") + '\0' + R"J(b"}]})J";
  EXPECT_CONSISTENT(import_kineto_json(with_nul));
  const std::string nul_outside = std::string(R"J({"traceEvents": [)J") + '\0' + "]}";
  EXPECT_CONSISTENT(import_kineto_json(nul_outside));
  EXPECT_CONSISTENT(import_kineto_json(std::string(100, '\0')));
}

TEST(ImportRobustness, DeepNesting) {
  const std::string deep_array(200000, '[');
  EXPECT_FALSE(import_kineto_json(deep_array).ok);
  std::string nested = R"J({"traceEvents": [{"ph": "X", "args": )J";
  for (int i = 0; i < 5000; ++i) nested += R"J({"a": )J";
  nested += "1";
  for (int i = 0; i < 5000; ++i) nested += "}";
  nested += "}]}";
  const ImportResult r = import_kineto_json(nested);
  EXPECT_CONSISTENT(r);
}

// ---------------------------------------------------------------- wrong types and extremes

TEST(ImportRobustness, WrongFieldTypes) {
  const char* events[] = {
      R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": {"x": 1}, "dur": 1})J",
      R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": [1], "dur": 1})J",
      R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": true, "dur": 1})J",
      R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": null, "dur": 1})J",
      R"J({"ph": "X", "cat": "cpu_op", "name": {"n": 1}, "pid": 1, "tid": 1, "ts": 1, "dur": 1})J",
      R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": [1], "tid": 1, "ts": 1, "dur": 1})J",
      R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1.5, "tid": 1, "ts": 1, "dur": 1})J",
      R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": "x"})J",
      R"J({"ph": 7, "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J",
      R"J({"ph": "XX", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J",
      R"J({"ph": "", "cat": "cpu_op"})J",
      R"J({"ph": "X", "cat": ["kernel"], "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J",
      R"J({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1,
          "args": {"device": "zero", "stream": [7], "grid": {"x": 1}, "block": ["a", "b", "c"],
                   "registers per thread": -5, "shared memory": 1e99, "correlation": -1, "graph id": 5000000000}})J",
      R"J({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1,
          "args": {"device": 0, "stream": 7, "grid": [1, 2, 3, 4, 5], "block": [], "bytes": 1.5}})J",
      R"J({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1,
          "args": {"device": 99999999999, "stream": 7}})J",
      R"J({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 1, "dur": 1,
          "args": {"device": 0, "stream": 7, "bytes": "lots", "kind": 3}})J",
      R"J({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"flops": "x"}})J",
      R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"flops": -1e308}})J",
      R"J({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": 5}})J",
      R"J({"ph": "M", "name": ["thread_name"], "pid": 1, "tid": 1, "args": {"name": "x"}})J",
      R"J({"ph": "M", "name": "process_name", "pid": "x", "args": "name"})J",
      R"J(17)J",
      R"J(null)J",
      R"J([])J",
  };
  std::string all;
  for (const char* e : events) {
    const ImportResult one = import_kineto_json(std::string(R"J({"traceEvents": [)J") + e + "]}");
    EXPECT_TRUE(one.ok) << e << " -> " << one.error;
    EXPECT_CONSISTENT(one);
    all += (all.empty() ? "" : ",") + std::string(e);
  }
  const ImportResult r = import_kineto_json(std::string(R"J({"traceEvents": [)J") + all + "]}");
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_CONSISTENT(r);
  EXPECT_GT(r.store.diagnostics.count(Diag::event_malformed), 10u);
}

TEST(ImportRobustness, MetadataOfWrongShape) {
  for (const char* extra : {R"J("deviceProperties": 5,)J", R"J("deviceProperties": "x",)J", R"J("deviceProperties": [[]],)J",
                            R"J("deviceProperties": [{"id": "0"}],)J", R"J("deviceProperties": [{"id": -1}],)J",
                            R"J("deviceProperties": [{"id": 0, "totalGlobalMem": 1e400}],)J",
                            R"J("distributedInfo": [],)J", R"J("distributedInfo": {"rank": "3"},)J",
                            R"J("distributedInfo": {"rank": 1e100},)J", R"J("distributedInfo": {"rank": -4},)J"}) {
    const ImportResult r = import_kineto_json(std::string("{") + extra + R"J("traceEvents": []})J");
    EXPECT_TRUE(r.ok) << extra << " -> " << r.error;
    EXPECT_EQ(r.store.rank, 0) << extra;
    EXPECT_CONSISTENT(r);
  }
}

TEST(ImportRobustness, NegativeHugeAndExtremeTimes) {
  const char* times[][2] = {
      {"-1", "1"},       {"1", "-1"},           {"1", "86400000001"},          {"1", "1e300"},
      {"-1e300", "1"},   {"1e-300", "1e-300"}, {"9223372036854775.807", "0"}, {"-9223372036854775.807", "0"},
      {"0", "-0"},       {"-0.0", "0.0"},      {"1.99999999999999999999", "0.00049"},
      {"123456789012345678901234567890", "1"}, {"1E5", "2E-3"},
  };
  for (const auto& t : times) {
    const ImportResult r = import_kineto_json(std::string(R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a",
        "pid": 1, "tid": 1, "ts": )J") + t[0] + R"J(, "dur": )J" + t[1] + "}]}");
    EXPECT_TRUE(r.ok) << t[0] << " " << t[1] << " -> " << r.error;
    EXPECT_CONSISTENT(r);
  }
}

// Found by the mutation fuzzer (tests/fuzz): one event at ts = -9e15 us,
// inside int64 as ns, beside events at epoch times (1.7e18 ns) made every
// difference overflow: a negative trace span and whole-trace wall.
TEST(ImportRobustness, AnEventFarFromTheOthersIsOutOfRangeNotAnOverflow) {
  for (const char* far : {"-9000000000000000", "9000000000000000", "-2305843009213694", "4611686018427388"}) {
    const ImportResult r = import_kineto_json(std::string(R"J({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1700000000000000, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": )J") + far + R"J(, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1700000000000002, "dur": 5,
         "args": {"device": 0, "stream": 7}}]})J");
    ASSERT_TRUE(r.ok) << far << ": " << r.error;
    EXPECT_EQ(r.store.diagnostics.count(Diag::event_timestamp_out_of_range), 1u) << far;
    EXPECT_CONSISTENT(r);
    const Report report = analyze(r.store);
    EXPECT_GE(report.summary.trace_span_ns, 0) << far;
    for (const auto& step : report.steps) EXPECT_GE(step.wall_ns, 0) << far;
  }
}

// ---------------------------------------------------------------- randomized mutation

// A hand-written trace touching every field and category the importer reads.
const char kRichTrace[] = R"J({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16945512448, "computeMajor": 7,
    "computeMinor": 0, "maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536, "warpSize": 32,
    "sharedMemPerMultiprocessor": 98304, "numSms": 80}],
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
  "roctracer_version": 4,
  "traceEvents": [
    {"name": "process_name", "ph": "M", "ts": 1, "pid": 10, "tid": 0, "args": {"name": "python3"}},
    {"name": "thread_name", "ph": "M", "ts": 1, "pid": 10, "tid": 11, "args": {"name": "main"}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 10, "tid": 11, "ts": 100.5, "dur": 900.25},
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 10, "tid": "11", "ts": 1000.75, "dur": 500},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11, "ts": 110, "dur": 50, "args": {"flops": 1048576, "External id": 3}},
    {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "pid": 10, "tid": 11, "ts": 101, "dur": 5},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11, "ts": 120, "dur": 5.5, "args": {"cbid": 211, "correlation": 42}},
    {"ph": "X", "cat": "Runtime", "name": "cudaStreamSynchronize", "pid": 10, "tid": "11", "ts": 130, "dur": 50, "args": {"correlation": 43}},
    {"ph": "X", "cat": "cuda_driver", "name": "hipModuleLaunchKernel", "pid": 10, "tid": 12, "ts": 140, "dur": 2, "args": {"correlation": 44}},
    {"ph": "s", "id": 42, "pid": 10, "tid": 11, "ts": 120, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 42, "pid": 0, "tid": 7, "ts": 126, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 126.001, "dur": 20.0005,
     "args": {"device": 0, "stream": 7, "correlation": 42, "registers per thread": 126, "shared memory": 16384,
              "grid": [160, 2, 1], "block": [256, 1, 1], "graph id": 2}},
    {"ph": "X", "cat": "Kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": "stream 9", "ts": 150, "dur": 30},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": 170, "dur": 2, "args": {"device": 0, "stream": 7, "bytes": 4}},
    {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 175, "dur": 1, "args": {"device": 0, "stream": 7, "bytes": 128}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 131, "dur": 48, "args": {"cuda_sync_kind": "Stream Sync", "stream": 7}},
    {"ph": "X", "cat": "python_function", "name": "train.py(10): step", "pid": 10, "tid": 11, "ts": 100, "dur": 1000},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": 126, "dur": 60},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": 11, "ts": 105, "args": {"Bytes": 4}},
    {"ph": "X", "cat": "Trace", "ts": 0, "dur": 2000, "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)"},
    {"ph": "X", "cat": "mystery", "name": "m", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
    {"ph": "B", "name": "begin", "pid": 1, "tid": 1, "ts": 1}
  ]
})J";

// Runs up to `iterations` mutated imports of `seed_doc` (stopping early once
// `budget_s` seconds have passed, so slow Debug/sanitizer builds stay within
// the ctest timeout; the input sequence is the same on every machine, only
// its length differs). Returns how many imports were ok.
size_t fuzz(const std::string& seed_doc, uint64_t seed, size_t iterations, double budget_s, bool through_gzip) {
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(seed);
  size_t ok = 0;
  size_t i = 0;
  for (; i < iterations; ++i) {
    if ((i & 255) == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > budget_s) {
      break;
    }
    std::string doc = seed_doc;
    const size_t mutations = 1 + rng() % 3;
    if (through_gzip) {
      doc = gzip_bytes(doc);
      // Mostly corrupt the compressed stream, sometimes the JSON inside.
      for (size_t m = 0; m < mutations; ++m) mutate(&doc, rng);
    } else {
      for (size_t m = 0; m < mutations; ++m) mutate(&doc, rng);
    }
    const ImportResult r = import_kineto_json(doc, "<fuzz>");
    const std::string violation = contract_violation(r);
    if (!violation.empty()) {
      ADD_FAILURE() << "seed " << seed << " iteration " << i << ": " << violation << " / " << r.error;
      return ok;
    }
    ok += r.ok;
  }
  ::testing::Test::RecordProperty("iterations", static_cast<int>(i));
  std::printf("[ fuzz     ] seed %llu: %zu mutated inputs, %zu imported ok\n", static_cast<unsigned long long>(seed), i, ok);
  return ok;
}

TEST(ImportRobustnessFuzz, MutatedHandWrittenTrace) {
  const ImportResult base = import_kineto_json(kRichTrace);
  ASSERT_TRUE(base.ok) << base.error;
  EXPECT_CONSISTENT(base);
  ASSERT_EQ(base.store.steps.size(), 2u);
  const size_t ok = fuzz(kRichTrace, 0x6770757574696cull, 1500000, 7.0, false);
  EXPECT_GT(ok, 0u);  // some mutations leave valid JSON
}

TEST(ImportRobustnessFuzz, MutatedRealTrace) {
  const std::string path = traces_dir() + "/hta_event_sync_a100.json.gz";
  replay::TraceBytes plain;
  std::string error;
  const std::string compressed = read_bytes(path);
  if (compressed.empty()) GTEST_SKIP() << "missing " << path;
  ASSERT_TRUE(replay::gunzip(compressed, &plain, &error)) << error;
  const std::string doc(plain.view());
  EXPECT_GT(fuzz(doc, 20240611, 300000, 6.0, false), 0u);
}

TEST(ImportRobustnessFuzz, MutatedGzipStream) {
  fuzz(kRichTrace, 77, 200000, 2.0, true);
}

}  // namespace
}  // namespace gpuutil

// ---------------------------------------------------------------- bombs and big non-JSON (issue 14)

namespace gpuutil {

namespace {
long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// 1 GiB of '{' + spaces, gzip-compressed (about 1 MB): a bomb for a 64 MiB cap.
std::string gzip_bomb() {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  std::string out;
  std::string chunk(1 << 20, ' ');
  chunk[0] = '{';
  char buf[1 << 16];
  for (int i = 0; i < 1024; ++i) {
    zs.next_in = reinterpret_cast<Bytef*>(chunk.data());
    zs.avail_in = static_cast<uInt>(chunk.size());
    do {
      zs.next_out = reinterpret_cast<Bytef*>(buf);
      zs.avail_out = sizeof buf;
      deflate(&zs, i == 1023 ? Z_FINISH : Z_NO_FLUSH);
      out.append(buf, sizeof buf - zs.avail_out);
    } while (zs.avail_out == 0);
    chunk[0] = ' ';
  }
  deflateEnd(&zs);
  return out;
}
}  // namespace

TEST(ImportRobustness, AGzipBombStopsAtTheCapWithMemoryNearTheCapNotAMultipleOfIt) {
  const std::string bomb = gzip_bomb();
  ASSERT_LT(bomb.size(), 4u << 20);
  constexpr size_t kCap = 64u << 20;
  const long before_kib = max_rss_kib();
  replay::TraceBytes out;
  std::string error;
  EXPECT_FALSE(replay::gunzip_capped(bomb, &out, &error, kCap));
  EXPECT_NE(error.find("exceeds"), std::string::npos) << error;
  EXPECT_EQ(out.capacity, 0u);
  // Growth by mremap never holds two buffers: the peak is the cap plus
  // slack (the copy-on-grow buffer used to peak at 1.5x: 96 MiB here).
  const long grew_kib = max_rss_kib() - before_kib;
  EXPECT_LT(grew_kib, static_cast<long>(kCap / 1024) * 5 / 4) << "peak RSS grew " << grew_kib << " KiB";
}

TEST(ImportRobustness, ALargeFileThatIsNotJsonIsRefusedFromItsFirstBytesWithoutReadingTheRest) {
  char path[] = "/tmp/gpuutil_not_json_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const char magic[] = "PK\x03\x04 not a trace";
  ASSERT_EQ(write(fd, magic, sizeof magic - 1), static_cast<ssize_t>(sizeof magic - 1));
  ASSERT_EQ(ftruncate(fd, off_t{3} << 30), 0);  // 3 GiB, sparse
  close(fd);
  const long before_kib = max_rss_kib();
  const auto t0 = std::chrono::steady_clock::now();
  const ImportResult r = import_kineto_file(path);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unlink(path);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("not a JSON trace: it starts with 'P' at byte 0"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find('\n'), std::string::npos);
  EXPECT_LT(max_rss_kib() - before_kib, 64 * 1024) << "read the whole file";
  EXPECT_LT(s, 2.0);
}

}  // namespace gpuutil
