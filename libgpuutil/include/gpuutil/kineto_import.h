// Import of PyTorch profiler / Kineto Chrome-trace JSON into an EventStore.
//
// Handles every vintage of category names seen in the wild ("Kernel" and
// "kernel", "Runtime" and "cuda_runtime", "Operator" and "cpu_op", ...),
// `.json` and `.json.gz`, microsecond timestamps with or without fractional
// nanoseconds (parsed exactly from the decimal text, not through double).
//
// Contract: never throws on bad data. Malformed events are counted in the
// store's diagnostics and skipped. Only input that cannot be read at all
// (missing file, broken gzip, invalid JSON) makes `ok` false, with a one-line
// `error`. Thread-safe: each call owns its parsers. A large document is
// parsed on up to two threads (the traceEvents array cut into chunks, see
// docs/trace-import.md); the result is identical to the one-thread pass,
// which stays the fallback for anything unusual.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gpuutil/events.h"

namespace gpuutil {

struct ImportResult {
  bool ok = false;
  std::string error;  // one line, set when !ok
  EventStore store;
};

struct ImportOptions {
  // Parsing threads: 0 = automatic (min(2, hardware threads); the
  // environment variable GPUUTIL_IMPORT_THREADS=N overrides), 1 = the
  // one-thread pass, N > 1 = up to N (tests use more than 2).
  unsigned threads = 0;
  // Documents smaller than this (uncompressed) are parsed on one thread:
  // below a few MB a second thread costs more than it saves.
  size_t parallel_min_bytes = size_t{4} << 20;
};

// Reads and parses a trace file (gzip detected by magic bytes).
ImportResult import_kineto_file(const std::string& path, const ImportOptions& options = {});
// Parses an in-memory JSON document (gzip accepted as well).
ImportResult import_kineto_json(std::string_view json, const std::string& source_name = "<memory>",
                                const ImportOptions& options = {});

}  // namespace gpuutil
