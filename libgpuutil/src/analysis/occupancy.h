// Launch-configuration estimates of SM efficiency and achieved occupancy.
//
// Internal to the analysis core. Pure functions of one kernel's launch
// configuration and its device's properties; no measurement involved.
#pragma once

#include <optional>

#include "gpuutil/events.h"

namespace gpuutil {

// min(blocks / SMs, 1): the fraction of SMs the kernel can keep busy
// (torch-tb-profiler's "Est. SM Efficiency" per kernel). nullopt when the
// grid or the SM count is unknown.
std::optional<double> estimate_sm_efficiency(const DeviceActivity& kernel, const DeviceInfo& device);

// Theoretical occupancy limited by threads, registers, shared memory and the
// blocks-per-SM limit, further capped by how many blocks the grid gives each
// SM: active warps per SM / max warps per SM, in [0, 1]. nullopt when the
// launch configuration or device limits are unknown.
std::optional<double> estimate_achieved_occupancy(const DeviceActivity& kernel, const DeviceInfo& device);

}  // namespace gpuutil
