// Per-step device health from counter samples (see device_health.h).
#include "analysis/device_health.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace gpuutil {

namespace {

enum class Agg { kGauge, kMax, kCumulative };

struct Field {
  const char* counter;  // CounterSample name
  Agg agg;
  std::optional<double> DeviceHealth::*dbl;    // target when a double
  std::optional<int64_t> DeviceHealth::*i64;   // target when integer ns
};

const Field kFields[] = {
    {"nvml_utilization_gpu_pct", Agg::kGauge, &DeviceHealth::nvml_utilization_pct, nullptr},
    {"sm_clock_mhz", Agg::kGauge, &DeviceHealth::sm_clock_mhz, nullptr},
    {"sm_clock_max_mhz", Agg::kGauge, &DeviceHealth::sm_clock_max_mhz, nullptr},
    {"mem_clock_mhz", Agg::kGauge, &DeviceHealth::mem_clock_mhz, nullptr},
    {"mem_clock_max_mhz", Agg::kGauge, &DeviceHealth::mem_clock_max_mhz, nullptr},
    {"power_w", Agg::kGauge, &DeviceHealth::power_w, nullptr},
    {"energy_total_j", Agg::kCumulative, &DeviceHealth::energy_j, nullptr},
    {"temperature_c", Agg::kGauge, &DeviceHealth::temperature_c, nullptr},
    {"throttle_power_total_ns", Agg::kCumulative, nullptr, &DeviceHealth::throttle_power_ns},
    {"throttle_thermal_total_ns", Agg::kCumulative, nullptr, &DeviceHealth::throttle_thermal_ns},
    {"fb_used_bytes", Agg::kMax, &DeviceHealth::fb_used_bytes, nullptr},
    {"torch_allocated_bytes", Agg::kMax, &DeviceHealth::allocated_bytes, nullptr},
    {"torch_reserved_bytes", Agg::kMax, &DeviceHealth::reserved_bytes, nullptr},
    {"torch_peak_allocated_bytes", Agg::kMax, &DeviceHealth::peak_allocated_bytes, nullptr},
    {"gpm_sm_util_pct", Agg::kGauge, &DeviceHealth::gpm_sm_util_pct, nullptr},
    {"gpm_sm_occupancy_pct", Agg::kGauge, &DeviceHealth::gpm_sm_occupancy_pct, nullptr},
    {"gpm_tensor_util_pct", Agg::kGauge, &DeviceHealth::gpm_tensor_util_pct, nullptr},
    {"gpm_dram_bw_util_pct", Agg::kGauge, &DeviceHealth::gpm_dram_bw_util_pct, nullptr},
};
constexpr int kFieldCount = static_cast<int>(sizeof kFields / sizeof kFields[0]);
static_assert(kFieldCount < 64, "CounterIndex keys assume fewer than 64 fields");

}  // namespace

bool DeviceHealth::any() const {
  for (const auto& f : kFields) {
    if (f.dbl ? (this->*f.dbl).has_value() : (this->*f.i64).has_value()) return true;
  }
  return false;
}

int health_field_of(std::string_view counter_name) {
  for (int i = 0; i < kFieldCount; ++i) {
    if (counter_name == kFields[i].counter) return i;
  }
  return -1;
}

CounterIndex::CounterIndex(const EventStore& store) {
  std::unordered_map<NameId, int> field_of_name;
  for (const auto& c : store.counters) {
    auto it = field_of_name.find(c.counter);
    if (it == field_of_name.end()) it = field_of_name.emplace(c.counter, health_field_of(store.names.view(c.counter))).first;
    if (it->second < 0 || !std::isfinite(c.value)) continue;
    series_[int64_t{c.device} * 64 + it->second].push_back({c.ts_ns, c.value});
  }
  for (auto& [key, v] : series_) {
    std::stable_sort(v.begin(), v.end(), [](const Point& a, const Point& b) { return a.ts_ns < b.ts_ns; });
  }
}

DeviceHealth CounterIndex::health(int32_t device, int64_t lo_ns, int64_t hi_ns) const {
  DeviceHealth h;
  for (int fi = 0; fi < kFieldCount; ++fi) {
    const auto it = series_.find(int64_t{device} * 64 + fi);
    if (it == series_.end()) continue;
    const auto& v = it->second;
    const Field& f = kFields[fi];
    auto at_or_before = [&](int64_t t) -> const Point* {
      auto p = std::upper_bound(v.begin(), v.end(), t, [](int64_t x, const Point& q) { return x < q.ts_ns; });
      return p == v.begin() ? nullptr : &*(p - 1);
    };
    std::optional<double> value;
    if (f.agg == Agg::kCumulative) {
      const Point* a = at_or_before(lo_ns);
      const Point* b = at_or_before(hi_ns);
      if (a && b) value = std::max(0.0, b->value - a->value);
    } else {
      auto p = std::lower_bound(v.begin(), v.end(), lo_ns, [](const Point& q, int64_t x) { return q.ts_ns < x; });
      double sum = 0, mx = 0;
      size_t n = 0;
      for (; p != v.end() && p->ts_ns < hi_ns; ++p, ++n) {
        sum += p->value;
        mx = n == 0 ? p->value : std::max(mx, p->value);
      }
      if (n > 0) value = f.agg == Agg::kMax ? mx : sum / static_cast<double>(n);
    }
    if (!value) continue;
    if (f.dbl) {
      h.*f.dbl = value;
    } else {
      h.*f.i64 = static_cast<int64_t>(std::llround(*value));
    }
  }
  return h;
}

}  // namespace gpuutil
