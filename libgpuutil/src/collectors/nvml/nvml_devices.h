// Finding the NVML device a CUDA device is, by UUID, and telling MIG apart.
//
// CUDA, torch and users spell a device's UUID in several ways: NVML's own
// "GPU-<hex>" / "MIG-<hex>", the older MIG form "MIG-GPU-<hex>/<gi>/<ci>",
// torch's bare "<hex>" (no prefix), any case, and CUDA_VISIBLE_DEVICES'
// abbreviated leading part ("GPU-8932f937"). nvmlDeviceGetHandleByUUID
// wants NVML's exact string, so the spelling is mapped here, in one place.
//
// Contract: called by NvmlSampler (nvml_sampler.cpp) with a loaded,
// initialised NvmlApi, on the thread that opens or changes the devices.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "collectors/nvml/nvml_api.h"
#include "gpuutil/nvml_sampler.h"

namespace gpuutil::nvml {

// NVML's spellings to try for a UUID as given, in order: one when it has a
// "GPU-" / "MIG-" prefix (the prefix upper-case, the rest lower-case), else
// "GPU-<hex>" then "MIG-<hex>". Empty for an empty string.
std::vector<std::string> uuid_candidates(std::string_view uuid);

// Finds the device `ref` names: by UUID (each candidate, then, when none is
// found, a GPU whose UUID starts with the first candidate and no other
// does) or, without a UUID, by NVML index. Empty on success with *out set,
// else why not (one line, starting with the UUID or index as given).
std::string find_device(const NvmlApi& api, const NvmlDeviceRef& ref, Device* out);

// A found device and where its fields are read.
struct Located {
  Device handle = nullptr;  // the device itself (a GPU or a MIG device)
  Device whole = nullptr;   // the GPU whose whole-GPU counters are read; nullptr: none found
  NvmlDeviceKind kind = NvmlDeviceKind::kGpu;
  std::string uuid;         // NVML's UUID of `handle` ("" if NVML gave none)
  std::string parent_uuid;  // kMigDevice: NVML's UUID of `whole`
};

// Tells a GPU, a MIG device and a GPU in MIG mode apart (a plain GPU when
// this NVML has no MIG entry points) and finds a MIG device's parent.
Located locate(const NvmlApi& api, Device d);

}  // namespace gpuutil::nvml
