// The serial and parallel passes of the Kineto import (see importer.h).
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
// The parallel pass cuts the traceEvents array into pieces, in one run
// per thread (parallel_split.h): worker threads read runs 1..n-1
// (event_chunk.h) while this thread reads run 0 - the top-level keys before
// the first cut and the first events - mapping as it goes. It then maps
// the workers' events in order and reads the top-level keys after the
// array. With one thread the same pass reads the pieces one after another,
// with one parser.
#include "import/kineto/importer.h"

#include <functional>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "import/kineto/event_array.h"
#include "import/kineto/event_chunk.h"
#include "import/kineto/kineto_metadata.h"
#include "import/kineto/utf8_repair.h"

namespace gpuutil::replay {

using simdjson::error_code;
using simdjson::SUCCESS;
using simdjson::ondemand::json_type;

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
  const error_code e = read_event_array(array, *this, &last_element, &event_index_);
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
      e = read_device_properties(value, &store_->devices, &malformed);
      if (malformed > 0) {
        store_->diagnostics.add(Diag::device_properties_malformed, malformed,
                                "deviceProperties entry or field of the wrong type");
      }
    } else if (key == "distributedInfo") {
      bool has_rank = false;
      int32_t rank = 0;
      e = read_distributed_info(value, &has_rank, &rank);
      if (has_rank) store_->rank = rank;
    } else if (key == "roctracer_version" || key == "hip_runtime_version" || key == "hip_driver_version") {
      mapper_.mark_rocm();
    }
    if (e) return e;
  }
  return SUCCESS;
}

namespace {

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

}  // namespace

void Importer::run(TraceBytes& bytes, size_t skip) {
  const simdjson::padded_string_view padded(bytes.data() + skip, bytes.size - skip, bytes.capacity - skip);
  simdjson::ondemand::document doc;
  error_code parse_error = parser_.iterate(padded).get(doc);
  // Any stage-1 failure may be (or hide) invalid UTF-8: repair in place
  // (counted as event_malformed) and parse again. The repair never touches
  // the BOM, which is a valid sequence.
  if (parse_error && repair_utf8(&bytes, &store_->diagnostics) > 0) {
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

namespace {

// Joins every thread when leaving scope, whatever way.
struct JoinAll {
  std::vector<std::thread>* threads;
  ~JoinAll() {
    for (std::thread& t : *threads) {
      if (t.joinable()) t.join();
    }
  }
};

}  // namespace

bool Importer::run_split(TraceBytes& bytes, size_t skip, const SplitPlan& plan) {
  char* text = bytes.data() + skip;
  const size_t capacity_bytes = bytes.capacity - skip;
  const size_t groups = plan.group_count();
  plan.plant(text);
  std::vector<std::unique_ptr<ChunkRead>> reads;
  std::vector<std::thread> threads;
  size_t after_offset = 0;
  bool ok = true;
  {
    const JoinAll join{&threads};
    try {
      for (size_t g = 1; g < groups; ++g) reads.push_back(std::make_unique<ChunkRead>());
      threads.reserve(groups - 1);
      for (size_t g = 1; g < groups; ++g) {
        threads.emplace_back(read_event_chunk, text, std::cref(plan), g, capacity_bytes, reads[g - 1].get());
      }
    } catch (const std::system_error&) {
      ok = false;  // no thread to be had: the serial pass will do
    }
    // This thread's pieces: the first holds the keys before the events
    // array; each is mapped as it is read.
    if (ok) {
      ok = read_first_chunk(text, plan.piece(0).size_bytes(), capacity_bytes, plan.root(), plan.first_close_offset());
    }
    for (size_t i = 1; ok && i < plan.group_end_piece(0); ++i) {
      const ChunkSpan span = plan.piece(i);
      size_t after = 0;
      ok = read_piece(text + span.begin_offset, span.size_bytes(), capacity_bytes - span.begin_offset, &after) &&
           (after == span.size_bytes() || i + 1 == plan.piece_count());
      after_offset = span.begin_offset + after;
    }
  }
  for (const auto& read : reads) ok = ok && read->ok;
  if (!ok) {
    plan.restore(text);
    return false;
  }
  if (!reads.empty()) after_offset = reads.back()->after_array_offset;
  for (auto& read : reads) {
    map_chunk(*read);
    read.reset();  // its parser and events are no longer needed
  }
  plan.restore_root_close(text);
  ok = read_after_events(text, plan.piece(plan.piece_count() - 1).end_offset, capacity_bytes, plan.root(),
                         after_offset, plan.root_close_offset());
  plan.restore(text);
  if (!ok) return false;
  result_->ok = true;  // piece 0 held the events array
  mapper_.finish();
  return true;
}

bool Importer::read_first_chunk(const char* text, size_t size_bytes, size_t capacity_bytes, RootKind root,
                                size_t close_offset) {
  const simdjson::padded_string_view padded(text, size_bytes, capacity_bytes);
  simdjson::ondemand::document doc;
  if (parser_.iterate(padded).get(doc)) return false;
  json_type top = json_type::null;
  if (doc.type().get(top)) return false;
  split_doc_ = &doc;
  split_after_offset_ = static_cast<int64_t>(close_offset) + 1;
  split_chunk_size_ = static_cast<int64_t>(size_bytes);
  error_code e = SUCCESS;
  if (root == RootKind::kObject && top == json_type::object) {
    e = read_top_object(doc);
  } else if (root == RootKind::kArray && top == json_type::array) {
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

bool Importer::read_after_events(char* text, size_t size_bytes, size_t capacity_bytes, RootKind root,
                                 size_t after_offset, size_t root_close_offset) {
  if (root == RootKind::kArray) return after_offset == size_bytes;  // nothing may follow a root array
  if (after_offset == root_close_offset) return true;                 // traceEvents was the last key
  if (after_offset >= size_bytes || text[after_offset] != ',') return false;
  // The top-level keys after the events array: `, "k": v ... }` is read as
  // the object `{ "k": v ... }`, the comma overwritten in place.
  text[after_offset] = '{';
  const bool ok = read_suffix(text + after_offset, size_bytes - after_offset, capacity_bytes - after_offset);
  text[after_offset] = ',';
  return ok;
}

bool Importer::read_suffix(const char* text, size_t size_bytes, size_t capacity_bytes) {
  const simdjson::padded_string_view padded(text, size_bytes, capacity_bytes);
  simdjson::ondemand::document doc;
  if (parser_.iterate(padded).get(doc)) return false;
  if (read_top_object(doc)) return false;
  const char* trailing = nullptr;
  return doc.current_location().get(trailing) != SUCCESS;
}

void Importer::map_chunk(const ChunkRead& chunk) {
  const uint64_t first_index = event_index_;
  for (const PendingEvent& pending : chunk.events) {
    if (pending.is_object) {
      event(pending.raw, first_index + pending.position);
    } else {
      not_object(first_index + pending.position);
    }
  }
  event_index_ = first_index + chunk.element_count;
}

}  // namespace gpuutil::replay
