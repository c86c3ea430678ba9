// Run-time loading of libnvidia-ml.so.1 into the NvmlApi table (see nvml_api.h).
#include "collectors/nvml/nvml_api.h"

#include <dlfcn.h>

#include <cstdlib>

namespace gpuutil::nvml {

namespace {

template <typename F>
bool resolve(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, name));
  return out != nullptr;
}

}  // namespace

std::string NvmlApi::library_path() {
  const char* env = std::getenv("GPUUTIL_NVML_LIBRARY");
  return (env && *env) ? env : "libnvidia-ml.so.1";
}

std::unique_ptr<NvmlApi> NvmlApi::load(std::string* error) {
  const std::string path = library_path();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    if (error) *error = "cannot load " + path + ": " + (why ? why : "unknown error");
    return nullptr;
  }
  auto api = std::make_unique<NvmlApi>();
  api->handle_ = handle;
  const char* missing = nullptr;
  auto need = [&](const char* name, auto& fn) {
    if (!resolve(handle, name, fn) && !missing) missing = name;
  };
  need("nvmlInit_v2", api->init);
  need("nvmlShutdown", api->shutdown);
  need("nvmlErrorString", api->error_string);
  need("nvmlDeviceGetCount_v2", api->device_count);
  need("nvmlDeviceGetHandleByIndex_v2", api->device_by_index);
  need("nvmlDeviceGetHandleByUUID", api->device_by_uuid);
  need("nvmlDeviceGetUUID", api->device_uuid);
  need("nvmlDeviceGetName", api->device_name);
  need("nvmlDeviceGetUtilizationRates", api->utilization);
  need("nvmlDeviceGetClockInfo", api->clock);
  need("nvmlDeviceGetMaxClockInfo", api->max_clock);
  need("nvmlDeviceGetCurrentClocksThrottleReasons", api->clock_event_reasons);
  need("nvmlDeviceGetViolationStatus", api->violation_status);
  need("nvmlDeviceGetPowerUsage", api->power_usage);
  need("nvmlDeviceGetTotalEnergyConsumption", api->total_energy);
  need("nvmlDeviceGetTemperature", api->temperature);
  need("nvmlDeviceGetMemoryInfo", api->memory_info);
  if (missing) {
    if (error) *error = path + " lacks " + missing;
    return nullptr;  // the destructor closes the handle
  }
  resolve(handle, "nvmlDeviceGetMigMode", api->mig_mode);
  resolve(handle, "nvmlDeviceIsMigDeviceHandle", api->is_mig_device);
  resolve(handle, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", api->mig_parent);
  resolve(handle, "nvmlGpmQueryDeviceSupport", api->gpm_query_support);
  resolve(handle, "nvmlGpmSampleAlloc", api->gpm_sample_alloc);
  resolve(handle, "nvmlGpmSampleFree", api->gpm_sample_free);
  resolve(handle, "nvmlGpmSampleGet", api->gpm_sample_get);
  resolve(handle, "nvmlGpmMetricsGet", api->gpm_metrics_get);
  return api;
}

NvmlApi::~NvmlApi() {
  if (handle_) dlclose(handle_);
}

std::string NvmlApi::describe(Return r) const {
  std::string name;
  switch (r) {
    case kSuccess: name = "SUCCESS"; break;
    case kErrorUninitialized: name = "UNINITIALIZED"; break;
    case kErrorInvalidArgument: name = "INVALID_ARGUMENT"; break;
    case kErrorNotSupported: name = "NOT_SUPPORTED"; break;
    case kErrorNoPermission: name = "NO_PERMISSION"; break;
    case kErrorNotFound: name = "NOT_FOUND"; break;
    case kErrorInsufficientSize: name = "INSUFFICIENT_SIZE"; break;
    default: name = "ERROR"; break;
  }
  std::string detail = std::to_string(r);
  if (error_string) {
    if (const char* s = error_string(r)) detail += std::string(": ") + s;
  }
  return name + " (" + detail + ")";
}

}  // namespace gpuutil::nvml
