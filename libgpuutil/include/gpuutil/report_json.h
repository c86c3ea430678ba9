// Serialises a Report to the versioned JSON report schema (gpuutil.report/1).
//
// The schema is documented in docs/report-schema.md. Durations are integer
// ns; undefined ratios are null (never NaN or Inf).
#pragma once

#include <string>

#include "gpuutil/report.h"

namespace gpuutil {

inline constexpr const char* kReportSchema = "gpuutil.report/1";

// indent < 0: compact single line (one JSON Lines record).
std::string report_to_json(const Report& report, int indent = -1);

}  // namespace gpuutil
