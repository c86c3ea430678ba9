// Reading the elements of a traceEvents array, shared by the serial pass
// and the chunk readers of the parallel import, so both see every element
// the same way.
//
// Each element is passed to the sink with its index, the value of
// *element_count before the element is counted (callers number from 0, or
// on across several arrays): an object as sink.event(raw, index) after
// read_event(), anything else as sink.not_object(index). A structural fault
// stops the loop and is returned; `last_element` then points at the last
// element reached (for the error's byte offset). Internal to the
// replay collector.
#pragma once

#include <cstdint>

#include <simdjson.h>

#include "collectors/replay/kineto_event.h"

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

}  // namespace gpuutil::replay
