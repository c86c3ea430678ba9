// One Chrome-trace event object read into flat fields, in a single
// forward-only pass over its keys.
//
// simdjson's On Demand API reads each value once and in document order, and
// the key order inside Kineto events differs between vintages ("ph" first or
// "name" first, "args" last or not). So the reader visits every key once,
// keeps the fields the importer uses (string views into the parser's buffers
// or the input, valid while the document is alive), and leaves every
// decision to the mapper. Number fields "ts" and "dur" are kept as their raw
// token text so they can be converted exactly. Internal to the replay
// collector.
#pragma once

#include <cstdint>
#include <string_view>

#include <simdjson.h>

namespace gpuutil::replay {

// Whether a field was seen and had the expected JSON type.
enum class FieldState : uint8_t { kAbsent, kOk, kWrongType };

// A pid or tid: Kineto writes ints, numeric strings ("5555") or labels
// ("stream 7", "Spans").
struct JsonId {
  FieldState state = FieldState::kAbsent;
  bool is_string = false;
  int64_t number = 0;     // when !is_string
  std::string_view text;  // when is_string
};

struct OptionalInt {
  bool has = false;
  int64_t value = 0;
};

// The "args" keys the importer uses; the rest are skipped unread.
struct EventArgs {
  FieldState state = FieldState::kAbsent;  // kWrongType: args was not an object
  OptionalInt device;
  OptionalInt stream;
  OptionalInt correlation;
  OptionalInt registers_per_thread;
  OptionalInt shared_memory_bytes;
  OptionalInt graph_id;
  OptionalInt bytes;
  OptionalInt sequence;  // "Sequence number": the op ran under autograd (grad mode on)
  bool has_grid = false;
  bool has_block = false;
  int64_t grid[3] = {0, 0, 0};
  int64_t block[3] = {0, 0, 0};
  bool has_flops = false;
  double flops = 0;
  std::string_view name;  // metadata events: thread / process name
  bool has_name = false;
  std::string_view kind;  // ROCm memcpy args: "HtoD", ...
};

struct RawEvent {
  FieldState ph_state = FieldState::kAbsent;
  FieldState cat_state = FieldState::kAbsent;
  FieldState name_state = FieldState::kAbsent;
  FieldState ts_state = FieldState::kAbsent;
  FieldState dur_state = FieldState::kAbsent;
  std::string_view ph;
  std::string_view cat;
  std::string_view name;
  std::string_view ts_token;   // raw JSON number text, microseconds
  std::string_view dur_token;  // raw JSON number text, microseconds
  JsonId pid;
  JsonId tid;
  EventArgs args;
};

// Reads one event object. Returns a non-SUCCESS code only for errors that
// make the rest of the document unreadable (structural JSON faults); a value
// of the wrong type or an unparsable scalar just marks that field.
simdjson::error_code read_event(simdjson::ondemand::object& object, RawEvent* out) noexcept;

// True for simdjson errors that a caller may treat as "this value is
// unusable" rather than "the document is broken".
bool is_value_error(simdjson::error_code code) noexcept;

}  // namespace gpuutil::replay
