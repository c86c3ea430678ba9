// Kineto / PyTorch-profiler Chrome-trace import (see gpuutil/kineto_import.h):
// which pass reads a document (importer.h), and the fallbacks between them.
//
// - A document below ImportOptions::stream_min_bytes is read whole into
//   memory (trace_bytes.h) and parsed by the piece pass (on two threads
//   when it is large enough for that) when it holds two pieces or a second
//   thread is used, else by the serial pass.
// - A larger one (a plain file's size, a gzip stream's trailer; an unknown
//   size counts as large) is streamed (stream_pass.cpp): read in windows of
//   stream_window_bytes, each mapped before the next is read; a gzip
//   stream is inflated a few blocks ahead on a second thread when two
//   threads are allowed (trace_source.h).
// - A parallel or streaming attempt that gives up is thrown away and the
//   serial pass runs over the whole document, which reports what stopped it.
// - A source that cannot be read twice (a pipe, a FIFO, standard input) is
//   always streamed, its first stream_min_bytes buffered: a document that
//   ends within them is read whole as above, a larger one is streamed on
//   from there, and the stream pass words its faults itself.
// - Every pass charges one ImportAccount (memory_budget.h); over the
//   budget, the import fails with one line naming it, never falling back.
#include "gpuutil/kineto_import.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "import/kineto/import_passes.h"
#include "import/kineto/importer.h"
#include "import/source/memory_budget.h"
#include "import/kineto/parallel_split.h"
#include "import/source/trace_bytes.h"
#include "import/source/trace_source.h"

namespace gpuutil {

using namespace replay;  // NOLINT(google-build-using-namespace): the collector's own internals

namespace {

// Automatic thread count: two is what a 2-core machine profits from, and
// the merge stays on one thread.
constexpr unsigned kAutoParseThreads = 2;
constexpr unsigned kMaxParseThreads = 16;
// Share of the document the importing thread parses itself. It also maps
// every event while the workers only read, but a worker's copies of the
// events it keeps cost about as much (measured per thread CPU time on
// hta_train_v100_dataloader_nccl_rank1: 0.5 balances the two).
constexpr double kFirstChunkShare = 0.5;

// Read-ahead of a streamed gzip document: 4 blocks of 256 KiB (1 MiB)
// ahead of the parse.
constexpr size_t kReadAheadBlockBytes = size_t{256} << 10;
constexpr size_t kReadAheadBlocks = 4;

std::atomic<uint64_t> g_split_done{0};
std::atomic<uint64_t> g_split_abandoned{0};
std::atomic<uint64_t> g_stream_done{0};
std::atomic<uint64_t> g_stream_abandoned{0};

// How many threads to parse a document of `size_bytes` with.
size_t parse_threads(const ImportOptions& options, size_t size_bytes) {
  // Checked first: asking for the hardware threads reads sysfs (about
  // 50-90 us on a first call), a cost no small document should pay.
  if (size_bytes < options.parallel_min_bytes || options.threads == 1) return 1;
  unsigned threads = options.threads;
  if (threads == 0) {
    const char* env = std::getenv("GPUUTIL_IMPORT_THREADS");
    if (env != nullptr && *env != '\0') threads = static_cast<unsigned>(std::strtoul(env, nullptr, 10));
  }
  if (threads == 0) threads = std::min(kAutoParseThreads, std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, kMaxParseThreads);
  return threads < 2 ? 1 : threads;
}

// Starts `result` over, keeping its source name.
void reset(ImportResult* result) {
  std::string source = std::move(result->store.source);
  *result = ImportResult{};
  result->store.source = std::move(source);
}

void fail_unreadable(ImportResult* result, const std::string& error) {
  result->ok = false;
  result->error = error;
  result->store.diagnostics.add(Diag::input_unreadable, 1, error);
}

// The import stopped at the memory budget: an empty store and the reason.
void fail_budget(ImportResult* result, ImportAccount& account, uint64_t events, uint64_t bytes_read) {
  reset(result);
  account.forget_store();
  fail_unreadable(result, account.message(events, bytes_read));
}

// A document that does not fit the budget to be read whole.
void fail_budget_whole(ImportResult* result, ImportAccount& account, uint64_t document_bytes) {
  reset(result);
  account.forget_store();
  fail_unreadable(result, account.whole_document_message(document_bytes));
}

void import_bytes(TraceBytes& bytes, ImportResult* result, const ImportOptions& options, ImportAccount& account) {
  std::string_view text = bytes.view();
  size_t skip = 0;
  if (text.size() >= 3 && std::memcmp(text.data(), "\xEF\xBB\xBF", 3) == 0) skip = 3;  // UTF-8 BOM
  text = text.substr(skip);
  const size_t threads = parse_threads(options, text.size());
  const size_t piece_bytes =
      options.piece_bytes > 0 && text.size() / 2 >= options.piece_bytes ? options.piece_bytes : 0;
  SplitPlan plan;
  if ((threads > 1 || piece_bytes > 0) && plan.make(text, threads, kFirstChunkShare, piece_bytes)) {
    {
      Importer importer(result, text, &account);
      const bool done = importer.run_split(bytes, skip, plan);
      if (importer.over_budget()) {
        fail_budget(result, account, importer.events_read(), bytes.size);
        return;
      }
      if (done) {
        g_split_done.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
    g_split_abandoned.fetch_add(1, std::memory_order_relaxed);
    // Start over on one thread; it reports whatever stopped the split.
    reset(result);
    account.forget_store();
  }
  Importer importer(result, text, &account);
  importer.run(bytes, skip);
  if (importer.over_budget()) fail_budget(result, account, importer.events_read(), bytes.size);
}

}  // namespace

namespace replay {
ImportPassCounts import_pass_counts() {
  return ImportPassCounts{g_split_done.load(std::memory_order_relaxed),
                          g_split_abandoned.load(std::memory_order_relaxed),
                          g_stream_done.load(std::memory_order_relaxed),
                          g_stream_abandoned.load(std::memory_order_relaxed)};
}
}  // namespace replay

namespace {

// The streaming threshold: the option, or GPUUTIL_IMPORT_STREAM_MIN_MB
// when the option is left at its default.
uint64_t stream_min_bytes(const ImportOptions& options) {
  if (options.stream_min_bytes == ImportOptions{}.stream_min_bytes) {
    const char* env = std::getenv("GPUUTIL_IMPORT_STREAM_MIN_MB");
    if (env != nullptr && *env != '\0') return static_cast<uint64_t>(std::strtoull(env, nullptr, 10)) << 20;
  }
  return options.stream_min_bytes;
}

bool wants_stream(const replay::TraceSource& source, const ImportOptions& options) {
  const uint64_t size_bytes = source.size_hint_bytes();
  if (size_bytes == 0) return source.gzip();  // a gzip stream of unknown size
  return size_bytes >= stream_min_bytes(options);
}

// Reads the whole document (`document_bytes` when known, else 0) with
// `read_whole` (TraceBytes*, std::string* error, size_t cap_bytes, bool*
// over_cap) -> bool, within what the budget has left, and imports it.
template <typename ReadWhole>
void import_whole(ImportResult* result, const ImportOptions& options, ImportAccount& account, uint64_t document_bytes,
                  ReadWhole read_whole) {
  TraceBytes bytes;
  std::string error;
  bool over_cap = false;
  const uint64_t cap = std::min<uint64_t>(account.available_bytes(), kMaxDocumentBytes);
  if (!read_whole(&bytes, &error, static_cast<size_t>(cap), &over_cap)) {
    if (over_cap) {
      fail_budget_whole(result, account, document_bytes);
    } else {
      fail_unreadable(result, error);
    }
    return;
  }
  if (!account.charge_buffer(bytes.capacity)) {
    fail_budget_whole(result, account, bytes.size);
    return;
  }
  import_bytes(bytes, result, options, account);
  account.release_buffer(bytes.capacity);
}

// Streams `source` into `result`; `read_whole` reads the whole document
// when the stream gives up (a source that can be read twice; else null).
template <typename ReadWhole>
void import_streamed(replay::TraceSource& source, const std::string* not_json_prefix, ImportResult* result,
                     const ImportOptions& options, ImportAccount& account, const ReadWhole* read_whole) {
  // A gzip stream is inflated on a second thread, a few blocks ahead of
  // the parse, when a second thread is allowed.
  if (source.gzip() && parse_threads(options, SIZE_MAX) > 1) {
    (void)source.read_ahead(kReadAheadBlockBytes, kReadAheadBlocks);
  }
  // A source that cannot be read twice is buffered up to the size below
  // which documents are read whole, so that it is read like a file of its
  // size.
  const size_t prefill = source.rewindable() ? 0 : static_cast<size_t>(stream_min_bytes(options));
  // Faults are left to a second, whole-document read only where it can
  // happen within the budget; otherwise the stream words them itself.
  const bool can_restart =
      read_whole != nullptr && source.size_hint_bytes() + kTracePaddingBytes <= account.available_bytes();
  TraceBytes window;
  std::string error;
  StreamOutcome outcome = StreamOutcome::kAbandoned;
  uint64_t events = 0;
  {
    Importer importer(result, {}, &account);
    outcome = importer.run_stream(source, window, options.stream_window_bytes, prefill, can_restart,
                                  not_json_prefix, &error);
    events = importer.events_read();
  }
  switch (outcome) {
    case StreamOutcome::kDone:
      g_stream_done.fetch_add(1, std::memory_order_relaxed);
      return;
    case StreamOutcome::kSourceFailed:
      reset(result);
      fail_unreadable(result, error);
      return;
    case StreamOutcome::kInvalid:
      reset(result);
      result->error = error;
      result->store.diagnostics.add(Diag::json_invalid, 1, error);
      return;
    case StreamOutcome::kOverBudget:
      fail_budget(result, account, events, source.bytes_read());
      return;
    case StreamOutcome::kWhole:
      reset(result);
      account.forget_store();
      import_bytes(window, result, options, account);
      return;
    case StreamOutcome::kAbandoned:
      break;
  }
  g_stream_abandoned.fetch_add(1, std::memory_order_relaxed);
  reset(result);
  account.forget_store();
  account.release_buffer(window.capacity);
  window.clear();
  if (read_whole != nullptr) import_whole(result, options, account, source.size_hint_bytes(), *read_whole);
}

// The whole of an in-memory document, gunzipped when it is gzip.
bool whole_json(std::string_view json, TraceBytes* bytes, std::string* error, size_t cap_bytes, bool* over_cap) {
  if (looks_like_gzip(json)) return gunzip_capped(json, bytes, error, cap_bytes, over_cap);
  if (json.size() > kMaxDocumentBytes) {
    *error = "document larger than 4 GiB";
    return false;
  }
  if (json.size() > cap_bytes) {
    *over_cap = true;
    return false;
  }
  bytes->allocate(json.size() + kTracePaddingBytes);
  if (!json.empty()) std::memcpy(bytes->data(), json.data(), json.size());
  bytes->size = json.size();
  std::memset(bytes->data() + json.size(), 0, kTracePaddingBytes);
  return true;
}

// Streams `source` or reads it whole, by its size and kind.
template <typename ReadWhole>
void import_source(replay::TraceSource& source, const std::string* not_json_prefix, ImportResult* result,
                   const ImportOptions& options, ImportAccount& account, const ReadWhole& read_whole) {
  if (!source.rewindable()) {
    import_streamed<ReadWhole>(source, not_json_prefix, result, options, account, nullptr);
  } else if (wants_stream(source, options)) {
    import_streamed(source, not_json_prefix, result, options, account, &read_whole);
  } else {
    import_whole(result, options, account, source.size_hint_bytes(), read_whole);
  }
}

template <typename Import>
ImportResult guarded(const std::string& source_name, const ImportOptions& options, Import import) {
  ImportResult result;
  result.store.source = source_name;
  try {
    ImportAccount account(options);
    import(&result, account);
    if (result.ok) account.keep_store();
  } catch (const std::bad_alloc&) {
    ImportResult failed;
    failed.store.source = source_name;
    fail_unreadable(&failed, "out of memory while importing " + source_name);
    return failed;
  }
  return result;
}

// How long a stream may keep the import waiting: the options, or
// GPUUTIL_INPUT_WAIT_S when they are left at their default.
replay::StreamWait stream_wait(const ImportOptions& options) {
  replay::StreamWait wait;
  wait.writer_wait_ms = options.writer_wait_ms;
  if (options.writer_wait_ms == ImportOptions{}.writer_wait_ms) {
    const char* env = std::getenv("GPUUTIL_INPUT_WAIT_S");
    if (env != nullptr && *env != '\0') {
      const double seconds = std::strtod(env, nullptr);
      if (seconds >= 0 && seconds < 86400) wait.writer_wait_ms = static_cast<uint32_t>(seconds * 1000);
    }
  }
  wait.on_wait = &options.on_wait;
  return wait;
}

// Imports an opened file or descriptor.
void import_opened(replay::TraceSource& source, const std::string& name, ImportResult* result,
                   const ImportOptions& options, ImportAccount& account) {
  // The same words read_trace_file() uses for a file that is not JSON.
  const std::string prefix = source.gzip() ? "gzip: " : "cannot read " + name + ": ";
  const auto read_whole = [&source, &name](TraceBytes* bytes, std::string* why, size_t cap, bool* over_cap) {
    return read_trace_fd(source.fd(), source.start_offset(), name, bytes, why, cap, over_cap);
  };
  import_source(source, &prefix, result, options, account, read_whole);
}

}  // namespace

ImportResult import_kineto_file(const std::string& path, const ImportOptions& options) {
  return guarded(path, options, [&](ImportResult* result, ImportAccount& account) {
    std::string error;
    replay::TraceSource source;
    if (!source.open_file(path, stream_wait(options), &error)) {
      fail_unreadable(result, error);
      return;
    }
    import_opened(source, path, result, options, account);
  });
}

ImportResult import_kineto_fd(int fd, const std::string& name, const ImportOptions& options) {
  return guarded(name, options, [&](ImportResult* result, ImportAccount& account) {
    std::string error;
    replay::TraceSource source;
    if (!source.open_fd(fd, name, stream_wait(options), &error)) {
      fail_unreadable(result, error);
      return;
    }
    import_opened(source, name, result, options, account);
  });
}

ImportResult import_kineto_json(std::string_view json, const std::string& source_name, const ImportOptions& options) {
  return guarded(source_name, options, [&](ImportResult* result, ImportAccount& account) {
    replay::TraceSource source;
    source.open_memory(json);
    // gunzip() refuses inflated text that is not JSON; plain text is left to
    // the parser, as the whole-document pass does.
    const std::string prefix = "gzip: ";
    const auto read_whole = [json](TraceBytes* bytes, std::string* why, size_t cap, bool* over_cap) {
      return whole_json(json, bytes, why, cap, over_cap);
    };
    import_source(source, source.gzip() ? &prefix : nullptr, result, options, account, read_whole);
  });
}

}  // namespace gpuutil
