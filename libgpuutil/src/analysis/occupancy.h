// Launch-configuration estimates of SM efficiency and achieved occupancy.
//
// Internal to the analysis core. Pure functions of one kernel's launch
// configuration and its device's properties; no measurement involved.
#pragma once

#include <cstdint>
#include <optional>

#include "gpuutil/events.h"

namespace gpuutil {

// min(blocks / SMs, 1): the fraction of SMs the kernel can keep busy
// (torch-tb-profiler's "Est. SM Efficiency" per kernel). nullopt when the
// grid or the SM count is unknown.
std::optional<double> estimate_sm_efficiency(const DeviceActivity& kernel, const DeviceInfo& device);

// Theoretical occupancy limited by threads, registers, shared memory and the
// blocks-per-SM limit, further capped by how many blocks the grid gives each
// SM: active warps per SM / max warps per SM, in [0, 1]. The grid cap is the
// average over all SMs, blocks / SMs (not rounded up), as Kineto computes its
// "est. achieved occupancy %": a 1-block kernel on 80 SMs is 1/80 of one
// block's occupancy. nullopt when the launch configuration or device limits
// are unknown, or the configuration could not fit the device as described.
std::optional<double> estimate_achieved_occupancy(const DeviceActivity& kernel, const DeviceInfo& device);

// The occupancy calculator's intermediate values behind
// estimate_achieved_occupancy (same inputs, same nullopt cases), for tests and
// diagnostics. Block limits are per SM; kUnlimitedBlocks means the resource
// does not constrain (no registers / no shared memory used).
inline constexpr int32_t kUnlimitedBlocks = 1 << 30;
struct OccupancyDetail {
  int32_t warps_per_block = 0;
  int32_t max_warps_per_sm = 0;
  int32_t block_limit_warps = 0;
  int32_t block_limit_registers = 0;
  int32_t block_limit_shared_memory = 0;
  int32_t block_limit_blocks = 0;
  int32_t max_active_blocks_per_sm = 0;  // min of the four limits, >= 1
  double grid_blocks_per_sm = 0;         // blocks / SMs (Kineto's "blocks per SM")
  double active_blocks_per_sm = 0;       // min(max_active_blocks_per_sm, grid_blocks_per_sm)
  double theoretical_occupancy = 0;      // max_active_blocks_per_sm * warps_per_block / max_warps_per_sm
  double achieved_occupancy = 0;         // active_blocks_per_sm * warps_per_block / max_warps_per_sm, in [0, 1]
  // A persistent launch: the grid is exactly k blocks on every SM (k >= 1)
  // and all of them are resident at once (k <= max_active_blocks_per_sm).
  // The kernel keeps its blocks on the SMs and loops over its work
  // (persistent and warp-specialised GEMMs, FlashAttention-3, stream-K):
  // its occupancy is its design, hiding latency with asynchronous copies
  // and tensor cores, not a lever (issue 37: "low occupancy" fired on a
  // 99%-busy run of such GEMMs).
  bool persistent = false;
};
std::optional<OccupancyDetail> estimate_occupancy_detail(const DeviceActivity& kernel, const DeviceInfo& device);

// The device as the calculator needs it, with unreported fields filled in.
// Resolving it matches the device name, so do it once per device, not per
// kernel (resolve_occupancy_limits), and pass it to the 3-argument forms.
struct OccupancyLimits {
  int32_t warp_size = 32;
  int32_t max_threads_per_block = 1024;
  int32_t max_threads_per_sm = 0;
  int32_t max_blocks_per_sm = 0;
  int32_t shared_memory_per_sm_bytes = 0;  // 0 = unknown
  int32_t shared_memory_per_block_cap_bytes = 0;
  int32_t reserved_shared_memory_per_block_bytes = 0;
  int32_t shared_memory_granularity_bytes = 256;
  bool model_registers = true;
  int32_t registers_per_sm = 65536;
  int32_t registers_per_block = 65536;
  int32_t register_allocation_unit = 256;  // registers per warp
  int32_t register_sub_partitions = 4;
  int32_t max_registers_per_thread = 255;
};

// nullopt when the device's limits are unknown (no threads per SM).
std::optional<OccupancyLimits> resolve_occupancy_limits(const DeviceInfo& device);
std::optional<OccupancyDetail> estimate_occupancy_detail(const DeviceActivity& kernel, const DeviceInfo& device,
                                                         const OccupancyLimits& limits);
std::optional<double> estimate_achieved_occupancy(const DeviceActivity& kernel, const DeviceInfo& device,
                                                  const OccupancyLimits& limits);

}  // namespace gpuutil
