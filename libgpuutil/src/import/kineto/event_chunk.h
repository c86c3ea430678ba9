// One thread's run of pieces of a split traceEvents array (parallel_split.h),
// read on a worker thread into a list of events for the mapper to consume
// later, in order, on the importing thread.
//
// The pieces are read one after another with the run's one simdjson
// parser, so each piece's index reuses the memory of the one before. The
// events' string views point into the document (strings without escapes,
// read in place) or into the run's own copies (unescaped strings, which the
// parser writes into a buffer the next piece reuses), so a ChunkRead and
// the document must outlive the consumption of its events. Events the
// mapper would ignore without a trace (flow arrows, instants, known-unused
// categories; KinetoMapper::is_inert) are counted but not kept. Anything
// unexpected (a parse error, an array that does not end where its piece
// says it should) leaves `ok` false; the caller then discards every run and
// runs the serial pass, which reports the fault. Internal to the replay
// collector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <simdjson.h>

#include "import/kineto/kineto_event.h"
#include "import/kineto/parallel_split.h"

namespace gpuutil::replay {

struct PendingEvent {
  uint64_t position = 0;    // in the run's elements, from 0
  bool is_object = true;    // false: the element was not a JSON object
  RawEvent raw;             // when is_object
};

struct ChunkRead {
  simdjson::ondemand::parser parser;
  std::vector<PendingEvent> events;
  std::deque<std::string> copies;  // unescaped strings the kept events point into
  uint64_t element_count = 0;      // every element, kept or not
  // Offset (in the document) of the first structural byte after the last
  // piece's closing `]`; equal to that piece's end when nothing follows.
  size_t after_array_offset = 0;
  bool ok = false;
};

// Reads group `group` of `plan`'s pieces of `document` (planted): each a
// root array of events; `capacity_bytes` bytes from `document` on are
// readable (at least SIMDJSON_PADDING past the last piece). Every piece but
// the plan's last must be filled by its array. Never throws.
void read_event_chunk(const char* document, const SplitPlan& plan, size_t group, size_t capacity_bytes,
                      ChunkRead* out) noexcept;

}  // namespace gpuutil::replay
