// Kineto / PyTorch-profiler Chrome-trace import (see gpuutil/kineto_import.h).
//
// One forward pass with simdjson On Demand over the top-level object: each
// key is handled as it comes ("traceEvents" before or after
// "deviceProperties" - the order varies between files), events are read by
// read_event() and mapped by KinetoMapper. Structural JSON faults stop the
// pass: what was read so far stays in the store, `ok` is false and the error
// names the byte offset. Input with invalid UTF-8 is repaired (bad bytes
// become '?') rather than rejected, since PyTorch writes names unvalidated.
// On Demand's stage 1 validates UTF-8 itself, so the repair pass (and a
// second parse) runs only when the first parse fails; a trace that parses
// is valid UTF-8 and would have needed no repair.
//
// Large documents take the parallel pass first (parallel_split.h): the
// traceEvents array is cut into chunks; worker threads read chunks 1..n-1
// (event_chunk.h) while this thread reads chunk 0 - the top-level keys
// before the cut and the first events - mapping as it goes. It then maps the
// workers' events in order and reads the top-level keys after the array.
// The mapper therefore sees exactly the serial sequence of events and keys,
// so names, threads, diagnostics and steps come out identical. Any fault or
// surprise (a chunk that does not parse, a cut that was not between two
// traceEvents elements, trailing bytes) throws the attempt away, puts the
// bytes back and runs the serial pass, which reports it.
#include "gpuutil/kineto_import.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "collectors/replay/event_array.h"
#include "collectors/replay/event_chunk.h"
#include "collectors/replay/import_passes.h"
#include "collectors/replay/kineto_event.h"
#include "collectors/replay/kineto_mapper.h"
#include "collectors/replay/kineto_metadata.h"
#include "collectors/replay/parallel_split.h"
#include "collectors/replay/trace_bytes.h"
#include "collectors/replay/utf8_repair.h"

namespace gpuutil {

namespace {

using simdjson::error_code;
using simdjson::SUCCESS;
using simdjson::ondemand::json_type;

// Where the parse stopped and why; `offset` < 0 when unknown.
struct Fault {
  error_code code = SUCCESS;
  int64_t offset = -1;
  const char* what = nullptr;  // overrides simdjson's message when set
};

// Automatic thread count: two is what a 2-core machine profits from, and
// the merge stays on one thread.
constexpr unsigned kAutoParseThreads = 2;
constexpr unsigned kMaxParseThreads = 16;
// Share of the document the importing thread parses itself. It also maps
// every event while the workers only read, but a worker's copies of the
// events it keeps cost about as much (measured per thread CPU time on
// hta_train_v100_dataloader_nccl_rank1: 0.5 balances the two).
constexpr double kFirstChunkShare = 0.5;

std::atomic<uint64_t> g_split_done{0};
std::atomic<uint64_t> g_split_abandoned{0};

class Importer {
 public:
  Importer(ImportResult* result, std::string_view text) : result_(result), store_(&result->store),
                                                          mapper_(store_), text_(text) {}

  // Parses bytes (text_ starts `skip` bytes in) into the store, repairing
  // invalid UTF-8 first when needed.
  void run(replay::TraceBytes& bytes, size_t skip);
  // The parallel pass over the chunks `plan` cuts. Returns false when the
  // attempt must be thrown away (the result is then half-filled; the bytes
  // are as they were).
  bool run_split(replay::TraceBytes& bytes, size_t skip, const replay::SplitPlan& plan);

  // Sink for read_event_array().
  void event(const replay::RawEvent& raw, uint64_t index) { mapper_.consume(raw, index); }
  void not_object(uint64_t index) {
    store_->diagnostics.add(Diag::event_malformed, 1, "event #" + std::to_string(index) + ": not a JSON object");
  }

 private:
  error_code read_top_object(simdjson::ondemand::document& doc);
  error_code read_events(simdjson::ondemand::value& value);
  error_code read_events_array(simdjson::ondemand::array& array);
  bool read_first_chunk(const char* text, size_t size_bytes, size_t capacity_bytes, const replay::SplitPlan& plan);
  bool read_suffix(const char* text, size_t size_bytes, size_t capacity_bytes);
  void map_chunk(const replay::ChunkRead& chunk);
  void fail_json(const Fault& fault);
  int64_t offset_of(simdjson::ondemand::document& doc) const;

  ImportResult* result_;
  EventStore* store_;
  replay::KinetoMapper mapper_;
  std::string_view text_;
  simdjson::ondemand::parser parser_;
  bool saw_events_ = false;
  uint64_t event_index_ = 0;
  int64_t last_event_offset_ = -1;
  // Parallel pass, chunk 0: the document being walked, and where its events
  // array must end (just after the planted `]`) for the cut to be valid.
  simdjson::ondemand::document* split_doc_ = nullptr;
  int64_t split_after_offset_ = -1;
  int64_t split_chunk_size_ = -1;
  bool split_reached_ = false;
};

int64_t Importer::offset_of(simdjson::ondemand::document& doc) const {
  const char* at = nullptr;
  if (doc.current_location().get(at) == SUCCESS && at >= text_.data() && at <= text_.data() + text_.size()) {
    return at - text_.data();
  }
  return last_event_offset_;
}

void Importer::fail_json(const Fault& fault) {
  std::string message = "invalid JSON";
  if (fault.offset >= 0) message += " at byte " + std::to_string(fault.offset);
  message += ": ";
  message += fault.what ? fault.what : simdjson::error_message(fault.code);
  store_->diagnostics.add(Diag::json_invalid, 1, message);
  result_->ok = false;
  result_->error = message;
}

error_code Importer::read_events_array(simdjson::ondemand::array& array) {
  const char* last_element = nullptr;
  const error_code e = replay::read_event_array(array, *this, &last_element, &event_index_);
  if (last_element != nullptr) last_event_offset_ = last_element - text_.data();
  if (!e && split_doc_ != nullptr && !split_reached_) {
    // The cut is valid only if this array closed on the planted `]`: what
    // follows is then the planted `}` (object root) or the chunk's end.
    const char* after = nullptr;
    const int64_t after_offset = split_doc_->current_location().get(after) == SUCCESS
                                     ? after - text_.data()
                                     : split_chunk_size_;  // nothing after it in chunk 0
    split_reached_ = after_offset == split_after_offset_;
  }
  return e;
}

error_code Importer::read_events(simdjson::ondemand::value& value) {
  json_type type;
  if (auto e = value.type().get(type)) return e;
  if (type != json_type::array) return SUCCESS;  // reported as trace_events_missing
  saw_events_ = true;
  simdjson::ondemand::array array;
  if (auto e = value.get_array().get(array)) return e;
  return read_events_array(array);
}

error_code Importer::read_top_object(simdjson::ondemand::document& doc) {
  simdjson::ondemand::object object;
  if (auto e = doc.get_object().get(object)) return e;
  for (auto field_result : object) {
    simdjson::ondemand::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    const auto key = field.key();
    simdjson::ondemand::value& value = field.value();
    error_code e = SUCCESS;
    if (key == "traceEvents") {
      e = read_events(value);
    } else if (key == "deviceProperties") {
      uint64_t malformed = 0;
      e = replay::read_device_properties(value, &store_->devices, &malformed);
      if (malformed > 0) {
        store_->diagnostics.add(Diag::device_properties_malformed, malformed,
                                "deviceProperties entry or field of the wrong type");
      }
    } else if (key == "distributedInfo") {
      bool has_rank = false;
      int32_t rank = 0;
      e = replay::read_distributed_info(value, &has_rank, &rank);
      if (has_rank) store_->rank = rank;
    } else if (key == "roctracer_version" || key == "hip_runtime_version" || key == "hip_driver_version") {
      mapper_.mark_rocm();
    }
    if (e) return e;
  }
  return SUCCESS;
}

// A document that is a lone scalar has no traceEvents; make sure it is at
// least valid JSON, so "nonsense" is reported as invalid, not as missing
// events.
error_code check_scalar_document(simdjson::ondemand::document& doc, json_type type) {
  switch (type) {
    case json_type::null: {
      bool is_null = false;
      if (auto e = doc.is_null().get(is_null)) return e;
      return is_null ? SUCCESS : simdjson::N_ATOM_ERROR;
    }
    case json_type::boolean: {
      bool b = false;
      return doc.get_bool().get(b);
    }
    case json_type::number: {
      double d = 0;
      return doc.get_double().get(d);
    }
    case json_type::string: {
      std::string_view s;
      return doc.get_string().get(s);
    }
    default:
      return SUCCESS;
  }
}

void Importer::run(replay::TraceBytes& bytes, size_t skip) {
  const simdjson::padded_string_view padded(bytes.data() + skip, bytes.size - skip, bytes.capacity - skip);
  simdjson::ondemand::document doc;
  error_code parse_error = parser_.iterate(padded).get(doc);
  // Any stage-1 failure may be (or hide) invalid UTF-8: repair in place
  // (counted as event_malformed) and parse again. The repair never touches
  // the BOM, which is a valid sequence.
  if (parse_error && replay::repair_utf8(&bytes, &store_->diagnostics) > 0) {
    parse_error = parser_.iterate(padded).get(doc);
  }
  if (auto e = parse_error) {
    // Stage-1 faults (unclosed string, control characters, empty input)
    // carry no position.
    fail_json(Fault{e, -1, nullptr});
    mapper_.finish();
    return;
  }
  json_type top = json_type::null;
  error_code e = doc.type().get(top);
  const bool container = !e && (top == json_type::object || top == json_type::array);
  if (container && top == json_type::object) {
    e = read_top_object(doc);
  } else if (container) {
    simdjson::ondemand::array array;
    e = doc.get_array().get(array);
    if (!e) {
      saw_events_ = true;
      e = read_events_array(array);
    }
  }
  if (!e && !container) e = check_scalar_document(doc, top);
  const char* trailing = nullptr;
  if (e) {
    // An unfinished document is reported where it ends, not where On Demand
    // rewound to.
    const int64_t offset =
        e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT ? static_cast<int64_t>(text_.size()) : offset_of(doc);
    fail_json(Fault{e, offset, nullptr});
  } else if (container && doc.current_location().get(trailing) == SUCCESS) {
    // Anything left after the top-level value is a fault On Demand does not
    // report by itself.
    fail_json(Fault{simdjson::TAPE_ERROR, trailing - text_.data(), "unexpected content after the top-level value"});
  } else if (!saw_events_) {
    const char* message = "the trace has no traceEvents array";
    store_->diagnostics.add(Diag::trace_events_missing, 1, message);
    result_->ok = false;
    result_->error = message;
  } else {
    result_->ok = true;
  }
  mapper_.finish();
}

// Joins every thread when leaving scope, whatever way.
struct JoinAll {
  std::vector<std::thread>* threads;
  ~JoinAll() {
    for (std::thread& t : *threads) {
      if (t.joinable()) t.join();
    }
  }
};

bool Importer::run_split(replay::TraceBytes& bytes, size_t skip, const replay::SplitPlan& plan) {
  char* text = bytes.data() + skip;
  const size_t capacity_bytes = bytes.capacity - skip;
  const size_t chunks = plan.chunk_count();
  plan.plant(text);
  std::vector<std::unique_ptr<replay::ChunkRead>> reads;
  std::vector<std::thread> threads;
  bool ok = true;
  {
    const JoinAll join{&threads};
    try {
      for (size_t i = 1; i < chunks; ++i) reads.push_back(std::make_unique<replay::ChunkRead>());
      threads.reserve(chunks - 1);
      for (size_t i = 1; i < chunks; ++i) {
        const replay::ChunkSpan span = plan.chunk(i);
        threads.emplace_back(replay::read_event_chunk, text, span.begin_offset, span.end_offset, capacity_bytes,
                             i + 1 < chunks, reads[i - 1].get());
      }
    } catch (const std::system_error&) {
      ok = false;  // no thread to be had: the serial pass will do
    }
    if (ok) ok = read_first_chunk(text, plan.chunk(0).size_bytes(), capacity_bytes, plan);
  }
  for (const auto& read : reads) ok = ok && read->ok;
  if (!ok) {
    plan.restore(text);
    return false;
  }
  const size_t after_offset = reads.back()->after_array_offset;
  for (auto& read : reads) {
    map_chunk(*read);
    read.reset();  // its parser and events are no longer needed
  }
  plan.restore_root_close(text);
  const size_t size_bytes = plan.chunk(chunks - 1).end_offset;
  if (plan.root() == replay::RootKind::kArray) {
    ok = after_offset == size_bytes;  // nothing may follow a root array
  } else if (after_offset == plan.root_close_offset()) {
    ok = true;  // traceEvents was the last key
  } else if (after_offset < size_bytes && text[after_offset] == ',') {
    // The top-level keys after the events array: `, "k": v ... }` is read
    // as the object `{ "k": v ... }`, the comma overwritten in place.
    text[after_offset] = '{';
    ok = read_suffix(text + after_offset, size_bytes - after_offset, capacity_bytes - after_offset);
    text[after_offset] = ',';
  } else {
    ok = false;
  }
  plan.restore(text);
  if (!ok) return false;
  result_->ok = true;  // chunk 0 held the events array
  mapper_.finish();
  return true;
}

bool Importer::read_first_chunk(const char* text, size_t size_bytes, size_t capacity_bytes,
                                const replay::SplitPlan& plan) {
  const simdjson::padded_string_view padded(text, size_bytes, capacity_bytes);
  simdjson::ondemand::document doc;
  if (parser_.iterate(padded).get(doc)) return false;
  json_type top = json_type::null;
  if (doc.type().get(top)) return false;
  split_doc_ = &doc;
  split_after_offset_ = static_cast<int64_t>(plan.first_close_offset()) + 1;
  split_chunk_size_ = static_cast<int64_t>(size_bytes);
  error_code e = SUCCESS;
  if (plan.root() == replay::RootKind::kObject && top == json_type::object) {
    e = read_top_object(doc);
  } else if (plan.root() == replay::RootKind::kArray && top == json_type::array) {
    simdjson::ondemand::array array;
    e = doc.get_array().get(array);
    if (!e) {
      saw_events_ = true;
      e = read_events_array(array);
    }
  } else {
    e = simdjson::TAPE_ERROR;
  }
  split_doc_ = nullptr;
  const char* trailing = nullptr;
  return !e && split_reached_ && doc.current_location().get(trailing) != SUCCESS;
}

bool Importer::read_suffix(const char* text, size_t size_bytes, size_t capacity_bytes) {
  const simdjson::padded_string_view padded(text, size_bytes, capacity_bytes);
  simdjson::ondemand::document doc;
  if (parser_.iterate(padded).get(doc)) return false;
  if (read_top_object(doc)) return false;
  const char* trailing = nullptr;
  return doc.current_location().get(trailing) != SUCCESS;
}

void Importer::map_chunk(const replay::ChunkRead& chunk) {
  const uint64_t first_index = event_index_;
  for (const replay::PendingEvent& pending : chunk.events) {
    if (pending.is_object) {
      event(pending.raw, first_index + pending.position);
    } else {
      not_object(first_index + pending.position);
    }
  }
  event_index_ = first_index + chunk.element_count;
}

// How many threads to parse a document of `size_bytes` with.
size_t parse_threads(const ImportOptions& options, size_t size_bytes) {
  unsigned threads = options.threads;
  if (threads == 0) {
    const char* env = std::getenv("GPUUTIL_IMPORT_THREADS");
    if (env != nullptr && *env != '\0') threads = static_cast<unsigned>(std::strtoul(env, nullptr, 10));
  }
  if (threads == 0) threads = std::min(kAutoParseThreads, std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, kMaxParseThreads);
  if (threads < 2 || size_bytes < options.parallel_min_bytes) return 1;
  return threads;
}

void import_bytes(replay::TraceBytes& bytes, ImportResult* result, const ImportOptions& options) {
  std::string_view text = bytes.view();
  size_t skip = 0;
  if (text.size() >= 3 && std::memcmp(text.data(), "\xEF\xBB\xBF", 3) == 0) skip = 3;  // UTF-8 BOM
  text = text.substr(skip);
  const size_t threads = parse_threads(options, text.size());
  replay::SplitPlan plan;
  if (threads > 1 && plan.make(text, threads, kFirstChunkShare)) {
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
  return ImportPassCounts{g_split_done.load(std::memory_order_relaxed), g_split_abandoned.load(std::memory_order_relaxed)};
}
}  // namespace replay

ImportResult import_kineto_file(const std::string& path, const ImportOptions& options) {
  ImportResult result;
  result.store.source = path;
  try {
    replay::TraceBytes bytes;
    std::string error;
    if (!replay::read_trace_file(path, &bytes, &error)) {
      fail_unreadable(&result, error);
      return result;
    }
    import_bytes(bytes, &result, options);
  } catch (const std::bad_alloc&) {
    ImportResult failed;
    failed.store.source = path;
    fail_unreadable(&failed, "out of memory while importing " + path);
    return failed;
  }
  return result;
}

ImportResult import_kineto_json(std::string_view json, const std::string& source_name, const ImportOptions& options) {
  ImportResult result;
  result.store.source = source_name;
  try {
    replay::TraceBytes bytes;
    if (replay::looks_like_gzip(json)) {
      std::string error;
      if (!replay::gunzip(json, &bytes, &error)) {
        fail_unreadable(&result, error);
        return result;
      }
    } else if (json.size() > replay::kMaxDocumentBytes) {
      fail_unreadable(&result, "document larger than 4 GiB");
      return result;
    } else {
      bytes.allocate(json.size() + replay::kTracePaddingBytes);
      if (!json.empty()) std::memcpy(bytes.data(), json.data(), json.size());
      bytes.size = json.size();
      std::memset(bytes.data() + json.size(), 0, replay::kTracePaddingBytes);
    }
    import_bytes(bytes, &result, options);
  } catch (const std::bad_alloc&) {
    ImportResult failed;
    failed.store.source = source_name;
    fail_unreadable(&failed, "out of memory while importing " + source_name);
    return failed;
  }
  return result;
}

}  // namespace gpuutil
