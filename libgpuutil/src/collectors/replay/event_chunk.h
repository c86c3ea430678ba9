// One chunk of a split traceEvents array (parallel_split.h), read on a
// worker thread into a list of events for the mapper to consume later, in
// order, on the importing thread.
//
// The chunk owns its simdjson parser: the events' string views point into
// the parser's string buffer or the document, so a ChunkRead must outlive
// the consumption of its events. Events the mapper would ignore without a
// trace (flow arrows, instants, known-unused categories;
// KinetoMapper::is_inert) are counted but not kept. Anything unexpected
// (a parse error, an array that does not end where the chunk says it
// should) leaves `ok` false; the caller then discards every chunk and runs
// the serial pass, which reports the fault. Internal to the replay
// collector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <simdjson.h>

#include "collectors/replay/kineto_event.h"

namespace gpuutil::replay {

struct PendingEvent {
  uint64_t position = 0;    // in the chunk's array, from 0
  bool is_object = true;    // false: the element was not a JSON object
  RawEvent raw;             // when is_object
};

struct ChunkRead {
  simdjson::ondemand::parser parser;
  std::vector<PendingEvent> events;
  uint64_t element_count = 0;  // every element, kept or not
  // Offset (in the document) of the first structural byte after the array's
  // closing `]`; equal to the chunk's end when nothing follows.
  size_t after_array_offset = 0;
  bool ok = false;
};

// Reads the chunk [begin_offset, end_offset) of `document`, a root array of
// events; `capacity_bytes` bytes from `document` on are readable (at least
// SIMDJSON_PADDING past end_offset). `must_fill_chunk`: the array must end
// on the chunk's last byte (every chunk but the last). Never throws.
void read_event_chunk(const char* document, size_t begin_offset, size_t end_offset, size_t capacity_bytes,
                      bool must_fill_chunk, ChunkRead* out) noexcept;

}  // namespace gpuutil::replay
