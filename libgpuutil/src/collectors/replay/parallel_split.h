// Cutting a trace document into chunks that simdjson can parse on their own,
// so the traceEvents array can be read on several threads
// (kineto_import.cpp drives it; docs/trace-import.md has the picture).
//
// A cut goes between two events, at a separator `}` ws `,` ws `{` whose
// whitespace after the comma holds a raw newline and at least two bytes
// (Kineto writes `},\n  {`). Raw newlines cannot occur inside JSON strings,
// so in a valid document such a separator is never inside a string; in an
// invalid one the chunk parses fail and the caller falls back to the serial
// pass. A cut overwrites the comma and the bytes after it in place (no copy
// of the document), turning each chunk into a complete document:
//
//   object root:  `{ ..."traceEvents": [ e0, .. ek },\n  { ek+1, .. en ] ...}`
//     chunk 0     `{ ..."traceEvents": [ e0, .. ek }]}`     comma -> `]}`
//     chunk i>0   `[ { ek+1, ..                            ws -> `[`
//     last chunk  `[ { .. en ] , "traceName": ... ]`  the document's final
//                 `}` -> `]` so simdjson's root check (the last structural
//                 character closes the root) passes; its reader stops at the
//                 events array's own `]` and reports where the rest begins.
//   array root:   comma -> `]`, the next byte -> `[`.
//
// restore() puts every byte back. Whether a cut really fell between two
// elements of the traceEvents array is not known here: the chunk readers
// check it (each chunk's array must end exactly where its view ends).
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
  // Plans up to `chunks` chunks of `text`: chunk 0 ends near
  // `first_share` of the document, the others share the rest equally. Cuts
  // with no separator near their target are dropped. Returns false (and
  // plans nothing) when the document cannot be split at all: fewer than two
  // chunks, a root that is not an object or array, or an object root whose
  // last non-whitespace byte is not `}`.
  bool make(std::string_view text, size_t chunks, double first_share);

  size_t chunk_count() const { return cut_offsets_.size() + 1; }
  RootKind root() const { return root_; }
  // Chunk i as it reads once planted (chunk 0 starts at offset 0).
  ChunkSpan chunk(size_t i) const;
  // Offset of the byte chunk 0's events array must close on (the planted
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
  RootKind root_ = RootKind::kObject;
  size_t root_close_offset_ = 0;
  size_t size_bytes_ = 0;
  std::vector<size_t> cut_offsets_;  // offsets of the separators' commas, ascending
  std::vector<std::array<char, 2>> saved_;  // the two whitespace bytes after each comma
};

// The offset of the comma of the first separator (see above) whose newline
// lies in [from_offset, limit_offset), or npos.
size_t find_event_separator(std::string_view text, size_t from_offset, size_t limit_offset);
// The offset of the comma of the last separator lying wholly in `text`
// whose closing brace is at or after `from_offset`, or npos (the streaming
// pass cuts each window there).
size_t find_last_event_separator(std::string_view text, size_t from_offset);

}  // namespace gpuutil::replay
