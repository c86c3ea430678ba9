// Single-pass reader of one Chrome-trace event object (see kineto_event.h).
//
// Every key is visited once, in document order; keys are dispatched on their
// first byte and compared unescaped against the literals Kineto writes
// (escaped keys such as "\u0074s" are not recognised). Values are type-
// checked with type(), which only peeks, before a getter consumes them, so a
// wrong type never leaves the iterator in an error state.
#include "import/kineto/kineto_event.h"

#include <cstring>
#include <utility>

#include "import/kineto/decimal_time.h"

namespace gpuutil::replay {

namespace {

using simdjson::error_code;
using simdjson::SUCCESS;
using simdjson::ondemand::json_type;
using simdjson::ondemand::raw_json_string;
using simdjson::ondemand::value;

std::string_view trim_token(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// type() only inspects the first byte; a byte that starts no JSON value is a
// document fault.
error_code peek_type(value& v, json_type* type) noexcept { return v.type().get(*type); }

error_code read_string(value& v, FieldState* state, std::string_view* out) noexcept {
  json_type type;
  if (auto e = peek_type(v, &type)) return e;
  if (type != json_type::string) {
    *state = FieldState::kWrongType;
    return SUCCESS;
  }
  // A string with no escape is its token's bytes between the quotes: a
  // view into the document, no copy into the parser's string buffer (stage 1
  // has validated its UTF-8 and refused unescaped control characters). One
  // with a backslash is unescaped by simdjson into that buffer.
  const std::string_view token = trim_token(v.raw_json_token());
  if (token.size() >= 2 && token.back() == '"' &&
      std::memchr(token.data() + 1, '\\', token.size() - 2) == nullptr) {
    *out = token.substr(1, token.size() - 2);
    *state = FieldState::kOk;
    return SUCCESS;
  }
  const error_code e = v.get_string().get(*out);
  if (e) {
    if (!is_value_error(e)) return e;
    *state = FieldState::kWrongType;
    return SUCCESS;
  }
  *state = FieldState::kOk;
  return SUCCESS;
}

error_code read_number_token(value& v, FieldState* state, std::string_view* out) noexcept {
  json_type type;
  if (auto e = peek_type(v, &type)) return e;
  if (type != json_type::number) {
    *state = FieldState::kWrongType;
    return SUCCESS;
  }
  *out = trim_token(v.raw_json_token());
  *state = FieldState::kOk;
  return SUCCESS;
}

// An integer-valued number ("7", "7.0", "7e0"); anything else leaves `out`
// unset. Fractions are truncated toward zero only when exactly integral.
error_code read_int(value& v, OptionalInt* out) noexcept {
  FieldState state = FieldState::kAbsent;
  std::string_view token;
  if (auto e = read_number_token(v, &state, &token)) return e;
  if (state != FieldState::kOk) return SUCCESS;
  int64_t parsed = 0;
  if (parse_int64(token, &parsed)) {
    out->has = true;
    out->value = parsed;
    return SUCCESS;
  }
  // Non-plain forms: reuse the exact decimal parser (value * 1000) and keep
  // the value only when it is a whole number.
  int64_t milli = 0;
  if (parse_us_to_ns(token, &milli) == DecimalStatus::kOk && milli % 1000 == 0) {
    out->has = true;
    out->value = milli / 1000;
  }
  return SUCCESS;
}

error_code read_double(value& v, bool* has, double* out) noexcept {
  json_type type;
  if (auto e = peek_type(v, &type)) return e;
  if (type != json_type::number) return SUCCESS;
  double d = 0;
  const error_code e = v.get_double().get(d);
  if (e) return is_value_error(e) ? SUCCESS : e;
  *has = true;
  *out = d;
  return SUCCESS;
}

// A pid / tid: integer or string.
error_code read_id(value& v, JsonId* out) noexcept {
  json_type type;
  if (auto e = peek_type(v, &type)) return e;
  if (type == json_type::string) {
    FieldState state = FieldState::kAbsent;
    if (auto e = read_string(v, &state, &out->text)) return e;
    out->state = state;
    out->is_string = true;
    return SUCCESS;
  }
  if (type == json_type::number) {
    OptionalInt i;
    if (auto e = read_int(v, &i)) return e;
    out->state = i.has ? FieldState::kOk : FieldState::kWrongType;
    out->is_string = false;
    out->number = i.value;
    return SUCCESS;
  }
  out->state = FieldState::kWrongType;
  return SUCCESS;
}

// A [x, y, z] launch dimension; fewer elements leave zeros, more are ignored.
error_code read_dim3(value& v, bool* has, int64_t dims[3]) noexcept {
  json_type type;
  if (auto e = peek_type(v, &type)) return e;
  if (type != json_type::array) return SUCCESS;
  simdjson::ondemand::array array;
  if (auto e = v.get_array().get(array)) return e;
  size_t i = 0;
  bool all_ok = true;
  for (auto element : array) {
    value item;
    if (auto e = element.get(item)) return e;
    OptionalInt n;
    if (auto e = read_int(item, &n)) return e;
    if (!n.has || n.value < 0) all_ok = false;
    if (i < 3) dims[i] = n.has ? n.value : 0;
    ++i;
  }
  *has = all_ok && i >= 1;
  if (!*has) dims[0] = dims[1] = dims[2] = 0;
  return SUCCESS;
}

error_code read_args(value& v, EventArgs* args) noexcept {
  json_type type;
  if (auto e = peek_type(v, &type)) return e;
  if (type != json_type::object) {
    args->state = FieldState::kWrongType;
    return SUCCESS;
  }
  args->state = FieldState::kOk;
  simdjson::ondemand::object object;
  if (auto e = v.get_object().get(object)) return e;
  for (auto field_result : object) {
    simdjson::ondemand::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    const raw_json_string key = field.key();
    value& fv = field.value();
    error_code e = SUCCESS;
    FieldState ignored = FieldState::kAbsent;
    switch (key.raw()[0]) {
      case 'b':
        if (key == "bytes") e = read_int(fv, &args->bytes);
        else if (key == "block") e = read_dim3(fv, &args->has_block, args->block);
        break;
      case 'c':
        if (key == "correlation") e = read_int(fv, &args->correlation);
        break;
      case 'd':
        if (key == "device") e = read_int(fv, &args->device);
        break;
      case 'f':
        if (key == "flops") e = read_double(fv, &args->has_flops, &args->flops);
        break;
      case 'g':
        if (key == "grid") e = read_dim3(fv, &args->has_grid, args->grid);
        else if (key == "graph id" || key == "graphId") e = read_int(fv, &args->graph_id);
        break;
      case 'k':
        if (key == "kind") e = read_string(fv, &ignored, &args->kind);
        break;
      case 'n':
        if (key == "name") {
          FieldState state = FieldState::kAbsent;
          e = read_string(fv, &state, &args->name);
          args->has_name = state == FieldState::kOk;
        }
        break;
      case 'r':
        if (key == "registers per thread") e = read_int(fv, &args->registers_per_thread);
        break;
      case 's':
        if (key == "stream") e = read_int(fv, &args->stream);
        else if (key == "shared memory") e = read_int(fv, &args->shared_memory_bytes);
        break;
      case 'S':
        if (key == "Sequence number") e = read_int(fv, &args->sequence);
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return SUCCESS;
}

}  // namespace

bool is_value_error(simdjson::error_code code) noexcept {
  switch (code) {
    case simdjson::INCORRECT_TYPE:
    case simdjson::NUMBER_ERROR:
    case simdjson::NUMBER_OUT_OF_RANGE:
    case simdjson::STRING_ERROR:
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
      return true;
    default:
      return false;
  }
}

simdjson::error_code read_event(simdjson::ondemand::object& object, RawEvent* out) noexcept {
  for (auto field_result : object) {
    simdjson::ondemand::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    const raw_json_string key = field.key();
    value& fv = field.value();
    error_code e = SUCCESS;
    switch (key.raw()[0]) {
      case 'a':
        if (key == "args") e = read_args(fv, &out->args);
        break;
      case 'c':
        if (key == "cat") e = read_string(fv, &out->cat_state, &out->cat);
        break;
      case 'd':
        if (key == "dur") e = read_number_token(fv, &out->dur_state, &out->dur_token);
        break;
      case 'n':
        if (key == "name") e = read_string(fv, &out->name_state, &out->name);
        break;
      case 'p':
        if (key == "ph") e = read_string(fv, &out->ph_state, &out->ph);
        else if (key == "pid") e = read_id(fv, &out->pid);
        break;
      case 't':
        if (key == "ts") e = read_number_token(fv, &out->ts_state, &out->ts_token);
        else if (key == "tid") e = read_id(fv, &out->tid);
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return simdjson::SUCCESS;
}

}  // namespace gpuutil::replay
