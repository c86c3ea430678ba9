// The NVML sampler: device counters on a background thread, bounded memory.
//
// Samples, per device, NVML utilization.gpu (duty cycle), SM and memory
// clocks and their maxima, the current clock-event (throttle) reason mask,
// the cumulative power- and thermal-violation time (per-step throttle
// durations are the growth of these counters), power, cumulative energy,
// temperature and framebuffer used; with `gpm` on (opt-in: GPM shares
// counters with DCGM) and a GPM-capable device (Hopper+), also GPM SM
// utilisation, SM occupancy, tensor utilisation and DRAM bandwidth
// utilisation, each over the interval between two GPM samples.
//
// Output is plain CounterSamples (names in device_health.cpp and
// docs/report-schema.md), taken out with drain(); the analysis core never
// sees an NVML type.
//
// Which devices, and their labels: the caller lists the CUDA devices its
// process uses (NvmlSamplerOptions::devices, or set_devices() once CUDA is
// up), each as {cuda_device_id, uuid}. The sampler opens each by UUID
// (nvmlDeviceGetHandleByUUID) and labels every CounterSample with the CUDA
// device id, the id CUPTI's kernel records carry, so the analysis joins
// counters to kernels by equal device id. NVML's index is never used as a
// label when a list is given: NVML enumerates every GPU of the node in PCI
// bus order and ignores CUDA_VISIBLE_DEVICES, CUDA numbers only the visible
// devices in its own order. Without a list (nullopt) the sampler falls back
// to every NVML device labelled by NVML index, and says in problems() that
// this is only right when both orders agree.
//
// MIG: NVML's utilisation counters describe a whole GPU, not a MIG device.
// For a MIG device the sampler reads clocks, clock-event reasons, throttle
// time, power, energy and temperature from its parent GPU (shared by every
// MIG device on it), framebuffer used from the MIG device itself, and does
// not report utilisation or GPM (status kNotPerInstance); for a GPU in MIG
// mode it reads the whole-GPU counters and reports neither utilisation, GPM
// nor framebuffer used. One problems() line per such device says so.
//
// Rules:
//   - never poll faster than NVML's averaging makes meaningful: the
//     interval is clamped to >= kMinIntervalNs (1/6 s, the shortest
//     utilization.gpu sample period of any NVML device), which also keeps
//     GPM at >= 100 ms;
//   - a field that answers NOT_SUPPORTED or NO_PERMISSION is recorded in
//     status() / problems() and not asked again; other fields keep going;
//   - memory is bounded: at most max_samples buffered; the oldest are
//     dropped (and counted) when drain() is not called often enough.
//
// Threading: start()/stop()/drain()/sample_once()/set_devices() may be
// called from any thread; sampling passes and device changes are serialised
// (a pass from the caller and one from the thread never interleave); open()
// before anything else.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpuutil/events.h"

namespace gpuutil {

class EventSink;

namespace nvml {
struct NvmlApi;
struct DeviceState;  // one sampled device (nvml_sampler.cpp)
}

enum class NvmlField : uint8_t {
  kUtilizationGpu,
  kSmClock,
  kSmClockMax,
  kMemClock,
  kMemClockMax,
  kClockEventReasons,
  kThrottlePower,
  kThrottleThermal,
  kPower,
  kEnergy,
  kTemperature,
  kFbUsed,
  kGpmSmUtil,
  kGpmSmOccupancy,
  kGpmTensorUtil,
  kGpmDramBwUtil,
};
inline constexpr int kNvmlFieldCount = 16;
// The CounterSample name a field is stored under ("sm_clock_mhz", ...).
const char* counter_name(NvmlField f);

// kNotPerInstance: the field is not sampled because NVML's value would be
// the whole GPU's, not the MIG device's the process runs on.
enum class NvmlStatus : uint8_t { kUnknown, kOk, kNotSupported, kNoPermission, kError, kNotPerInstance };
const char* to_string(NvmlStatus s);

// A CUDA device of this process, named so NVML can find it.
struct NvmlDeviceRef {
  int32_t cuda_device_id = -1;  // the label of its samples: CUPTI's `device`, torch's cuda:N
  // NVML's "GPU-<hex>" / "MIG-<hex>" (or "MIG-GPU-<hex>/<gi>/<ci>"), with or
  // without the prefix (torch prints none), any case; or a leading part that
  // is unique on the node, as CUDA_VISIBLE_DEVICES accepts.
  std::string uuid;
  // Instead of uuid: NVML's index. Right only when the caller knows CUDA
  // numbers the GPUs as NVML does (CUDA_DEVICE_ORDER=PCI_BUS_ID).
  int32_t nvml_index = -1;
};

enum class NvmlDeviceKind : uint8_t {
  kGpu,           // a whole GPU: every field is its own
  kMigDevice,     // a MIG device: whole-GPU fields from its parent GPU
  kGpuInMigMode,  // a GPU in MIG mode (which of its MIG devices is ours NVML cannot tell): whole-GPU fields only
};
const char* to_string(NvmlDeviceKind k);

// A device being sampled.
struct NvmlSampledDevice {
  int32_t device = -1;      // the label its samples carry (CUDA device id; NVML index without a list)
  std::string uuid;         // NVML's UUID of it
  NvmlDeviceKind kind = NvmlDeviceKind::kGpu;
  std::string parent_uuid;  // kMigDevice: the GPU whose whole-GPU counters are read ("" if NVML gave none)
};

struct NvmlSamplerOptions {
  int64_t interval_ns = 200'000'000;
  bool gpm = false;              // opt-in
  size_t max_samples = 1u << 16; // buffered samples, all devices and fields
  std::function<int64_t()> now_ns;  // session clock; default gpuutil::session_now_ns
  // The CUDA devices to sample. nullopt: every NVML device, labelled by
  // NVML index (a problems() line says it is only right when CUDA and NVML
  // number the devices alike). An empty list: none until set_devices().
  std::optional<std::vector<NvmlDeviceRef>> devices;
};

class NvmlSampler {
 public:
  static constexpr int64_t kMinIntervalNs = 166'666'667;

  explicit NvmlSampler(NvmlSamplerOptions options = {});
  ~NvmlSampler();  // stops the thread and shuts NVML down
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // Loads NVML, initialises it and opens the devices (options.devices, or
  // every NVML device). False with error() set (library missing, init
  // failed, no devices, or a non-empty list of which no device was found);
  // the sampler is then inert. A listed device that is not found is a
  // problems() line; the others are sampled.
  bool open();
  const std::string& error() const { return error_; }
  // Replaces the devices sampled, e.g. once the caller knows which CUDA
  // devices the process uses (after open(); any thread, between passes).
  // Returns how many were opened; problems() says why any other was not.
  int set_devices(const std::vector<NvmlDeviceRef>& devices);
  int device_count() const;
  std::vector<NvmlSampledDevice> devices() const;
  int64_t interval_ns() const { return interval_ns_; }

  // One sampling pass over every device (the thread calls this each interval).
  void sample_once();
  // Starts / stops the background thread (open() first).
  bool start();
  void stop();

  // Moves the buffered samples out, interning names in `names`.
  void drain(NameTable& names, std::vector<CounterSample>& out);
  void drain(EventStore& store) { drain(store.names, store.counters); }
  void drain(EventSink& session);

  // The field's status on the device labelled `device` (kUnknown: no such device).
  NvmlStatus status(int device, NvmlField f) const;
  // One line per field that is not available ("device 0 power_w:
  // NOT_SUPPORTED (3: ...)"), per listed device not found, per MIG device,
  // and one when devices are labelled by NVML index.
  std::vector<std::string> problems() const;
  uint64_t dropped() const { return dropped_.load(); }
  uint64_t passes() const { return passes_.load(); }

 private:
  struct Sample {
    int64_t ts_ns;
    int32_t device;
    NvmlField field;
    double value;
  };
  using Devices = std::vector<std::unique_ptr<nvml::DeviceState>>;

  // Opens `refs` (nullopt: every NVML device); lines for problems_ in `problems`.
  Devices open_devices(const std::optional<std::vector<NvmlDeviceRef>>& refs, std::vector<std::string>& problems);
  void free_devices(Devices& devices);
  void record(nvml::DeviceState& d, NvmlField f, int ret, double value, int64_t ts_ns);
  void sample_gpm(nvml::DeviceState& d, int64_t ts_ns);
  void run();

  NvmlSamplerOptions options_;
  int64_t interval_ns_;
  std::unique_ptr<nvml::NvmlApi> api_;
  bool initialised_ = false;
  std::string error_;
  Devices devices_;  // changed under pass_mu_ and mu_

  mutable std::mutex mu_;  // buffer_, status, problems, devices_
  std::deque<Sample> buffer_;
  std::vector<std::string> problems_;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> passes_{0};

  std::mutex pass_mu_;  // one sampling pass at a time
  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpuutil
