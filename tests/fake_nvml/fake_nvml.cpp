// A fake libnvidia-ml.so.1 for tests: a simulated two-GPU machine.
//
// Implements the NVML entry points gpuutil's NvmlApi resolves, with the
// real ABI, so the sampler loads it through the same dlopen path
// (GPUUTIL_NVML_LIBRARY=path/to/libfake_nvml.so). The scenario is read from
// FAKE_NVML_SCENARIO at nvmlInit_v2:
//   ok             every field works; device 0 supports GPM, device 1 does not
//   not_supported  power, energy and violation counters answer NOT_SUPPORTED,
//                  and the GPM support query too
//   no_permission  temperature and clock-event reasons answer NO_PERMISSION,
//                  and the GPM support query too
//   no_devices     nvmlDeviceGetCount_v2 reports 0
// Values are deterministic: cumulative counters grow by a fixed amount per
// call (energy +1000 mJ, power violation +10 ms, thermal violation +5 ms).
// Test-only controls (fake_nvml_*) report call counts and the shortest gap
// between utilization queries.
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

constexpr int kSuccess = 0, kNotSupported = 3, kNoPermission = 4, kInvalidArgument = 2;

struct FakeDevice {
  int index;
};
FakeDevice g_devices[2] = {{0}, {1}};
struct FakeGpmSample {
  int64_t taken = 0;
};

std::mutex g_mu;
std::string g_scenario = "ok";
int g_calls_util = 0;
unsigned long long g_energy_calls[2] = {0, 0};
unsigned long long g_violation_calls[2][2] = {{0, 0}, {0, 0}};
int64_t g_last_util_ns = -1;
int64_t g_min_util_gap_ns = INT64_MAX;
int g_gpm_metrics_calls = 0;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
int idx(void* d) { return static_cast<FakeDevice*>(d)->index; }
bool is(const char* s) { return g_scenario == s; }

struct GpmMetricInfo {
  const char* short_name;
  const char* long_name;
  const char* unit;
};
struct GpmMetric {
  unsigned int metric_id;
  int nvml_return;
  double value;
  GpmMetricInfo info;
};
struct GpmMetricsGet {
  unsigned int version;
  unsigned int num_metrics;
  void* sample1;
  void* sample2;
  GpmMetric metrics[98];
};

}  // namespace

extern "C" {

int nvmlInit_v2() {
  std::lock_guard<std::mutex> lock(g_mu);
  const char* s = std::getenv("FAKE_NVML_SCENARIO");
  g_scenario = s ? s : "ok";
  return kSuccess;
}
int nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(int r) {
  switch (r) {
    case kNotSupported: return "Not Supported";
    case kNoPermission: return "Insufficient Permissions";
    default: return "Unknown Error";
  }
}
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = is("no_devices") ? 0 : 2;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** d) {
  if (i >= 2) return kInvalidArgument;
  *d = &g_devices[i];
  return kSuccess;
}
int nvmlDeviceGetName(void* d, char* name, unsigned int len) {
  std::snprintf(name, len, "Fake H100 %d", idx(d));
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(void* d, unsigned int* u) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (idx(d) == 0) {
    const int64_t t = now_ns();
    if (g_last_util_ns >= 0 && t - g_last_util_ns < g_min_util_gap_ns) g_min_util_gap_ns = t - g_last_util_ns;
    g_last_util_ns = t;
    ++g_calls_util;
  }
  u[0] = 40 + idx(d);  // gpu
  u[1] = 20;           // memory
  return kSuccess;
}
int nvmlDeviceGetClockInfo(void*, unsigned int kind, unsigned int* mhz) {
  *mhz = kind == 1 ? 1410 : 1215;
  return kSuccess;
}
int nvmlDeviceGetMaxClockInfo(void*, unsigned int kind, unsigned int* mhz) {
  *mhz = kind == 1 ? 1980 : 1593;
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(void*, unsigned long long* mask) {
  if (is("no_permission")) return kNoPermission;
  *mask = 0x4;  // SwPowerCap
  return kSuccess;
}
int nvmlDeviceGetViolationStatus(void* d, unsigned int policy, unsigned long long* v) {
  if (is("not_supported")) return kNotSupported;
  if (policy > 1) return kInvalidArgument;
  std::lock_guard<std::mutex> lock(g_mu);
  const unsigned long long n = ++g_violation_calls[idx(d)][policy];
  v[0] = 1000;                                           // reference time
  v[1] = n * (policy == 0 ? 10000000ULL : 5000000ULL);  // cumulative ns
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned int* mw) {
  if (is("not_supported")) return kNotSupported;
  *mw = 250000 + 1000 * idx(d);
  return kSuccess;
}
int nvmlDeviceGetTotalEnergyConsumption(void* d, unsigned long long* mj) {
  if (is("not_supported")) return kNotSupported;
  std::lock_guard<std::mutex> lock(g_mu);
  *mj = ++g_energy_calls[idx(d)] * 1000ULL;
  return kSuccess;
}
int nvmlDeviceGetTemperature(void*, unsigned int sensor, unsigned int* c) {
  if (is("no_permission")) return kNoPermission;
  if (sensor != 0) return kInvalidArgument;
  *c = 65;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void*, unsigned long long* m) {
  m[0] = 80ULL << 30;                 // total
  m[2] = 8ULL << 30;                  // used
  m[1] = m[0] - m[2];                 // free
  return kSuccess;
}

struct GpmSupport {
  unsigned int version;
  unsigned int is_supported_device;
};
int nvmlGpmQueryDeviceSupport(void* d, GpmSupport* s) {
  if (is("not_supported")) return kNotSupported;
  if (is("no_permission")) return kNoPermission;
  if (s->version != 1) return kInvalidArgument;
  s->is_supported_device = idx(d) == 0 ? 1 : 0;
  return kSuccess;
}
int nvmlGpmSampleAlloc(void** s) {
  *s = new FakeGpmSample();
  return kSuccess;
}
int nvmlGpmSampleFree(void* s) {
  delete static_cast<FakeGpmSample*>(s);
  return kSuccess;
}
int nvmlGpmSampleGet(void*, void* s) {
  static_cast<FakeGpmSample*>(s)->taken = now_ns();
  return kSuccess;
}
int nvmlGpmMetricsGet(GpmMetricsGet* g) {
  if (g->version != 1 || g->sample1 == g->sample2) return kInvalidArgument;
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_gpm_metrics_calls;
  for (unsigned int i = 0; i < g->num_metrics; ++i) {
    GpmMetric& m = g->metrics[i];
    m.nvml_return = kSuccess;
    switch (m.metric_id) {
      case 2: m.value = 55.0; break;   // SM util
      case 3: m.value = 33.0; break;   // SM occupancy
      case 5: m.value = 22.0; break;   // any tensor util
      case 10: m.value = 44.0; break;  // DRAM bw util
      default: m.nvml_return = kNotSupported;
    }
  }
  return kSuccess;
}

// --- test controls -----------------------------------------------------------
void fake_nvml_reset() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_calls_util = 0;
  g_energy_calls[0] = g_energy_calls[1] = 0;
  std::memset(g_violation_calls, 0, sizeof g_violation_calls);
  g_last_util_ns = -1;
  g_min_util_gap_ns = INT64_MAX;
  g_gpm_metrics_calls = 0;
}
int fake_nvml_util_calls() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_calls_util;
}
int64_t fake_nvml_min_util_gap_ns() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_min_util_gap_ns;
}
int fake_nvml_gpm_metrics_calls() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_gpm_metrics_calls;
}

}  // extern "C"
