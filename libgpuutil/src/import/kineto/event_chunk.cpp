// Reading one thread's run of pieces of a split traceEvents array (see
// event_chunk.h).
#include "import/kineto/event_chunk.h"

#include <new>

#include "import/kineto/event_array.h"
#include "import/kineto/kineto_mapper.h"

namespace gpuutil::replay {

namespace {

// Keeps what the mapper will need, in order, with every string it points
// to outside the document copied (the parser's string buffer is reused by
// the next piece).
struct PendingSink {
  ChunkRead* out;
  const char* document_begin;
  const char* document_end;

  void keep(std::string_view* s) {
    if (s->empty() || (s->data() >= document_begin && s->data() < document_end)) return;
    *s = out->copies.emplace_back(*s);
  }
  void event(const RawEvent& raw, uint64_t position) {
    if (KinetoMapper::is_inert(raw)) return;
    PendingEvent& pending = out->events.emplace_back(PendingEvent{position, true, raw});
    RawEvent& kept = pending.raw;
    keep(&kept.ph);
    keep(&kept.cat);
    keep(&kept.name);
    keep(&kept.pid.text);
    keep(&kept.tid.text);
    keep(&kept.args.name);
    keep(&kept.args.kind);
  }
  void not_object(uint64_t position) { out->events.push_back(PendingEvent{position, false, RawEvent{}}); }
};

bool read_pieces(const char* document, const SplitPlan& plan, size_t group, size_t capacity_bytes, ChunkRead* out) {
  const size_t first = plan.group_first_piece(group);
  const size_t end = plan.group_end_piece(group);
  const size_t bytes = plan.piece(end - 1).end_offset - plan.piece(first).begin_offset;
  // n bytes hold at most n / 2 events; Kineto's are ~300 bytes.
  out->events.reserve(bytes / 512);
  PendingSink sink{out, document, document + capacity_bytes};
  for (size_t i = first; i < end; ++i) {
    const ChunkSpan span = plan.piece(i);
    size_t after = 0;
    if (!read_event_array_document(out->parser, document + span.begin_offset, span.size_bytes(),
                                   capacity_bytes - span.begin_offset, sink, &out->element_count, &after)) {
      return false;
    }
    const bool last = i + 1 == plan.piece_count();
    if (after < span.size_bytes() && !last) return false;  // the array closed before the cut
    out->after_array_offset = span.begin_offset + after;
  }
  return true;
}

}  // namespace

void read_event_chunk(const char* document, const SplitPlan& plan, size_t group, size_t capacity_bytes,
                      ChunkRead* out) noexcept {
  try {
    out->ok = read_pieces(document, plan, group, capacity_bytes, out);
  } catch (const std::bad_alloc&) {
    out->ok = false;
  }
  if (!out->ok) {
    out->events.clear();
    out->copies.clear();
  }
}

}  // namespace gpuutil::replay
