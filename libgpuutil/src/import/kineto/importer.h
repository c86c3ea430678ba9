// The Kineto import's passes over a document, feeding one KinetoMapper
// (kineto_import.cpp chooses the pass; docs/trace-import.md has the
// pictures):
//
// - run(): the serial pass, one simdjson On Demand walk over the whole
//   document. Structural faults stop it and become the result's error;
//   invalid UTF-8 is repaired and the document parsed again.
// - run_split() (importer.cpp): the piece pass over the pieces a SplitPlan
//   cuts, one run of pieces per thread; worker threads read runs 1..n-1
//   while this thread reads run 0 and maps; then the workers' events are
//   mapped in order. Each thread reuses one parser for its pieces.
// - run_stream() (stream_pass.cpp): the streaming pass, which reads the
//   document from a TraceSource in windows, cuts each window after its last
//   event separator and maps each piece before reading the next, so only a
//   window of text is held at a time.
//
// With an ImportAccount, every event is followed by a check of what the
// store holds against the memory budget (memory_budget.h); once over it,
// events are no longer stored, a streaming pass stops at once
// (kOverBudget), and over_budget() tells the caller to fail the import.
//
// Every pass shows the mapper exactly the serial sequence of events (with
// their indices) and top-level keys, so names, threads, diagnostics and
// steps come out identical. The split and streaming passes only ever
// succeed on documents the serial pass reads without a fault: anything
// unexpected (a piece that does not parse, a cut that was not between two
// traceEvents elements, trailing bytes) makes them give up, and the caller
// starts over with the serial pass, which reports it.
//
// Internal to the replay collector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "import/kineto/kineto_event.h"
#include "import/kineto/kineto_mapper.h"
#include "import/source/memory_budget.h"
#include "import/kineto/parallel_split.h"
#include "import/source/trace_bytes.h"
#include "gpuutil/kineto_import.h"

namespace gpuutil::replay {

class TraceSource;
class ImportAccount;
class StreamReader;
struct ChunkRead;

// How a streaming pass ended.
enum class StreamOutcome {
  kDone,          // the result is complete
  kWhole,         // the document fitted in the first window (or, from a
                  // source that cannot be read twice, had to be read
                  // whole), now held in `window` (with padding): run a
                  // whole-document pass on it
  kAbandoned,     // a piece did not check out: start over, whole document
  kSourceFailed,  // reading failed (I/O, gzip, not JSON): `error` says why
  kInvalid,       // from a source that cannot be read twice, a piece did
                  // not parse: `error` says where (json_invalid)
  kOverBudget,    // the memory budget would be passed (the account says)
};

class Importer {
 public:
  Importer(ImportResult* result, std::string_view text, ImportAccount* account = nullptr)
      : result_(result), store_(&result->store), mapper_(store_), text_(text), account_(account) {}

  // The serial pass: parses bytes (text_ starts `skip` bytes in) into the
  // store, repairing invalid UTF-8 first when needed.
  void run(TraceBytes& bytes, size_t skip);
  // The piece pass over the pieces `plan` cuts. Returns false when the
  // attempt must be thrown away (the result is then half-filled; the bytes
  // are as they were).
  bool run_split(TraceBytes& bytes, size_t skip, const SplitPlan& plan);
  // The streaming pass. `window` is the buffer it reads into, starting at
  // `window_bytes` (at least 4096; grown when one piece does not fit), and
  // first filled with at least `prefill_bytes` (a source that cannot be
  // read twice: a document under that size is read whole, kWhole); pieces
  // are about `window_bytes` each. With `can_restart`, a piece that does
  // not check out ends the pass (kAbandoned: the caller reads the document
  // again whole); without, the pass words the fault itself (kInvalid).
  // With `not_json_prefix`, a document whose first 4096 bytes do not start
  // like JSON fails at once (kSourceFailed, the prefix before the reason).
  // On any outcome but kDone the result is half-filled and must be
  // discarded.
  StreamOutcome run_stream(TraceSource& source, TraceBytes& window, size_t window_bytes, size_t prefill_bytes,
                           bool can_restart, const std::string* not_json_prefix, std::string* error);

  // Sink for read_event_array().
  void event(const RawEvent& raw, uint64_t index) {
    if (over_budget_) return;
    mapper_.consume(raw, index);
    over_budget_ = account_ != nullptr && !account_->track(*store_);
  }
  void not_object(uint64_t index) {
    store_->diagnostics.add(Diag::event_malformed, 1, "event #" + std::to_string(index) + ": not a JSON object");
  }
  // The memory budget stopped the import (events are no longer stored).
  bool over_budget() const { return over_budget_ || (account_ != nullptr && account_->over()); }
  // Elements of traceEvents read so far.
  uint64_t events_read() const { return event_index_; }

 private:
  // Where a parse stopped and why; `offset` < 0 when unknown.
  struct Fault {
    simdjson::error_code code = simdjson::SUCCESS;
    int64_t offset = -1;
    const char* what = nullptr;  // overrides simdjson's message when set
  };

  simdjson::error_code read_top_object(simdjson::ondemand::document& doc);
  simdjson::error_code read_events(simdjson::ondemand::value& value);
  simdjson::error_code read_events_array(simdjson::ondemand::array& array);
  // Chunk 0 of a split or stream: the document text[0, size_bytes), whose
  // traceEvents array must close exactly on the planted `]` at
  // `close_offset`, with nothing but the planted root close after it.
  bool read_first_chunk(const char* text, size_t size_bytes, size_t capacity_bytes, RootKind root,
                        size_t close_offset);
  // The rest of the document after the last piece's events array, which
  // ended at `after_offset` (text[root_close_offset] is the root's own
  // close, or the piece's end for an array root): nothing, or `, "k": v
  // ... }` read as an object. False when anything else follows.
  bool read_after_events(char* text, size_t size_bytes, size_t capacity_bytes, RootKind root, size_t after_offset,
                         size_t root_close_offset);
  bool read_suffix(const char* text, size_t size_bytes, size_t capacity_bytes);
  // The streaming pass after the events array closed inside a piece: the
  // window's bytes from `from` on - `, "k": v` - and the rest of the source
  // are read whole as the root object's remaining keys.
  StreamOutcome read_rest(StreamReader& in, size_t from);
  // A streamed piece: a root array of events mapped as it is read.
  bool read_piece(const char* text, size_t size_bytes, size_t capacity_bytes, size_t* after_offset);
  // A piece at window offset `pos` did not parse and the pass cannot
  // restart: when none of it was mapped (events from `first_event`
  // on) and its UTF-8 is invalid, repairs it (counted like the serial
  // pass's repair, once per piece) and reads it again. False when that
  // does not help.
  bool retry_piece(StreamReader& in, size_t pos, size_t size_bytes, uint64_t first_event, size_t* after_offset);
  // A piece did not check out: kAbandoned (start over, whole document), or
  // when the pass cannot restart, kInvalid with the error.
  StreamOutcome give_up(StreamReader& in, size_t pos);
  void map_chunk(const ChunkRead& chunk);
  void fail_json(const Fault& fault);
  int64_t offset_of(simdjson::ondemand::document& doc) const;

  ImportResult* result_;
  EventStore* store_;
  KinetoMapper mapper_;
  std::string_view text_;
  ImportAccount* account_;
  bool over_budget_ = false;
  simdjson::ondemand::parser parser_;
  bool saw_events_ = false;
  uint64_t event_index_ = 0;
  int64_t last_event_offset_ = -1;
  // Chunk 0 of a split or stream: the document being walked, and where its
  // events array must end (just after the planted `]`) for the cut to be
  // valid.
  simdjson::ondemand::document* split_doc_ = nullptr;
  int64_t split_after_offset_ = -1;
  int64_t split_chunk_size_ = -1;
  bool split_reached_ = false;
};

}  // namespace gpuutil::replay
