// Exact conversion of decimal microsecond text to integer nanoseconds.
//
// Chrome-trace timestamps are microseconds written as JSON numbers
// ("1712195495505543.2", "63.813", "1623212388426902"). Going through a
// double loses nanoseconds at epoch-sized values (2^53 ns is only ~104 days),
// so the importer parses the number token's text directly: the digits are
// shifted three places and rounded half away from zero where the text has
// more than three fractional digits. Exponent forms ("1.5e3") are handled by
// the same exact digit shift. Internal to the replay collector.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpuutil::replay {

enum class DecimalStatus : uint8_t {
  kOk,
  kInvalid,     // not a JSON-style number
  kOutOfRange,  // |value| in ns does not fit int64
};

// Parses a JSON number token (optional '-', digits, optional fraction,
// optional exponent) in microseconds into nanoseconds. Leading and trailing
// ASCII whitespace is ignored. Leading zeros are tolerated.
DecimalStatus parse_us_to_ns(std::string_view text, int64_t* out_ns);

// Parses an optionally negative decimal integer (no fraction, no exponent)
// that makes up all of `text`, e.g. a "5555" thread id written as a string.
bool parse_int64(std::string_view text, int64_t* out);

}  // namespace gpuutil::replay
