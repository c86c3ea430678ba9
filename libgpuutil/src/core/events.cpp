// Small helpers of the event model: enum names and device lookup.
#include "gpuutil/events.h"
#include "gpuutil/report.h"

namespace gpuutil {

const char* to_string(MemcpyDirection d) {
  switch (d) {
    case MemcpyDirection::kUnknown: return "unknown";
    case MemcpyDirection::kHostToDevice: return "htod";
    case MemcpyDirection::kDeviceToHost: return "dtoh";
    case MemcpyDirection::kDeviceToDevice: return "dtod";
    case MemcpyDirection::kHostToHost: return "htoh";
    case MemcpyDirection::kPeerToPeer: return "ptop";
  }
  return "unknown";
}

const char* to_string(RangeCategory c) {
  switch (c) {
    case RangeCategory::kOp: return "op";
    case RangeCategory::kAnnotation: return "annotation";
    case RangeCategory::kStep: return "step";
    case RangeCategory::kDataloader: return "dataloader";
    case RangeCategory::kForward: return "forward";
    case RangeCategory::kBackward: return "backward";
    case RangeCategory::kOptimizer: return "optimizer";
    case RangeCategory::kHostSync: return "host_sync";
    case RangeCategory::kCollective: return "collective";
    case RangeCategory::kPython: return "python";
  }
  return "unknown";
}

const char* to_string(IdleCause c) {
  switch (c) {
    case IdleCause::kDataloader: return "dataloader";
    case IdleCause::kHostSync: return "host_sync";
    case IdleCause::kCollective: return "collective";
    case IdleCause::kLaunch: return "launch";
    case IdleCause::kHost: return "host";
    case IdleCause::kDependency: return "dependency";
    case IdleCause::kUnattributed: return "unattributed";
    case IdleCause::kKernelGap: return "kernel_gap";
  }
  return "unknown";
}

const DeviceInfo* EventStore::device_info(int32_t id) const {
  for (const auto& d : devices) {
    if (d.id == id) return &d;
  }
  return nullptr;
}

int64_t Breakdown::idle_total_ns() const {
  int64_t t = 0;
  for (auto v : idle_ns) t += v;
  return t;
}

Breakdown& Breakdown::operator+=(const Breakdown& o) {
  compute_ns += o.compute_ns;
  communication_ns += o.communication_ns;
  memory_ns += o.memory_ns;
  for (int i = 0; i < kIdleCauseCount; ++i) idle_ns[i] += o.idle_ns[i];
  return *this;
}

}  // namespace gpuutil
