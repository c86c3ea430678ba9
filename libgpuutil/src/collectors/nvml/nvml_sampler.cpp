// NVML sampling thread, device selection and per-field status handling (see nvml_sampler.h).
#include "gpuutil/nvml_sampler.h"

#include <algorithm>
#include <chrono>

#include "collectors/nvml/nvml_api.h"
#include "collectors/nvml/nvml_devices.h"
#include "gpuutil/clock.h"
#include "gpuutil/event_sink.h"

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

bool gives_up(NvmlStatus s) {
  return s == NvmlStatus::kNotSupported || s == NvmlStatus::kNoPermission || s == NvmlStatus::kNotPerInstance;
}

// What NVML reads for the whole GPU and what for the device itself.
constexpr NvmlField kUtilizationFields[] = {NvmlField::kUtilizationGpu, NvmlField::kGpmSmUtil,
                                            NvmlField::kGpmSmOccupancy, NvmlField::kGpmTensorUtil,
                                            NvmlField::kGpmDramBwUtil};
constexpr NvmlField kWholeGpuFields[] = {NvmlField::kSmClock,         NvmlField::kSmClockMax,
                                         NvmlField::kMemClock,        NvmlField::kMemClockMax,
                                         NvmlField::kClockEventReasons, NvmlField::kThrottlePower,
                                         NvmlField::kThrottleThermal, NvmlField::kPower,
                                         NvmlField::kEnergy,          NvmlField::kTemperature};

std::string describe_device(int32_t label, const std::string& uuid) {
  return "device " + std::to_string(label) + (uuid.empty() ? "" : " (" + uuid + ")");
}

// The one problems() line of a device that is not a whole GPU; "" for a GPU.
std::string mig_line(int32_t label, const nvml::Located& at) {
  const std::string who = describe_device(label, at.uuid);
  const std::string whole_fields = "clocks, clock-event reasons, throttle, power, energy and temperature";
  const std::string utilisation = "utilisation (nvml_utilization_gpu_pct, gpm_*)";
  const std::string why = ": NVML's value is the whole GPU's, not the MIG device's";
  switch (at.kind) {
    case NvmlDeviceKind::kGpu: return "";
    case NvmlDeviceKind::kMigDevice:
      if (!at.whole) {
        return who + ": a MIG device whose parent GPU NVML did not give: only fb_used_bytes (its own) is reported; " +
               whole_fields + " and " + utilisation + " are not";
      }
      return who + ": a MIG device: " + whole_fields + " are its parent GPU's (" + at.parent_uuid +
             "), shared by every MIG device on it; fb_used_bytes is its own; " + utilisation + " is not reported" +
             why;
    case NvmlDeviceKind::kGpuInMigMode:
      return who + ": the GPU is in MIG mode: " + whole_fields + " are the whole GPU's, shared by its MIG devices; " +
             "fb_used_bytes and " + utilisation + " are not reported" + why;
  }
  return "";
}

constexpr const char* kIndexLabelsLine =
    "NVML devices labelled by NVML index (no CUDA device list given): every GPU of the node is sampled, and the "
    "labels match CUDA device ids only when CUDA numbers devices as NVML does (CUDA_DEVICE_ORDER=PCI_BUS_ID and no "
    "CUDA_VISIBLE_DEVICES)";

}  // namespace

const char* counter_name(NvmlField f) { return kCounterNames[static_cast<size_t>(f)]; }

const char* to_string(NvmlStatus s) {
  switch (s) {
    case NvmlStatus::kUnknown: return "unknown";
    case NvmlStatus::kOk: return "ok";
    case NvmlStatus::kNotSupported: return "not_supported";
    case NvmlStatus::kNoPermission: return "no_permission";
    case NvmlStatus::kError: return "error";
    case NvmlStatus::kNotPerInstance: return "not_per_instance";
  }
  return "unknown";
}

const char* to_string(NvmlDeviceKind k) {
  switch (k) {
    case NvmlDeviceKind::kGpu: return "gpu";
    case NvmlDeviceKind::kMigDevice: return "mig_device";
    case NvmlDeviceKind::kGpuInMigMode: return "gpu_in_mig_mode";
  }
  return "gpu";
}

namespace nvml {

struct DeviceState {
  int32_t label = -1;  // CUDA device id (NVML index without a list)
  Located at;          // at.handle: the device's own fields; at.whole: whole-GPU fields
  std::array<NvmlStatus, kNvmlFieldCount> status{};
  bool gpm = false;
  GpmSample gpm_prev = nullptr;
  GpmSample gpm_cur = nullptr;
  bool gpm_have_prev = false;
};

namespace {

// Sets up GPM on a whole GPU (options.gpm on); one problems() line when it cannot.
void setup_gpm(const NvmlApi& api, DeviceState& d, std::vector<std::string>& problems) {
  auto mark = [&](NvmlStatus s, const std::string& why) {
    for (const auto& [id, f] : kGpmMetrics) d.status[static_cast<size_t>(f)] = s;
    problems.push_back("device " + std::to_string(d.label) + " gpm: " + why);
  };
  if (!api.has_gpm()) {
    mark(NvmlStatus::kNotSupported, "this NVML has no GPM entry points");
    return;
  }
  GpmSupport support{kGpmSupportVersion, 0};
  const int r = api.gpm_query_support(d.at.handle, &support);
  if (r != kSuccess) {
    mark(status_of(r), api.describe(r));
  } else if (!support.is_supported_device) {
    mark(NvmlStatus::kNotSupported, "device does not support GPM (Hopper or newer needed)");
  } else if (api.gpm_sample_alloc(&d.gpm_prev) != kSuccess || api.gpm_sample_alloc(&d.gpm_cur) != kSuccess) {
    mark(NvmlStatus::kError, "nvmlGpmSampleAlloc failed");
  } else {
    d.gpm = true;
  }
}

// The state of a found device: which fields are not per instance, GPM.
std::unique_ptr<DeviceState> make_state(const NvmlApi& api, int32_t label, Device handle, bool gpm,
                                        std::vector<std::string>& problems) {
  auto d = std::make_unique<DeviceState>();
  d->label = label;
  d->at = locate(api, handle);
  auto not_per_instance = [&](NvmlField f) { d->status[static_cast<size_t>(f)] = NvmlStatus::kNotPerInstance; };
  if (d->at.kind != NvmlDeviceKind::kGpu) {
    for (NvmlField f : kUtilizationFields) not_per_instance(f);
    problems.push_back(mig_line(label, d->at));
  }
  if (d->at.kind == NvmlDeviceKind::kGpuInMigMode) not_per_instance(NvmlField::kFbUsed);
  if (!d->at.whole) {
    for (NvmlField f : kWholeGpuFields) not_per_instance(f);
  }
  if (gpm && d->at.kind == NvmlDeviceKind::kGpu) setup_gpm(api, *d, problems);
  return d;
}

}  // namespace
}  // namespace nvml

NvmlSampler::NvmlSampler(NvmlSamplerOptions options)
    : options_(std::move(options)), interval_ns_(std::max(options_.interval_ns, kMinIntervalNs)) {
  if (!options_.now_ns) options_.now_ns = [] { return session_now_ns(); };
  if (options_.max_samples == 0) options_.max_samples = 1;
}

NvmlSampler::~NvmlSampler() {
  stop();
  if (api_) {
    free_devices(devices_);
    if (initialised_) api_->shutdown();
  }
}

void NvmlSampler::free_devices(Devices& devices) {
  for (auto& d : devices) {
    if (d->gpm_prev) api_->gpm_sample_free(d->gpm_prev);
    if (d->gpm_cur) api_->gpm_sample_free(d->gpm_cur);
  }
  devices.clear();
}

NvmlSampler::Devices NvmlSampler::open_devices(const std::optional<std::vector<NvmlDeviceRef>>& refs,
                                               std::vector<std::string>& problems) {
  Devices out;
  if (!refs) {
    problems.push_back(kIndexLabelsLine);
    unsigned int n = 0;
    if (api_->device_count(&n) != nvml::kSuccess) n = 0;
    for (unsigned int i = 0; i < n; ++i) {
      nvml::Device h = nullptr;
      if (const int r = api_->device_by_index(i, &h); r != nvml::kSuccess) {
        problems.push_back("device " + std::to_string(i) + ": nvmlDeviceGetHandleByIndex: " + api_->describe(r));
        continue;
      }
      out.push_back(nvml::make_state(*api_, static_cast<int32_t>(i), h, options_.gpm, problems));
    }
    return out;
  }
  for (const NvmlDeviceRef& ref : *refs) {
    const bool listed = std::any_of(out.begin(), out.end(), [&](const auto& d) { return d->label == ref.cuda_device_id; });
    if (ref.cuda_device_id < 0 || listed) {
      problems.push_back(describe_device(ref.cuda_device_id, ref.uuid) + ": " +
                         (listed ? "listed twice; sampled once" : "not a CUDA device id; not sampled"));
      continue;
    }
    nvml::Device h = nullptr;
    if (const std::string why = nvml::find_device(*api_, ref, &h); !why.empty()) {
      problems.push_back("device " + std::to_string(ref.cuda_device_id) + ": not sampled: " + why);
      continue;
    }
    out.push_back(nvml::make_state(*api_, ref.cuda_device_id, h, options_.gpm, problems));
  }
  return out;
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
  std::vector<std::string> problems;
  Devices opened = open_devices(options_.devices, problems);
  std::lock_guard<std::mutex> lock(mu_);
  problems_.insert(problems_.end(), problems.begin(), problems.end());
  devices_ = std::move(opened);
  if (options_.devices && !options_.devices->empty() && devices_.empty()) {
    error_ = "none of the " + std::to_string(options_.devices->size()) + " listed CUDA devices was found in NVML";
    for (const auto& p : problems) error_ += "; " + p;
    return false;
  }
  return true;
}

int NvmlSampler::set_devices(const std::vector<NvmlDeviceRef>& devices) {
  if (!api_ || !error_.empty()) return 0;
  std::vector<std::string> problems;
  std::lock_guard<std::mutex> pass(pass_mu_);
  Devices opened = open_devices(devices, problems);
  Devices old;
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    problems_.insert(problems_.end(), problems.begin(), problems.end());
    old.swap(devices_);
    devices_ = std::move(opened);
    n = static_cast<int>(devices_.size());
  }
  free_devices(old);
  return n;
}

int NvmlSampler::device_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(devices_.size());
}

std::vector<NvmlSampledDevice> NvmlSampler::devices() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NvmlSampledDevice> out;
  for (const auto& d : devices_) out.push_back({d->label, d->at.uuid, d->at.kind, d->at.parent_uuid});
  return out;
}

void NvmlSampler::record(nvml::DeviceState& d, NvmlField f, int ret, double value, int64_t ts_ns) {
  const auto fi = static_cast<size_t>(f);
  const NvmlStatus s = status_of(ret);
  std::lock_guard<std::mutex> lock(mu_);
  if (s != NvmlStatus::kOk) {
    if (d.status[fi] != s) {
      problems_.push_back("device " + std::to_string(d.label) + " " + counter_name(f) + ": " + api_->describe(ret));
    }
    d.status[fi] = s;
    return;
  }
  d.status[fi] = NvmlStatus::kOk;
  if (buffer_.size() >= options_.max_samples) {
    buffer_.pop_front();
    dropped_.fetch_add(1);
  }
  buffer_.push_back({ts_ns, d.label, f, value});
}

void NvmlSampler::sample_gpm(nvml::DeviceState& d, int64_t ts_ns) {
  if (api_->gpm_sample_get(d.at.handle, d.gpm_cur) != nvml::kSuccess) return;
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
      record(d, f, r != nvml::kSuccess ? r : get.metrics[i].nvml_return, get.metrics[i].value, ts_ns);
    }
  }
  std::swap(d.gpm_prev, d.gpm_cur);
  d.gpm_have_prev = true;
}

void NvmlSampler::sample_once() {
  if (!api_ || !error_.empty()) return;
  std::lock_guard<std::mutex> pass(pass_mu_);
  for (auto& state : devices_) {
    nvml::DeviceState& d = *state;
    const nvml::Device own = d.at.handle;     // the device's own fields (memory, utilisation)
    const nvml::Device whole = d.at.whole;    // whole-GPU fields (a MIG device's parent); unused when null
    const int64_t ts = options_.now_ns();
    auto want = [&](NvmlField f) { return !gives_up(d.status[static_cast<size_t>(f)]); };
    if (want(NvmlField::kUtilizationGpu)) {
      nvml::Utilization u{};
      const int r = api_->utilization(own, &u);
      record(d, NvmlField::kUtilizationGpu, r, u.gpu, ts);
    }
    const std::pair<NvmlField, unsigned int> clocks[] = {{NvmlField::kSmClock, nvml::kClockSm},
                                                         {NvmlField::kMemClock, nvml::kClockMem}};
    for (const auto& [f, kind] : clocks) {
      if (want(f)) {
        unsigned int mhz = 0;
        const int r = api_->clock(whole, kind, &mhz);
        record(d, f, r, mhz, ts);
      }
      const NvmlField fmax = f == NvmlField::kSmClock ? NvmlField::kSmClockMax : NvmlField::kMemClockMax;
      if (want(fmax)) {
        unsigned int mhz = 0;
        const int r = api_->max_clock(whole, kind, &mhz);
        record(d, fmax, r, mhz, ts);
      }
    }
    if (want(NvmlField::kClockEventReasons)) {
      unsigned long long mask = 0;
      const int r = api_->clock_event_reasons(whole, &mask);
      record(d, NvmlField::kClockEventReasons, r, static_cast<double>(mask), ts);
    }
    const std::pair<NvmlField, unsigned int> policies[] = {{NvmlField::kThrottlePower, nvml::kPerfPolicyPower},
                                                           {NvmlField::kThrottleThermal, nvml::kPerfPolicyThermal}};
    for (const auto& [f, policy] : policies) {
      if (!want(f)) continue;
      nvml::ViolationTime v{};
      const int r = api_->violation_status(whole, policy, &v);
      record(d, f, r, static_cast<double>(v.violation_time), ts);
    }
    if (want(NvmlField::kPower)) {
      unsigned int mw = 0;
      const int r = api_->power_usage(whole, &mw);
      record(d, NvmlField::kPower, r, mw / 1000.0, ts);
    }
    if (want(NvmlField::kEnergy)) {
      unsigned long long mj = 0;
      const int r = api_->total_energy(whole, &mj);
      record(d, NvmlField::kEnergy, r, static_cast<double>(mj) / 1000.0, ts);
    }
    if (want(NvmlField::kTemperature)) {
      unsigned int c = 0;
      const int r = api_->temperature(whole, nvml::kTemperatureGpu, &c);
      record(d, NvmlField::kTemperature, r, c, ts);
    }
    if (want(NvmlField::kFbUsed)) {
      nvml::Memory m{};
      const int r = api_->memory_info(own, &m);
      record(d, NvmlField::kFbUsed, r, static_cast<double>(m.used), ts);
    }
    if (d.gpm) sample_gpm(d, ts);
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

void NvmlSampler::drain(EventSink& session) {
  std::deque<Sample> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    taken.swap(buffer_);
  }
  for (const auto& s : taken) session.add_counter({s.ts_ns, session.intern(counter_name(s.field)), s.device, s.value});
}

NvmlStatus NvmlSampler::status(int device, NvmlField f) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& d : devices_) {
    if (d->label == device) return d->status[static_cast<size_t>(f)];
  }
  return NvmlStatus::kUnknown;
}

std::vector<std::string> NvmlSampler::problems() const {
  std::lock_guard<std::mutex> lock(mu_);
  return problems_;
}

}  // namespace gpuutil
