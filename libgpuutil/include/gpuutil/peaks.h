// Peak dense FLOP/s per device and dtype, for MFU.
//
// Keyed by device identity (name, compute capability, SM count). Values are
// vendor datasheet dense (no sparsity) numbers; sources in docs/mfu.md.
#pragma once

#include <optional>
#include <string_view>

#include "gpuutil/events.h"

namespace gpuutil {

// dtype: "fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8".
// Returns nullopt when the device or dtype is not in the table.
std::optional<double> peak_flops_per_s(const DeviceInfo& device, std::string_view dtype);

}  // namespace gpuutil
