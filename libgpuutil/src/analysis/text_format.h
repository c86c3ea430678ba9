// Human-readable numbers for findings and evidence text: "12.3 ms",
// "45.6%", "18.4 MiB", "1.25 GiB".
//
// Internal to the analysis core; pure functions, fixed precision (the JSON
// report keeps the exact integers, these only spell them for people).
#pragma once

#include <cstdint>
#include <string>

namespace gpuutil {

std::string ms_text(int64_t ns);         // "12.3 ms"
std::string pct_text(double fraction);   // 0.456 -> "45.6%"
std::string bytes_text(double bytes);    // "18.4 MiB", "11.2 KiB", "8 B"
std::string gib_text(double bytes);      // "1.25 GiB"

}  // namespace gpuutil
