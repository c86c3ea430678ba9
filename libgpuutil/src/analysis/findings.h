// Rules that turn a report's numbers into ranked findings with the fix.
//
// Internal to the analysis core. Pure function of the Report (steps and
// summary). Thresholds follow xprof's input-bound convention (>= 5% of step
// time "moderately", >= 20% "highly") and are documented in
// docs/findings.md. Findings are ranked by recoverable time.
#pragma once

#include <vector>

#include "gpuutil/report.h"

namespace gpuutil {

std::vector<Finding> derive_findings(const Report& report);

}  // namespace gpuutil
