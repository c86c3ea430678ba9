// Rules that turn a report's numbers into ranked findings with the fix.
//
// Internal to the analysis core. Pure function of the Report (steps and
// summary). Thresholds follow xprof's input-bound convention (>= 5% of step
// time "moderately", >= 20% "highly") and are documented in
// docs/findings.md. Findings are ranked by recoverable time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpuutil/report.h"

namespace gpuutil {

std::vector<Finding> derive_findings(const Report& report);

// A finding with share_of_wall = recoverable / wall (0 when wall is 0);
// recoverable is floored at 0.
Finding make_finding(const char* id, std::string title, std::string evidence, std::string fix,
                     int64_t recoverable_ns, double wall_ns);

}  // namespace gpuutil
