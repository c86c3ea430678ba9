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
// Threading: start()/stop()/drain()/sample_once() may be called from any
// thread; sampling passes are serialised (a pass from the caller and one
// from the thread never interleave); open() before anything else.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpuutil/events.h"

namespace gpuutil {

class Session;

namespace nvml {
struct NvmlApi;
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

enum class NvmlStatus : uint8_t { kUnknown, kOk, kNotSupported, kNoPermission, kError };
const char* to_string(NvmlStatus s);

struct NvmlSamplerOptions {
  int64_t interval_ns = 200'000'000;
  bool gpm = false;              // opt-in
  size_t max_samples = 1u << 16; // buffered samples, all devices and fields
  std::function<int64_t()> now_ns;  // session clock; default gpuutil::session_now_ns
};

class NvmlSampler {
 public:
  static constexpr int64_t kMinIntervalNs = 166'666'667;

  explicit NvmlSampler(NvmlSamplerOptions options = {});
  ~NvmlSampler();  // stops the thread and shuts NVML down
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // Loads NVML, initialises it and enumerates devices. False with error()
  // set (library missing, init failed, no devices); the sampler is then inert.
  bool open();
  const std::string& error() const { return error_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  int64_t interval_ns() const { return interval_ns_; }

  // One sampling pass over every device (the thread calls this each interval).
  void sample_once();
  // Starts / stops the background thread (open() first).
  bool start();
  void stop();

  // Moves the buffered samples out, interning names in `names`.
  void drain(NameTable& names, std::vector<CounterSample>& out);
  void drain(EventStore& store) { drain(store.names, store.counters); }
  void drain(Session& session);

  NvmlStatus status(int device, NvmlField f) const;
  // One line per field that is not available: "device 0 power_w: NOT_SUPPORTED (3: ...)".
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
  struct DeviceState;

  void record(int32_t device, NvmlField f, int ret, double value, int64_t ts_ns);
  void sample_gpm(DeviceState& d, int32_t index, int64_t ts_ns);
  void run();

  NvmlSamplerOptions options_;
  int64_t interval_ns_;
  std::unique_ptr<nvml::NvmlApi> api_;
  bool initialised_ = false;
  std::string error_;
  std::vector<std::unique_ptr<DeviceState>> devices_;

  mutable std::mutex mu_;  // buffer_, status, problems
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
