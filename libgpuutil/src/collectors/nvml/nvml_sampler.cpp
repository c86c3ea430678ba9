// NVML sampling thread and per-field status handling (see nvml_sampler.h).
#include "gpuutil/nvml_sampler.h"

#include <algorithm>
#include <chrono>

#include "collectors/nvml/nvml_api.h"
#include "gpuutil/clock.h"
#include "gpuutil/session.h"

namespace gpuutil {

namespace {

constexpr const char* kCounterNames[kNvmlFieldCount] = {
    "nvml_utilization_gpu_pct", "sm_clock_mhz",      "sm_clock_max_mhz",          "mem_clock_mhz",
    "mem_clock_max_mhz",        "clock_event_reasons", "throttle_power_total_ns", "throttle_thermal_total_ns",
    "power_w",                  "energy_total_j",    "temperature_c",             "fb_used_bytes",
    "gpm_sm_util_pct",          "gpm_sm_occupancy_pct", "gpm_tensor_util_pct",    "gpm_dram_bw_util_pct",
};

constexpr std::array<std::pair<unsigned int, NvmlField>, 4> kGpmMetrics = {{
    {nvml::kGpmMetricSmUtil, NvmlField::kGpmSmUtil},
    {nvml::kGpmMetricSmOccupancy, NvmlField::kGpmSmOccupancy},
    {nvml::kGpmMetricAnyTensorUtil, NvmlField::kGpmTensorUtil},
    {nvml::kGpmMetricDramBwUtil, NvmlField::kGpmDramBwUtil},
}};

NvmlStatus status_of(int ret) {
  switch (ret) {
    case nvml::kSuccess: return NvmlStatus::kOk;
    case nvml::kErrorNotSupported: return NvmlStatus::kNotSupported;
    case nvml::kErrorNoPermission: return NvmlStatus::kNoPermission;
    default: return NvmlStatus::kError;
  }
}

bool gives_up(NvmlStatus s) { return s == NvmlStatus::kNotSupported || s == NvmlStatus::kNoPermission; }

}  // namespace

const char* counter_name(NvmlField f) { return kCounterNames[static_cast<size_t>(f)]; }

const char* to_string(NvmlStatus s) {
  switch (s) {
    case NvmlStatus::kUnknown: return "unknown";
    case NvmlStatus::kOk: return "ok";
    case NvmlStatus::kNotSupported: return "not_supported";
    case NvmlStatus::kNoPermission: return "no_permission";
    case NvmlStatus::kError: return "error";
  }
  return "unknown";
}

struct NvmlSampler::DeviceState {
  nvml::Device handle = nullptr;
  std::array<NvmlStatus, kNvmlFieldCount> status{};
  bool gpm = false;
  nvml::GpmSample gpm_prev = nullptr;
  nvml::GpmSample gpm_cur = nullptr;
  bool gpm_have_prev = false;
};

NvmlSampler::NvmlSampler(NvmlSamplerOptions options)
    : options_(std::move(options)), interval_ns_(std::max(options_.interval_ns, kMinIntervalNs)) {
  if (!options_.now_ns) options_.now_ns = [] { return session_now_ns(); };
  if (options_.max_samples == 0) options_.max_samples = 1;
}

NvmlSampler::~NvmlSampler() {
  stop();
  if (api_) {
    for (auto& d : devices_) {
      if (d->gpm_prev) api_->gpm_sample_free(d->gpm_prev);
      if (d->gpm_cur) api_->gpm_sample_free(d->gpm_cur);
    }
    if (initialised_) api_->shutdown();
  }
}

bool NvmlSampler::open() {
  if (api_) return error_.empty();
  api_ = nvml::NvmlApi::load(&error_);
  if (!api_) return false;
  if (int r = api_->init(); r != nvml::kSuccess) {
    error_ = "nvmlInit failed: " + api_->describe(r);
    return false;
  }
  initialised_ = true;
  unsigned int n = 0;
  if (int r = api_->device_count(&n); r != nvml::kSuccess || n == 0) {
    error_ = r != nvml::kSuccess ? "nvmlDeviceGetCount failed: " + api_->describe(r) : "NVML reports no devices";
    return false;
  }
  for (unsigned int i = 0; i < n; ++i) {
    auto d = std::make_unique<DeviceState>();
    if (api_->device_by_index(i, &d->handle) != nvml::kSuccess) d->handle = nullptr;
    if (options_.gpm && d->handle) {
      auto mark = [&](NvmlStatus s, const std::string& why) {
        for (const auto& [id, f] : kGpmMetrics) d->status[static_cast<size_t>(f)] = s;
        problems_.push_back("device " + std::to_string(i) + " gpm: " + why);
      };
      if (!api_->has_gpm()) {
        mark(NvmlStatus::kNotSupported, "this NVML has no GPM entry points");
      } else {
        nvml::GpmSupport support{nvml::kGpmSupportVersion, 0};
        const int r = api_->gpm_query_support(d->handle, &support);
        if (r != nvml::kSuccess) {
          mark(status_of(r), api_->describe(r));
        } else if (!support.is_supported_device) {
          mark(NvmlStatus::kNotSupported, "device does not support GPM (Hopper or newer needed)");
        } else if (api_->gpm_sample_alloc(&d->gpm_prev) != nvml::kSuccess ||
                   api_->gpm_sample_alloc(&d->gpm_cur) != nvml::kSuccess) {
          mark(NvmlStatus::kError, "nvmlGpmSampleAlloc failed");
        } else {
          d->gpm = true;
        }
      }
    }
    devices_.push_back(std::move(d));
  }
  return true;
}

void NvmlSampler::record(int32_t device, NvmlField f, int ret, double value, int64_t ts_ns) {
  const auto fi = static_cast<size_t>(f);
  DeviceState& d = *devices_[static_cast<size_t>(device)];
  const NvmlStatus s = status_of(ret);
  std::lock_guard<std::mutex> lock(mu_);
  if (s != NvmlStatus::kOk) {
    if (d.status[fi] != s) {
      problems_.push_back("device " + std::to_string(device) + " " + counter_name(f) + ": " + api_->describe(ret));
    }
    d.status[fi] = s;
    return;
  }
  d.status[fi] = NvmlStatus::kOk;
  if (buffer_.size() >= options_.max_samples) {
    buffer_.pop_front();
    dropped_.fetch_add(1);
  }
  buffer_.push_back({ts_ns, device, f, value});
}

void NvmlSampler::sample_gpm(DeviceState& d, int32_t index, int64_t ts_ns) {
  if (api_->gpm_sample_get(d.handle, d.gpm_cur) != nvml::kSuccess) return;
  if (d.gpm_have_prev) {
    nvml::GpmMetricsGet get{};
    get.version = nvml::kGpmMetricsGetVersion;
    get.num_metrics = static_cast<unsigned int>(kGpmMetrics.size());
    get.sample1 = d.gpm_prev;
    get.sample2 = d.gpm_cur;
    for (size_t i = 0; i < kGpmMetrics.size(); ++i) get.metrics[i].metric_id = kGpmMetrics[i].first;
    const int r = api_->gpm_metrics_get(&get);
    for (size_t i = 0; i < kGpmMetrics.size(); ++i) {
      const NvmlField f = kGpmMetrics[i].second;
      if (gives_up(d.status[static_cast<size_t>(f)])) continue;
      record(index, f, r != nvml::kSuccess ? r : get.metrics[i].nvml_return, get.metrics[i].value, ts_ns);
    }
  }
  std::swap(d.gpm_prev, d.gpm_cur);
  d.gpm_have_prev = true;
}

void NvmlSampler::sample_once() {
  if (!api_ || !error_.empty()) return;
  std::lock_guard<std::mutex> pass(pass_mu_);
  for (size_t i = 0; i < devices_.size(); ++i) {
    DeviceState& d = *devices_[i];
    if (!d.handle) continue;
    const auto dev = static_cast<int32_t>(i);
    const int64_t ts = options_.now_ns();
    auto want = [&](NvmlField f) { return !gives_up(d.status[static_cast<size_t>(f)]); };
    if (want(NvmlField::kUtilizationGpu)) {
      nvml::Utilization u{};
      const int r = api_->utilization(d.handle, &u);
      record(dev, NvmlField::kUtilizationGpu, r, u.gpu, ts);
    }
    const std::pair<NvmlField, unsigned int> clocks[] = {{NvmlField::kSmClock, nvml::kClockSm},
                                                         {NvmlField::kMemClock, nvml::kClockMem}};
    for (const auto& [f, kind] : clocks) {
      if (want(f)) {
        unsigned int mhz = 0;
        const int r = api_->clock(d.handle, kind, &mhz);
        record(dev, f, r, mhz, ts);
      }
      const NvmlField fmax = f == NvmlField::kSmClock ? NvmlField::kSmClockMax : NvmlField::kMemClockMax;
      if (want(fmax)) {
        unsigned int mhz = 0;
        const int r = api_->max_clock(d.handle, kind, &mhz);
        record(dev, fmax, r, mhz, ts);
      }
    }
    if (want(NvmlField::kClockEventReasons)) {
      unsigned long long mask = 0;
      const int r = api_->clock_event_reasons(d.handle, &mask);
      record(dev, NvmlField::kClockEventReasons, r, static_cast<double>(mask), ts);
    }
    const std::pair<NvmlField, unsigned int> policies[] = {{NvmlField::kThrottlePower, nvml::kPerfPolicyPower},
                                                           {NvmlField::kThrottleThermal, nvml::kPerfPolicyThermal}};
    for (const auto& [f, policy] : policies) {
      if (!want(f)) continue;
      nvml::ViolationTime v{};
      const int r = api_->violation_status(d.handle, policy, &v);
      record(dev, f, r, static_cast<double>(v.violation_time), ts);
    }
    if (want(NvmlField::kPower)) {
      unsigned int mw = 0;
      const int r = api_->power_usage(d.handle, &mw);
      record(dev, NvmlField::kPower, r, mw / 1000.0, ts);
    }
    if (want(NvmlField::kEnergy)) {
      unsigned long long mj = 0;
      const int r = api_->total_energy(d.handle, &mj);
      record(dev, NvmlField::kEnergy, r, static_cast<double>(mj) / 1000.0, ts);
    }
    if (want(NvmlField::kTemperature)) {
      unsigned int c = 0;
      const int r = api_->temperature(d.handle, nvml::kTemperatureGpu, &c);
      record(dev, NvmlField::kTemperature, r, c, ts);
    }
    if (want(NvmlField::kFbUsed)) {
      nvml::Memory m{};
      const int r = api_->memory_info(d.handle, &m);
      record(dev, NvmlField::kFbUsed, r, static_cast<double>(m.used), ts);
    }
    if (d.gpm) sample_gpm(d, dev, ts);
  }
  passes_.fetch_add(1);
}

void NvmlSampler::run() {
  std::unique_lock<std::mutex> lock(run_mu_);
  while (!stop_) {
    lock.unlock();
    sample_once();
    lock.lock();
    run_cv_.wait_for(lock, std::chrono::nanoseconds(interval_ns_), [this] { return stop_; });
  }
}

bool NvmlSampler::start() {
  if (!api_ || !error_.empty() || thread_.joinable()) return false;
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { run(); });
  return true;
}

void NvmlSampler::stop() {
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    stop_ = true;
  }
  run_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NvmlSampler::drain(NameTable& names, std::vector<CounterSample>& out) {
  std::deque<Sample> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    taken.swap(buffer_);
  }
  std::array<NameId, kNvmlFieldCount> ids;
  ids.fill(kNoName);
  for (const auto& s : taken) {
    NameId& id = ids[static_cast<size_t>(s.field)];
    if (id == kNoName) id = names.intern(counter_name(s.field));
    out.push_back({s.ts_ns, id, s.device, s.value});
  }
}

void NvmlSampler::drain(Session& session) {
  std::deque<Sample> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    taken.swap(buffer_);
  }
  for (const auto& s : taken) session.add_counter({s.ts_ns, session.intern(counter_name(s.field)), s.device, s.value});
}

NvmlStatus NvmlSampler::status(int device, NvmlField f) const {
  if (device < 0 || static_cast<size_t>(device) >= devices_.size()) return NvmlStatus::kUnknown;
  std::lock_guard<std::mutex> lock(mu_);
  return devices_[static_cast<size_t>(device)]->status[static_cast<size_t>(f)];
}

std::vector<std::string> NvmlSampler::problems() const {
  std::lock_guard<std::mutex> lock(mu_);
  return problems_;
}

}  // namespace gpuutil
