// Reading one chunk of a split traceEvents array (see event_chunk.h).
#include "collectors/replay/event_chunk.h"

#include <new>

#include "collectors/replay/event_array.h"
#include "collectors/replay/kineto_mapper.h"

namespace gpuutil::replay {

namespace {

// Keeps what the mapper will need, in order.
struct PendingSink {
  std::vector<PendingEvent>* events;
  void event(const RawEvent& raw, uint64_t position) {
    if (KinetoMapper::is_inert(raw)) return;
    events->push_back(PendingEvent{position, true, raw});
  }
  void not_object(uint64_t position) { events->push_back(PendingEvent{position, false, RawEvent{}}); }
};

bool read_chunk(const char* document, size_t begin_offset, size_t end_offset, size_t capacity_bytes,
                bool must_fill_chunk, ChunkRead* out) {
  const char* chunk = document + begin_offset;
  const size_t size_bytes = end_offset - begin_offset;
  const simdjson::padded_string_view padded(chunk, size_bytes, capacity_bytes - begin_offset);
  simdjson::ondemand::document doc;
  if (out->parser.iterate(padded).get(doc)) return false;
  simdjson::ondemand::array array;
  if (doc.get_array().get(array)) return false;
  // A chunk of n bytes holds at most n / 2 events; Kineto's are ~300 bytes.
  out->events.reserve(size_bytes / 512);
  PendingSink sink{&out->events};
  const char* last_element = nullptr;
  if (read_event_array(array, sink, &last_element, &out->element_count)) return false;
  const char* after = nullptr;
  if (doc.current_location().get(after) == simdjson::SUCCESS) {
    if (must_fill_chunk) return false;  // the array closed before the cut
    out->after_array_offset = begin_offset + static_cast<size_t>(after - chunk);
  } else {
    out->after_array_offset = end_offset;
  }
  return true;
}

}  // namespace

void read_event_chunk(const char* document, size_t begin_offset, size_t end_offset, size_t capacity_bytes,
                      bool must_fill_chunk, ChunkRead* out) noexcept {
  try {
    out->ok = read_chunk(document, begin_offset, end_offset, capacity_bytes, must_fill_chunk, out);
  } catch (const std::bad_alloc&) {
    out->ok = false;
  }
  if (!out->ok) out->events.clear();
}

}  // namespace gpuutil::replay
