// Kineto event categories ("cat") -> what the importer does with the event.
//
// PyTorch has renamed categories over the years ("Kernel" -> "kernel",
// "Runtime" -> "cuda_runtime", "Operator" -> "cpu_op", "Memcpy" ->
// "gpu_memcpy", ...). Matching is case-insensitive and treats ' ', '-' and
// '_' alike, so every vintage maps to one EventClass. Internal to the
// replay collector.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpuutil::replay {

enum class EventClass : uint8_t {
  kKernel,          // device kernel -> DeviceActivity kKernel
  kMemcpy,          // device copy -> DeviceActivity kMemcpy
  kMemset,          // device memset -> DeviceActivity kMemset
  kRuntime,         // CUDA/HIP runtime or driver call -> HostApiCall
  kOperator,        // framework operator -> HostRange (is_op = true)
  kUserAnnotation,  // record_function / user range -> HostRange (is_op = false)
  kPythonFunction,  // Python frame (with_stack) -> HostRange kPython
  kKnownUnused,     // a category gpuutil knows and deliberately ignores
  kUnknown,         // counted as event_unknown_category
};

EventClass classify_category(std::string_view cat);

}  // namespace gpuutil::replay
