// Human-readable numbers for findings and evidence text: "12.3 ms",
// "45.6%", "18.4 MiB", "1.25 GiB"; and cat(), which joins the pieces.
//
// Internal to the analysis core; pure functions, fixed precision (the JSON
// report keeps the exact integers, these only spell them for people).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace gpuutil {

std::string ms_text(int64_t ns);         // "12.3 ms"
std::string pct_text(double fraction);   // 0.456 -> "45.6%"
std::string bytes_text(double bytes);    // "18.4 MiB", "11.2 KiB", "8 B"
std::string gib_text(double bytes);      // "1.25 GiB"

// The pieces concatenated with one allocation: findings spell their titles
// and evidence from many small pieces for every live step report, and a
// chain of operator+ makes a temporary string per piece.
std::string cat(std::initializer_list<std::string_view> pieces);

}  // namespace gpuutil
