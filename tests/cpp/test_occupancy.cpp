// Tests for the launch-configuration estimates (analysis/occupancy.h).
//
// Hand-computed cases pin each limit of the occupancy calculator (warps,
// registers with per-warp rounding and sub-partitions, shared memory with
// granularity and the sm_80+ per-block reservation, blocks per SM, the grid
// cap) by name. The validation tests then compare every kernel of real Kineto
// traces (shared/traces, read-only) with Kineto's own "est. achieved
// occupancy %" and "blocks per SM", which CUPTI/cuda_occupancy.h produced on
// the machine that recorded them.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/occupancy.h"

namespace gpuutil {
namespace {

DeviceInfo v100() {  // deviceProperties of kineto_resnet50_nw4_v100.json.gz
  DeviceInfo d;
  d.name = "Tesla V100-DGXS-32GB";
  d.compute_major = 7;
  d.compute_minor = 0;
  d.sm_count = 80;
  d.max_threads_per_sm = 2048;
  d.registers_per_sm = 65536;
  d.shared_memory_per_sm_bytes = 98304;
  d.warp_size = 32;
  return d;
}

DeviceInfo a100() {  // deviceProperties of hta_alexnet_a100_sync.json.gz
  DeviceInfo d;
  d.name = "NVIDIA A100-PG509-200";
  d.compute_major = 8;
  d.compute_minor = 0;
  d.sm_count = 108;
  d.max_threads_per_sm = 2048;
  d.registers_per_sm = 65536;
  d.shared_memory_per_sm_bytes = 167936;
  d.warp_size = 32;
  return d;
}

DeviceActivity kernel(uint32_t blocks, uint32_t threads, uint32_t regs, uint32_t shared_bytes = 0) {
  DeviceActivity k;
  k.grid[0] = blocks;
  k.grid[1] = 1;
  k.grid[2] = 1;
  k.block[0] = threads;
  k.block[1] = 1;
  k.block[2] = 1;
  k.registers_per_thread = regs;
  k.shared_memory_bytes = shared_bytes;
  return k;
}

constexpr uint32_t kLargeGrid = 80 * 1000;

// ---- SM efficiency ---------------------------------------------------------

TEST(OccupancySmEfficiency, OneBlockOnEightySmsIsOneEightieth) {
  EXPECT_DOUBLE_EQ(*estimate_sm_efficiency(kernel(1, 64, 24), v100()), 1.0 / 80);
}

TEST(OccupancySmEfficiency, GridAtOrAboveSmCountIsOne) {
  EXPECT_DOUBLE_EQ(*estimate_sm_efficiency(kernel(40, 256, 32), v100()), 0.5);
  EXPECT_DOUBLE_EQ(*estimate_sm_efficiency(kernel(80, 256, 32), v100()), 1.0);
  EXPECT_DOUBLE_EQ(*estimate_sm_efficiency(kernel(3136, 128, 128), v100()), 1.0);
}

TEST(OccupancySmEfficiency, MultiDimensionalGridCountsAllBlocks) {
  DeviceActivity k = kernel(4, 128, 30);
  k.grid[1] = 10;  // 40 blocks
  EXPECT_DOUBLE_EQ(*estimate_sm_efficiency(k, v100()), 0.5);
}

TEST(OccupancySmEfficiency, UnknownGridOrSmCountIsNullopt) {
  EXPECT_EQ(estimate_sm_efficiency(kernel(0, 256, 32), v100()), std::nullopt);
  DeviceInfo no_sms = v100();
  no_sms.sm_count = 0;
  EXPECT_EQ(estimate_sm_efficiency(kernel(10, 256, 32), no_sms), std::nullopt);
  EXPECT_EQ(estimate_sm_efficiency(DeviceActivity{}, v100()), std::nullopt);
}

// ---- Occupancy: each limit by hand -----------------------------------------

// Issue 37, item 7: a persistent launch is exactly k blocks on every SM,
// all resident at once (a persistent GEMM on an A100: 108 blocks of 384
// threads with 160 KiB of shared memory, one per SM by design). A grid that
// does not fill every SM evenly, or needs a second wave, is not one.
TEST(Occupancy, PersistentLaunchIsKBlocksOnEverySmAllResident) {
  const auto one = estimate_occupancy_detail(kernel(108, 384, 168, 160 * 1024), a100());
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->max_active_blocks_per_sm, 1);
  EXPECT_TRUE(one->persistent);
  EXPECT_LT(one->achieved_occupancy, 0.25);  // low by design
  const auto two = estimate_occupancy_detail(kernel(216, 128, 32), a100());  // 2 per SM, up to 16 resident
  ASSERT_TRUE(two.has_value());
  EXPECT_TRUE(two->persistent);
  EXPECT_FALSE(estimate_occupancy_detail(kernel(107, 384, 168, 160 * 1024), a100())->persistent);  // one SM idle
  EXPECT_FALSE(estimate_occupancy_detail(kernel(150, 384, 168, 160 * 1024), a100())->persistent);  // uneven
  EXPECT_FALSE(estimate_occupancy_detail(kernel(216, 384, 168, 160 * 1024), a100())->persistent);  // two waves
}

TEST(Occupancy, V100With256ThreadBlocksAnd32RegistersIsFullWhenGridIsLarge) {
  // 8 warps/block; warps: 64/8 = 8 blocks; registers: 32*32 = 1024/warp,
  // 16384/1024 = 16 warps per sub-partition * 4 = 64 warps = 8 blocks.
  const auto d = estimate_occupancy_detail(kernel(kLargeGrid, 256, 32), v100());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->warps_per_block, 8);
  EXPECT_EQ(d->max_warps_per_sm, 64);
  EXPECT_EQ(d->block_limit_warps, 8);
  EXPECT_EQ(d->block_limit_registers, 8);
  EXPECT_EQ(d->block_limit_shared_memory, kUnlimitedBlocks);
  EXPECT_EQ(d->block_limit_blocks, 32);
  EXPECT_EQ(d->max_active_blocks_per_sm, 8);
  EXPECT_DOUBLE_EQ(d->theoretical_occupancy, 1.0);
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(kLargeGrid, 256, 32), v100()), 1.0);
}

TEST(Occupancy, RegisterLimitedHalfOccupancy) {
  // 64 regs: 2048/warp; 16384/2048 = 8 warps per sub-partition -> 32 warps
  // -> 4 blocks of 8 warps -> 32/64.
  const auto d = estimate_occupancy_detail(kernel(kLargeGrid, 256, 64), v100());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->block_limit_registers, 4);
  EXPECT_EQ(d->max_active_blocks_per_sm, 4);
  EXPECT_DOUBLE_EQ(d->achieved_occupancy, 0.5);
}

TEST(Occupancy, RegistersRoundUpPerWarpToAllocationUnit) {
  // 33 regs * 32 = 1056 -> 1280 (= 40 regs/thread); 16384/1280 = 12 warps per
  // sub-partition -> 48 warps -> 6 blocks of 8 warps -> 48/64.
  const auto d = estimate_occupancy_detail(kernel(kLargeGrid, 256, 33), v100());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->block_limit_registers, 6);
  EXPECT_DOUBLE_EQ(d->achieved_occupancy, 0.75);
}

TEST(Occupancy, RegistersAreSplitOverFourSubPartitions) {
  // 88 regs * 32 = 2816/warp. Per sub-partition 16384/2816 = 5 warps -> 20
  // warps -> 10 two-warp blocks -> 20/64 = 31.25%. Pooling all 65536
  // registers would wrongly give 23 warps -> 11 blocks. (A real kernel of
  // the ResNet-50 trace; Kineto reports 31%.)
  const auto d = estimate_occupancy_detail(kernel(kLargeGrid, 64, 88, 3328), v100());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->block_limit_registers, 10);
  EXPECT_EQ(d->max_active_blocks_per_sm, 10);
  EXPECT_DOUBLE_EQ(d->achieved_occupancy, 0.3125);
}

TEST(Occupancy, SharedMemoryLimitedWithAllocationGranularity) {
  // 40000 B -> 40192 (256-byte units on Volta); 98304/40192 = 2 blocks of 4
  // warps -> 8/64.
  const auto d = estimate_occupancy_detail(kernel(kLargeGrid, 128, 16, 40000), v100());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->block_limit_shared_memory, 2);
  EXPECT_EQ(d->max_active_blocks_per_sm, 2);
  EXPECT_DOUBLE_EQ(d->achieved_occupancy, 0.125);
}

TEST(Occupancy, AmpereReservesOneKiBOfSharedMemoryPerBlock) {
  // 128 threads, 86 regs, 32 KiB: registers 2752 -> 2816/warp, 5 warps per
  // sub-partition -> 20 warps -> 5 blocks. Shared 32768 + 1024 reserved =
  // 33792; 167936/33792 = 4 blocks (5 without the reservation) -> 16/64.
  // (A real kernel of the AlexNet A100 trace; Kineto reports 25%.)
  const auto d = estimate_occupancy_detail(kernel(108 * 100, 128, 86, 32768), a100());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->block_limit_registers, 5);
  EXPECT_EQ(d->block_limit_shared_memory, 4);
  EXPECT_DOUBLE_EQ(d->achieved_occupancy, 0.25);
  // The reservation applies to kernels with no shared memory too.
  EXPECT_EQ(estimate_occupancy_detail(kernel(10800, 128, 16), a100())->block_limit_shared_memory, 164);
}

TEST(Occupancy, BlocksPerSmLimitByComputeCapability) {
  // One-warp blocks: the per-SM block cap binds.
  DeviceInfo turing;  // T4: 16 blocks, 32 warps per SM
  turing.compute_major = 7;
  turing.compute_minor = 5;
  turing.sm_count = 40;
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(40 * 100, 32, 16), turing), 16.0 / 32);
  DeviceInfo ada;  // 8.9: 24 blocks, 48 warps per SM
  ada.compute_major = 8;
  ada.compute_minor = 9;
  ada.sm_count = 128;
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(128 * 100, 32, 16), ada), 24.0 / 48);
  DeviceInfo ga10x = ada;  // 8.6: 16 blocks, 48 warps per SM
  ga10x.compute_minor = 6;
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(128 * 100, 32, 16), ga10x), 16.0 / 48);
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(kLargeGrid, 32, 16), v100()), 32.0 / 64);
  // A reported device limit wins over the table.
  DeviceInfo reported = v100();
  reported.max_blocks_per_sm = 16;
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(kLargeGrid, 32, 16), reported), 16.0 / 64);
}

TEST(Occupancy, SmallGridCapsOccupancyAveragedOverAllSms) {
  // 40 blocks on 80 SMs: 0.5 blocks per SM on average -> 0.5 * 8 / 64.
  const auto d = estimate_occupancy_detail(kernel(40, 256, 32), v100());
  ASSERT_TRUE(d);
  EXPECT_DOUBLE_EQ(d->grid_blocks_per_sm, 0.5);
  EXPECT_DOUBLE_EQ(d->active_blocks_per_sm, 0.5);
  EXPECT_DOUBLE_EQ(d->theoretical_occupancy, 1.0);
  EXPECT_DOUBLE_EQ(d->achieved_occupancy, 0.0625);
  // One 64-thread block: 1/80 of 2 warps out of 64.
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(1, 64, 24), v100()), 2.0 / 64 / 80);
  // 120 blocks: 1.5 per SM, below the limit of 8.
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(120, 256, 32), v100()), 1.5 * 8 / 64);
}

TEST(Occupancy, PartialWarpsCountAsWholeWarps) {
  // 48 threads = 2 warps; 1000 blocks/SM available -> 32 blocks cap -> 64 warps.
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(kLargeGrid, 48, 16), v100()), 1.0);
  const auto d = estimate_occupancy_detail(kernel(80, 48, 16), v100());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->warps_per_block, 2);
  EXPECT_DOUBLE_EQ(d->achieved_occupancy, 2.0 / 64);
}

TEST(Occupancy, MissingDeviceFieldsComeFromComputeCapability) {
  DeviceInfo sparse;
  sparse.compute_major = 7;
  sparse.compute_minor = 0;
  sparse.sm_count = 80;
  for (const auto& k : {kernel(kLargeGrid, 256, 64), kernel(kLargeGrid, 64, 88, 3328),
                        kernel(kLargeGrid, 128, 16, 40000), kernel(40, 256, 32)}) {
    EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(k, sparse), *estimate_achieved_occupancy(k, v100()));
  }
}

TEST(Occupancy, AmdUsesWavefrontsAndLdsButNotRegisters) {
  DeviceInfo mi250;  // deviceProperties of hta_mi250_rocm_train.json.gz
  mi250.name = "AMD Radeon Graphics";
  mi250.compute_major = 9;
  mi250.compute_minor = 0;
  mi250.sm_count = 104;
  mi250.max_threads_per_sm = 2048;
  mi250.shared_memory_per_sm_bytes = 65536;
  mi250.warp_size = 64;
  // 256 threads = 4 wavefronts of 32 slots -> 8 blocks; 200 registers are not
  // modelled on AMD, so they do not limit.
  const auto d = estimate_occupancy_detail(kernel(104 * 100, 256, 200), mi250);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->warps_per_block, 4);
  EXPECT_EQ(d->max_warps_per_sm, 32);
  EXPECT_EQ(d->block_limit_registers, kUnlimitedBlocks);
  EXPECT_DOUBLE_EQ(d->achieved_occupancy, 1.0);
  // 20 KiB of LDS -> 3 blocks of 4 wavefronts -> 12/32.
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(104 * 100, 256, 0, 20 * 1024), mi250), 12.0 / 32);
}

TEST(Occupancy, UnknownOrImpossibleConfigurationsAreNullopt) {
  EXPECT_EQ(estimate_achieved_occupancy(kernel(0, 256, 32), v100()), std::nullopt);
  EXPECT_EQ(estimate_achieved_occupancy(kernel(10, 0, 32), v100()), std::nullopt);
  DeviceInfo no_sms = v100();
  no_sms.sm_count = 0;
  EXPECT_EQ(estimate_achieved_occupancy(kernel(10, 256, 32), no_sms), std::nullopt);
  DeviceInfo unknown;  // no compute capability, no thread limit
  unknown.sm_count = 80;
  EXPECT_EQ(estimate_achieved_occupancy(kernel(10, 256, 32), unknown), std::nullopt);
  unknown.max_threads_per_sm = 2048;  // enough for a kernel without shared memory
  EXPECT_DOUBLE_EQ(*estimate_achieved_occupancy(kernel(kLargeGrid, 256, 32), unknown), 1.0);
  EXPECT_EQ(estimate_achieved_occupancy(kernel(kLargeGrid, 256, 32, 1024), unknown), std::nullopt);
  EXPECT_EQ(estimate_achieved_occupancy(kernel(10, 2048, 16), v100()), std::nullopt);       // > 1024 threads
  EXPECT_EQ(estimate_achieved_occupancy(kernel(10, 256, 300), v100()), std::nullopt);       // > 255 regs
  EXPECT_EQ(estimate_achieved_occupancy(kernel(10, 1024, 128), v100()), std::nullopt);      // 128K regs/block
  EXPECT_EQ(estimate_achieved_occupancy(kernel(10, 128, 16, 100000), v100()), std::nullopt);  // > 96 KiB
}

// ---- Validation against Kineto on real traces ------------------------------

std::string traces_dir() {
  if (const char* env = std::getenv("GPUUTIL_TRACES_DIR"); env != nullptr && *env != '\0') return env;
  return GPUUTIL_TRACES_DIR;
}

std::optional<std::string> read_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return std::nullopt;
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, size_t(n));
  const bool ok = n == 0;
  gzclose(f);
  if (!ok) return std::nullopt;
  return out;
}

struct Agreement {
  // Kernels with more than 48 KiB of shared memory (an opt-in launch). Kineto
  // asks cuda_occupancy.h with the default per-block limit (48 KiB), so it
  // reports 0% for every one of them although they ran; we count them apart
  // (and check that Kineto did say 0) instead of comparing.
  int opt_in_shared = 0;
  int opt_in_shared_kineto_zero = 0;
  int opt_in_shared_estimated = 0;  // ... for which we give a non-zero estimate
  int kernels = 0;            // the other kernel events with a launch config and Kineto's occupancy
  int estimated = 0;          // ... for which we return an estimate
  int within_1pp = 0;         // |ours - Kineto| <= 1 percentage point
  int same_integer = 0;       // ours rounded as Kineto rounds == Kineto's integer
  int half_point_ties = 0;    // not the same integer, but ours is exactly x.5
  int limit_binding = 0;      // grid gives more blocks than fit: the calculator decides
  int limit_binding_within_1pp = 0;
  int blocks_per_sm_agree = 0;  // our grid blocks/SM == Kineto's "blocks per SM"
};

// Kineto's deviceProperties -> DeviceInfo, by device id.
std::map<int, DeviceInfo> device_infos(const nlohmann::json& trace) {
  std::map<int, DeviceInfo> out;
  if (!trace.contains("deviceProperties")) return out;
  for (const auto& p : trace["deviceProperties"]) {
    DeviceInfo d;
    d.id = p.value("id", 0);
    d.name = p.value("name", "");
    d.compute_major = p.value("computeMajor", 0);
    d.compute_minor = p.value("computeMinor", 0);
    d.sm_count = p.value("numSms", 0);
    d.max_threads_per_sm = p.value("maxThreadsPerMultiprocessor", 0);
    d.registers_per_sm = p.value("regsPerMultiprocessor", 0);
    d.shared_memory_per_sm_bytes =
        p.value("sharedMemPerMultiprocessor", p.value("maxSharedMemoryPerMultiProcessor", 0));
    d.warp_size = p.value("warpSize", 0);
    out[d.id] = d;
  }
  return out;
}

std::optional<Agreement> measure(const std::string& file) {
  const auto text = read_gzip(traces_dir() + "/" + file);
  if (!text) return std::nullopt;
  const auto trace = nlohmann::json::parse(*text);
  const auto devices = device_infos(trace);
  Agreement a;
  for (const auto& e : trace["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat != "kernel" && cat != "Kernel") continue;
    const auto& args = e["args"];
    if (!args.contains("grid") || !args.contains("block") || !args.contains("est. achieved occupancy %"))
      continue;
    const auto dev = devices.find(args.value("device", -1));
    if (dev == devices.end()) continue;
    DeviceActivity k;
    for (int i = 0; i < 3; ++i) {
      k.grid[i] = args["grid"][i].get<uint32_t>();
      k.block[i] = args["block"][i].get<uint32_t>();
    }
    k.registers_per_thread = args.value("registers per thread", 0u);
    k.shared_memory_bytes = args.value("shared memory", 0u);
    const double kineto_pct = args["est. achieved occupancy %"].get<double>();
    if (k.shared_memory_bytes > 48 * 1024) {
      ++a.opt_in_shared;
      a.opt_in_shared_kineto_zero += kineto_pct == 0;
      const auto occupancy = estimate_achieved_occupancy(k, dev->second);
      a.opt_in_shared_estimated += occupancy && *occupancy > 0;
      continue;
    }
    ++a.kernels;
    const auto d = estimate_occupancy_detail(k, dev->second);
    if (!d) continue;
    ++a.estimated;
    const double ours_pct = d->achieved_occupancy * 100.0;
    const bool close = std::fabs(ours_pct - kineto_pct) <= 1.0;
    a.within_1pp += close;
    if (int(0.5 + ours_pct) == int(kineto_pct)) {
      ++a.same_integer;
    } else if (std::fabs(ours_pct - std::floor(ours_pct) - 0.5) < 1e-9) {
      ++a.half_point_ties;
    }
    if (d->grid_blocks_per_sm > d->max_active_blocks_per_sm) {
      ++a.limit_binding;
      a.limit_binding_within_1pp += close;
    }
    const double kineto_bps = args.value("blocks per SM", -1.0);
    a.blocks_per_sm_agree += std::fabs(d->grid_blocks_per_sm - kineto_bps) <= 1e-5 * std::max(1.0, kineto_bps);
  }
  std::cout << file << ": opt-in shared " << a.opt_in_shared << " (Kineto 0%: " << a.opt_in_shared_kineto_zero
            << ", ours > 0: " << a.opt_in_shared_estimated << "), kernels " << a.kernels << ", estimated "
            << a.estimated << ", within 1pp " << a.within_1pp << ", same integer " << a.same_integer
            << ", .5 ties " << a.half_point_ties << ", limit binding " << a.limit_binding << " (within 1pp "
            << a.limit_binding_within_1pp << "), blocks/SM agree " << a.blocks_per_sm_agree << "\n";
  return a;
}

// Measured on kineto_resnet50_nw4_v100.json.gz (V100-DGXS, Kineto 2021):
//   8868 kernels, all 8868 estimated; 8868/8868 (100%) within 1 percentage
//   point of Kineto; 8694 (98.0%) give Kineto's exact integer and the other
//   174 are exact x.5 ties (576 blocks of 64 threads on 80 SMs = 22.5%), which
//   Kineto, computing in float, rounds down to 22. 2862 kernels have a grid
//   larger than the calculator's per-SM limit (register-, shared-memory-,
//   warp- and block-limited alike); all 2862 agree. Kineto's "blocks per SM"
//   (blocks / numSms) matches ours for 8868/8868.
// Rounding the grid cap up (ceil(blocks / SMs), occupancy of the busy SMs
// only) instead of averaging agrees for only 3684/8868 (41.5%), which is why
// the estimate averages over all SMs as Kineto does.
TEST(OccupancyValidation, AgreesWithKinetoOnResNet50V100Trace) {
  const auto a = measure("kineto_resnet50_nw4_v100.json.gz");
  if (!a) GTEST_SKIP() << "trace not found under " << traces_dir();
  EXPECT_EQ(a->opt_in_shared, 0);  // the largest launch uses exactly 48 KiB
  EXPECT_EQ(a->kernels, 8868);
  EXPECT_EQ(a->estimated, a->kernels);
  EXPECT_EQ(a->within_1pp, a->kernels);  // measured 100%
  EXPECT_EQ(a->same_integer + a->half_point_ties, a->kernels);
  EXPECT_GE(a->same_integer, a->kernels * 98 / 100);  // measured 8694 = 98.04%
  EXPECT_EQ(a->limit_binding, 2862);
  EXPECT_EQ(a->limit_binding_within_1pp, a->limit_binding);
  EXPECT_EQ(a->blocks_per_sm_agree, a->kernels);
}

// The other real NVIDIA traces with deviceProperties (A100, H100, two more
// V100 runs). Measured (kernels compared / within 1pp / opt-in-shared kernels
// set apart):
//   hta_alexnet_a100_sync                73 / 73 /   6
//   hta_event_sync_a100                   4 /  4 /   0
//   hta_nccl_a100_rank0                2286 / 2286 / 414
//   hta_train_v100_dataloader_nccl_rank1 9876 / 9876 / 0  (340 x.5 ties)
//   hta_train_v100_ns_resolution       4350 / 4350 /   0  (65 x.5 ties)
//   tracelens_h100_bert_small_inference  51 / 51 /   9
// blocks/SM identical for every compared kernel. The AlexNet A100 trace needs
// the 1 KiB per-block shared-memory reservation: without it 6 of its 73
// kernels (32 KiB of shared memory, Kineto 25%) come out at 29.6-31.3%. Every one of
// the 429 opt-in kernels has Kineto 0% and a non-zero estimate from us.
TEST(OccupancyValidation, AgreesWithKinetoOnOtherNvidiaTraces) {
  int files = 0;
  for (const char* file : {"hta_alexnet_a100_sync.json.gz", "hta_event_sync_a100.json.gz",
                           "hta_nccl_a100_rank0.json.gz", "hta_train_v100_dataloader_nccl_rank1.json.gz",
                           "hta_train_v100_ns_resolution.json.gz", "tracelens_h100_bert_small_inference.json.gz"}) {
    const auto a = measure(file);
    if (!a) continue;
    ++files;
    EXPECT_GT(a->kernels, 0) << file;
    EXPECT_EQ(a->estimated, a->kernels) << file;
    EXPECT_EQ(a->within_1pp, a->kernels) << file;
    EXPECT_EQ(a->same_integer + a->half_point_ties, a->kernels) << file;
    EXPECT_EQ(a->limit_binding_within_1pp, a->limit_binding) << file;
    EXPECT_EQ(a->blocks_per_sm_agree, a->kernels) << file;
    EXPECT_EQ(a->opt_in_shared_kineto_zero, a->opt_in_shared) << file;
    EXPECT_EQ(a->opt_in_shared_estimated, a->opt_in_shared) << file;
  }
  if (files == 0) GTEST_SKIP() << "traces not found under " << traces_dir();
}

}  // namespace
}  // namespace gpuutil
