// The NVML function table: every NVML call gpuutil makes goes through here.
//
// libnvidia-ml.so.1 is loaded at run time (dlopen) so gpuutil builds and
// imports on machines with no driver; GPUUTIL_NVML_LIBRARY overrides the
// path (the fake NVML in tests/fake_nvml is loaded this way, through the
// same code). The ABI subset below is declared here from NVML's documented,
// stable C ABI (nvml.h, CUDA 12) so no NVML header is needed at build time;
// only the files of this folder (collectors/nvml) see these types.
//
// Contract: NvmlApi::load() is called once by the owner (the sampler) on any
// thread; the table is then read-only and the functions are NVML's own
// thread-safe entry points. The library stays loaded until the table dies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace gpuutil::nvml {

// --- ABI subset (values as in nvml.h) ---------------------------------------
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;

// NVML_DEVICE_UUID_V2_BUFFER_SIZE: large enough for nvmlDeviceGetUUID of a
// GPU ("GPU-<uuid>") or a MIG device ("MIG-<uuid>").
inline constexpr unsigned int kUuidBufferSize = 96;
inline constexpr unsigned int kMigEnabled = 1;  // NVML_DEVICE_MIG_ENABLE

struct DeviceOpaque;
using Device = DeviceOpaque*;
struct GpmSampleOpaque;
using GpmSample = GpmSampleOpaque*;

struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct ViolationTime {
  unsigned long long reference_time;
  unsigned long long violation_time;  // cumulative ns the policy held clocks down
};

inline constexpr unsigned int kClockSm = 1;
inline constexpr unsigned int kClockMem = 2;
inline constexpr unsigned int kTemperatureGpu = 0;
inline constexpr unsigned int kPerfPolicyPower = 0;
inline constexpr unsigned int kPerfPolicyThermal = 1;

inline constexpr unsigned int kGpmMetricSmUtil = 2;
inline constexpr unsigned int kGpmMetricSmOccupancy = 3;
inline constexpr unsigned int kGpmMetricAnyTensorUtil = 5;
inline constexpr unsigned int kGpmMetricDramBwUtil = 10;
inline constexpr unsigned int kGpmMetricMax = 98;
inline constexpr unsigned int kGpmMetricsGetVersion = 1;
inline constexpr unsigned int kGpmSupportVersion = 1;

struct GpmMetricInfo {
  const char* short_name;
  const char* long_name;
  const char* unit;
};
struct GpmMetric {
  unsigned int metric_id;
  Return nvml_return;
  double value;
  GpmMetricInfo info;
};
struct GpmMetricsGet {
  unsigned int version;
  unsigned int num_metrics;
  GpmSample sample1;
  GpmSample sample2;
  GpmMetric metrics[kGpmMetricMax];
};
struct GpmSupport {
  unsigned int version;
  unsigned int is_supported_device;
};

// --- the table ---------------------------------------------------------------
struct NvmlApi {
  Return (*init)() = nullptr;                                         // nvmlInit_v2
  Return (*shutdown)() = nullptr;                                     // nvmlShutdown
  const char* (*error_string)(Return) = nullptr;                      // nvmlErrorString
  Return (*device_count)(unsigned int*) = nullptr;                    // nvmlDeviceGetCount_v2
  Return (*device_by_index)(unsigned int, Device*) = nullptr;         // nvmlDeviceGetHandleByIndex_v2
  Return (*device_by_uuid)(const char*, Device*) = nullptr;          // nvmlDeviceGetHandleByUUID (GPU or MIG UUID)
  Return (*device_uuid)(Device, char*, unsigned int) = nullptr;       // nvmlDeviceGetUUID
  Return (*device_name)(Device, char*, unsigned int) = nullptr;       // nvmlDeviceGetName
  Return (*utilization)(Device, Utilization*) = nullptr;              // nvmlDeviceGetUtilizationRates
  Return (*clock)(Device, unsigned int, unsigned int*) = nullptr;     // nvmlDeviceGetClockInfo
  Return (*max_clock)(Device, unsigned int, unsigned int*) = nullptr; // nvmlDeviceGetMaxClockInfo
  Return (*clock_event_reasons)(Device, unsigned long long*) = nullptr;  // nvmlDeviceGetCurrentClocksThrottleReasons
  Return (*violation_status)(Device, unsigned int, ViolationTime*) = nullptr;  // nvmlDeviceGetViolationStatus
  Return (*power_usage)(Device, unsigned int*) = nullptr;             // nvmlDeviceGetPowerUsage (mW)
  Return (*total_energy)(Device, unsigned long long*) = nullptr;      // nvmlDeviceGetTotalEnergyConsumption (mJ)
  Return (*temperature)(Device, unsigned int, unsigned int*) = nullptr;  // nvmlDeviceGetTemperature
  Return (*memory_info)(Device, Memory*) = nullptr;                   // nvmlDeviceGetMemoryInfo
  // MIG (optional: absent before R450 drivers).
  Return (*mig_mode)(Device, unsigned int*, unsigned int*) = nullptr;  // nvmlDeviceGetMigMode (current, pending)
  Return (*is_mig_device)(Device, unsigned int*) = nullptr;            // nvmlDeviceIsMigDeviceHandle
  Return (*mig_parent)(Device, Device*) = nullptr;                     // nvmlDeviceGetDeviceHandleFromMigDeviceHandle
  // GPM (optional: absent before R520 drivers).
  Return (*gpm_query_support)(Device, GpmSupport*) = nullptr;         // nvmlGpmQueryDeviceSupport
  Return (*gpm_sample_alloc)(GpmSample*) = nullptr;                   // nvmlGpmSampleAlloc
  Return (*gpm_sample_free)(GpmSample) = nullptr;                     // nvmlGpmSampleFree
  Return (*gpm_sample_get)(Device, GpmSample) = nullptr;              // nvmlGpmSampleGet
  Return (*gpm_metrics_get)(GpmMetricsGet*) = nullptr;                // nvmlGpmMetricsGet

  // Loads the library (GPUUTIL_NVML_LIBRARY, else libnvidia-ml.so.1) and
  // resolves every symbol. Returns nullptr with *error set (one line) when
  // the library or a required symbol is missing. MIG and GPM symbols are
  // optional.
  static std::unique_ptr<NvmlApi> load(std::string* error);
  // The path load() will try.
  static std::string library_path();

  ~NvmlApi();
  NvmlApi() = default;
  NvmlApi(const NvmlApi&) = delete;
  NvmlApi& operator=(const NvmlApi&) = delete;

  bool has_mig() const { return mig_mode && is_mig_device && mig_parent; }
  bool has_gpm() const { return gpm_query_support && gpm_sample_alloc && gpm_sample_free && gpm_sample_get && gpm_metrics_get; }
  std::string describe(Return r) const;  // "NOT_SUPPORTED (3: ...)"

 private:
  void* handle_ = nullptr;
};

}  // namespace gpuutil::nvml
