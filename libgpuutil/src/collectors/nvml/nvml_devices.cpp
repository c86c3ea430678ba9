// UUID spellings, device look-up and MIG classification (see nvml_devices.h).
#include "collectors/nvml/nvml_devices.h"

#include <cctype>

namespace gpuutil::nvml {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == lower(prefix);
}

std::string uuid_of(const NvmlApi& api, Device d) {
  char buf[kUuidBufferSize] = {};
  return api.device_uuid(d, buf, sizeof buf) == kSuccess ? std::string(buf) : std::string();
}

// The GPU (by NVML index) whose UUID starts with `prefix`, when exactly one does.
std::string find_by_prefix(const NvmlApi& api, const std::string& prefix, Device* out) {
  unsigned int n = 0;
  if (api.device_count(&n) != kSuccess) return "no NVML device has this UUID";
  int matches = 0;
  for (unsigned int i = 0; i < n; ++i) {
    Device d = nullptr;
    if (api.device_by_index(i, &d) != kSuccess) continue;
    if (uuid_of(api, d).compare(0, prefix.size(), prefix) == 0) {
      *out = d;
      ++matches;
    }
  }
  if (matches == 1) return "";
  *out = nullptr;
  return matches == 0 ? "no NVML device has this UUID"
                      : "ambiguous: " + std::to_string(matches) + " NVML devices' UUIDs start with it";
}

}  // namespace

std::vector<std::string> uuid_candidates(std::string_view uuid) {
  while (!uuid.empty() && std::isspace(static_cast<unsigned char>(uuid.front()))) uuid.remove_prefix(1);
  while (!uuid.empty() && std::isspace(static_cast<unsigned char>(uuid.back()))) uuid.remove_suffix(1);
  if (uuid.empty()) return {};
  for (std::string_view prefix : {"MIG-GPU-", "GPU-", "MIG-"}) {
    if (starts_with_nocase(uuid, prefix)) return {std::string(prefix) + lower(uuid.substr(prefix.size()))};
  }
  return {"GPU-" + lower(uuid), "MIG-" + lower(uuid)};
}

std::string find_device(const NvmlApi& api, const NvmlDeviceRef& ref, Device* out) {
  *out = nullptr;
  if (ref.uuid.empty()) {
    if (ref.nvml_index < 0) return "neither a UUID nor an NVML index given";
    const int r = api.device_by_index(static_cast<unsigned int>(ref.nvml_index), out);
    return r == kSuccess ? "" : "NVML index " + std::to_string(ref.nvml_index) + ": " + api.describe(r);
  }
  const std::vector<std::string> candidates = uuid_candidates(ref.uuid);
  Return last = kErrorNotFound;
  for (const std::string& c : candidates) {
    const Return r = api.device_by_uuid(c.c_str(), out);
    if (r == kSuccess) return "";
    if (r != kErrorNotFound) last = r;
  }
  std::string why = "UUID " + ref.uuid + ": ";
  if (last != kErrorNotFound) return why + api.describe(last);
  if (candidates.empty()) return why + "empty";
  const std::string found = find_by_prefix(api, candidates.front(), out);
  return found.empty() ? "" : why + api.describe(kErrorNotFound) + ": " + found;
}

Located locate(const NvmlApi& api, Device d) {
  Located at;
  at.handle = at.whole = d;
  at.uuid = uuid_of(api, d);
  if (!api.has_mig()) return at;
  unsigned int is_mig = 0;
  if (api.is_mig_device(d, &is_mig) == kSuccess && is_mig) {
    at.kind = NvmlDeviceKind::kMigDevice;
    Device parent = nullptr;
    at.whole = api.mig_parent(d, &parent) == kSuccess ? parent : nullptr;
    if (at.whole) at.parent_uuid = uuid_of(api, at.whole);
    return at;
  }
  unsigned int current = 0, pending = 0;
  if (api.mig_mode(d, &current, &pending) == kSuccess && current == kMigEnabled) at.kind = NvmlDeviceKind::kGpuInMigMode;
  return at;
}

}  // namespace gpuutil::nvml
