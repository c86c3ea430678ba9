// Category table of the Kineto importer (see kineto_category.h).
//
// Known-but-unused categories are listed explicitly so that they do not show
// up as event_unknown_category: python (Python-level instants),
// gpu_user_annotation (device-row copies of host ranges), cuda_sync (device-
// row copies of the host synchronization calls, see docs/trace-import.md),
// Trace (the profiler's own span), overhead, instant and flow categories.
#include "import/kineto/kineto_category.h"

#include <array>
#include <cstddef>

namespace gpuutil::replay {

namespace {

// Lower-cases ASCII letters and maps ' ' and '-' to '_'; returns false when
// the category is longer than the buffer (no known category is).
bool normalise(std::string_view cat, std::array<char, 40>* buf, std::string_view* out) {
  if (cat.size() > buf->size()) return false;
  for (size_t i = 0; i < cat.size(); ++i) {
    char c = cat[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == ' ' || c == '-') c = '_';
    (*buf)[i] = c;
  }
  *out = std::string_view(buf->data(), cat.size());
  return true;
}

struct Entry {
  std::string_view name;  // normalised
  EventClass cls;
};

constexpr Entry kTable[] = {
    // Device activity.
    {"kernel", EventClass::kKernel},
    {"gpu_memcpy", EventClass::kMemcpy},
    {"memcpy", EventClass::kMemcpy},
    {"gpu_memset", EventClass::kMemset},
    {"memset", EventClass::kMemset},
    // Host runtime / driver calls (CUDA, HIP via the same names, and the
    // generic runtime categories of other PyTorch backends).
    {"cuda_runtime", EventClass::kRuntime},
    {"runtime", EventClass::kRuntime},
    {"cuda_driver", EventClass::kRuntime},
    {"driver", EventClass::kRuntime},
    {"hip_runtime", EventClass::kRuntime},
    {"xpu_runtime", EventClass::kRuntime},
    {"privateuse1_runtime", EventClass::kRuntime},
    {"privateuse1_driver", EventClass::kRuntime},
    {"mtia_runtime", EventClass::kRuntime},
    // Host ranges.
    {"cpu_op", EventClass::kOperator},
    {"operator", EventClass::kOperator},
    {"user_annotation", EventClass::kUserAnnotation},
    {"python_function", EventClass::kPythonFunction},
    // Known and deliberately unused.
    {"python", EventClass::kKnownUnused},
    {"gpu_user_annotation", EventClass::kKnownUnused},
    {"cuda_sync", EventClass::kKnownUnused},
    {"trace", EventClass::kKnownUnused},
    {"cpu_instant_event", EventClass::kKnownUnused},
    {"overhead", EventClass::kKnownUnused},
    {"cuda_profiler_range", EventClass::kKnownUnused},
    {"external_correlation", EventClass::kKnownUnused},
    {"fwdbwd", EventClass::kKnownUnused},
    {"ac2g", EventClass::kKnownUnused},
    {"async", EventClass::kKnownUnused},
    {"async_cpu_to_gpu", EventClass::kKnownUnused},
    {"hpu_op", EventClass::kKnownUnused},
};

}  // namespace

EventClass classify_category(std::string_view cat) {
  std::array<char, 40> buf{};
  std::string_view norm;
  if (!normalise(cat, &buf, &norm)) return EventClass::kUnknown;
  for (const Entry& e : kTable) {
    if (e.name == norm) return e.cls;
  }
  return EventClass::kUnknown;
}

}  // namespace gpuutil::replay
