// A fake libnvidia-ml.so.1 for tests: a simulated machine of up to eight GPUs.
//
// Implements the NVML entry points gpuutil's NvmlApi resolves, with the
// real ABI and return codes, so the sampler loads it through the same dlopen
// path (GPUUTIL_NVML_LIBRARY=path/to/libfake_nvml.so). The machine is read
// from the environment at nvmlInit_v2:
//   FAKE_NVML_SCENARIO
//     ok             every field works; GPU 0 supports GPM, the others do not
//     not_supported  power, energy and violation counters answer NOT_SUPPORTED,
//                    and the GPM support query too
//     no_permission  temperature and clock-event reasons answer NO_PERMISSION,
//                    and the GPM support query too
//     no_devices     nvmlDeviceGetCount_v2 reports 0
//   FAKE_NVML_DEVICES  how many GPUs (1..8, default 2)
//   FAKE_NVML_ORDER    NVML's enumeration order as a permutation of the GPUs,
//                      e.g. "1,0": NVML index 0 is GPU 1 (default: identity).
//                      Real NVML enumerates by PCI bus; CUDA may not.
//   FAKE_NVML_MIG      a GPU in MIG mode (e.g. "1"), with one MIG device
//                      (compute instance) on it
// GPU k ("physical" number, not NVML index) has a UUID (fake_nvml_uuid) and
// values of its own: SM clock 1410 + 10k MHz, utilization.gpu 40 + k %,
// power 250 + k W. Cumulative counters grow by a fixed amount per call
// (energy +1000 mJ, power violation +10 ms, thermal violation +5 ms).
// As in real NVML: nvmlDeviceGetHandleByUUID wants the exact NVML string
// ("GPU-" + lower-case hex) and answers NOT_FOUND for any other; MIG devices
// are reached by their "MIG-" UUID, never by index; a GPU in MIG mode
// answers NOT_SUPPORTED for utilization and GPM; a MIG device handle answers
// only UUID, memory (its own slice), and the MIG queries, everything else
// NOT_SUPPORTED (a conservative model: real NVML answers some of those on
// the whole GPU's behalf, which is not per instance either).
// Test-only controls (fake_nvml_*) report call counts per GPU and the
// shortest gap between utilization queries.
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kNoPermission = 4, kNotFound = 6,
              kInsufficientSize = 7, kUnknown = 999;
constexpr int kMaxGpus = 8;

// A handle: a GPU, or the MIG device (compute instance) on a GPU.
struct FakeDevice {
  int gpu;
  bool mig;
};
FakeDevice g_gpus[kMaxGpus] = {{0, false}, {1, false}, {2, false}, {3, false},
                               {4, false}, {5, false}, {6, false}, {7, false}};
FakeDevice g_migs[kMaxGpus] = {{0, true}, {1, true}, {2, true}, {3, true},
                               {4, true}, {5, true}, {6, true}, {7, true}};
struct FakeGpmSample {
  int64_t taken = 0;
};

std::mutex g_mu;
std::string g_scenario = "ok";
int g_count = 2;
int g_order[kMaxGpus] = {0, 1, 2, 3, 4, 5, 6, 7};  // NVML index -> GPU
int g_mig_gpu = -1;                                 // the GPU in MIG mode, if any
int g_calls_util = 0;
int g_calls[kMaxGpus] = {};  // counter queries per GPU
unsigned long long g_energy_calls[kMaxGpus] = {};
unsigned long long g_violation_calls[kMaxGpus][2] = {};
int64_t g_last_util_ns = -1;
int64_t g_min_util_gap_ns = INT64_MAX;
int g_gpm_metrics_calls = 0;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
bool is(const char* s) { return g_scenario == s; }

// GPU k: "GPU-ka3c0f1e-7d2b-4c8e-9f00-5b6d7e8f9a0k" (a leading part as short
// as "GPU-k" is unique, as CUDA_VISIBLE_DEVICES' abbreviated form needs).
std::string gpu_uuid(int gpu) {
  const std::string k = std::to_string(gpu);
  return "GPU-" + k + "a3c0f1e-7d2b-4c8e-9f00-5b6d7e8f9a0" + k;
}
std::string mig_uuid(int gpu) {
  const std::string k = std::to_string(gpu);
  return "MIG-" + k + "c7e2d90-3f4a-5b6c-8d01-9e0f1a2b3c4" + k;
}
// The older MIG form NVML also accepts: MIG-<parent GPU UUID>/<GI>/<CI>.
std::string mig_tuple(int gpu) { return "MIG-" + gpu_uuid(gpu) + "/1/0"; }

FakeDevice* as_device(void* d) {
  auto* f = static_cast<FakeDevice*>(d);
  if (f >= g_gpus && f < g_gpus + g_count) return f;
  if (g_mig_gpu >= 0 && f == &g_migs[g_mig_gpu]) return f;
  return nullptr;
}
// The prologue of a counter query: the GPU it reads, or an NVML error. A MIG
// device handle answers NOT_SUPPORTED (see the file comment).
int counter_query(void* d, int* gpu) {
  FakeDevice* f = as_device(d);
  if (!f) return kInvalidArgument;
  if (f->mig) return kNotSupported;
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_calls[f->gpu];
  *gpu = f->gpu;
  return kSuccess;
}
#define QUERY(d, gpu)                                  \
  int gpu = 0;                                         \
  if (int r_ = counter_query(d, &gpu); r_ != kSuccess) \
    return r_

bool parse_env() {
  const char* s = std::getenv("FAKE_NVML_SCENARIO");
  g_scenario = s ? s : "ok";
  const char* n = std::getenv("FAKE_NVML_DEVICES");
  g_count = n ? std::atoi(n) : 2;
  if (g_count < 1 || g_count > kMaxGpus) return false;
  bool seen[kMaxGpus] = {};
  const char* order = std::getenv("FAKE_NVML_ORDER");
  for (int i = 0; i < g_count; ++i) {
    g_order[i] = i;
    if (!order || !*order) continue;
    char* end = nullptr;
    const long v = std::strtol(order, &end, 10);
    if (end == order || v < 0 || v >= g_count || seen[v]) return false;
    seen[v] = true;
    g_order[i] = static_cast<int>(v);
    order = *end == ',' ? end + 1 : end;
  }
  const char* mig = std::getenv("FAKE_NVML_MIG");
  g_mig_gpu = mig && *mig ? std::atoi(mig) : -1;
  return g_mig_gpu < g_count;
}

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
  if (!parse_env()) {
    std::fprintf(stderr, "fake_nvml: bad FAKE_NVML_DEVICES / FAKE_NVML_ORDER / FAKE_NVML_MIG\n");
    return kUnknown;
  }
  return kSuccess;
}
int nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(int r) {
  switch (r) {
    case kInvalidArgument: return "Invalid Argument";
    case kNotSupported: return "Not Supported";
    case kNoPermission: return "Insufficient Permissions";
    case kNotFound: return "Not Found";
    case kInsufficientSize: return "Insufficient Size";
    default: return "Unknown Error";
  }
}
int nvmlDeviceGetCount_v2(unsigned int* n) {
  if (!n) return kInvalidArgument;
  *n = is("no_devices") ? 0 : static_cast<unsigned int>(g_count);
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** d) {
  if (!d || i >= static_cast<unsigned int>(g_count) || is("no_devices")) return kInvalidArgument;
  *d = &g_gpus[g_order[i]];
  return kSuccess;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, void** d) {
  if (!uuid || !d) return kInvalidArgument;
  for (int k = 0; k < g_count; ++k) {
    if (gpu_uuid(k) == uuid) {
      *d = &g_gpus[k];
      return kSuccess;
    }
  }
  if (g_mig_gpu >= 0 && (mig_uuid(g_mig_gpu) == uuid || mig_tuple(g_mig_gpu) == uuid)) {
    *d = &g_migs[g_mig_gpu];
    return kSuccess;
  }
  return kNotFound;
}
int nvmlDeviceGetUUID(void* d, char* uuid, unsigned int len) {
  FakeDevice* f = as_device(d);
  if (!f || !uuid) return kInvalidArgument;
  const std::string u = f->mig ? mig_uuid(f->gpu) : gpu_uuid(f->gpu);
  if (len < u.size() + 1) return kInsufficientSize;
  std::memcpy(uuid, u.c_str(), u.size() + 1);
  return kSuccess;
}
int nvmlDeviceGetName(void* d, char* name, unsigned int len) {
  FakeDevice* f = as_device(d);
  if (!f || !name) return kInvalidArgument;
  std::snprintf(name, len, f->mig ? "Fake H100 %d MIG 1g.10gb" : "Fake H100 %d", f->gpu);
  return kSuccess;
}
int nvmlDeviceGetMigMode(void* d, unsigned int* current, unsigned int* pending) {
  FakeDevice* f = as_device(d);
  if (!f || f->mig || !current || !pending) return kInvalidArgument;
  *current = *pending = f->gpu == g_mig_gpu ? 1 : 0;
  return kSuccess;
}
int nvmlDeviceIsMigDeviceHandle(void* d, unsigned int* is_mig) {
  FakeDevice* f = as_device(d);
  if (!f || !is_mig) return kInvalidArgument;
  *is_mig = f->mig ? 1 : 0;
  return kSuccess;
}
int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(void* mig, void** d) {
  FakeDevice* f = as_device(mig);
  if (!f || !f->mig || !d) return kInvalidArgument;
  *d = &g_gpus[f->gpu];
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(void* d, unsigned int* u) {
  QUERY(d, gpu);
  if (gpu == g_mig_gpu) return kNotSupported;  // no whole-GPU duty cycle in MIG mode
  std::lock_guard<std::mutex> lock(g_mu);
  if (gpu == 0) {
    const int64_t t = now_ns();
    if (g_last_util_ns >= 0 && t - g_last_util_ns < g_min_util_gap_ns) g_min_util_gap_ns = t - g_last_util_ns;
    g_last_util_ns = t;
    ++g_calls_util;
  }
  u[0] = 40 + gpu;  // gpu
  u[1] = 20;        // memory
  return kSuccess;
}
int nvmlDeviceGetClockInfo(void* d, unsigned int kind, unsigned int* mhz) {
  QUERY(d, gpu);
  *mhz = kind == 1 ? 1410 + 10 * gpu : 1215;
  return kSuccess;
}
int nvmlDeviceGetMaxClockInfo(void* d, unsigned int kind, unsigned int* mhz) {
  QUERY(d, gpu);
  *mhz = kind == 1 ? 1980 : 1593;
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(void* d, unsigned long long* mask) {
  QUERY(d, gpu);
  if (is("no_permission")) return kNoPermission;
  *mask = 0x4;  // SwPowerCap
  return kSuccess;
}
int nvmlDeviceGetViolationStatus(void* d, unsigned int policy, unsigned long long* v) {
  QUERY(d, gpu);
  if (is("not_supported")) return kNotSupported;
  if (policy > 1) return kInvalidArgument;
  std::lock_guard<std::mutex> lock(g_mu);
  const unsigned long long n = ++g_violation_calls[gpu][policy];
  v[0] = 1000;                                           // reference time
  v[1] = n * (policy == 0 ? 10000000ULL : 5000000ULL);  // cumulative ns
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned int* mw) {
  QUERY(d, gpu);
  if (is("not_supported")) return kNotSupported;
  *mw = 250000 + 1000 * gpu;
  return kSuccess;
}
int nvmlDeviceGetTotalEnergyConsumption(void* d, unsigned long long* mj) {
  QUERY(d, gpu);
  if (is("not_supported")) return kNotSupported;
  std::lock_guard<std::mutex> lock(g_mu);
  *mj = ++g_energy_calls[gpu] * 1000ULL;
  return kSuccess;
}
int nvmlDeviceGetTemperature(void* d, unsigned int sensor, unsigned int* c) {
  QUERY(d, gpu);
  if (is("no_permission")) return kNoPermission;
  if (sensor != 0) return kInvalidArgument;
  *c = 65;
  return kSuccess;
}
// A MIG device answers with its own memory slice (10 GiB, 2 GiB used).
int nvmlDeviceGetMemoryInfo(void* d, unsigned long long* m) {
  FakeDevice* f = as_device(d);
  if (!f || !m) return kInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_calls[f->gpu];
  }
  m[0] = f->mig ? 10ULL << 30 : 80ULL << 30;                         // total
  m[2] = f->mig ? 2ULL << 30 : static_cast<unsigned long long>(8 + f->gpu) << 30;  // used
  m[1] = m[0] - m[2];                                                 // free
  return kSuccess;
}

struct GpmSupport {
  unsigned int version;
  unsigned int is_supported_device;
};
int nvmlGpmQueryDeviceSupport(void* d, GpmSupport* s) {
  QUERY(d, gpu);
  if (is("not_supported")) return kNotSupported;
  if (is("no_permission")) return kNoPermission;
  if (s->version != 1) return kInvalidArgument;
  s->is_supported_device = gpu == 0 && gpu != g_mig_gpu ? 1 : 0;
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
int nvmlGpmSampleGet(void* d, void* s) {
  QUERY(d, gpu);
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
  std::memset(g_calls, 0, sizeof g_calls);
  std::memset(g_energy_calls, 0, sizeof g_energy_calls);
  std::memset(g_violation_calls, 0, sizeof g_violation_calls);
  g_last_util_ns = -1;
  g_min_util_gap_ns = INT64_MAX;
  g_gpm_metrics_calls = 0;
}
// utilization queries of GPU 0
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
// counter queries (any field, through its own or its MIG device's handle) of GPU k
int fake_nvml_calls(int gpu) {
  std::lock_guard<std::mutex> lock(g_mu);
  return gpu >= 0 && gpu < kMaxGpus ? g_calls[gpu] : -1;
}
// The UUIDs of GPU k and of the MIG device on it, as NVML prints them.
const char* fake_nvml_uuid(int gpu) {
  static std::string u[kMaxGpus];
  if (gpu < 0 || gpu >= kMaxGpus) return "";
  u[gpu] = gpu_uuid(gpu);
  return u[gpu].c_str();
}
const char* fake_nvml_mig_uuid(int gpu) {
  static std::string u[kMaxGpus];
  if (gpu < 0 || gpu >= kMaxGpus) return "";
  u[gpu] = mig_uuid(gpu);
  return u[gpu].c_str();
}

}  // extern "C"
