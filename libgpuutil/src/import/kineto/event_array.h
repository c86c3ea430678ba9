// Reading the elements of a traceEvents array, shared by the serial pass
// and the chunk readers of the parallel import, so both see every element
// the same way.
//
// Each element is passed to the sink with its index, the value of
// *element_count before the element is counted (callers number from 0, or
// on across several arrays): an object as sink.event(raw, index) after
// read_event(), anything else as sink.not_object(index). A structural fault
// stops the loop and is returned; `last_element` then points at the last
// element reached (for the error's byte offset).
//
// read_event_array_document() reads a whole document that is such an
// array: a chunk of a split or streamed traceEvents array. Internal to the
// replay collector.
#pragma once

#include <cstddef>
#include <cstdint>

#include <simdjson.h>

#include "import/kineto/kineto_event.h"

namespace gpuutil::replay {

template <typename Sink>
simdjson::error_code read_event_array(simdjson::ondemand::array& array, Sink& sink, const char** last_element,
                                      uint64_t* element_count) {
  using simdjson::SUCCESS;
  using simdjson::ondemand::json_type;
  for (auto element : array) {
    simdjson::ondemand::value value;
    if (auto e = element.get(value)) return e;
    const uint64_t index = (*element_count)++;
    const char* at = nullptr;
    if (value.current_location().get(at) == SUCCESS) *last_element = at;
    json_type type;
    if (auto e = value.type().get(type)) return e;
    if (type != json_type::object) {
      sink.not_object(index);
      continue;
    }
    simdjson::ondemand::object object;
    if (auto e = value.get_object().get(object)) return e;
    RawEvent raw;
    if (auto e = read_event(object, &raw)) return e;
    sink.event(raw, index);
  }
  return SUCCESS;
}

// Reads the document text[0, size_bytes), a root array of events
// (`capacity_bytes` >= size_bytes + SIMDJSON_PADDING bytes from `text` are
// readable), with `parser`. On success `*after_offset` is the offset of
// the first structural byte after the array's closing `]`, or size_bytes
// when nothing follows it. False on any parse or structure fault.
template <typename Sink>
bool read_event_array_document(simdjson::ondemand::parser& parser, const char* text, size_t size_bytes,
                               size_t capacity_bytes, Sink& sink, uint64_t* element_count, size_t* after_offset) {
  const simdjson::padded_string_view padded(text, size_bytes, capacity_bytes);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc)) return false;
  simdjson::ondemand::array array;
  if (doc.get_array().get(array)) return false;
  const char* last_element = nullptr;
  if (read_event_array(array, sink, &last_element, element_count)) return false;
  const char* after = nullptr;
  *after_offset = doc.current_location().get(after) == simdjson::SUCCESS ? static_cast<size_t>(after - text)
                                                                          : size_bytes;
  return true;
}

}  // namespace gpuutil::replay
