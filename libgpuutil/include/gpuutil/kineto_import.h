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
// `error`. Thread-safe: each call owns its parser.
#pragma once

#include <string>
#include <string_view>

#include "gpuutil/events.h"

namespace gpuutil {

struct ImportResult {
  bool ok = false;
  std::string error;  // one line, set when !ok
  EventStore store;
};

// Reads and parses a trace file (gzip detected by magic bytes).
ImportResult import_kineto_file(const std::string& path);
// Parses an in-memory JSON document (already decompressed).
ImportResult import_kineto_json(std::string_view json, const std::string& source_name = "<memory>");

}  // namespace gpuutil
