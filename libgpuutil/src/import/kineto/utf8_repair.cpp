// Invalid UTF-8 repair (see utf8_repair.h). Validity follows RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF.
#include "import/kineto/utf8_repair.h"

#include <string>

#include <simdjson.h>

namespace gpuutil::replay {

namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid sequence starting at p[0] (given `left` bytes), or 0.
size_t valid_sequence_length(const unsigned char* p, size_t left) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return (left >= 2 && is_continuation(p[1])) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !is_continuation(p[1]) || !is_continuation(p[2])) return 0;
    if (c == 0xE0 && p[1] < 0xA0) return 0;   // overlong
    if (c == 0xED && p[1] >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !is_continuation(p[1]) || !is_continuation(p[2]) || !is_continuation(p[3])) return 0;
    if (c == 0xF0 && p[1] < 0x90) return 0;   // overlong
    if (c == 0xF4 && p[1] >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

size_t repair_utf8(TraceBytes* bytes, Diagnostics* diagnostics) {
  if (simdjson::validate_utf8(bytes->data(), bytes->size)) return 0;
  auto* p = reinterpret_cast<unsigned char*>(bytes->data());
  size_t replaced = 0;
  for (size_t i = 0; i < bytes->size;) {
    const size_t n = valid_sequence_length(p + i, bytes->size - i);
    if (n == 0) {
      p[i] = '?';
      ++replaced;
      ++i;
    } else {
      i += n;
    }
  }
  if (replaced > 0) {
    diagnostics->add(Diag::event_malformed, 1,
                     "input had invalid UTF-8: " + std::to_string(replaced) + " byte(s) replaced with '?'");
  }
  return replaced;
}

}  // namespace gpuutil::replay
