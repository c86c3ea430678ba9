// The streaming pass of the Kineto import (see importer.h): the document is
// read from a TraceSource into one window of text, which is cut after its
// last event separator (`}` ws `,` ws `{` with a raw newline, as the
// parallel pass cuts; parallel_split.h), turned into a complete JSON
// document in place and parsed, its events mapped, before the window is
// refilled. Memory is one window (plus simdjson's index of it), whatever
// the document's size.
//
//   window 0:  `{ ..."traceEvents": [ e0, .. ek },\n  { ek+1 ...`
//              parsed as `{ ..."traceEvents": [ e0, .. ek }]}`  (chunk 0:
//              the keys before the array and its first events)
//   window i:  `[ { ek+1, .. em },\n  { em+1 ...`   (the tail of the last
//              window moved to the front, its first byte, whitespace,
//              turned into `[`), parsed as `[ { ek+1, .. em }]`
//   last:      `[ { .. en ] , "traceName": ... }`: the root's final `}`
//              becomes `]` for simdjson's root check; the array is read,
//              then the keys after it as an object (`, "k": v }` with the
//              comma overwritten by `{`), as the parallel pass does.
//
// A window with no separator (one event larger than the window, or a
// document on one line) is doubled and filled further; a document that
// ends inside the first window is handed back whole (kWhole). Each piece
// must check out - chunk 0's events array closes exactly on the planted
// `]`, a middle piece's array ends exactly at the cut, the last piece's
// keys parse with nothing after them - or the pass gives up (kAbandoned)
// and the caller reads the document whole with the serial pass, which
// reports the fault (invalid JSON or UTF-8, a separator inside another
// array, trailing bytes). A cut that falls inside a string leaves an odd
// number of quotes in the piece, which simdjson's stage 1 refuses, so no
// such cut is ever taken for valid.
#include <algorithm>
#include <cstring>

#include "collectors/replay/event_array.h"
#include "collectors/replay/importer.h"
#include "collectors/replay/trace_source.h"

namespace gpuutil::replay {

namespace {

// The first bytes are checked before anything is parsed, like
// read_trace_file() does, and the first window holds at least that many.
constexpr size_t kSniffBytes = 4096;
constexpr char kEventsKey[] = "\"traceEvents\"";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Text room in the window (its capacity less the padding).
size_t text_room(const TraceBytes& window) { return window.capacity - kTracePaddingBytes; }

// Reads into the window after its first `*have` bytes until it is full or
// the source ends (`*ended`).
bool fill(TraceSource& source, TraceBytes& window, size_t* have, bool* ended, std::string* error) {
  const size_t room = text_room(window) - *have;
  size_t got = 0;
  if (!source.read(window.data() + *have, room, &got, error)) return false;
  *have += got;
  *ended = got < room;
  return true;
}

// Doubles the window, keeping its first `have` bytes: one piece did not fit.
bool grow(TraceBytes& window, size_t have, std::string* error) {
  const size_t text = text_room(window);
  if (text >= kMaxDocumentBytes) {
    *error = "a stretch of 4 GiB without a boundary between two events: too large to parse";
    return false;
  }
  window.grow(std::min(text * 2, kMaxDocumentBytes) + kTracePaddingBytes, have);
  return true;
}

// Moves the window's bytes from `from` on to its front, `[` over the first
// (whitespace) byte: the next piece's root array.
void carry(TraceBytes& window, size_t from, size_t* have) {
  char* text = window.data();
  std::memmove(text, text + from, *have - from);
  *have -= from;
  text[0] = '[';
}

}  // namespace

StreamOutcome Importer::run_stream(TraceSource& source, TraceBytes& window, size_t window_bytes,
                                   const std::string* not_json_prefix, std::string* error) {
  window.allocate(std::max(window_bytes, kSniffBytes) + kTracePaddingBytes, /*written_once=*/false);
  size_t have = 0;
  bool ended = false;

  // Chunk 0: the root's opening, the keys before traceEvents, first events.
  size_t skip = 0;
  size_t cut = std::string_view::npos;
  RootKind root = RootKind::kObject;
  for (bool first = true;; first = false) {
    if (!fill(source, window, &have, &ended, error)) return StreamOutcome::kSourceFailed;
    const char* text = window.data();
    if (first && not_json_prefix != nullptr && have >= kSniffBytes) {
      std::string why;
      if (!starts_like_json({text, kSniffBytes}, &why)) {
        *error = *not_json_prefix + why;
        return StreamOutcome::kSourceFailed;
      }
    }
    if (ended) {
      window.size = have;
      std::memset(window.data() + have, 0, kTracePaddingBytes);
      return StreamOutcome::kWhole;
    }
    if (first) {
      if (have >= 3 && std::memcmp(text, "\xEF\xBB\xBF", 3) == 0) skip = 3;  // UTF-8 BOM
      size_t open = skip;
      while (open < have && is_space(text[open])) ++open;
      if (open >= have || (text[open] != '{' && text[open] != '[')) return StreamOutcome::kAbandoned;
      root = text[open] == '{' ? RootKind::kObject : RootKind::kArray;
      skip = open;  // whitespace before the root is nobody's business
    }
    // An object root's first cut comes after the traceEvents key, so that
    // a long deviceProperties list before it is not taken for events.
    size_t from = skip + 1;
    if (root == RootKind::kObject) {
      const void* key = memmem(text + skip, have - skip, kEventsKey, sizeof kEventsKey - 1);
      from = key == nullptr ? have : static_cast<size_t>(static_cast<const char*>(key) - text);
    }
    cut = find_last_event_separator({text, have}, from);
    if (cut != std::string_view::npos) break;
    if (!grow(window, have, error)) return StreamOutcome::kSourceFailed;
  }
  char* text = window.data();
  // Object root: `},\n  {` -> `}]}[ {`; array root: `},\n  {` -> `}][  {`.
  text[cut] = ']';
  size_t next = cut + 1;
  if (root == RootKind::kObject) text[next++] = '}';
  text_ = {text + skip, next - skip};
  if (!read_first_chunk(text + skip, next - skip, window.capacity - skip, root, cut - skip)) {
    return StreamOutcome::kAbandoned;
  }
  carry(window, next, &have);

  // Middle pieces: whole events, up to the window's last separator.
  for (;;) {
    if (!fill(source, window, &have, &ended, error)) return StreamOutcome::kSourceFailed;
    if (ended) break;
    text = window.data();
    cut = find_last_event_separator({text, have}, 1);
    if (cut == std::string_view::npos) {
      if (!grow(window, have, error)) return StreamOutcome::kSourceFailed;
      continue;
    }
    text[cut] = ']';
    size_t after = 0;
    if (!read_piece(text, cut + 1, window.capacity, &after)) return StreamOutcome::kAbandoned;
    if (after == cut + 1) {
      carry(window, cut + 1, &have);
      continue;
    }
    // The events array closed inside this piece, and the cut fell in what
    // follows it (a second traceEvents array, deviceProperties after the
    // events): the rest of the root object is read whole.
    text[cut] = ',';
    if (root != RootKind::kObject || text[after] != ',') return StreamOutcome::kAbandoned;
    return read_rest(source, window, after, have, error);
  }
  // The last piece: the last events, the array's own `]`, the keys after it.
  text = window.data();
  std::memset(text + have, 0, kTracePaddingBytes);
  size_t last = have;
  while (last > 1 && is_space(text[last - 1])) --last;
  const size_t root_close = last - 1;
  if (root == RootKind::kObject) {
    if (root_close == 0 || text[root_close] != '}') return StreamOutcome::kAbandoned;
    text[root_close] = ']';
  }
  size_t after = 0;
  const bool read = read_piece(text, have, window.capacity, &after);
  if (root == RootKind::kObject) text[root_close] = '}';
  if (!read) return StreamOutcome::kAbandoned;
  text_ = {text, have};
  if (!read_after_events(text, have, window.capacity, root, after, root == RootKind::kObject ? root_close : have)) {
    return StreamOutcome::kAbandoned;
  }
  result_->ok = true;
  mapper_.finish();
  return StreamOutcome::kDone;
}

StreamOutcome Importer::read_rest(TraceSource& source, TraceBytes& window, size_t from, size_t have,
                                  std::string* error) {
  std::memmove(window.data(), window.data() + from, have - from);
  have -= from;
  for (bool ended = false; !ended;) {
    if (have == text_room(window) && !grow(window, have, error)) return StreamOutcome::kSourceFailed;
    if (!fill(source, window, &have, &ended, error)) return StreamOutcome::kSourceFailed;
  }
  char* text = window.data();
  std::memset(text + have, 0, kTracePaddingBytes);
  // `, "k": v ... }`, read as the object `{ "k": v ... }`.
  text[0] = '{';
  text_ = {text, have};
  if (!read_suffix(text, have, window.capacity)) return StreamOutcome::kAbandoned;
  result_->ok = true;
  mapper_.finish();
  return StreamOutcome::kDone;
}

bool Importer::read_piece(const char* text, size_t size_bytes, size_t capacity_bytes, size_t* after_offset) {
  text_ = {text, size_bytes};
  return read_event_array_document(parser_, text, size_bytes, capacity_bytes, *this, &event_index_, after_offset);
}

}  // namespace gpuutil::replay
