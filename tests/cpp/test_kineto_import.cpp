// Tests of the Kineto Chrome-trace importer (gpuutil/kineto_import.h).
//
// Three layers: the exact decimal-time parser, hand-written JSON snippets
// that pin each mapping rule and each diagnostic, and every real trace in
// the shared folder with counts computed independently (Python json module
// over the same files) when the test was written.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "import/kineto/decimal_time.h"
#include "import/kineto/kineto_category.h"
#include "import/source/trace_bytes.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gzip_bytes.h"
#include "traces.h"

namespace gpuutil {
namespace {

using replay::DecimalStatus;
using test::gzip_bytes;
using test::trace_path;
using test::traces_dir;

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

#define REQUIRE_TRACE(file)                                                              \
  do {                                                                                   \
    if (!file_exists(trace_path(file))) GTEST_SKIP() << "missing " << trace_path(file); \
  } while (0)

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}


ImportResult imp(std::string_view json) { return import_kineto_json(json, "<test>"); }

// Wraps events in a Kineto-style top-level object.
std::string trace(const std::string& events, const std::string& extra = "") {
  return "{\"schemaVersion\": 1," + extra + " \"traceEvents\": [" + events + "]}";
}

uint64_t diag(const ImportResult& r, Diag d) { return r.store.diagnostics.count(d); }

// Every diagnostic other than those listed is zero.
void expect_only_diags(const ImportResult& r, std::initializer_list<Diag> allowed) {
  for (size_t i = 0; i < kDiagCount; ++i) {
    const auto d = static_cast<Diag>(i);
    if (std::find(allowed.begin(), allowed.end(), d) != allowed.end()) continue;
    EXPECT_EQ(diag(r, d), 0u) << diag_info(d).name << ": " << r.store.diagnostics.example(d);
  }
}

std::string_view name_of(const EventStore& s, NameId id) { return s.names.view(id); }

// ---------------------------------------------------------------- decimal time

int64_t ns(std::string_view text) {
  int64_t out = -42;
  EXPECT_EQ(replay::parse_us_to_ns(text, &out), DecimalStatus::kOk) << text;
  return out;
}

DecimalStatus status(std::string_view text) {
  int64_t out = 0;
  return replay::parse_us_to_ns(text, &out);
}

TEST(DecimalTime, ExactFractionalMicroseconds) {
  EXPECT_EQ(ns("1712195495505543.2"), 1712195495505543200);
  EXPECT_EQ(ns("1712195495505543.140"), 1712195495505543140);  // a double gives ...543250
  EXPECT_EQ(ns("63.813"), 63813);
  EXPECT_EQ(ns("1623212388426902"), 1623212388426902000);
  EXPECT_EQ(ns("1212075548353.304"), 1212075548353304);
  EXPECT_EQ(ns("0"), 0);
  EXPECT_EQ(ns("-0"), 0);
  EXPECT_EQ(ns("0.000"), 0);
  EXPECT_EQ(ns("00012"), 12000);
  EXPECT_EQ(ns(" 12 \n"), 12000);
}

TEST(DecimalTime, RoundsHalfAwayFromZeroBeyondNanoseconds) {
  EXPECT_EQ(ns("0.0005"), 1);
  EXPECT_EQ(ns("0.0004999"), 0);
  EXPECT_EQ(ns("-0.0005"), -1);
  EXPECT_EQ(ns("-0.0004"), 0);
  EXPECT_EQ(ns("1.2345"), 1235);
  EXPECT_EQ(ns("1.23449999"), 1234);
  EXPECT_EQ(ns("0.9999"), 1000);
  EXPECT_EQ(ns("1.0000000000000000000000000001"), 1000);
}

TEST(DecimalTime, Negative) {
  EXPECT_EQ(ns("-1.5"), -1500);
  EXPECT_EQ(ns("-1623212388426902"), -1623212388426902000);
}

TEST(DecimalTime, ExponentFormsAreExact) {
  EXPECT_EQ(ns("1.5e3"), 1500000);
  EXPECT_EQ(ns("1E-3"), 1);
  EXPECT_EQ(ns("1.2345e2"), 123450);
  EXPECT_EQ(ns("5e-4"), 1);
  EXPECT_EQ(ns("4.9999e-4"), 0);
  EXPECT_EQ(ns("1.712195495505543140e15"), 1712195495505543140);
  EXPECT_EQ(ns("-2e+0"), -2000);
  EXPECT_EQ(ns("0e999999"), 0);
  EXPECT_EQ(ns("1e-100000000"), 0);
}

TEST(DecimalTime, Int64Boundary) {
  EXPECT_EQ(ns("9223372036854775.807"), INT64_MAX);
  EXPECT_EQ(ns("9223372036854775.8074"), INT64_MAX);
  EXPECT_EQ(ns("-9223372036854775.807"), -INT64_MAX);
  EXPECT_EQ(status("9223372036854775.808"), DecimalStatus::kOutOfRange);
  EXPECT_EQ(status("9223372036854775.8075"), DecimalStatus::kOutOfRange);
  EXPECT_EQ(status("-9223372036854775.808"), DecimalStatus::kOutOfRange);
  EXPECT_EQ(status("1e17"), DecimalStatus::kOutOfRange);
  EXPECT_EQ(status("1e100000000"), DecimalStatus::kOutOfRange);
  EXPECT_EQ(status("123456789012345678901234567890"), DecimalStatus::kOutOfRange);
}

TEST(DecimalTime, InvalidText) {
  for (const char* text : {"", " ", "-", "1.", ".5", "1e", "1e+", "abc", "1.2.3", "+1", "1,5", "0x10", "NaN",
                           "inf", "1 2", "--1", "1e5.5", "\"1\""}) {
    EXPECT_EQ(status(text), DecimalStatus::kInvalid) << text;
  }
}

TEST(DecimalTime, ParseInt64) {
  int64_t v = 0;
  EXPECT_TRUE(replay::parse_int64("5555", &v));
  EXPECT_EQ(v, 5555);
  EXPECT_TRUE(replay::parse_int64("-1", &v));
  EXPECT_EQ(v, -1);
  EXPECT_TRUE(replay::parse_int64("9223372036854775807", &v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_FALSE(replay::parse_int64("9223372036854775808", &v));
  EXPECT_FALSE(replay::parse_int64("", &v));
  EXPECT_FALSE(replay::parse_int64("-", &v));
  EXPECT_FALSE(replay::parse_int64("stream 7", &v));
  EXPECT_FALSE(replay::parse_int64("1.0", &v));
  // 18 digits and fewer take the unchecked loop, 19 the checked one.
  EXPECT_TRUE(replay::parse_int64("-999999999999999999", &v));
  EXPECT_EQ(v, -999999999999999999);
  EXPECT_TRUE(replay::parse_int64("1000000000000000000", &v));
  EXPECT_EQ(v, 1000000000000000000);
  EXPECT_FALSE(replay::parse_int64("12345678901234567x", &v));
}

TEST(DecimalTime, PlainFormsAgreeWithTheGeneralParser) {
  // The fast path (digits, optional `.` and 1-3 digits, <= 16 integer
  // digits, within int64 ns) against the general digit-shifting parser, reached by the same
  // number written with an exponent of zero.
  std::mt19937_64 rng(0xdec1);
  for (int i = 0; i < 200000; ++i) {
    const size_t whole_digits = 1 + rng() % 17;
    std::string text;
    for (size_t d = 0; d < whole_digits; ++d) text += static_cast<char>('0' + rng() % 10);
    const size_t frac_digits = rng() % 5;
    if (frac_digits > 0) {
      text += '.';
      for (size_t d = 0; d < frac_digits; ++d) text += static_cast<char>('0' + rng() % 10);
    }
    int64_t fast = 0, general = 0;
    const DecimalStatus a = replay::parse_us_to_ns(text, &fast);
    const DecimalStatus b = replay::parse_us_to_ns(text + "e0", &general);
    ASSERT_EQ(static_cast<int>(a), static_cast<int>(b)) << text;
    if (a == DecimalStatus::kOk) {
      ASSERT_EQ(fast, general) << text;
    }
  }
  int64_t v = 0;
  EXPECT_EQ(replay::parse_us_to_ns("999999999999999.999", &v), DecimalStatus::kOk);
  EXPECT_EQ(v, 999999999999999999);
  EXPECT_EQ(replay::parse_us_to_ns("9223372036854775.807", &v), DecimalStatus::kOk);
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_EQ(replay::parse_us_to_ns("9223372036854775.808", &v), DecimalStatus::kOutOfRange);
  EXPECT_EQ(replay::parse_us_to_ns("9999999999999999", &v), DecimalStatus::kOutOfRange);
  EXPECT_EQ(replay::parse_us_to_ns("1661938466265032", &v), DecimalStatus::kOk);
  EXPECT_EQ(v, 1661938466265032000);
  EXPECT_EQ(replay::parse_us_to_ns("1.", &v), DecimalStatus::kInvalid);
  EXPECT_EQ(replay::parse_us_to_ns("1.2.3", &v), DecimalStatus::kInvalid);
  EXPECT_EQ(replay::parse_us_to_ns(".5", &v), DecimalStatus::kInvalid);
}

// ---------------------------------------------------------------- categories

TEST(KinetoCategory, AllVintagesCaseInsensitive) {
  using replay::EventClass;
  using replay::classify_category;
  EXPECT_EQ(classify_category("kernel"), EventClass::kKernel);
  EXPECT_EQ(classify_category("Kernel"), EventClass::kKernel);
  EXPECT_EQ(classify_category("gpu_memcpy"), EventClass::kMemcpy);
  EXPECT_EQ(classify_category("Memcpy"), EventClass::kMemcpy);
  EXPECT_EQ(classify_category("gpu_memset"), EventClass::kMemset);
  EXPECT_EQ(classify_category("Memset"), EventClass::kMemset);
  EXPECT_EQ(classify_category("cuda_runtime"), EventClass::kRuntime);
  EXPECT_EQ(classify_category("Runtime"), EventClass::kRuntime);
  EXPECT_EQ(classify_category("cuda_driver"), EventClass::kRuntime);
  EXPECT_EQ(classify_category("Driver"), EventClass::kRuntime);
  EXPECT_EQ(classify_category("cpu_op"), EventClass::kOperator);
  EXPECT_EQ(classify_category("Operator"), EventClass::kOperator);
  EXPECT_EQ(classify_category("user_annotation"), EventClass::kUserAnnotation);
  EXPECT_EQ(classify_category("User Annotation"), EventClass::kUserAnnotation);
  EXPECT_EQ(classify_category("python_function"), EventClass::kPythonFunction);
  for (const char* unused : {"python", "gpu_user_annotation", "cuda_sync", "Trace", "cpu_instant_event",
                             "fwdbwd", "ac2g", "overhead"}) {
    EXPECT_EQ(classify_category(unused), EventClass::kKnownUnused) << unused;
  }
  EXPECT_EQ(classify_category("something_new"), EventClass::kUnknown);
  EXPECT_EQ(classify_category(""), EventClass::kUnknown);
  EXPECT_EQ(classify_category(std::string(100, 'k')), EventClass::kUnknown);
}

// ---------------------------------------------------------------- mapping rules

constexpr const char* kKernelEvent = R"J({"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn",
  "pid": 0, "tid": 7, "ts": 1000.5, "dur": 20.25,
  "args": {"External id": 1, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 42,
           "registers per thread": 126, "shared memory": 16384, "blocks per SM": 1.5, "warps per SM": 12.0,
           "grid": [160, 2, 1], "block": [256, 1, 1], "est. achieved occupancy %": 25, "graph id": 3}})J";

TEST(KinetoMapping, KernelWithLaunchConfiguration) {
  const ImportResult r = imp(trace(kKernelEvent));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.store.activities.size(), 1u);
  const DeviceActivity& k = r.store.activities[0];
  EXPECT_EQ(k.kind, ActivityKind::kKernel);
  EXPECT_EQ(name_of(r.store, k.name), "volta_sgemm_128x64_nn");
  EXPECT_EQ(k.start_ns, 1000500);
  EXPECT_EQ(k.end_ns, 1000500 + 20250);
  EXPECT_EQ(k.device, 0);
  EXPECT_EQ(k.stream, 7);
  EXPECT_EQ(k.correlation_id, 42u);
  EXPECT_EQ(k.grid[0], 160u);
  EXPECT_EQ(k.grid[1], 2u);
  EXPECT_EQ(k.grid[2], 1u);
  EXPECT_EQ(k.block[0], 256u);
  EXPECT_EQ(k.registers_per_thread, 126u);
  EXPECT_EQ(k.shared_memory_bytes, 16384u);
  EXPECT_EQ(k.graph_id, 3u);
  EXPECT_FALSE(k.is_communication);
}

TEST(KinetoMapping, OldVintageKernelUsesTidStreamLabel) {
  // 2021 traces: "Kernel", tid "stream 7", no args.stream/device here.
  const ImportResult r = imp(trace(R"J({"ph": "X", "cat": "Kernel", "name": "k", "pid": 1, "tid": "stream 9",
      "ts": 10, "dur": 2, "args": {"correlation": 5}})J"));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.store.activities.size(), 1u);
  EXPECT_EQ(r.store.activities[0].device, 1);  // pid fallback
  EXPECT_EQ(r.store.activities[0].stream, 9);
  EXPECT_EQ(r.store.activities[0].grid[0], 0u);  // unknown launch config
}

TEST(KinetoMapping, CommunicationKernel) {
  const ImportResult r = imp(trace(R"J({"ph": "X", "cat": "kernel",
      "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
      "pid": 0, "tid": 7, "ts": 1, "dur": 100, "args": {"device": 0, "stream": 7}})J"));
  ASSERT_EQ(r.store.activities.size(), 1u);
  EXPECT_TRUE(r.store.activities[0].is_communication);
}

TEST(KinetoMapping, MemcpyDirectionsAndBytes) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"device": 0, "stream": 7, "bytes": 92928}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": 2, "dur": 1, "args": {"device": 0, "stream": 7, "bytes": 1}},
    {"ph": "X", "cat": "Memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": "stream 7", "ts": 3, "dur": 1, "args": {"device": 0, "stream": 7, "bytes": 4000}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoH", "pid": 0, "tid": 7, "ts": 4, "dur": 1, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, "tid": 7, "ts": 5, "dur": 1, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy Peer", "pid": 0, "tid": 7, "ts": 6, "dur": 1, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy", "pid": 2, "tid": 0, "ts": 7, "dur": 1, "args": {"device": 2, "stream": 0, "kind": "HtoD"}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy", "pid": 2, "tid": 0, "ts": 8, "dur": 1, "args": {"device": 2, "stream": 0}}
  )J"));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.store.activities.size(), 8u);
  const MemcpyDirection want[] = {MemcpyDirection::kHostToDevice,   MemcpyDirection::kDeviceToHost,
                                  MemcpyDirection::kDeviceToDevice, MemcpyDirection::kHostToHost,
                                  MemcpyDirection::kPeerToPeer,     MemcpyDirection::kPeerToPeer,
                                  MemcpyDirection::kHostToDevice,   MemcpyDirection::kUnknown};
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(r.store.activities[i].kind, ActivityKind::kMemcpy);
    EXPECT_EQ(r.store.activities[i].direction, want[i]) << i;
  }
  EXPECT_EQ(r.store.activities[0].bytes, 92928u);
  EXPECT_EQ(r.store.activities[2].bytes, 4000u);
  // "(Pageable -> Device)": the host side is pageable, so the copy call blocks.
  EXPECT_TRUE(r.store.activities[0].host_pageable);
  for (size_t i = 1; i < 8; ++i) EXPECT_FALSE(r.store.activities[i].host_pageable) << i;
}

TEST(KinetoMapping, Memset) {
  const ImportResult r = imp(trace(R"J({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0,
      "tid": 7, "ts": 5, "dur": 4.96, "args": {"device": 0, "context": 1, "stream": 7, "correlation": 57609,
      "bytes": 6291456, "memory bandwidth (GB/s)": 1268.4387096774194}})J"));
  ASSERT_EQ(r.store.activities.size(), 1u);
  EXPECT_EQ(r.store.activities[0].kind, ActivityKind::kMemset);
  EXPECT_EQ(r.store.activities[0].bytes, 6291456u);
  EXPECT_EQ(r.store.activities[0].correlation_id, 57609u);
  EXPECT_EQ(r.store.activities[0].end_ns - r.store.activities[0].start_ns, 4960);
}

TEST(KinetoMapping, RuntimeAndDriverCalls) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11, "ts": 1, "dur": 5, "args": {"cbid": 211, "correlation": 42}},
    {"ph": "X", "cat": "Runtime", "name": "cudaStreamSynchronize", "pid": 10, "tid": "11", "ts": 10, "dur": 5, "args": {"correlation": 43}},
    {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 10, "tid": 12, "ts": 20, "dur": 5, "args": {"correlation": 44}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMalloc", "pid": 10, "tid": 11, "ts": 30, "dur": 5}
  )J"));
  ASSERT_TRUE(r.ok) << r.error;
  const auto& calls = r.store.api_calls;
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0].kind, HostApiKind::kLaunch);
  EXPECT_EQ(calls[0].correlation_id, 42u);
  EXPECT_EQ(calls[1].kind, HostApiKind::kSynchronize);
  EXPECT_EQ(calls[1].sync, SyncKind::kStream);
  EXPECT_EQ(calls[2].kind, HostApiKind::kLaunch);
  EXPECT_EQ(calls[3].kind, HostApiKind::kOther);
  EXPECT_EQ(calls[3].correlation_id, 0u);
  // tid 11 and "11" are the same thread; 12 is another.
  ASSERT_EQ(r.store.threads.size(), 2u);
  EXPECT_EQ(calls[0].thread, calls[1].thread);
  EXPECT_EQ(calls[0].thread, calls[3].thread);
  EXPECT_NE(calls[0].thread, calls[2].thread);
  EXPECT_EQ(r.store.threads[calls[0].thread].pid, 10);
  EXPECT_EQ(r.store.threads[calls[0].thread].tid, 11);
  expect_only_diags(r, {Diag::steps_missing});
}

TEST(KinetoMapping, OperatorsAndAnnotations) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 5, "args": {"flops": 2097152}},
    {"ph": "X", "cat": "Operator", "name": "aten::item", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
    {"ph": "X", "cat": "user_annotation", "name": "## forward ##", "pid": 1, "tid": 1, "ts": 20, "dur": 5},
    {"ph": "X", "cat": "user_annotation", "name": "my_region", "pid": 1, "tid": 1, "ts": 30, "dur": 5},
    {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 1, "tid": 2, "ts": 40, "dur": 5},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 50, "dur": 5, "args": {"flops": "many"}}
  )J"));
  ASSERT_TRUE(r.ok) << r.error;
  const auto& ranges = r.store.ranges;
  ASSERT_EQ(ranges.size(), 6u);
  EXPECT_EQ(ranges[0].category, RangeCategory::kOp);
  EXPECT_DOUBLE_EQ(ranges[0].flops, 2097152.0);
  EXPECT_EQ(ranges[1].category, RangeCategory::kHostSync);
  EXPECT_EQ(ranges[2].category, RangeCategory::kForward);
  EXPECT_EQ(ranges[3].category, RangeCategory::kAnnotation);
  EXPECT_EQ(ranges[4].category, RangeCategory::kCollective);
  EXPECT_EQ(ranges[5].category, RangeCategory::kOp);
  EXPECT_DOUBLE_EQ(ranges[5].flops, 0.0);
}

// Python frames (with_stack traces) are kept as kPython ranges: they name
// host time that no op covers (docs/accounting.md, culprits).
TEST(KinetoMapping, PythonFramesBecomePythonRanges) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "python_function", "name": "threading.py(1032): _bootstrap", "pid": 0, "tid": 0, "ts": 1, "dur": 5, "args": {"Python id": 1}},
    {"ph": "X", "cat": "python_function", "name": "<built-in method to of Tensor object at 0x7f>", "pid": 0, "tid": 0, "ts": 2, "dur": 1}
  )J"));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.store.ranges.size(), 2u);
  for (const auto& g : r.store.ranges) EXPECT_EQ(g.category, RangeCategory::kPython);
  EXPECT_EQ(r.store.names.view(r.store.ranges[1].name), "<built-in method to of Tensor object at 0x7f>");
  expect_only_diags(r, {Diag::steps_missing});
}

TEST(KinetoMapping, KnownUnusedCategoriesAreSilent) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#6", "pid": 0, "tid": 7, "ts": 1, "dur": 5},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 1, "dur": 5, "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": 15, "device": 0}},
    {"ph": "X", "cat": "Trace", "ts": 1, "dur": 50, "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
    {"ph": "f", "id": 5, "pid": 1, "tid": 1, "ts": 1, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 1, "cat": "ac2g", "name": "ac2g"},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1, "args": {"Bytes": 4}},
    {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 1},
    {"name": "process_labels", "ph": "M", "ts": 1, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 5}
  )J"));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.store.activities.size(), 0u);
  EXPECT_EQ(r.store.api_calls.size(), 0u);
  EXPECT_EQ(r.store.ranges.size(), 1u);
  // The gpu_user_annotation copy of ProfilerStep#6 does not define a step.
  expect_only_diags(r, {Diag::steps_missing});
  EXPECT_EQ(r.store.steps_source, "whole_trace");
}

TEST(KinetoMapping, ThreadNamesFromMetadata) {
  const ImportResult r = imp(trace(R"J(
    {"name": "process_name", "ph": "M", "ts": 1, "pid": 7, "tid": 0, "args": {"name": "python3.10"}},
    {"name": "thread_name", "ph": "M", "ts": 1, "pid": 7, "tid": 8, "args": {"name": "thread 8 (python3.10)"}},
    {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 7, "tid": 8, "ts": 1, "dur": 5},
    {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 7, "tid": 9, "ts": 1, "dur": 5},
    {"name": "thread_name", "ph": "M", "ts": 1, "pid": 7, "tid": "10", "args": {"name": "late"}},
    {"ph": "X", "cat": "cpu_op", "name": "c", "pid": "7", "tid": 10, "ts": 1, "dur": 5}
  )J"));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.store.threads.size(), 3u);
  EXPECT_EQ(r.store.threads[0].name, "thread 8 (python3.10)");
  EXPECT_EQ(r.store.threads[1].name, "python3.10");  // no thread_name: the process name
  EXPECT_EQ(r.store.threads[2].name, "late");
}

TEST(KinetoMapping, NonNumericThreadLabelsGetStableIds) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "user_annotation", "name": "a", "pid": "Spans", "tid": "main", "ts": 1, "dur": 5},
    {"ph": "X", "cat": "user_annotation", "name": "b", "pid": "Spans", "tid": "main", "ts": 2, "dur": 5},
    {"ph": "X", "cat": "user_annotation", "name": "c", "pid": "Spans", "tid": "other", "ts": 3, "dur": 5}
  )J"));
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.store.threads.size(), 2u);
  EXPECT_EQ(r.store.ranges[0].thread, r.store.ranges[1].thread);
  EXPECT_NE(r.store.ranges[0].thread, r.store.ranges[2].thread);
}

TEST(KinetoMapping, EventsAreSortedByStart) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "cpu_op", "name": "child", "pid": 1, "tid": 1, "ts": 10, "dur": 2},
    {"ph": "X", "cat": "cpu_op", "name": "parent", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
    {"ph": "X", "cat": "cpu_op", "name": "first", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
  )J"));
  ASSERT_EQ(r.store.ranges.size(), 3u);
  EXPECT_EQ(name_of(r.store, r.store.ranges[0].name), "first");
  EXPECT_EQ(name_of(r.store, r.store.ranges[1].name), "parent");  // longer first on equal start
  EXPECT_EQ(name_of(r.store, r.store.ranges[2].name), "child");
}

TEST(KinetoMapping, EscapedNamesAreUnescaped) {
  const ImportResult r = imp(trace(R"J({"ph": "X", "cat": "cpu_op", "name": "a\"b\\c\u00e9", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J"));
  ASSERT_EQ(r.store.ranges.size(), 1u);
  EXPECT_EQ(name_of(r.store, r.store.ranges[0].name), "a\"b\\c\xC3\xA9");
}

// ---------------------------------------------------------------- top level

TEST(KinetoTopLevel, BareArrayOfEvents) {
  const ImportResult r = imp(std::string("[") + kKernelEvent + "]");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.store.activities.size(), 1u);
}

TEST(KinetoTopLevel, KeyOrderDoesNotMatter) {
  const std::string props = R"J("deviceProperties": [{"id": 0, "name": "GPU", "numSms": 80}])J";
  const std::string info = R"J("distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4})J";
  const std::string events = std::string("\"traceEvents\": [") + kKernelEvent + "]";
  for (const std::string& doc : {"{" + props + "," + info + "," + events + "}", "{" + events + "," + props + "," + info + "}",
                                 "{" + info + "," + events + "," + props + "}"}) {
    const ImportResult r = imp(doc);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.store.activities.size(), 1u);
    ASSERT_EQ(r.store.devices.size(), 1u);
    EXPECT_EQ(r.store.devices[0].sm_count, 80);
    EXPECT_EQ(r.store.rank, 3);
  }
}

TEST(KinetoTopLevel, DevicePropertiesFields) {
  const ImportResult r = imp(trace(kKernelEvent, R"J("deviceProperties": [{"id": 0, "name": "Tesla V100-SXM2-16GB",
      "totalGlobalMem": 16945512448, "computeMajor": 7, "computeMinor": 0, "maxThreadsPerBlock": 1024,
      "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 98304, "numSms": 80, "sharedMemPerBlockOptin": 98304,
      "maxBlocksPerMultiProcessor": 32}],)J"));
  ASSERT_TRUE(r.ok) << r.error;
  const DeviceInfo* d = r.store.device_info(0);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name, "Tesla V100-SXM2-16GB");
  EXPECT_EQ(d->total_memory_bytes, 16945512448);
  EXPECT_EQ(d->compute_major, 7);
  EXPECT_EQ(d->compute_minor, 0);
  EXPECT_EQ(d->max_threads_per_sm, 2048);
  EXPECT_EQ(d->registers_per_sm, 65536);
  EXPECT_EQ(d->warp_size, 32);
  EXPECT_EQ(d->shared_memory_per_sm_bytes, 98304);
  EXPECT_EQ(d->sm_count, 80);
  EXPECT_EQ(d->max_blocks_per_sm, 32);
  expect_only_diags(r, {Diag::steps_missing});
}

TEST(KinetoTopLevel, RocmSharedMemoryFieldName) {
  const ImportResult r = imp(trace("", R"J("deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X",
      "maxSharedMemoryPerMultiProcessor": 65536, "numSms": 304, "warpSize": 64}],)J"));
  ASSERT_EQ(r.store.devices.size(), 1u);
  EXPECT_EQ(r.store.devices[0].shared_memory_per_sm_bytes, 65536);
  EXPECT_EQ(r.store.devices[0].warp_size, 64);
}

TEST(KinetoTopLevel, InMemoryGzip) {
  const std::string json = trace(kKernelEvent);
  const ImportResult r = imp(gzip_bytes(json));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.store.activities.size(), 1u);
}

TEST(KinetoTopLevel, ConcatenatedGzipMembers) {
  const std::string json = trace(std::string(kKernelEvent) + "," + kKernelEvent);
  const size_t half = json.size() / 2;
  const ImportResult r = imp(gzip_bytes(json.substr(0, half)) + gzip_bytes(json.substr(half)));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.store.activities.size(), 2u);
}

TEST(KinetoTopLevel, ViewIsNotReadPastItsEnd) {
  const std::string json = trace(kKernelEvent);
  const std::string buffer = json + "]]]} garbage that must not be read";
  const ImportResult r = imp(std::string_view(buffer.data(), json.size()));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.store.activities.size(), 1u);
}

TEST(KinetoTopLevel, Utf8BomAndInvalidUtf8) {
  const ImportResult bom = imp("\xEF\xBB\xBF" + trace(kKernelEvent));
  ASSERT_TRUE(bom.ok) << bom.error;
  const ImportResult bad = imp(trace(R"J({"ph": "X", "cat": "cpu_op", "name": "bad)J" "\xff\xfe" R"J(name", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J"));
  ASSERT_TRUE(bad.ok) << bad.error;
  ASSERT_EQ(bad.store.ranges.size(), 1u);
  EXPECT_EQ(name_of(bad.store, bad.store.ranges[0].name), "bad??name");
  EXPECT_EQ(diag(bad, Diag::event_malformed), 1u);
}

// ---------------------------------------------------------------- steps

TEST(KinetoSteps, ProfilerStepsFromEitherHostCategory) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": 5, "dur": 500}
  )J"));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.store.steps_source, "ProfilerStep");
  ASSERT_EQ(r.store.steps.size(), 2u);
  EXPECT_EQ(r.store.steps[0].step, 1);
  EXPECT_EQ(r.store.steps[0].start_ns, 0);
  EXPECT_EQ(r.store.steps[0].end_ns, 100000);
  EXPECT_EQ(r.store.steps[1].step, 2);
  EXPECT_EQ(r.store.steps[1].start_ns, 100000);
  expect_only_diags(r, {Diag::steps_missing});
}

TEST(KinetoSteps, OverlapIsClipped) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 90, "dur": 50},
    {"ph": "X", "cat": "user_annotation", "name": "gpuutil.step#3", "pid": 1, "tid": 1, "ts": 100, "dur": 20}
  )J"));
  ASSERT_EQ(r.store.steps.size(), 2u);  // step 3 lies inside the clipped step 2 and is dropped
  EXPECT_EQ(r.store.steps[1].step, 2);
  EXPECT_EQ(r.store.steps[1].start_ns, 100000);
  EXPECT_EQ(r.store.steps[1].end_ns, 140000);
  EXPECT_EQ(diag(r, Diag::steps_overlapping), 2u);
}

// Two ProfilerStep#1 ranges at different times (issue 32, item 7): before,
// step 1 got two windows and so two device-0 entries in the report, one of
// them 1,000x the step's wall, with no diagnostic.
TEST(KinetoSteps, RepeatedStepNumberKeepsTheEarliestWindowAndCountsTheOthers) {
  const ImportResult r = imp(trace(std::string(kKernelEvent) + R"J(,
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1100, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1300, "dur": 100000},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1150, "dur": 10}
  )J"));
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.store.steps.size(), 2u);
  EXPECT_EQ(r.store.steps[0].step, 1);
  EXPECT_EQ(r.store.steps[0].start_ns, 1000000);
  EXPECT_EQ(r.store.steps[0].end_ns, 1100000);
  EXPECT_EQ(r.store.steps[1].step, 2);
  EXPECT_EQ(r.store.steps[1].start_ns, 1100000);
  EXPECT_EQ(r.store.steps[1].end_ns, 1200000);
  EXPECT_EQ(diag(r, Diag::steps_duplicated), 2u);  // the nested copy of step 2 and the late step 1
  EXPECT_EQ(r.store.diagnostics.example(Diag::steps_duplicated),
            "step 2: [1150000, 1160000) ns dropped, [1100000, 1200000) ns kept");
  expect_only_diags(r, {Diag::steps_duplicated});

  // The report: one entry per step, one device entry per step, each with
  // the step's wall; the dropped window's time is outside any step.
  const Report report = analyze(r.store);
  ASSERT_EQ(report.steps.size(), 2u);
  for (const StepReport& s : report.steps) {
    ASSERT_EQ(s.devices.size(), 1u) << "step " << s.step;
    EXPECT_EQ(s.devices[0].wall_ns, s.wall_ns) << "step " << s.step;
  }
  EXPECT_EQ(report.summary.steps_wall_ns, 200000);
  EXPECT_EQ(report.diagnostics.count(Diag::steps_duplicated), 2u);
}

TEST(KinetoSteps, MissingStepsGiveOneWholeTraceWindow) {
  const ImportResult r = imp(trace(std::string(kKernelEvent) + R"J(,
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 900, "dur": 5})J"));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.store.steps_source, "whole_trace");
  ASSERT_EQ(r.store.steps.size(), 1u);
  EXPECT_EQ(r.store.steps[0].step, 0);
  EXPECT_EQ(r.store.steps[0].start_ns, 900000);
  EXPECT_EQ(r.store.steps[0].end_ns, 1000500 + 20250);
  EXPECT_EQ(diag(r, Diag::steps_missing), 1u);
}

TEST(KinetoSteps, EmptyTraceHasNoWindow) {
  const ImportResult r = imp(trace(""));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.store.steps.empty());
  EXPECT_EQ(diag(r, Diag::steps_missing), 1u);
}

// ---------------------------------------------------------------- diagnostics

struct DiagCase {
  const char* label;
  const char* event;
  Diag expected;
};

// Short names in test listings instead of gtest's byte dump.
void PrintTo(const DiagCase& c, std::ostream* os) { *os << c.label; }

class KinetoEventDiagnostics : public ::testing::TestWithParam<DiagCase> {};

TEST_P(KinetoEventDiagnostics, CountedAndSkipped) {
  const DiagCase& c = GetParam();
  const ImportResult r = imp(trace(std::string(c.event) + "," + kKernelEvent));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(diag(r, c.expected), 1u) << c.label;
  EXPECT_FALSE(r.store.diagnostics.example(c.expected).empty());
  EXPECT_EQ(r.store.activities.size(), 1u) << "the good event is still imported";
  EXPECT_EQ(r.store.api_calls.size() + r.store.ranges.size(), 0u) << "the bad event is skipped";
  expect_only_diags(r, {c.expected, Diag::steps_missing});
}

INSTANTIATE_TEST_SUITE_P(
    All, KinetoEventDiagnostics,
    ::testing::Values(
        DiagCase{"missing_ts", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "dur": 1})J", Diag::event_malformed},
        DiagCase{"missing_dur", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1})J", Diag::event_malformed},
        DiagCase{"string_ts", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": "1", "dur": 1})J", Diag::event_malformed},
        DiagCase{"missing_name", R"J({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J", Diag::event_malformed},
        DiagCase{"numeric_name", R"J({"ph": "X", "cat": "cpu_op", "name": 5, "pid": 1, "tid": 1, "ts": 1, "dur": 1})J", Diag::event_malformed},
        DiagCase{"args_array", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": [1]})J", Diag::event_malformed},
        DiagCase{"missing_tid", R"J({"ph": "X", "cat": "cuda_runtime", "name": "a", "pid": 1, "ts": 1, "dur": 1})J", Diag::event_malformed},
        DiagCase{"null_pid", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": null, "tid": 1, "ts": 1, "dur": 1})J", Diag::event_malformed},
        DiagCase{"missing_ph", R"J({"cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J", Diag::event_malformed},
        DiagCase{"numeric_cat", R"J({"ph": "X", "cat": 3, "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J", Diag::event_malformed},
        DiagCase{"not_an_object", R"J("just a string")J", Diag::event_malformed},
        DiagCase{"bad_number", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.2.3, "dur": 1})J", Diag::event_malformed},
        DiagCase{"negative_dur", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": -0.5})J", Diag::event_negative_duration},
        DiagCase{"huge_dur", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 86400000000.001})J", Diag::event_huge_duration},
        DiagCase{"ts_out_of_range", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 9223372036854775.808, "dur": 1})J", Diag::event_timestamp_out_of_range},
        DiagCase{"ts_exponent_out_of_range", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1e300, "dur": 1})J", Diag::event_timestamp_out_of_range},
        DiagCase{"end_out_of_range", R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 9223372036854775.000, "dur": 1})J", Diag::event_timestamp_out_of_range},
        DiagCase{"unknown_phase", R"J({"ph": "B", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1})J", Diag::event_unknown_phase},
        DiagCase{"unknown_category", R"J({"ph": "X", "cat": "brand_new", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J", Diag::event_unknown_category},
        DiagCase{"no_category", R"J({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J", Diag::event_unknown_category}),
    [](const ::testing::TestParamInfo<DiagCase>& param_info) { return std::string(param_info.param.label); });

TEST(KinetoDiagnostics, DayLongEventIsAccepted) {
  const ImportResult r = imp(trace(R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 86400000000})J"));
  EXPECT_EQ(r.store.ranges.size(), 1u);
  EXPECT_EQ(diag(r, Diag::event_huge_duration), 0u);
}

TEST(KinetoDiagnostics, DeviceEventWithoutDevice) {
  const ImportResult r = imp(trace(R"J({"ph": "X", "cat": "kernel", "name": "k", "pid": "GPU", "tid": 7, "ts": 1, "dur": 1, "args": {"stream": 7}})J"));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.store.activities.size(), 0u);
  EXPECT_EQ(diag(r, Diag::event_malformed), 1u);
}

TEST(KinetoDiagnostics, DevicePropertiesMalformed) {
  EXPECT_EQ(diag(imp(trace("", R"J("deviceProperties": {"id": 0},)J")), Diag::device_properties_malformed), 1u);
  const ImportResult r = imp(trace("", R"J("deviceProperties": [{"name": "no id"}, 7, {"id": 1, "numSms": "eighty"}, {"id": 1}],)J"));
  ASSERT_TRUE(r.ok);
  // no id, not an object, numSms of the wrong type, duplicate id.
  EXPECT_EQ(diag(r, Diag::device_properties_malformed), 4u);
  ASSERT_EQ(r.store.devices.size(), 1u);
  EXPECT_EQ(r.store.devices[0].id, 1);
  EXPECT_EQ(r.store.devices[0].sm_count, 0);
}

TEST(KinetoDiagnostics, SingleDescribedDeviceAdoptsTheActiveDeviceId) {
  // ROCm: properties listed under id 0, all work on device 2.
  const ImportResult r = imp(trace(R"J({"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": 0, "ts": 1, "dur": 1, "args": {"device": 2, "stream": 0}})J",
                                   R"J("deviceProperties": [{"id": 0, "numSms": 304}],)J"));
  ASSERT_NE(r.store.device_info(2), nullptr);
  EXPECT_EQ(r.store.device_info(2)->sm_count, 304);
  EXPECT_EQ(r.store.device_info(0), nullptr);
  // Two described devices: no guessing.
  const ImportResult two = imp(trace(R"J({"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": 0, "ts": 1, "dur": 1, "args": {"device": 2, "stream": 0}})J",
                                     R"J("deviceProperties": [{"id": 0}, {"id": 1}],)J"));
  EXPECT_EQ(two.store.device_info(2), nullptr);
}

TEST(KinetoDiagnostics, RocmCountedOnce) {
  const ImportResult r = imp(trace(R"J(
    {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": {"stream": "0x0", "size": "2560"}})J"));
  EXPECT_EQ(diag(r, Diag::rocm_trace), 1u);
  ASSERT_EQ(r.store.api_calls.size(), 2u);
  EXPECT_EQ(r.store.api_calls[0].kind, HostApiKind::kLaunch);
  EXPECT_EQ(r.store.api_calls[1].kind, HostApiKind::kBlockingCopy);
  EXPECT_EQ(diag(imp(trace("", R"J("roctracer_version": 4,)J")), Diag::rocm_trace), 1u);
  EXPECT_EQ(diag(imp(trace(kKernelEvent)), Diag::rocm_trace), 0u);
}

TEST(KinetoDiagnostics, InvalidJsonIsOneLineWithOffset) {
  const ImportResult r = imp(trace(std::string(kKernelEvent) + R"J(, {"ph": "X", "cat": })J"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error.rfind("invalid JSON", 0), 0u) << r.error;
  EXPECT_EQ(r.error.find('\n'), std::string::npos);
  EXPECT_EQ(diag(r, Diag::json_invalid), 1u);
  EXPECT_TRUE(r.store.diagnostics.any_error());
}

TEST(KinetoDiagnostics, InvalidJsonKeepsEventsReadBeforeTheFault) {
  const ImportResult r = imp(trace(std::string(kKernelEvent) + "," + kKernelEvent + ", {\"ph\" \"X\"}"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(diag(r, Diag::json_invalid), 1u);
  EXPECT_NE(r.error.find("at byte"), std::string::npos) << r.error;
}

TEST(KinetoDiagnostics, TrailingContentIsInvalid) {
  const ImportResult r = imp(trace(kKernelEvent) + " {}");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(diag(r, Diag::json_invalid), 1u);
  EXPECT_NE(r.error.find("after the top-level value"), std::string::npos) << r.error;
}

TEST(KinetoDiagnostics, MissingTraceEvents) {
  for (const char* doc : {R"J({"schemaVersion": 1})J", R"J({"traceEvents": {"a": 1}})J", "42", R"J("text")J", "null"}) {
    const ImportResult r = imp(doc);
    EXPECT_FALSE(r.ok) << doc;
    EXPECT_EQ(diag(r, Diag::trace_events_missing), 1u) << doc;
    EXPECT_EQ(r.error, "the trace has no traceEvents array");
  }
}

TEST(KinetoDiagnostics, UnreadableFile) {
  const ImportResult r = import_kineto_file("/nonexistent/dir/trace.json.gz");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(diag(r, Diag::input_unreadable), 1u);
  EXPECT_NE(r.error.find("/nonexistent/dir/trace.json.gz"), std::string::npos);
  EXPECT_EQ(r.store.source, "/nonexistent/dir/trace.json.gz");
}

TEST(KinetoDiagnostics, AnalysisDiagnosticsAreNotSetByTheImporter) {
  // Device 0 has no deviceProperties: the analysis, not the importer, counts
  // activity_unknown_device (once per device).
  const ImportResult r = imp(trace(kKernelEvent));
  EXPECT_EQ(diag(r, Diag::activity_unknown_device), 0u);
  EXPECT_EQ(diag(r, Diag::flops_unknown), 0u);
  EXPECT_EQ(diag(r, Diag::peak_unknown), 0u);
  EXPECT_EQ(diag(r, Diag::launch_unmatched), 0u);
  EXPECT_EQ(diag(r, Diag::launch_config_missing), 0u);
}

// ---------------------------------------------------------------- real traces

struct TraceExpect {
  const char* file;
  size_t kernels, memcpys, memsets, api_calls, ranges;
  size_t steps;  // host ProfilerStep ranges (0: whole-trace fallback)
  size_t threads, devices;
  int32_t rank;
  size_t comm_kernels;
};

// Counted with Python's json module over the same files: X events by
// lower-cased category; threads = distinct (pid, tid) of host events.
const TraceExpect kTraces[] = {
    {"hta_alexnet_a100_sync.json.gz", 79, 16, 3, 361, 367, 0, 1, 8, 0, 0},
    {"hta_cpu_only.json.gz", 0, 0, 0, 0, 15, 1, 3, 0, 34, 0},
    {"hta_event_sync_a100.json.gz", 4, 1, 0, 12, 11, 1, 1, 8, 0, 0},
    {"hta_mi250_rocm_train.json.gz", 14, 2, 0, 21, 73, 2, 2, 4, 0, 0},
    {"hta_nccl_a100_rank0.json.gz", 2700, 960, 114, 8740, 14388, 3, 3, 8, 0, 21},
    {"hta_no_gpu_with_dataloader.json.gz", 0, 0, 0, 0, 2467, 1, 1, 0, 0, 0},
    {"hta_sampled_rank0.json.gz", 1154, 40, 10, 1204, 2402, 2, 2, 0, 0, 10},
    {"hta_sampled_rank1.json.gz", 1104, 40, 10, 1154, 2367, 2, 2, 0, 1, 10},
    {"hta_train_v100_dataloader_nccl_rank1.json.gz", 9876, 4856, 900, 21167, 31524, 6, 3, 2, 1, 64},
    {"hta_train_v100_ns_resolution.json.gz", 4350, 1600, 145, 15329, 23980, 5, 3, 8, 0, 0},
    {"kineto_resnet50_nw4_v100.json.gz", 8868, 12, 378, 12085, 20562, 6, 2, 4, 0, 0},
    {"tracelens_h100_bert_small_inference.json.gz", 60, 1, 0, 132, 480 + 1385, 1, 2, 1, 0, 0},  // + python_function (on 2 threads)
    {"tracelens_mi300x_torch_compile_triton.json.gz", 12, 0, 0, 59, 42, 0, 1, 1, 0, 0},
};

void PrintTo(const TraceExpect& t, std::ostream* os) { *os << t.file; }

class KinetoRealTrace : public ::testing::TestWithParam<TraceExpect> {};

TEST_P(KinetoRealTrace, ImportsWithExpectedCounts) {
  const TraceExpect& t = GetParam();
  REQUIRE_TRACE(t.file);
  const ImportResult r = import_kineto_file(trace_path(t.file));
  ASSERT_TRUE(r.ok) << r.error;
  const EventStore& s = r.store;
  size_t kernels = 0, memcpys = 0, memsets = 0, comm = 0;
  for (const DeviceActivity& a : s.activities) {
    kernels += a.kind == ActivityKind::kKernel;
    memcpys += a.kind == ActivityKind::kMemcpy;
    memsets += a.kind == ActivityKind::kMemset;
    comm += a.is_communication;
  }
  EXPECT_EQ(kernels, t.kernels);
  EXPECT_EQ(memcpys, t.memcpys);
  EXPECT_EQ(memsets, t.memsets);
  EXPECT_EQ(comm, t.comm_kernels);
  EXPECT_EQ(s.api_calls.size(), t.api_calls);
  EXPECT_EQ(s.ranges.size(), t.ranges);
  EXPECT_EQ(s.threads.size(), t.threads);
  EXPECT_EQ(s.devices.size(), t.devices);
  EXPECT_EQ(s.rank, t.rank);
  if (t.steps == 0) {
    EXPECT_EQ(s.steps_source, "whole_trace");
    EXPECT_EQ(s.steps.size(), 1u);
    EXPECT_EQ(s.diagnostics.count(Diag::steps_missing), 1u);
  } else {
    EXPECT_EQ(s.steps_source, "ProfilerStep");
    EXPECT_EQ(s.steps.size(), t.steps);
    EXPECT_EQ(s.diagnostics.count(Diag::steps_missing), 0u);
  }
  // Real traces are clean: nothing malformed, nothing unknown.
  EXPECT_FALSE(s.diagnostics.any_error());
  for (Diag d : {Diag::event_malformed, Diag::event_negative_duration, Diag::event_huge_duration,
                 Diag::event_timestamp_out_of_range, Diag::event_unknown_phase, Diag::event_unknown_category,
                 Diag::device_properties_malformed, Diag::steps_overlapping, Diag::steps_duplicated}) {
    EXPECT_EQ(s.diagnostics.count(d), 0u) << diag_info(d).name << ": " << s.diagnostics.example(d);
  }
  // Store invariants.
  for (const DeviceActivity& a : s.activities) ASSERT_GE(a.end_ns, a.start_ns);
  for (const HostApiCall& c : s.api_calls) {
    ASSERT_GE(c.end_ns, c.start_ns);
    ASSERT_LT(c.thread, s.threads.size());
  }
  for (const HostRange& g : s.ranges) {
    ASSERT_GE(g.end_ns, g.start_ns);
    ASSERT_LT(g.thread, s.threads.size());
  }
  for (size_t i = 1; i < s.steps.size(); ++i) ASSERT_LE(s.steps[i - 1].end_ns, s.steps[i].start_ns);
  EXPECT_TRUE(std::is_sorted(s.activities.begin(), s.activities.end(),
                             [](const DeviceActivity& a, const DeviceActivity& b) { return a.start_ns < b.start_ns; }));
}

INSTANTIATE_TEST_SUITE_P(Shared, KinetoRealTrace, ::testing::ValuesIn(kTraces),
                         [](const ::testing::TestParamInfo<TraceExpect>& param_info) {
                           std::string name = param_info.param.file;
                           name = name.substr(0, name.find('.'));
                           return name;
                         });

TEST(KinetoRealTraceDetails, ExactNanosecondTimestamps) {
  REQUIRE_TRACE("hta_train_v100_ns_resolution.json.gz");
  const ImportResult r = import_kineto_file(trace_path("hta_train_v100_ns_resolution.json.gz"));
  ASSERT_TRUE(r.ok);
  // "ts": 1712195495505543.140, "dur": 41.768, correlation 135071.
  const auto it = std::find_if(r.store.api_calls.begin(), r.store.api_calls.end(),
                               [](const HostApiCall& c) { return c.correlation_id == 135071; });
  ASSERT_NE(it, r.store.api_calls.end());
  EXPECT_EQ(it->start_ns, 1712195495505543140);
  EXPECT_EQ(it->end_ns, 1712195495505543140 + 41768);
  EXPECT_EQ(name_of(r.store, it->name), "cudaLaunchKernel");
  EXPECT_EQ(it->kind, HostApiKind::kLaunch);
  // Step windows keep their nanosecond fractions too.
  ASSERT_EQ(r.store.steps.size(), 5u);
  EXPECT_EQ(r.store.steps[0].step, 101);
  EXPECT_EQ(r.store.steps[0].start_ns, 1712195495502094565);
  EXPECT_EQ(r.store.steps[0].end_ns, 1712195495537210434);
  EXPECT_EQ(r.store.steps[4].step, 105);
  EXPECT_EQ(r.store.steps[4].end_ns, 1712195495896373913);
}

TEST(KinetoRealTraceDetails, Resnet50StepWindows) {
  REQUIRE_TRACE("kineto_resnet50_nw4_v100.json.gz");
  const ImportResult r = import_kineto_file(trace_path("kineto_resnet50_nw4_v100.json.gz"));
  ASSERT_TRUE(r.ok);
  const StepWindow want[] = {
      {5, 1623212388426996000, 1623212388608561000}, {6, 1623212388608626000, 1623212388732510000},
      {7, 1623212388732580000, 1623212388859404000}, {8, 1623212388859473000, 1623212388985745000},
      {9, 1623212388985809000, 1623212389149270000}, {10, 1623212389149340000, 1623212389265486000},
  };
  ASSERT_EQ(r.store.steps.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(r.store.steps[i].step, want[i].step);
    EXPECT_EQ(r.store.steps[i].start_ns, want[i].start_ns);
    EXPECT_EQ(r.store.steps[i].end_ns, want[i].end_ns);
  }
  // Old vintage: "Kernel" rows with tid "stream 7", Operator tids as strings.
  ASSERT_FALSE(r.store.activities.empty());
  EXPECT_EQ(r.store.activities[0].stream, 7);
  size_t with_grid = 0;
  for (const DeviceActivity& a : r.store.activities) with_grid += a.kind == ActivityKind::kKernel && a.grid[0] > 0;
  EXPECT_EQ(with_grid, 8868u);
  const DeviceInfo* d = r.store.device_info(0);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name, "Tesla V100-DGXS-32GB");
  EXPECT_EQ(d->sm_count, 80);
  EXPECT_EQ(d->compute_major, 7);
  EXPECT_EQ(d->shared_memory_per_sm_bytes, 98304);
}

TEST(KinetoRealTraceDetails, AlexnetHasNoStepsAndSyncCalls) {
  REQUIRE_TRACE("hta_alexnet_a100_sync.json.gz");
  const ImportResult r = import_kineto_file(trace_path("hta_alexnet_a100_sync.json.gz"));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.store.diagnostics.count(Diag::steps_missing), 1u);
  ASSERT_EQ(r.store.steps.size(), 1u);
  EXPECT_EQ(r.store.steps[0].start_ns, 1695835542514261000);
  EXPECT_EQ(r.store.steps[0].end_ns, 1695835585939626000);
  // 16 cudaStreamSynchronize + 5 cudaDeviceSynchronize; the 41 cuda_sync
  // device-row events duplicate them and are not imported.
  size_t launches = 0, syncs = 0, stream_syncs = 0, async_copies = 0, others_wait = 0;
  for (const HostApiCall& c : r.store.api_calls) {
    launches += c.kind == HostApiKind::kLaunch;
    syncs += c.kind == HostApiKind::kSynchronize;
    stream_syncs += c.sync == SyncKind::kStream;
    async_copies += c.kind == HostApiKind::kAsyncCopy;
    others_wait += name_of(r.store, c.name) == "cudaStreamWaitEvent" && c.kind == HostApiKind::kOther;
  }
  EXPECT_EQ(launches, 79u);
  EXPECT_EQ(syncs, 21u);
  EXPECT_EQ(stream_syncs, 16u);
  EXPECT_EQ(async_copies, 21u);
  EXPECT_EQ(others_wait, 34u);
  const DeviceInfo* d = r.store.device_info(0);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->sm_count, 108);
  EXPECT_EQ(d->compute_major, 8);
}

TEST(KinetoRealTraceDetails, DistributedRank) {
  REQUIRE_TRACE("hta_sampled_rank1.json.gz");
  EXPECT_EQ(import_kineto_file(trace_path("hta_sampled_rank1.json.gz")).store.rank, 1);
  REQUIRE_TRACE("hta_cpu_only.json.gz");
  EXPECT_EQ(import_kineto_file(trace_path("hta_cpu_only.json.gz")).store.rank, 34);
}

TEST(KinetoRealTraceDetails, V100DeviceProperties) {
  REQUIRE_TRACE("hta_train_v100_dataloader_nccl_rank1.json.gz");
  const ImportResult r = import_kineto_file(trace_path("hta_train_v100_dataloader_nccl_rank1.json.gz"));
  ASSERT_TRUE(r.ok);
  const DeviceInfo* d = r.store.device_info(1);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name, "Tesla V100-SXM2-16GB");
  EXPECT_EQ(d->sm_count, 80);
  EXPECT_EQ(d->max_threads_per_sm, 2048);
  EXPECT_EQ(d->registers_per_sm, 65536);
  EXPECT_EQ(d->warp_size, 32);
  EXPECT_EQ(d->total_memory_bytes, 16945512448);
  EXPECT_EQ(r.store.diagnostics.count(Diag::activity_unknown_device), 0u);
  size_t dataloader = 0;
  for (const HostRange& g : r.store.ranges) dataloader += g.category == RangeCategory::kDataloader;
  EXPECT_EQ(dataloader, 6u);
}

TEST(KinetoRealTraceDetails, RocmTraces) {
  REQUIRE_TRACE("tracelens_mi300x_torch_compile_triton.json.gz");
  const ImportResult r = import_kineto_file(trace_path("tracelens_mi300x_torch_compile_triton.json.gz"));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.store.diagnostics.count(Diag::rocm_trace), 1u);
  size_t launches = 0;
  for (const HostApiCall& c : r.store.api_calls) launches += c.kind == HostApiKind::kLaunch;
  EXPECT_EQ(launches, 12u);  // one per triton kernel
  const DeviceInfo* d = r.store.device_info(2);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name, "AMD Instinct MI300X");
  EXPECT_EQ(d->sm_count, 304);
  EXPECT_EQ(d->warp_size, 64);
  EXPECT_EQ(r.store.activities[0].grid[0], 16384u);
}

// Document buffers of a MiB or more are whole, 2 MiB-aligned huge pages
// (one page fault per 2 MiB under THP "madvise"); smaller ones are exact.
// Either way they start zeroed and grow keeping their contents.
TEST(TraceBuffers, DocumentBuffersFromAMiBAreWholeAlignedHugePagesAndGrowKeepingTheirBytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  for (const size_t asked : {size_t{4096}, (size_t{1} << 20) - 1, size_t{1} << 20, size_t{1800000},
                             kHuge, kHuge + 1, size_t{5} << 20}) {
    replay::TraceBytes b;
    b.allocate(asked);
    ASSERT_NE(b.data(), nullptr);
    ASSERT_GE(b.capacity, asked);
    if (asked >= (size_t{1} << 20)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kHuge, 0u) << asked;
      EXPECT_EQ(b.capacity % kHuge, 0u) << asked;
      EXPECT_LT(b.capacity - asked, kHuge) << asked;
    } else {
      EXPECT_EQ(b.capacity, asked);
    }
    EXPECT_EQ(std::count(b.data(), b.data() + b.capacity, '\0'), static_cast<std::ptrdiff_t>(b.capacity));
    std::fill(b.data(), b.data() + b.capacity, 'x');
    const size_t had = b.capacity;
    b.grow(had * 2, had);
    ASSERT_GE(b.capacity, had * 2);
    EXPECT_EQ(std::count(b.data(), b.data() + had, 'x'), static_cast<std::ptrdiff_t>(had)) << asked;
    EXPECT_EQ(std::count(b.data() + had, b.data() + b.capacity, '\0'), static_cast<std::ptrdiff_t>(b.capacity - had));
    // A reused buffer (the streaming window) is exactly what was asked: its
    // resident memory stays the window's.
    replay::TraceBytes window;
    window.allocate(asked, /*once=*/false);
    EXPECT_EQ(window.capacity, asked);
  }
}

TEST(KinetoRealTraceDetails, FileAndMemoryImportAgree) {
  REQUIRE_TRACE("hta_event_sync_a100.json.gz");
  const std::string compressed = read_bytes(trace_path("hta_event_sync_a100.json.gz"));
  replay::TraceBytes plain;
  std::string error;
  ASSERT_TRUE(replay::gunzip(compressed, &plain, &error)) << error;
  const ImportResult a = import_kineto_file(trace_path("hta_event_sync_a100.json.gz"));
  const ImportResult b = import_kineto_json(plain.view());
  ASSERT_TRUE(a.ok && b.ok);
  ASSERT_EQ(a.store.activities.size(), b.store.activities.size());
  for (size_t i = 0; i < a.store.activities.size(); ++i) {
    EXPECT_EQ(a.store.activities[i].start_ns, b.store.activities[i].start_ns);
  }
  EXPECT_EQ(a.store.api_calls.size(), b.store.api_calls.size());
  EXPECT_EQ(a.store.ranges.size(), b.store.ranges.size());
}

// The mutation that found issue 32's item 7, on a real trace: ProfilerStep#6
// of the ResNet-50 run again, 1,000x as long, after the last step (and, in
// a second input, before the first). Each step keeps one window and one
// device entry with the step's wall; with the copy after the run the steps
// are exactly those of the unmutated trace.
TEST(KinetoRealTraceDetails, DuplicatedProfilerStepInARealTraceGivesOneEntryPerStep) {
  REQUIRE_TRACE("kineto_resnet50_nw4_v100.json.gz");
  const std::string compressed = read_bytes(trace_path("kineto_resnet50_nw4_v100.json.gz"));
  replay::TraceBytes plain;
  std::string error;
  ASSERT_TRUE(replay::gunzip(compressed, &plain, &error)) << error;
  const std::string original(plain.view());
  const size_t events_at = original.find("\"traceEvents\": [");
  ASSERT_NE(events_at, std::string::npos);
  const auto with_copy_at = [&](const char* ts_us) {
    std::string doc = original;
    doc.insert(events_at + 16, std::string(R"J({"ph": "X", "cat": "Operator", "name": "ProfilerStep#6", "pid": 5555, "tid": "5555", "ts": )J") +
                                   ts_us + R"J(, "dur": 123884000},)J");
    return doc;
  };
  const Report base = analyze(import_kineto_json(original).store);
  ASSERT_EQ(base.steps.size(), 6u);
  for (const char* ts_us : {"1623212389300000", "1623212000000000"}) {
    SCOPED_TRACE(ts_us);
    const ImportResult r = import_kineto_json(with_copy_at(ts_us));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(diag(r, Diag::steps_duplicated), 1u);
    const Report report = analyze(r.store);
    ASSERT_EQ(report.steps.size(), 6u);
    for (const StepReport& s : report.steps) {
      ASSERT_EQ(s.devices.size(), 1u) << "step " << s.step;
      EXPECT_EQ(s.devices[0].wall_ns, s.wall_ns) << "step " << s.step;
      EXPECT_EQ(s.devices[0].breakdown.total_ns(), s.wall_ns) << "step " << s.step;
    }
  }
  const Report after = analyze(import_kineto_json(with_copy_at("1623212389300000")).store);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(after.steps[i].step, base.steps[i].step);
    EXPECT_EQ(after.steps[i].start_ns, base.steps[i].start_ns);
    EXPECT_EQ(after.steps[i].end_ns, base.steps[i].end_ns);
    EXPECT_EQ(after.steps[i].devices[0].busy_ns, base.steps[i].devices[0].busy_ns);
    EXPECT_EQ(after.steps[i].devices[0].breakdown.idle_total_ns(), base.steps[i].devices[0].breakdown.idle_total_ns());
  }
}

TEST(KinetoRealTraceDetails, ConcurrentImportsAreIndependent) {
  REQUIRE_TRACE("hta_sampled_rank0.json.gz");
  std::vector<size_t> counts(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < counts.size(); ++i) {
    threads.emplace_back([&counts, i] {
      const ImportResult r = import_kineto_file(trace_path("hta_sampled_rank0.json.gz"));
      counts[i] = r.ok ? r.store.activities.size() : 0;
    });
  }
  for (auto& t : threads) t.join();
  for (size_t c : counts) EXPECT_EQ(c, 1204u);
}

}  // namespace
}  // namespace gpuutil
