// A streaming JSON writer that appends one JSON document to a std::string.
//
// Used by the report exporter (report_json.cpp) instead of building an
// nlohmann DOM per report: nothing is allocated besides the output string's
// own geometric growth, and the bytes are exactly what
// nlohmann::ordered_json::dump(indent, ' ', false, error_handler_t::replace)
// prints for the same document:
//   - integers in plain decimal (std::to_chars);
//   - doubles through nlohmann's own number formatter (Grisu2: "0.1", "2.0",
//     "1e+300"), and null when not finite;
//   - strings copied verbatim between quotes when every byte is printable
//     ASCII other than '"' and '\\'; anything else (control characters,
//     UTF-8, invalid UTF-8) goes through nlohmann's escaper, so escapes and
//     the U+FFFD replacement of invalid bytes stay identical;
//   - indent < 0: compact; indent >= 0: nlohmann's pretty layout (a newline
//     and depth * indent spaces before each element, ": " after keys, empty
//     containers as {} and []).
// Contract: the caller nests begin_*/end_* correctly and, inside an object,
// calls key() before each value. The writer writes ahead into spare room at
// the end of `out`, so `out` holds exactly the document only once finish()
// has been called (until then it ends in spare bytes). One writer per
// string, one thread.
#pragma once

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace gpuutil {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out, int indent = -1) : out_(out), pos_(out.size()), indent_(indent) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // Trims the spare room: `out` ends with the last byte written. Call once,
  // after the last token.
  void finish() { out_.resize(pos_); }

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }

  // An object member's name given as a string literal (the report's own
  // keys): copied between quotes with no escape scan, in one write.
  // Contract: a literal of printable ASCII without '"' or '\\' (checked
  // in debug builds); any other name goes through key(std::string_view).
  template <size_t N>
  void key(const char (&k)[N]) {
    constexpr size_t n = N - 1;
    assert(k[n] == '\0' && !needs_escape(std::string_view(k, n)));
    separate();
    char* p = room(n + 4);
    p[0] = '"';
    std::memcpy(p + 1, k, n);
    p[n + 1] = '"';
    p[n + 2] = ':';
    p[n + 3] = ' ';  // kept only when pretty
    pos_ += n + (indent_ < 0 ? 3 : 4);
    state_ = State::kAfterKey;
  }

  // An object member's name; the next call writes its value.
  void key(std::string_view k) {
    separate();
    append_string(k);
    if (indent_ < 0) {
      put(':');
    } else {
      put(": ", 2);
    }
    state_ = State::kAfterKey;
  }

  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  void value(T v) {
    separate();
    char* p = room(24);
    pos_ += static_cast<size_t>(std::to_chars(p, p + 24, v).ptr - p);
    state_ = State::kNext;
  }
  void value(bool v) {
    separate();
    if (v) {
      put("true", 4);
    } else {
      put("false", 5);
    }
    state_ = State::kNext;
  }
  // null when not finite (NaN/Inf never reach the output).
  void value(double v) {
    separate();
    if (std::isfinite(v)) {
      append_double(v);
    } else {
      put("null", 4);
    }
    state_ = State::kNext;
  }
  void value(std::string_view s) {
    separate();
    append_string(s);
    state_ = State::kNext;
  }
  // Without this, a string literal would pick value(bool).
  void value(const char* s) { value(std::string_view(s)); }
  void value(std::nullptr_t) { null(); }
  void null() {
    separate();
    put("null", 4);
    state_ = State::kNext;
  }

  // key(k) then value(v); a literal k takes the literal key() above.
  template <typename K, typename T>
  void member(const K& k, const T& v) {
    key(k);
    value(v);
  }

 private:
  // Where the next token goes relative to the one before it.
  enum class State : uint8_t {
    kFirst,     // first element of a container (or the top-level value)
    kAfterKey,  // the value right after its key
    kNext,      // any later element: a comma first
  };

  // At least n writable bytes at out_[pos_]; pos_ is not advanced.
  char* room(size_t n) {
    if (out_.size() - pos_ < n) grow(n);
    return out_.data() + pos_;
  }
  void grow(size_t n) {
    size_t size = out_.size() < 256 ? 256 : out_.size() * 2;
    while (size - pos_ < n) size *= 2;
    out_.resize(size);
  }
  void put(char c) {
    *room(1) = c;
    ++pos_;
  }
  void put(const char* s, size_t n) {
    std::memcpy(room(n), s, n);
    pos_ += n;
  }
  void newline_and_indent() {
    const size_t n = 1 + static_cast<size_t>(depth_) * static_cast<size_t>(indent_);
    char* p = room(n);
    p[0] = '\n';
    std::memset(p + 1, ' ', n - 1);
    pos_ += n;
  }
  void separate() {
    if (state_ == State::kAfterKey) return;
    if (indent_ < 0) {
      if (state_ == State::kNext) put(',');
      return;
    }
    if (depth_ == 0) return;
    if (state_ == State::kNext) put(',');
    newline_and_indent();
  }
  void open(char c) {
    separate();
    put(c);
    ++depth_;
    state_ = State::kFirst;
  }
  void close(char c) {
    --depth_;
    // A non-empty container closes on its own line when pretty.
    if (indent_ >= 0 && state_ != State::kFirst) newline_and_indent();
    put(c);
    state_ = State::kNext;
  }
  // Whether any of the 8 bytes in `x` needs escaping or is not printable
  // ASCII: < 0x20, >= 0x7F, '"' or '\\' (exact: the classic "has a zero
  // byte" / "has a byte less than n" word tests, n <= 128).
  static bool word_needs_escape(uint64_t x) {
    constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
    auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHighs; };
    const uint64_t below_space = (x - kOnes * 0x20) & ~x & kHighs;
    return (below_space | (x & kHighs) | has_zero(x ^ (kOnes * 0x7F)) | has_zero(x ^ (kOnes * '"')) |
            has_zero(x ^ (kOnes * '\\'))) != 0;
  }
  static bool needs_escape(std::string_view s) {
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t x;
      std::memcpy(&x, s.data() + i, 8);
      if (word_needs_escape(x)) return true;
    }
    for (; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x20 || c > 0x7E || c == '"' || c == '\\') return true;
    }
    return false;
  }
  void append_string(std::string_view s) {
    if (needs_escape(s)) {
      append_escaped(s);
      return;
    }
    char* p = room(s.size() + 2);
    p[0] = '"';
    if (!s.empty()) std::memcpy(p + 1, s.data(), s.size());
    p[s.size() + 1] = '"';
    pos_ += s.size() + 2;
  }
  // Slow paths (json_writer.cpp): nlohmann's number formatter and escaper.
  void append_double(double v);
  void append_escaped(std::string_view s);

  std::string& out_;
  size_t pos_;  // end of the document in out_ (out_ beyond it is spare room)
  int indent_;
  int depth_ = 0;
  State state_ = State::kFirst;
};

}  // namespace gpuutil
