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
// document on one line) is doubled and filled further, as far as the
// memory budget allows; a document that ends inside the first window is
// handed back whole (kWhole). A window holding more than one piece's worth
// (a source that cannot be read twice is first read up to the size below
// which documents are read whole) is cut into pieces of about the window
// size in place, then the rest moved to the front and the window shrunk
// back. Whitespace outside strings is never held beyond 64 bytes in a row
// (the rest of a run is dropped as it is read; JSON does not see the
// difference), so gigabytes of padding keep memory flat.
//
// Each piece must check out - chunk 0's events array closes exactly on the
// planted `]`, a middle piece's array ends exactly at the cut, the last
// piece's keys parse with nothing after them - or the pass gives up
// (kAbandoned) and the caller reads the document whole with the serial
// pass, which reports the fault (invalid JSON or UTF-8, a separator inside
// another array, trailing bytes). A source that cannot be read twice (a
// pipe), or a file too large to be read whole within the memory budget,
// cannot start over: a fault in chunk 0 reads the rest into the
// window and hands it back whole; later, a piece with invalid UTF-8 is
// repaired and read again, and anything else is reported where it was
// found (kInvalid). A cut that falls inside a string leaves an odd number
// of quotes in its piece, which simdjson's stage 1 refuses, so no such cut
// is ever taken for valid.
#include <algorithm>
#include <cstring>

#include "import/kineto/event_array.h"
#include "import/kineto/importer.h"
#include "import/source/trace_source.h"
#include "import/kineto/utf8_repair.h"

namespace gpuutil::replay {

namespace {

// The first bytes are checked before anything is parsed, like
// read_trace_file() does, and the first window holds at least that many.
constexpr size_t kSniffBytes = 4096;
constexpr char kEventsKey[] = "\"traceEvents\"";
// Whitespace outside strings kept in a row; the rest of a run is dropped.
constexpr size_t kKeptSpaceBytes = 64;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

// The window: filled from the source, grown and shrunk within the memory
// budget, with long runs of whitespace dropped as they arrive.
class StreamReader {
 public:
  StreamReader(TraceSource& source, TraceBytes& window, bool can_restart, ImportAccount* account, std::string* error)
      : source_(source), window_(window), account_(account), error_(error), can_restart_(can_restart) {}

  char* text() const { return window_.data(); }
  size_t have() const { return have_; }
  bool ended() const { return ended_; }
  size_t capacity() const { return window_.capacity; }
  // The caller can read the document again whole (a file that fits the
  // budget): faults are left to the whole-document pass.
  bool can_restart() const { return can_restart_; }
  bool file() const { return source_.rewindable(); }
  std::string* error() const { return error_; }
  // Why the last call returned false.
  StreamOutcome failure() const { return over_budget_ ? StreamOutcome::kOverBudget : StreamOutcome::kSourceFailed; }

  bool allocate(size_t text_bytes) {
    if (!charge(text_bytes + kTracePaddingBytes)) return false;
    window_.allocate(text_bytes + kTracePaddingBytes, /*written_once=*/false);
    return true;
  }

  // Reads until the window is full or the source ends.
  bool fill() {
    while (!ended_ && have_ < room()) {
      const size_t want = room() - have_;
      size_t got = 0;
      if (!source_.read(text() + have_, want, &got, error_)) return false;
      have_ += got;
      ended_ = got < want;
      squeeze();
    }
    return true;
  }

  // Doubles the window, keeping what it holds: one piece did not fit.
  bool grow() {
    const size_t text_bytes = room();
    if (text_bytes >= kMaxDocumentBytes) {
      *error_ = "a stretch of 4 GiB without a boundary between two events: too large to parse";
      return false;
    }
    const size_t bytes = std::min(text_bytes * 2, kMaxDocumentBytes) + kTracePaddingBytes;
    if (!charge(bytes - window_.capacity)) return false;
    window_.grow(bytes, have_);
    return true;
  }

  // Moves the bytes from `from` on to the front.
  void compact(size_t from) {
    if (from == 0) return;
    std::memmove(text(), text() + from, have_ - from);
    have_ -= from;
    dropped_before_ += from;
    scanned_ = 0;
    in_string_ = escape_ = false;
    run_start_ = kNone;
  }

  // Shrinks a window that grew (a long first fill) back to `text_bytes`
  // when what it holds fits.
  void fit(size_t text_bytes) {
    if (window_.capacity <= 2 * (text_bytes + kTracePaddingBytes) || have_ > text_bytes) return;
    const size_t before = window_.capacity;
    window_.grow(text_bytes + kTracePaddingBytes, have_);
    if (account_ != nullptr) account_->release_buffer(before - window_.capacity);
  }

  // The window as a whole document (padded): kWhole.
  StreamOutcome whole() {
    window_.size = have_;
    std::memset(text() + have_, 0, kTracePaddingBytes);
    return StreamOutcome::kWhole;
  }

  // Reads the rest of the source into the window (growing it).
  bool read_all() {
    while (!ended_) {
      if (have_ == room() && !grow()) return false;
      if (!fill()) return false;
    }
    return true;
  }

  // Where window offset `pos` was in the stream (whitespace dropped before
  // it not counted): for messages.
  uint64_t stream_offset(size_t pos) const { return dropped_before_ + pos; }

 private:
  static constexpr size_t kNone = static_cast<size_t>(-1);

  size_t room() const { return window_.capacity - kTracePaddingBytes; }

  bool charge(size_t bytes) {
    if (account_ == nullptr || account_->charge_buffer(bytes)) return true;
    over_budget_ = true;
    return false;
  }

  // Drops a run of whitespace at the window's end beyond kKeptSpaceBytes,
  // when it lies outside strings. Scans (once per byte) only when the
  // window ends in such a run, which Kineto's layout never has.
  void squeeze() {
    if (have_ <= kKeptSpaceBytes) return;
    for (size_t i = have_ - kKeptSpaceBytes - 1; i < have_; ++i) {
      if (!is_space(text()[i])) return;
    }
    const char* t = text();
    for (; scanned_ < have_; ++scanned_) {
      const char c = t[scanned_];
      if (in_string_) {
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
        continue;
      }
      if (is_space(c)) {
        if (run_start_ == kNone) run_start_ = scanned_;
        continue;
      }
      run_start_ = kNone;
      in_string_ = c == '"';
    }
    if (in_string_ || run_start_ == kNone || have_ - run_start_ <= kKeptSpaceBytes) return;
    have_ = run_start_ + kKeptSpaceBytes;
    scanned_ = have_;
  }

  TraceSource& source_;
  TraceBytes& window_;
  ImportAccount* account_;
  std::string* error_;
  bool can_restart_;
  size_t have_ = 0;
  bool ended_ = false;
  bool over_budget_ = false;
  uint64_t dropped_before_ = 0;
  // The squeeze's scan: up to where, and its state there.
  size_t scanned_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  size_t run_start_ = kNone;
};

StreamOutcome Importer::run_stream(TraceSource& source, TraceBytes& window, size_t window_bytes,
                                   size_t prefill_bytes, bool can_restart, const std::string* not_json_prefix,
                                   std::string* error) {
  StreamReader in(source, window, can_restart, account_, error);
  const size_t piece_bytes = std::max(window_bytes, kSniffBytes);
  if (!in.allocate(piece_bytes)) return in.failure();
  if (!in.fill()) return in.failure();
  if (not_json_prefix != nullptr && in.have() >= kSniffBytes) {
    std::string why;
    if (!starts_like_json({in.text(), kSniffBytes}, &why)) {
      *error = *not_json_prefix + why;
      return StreamOutcome::kSourceFailed;
    }
  }
  while (!in.ended() && in.have() < prefill_bytes) {
    if (!in.grow() || !in.fill()) return in.failure();
  }
  if (in.ended()) return in.whole();

  // Chunk 0: the root's opening, the keys before traceEvents, first events.
  size_t skip = 0;
  if (in.have() >= 3 && std::memcmp(in.text(), "\xEF\xBB\xBF", 3) == 0) skip = 3;  // UTF-8 BOM
  while (skip < in.have() && is_space(in.text()[skip])) ++skip;  // nobody's business
  if (skip >= in.have() || (in.text()[skip] != '{' && in.text()[skip] != '[')) {
    // Not a document this pass reads: the whole-document pass words it.
    if (in.can_restart()) return StreamOutcome::kAbandoned;
    return in.read_all() ? in.whole() : in.failure();
  }
  const RootKind root = in.text()[skip] == '{' ? RootKind::kObject : RootKind::kArray;
  size_t cut = std::string_view::npos;
  for (;;) {
    const char* text = in.text();
    const size_t have = in.have();
    // An object root's first cut comes after the traceEvents key, so that
    // a long deviceProperties list before it is not taken for events.
    size_t from = skip + 1;
    if (root == RootKind::kObject) {
      const void* key = memmem(text + skip, have - skip, kEventsKey, sizeof kEventsKey - 1);
      from = key == nullptr ? have : static_cast<size_t>(static_cast<const char*>(key) - text);
    }
    if (from < have) {
      cut = find_last_event_separator({text, std::min(have, from + piece_bytes)}, from);
      if (cut == std::string_view::npos) cut = find_last_event_separator({text, have}, from);
    }
    if (cut != std::string_view::npos) break;
    if (in.ended()) return in.whole();
    if (!in.grow() || !in.fill()) return in.failure();
  }
  char* text = in.text();
  // Object root: `},\n  {` -> `}]}[ {`; array root: `},\n  {` -> `}][  {`.
  const char saved[2] = {text[cut], text[cut + 1]};
  text[cut] = ']';
  size_t next = cut + 1;
  if (root == RootKind::kObject) text[next++] = '}';
  text_ = {text + skip, next - skip};
  if (!read_first_chunk(text + skip, next - skip, in.capacity() - skip, root, cut - skip)) {
    if (over_budget()) return StreamOutcome::kOverBudget;
    if (in.can_restart()) return StreamOutcome::kAbandoned;
    // Nothing is lost yet: the whole-document pass reads it all.
    text[cut] = saved[0];
    text[cut + 1] = saved[1];
    return in.read_all() ? in.whole() : in.failure();
  }
  if (over_budget()) return StreamOutcome::kOverBudget;

  // Middle pieces: whole events, cut about every piece_bytes.
  size_t pos = next;
  text[pos] = '[';
  for (;;) {
    for (;;) {
      text = in.text();
      const size_t have = in.have();
      const std::string_view rest(text + pos, have - pos);
      cut = find_last_event_separator(rest.substr(0, piece_bytes), 1);
      if (cut == std::string_view::npos && rest.size() > piece_bytes) cut = find_last_event_separator(rest, 1);
      if (cut == std::string_view::npos) break;
      text[pos + cut] = ']';
      size_t after = 0;
      const uint64_t first_event = event_index_;
      if (!read_piece(text + pos, cut + 1, in.capacity() - pos, &after)) {
        if (over_budget()) return StreamOutcome::kOverBudget;
        if (in.can_restart() || !retry_piece(in, pos, cut + 1, first_event, &after)) return give_up(in, pos);
      }
      if (over_budget()) return StreamOutcome::kOverBudget;
      if (after == cut + 1) {
        pos += cut + 1;
        text[pos] = '[';
        continue;
      }
      // The events array closed inside this piece, and the cut fell in what
      // follows it (a second traceEvents array, deviceProperties after the
      // events): the rest of the root object is read whole.
      text[pos + cut] = ',';
      if (root != RootKind::kObject || text[pos + after] != ',') return give_up(in, pos);
      return read_rest(in, pos + after);
    }
    if (in.ended()) break;
    in.compact(pos);
    pos = 0;
    in.fit(piece_bytes);
    // A full window without a separator: one event larger than it.
    if (in.have() + kTracePaddingBytes == in.capacity() && !in.grow()) return in.failure();
    if (!in.fill()) return in.failure();
  }
  // The last piece: the last events, the array's own `]`, the keys after it.
  text = in.text() + pos;
  const size_t size = in.have() - pos;
  std::memset(text + size, 0, kTracePaddingBytes);
  size_t last = size;
  while (last > 1 && is_space(text[last - 1])) --last;
  const size_t root_close = last - 1;
  if (root == RootKind::kObject) {
    if (root_close == 0 || text[root_close] != '}') return give_up(in, pos);
    text[root_close] = ']';
  }
  size_t after = 0;
  const uint64_t first_event = event_index_;
  bool read = read_piece(text, size, in.capacity() - pos, &after);
  if (!read && !in.can_restart() && !over_budget()) read = retry_piece(in, pos, size, first_event, &after);
  if (root == RootKind::kObject) text[root_close] = '}';
  if (over_budget()) return StreamOutcome::kOverBudget;
  if (!read) return give_up(in, pos);
  text_ = {text, size};
  if (!read_after_events(text, size, in.capacity() - pos, root, after,
                         root == RootKind::kObject ? root_close : size)) {
    return give_up(in, pos);
  }
  result_->ok = true;
  mapper_.finish();
  return StreamOutcome::kDone;
}

StreamOutcome Importer::read_rest(StreamReader& in, size_t from) {
  in.compact(from);
  if (!in.read_all()) return in.failure();
  char* text = in.text();
  const size_t have = in.have();
  std::memset(text + have, 0, kTracePaddingBytes);
  // `, "k": v ... }`, read as the object `{ "k": v ... }`.
  text[0] = '{';
  text_ = {text, have};
  if (!read_suffix(text, have, in.capacity())) return give_up(in, 0);
  result_->ok = true;
  mapper_.finish();
  return StreamOutcome::kDone;
}

bool Importer::read_piece(const char* text, size_t size_bytes, size_t capacity_bytes, size_t* after_offset) {
  text_ = {text, size_bytes};
  return read_event_array_document(parser_, text, size_bytes, capacity_bytes, *this, &event_index_, after_offset);
}

bool Importer::retry_piece(StreamReader& in, size_t pos, size_t size_bytes, uint64_t first_event,
                           size_t* after_offset) {
  // simdjson checks UTF-8 before it hands over a single element, so a
  // piece refused for it has mapped nothing and can be read again.
  char* text = in.text() + pos;
  if (event_index_ != first_event || simdjson::validate_utf8(text, size_bytes)) return false;
  TraceBytes piece;  // the piece, for repair_utf8; not owned
  piece.storage = text;
  piece.capacity = size_bytes;
  piece.size = size_bytes;
  const size_t replaced = repair_utf8(&piece, &store_->diagnostics);
  piece.storage = nullptr;
  piece.capacity = piece.size = 0;
  return replaced > 0 && read_piece(text, size_bytes, in.capacity() - pos, after_offset);
}

StreamOutcome Importer::give_up(StreamReader& in, size_t pos) {
  if (in.can_restart()) return StreamOutcome::kAbandoned;
  *in.error() = "invalid JSON in the trace at or after byte " + std::to_string(in.stream_offset(pos)) +
                (in.file() ? " (the exact fault needs the document read whole: pass max_memory above its size)"
                           : " (a pipe is read once: save it to a file to see the exact fault)");
  return StreamOutcome::kInvalid;
}

}  // namespace gpuutil::replay
