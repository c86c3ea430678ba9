// Peak dense FLOP/s per device and dtype: the denominator of MFU.
//
// A small table of vendor datasheet / whitepaper numbers (dense, i.e. without
// 2:4 structured sparsity), keyed by device identity. The device is matched
// on whole-word tokens of its name ("H100", "PCIe", "MI300X", ...), refined by
// compute capability (a name token never matches a part of another
// generation) and by SM/CU count where the name is ambiguous (a bare "H100"
// with 114 SMs is the PCIe part, with 132 the SXM part). A device that shows
// fewer SMs than the full part (a MIG slice, one GCD of an MI250X, an MI300X
// CPX partition) gets the peak scaled by its share of SMs. Every value and its
// source is listed in docs/mfu.md; keep the two in step.
#include "gpuutil/peaks.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpuutil {
namespace {

// Dense peak throughput in TFLOP/s (TOPS for int8); 0 = the part has no such
// rate in its datasheet (e.g. bf16 on V100), which reads as "not in table".
struct PeakTflops {
  double fp64 = 0;
  double fp32 = 0;
  double tf32 = 0;
  double bf16 = 0;
  double fp16 = 0;
  double fp8 = 0;
  double int8 = 0;
};

enum class Vendor : uint8_t { kNvidia, kAmd };

struct Part {
  const char* label;
  Vendor vendor;
  // Whole name tokens (lowercase) that identify the family; any one matches.
  std::array<const char*, 2> family_tokens;
  // Token prefixes that pick this variant within its family ("pcie", "sxm").
  std::array<const char*, 3> variant_tokens;
  // SM (NVIDIA) or CU (AMD) counts that identify this part. [0] is the full
  // part, the reference for scaling partitions; 0 = not used.
  std::array<int32_t, 2> sm_counts;
  int32_t compute_major;  // what the runtime reports (AMD: gfx90a -> 9.0, gfx942 -> 9.4)
  int32_t compute_minor;
  int32_t memory_gib;  // nominal, only to tell apart parts with one CU count (MI300X/MI325X)
  PeakTflops tflops;
};

// fp64 is the FP64 Tensor Core / Matrix Core rate where the part has one,
// else the vector rate. fp32 is the non-tensor rate on NVIDIA (FP32 GEMMs do
// not use Tensor Cores unless TF32 is enabled) and the FP32 matrix rate on AMD
// (FP32 GEMMs run on the Matrix Cores). fp16/bf16 are FP32-accumulate rates.
// Order matters: within a family the first part is the default variant.
// clang-format off
const Part kParts[] = {
  //  label              vendor          family tokens         variant tokens              SMs         cc     GiB   fp64   fp32   tf32    bf16    fp16    fp8     int8
  {"B200",              Vendor::kNvidia, {"b200", nullptr},    {nullptr, nullptr, nullptr}, {0, 0},     10, 0, 180, {0,     0,     1125,  2250,   2250,   4500,   4500}},
  {"GB200",             Vendor::kNvidia, {"gb200", nullptr},   {nullptr, nullptr, nullptr}, {0, 0},     10, 0, 186, {0,     0,     1250,  2500,   2500,   5000,   5000}},
  {"H200 SXM",          Vendor::kNvidia, {"h200", nullptr},    {"sxm", "hbm3", nullptr},    {132, 0},   9, 0, 141,  {66.9,  66.9,  494.7, 989.4,  989.4,  1978.9, 1978.9}},
  {"H200 NVL",          Vendor::kNvidia, {"h200", nullptr},    {"nvl", nullptr, nullptr},   {132, 0},   9, 0, 141,  {60,    60,    417.5, 835.5,  835.5,  1670.5, 1670.5}},
  {"GH200",             Vendor::kNvidia, {"gh200", nullptr},   {nullptr, nullptr, nullptr}, {132, 0},   9, 0, 96,   {66.9,  66.9,  494.7, 989.4,  989.4,  1978.9, 1978.9}},
  {"H100 SXM",          Vendor::kNvidia, {"h100", nullptr},    {"sxm", "hbm3", nullptr},    {132, 0},   9, 0, 80,   {66.9,  66.9,  494.7, 989.4,  989.4,  1978.9, 1978.9}},
  {"H100 PCIe",         Vendor::kNvidia, {"h100", nullptr},    {"pcie", nullptr, nullptr},  {114, 0},   9, 0, 80,   {51.2,  51.2,  378,   756,    756,    1513,   1513}},
  {"H100 NVL",          Vendor::kNvidia, {"h100", nullptr},    {"nvl", nullptr, nullptr},   {132, 0},   9, 0, 94,   {60,    60,    417.5, 835.5,  835.5,  1670.5, 1670.5}},
  {"A100",              Vendor::kNvidia, {"a100", nullptr},    {nullptr, nullptr, nullptr}, {108, 0},   8, 0, 80,   {19.5,  19.5,  156,   312,    312,    0,      624}},
  {"A10G",              Vendor::kNvidia, {"a10g", nullptr},    {nullptr, nullptr, nullptr}, {80, 0},    8, 6, 24,   {0,     35,    35,    70,     70,     0,      140}},
  {"A10",               Vendor::kNvidia, {"a10", nullptr},     {nullptr, nullptr, nullptr}, {72, 0},    8, 6, 24,   {0,     31.2,  62.5,  125,    125,    0,      250}},
  {"L40S",              Vendor::kNvidia, {"l40s", nullptr},    {nullptr, nullptr, nullptr}, {142, 0},   8, 9, 48,   {0,     91.6,  183,   362.05, 362.05, 733,    733}},
  {"L40",               Vendor::kNvidia, {"l40", nullptr},     {nullptr, nullptr, nullptr}, {142, 0},   8, 9, 48,   {0,     90.5,  90.5,  181.05, 181.05, 362,    362}},
  {"L4",                Vendor::kNvidia, {"l4", nullptr},      {nullptr, nullptr, nullptr}, {58, 0},    8, 9, 24,   {0,     30.3,  60,    121,    121,    242.5,  242.5}},
  {"RTX 4090",          Vendor::kNvidia, {"4090", nullptr},    {nullptr, nullptr, nullptr}, {128, 0},   8, 9, 24,   {0,     82.6,  82.6,  165.2,  165.2,  330.3,  660.6}},
  {"V100 SXM2",         Vendor::kNvidia, {"v100", nullptr},    {"sxm", "dgxs", nullptr},    {80, 0},    7, 0, 32,   {7.8,   15.7,  0,     0,      125,    0,      0}},
  {"V100 PCIe",         Vendor::kNvidia, {"v100", nullptr},    {"pcie", nullptr, nullptr},  {80, 0},    7, 0, 32,   {7,     14,    0,     0,      112,    0,      0}},
  {"V100S PCIe",        Vendor::kNvidia, {"v100s", nullptr},   {nullptr, nullptr, nullptr}, {80, 0},    7, 0, 32,   {8.2,   16.4,  0,     0,      130,    0,      0}},
  {"T4",                Vendor::kNvidia, {"t4", nullptr},      {nullptr, nullptr, nullptr}, {40, 0},    7, 5, 16,   {0,     8.1,   0,     0,      65,     0,      130}},
  {"MI300X",            Vendor::kAmd,    {"mi300x", nullptr},  {nullptr, nullptr, nullptr}, {304, 0},   9, 4, 192,  {163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9}},
  {"MI325X",            Vendor::kAmd,    {"mi325x", nullptr},  {nullptr, nullptr, nullptr}, {304, 0},   9, 4, 256,  {163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9}},
  {"MI250X",            Vendor::kAmd,    {"mi250x", nullptr},  {nullptr, nullptr, nullptr}, {220, 110}, 9, 0, 128,  {95.7,  95.7,  0,     383,    383,    0,      383}},
  {"MI250",             Vendor::kAmd,    {"mi250", nullptr},   {nullptr, nullptr, nullptr}, {208, 104}, 9, 0, 128,  {90.5,  90.5,  0,     362.1,  362.1,  0,      362.1}},
};
// clang-format on

// Lowercase alphanumeric runs of the name: "Tesla V100-SXM2-16GB" ->
// {"tesla", "v100", "sxm2", "16gb"}.
std::vector<std::string> name_tokens(std::string_view name) {
  std::vector<std::string> tokens;
  std::string current;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      current.push_back(static_cast<char>(std::tolower(u)));
    } else if (!current.empty()) {
      tokens.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

bool has_token(const std::vector<std::string>& tokens, const char* token) {
  if (token == nullptr) return false;
  for (const auto& t : tokens)
    if (t == token) return true;
  return false;
}

bool has_token_prefix(const std::vector<std::string>& tokens, const char* prefix) {
  if (prefix == nullptr) return false;
  const std::string_view p(prefix);
  for (const auto& t : tokens)
    if (std::string_view(t).substr(0, p.size()) == p) return true;
  return false;
}

bool compute_capability_fits(const Part& part, const DeviceInfo& device) {
  if (device.compute_major == 0) return true;  // unknown: the name decides
  return device.compute_major == part.compute_major && device.compute_minor == part.compute_minor;
}

bool sm_count_identifies(const Part& part, int32_t sm_count) {
  if (sm_count <= 0) return false;
  for (int32_t n : part.sm_counts)
    if (n > 0 && n == sm_count) return true;
  return false;
}

bool variant_named(const Part& part, const std::vector<std::string>& tokens) {
  for (const char* v : part.variant_tokens)
    if (has_token_prefix(tokens, v)) return true;
  return false;
}

bool looks_amd(const std::vector<std::string>& tokens, const DeviceInfo& device) {
  return device.warp_size == 64 || has_token(tokens, "amd") || has_token(tokens, "radeon") ||
         has_token(tokens, "instinct");
}

// Keeps the candidates that satisfy pred, unless none does.
template <typename Pred>
void narrow(std::vector<const Part*>& candidates, Pred pred) {
  std::vector<const Part*> kept;
  for (const Part* p : candidates)
    if (pred(*p)) kept.push_back(p);
  if (!kept.empty()) candidates = std::move(kept);
}

const Part* match_part(const DeviceInfo& device) {
  const auto tokens = name_tokens(device.name);
  if (has_token(tokens, "laptop") || has_token(tokens, "mobile")) return nullptr;  // different clocks and SMs

  std::vector<const Part*> candidates;
  for (const Part& p : kParts) {
    bool named = false;
    for (const char* f : p.family_tokens) named = named || has_token(tokens, f);
    if (named && compute_capability_fits(p, device)) candidates.push_back(&p);
  }
  // ROCm may name an MI250 GCD "AMD Radeon Graphics": identify AMD parts by
  // architecture (compute capability) and CU count instead.
  if (candidates.empty() && looks_amd(tokens, device) && device.sm_count > 0) {
    for (const Part& p : kParts)
      if (p.vendor == Vendor::kAmd && compute_capability_fits(p, device) &&
          sm_count_identifies(p, device.sm_count))
        candidates.push_back(&p);
    if (candidates.size() > 1 && device.total_memory_bytes > 0) {
      const double gib = double(device.total_memory_bytes) / double(int64_t(1) << 30);
      const Part* best = candidates.front();
      for (const Part* p : candidates)
        if (std::fabs(p->memory_gib - gib) < std::fabs(best->memory_gib - gib)) best = p;
      return best;
    }
  }
  if (candidates.empty()) return nullptr;
  if (candidates.size() > 1) narrow(candidates, [&](const Part& p) { return variant_named(p, tokens); });
  if (candidates.size() > 1)
    narrow(candidates, [&](const Part& p) { return sm_count_identifies(p, device.sm_count); });
  return candidates.front();  // table order: the family's default variant
}

enum class Dtype : uint8_t { kFp64, kFp32, kTf32, kBf16, kFp16, kFp8, kInt8, kUnknown };

Dtype parse_dtype(std::string_view dtype) {
  std::string s;
  for (char c : dtype) s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (s.rfind("torch.", 0) == 0) s.erase(0, 6);
  if (s == "fp64" || s == "float64" || s == "double" || s == "f64") return Dtype::kFp64;
  if (s == "fp32" || s == "float32" || s == "float" || s == "f32") return Dtype::kFp32;
  if (s == "tf32" || s == "tensorfloat32" || s == "tensorfloat-32") return Dtype::kTf32;
  if (s == "bf16" || s == "bfloat16") return Dtype::kBf16;
  if (s == "fp16" || s == "float16" || s == "half" || s == "f16") return Dtype::kFp16;
  if (s == "int8" || s == "i8" || s == "s8") return Dtype::kInt8;
  if (s == "fp8" || s == "float8" || s == "e4m3" || s == "e5m2" || s.rfind("fp8_", 0) == 0 ||
      s.rfind("float8_", 0) == 0)
    return Dtype::kFp8;
  return Dtype::kUnknown;
}

double tflops_for(const PeakTflops& t, Dtype d) {
  switch (d) {
    case Dtype::kFp64: return t.fp64;
    case Dtype::kFp32: return t.fp32;
    case Dtype::kTf32: return t.tf32;
    case Dtype::kBf16: return t.bf16;
    case Dtype::kFp16: return t.fp16;
    case Dtype::kFp8: return t.fp8;
    case Dtype::kInt8: return t.int8;
    case Dtype::kUnknown: break;
  }
  return 0;
}

}  // namespace

std::optional<double> peak_flops_per_s(const DeviceInfo& device, std::string_view dtype) {
  const Dtype d = parse_dtype(dtype);
  if (d == Dtype::kUnknown) return std::nullopt;
  const Part* part = match_part(device);
  if (part == nullptr) return std::nullopt;
  const double tflops = tflops_for(part->tflops, d);
  if (tflops <= 0) return std::nullopt;
  double scale = 1.0;
  const int32_t full_sms = part->sm_counts[0];
  if (device.sm_count > 0 && full_sms > 0 && device.sm_count < full_sms)
    scale = double(device.sm_count) / double(full_sms);  // MIG slice, GCD, partition
  return tflops * 1e12 * scale;
}

}  // namespace gpuutil
