// Reads a gpuutil.report/1 document (one line of a live run's JSONL, or the
// output of `gpuutil analyze --json`) back into a Report, so that a file of
// step reports goes through the same C++ code as a live session
// (run_totals_of_reports in gpuutil/run_totals.h, what `gpuutil analyze` and
// `gpuutil export html` show for a JSONL).
//
// Contract: a pure function of the text, callable from any thread. What it
// reads: sources, workload, every step (every field of its devices and host
// threads that report_to_json writes), the summary's scalars (not its
// devices or cross-rank view) and the findings. Keys it does not know are skipped, keys it
// knows but the document lacks keep the Report's defaults (older reports);
// a key of the wrong type is an error. Diagnostics are not read.
#pragma once

#include <string>
#include <string_view>

#include "gpuutil/report.h"

namespace gpuutil {

// True when `json` is a report object; false with one line in `error`
// (when given) otherwise, and `out` unspecified.
bool report_from_json(std::string_view json, Report* out, std::string* error = nullptr);

}  // namespace gpuutil
