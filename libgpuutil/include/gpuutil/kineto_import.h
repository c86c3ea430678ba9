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
// `error`. Thread-safe: each call owns its parsers. A document is parsed in
// pieces (piece_bytes) on up to two threads, and a very large one (stream_min_bytes) is
// streamed through a window of fixed size (the traceEvents array cut into
// pieces, see docs/trace-import.md); either result is identical to the
// one-thread pass over the whole document, which stays the fallback for
// anything unusual.
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
  // A document read whole is parsed in pieces of about this many bytes
  // (cut between two events), each thread reading its pieces one after
  // another with one parser: the parser's index of a piece stays in cache
  // and its memory is touched once, not once per byte of the document.
  // Documents under twice this size are read in one piece per thread;
  // 0 turns pieces off (one piece per thread whatever the size).
  size_t piece_bytes = size_t{128} << 10;
  // Documents of this size or more are streamed: read and parsed a window
  // at a time, so memory holds one window of text, not the document (and
  // documents of 4 GiB or more can be read). The size is a plain file's or
  // buffer's size, or what a gzip stream's trailer states; a gzip stream
  // whose size is not known counts as large. Smaller documents are read
  // whole (faster on two threads, and gzip inflates faster at once). Left
  // at this default, the environment variable GPUUTIL_IMPORT_STREAM_MIN_MB=N
  // overrides it (N MiB; a huge N reads every document whole, to compare).
  size_t stream_min_bytes = size_t{64} << 20;
  // The streaming window (text held at a time); it grows only while one
  // event does not fit. At least 4096.
  size_t stream_window_bytes = size_t{256} << 10;
};

// Reads and parses a trace file (gzip detected by magic bytes).
ImportResult import_kineto_file(const std::string& path, const ImportOptions& options = {});
// Parses an in-memory JSON document (gzip accepted as well).
ImportResult import_kineto_json(std::string_view json, const std::string& source_name = "<memory>",
                                const ImportOptions& options = {});

}  // namespace gpuutil
