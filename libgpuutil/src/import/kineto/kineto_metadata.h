// The trace-level metadata of a Kineto file: "deviceProperties" (one object
// per GPU) and "distributedInfo" (the rank). Internal to the replay
// collector.
#pragma once

#include <vector>

#include <simdjson.h>

#include "gpuutil/events.h"

namespace gpuutil::replay {

// Reads the deviceProperties array into `devices`. An entry that is not an
// object or lacks an integer "id" is skipped and counted, like a field of
// the wrong type, in `*malformed`. Returns a non-SUCCESS code only for
// structural JSON faults.
simdjson::error_code read_device_properties(simdjson::ondemand::value& value, std::vector<DeviceInfo>* devices,
                                            uint64_t* malformed) noexcept;

// Reads "rank" from distributedInfo when it is an integer. Returns a
// non-SUCCESS code only for structural JSON faults.
simdjson::error_code read_distributed_info(simdjson::ondemand::value& value, bool* has_rank,
                                           int32_t* rank) noexcept;

}  // namespace gpuutil::replay
