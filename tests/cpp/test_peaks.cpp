// Tests for the MFU peak table (gpuutil/peaks.h).
//
// Pins, by device name as the runtime reports it, which datasheet value each
// device and dtype resolves to: form-factor variants (H100 SXM/PCIe/NVL, V100
// SXM2/PCIe), names that contain one another (L4/L40/L40S, A10/A10G/A100,
// B200/GB200, V100/V100S), SM-count and compute-capability refinement, AMD
// GCDs and partitions, and dtype aliases. Values are TFLOP/s as in
// docs/mfu.md; the function returns FLOP/s.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "gpuutil/peaks.h"

namespace gpuutil {
namespace {

DeviceInfo device(std::string name, int32_t major = 0, int32_t minor = 0, int32_t sms = 0,
                  int32_t warp_size = 0) {
  DeviceInfo d;
  d.name = std::move(name);
  d.compute_major = major;
  d.compute_minor = minor;
  d.sm_count = sms;
  d.warp_size = warp_size;
  return d;
}

// Peak in TFLOP/s, or -1 for nullopt (so EXPECT_DOUBLE_EQ prints both).
double tflops(const DeviceInfo& d, const char* dtype) {
  const std::optional<double> p = peak_flops_per_s(d, dtype);
  return p ? *p / 1e12 : -1.0;
}

TEST(Peaks, H100SxmMatchesWhitepaperDenseValues) {
  const DeviceInfo h100 = device("NVIDIA H100 80GB HBM3", 9, 0, 132);
  EXPECT_DOUBLE_EQ(tflops(h100, "bf16"), 989.4);
  EXPECT_DOUBLE_EQ(tflops(h100, "fp16"), 989.4);
  EXPECT_DOUBLE_EQ(tflops(h100, "fp8"), 1978.9);
  EXPECT_DOUBLE_EQ(tflops(h100, "int8"), 1978.9);
  EXPECT_DOUBLE_EQ(tflops(h100, "tf32"), 494.7);
  EXPECT_DOUBLE_EQ(tflops(h100, "fp32"), 66.9);
  EXPECT_DOUBLE_EQ(tflops(h100, "fp64"), 66.9);  // FP64 Tensor Core, not the 33.5 vector rate
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA H100-SXM5-80GB"), "bf16"), 989.4);
}

TEST(Peaks, H100FormFactorsByNameThenBySmCount) {
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA H100 PCIe", 9, 0, 114), "bf16"), 756.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA H100 NVL", 9, 0, 132), "bf16"), 835.5);
  // A bare name: the SM count decides (PCIe has 114 SMs, SXM 132).
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA H100", 9, 0, 114), "bf16"), 756.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA H100", 9, 0, 132), "bf16"), 989.4);
  // Nothing but the name: the SXM part is the default.
  EXPECT_DOUBLE_EQ(tflops(device("H100"), "bf16"), 989.4);
}

TEST(Peaks, H200AndGh200HaveH100SxmCompute) {
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA H200", 9, 0, 132), "bf16"), 989.4);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA H200", 9, 0, 132), "fp8"), 1978.9);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA H200 NVL", 9, 0, 132), "bf16"), 835.5);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA GH200 480GB", 9, 0, 132), "bf16"), 989.4);
}

TEST(Peaks, A100AllFormFactorsShareTensorPeaks) {
  for (const char* name : {"NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB",
                           "NVIDIA A100 80GB PCIe", "NVIDIA A100-PG509-200"}) {
    const DeviceInfo a100 = device(name, 8, 0, 108);
    EXPECT_DOUBLE_EQ(tflops(a100, "bf16"), 312.0) << name;
    EXPECT_DOUBLE_EQ(tflops(a100, "fp16"), 312.0) << name;
    EXPECT_DOUBLE_EQ(tflops(a100, "tf32"), 156.0) << name;
    EXPECT_DOUBLE_EQ(tflops(a100, "fp32"), 19.5) << name;
    EXPECT_DOUBLE_EQ(tflops(a100, "fp64"), 19.5) << name;
    EXPECT_DOUBLE_EQ(tflops(a100, "int8"), 624.0) << name;
    EXPECT_EQ(peak_flops_per_s(a100, "fp8"), std::nullopt) << name;  // no FP8 on Ampere
  }
}

TEST(Peaks, V100VariantsAndMissingDtypes) {
  const DeviceInfo sxm2 = device("Tesla V100-SXM2-16GB", 7, 0, 80);
  EXPECT_DOUBLE_EQ(tflops(sxm2, "fp16"), 125.0);
  EXPECT_DOUBLE_EQ(tflops(sxm2, "fp32"), 15.7);
  EXPECT_DOUBLE_EQ(tflops(sxm2, "fp64"), 7.8);
  EXPECT_EQ(peak_flops_per_s(sxm2, "bf16"), std::nullopt);
  EXPECT_EQ(peak_flops_per_s(sxm2, "tf32"), std::nullopt);
  EXPECT_EQ(peak_flops_per_s(sxm2, "fp8"), std::nullopt);
  EXPECT_DOUBLE_EQ(tflops(device("Tesla V100-PCIE-32GB", 7, 0, 80), "fp16"), 112.0);
  EXPECT_DOUBLE_EQ(tflops(device("Tesla V100-PCIE-32GB", 7, 0, 80), "fp32"), 14.0);
  EXPECT_DOUBLE_EQ(tflops(device("Tesla V100-DGXS-32GB", 7, 0, 80), "fp16"), 125.0);  // DGX Station
  EXPECT_DOUBLE_EQ(tflops(device("Tesla V100-SXM3-32GB", 7, 0, 80), "fp16"), 125.0);
  EXPECT_DOUBLE_EQ(tflops(device("Tesla V100S-PCIE-32GB", 7, 0, 80), "fp16"), 130.0);  // not "V100"
}

TEST(Peaks, NamesContainingOtherNamesResolveToTheirOwnPart) {
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA L4", 8, 9, 58), "bf16"), 121.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA L40", 8, 9, 142), "bf16"), 181.05);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA L40S", 8, 9, 142), "bf16"), 362.05);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA L40S", 8, 9, 142), "fp8"), 733.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA A10", 8, 6, 72), "bf16"), 125.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA A10G", 8, 6, 80), "bf16"), 70.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA A10G", 8, 6, 80), "fp32"), 35.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA B200", 10, 0, 148), "bf16"), 2250.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA GB200", 10, 0, 152), "bf16"), 2500.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA GB200", 10, 0, 152), "fp8"), 5000.0);
}

TEST(Peaks, TuringAndAda) {
  const DeviceInfo t4 = device("Tesla T4", 7, 5, 40);
  EXPECT_DOUBLE_EQ(tflops(t4, "fp16"), 65.0);
  EXPECT_DOUBLE_EQ(tflops(t4, "fp32"), 8.1);
  EXPECT_DOUBLE_EQ(tflops(t4, "int8"), 130.0);
  EXPECT_EQ(peak_flops_per_s(t4, "bf16"), std::nullopt);
  const DeviceInfo rtx = device("NVIDIA GeForce RTX 4090", 8, 9, 128);
  EXPECT_DOUBLE_EQ(tflops(rtx, "bf16"), 165.2);  // FP32 accumulate
  EXPECT_DOUBLE_EQ(tflops(rtx, "fp32"), 82.6);
  // The laptop part shares the name but not the chip.
  EXPECT_EQ(peak_flops_per_s(device("NVIDIA GeForce RTX 4090 Laptop GPU", 8, 9, 76), "bf16"), std::nullopt);
}

TEST(Peaks, AmdInstinct) {
  const DeviceInfo mi300x = device("AMD Instinct MI300X", 9, 4, 304, 64);
  EXPECT_DOUBLE_EQ(tflops(mi300x, "bf16"), 1307.4);
  EXPECT_DOUBLE_EQ(tflops(mi300x, "fp8"), 2614.9);
  EXPECT_DOUBLE_EQ(tflops(mi300x, "fp32"), 163.4);
  EXPECT_DOUBLE_EQ(tflops(mi300x, "tf32"), 653.7);
  EXPECT_DOUBLE_EQ(tflops(device("AMD Instinct MI325X", 9, 4, 304, 64), "bf16"), 1307.4);
  // Whole-package MI250X / MI250 (datasheet values are per OAM package).
  EXPECT_DOUBLE_EQ(tflops(device("AMD Instinct MI250X", 9, 0, 220, 64), "bf16"), 383.0);
  EXPECT_DOUBLE_EQ(tflops(device("AMD Instinct MI250", 9, 0, 208, 64), "bf16"), 362.1);
  EXPECT_EQ(peak_flops_per_s(device("AMD Instinct MI250X", 9, 0, 220, 64), "fp8"), std::nullopt);
}

TEST(Peaks, AmdGcdsAndPartitionsScaleBySmShare) {
  // ROCm shows each MI250(X) GCD as a device, often under one combined name;
  // the CU count picks the part and halves the package peak.
  EXPECT_DOUBLE_EQ(tflops(device("AMD Instinct MI250X/MI250", 9, 0, 110, 64), "bf16"), 191.5);
  EXPECT_DOUBLE_EQ(tflops(device("AMD Instinct MI250X/MI250", 9, 0, 104, 64), "bf16"), 181.05);
  // No product name at all (the HTA MI250 trace): architecture + CU count.
  DeviceInfo radeon = device("AMD Radeon Graphics", 9, 0, 104, 64);
  EXPECT_DOUBLE_EQ(tflops(radeon, "bf16"), 181.05);
  DeviceInfo generic_mi300 = device("AMD Radeon Graphics", 9, 4, 304, 64);
  generic_mi300.total_memory_bytes = int64_t(192) << 30;
  EXPECT_DOUBLE_EQ(tflops(generic_mi300, "bf16"), 1307.4);
  // MI300X in CPX mode: 8 partitions of 38 CUs.
  EXPECT_DOUBLE_EQ(tflops(device("AMD Instinct MI300X", 9, 4, 38, 64), "bf16"), 1307.4 / 8);
  // An unknown AMD part stays unknown.
  EXPECT_EQ(peak_flops_per_s(device("AMD Radeon Graphics", 9, 4, 228, 64), "bf16"), std::nullopt);
}

TEST(Peaks, MigSliceScalesBySmShare) {
  EXPECT_NEAR(tflops(device("NVIDIA H100 80GB HBM3", 9, 0, 66), "bf16"), 989.4 / 2, 1e-9);
  EXPECT_NEAR(tflops(device("NVIDIA A100-SXM4-40GB", 8, 0, 14), "bf16"), 312.0 * 14 / 108, 1e-9);
}

TEST(Peaks, ComputeCapabilityMustAgreeWithTheName) {
  EXPECT_EQ(peak_flops_per_s(device("NVIDIA H100 80GB HBM3", 8, 0, 132), "bf16"), std::nullopt);
  EXPECT_EQ(peak_flops_per_s(device("Tesla T4", 8, 9, 40), "fp16"), std::nullopt);
}

TEST(Peaks, UnknownDevicesAndDtypes) {
  EXPECT_EQ(peak_flops_per_s(device(""), "bf16"), std::nullopt);
  EXPECT_EQ(peak_flops_per_s(device("NVIDIA GeForce GTX 1080", 6, 1, 20), "fp32"), std::nullopt);
  EXPECT_EQ(peak_flops_per_s(device("Intel(R) Data Center GPU Max 1550"), "bf16"), std::nullopt);
  const DeviceInfo h100 = device("NVIDIA H100 80GB HBM3", 9, 0, 132);
  EXPECT_EQ(peak_flops_per_s(h100, "int4"), std::nullopt);
  EXPECT_EQ(peak_flops_per_s(h100, ""), std::nullopt);
  EXPECT_EQ(peak_flops_per_s(h100, "bf16x"), std::nullopt);
}

TEST(Peaks, DtypeAliases) {
  const DeviceInfo h100 = device("NVIDIA H100 80GB HBM3", 9, 0, 132);
  for (const char* a : {"bf16", "BF16", "bfloat16", "torch.bfloat16"}) EXPECT_DOUBLE_EQ(tflops(h100, a), 989.4) << a;
  for (const char* a : {"fp16", "float16", "half", "torch.float16"}) EXPECT_DOUBLE_EQ(tflops(h100, a), 989.4) << a;
  for (const char* a : {"fp32", "float32", "float", "torch.float32"}) EXPECT_DOUBLE_EQ(tflops(h100, a), 66.9) << a;
  for (const char* a : {"fp64", "float64", "double"}) EXPECT_DOUBLE_EQ(tflops(h100, a), 66.9) << a;
  for (const char* a : {"tf32", "TF32"}) EXPECT_DOUBLE_EQ(tflops(h100, a), 494.7) << a;
  for (const char* a : {"fp8", "fp8_e4m3", "fp8_e5m2", "float8_e4m3fn", "torch.float8_e5m2", "e4m3"})
    EXPECT_DOUBLE_EQ(tflops(h100, a), 1978.9) << a;
  for (const char* a : {"int8", "INT8"}) EXPECT_DOUBLE_EQ(tflops(h100, a), 1978.9) << a;
}

TEST(Peaks, DevicePropertiesOfTheSharedRealTraces) {
  // deviceProperties[0] of each trace in shared/traces, copied verbatim.
  EXPECT_DOUBLE_EQ(tflops(device("Tesla V100-DGXS-32GB", 7, 0, 80, 32), "fp16"), 125.0);
  EXPECT_DOUBLE_EQ(tflops(device("Tesla V100-SXM2-32GB", 7, 0, 80, 32), "fp16"), 125.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA A100-PG509-200", 8, 0, 108, 32), "bf16"), 312.0);
  EXPECT_DOUBLE_EQ(tflops(device("NVIDIA H100 80GB HBM3", 9, 0, 132, 32), "bf16"), 989.4);
  EXPECT_DOUBLE_EQ(tflops(device("AMD Instinct MI300X", 9, 4, 304, 64), "bf16"), 1307.4);
  EXPECT_DOUBLE_EQ(tflops(device("AMD Radeon Graphics", 9, 0, 104, 64), "bf16"), 181.05);
}

}  // namespace
}  // namespace gpuutil
