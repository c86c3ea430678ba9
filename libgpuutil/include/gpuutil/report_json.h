// Serialises a Report to the versioned JSON report schema (gpuutil.report/1).
//
// The schema is documented in docs/report-schema.md. Durations are integer
// ns; undefined ratios are null (never NaN or Inf).
#pragma once

#include <string>

#include "gpuutil/report.h"
#include "gpuutil/run_totals.h"

namespace gpuutil {

inline constexpr const char* kReportSchema = "gpuutil.report/1";

// indent < 0: compact single line (one JSON Lines record).
std::string report_to_json(const Report& report, int indent = -1);

// Run totals (what prof.summary() is built from, and `gpuutil analyze` of a
// JSONL): {"steps", "steps_wall_ns", "outside_steps_ns", ..., "devices":
// [{"rank", "device", "name", "wall_ns", "breakdown_ns", "busy_pct"}],
// "host": [{"rank", "tid", "name", "steps", "wall_ns", "breakdown_ns"}],
// "findings": [{"id", "title", "evidence", "fix", "recoverable_ns",
// "share_of_wall", "steps"}], "workload": {"kind", "evidence",
// "capture_ns"}}; findings are run_findings(totals), most recoverable first.
std::string run_totals_to_json(const RunTotals& totals);

}  // namespace gpuutil
