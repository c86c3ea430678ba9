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

#include "collectors/replay/import_passes.h"
#include "collectors/replay/importer.h"
#include "collectors/replay/parallel_split.h"
#include "collectors/replay/trace_bytes.h"
#include "collectors/replay/trace_source.h"

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

void import_bytes(TraceBytes& bytes, ImportResult* result, const ImportOptions& options) {
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
      Importer importer(result, text);
      if (importer.run_split(bytes, skip, plan)) {
        g_split_done.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
    g_split_abandoned.fetch_add(1, std::memory_order_relaxed);
    // Start over on one thread; it reports whatever stopped the split.
    const std::string source = std::move(result->store.source);
    *result = ImportResult{};
    result->store.source = source;
  }
  Importer importer(result, text);
  importer.run(bytes, skip);
}

void fail_unreadable(ImportResult* result, const std::string& error) {
  result->ok = false;
  result->error = error;
  result->store.diagnostics.add(Diag::input_unreadable, 1, error);
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

// Starts `result` over, keeping its source name.
void reset(ImportResult* result) {
  std::string source = std::move(result->store.source);
  *result = ImportResult{};
  result->store.source = std::move(source);
}

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

// Reads the whole document with `read_whole` (TraceBytes*, std::string*
// error) -> bool, and imports it.
template <typename ReadWhole>
void import_whole(ImportResult* result, const ImportOptions& options, ReadWhole read_whole) {
  TraceBytes bytes;
  std::string error;
  if (!read_whole(&bytes, &error)) {
    fail_unreadable(result, error);
    return;
  }
  import_bytes(bytes, result, options);
}

// Streams `source` into `result`; `read_whole` reads the whole document
// when the stream gives up.
template <typename ReadWhole>
void import_streamed(replay::TraceSource& source, const std::string* not_json_prefix, ImportResult* result,
                     const ImportOptions& options, ReadWhole read_whole) {
  // A gzip stream is inflated on a second thread, a few blocks ahead of
  // the parse, when a second thread is allowed.
  if (source.gzip() && parse_threads(options, SIZE_MAX) > 1) {
    (void)source.read_ahead(kReadAheadBlockBytes, kReadAheadBlocks);
  }
  TraceBytes window;
  std::string error;
  StreamOutcome outcome = StreamOutcome::kAbandoned;
  {
    Importer importer(result, {});
    outcome = importer.run_stream(source, window, options.stream_window_bytes, not_json_prefix, &error);
  }
  switch (outcome) {
    case StreamOutcome::kDone:
      g_stream_done.fetch_add(1, std::memory_order_relaxed);
      return;
    case StreamOutcome::kSourceFailed:
      reset(result);
      fail_unreadable(result, error);
      return;
    case StreamOutcome::kWhole:
      reset(result);
      import_bytes(window, result, options);
      return;
    case StreamOutcome::kAbandoned:
      break;
  }
  g_stream_abandoned.fetch_add(1, std::memory_order_relaxed);
  reset(result);
  window.clear();
  import_whole(result, options, read_whole);
}

// The whole of an in-memory document, gunzipped when it is gzip.
bool whole_json(std::string_view json, TraceBytes* bytes, std::string* error) {
  if (looks_like_gzip(json)) return gunzip(json, bytes, error);
  if (json.size() > kMaxDocumentBytes) {
    *error = "document larger than 4 GiB";
    return false;
  }
  bytes->allocate(json.size() + kTracePaddingBytes);
  if (!json.empty()) std::memcpy(bytes->data(), json.data(), json.size());
  bytes->size = json.size();
  std::memset(bytes->data() + json.size(), 0, kTracePaddingBytes);
  return true;
}

// Streams `source` or reads it whole, by its size.
template <typename ReadWhole>
void import_source(replay::TraceSource& source, const std::string* not_json_prefix, ImportResult* result,
                   const ImportOptions& options, ReadWhole read_whole) {
  if (wants_stream(source, options)) {
    import_streamed(source, not_json_prefix, result, options, read_whole);
  } else {
    import_whole(result, options, read_whole);
  }
}

template <typename Import>
ImportResult guarded(const std::string& source_name, Import import) {
  ImportResult result;
  result.store.source = source_name;
  try {
    import(&result);
  } catch (const std::bad_alloc&) {
    ImportResult failed;
    failed.store.source = source_name;
    fail_unreadable(&failed, "out of memory while importing " + source_name);
    return failed;
  }
  return result;
}

}  // namespace

ImportResult import_kineto_file(const std::string& path, const ImportOptions& options) {
  return guarded(path, [&](ImportResult* result) {
    std::string error;
    replay::TraceSource source;
    if (!source.open_file(path, &error)) {
      fail_unreadable(result, error);
      return;
    }
    // The same words read_trace_file() uses for a file that is not JSON.
    const std::string prefix = source.gzip() ? "gzip: " : "cannot read " + path + ": ";
    import_source(source, &prefix, result, options,
                  [&path](TraceBytes* bytes, std::string* why) { return read_trace_file(path, bytes, why); });
  });
}

ImportResult import_kineto_json(std::string_view json, const std::string& source_name, const ImportOptions& options) {
  return guarded(source_name, [&](ImportResult* result) {
    replay::TraceSource source;
    source.open_memory(json);
    // gunzip() refuses inflated text that is not JSON; plain text is left to
    // the parser, as the whole-document pass does.
    const std::string prefix = "gzip: ";
    import_source(source, source.gzip() ? &prefix : nullptr, result, options,
                  [json](TraceBytes* bytes, std::string* why) { return whole_json(json, bytes, why); });
  });
}

}  // namespace gpuutil
