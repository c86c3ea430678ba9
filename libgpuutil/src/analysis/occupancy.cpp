// Launch-configuration estimates of SM efficiency and achieved occupancy.
//
// The occupancy estimate is the CUDA occupancy calculator (cuda_occupancy.h,
// cudaOccMaxActiveBlocksPerMultiprocessor) re-stated from the kernel's launch
// record: resident blocks per SM are limited by warp slots, registers
// (allocated per warp in units of 256, split over 4 sub-partitions), shared
// memory (allocated in 128/256-byte units plus the driver's 1 KiB per-block
// reservation on sm_80+) and the architecture's blocks-per-SM cap. The grid
// then caps it: a grid of B blocks gives each of S SMs B/S blocks on average,
// which is how Kineto computes "est. achieved occupancy %" (averaged over all
// SMs, idle ones included). The validation test checks it against Kineto's
// numbers on real traces. Device fields the source did not report (0) are
// filled from the compute capability; AMD devices get the warp (wavefront),
// LDS and block limits only.
#include "analysis/occupancy.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace gpuutil {
namespace {

// Per-architecture facts (CUDA C Programming Guide, "Technical Specifications
// per Compute Capability", and cuda_occupancy.h's tables).
struct ArchFacts {
  int32_t max_threads_per_sm = 0;
  int32_t max_blocks_per_sm = 0;
  int32_t shared_memory_per_sm_bytes = 0;
  int32_t reserved_shared_memory_per_block_bytes = 0;
  int32_t shared_memory_granularity_bytes = 256;
  int32_t register_sub_partitions = 4;
  int32_t max_registers_per_thread = 255;
};

constexpr int32_t kKiB = 1024;

std::optional<ArchFacts> nvidia_arch(int32_t major, int32_t minor) {
  ArchFacts a;
  switch (major) {
    case 5:
      a = {2048, 32, (minor == 2 ? 96 : 64) * kKiB, 0, 256, 4, 255};
      return a;
    case 6:
      a = {2048, 32, (minor == 1 ? 96 : 64) * kKiB, 0, 256, minor == 0 ? 2 : 4, 255};
      return a;
    case 7:
      if (minor == 5) a = {1024, 16, 64 * kKiB, 0, 256, 4, 256};  // Turing
      else a = {2048, 32, 96 * kKiB, 0, 256, 4, 256};              // Volta, Xavier
      return a;
    case 8:
      if (minor == 0) a = {2048, 32, 164 * kKiB, kKiB, 128, 4, 256};       // A100
      else if (minor == 7) a = {2048, 16, 164 * kKiB, kKiB, 128, 4, 256};  // Orin
      else if (minor == 9) a = {1536, 24, 100 * kKiB, kKiB, 128, 4, 256};  // Ada
      else a = {1536, 16, 100 * kKiB, kKiB, 128, 4, 256};                  // GA10x
      return a;
    case 9:
      a = {2048, 32, 228 * kKiB, kKiB, 128, 4, 256};  // Hopper
      return a;
    case 10:
      a = {2048, 32, 228 * kKiB, kKiB, 128, 4, 256};  // Blackwell datacenter
      return a;
    case 12:
      a = {1536, 32, 100 * kKiB, kKiB, 128, 4, 256};  // Blackwell client
      return a;
    default:
      return std::nullopt;
  }
}

// Case-insensitive substring test without allocating: this runs per kernel.
bool contains_nocase(const std::string& haystack, const char* needle) {
  const auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const size_t n = std::char_traits<char>::length(needle);
  for (size_t i = 0; i + n <= haystack.size(); ++i) {
    size_t k = 0;
    while (k < n && lower(haystack[i + k]) == needle[k]) ++k;
    if (k == n) return true;
  }
  return false;
}

bool is_amd(const DeviceInfo& device) {
  if (device.warp_size == 64) return true;
  return contains_nocase(device.name, "amd") || contains_nocase(device.name, "radeon") ||
         contains_nocase(device.name, "instinct");
}


}  // namespace

std::optional<OccupancyLimits> resolve_occupancy_limits(const DeviceInfo& device) {
  OccupancyLimits l;
  const bool amd = is_amd(device);
  std::optional<ArchFacts> arch;
  if (!amd && device.compute_major > 0) arch = nvidia_arch(device.compute_major, device.compute_minor);

  l.warp_size = device.warp_size > 0 ? device.warp_size : (amd ? 64 : 32);
  l.max_threads_per_sm = device.max_threads_per_sm > 0 ? device.max_threads_per_sm
                         : arch                        ? arch->max_threads_per_sm
                                                       : 0;
  if (l.max_threads_per_sm <= 0) return std::nullopt;  // nothing to divide by
  l.max_blocks_per_sm = device.max_blocks_per_sm > 0 ? device.max_blocks_per_sm
                        : arch                       ? arch->max_blocks_per_sm
                                                     : 32;
  l.shared_memory_per_sm_bytes = device.shared_memory_per_sm_bytes > 0 ? device.shared_memory_per_sm_bytes
                                 : arch ? arch->shared_memory_per_sm_bytes
                                        : 0;
  if (arch) {
    l.reserved_shared_memory_per_block_bytes = arch->reserved_shared_memory_per_block_bytes;
    l.shared_memory_granularity_bytes = arch->shared_memory_granularity_bytes;
    l.register_sub_partitions = arch->register_sub_partitions;
    l.max_registers_per_thread = arch->max_registers_per_thread;
  }
  // Volta+ let a block opt in to all of the SM's shared memory (less the
  // driver's reservation, which the allocation below adds back); earlier
  // parts cap a block at 48 KiB.
  l.shared_memory_per_block_cap_bytes = l.shared_memory_per_sm_bytes;
  if (arch && device.compute_major < 7)
    l.shared_memory_per_block_cap_bytes = std::min(l.shared_memory_per_sm_bytes, 48 * kKiB);
  // AMD VGPRs are per SIMD lane and not in the launch record's units; skip.
  l.model_registers = !amd;
  if (device.registers_per_sm > 0) l.registers_per_sm = device.registers_per_sm;
  l.registers_per_block = std::min(l.registers_per_block, l.registers_per_sm);
  return l;
}

namespace {

int64_t divide_round_up(int64_t x, int64_t y) { return (x + y - 1) / y; }
int64_t round_up(int64_t x, int64_t y) { return divide_round_up(x, y) * y; }

}  // namespace

std::optional<double> estimate_sm_efficiency(const DeviceActivity& kernel, const DeviceInfo& device) {
  const uint64_t blocks = kernel.blocks();
  if (blocks == 0 || device.sm_count <= 0) return std::nullopt;
  return std::min(double(blocks) / double(device.sm_count), 1.0);
}

std::optional<OccupancyDetail> estimate_occupancy_detail(const DeviceActivity& kernel, const DeviceInfo& device) {
  const std::optional<OccupancyLimits> lim = resolve_occupancy_limits(device);
  if (!lim) return std::nullopt;
  return estimate_occupancy_detail(kernel, device, *lim);
}

std::optional<OccupancyDetail> estimate_occupancy_detail(const DeviceActivity& kernel, const DeviceInfo& device,
                                                         const OccupancyLimits& limits) {
  const uint64_t blocks = kernel.blocks();
  const uint64_t threads = kernel.threads_per_block();
  if (device.sm_count <= 0 || blocks == 0 || threads == 0) return std::nullopt;
  const OccupancyLimits* lim = &limits;
  if (threads > uint64_t(lim->max_threads_per_block)) return std::nullopt;

  OccupancyDetail d;
  d.warps_per_block = int32_t(divide_round_up(int64_t(threads), lim->warp_size));
  d.max_warps_per_sm = lim->max_threads_per_sm / lim->warp_size;
  d.block_limit_warps = d.max_warps_per_sm / d.warps_per_block;

  // Registers: allocated per warp, rounded up to the allocation unit (so per
  // thread to a multiple of 8 for 32-wide warps); each of the SM's
  // sub-partitions holds a whole number of warps' registers.
  const int64_t regs_per_thread = kernel.registers_per_thread;
  d.block_limit_registers = kUnlimitedBlocks;
  if (lim->model_registers && regs_per_thread > 0) {
    if (regs_per_thread > lim->max_registers_per_thread) return std::nullopt;
    const int64_t regs_per_warp = round_up(regs_per_thread * lim->warp_size, lim->register_allocation_unit);
    const int64_t regs_per_block = regs_per_warp * d.warps_per_block;
    const int64_t regs_assumed_per_block =
        regs_per_warp * round_up(d.warps_per_block, lim->register_sub_partitions);
    if (regs_per_block > lim->registers_per_block || regs_assumed_per_block > lim->registers_per_block)
      return std::nullopt;  // could not have launched: the record or the device info is wrong
    const int64_t warps_per_sub_partition =
        (lim->registers_per_sm / lim->register_sub_partitions) / regs_per_warp;
    d.block_limit_registers =
        int32_t(warps_per_sub_partition * lim->register_sub_partitions / d.warps_per_block);
  }

  // Shared memory: static + dynamic plus the driver's per-block reservation,
  // rounded up to the allocation unit; the SM's whole carve-out is assumed
  // (cudaOcc's default preference).
  const int64_t shared_bytes =
      round_up(int64_t(kernel.shared_memory_bytes) + lim->reserved_shared_memory_per_block_bytes,
               lim->shared_memory_granularity_bytes);
  d.block_limit_shared_memory = kUnlimitedBlocks;
  if (shared_bytes > 0) {
    if (lim->shared_memory_per_sm_bytes <= 0) return std::nullopt;  // uses shared memory, capacity unknown
    if (shared_bytes > lim->shared_memory_per_block_cap_bytes) return std::nullopt;
    d.block_limit_shared_memory = int32_t(lim->shared_memory_per_sm_bytes / shared_bytes);
  }

  d.block_limit_blocks = lim->max_blocks_per_sm;
  d.max_active_blocks_per_sm = std::min({d.block_limit_warps, d.block_limit_registers,
                                         d.block_limit_shared_memory, d.block_limit_blocks});
  if (d.max_active_blocks_per_sm <= 0) return std::nullopt;

  d.grid_blocks_per_sm = double(blocks) / double(device.sm_count);
  {
    const uint64_t sms = static_cast<uint64_t>(device.sm_count);
    const uint64_t k = sms > 0 ? blocks / sms : 0;
    d.persistent = k >= 1 && blocks == k * sms && k <= static_cast<uint64_t>(d.max_active_blocks_per_sm);
  }
  d.active_blocks_per_sm = std::min(double(d.max_active_blocks_per_sm), d.grid_blocks_per_sm);
  const double warps_per_block = d.warps_per_block;
  const double max_warps = d.max_warps_per_sm;
  d.theoretical_occupancy = std::clamp(d.max_active_blocks_per_sm * warps_per_block / max_warps, 0.0, 1.0);
  d.achieved_occupancy = std::clamp(d.active_blocks_per_sm * warps_per_block / max_warps, 0.0, 1.0);
  return d;
}

std::optional<double> estimate_achieved_occupancy(const DeviceActivity& kernel, const DeviceInfo& device) {
  const auto d = estimate_occupancy_detail(kernel, device);
  if (!d) return std::nullopt;
  return d->achieved_occupancy;
}

std::optional<double> estimate_achieved_occupancy(const DeviceActivity& kernel, const DeviceInfo& device,
                                                  const OccupancyLimits& limits) {
  const auto d = estimate_occupancy_detail(kernel, device, limits);
  if (!d) return std::nullopt;
  return d->achieved_occupancy;
}

}  // namespace gpuutil
