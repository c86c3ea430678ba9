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
  const size_t size_bytes = end_offset - begin_offset;
  // A chunk of n bytes holds at most n / 2 events; Kineto's are ~300 bytes.
  out->events.reserve(size_bytes / 512);
  PendingSink sink{&out->events};
  size_t after = 0;
  if (!read_event_array_document(out->parser, document + begin_offset, size_bytes, capacity_bytes - begin_offset,
                                 sink, &out->element_count, &after)) {
    return false;
  }
  if (after < size_bytes && must_fill_chunk) return false;  // the array closed before the cut
  out->after_array_offset = begin_offset + after;
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
