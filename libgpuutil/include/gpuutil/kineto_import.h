// Import of PyTorch profiler / Kineto Chrome-trace JSON into an EventStore.
//
// Handles every vintage of category names seen in the wild ("Kernel" and
// "kernel", "Runtime" and "cuda_runtime", "Operator" and "cpu_op", ...),
// `.json` and `.json.gz`, microsecond timestamps with or without fractional
// nanoseconds (parsed exactly from the decimal text, not through double).
// Inputs are regular files, pipes, FIFOs, `/dev/stdin`, `/dev/fd/N` or a
// descriptor (standard input): one streaming reader for all, never seeked
// unless it is a regular file, never spooled.
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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "gpuutil/events.h"

namespace gpuutil {

// The default memory budget of an import: see ImportOptions and
// docs/trace-import.md ("Memory budget").
inline constexpr uint64_t kDefaultImportMemoryBudgetBytes = uint64_t{768} << 20;

// Memory several imports share, e.g. the ranks of one job (analyze_traces
// imports them under one budget). Thread-safe; the imports charge it while
// they run and leave the memory their stores hold charged.
class ImportBudget {
 public:
  explicit ImportBudget(uint64_t limit_bytes) : limit_bytes_(limit_bytes) {}  // 0 = no limit
  uint64_t limit_bytes() const { return limit_bytes_; }
  uint64_t used_bytes() const { return used_bytes_.load(std::memory_order_relaxed); }
  // Adds `bytes` when they fit under the limit; false (nothing added) otherwise.
  bool charge(uint64_t bytes);
  void release(uint64_t bytes);

 private:
  const uint64_t limit_bytes_;
  std::atomic<uint64_t> used_bytes_{0};
};

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
  // Memory the import may hold: the events it keeps (the store's
  // activities, API calls, ranges, names and threads, with room to grow
  // and finally sort the largest of them) plus its text buffers (the
  // streaming window, a document read whole). An import that would pass it
  // stops and fails (`ok` false, input_unreadable, one line naming the
  // budget and `max_memory`, the Python keyword; the CLIs say
  // `--max-memory`). 0 = no budget. The analysis after the import is not
  // counted. See docs/trace-import.md ("Memory budget").
  uint64_t memory_budget_bytes = kDefaultImportMemoryBudgetBytes;
  // When set, the import charges this budget, shared with other imports,
  // instead of memory_budget_bytes. Not owned; outlives the import.
  ImportBudget* shared_budget = nullptr;
  // A FIFO (named pipe) that has no writer when it is opened is waited on
  // this long for one, then the import fails (it never blocks forever).
  // Left at this default, the environment variable GPUUTIL_INPUT_WAIT_S=N
  // overrides it (N seconds).
  uint32_t writer_wait_ms = 30000;
  // Called on the importing thread with one line (no newline) when the
  // import waits for an input: a FIFO's writer (at once), or a pipe's first
  // byte (after a second). Front ends print it on a terminal. May be empty.
  std::function<void(const std::string&)> on_wait;
};

// Reads and parses a trace file (gzip detected by magic bytes). `path` may
// also be a FIFO, `/dev/stdin` or a `/dev/fd/N` of a pipe: such inputs are
// streamed, never seeked (see import_kineto_fd). A terminal is refused.
ImportResult import_kineto_file(const std::string& path, const ImportOptions& options = {});
// Reads and parses the trace readable from `fd` (standard input: 0), from
// its current position, named `name` in errors and the store (e.g.
// "<stdin>"). Not owned: never closed. A regular file is read like one;
// anything else (a pipe, socket, character device) is streamed front to
// back with the same first-bytes check, caps and budget as a file, and
// documents under stream_min_bytes are buffered and read whole. A
// terminal is refused at once (nobody types a trace).
ImportResult import_kineto_fd(int fd, const std::string& name, const ImportOptions& options = {});
// Parses an in-memory JSON document (gzip accepted as well).
ImportResult import_kineto_json(std::string_view json, const std::string& source_name = "<memory>",
                                const ImportOptions& options = {});

// A memory size as people write it: a number with an optional binary unit
// K, M, G or T (powers of 1024; `KB`/`KiB` and lower case accepted), e.g.
// "512M", "1.5G", "4GiB", "1000000"; or "unlimited" (0: no budget). False
// with `why` (one line) for anything else, or a size of 0 or under 1 MiB.
bool parse_memory_size(std::string_view text, uint64_t* bytes, std::string* why);
// `bytes` the way parse_memory_size reads it back: "768 MiB", "2 GiB", "1.5 GiB".
std::string format_memory_size(uint64_t bytes);

}  // namespace gpuutil
