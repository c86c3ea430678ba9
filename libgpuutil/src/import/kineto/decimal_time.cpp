// Exact decimal microseconds -> int64 nanoseconds (see decimal_time.h).
//
// The number is treated as a digit string D with a decimal point and a
// decimal exponent. Converting to ns moves the point three places right;
// the integer part of the shifted value is the magnitude, the first dropped
// digit decides rounding (>= 5 rounds the magnitude up, i.e. half away from
// zero once the sign is applied). No floating point is involved, so
// "1712195495505543.2" is exactly 1712195495505543200 ns.
#include "import/kineto/decimal_time.h"

#include <limits>

namespace gpuutil::replay {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Largest exponent magnitude worth tracking: anything beyond moves every
// digit out of int64 range (or below 1 ns) anyway.
constexpr int64_t kExponentClamp = 100000;

}  // namespace

namespace {

// The forms Kineto writes: digits, optionally `.` and one to three digits,
// with at most 16 integer digits (epoch microseconds have 16) and a value
// that fits int64 nanoseconds; no digit is dropped, so nothing rounds. Returns false for anything else, which
// the general parser below handles; where both apply they agree (the
// digits are shifted the same way, and nothing needs rounding).
bool parse_plain_us(std::string_view text, int64_t* out_ns) {
  const size_t n = text.size();
  size_t i = 0;
  uint64_t whole = 0;
  while (i < n && is_digit(text[i])) whole = whole * 10 + static_cast<uint64_t>(text[i++] - '0');
  if (i == 0 || i > 16) return false;
  uint64_t frac = 0;
  if (i < n) {
    if (text[i] != '.') return false;
    const size_t digits = n - i - 1;
    if (digits < 1 || digits > 3) return false;
    for (size_t j = i + 1; j < n; ++j) {
      if (!is_digit(text[j])) return false;
      frac = frac * 10 + static_cast<uint64_t>(text[j] - '0');
    }
    for (size_t j = digits; j < 3; ++j) frac *= 10;
  }
  const uint64_t ns = whole * 1000 + frac;  // < 10^19 < 2^64
  if (ns > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;  // the general path says so
  *out_ns = static_cast<int64_t>(ns);
  return true;
}

}  // namespace

DecimalStatus parse_us_to_ns(std::string_view text, int64_t* out_ns) {
  if (parse_plain_us(text, out_ns)) return DecimalStatus::kOk;
  text = trim(text);
  size_t i = 0;
  const size_t n = text.size();
  bool negative = false;
  if (i < n && text[i] == '-') {
    negative = true;
    ++i;
  }
  const size_t int_begin = i;
  while (i < n && is_digit(text[i])) ++i;
  const size_t int_end = i;
  if (int_end == int_begin) return DecimalStatus::kInvalid;
  size_t frac_begin = i, frac_end = i;
  if (i < n && text[i] == '.') {
    ++i;
    frac_begin = i;
    while (i < n && is_digit(text[i])) ++i;
    frac_end = i;
    if (frac_end == frac_begin) return DecimalStatus::kInvalid;
  }
  int64_t exponent = 0;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < n && (text[i] == '+' || text[i] == '-')) {
      exp_negative = text[i] == '-';
      ++i;
    }
    const size_t exp_begin = i;
    while (i < n && is_digit(text[i])) {
      if (exponent < kExponentClamp) exponent = exponent * 10 + (text[i] - '0');
      ++i;
    }
    if (i == exp_begin) return DecimalStatus::kInvalid;
    if (exp_negative) exponent = -exponent;
  }
  if (i != n) return DecimalStatus::kInvalid;

  // D = integer digits followed by fraction digits; the point sits after
  // int_len digits. digit(j) reads D without copying it.
  const int64_t int_len = static_cast<int64_t>(int_end - int_begin);
  const int64_t frac_len = static_cast<int64_t>(frac_end - frac_begin);
  const int64_t total_len = int_len + frac_len;
  auto digit = [&](int64_t j) -> int {
    return j < int_len ? text[int_begin + static_cast<size_t>(j)] - '0'
                       : text[frac_begin + static_cast<size_t>(j - int_len)] - '0';
  };
  int64_t lead = 0;
  while (lead < total_len && digit(lead) == 0) ++lead;
  if (lead == total_len) {  // all zeros
    *out_ns = 0;
    return DecimalStatus::kOk;
  }
  const int64_t sig_len = total_len - lead;
  // Number of significant digits left of the point once it is moved
  // (exponent + 3) places to the right.
  const int64_t k = int_len + exponent + 3 - lead;
  if (k > 19) return DecimalStatus::kOutOfRange;  // >= 10^19 > INT64_MAX

  uint64_t magnitude = 0;
  for (int64_t j = 0; j < k; ++j) {
    magnitude = magnitude * 10 + static_cast<uint64_t>(j < sig_len ? digit(lead + j) : 0);
  }
  const int round_digit = (k >= 0 && k < sig_len) ? digit(lead + k) : 0;
  if (round_digit >= 5) ++magnitude;  // cannot wrap: magnitude < 10^19 < 2^64 - 1
  if (magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return DecimalStatus::kOutOfRange;
  }
  const auto value = static_cast<int64_t>(magnitude);
  *out_ns = negative ? -value : value;
  return DecimalStatus::kOk;
}

bool parse_int64(std::string_view text, int64_t* out) {
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && text[i] == '-') {
    negative = true;
    ++i;
  }
  if (i == text.size()) return false;
  uint64_t magnitude = 0;
  if (text.size() - i <= 18) {  // below 10^18: cannot overflow
    for (; i < text.size(); ++i) {
      if (!is_digit(text[i])) return false;
      magnitude = magnitude * 10 + static_cast<uint64_t>(text[i] - '0');
    }
    *out = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    return true;
  }
  constexpr uint64_t kLimit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (; i < text.size(); ++i) {
    if (!is_digit(text[i])) return false;
    const auto d = static_cast<uint64_t>(text[i] - '0');
    if (magnitude > (kLimit - d) / 10) return false;
    magnitude = magnitude * 10 + d;
  }
  const auto value = static_cast<int64_t>(magnitude);
  *out = negative ? -value : value;
  return true;
}

}  // namespace gpuutil::replay
