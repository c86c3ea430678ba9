// Cutting a trace document into pieces that simdjson can parse on their own,
// so the traceEvents array can be read on several threads, each thread
// reading its run of pieces with one reused parser (kineto_import.cpp
// drives it; docs/trace-import.md has the picture).
//
// A cut goes between two events, at a separator `}` ws `,` ws `{` whose
// whitespace after the comma holds a raw newline and at least two bytes
// (Kineto writes `},\n  {`). Raw newlines cannot occur inside JSON strings,
// so in a valid document such a separator is never inside a string; in an
// invalid one the piece parses fail and the caller falls back to the serial
// pass. A cut overwrites the comma and the bytes after it in place (no copy
// of the document), turning each piece into a complete document:
//
//   object root:  `{ ..."traceEvents": [ e0, .. ek },\n  { ek+1, .. en ] ...}`
//     piece 0     `{ ..."traceEvents": [ e0, .. ek }]}`     comma -> `]}`
//     piece i>0   `[ { ek+1, ..                            ws -> `[`
//     last piece  `[ { .. en ] , "traceName": ... ]`  the document's final
//                 `}` -> `]` so simdjson's root check (the last structural
//                 character closes the root) passes; its reader stops at the
//                 events array's own `]` and reports where the rest begins.
//   array root:   comma -> `]`, the next byte -> `[`.
//
// restore() puts every byte back. Whether a cut really fell between two
// elements of the traceEvents array is not known here: the piece readers
// check it (each piece's array must end exactly where its view ends).
// Internal to the replay collector.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <vector>

namespace gpuutil::replay {

enum class RootKind { kObject, kArray };

// A byte range [begin_offset, end_offset) of the document.
struct ChunkSpan {
  size_t begin_offset = 0;
  size_t end_offset = 0;
  size_t size_bytes() const { return end_offset - begin_offset; }
};

class SplitPlan {
 public:
  // Plans the cuts of `text`: `groups` runs of consecutive pieces, one per
  // thread (group 0 ends near `first_share` of the document, the others
  // share the rest equally), each cut further into pieces of about
  // `piece_bytes` (0: one piece per group). A thread reads its pieces one
  // after another with one parser, whose index of a piece stays in cache
  // and whose memory is touched once, not once per byte of the document.
  // Cuts with no separator near their target are dropped; group 0's pieces
  // are cut only after the "traceEvents" key. Returns false (and plans
  // nothing) when the document cannot be cut at all: fewer than two
  // pieces, a root that is not an object or array, or an object root whose
  // last non-whitespace byte is not `}`.
  bool make(std::string_view text, size_t groups, double first_share, size_t piece_bytes = 0);

  size_t piece_count() const { return cut_offsets_.size() + 1; }
  size_t group_count() const { return group_first_piece_.size(); }
  // Group g's pieces are [group_first_piece(g), group_end_piece(g)).
  size_t group_first_piece(size_t g) const { return group_first_piece_[g]; }
  size_t group_end_piece(size_t g) const {
    return g + 1 < group_first_piece_.size() ? group_first_piece_[g + 1] : piece_count();
  }
  RootKind root() const { return root_; }
  // Piece i as it reads once planted (piece 0 starts at offset 0).
  ChunkSpan piece(size_t i) const;
  // Offset of the byte piece 0's events array must close on (the planted
  // `]`), and of the document's final `}` (object root only).
  size_t first_close_offset() const { return cut_offsets_.front(); }
  size_t root_close_offset() const { return root_close_offset_; }

  // Writes the cuts (and, for an object root, the `]` over the final `}`)
  // into `text`, the same bytes make() saw. restore_root_close() puts back
  // the final `}` alone; restore() puts back everything.
  void plant(char* text) const;
  void restore_root_close(char* text) const;
  void restore(char* text) const;

 private:
  // Adds cuts about every piece_bytes in [from, end) of `text`.
  void cut_pieces(std::string_view text, size_t from, size_t end, size_t piece_bytes);
  void add_cut(std::string_view text, size_t comma);

  RootKind root_ = RootKind::kObject;
  size_t root_close_offset_ = 0;
  size_t size_bytes_ = 0;
  std::vector<size_t> cut_offsets_;  // offsets of the separators' commas, ascending
  std::vector<std::array<char, 2>> saved_;  // the two whitespace bytes after each comma
  std::vector<size_t> group_first_piece_;
};

// The offset of the comma of the first separator (see above) whose newline
// lies in [from_offset, limit_offset), or npos.
size_t find_event_separator(std::string_view text, size_t from_offset, size_t limit_offset);
// The offset of the comma of the last separator lying wholly in `text`
// whose closing brace is at or after `from_offset`, or npos (the streaming
// pass cuts each window there).
size_t find_last_event_separator(std::string_view text, size_t from_offset);

}  // namespace gpuutil::replay
