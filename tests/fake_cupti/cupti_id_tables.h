// The CUDA runtime and driver callback ids and their names, as the CUPTI
// headers this build used define them (cupti_runtime_cbid.h,
// cupti_driver_cbid.h; CMake generates the two .inc tables from them).
// Read by the fake (cuptiGetCallbackName) and by the coverage test, which
// walks every id.
#pragma once

#include <cstdint>

namespace cupti_ids {

struct Entry {
  uint32_t id;
  const char* name;
};

inline constexpr Entry kRuntime[] = {
#include "fake_cupti_runtime_names.inc"
};
inline constexpr Entry kDriver[] = {
#include "fake_cupti_driver_names.inc"
};

}  // namespace cupti_ids
