// libFuzzer target for the Kineto importer (import_kineto_json).
//
// Not part of the default build: it needs clang's -fsanitize=fuzzer. Build
// and run from the repository root (see docs/trace-import.md, "Fuzzing"):
//
//   clang++ -g -O1 -std=c++17 -fsanitize=fuzzer,address,undefined
//     -Ilibgpuutil/include -Ilibgpuutil/src tests/fuzz/kineto_fuzzer.cpp
//     libgpuutil/src/core/*.cpp libgpuutil/src/import/kineto/*.cpp
//     -lsimdjson -lz -pthread -o kineto_fuzzer        (one command line)
//   mkdir -p corpus && for f in ../shared/traces/*.json.gz; do
//     zcat "$f" | head -c 65536 > "corpus/$(basename "$f" .gz)"; done
//   ./kineto_fuzzer -max_len=65536 corpus
//
// Besides memory errors (caught by the sanitizers) it traps on any breach of
// the importer's contract: ok must agree with the error diagnostics, errors
// are one line, and every stored interval has end >= start.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpuutil/kineto_import.h"

namespace {

bool consistent(const gpuutil::ImportResult& r) {
  const gpuutil::EventStore& s = r.store;
  if (r.ok == s.diagnostics.any_error()) return false;
  if (!r.ok && (r.error.empty() || r.error.find('\n') != std::string::npos)) return false;
  for (const auto& a : s.activities) {
    if (a.end_ns < a.start_ns || a.name >= s.names.size()) return false;
  }
  for (const auto& c : s.api_calls) {
    if (c.end_ns < c.start_ns || c.thread >= s.threads.size()) return false;
  }
  for (const auto& g : s.ranges) {
    if (g.end_ns < g.start_ns || g.thread >= s.threads.size()) return false;
  }
  for (size_t i = 1; i < s.steps.size(); ++i) {
    if (s.steps[i].start_ns < s.steps[i - 1].end_ns) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const gpuutil::ImportResult result = gpuutil::import_kineto_json(input, "<fuzz>");
  if (!consistent(result)) __builtin_trap();
  return 0;
}
