// Where to cut a trace document for the parallel import (see
// parallel_split.h).
#include "import/kineto/parallel_split.h"

#include <algorithm>
#include <cstring>

namespace gpuutil::replay {

namespace {

bool is_json_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Bytes a cut overwrites after the comma (and needs to be whitespace).
constexpr size_t kCutWhitespaceBytes = 2;

}  // namespace

namespace {

// The comma of the separator around the raw newline at `newline`, or npos
// when the bytes around it are not `}` ws `,` ws `{` with at least
// kCutWhitespaceBytes bytes between the comma and the brace.
size_t separator_at_newline(std::string_view text, size_t newline, size_t from_offset) {
  // Backwards: whitespace, the comma, whitespace, the closing brace.
  size_t comma = newline;
  while (comma > from_offset && is_json_space(text[comma - 1])) --comma;
  if (comma <= from_offset || text[comma - 1] != ',') return std::string_view::npos;
  --comma;
  size_t brace = comma;
  while (brace > from_offset && is_json_space(text[brace - 1])) --brace;
  if (brace <= from_offset || text[brace - 1] != '}') return std::string_view::npos;
  // Forwards: whitespace, then the next event's opening brace.
  size_t open = newline + 1;
  while (open < text.size() && is_json_space(text[open])) ++open;
  if (open >= text.size() || text[open] != '{') return std::string_view::npos;
  if (open - comma <= kCutWhitespaceBytes) return std::string_view::npos;
  return comma;
}

}  // namespace

size_t find_event_separator(std::string_view text, size_t from_offset, size_t limit_offset) {
  if (limit_offset > text.size()) limit_offset = text.size();
  size_t at = from_offset;
  while (at < limit_offset) {
    const void* hit = std::memchr(text.data() + at, '\n', limit_offset - at);
    if (hit == nullptr) return std::string_view::npos;
    const size_t newline = static_cast<size_t>(static_cast<const char*>(hit) - text.data());
    at = newline + 1;
    const size_t comma = separator_at_newline(text, newline, 0);
    if (comma != std::string_view::npos) return comma;
  }
  return std::string_view::npos;
}

size_t find_last_event_separator(std::string_view text, size_t from_offset) {
  size_t end = text.size();
  while (end > from_offset) {
    const void* hit = memrchr(text.data() + from_offset, '\n', end - from_offset);
    if (hit == nullptr) return std::string_view::npos;
    const size_t newline = static_cast<size_t>(static_cast<const char*>(hit) - text.data());
    end = newline;
    const size_t comma = separator_at_newline(text, newline, from_offset);
    if (comma != std::string_view::npos) return comma;
  }
  return std::string_view::npos;
}

void SplitPlan::add_cut(std::string_view text, size_t comma) {
  cut_offsets_.push_back(comma);
  saved_.push_back({text[comma + 1], text[comma + 2]});
}

void SplitPlan::cut_pieces(std::string_view text, size_t from, size_t end, size_t piece_bytes) {
  if (piece_bytes == 0) return;
  // Each piece ends at the first separator past piece_bytes from its start;
  // a last piece under half that is left to the one before it.
  for (size_t start = from;;) {
    const size_t target = start + piece_bytes;
    if (target >= end || end - target <= piece_bytes / 2) return;
    const size_t comma = find_event_separator(text, target, std::min(end, target + piece_bytes));
    if (comma == std::string_view::npos || comma + kCutWhitespaceBytes >= end) {
      start = target;  // no separator near the target: the piece grows
      continue;
    }
    add_cut(text, comma);
    start = comma + kCutWhitespaceBytes + 1;
  }
}

bool SplitPlan::make(std::string_view text, size_t groups, double first_share, size_t piece_bytes) {
  cut_offsets_.clear();
  saved_.clear();
  group_first_piece_.clear();
  if (groups < 1 || text.empty() || (groups < 2 && piece_bytes == 0)) return false;
  size_t first = 0;
  while (first < text.size() && is_json_space(text[first])) ++first;
  size_t last = text.size();
  while (last > first && is_json_space(text[last - 1])) --last;
  if (first >= last) return false;
  if (text[first] == '{') {
    if (text[last - 1] != '}') return false;
    root_ = RootKind::kObject;
  } else if (text[first] == '[') {
    root_ = RootKind::kArray;
  } else {
    return false;
  }
  root_close_offset_ = last - 1;
  size_bytes_ = text.size();

  // The groups' cuts: group 0 ends at first_share of the document, the
  // rest evenly.
  std::vector<size_t> group_cuts;
  if (groups >= 2) {
    if (first_share <= 0.0 || first_share >= 1.0) first_share = 1.0 / static_cast<double>(groups);
    const double first_end = first_share * static_cast<double>(text.size());
    const double rest_each = (static_cast<double>(text.size()) - first_end) / static_cast<double>(groups - 1);
    size_t from = first + 1;
    for (size_t i = 0; i + 1 < groups; ++i) {
      const auto target = static_cast<size_t>(first_end + rest_each * static_cast<double>(i));
      const auto next_target = static_cast<size_t>(first_end + rest_each * static_cast<double>(i + 1));
      // Search up to the next cut's target so the groups stay in order.
      const size_t comma = find_event_separator(text, target < from ? from : target,
                                                i + 2 < groups ? next_target : root_close_offset_);
      if (comma == std::string_view::npos || comma + kCutWhitespaceBytes >= root_close_offset_) continue;
      group_cuts.push_back(comma);
      from = comma + kCutWhitespaceBytes + 1;
    }
  }

  // Each group cut into pieces. Group 0's first piece holds the keys
  // before the events array whole: its pieces start after the key.
  size_t events_key = std::string_view::npos;
  if (root_ == RootKind::kObject) {
    constexpr std::string_view kEventsKey = "\"traceEvents\"";
    events_key = text.find(kEventsKey, first);
  }
  group_first_piece_.push_back(0);
  size_t from = root_ == RootKind::kArray ? first + 1 : events_key;
  for (size_t g = 0; g <= group_cuts.size(); ++g) {
    const size_t end = g < group_cuts.size() ? group_cuts[g] : root_close_offset_;
    if (from != std::string_view::npos && from < end) cut_pieces(text, from, end, piece_bytes);
    if (g < group_cuts.size()) {
      add_cut(text, group_cuts[g]);
      group_first_piece_.push_back(cut_offsets_.size());
      from = group_cuts[g] + kCutWhitespaceBytes + 1;
    }
  }
  if (cut_offsets_.empty()) {
    group_first_piece_.clear();
    saved_.clear();
    return false;
  }
  return true;
}

ChunkSpan SplitPlan::piece(size_t i) const {
  // Object root: `]}` at the comma, `[` after; array root: `]`, then `[`.
  const size_t open_after_comma = root_ == RootKind::kObject ? 2 : 1;
  ChunkSpan span;
  span.begin_offset = i == 0 ? 0 : cut_offsets_[i - 1] + open_after_comma;
  if (i + 1 < piece_count()) {
    span.end_offset = cut_offsets_[i] + 1 + (i == 0 && root_ == RootKind::kObject ? 1 : 0);
  } else {
    span.end_offset = size_bytes_;
  }
  return span;
}

void SplitPlan::plant(char* text) const {
  for (const size_t comma : cut_offsets_) {
    text[comma] = ']';
    if (root_ == RootKind::kObject) {
      text[comma + 1] = '}';
      text[comma + 2] = '[';
    } else {
      text[comma + 1] = '[';
    }
  }
  if (root_ == RootKind::kObject) text[root_close_offset_] = ']';
}

void SplitPlan::restore_root_close(char* text) const {
  if (root_ == RootKind::kObject) text[root_close_offset_] = '}';
}

void SplitPlan::restore(char* text) const {
  // The overwritten bytes were the comma and whitespace; any whitespace byte
  // is equivalent for every later parse, but put back the exact bytes anyway
  // so the buffer is the input again.
  for (size_t i = 0; i < cut_offsets_.size(); ++i) {
    const size_t comma = cut_offsets_[i];
    text[comma] = ',';
    text[comma + 1] = saved_[i][0];
    text[comma + 2] = saved_[i][1];
  }
  restore_root_close(text);
}

}  // namespace gpuutil::replay
