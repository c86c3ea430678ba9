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
#include "gpuutil/kineto_import.h"

#include <cstring>
#include <new>
#include <string>
#include <utility>

#include <simdjson.h>

#include "collectors/replay/kineto_event.h"
#include "collectors/replay/kineto_mapper.h"
#include "collectors/replay/kineto_metadata.h"
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

class Importer {
 public:
  Importer(ImportResult* result, std::string_view text) : result_(result), store_(&result->store),
                                                          mapper_(store_), text_(text) {}

  // Parses bytes (text_ starts `skip` bytes in) into the store, repairing
  // invalid UTF-8 first when needed.
  void run(replay::TraceBytes& bytes, size_t skip);

 private:
  error_code read_top_object(simdjson::ondemand::document& doc);
  error_code read_events(simdjson::ondemand::value& value);
  error_code read_events_array(simdjson::ondemand::array& array);
  void fail_json(const Fault& fault);
  int64_t offset_of(simdjson::ondemand::document& doc) const;

  ImportResult* result_;
  EventStore* store_;
  replay::KinetoMapper mapper_;
  std::string_view text_;
  bool saw_events_ = false;
  uint64_t event_index_ = 0;
  int64_t last_event_offset_ = -1;
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
  for (auto element : array) {
    simdjson::ondemand::value value;
    if (auto e = element.get(value)) return e;
    const uint64_t index = event_index_++;
    const char* at = nullptr;
    if (value.current_location().get(at) == SUCCESS) last_event_offset_ = at - text_.data();
    json_type type;
    if (auto e = value.type().get(type)) return e;
    if (type != json_type::object) {
      store_->diagnostics.add(Diag::event_malformed, 1,
                              "event #" + std::to_string(index) + ": not a JSON object");
      continue;
    }
    simdjson::ondemand::object object;
    if (auto e = value.get_object().get(object)) return e;
    replay::RawEvent raw;
    if (auto e = replay::read_event(object, &raw)) return e;
    mapper_.consume(raw, index);
  }
  return SUCCESS;
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
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  error_code parse_error = parser.iterate(padded).get(doc);
  // Any stage-1 failure may be (or hide) invalid UTF-8: repair in place
  // (counted as event_malformed) and parse again. The repair never touches
  // the BOM, which is a valid sequence.
  if (parse_error && replay::repair_utf8(&bytes, &store_->diagnostics) > 0) {
    parse_error = parser.iterate(padded).get(doc);
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

void import_bytes(replay::TraceBytes& bytes, ImportResult* result) {
  std::string_view text = bytes.view();
  size_t skip = 0;
  if (text.size() >= 3 && std::memcmp(text.data(), "\xEF\xBB\xBF", 3) == 0) skip = 3;  // UTF-8 BOM
  Importer importer(result, text.substr(skip));
  importer.run(bytes, skip);
}

void fail_unreadable(ImportResult* result, const std::string& error) {
  result->ok = false;
  result->error = error;
  result->store.diagnostics.add(Diag::input_unreadable, 1, error);
}

}  // namespace

ImportResult import_kineto_file(const std::string& path) {
  ImportResult result;
  result.store.source = path;
  try {
    replay::TraceBytes bytes;
    std::string error;
    if (!replay::read_trace_file(path, &bytes, &error)) {
      fail_unreadable(&result, error);
      return result;
    }
    import_bytes(bytes, &result);
  } catch (const std::bad_alloc&) {
    ImportResult failed;
    failed.store.source = path;
    fail_unreadable(&failed, "out of memory while importing " + path);
    return failed;
  }
  return result;
}

ImportResult import_kineto_json(std::string_view json, const std::string& source_name) {
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
    import_bytes(bytes, &result);
  } catch (const std::bad_alloc&) {
    ImportResult failed;
    failed.store.source = source_name;
    fail_unreadable(&failed, "out of memory while importing " + source_name);
    return failed;
  }
  return result;
}

}  // namespace gpuutil
