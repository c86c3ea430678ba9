// deviceProperties / distributedInfo reader (see kineto_metadata.h).
//
// Field names are those Kineto writes from cudaDeviceProp / hipDeviceProp_t:
// numSms, maxThreadsPerMultiprocessor, regsPerMultiprocessor,
// sharedMemPerMultiprocessor (ROCm: maxSharedMemoryPerMultiProcessor),
// warpSize, totalGlobalMem, computeMajor/Minor and, where present,
// maxBlocksPerMultiProcessor. Missing fields stay 0 (= unknown).
#include "import/kineto/kineto_metadata.h"

#include <limits>
#include <utility>
#include <string>

#include "import/kineto/decimal_time.h"
#include "import/kineto/kineto_event.h"

namespace gpuutil::replay {

namespace {

using simdjson::error_code;
using simdjson::SUCCESS;
using simdjson::ondemand::json_type;
using simdjson::ondemand::value;

// Reads an integer; `*ok` false when the value is not an integer number.
error_code read_integer(value& v, int64_t* out, bool* ok) noexcept {
  *ok = false;
  json_type type;
  if (auto e = v.type().get(type)) return e;
  if (type != json_type::number) return SUCCESS;
  std::string_view token = v.raw_json_token();
  while (!token.empty() && (token.back() == ' ' || token.back() == '\n' || token.back() == '\r' || token.back() == '\t')) {
    token.remove_suffix(1);
  }
  *ok = parse_int64(token, out);
  return SUCCESS;
}

bool fits_int32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

error_code read_device(value& v, DeviceInfo* info, bool* has_id, uint64_t* malformed) noexcept {
  simdjson::ondemand::object object;
  if (auto e = v.get_object().get(object)) return e;
  for (auto field_result : object) {
    simdjson::ondemand::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    const auto key = field.key();
    value& fv = field.value();
    if (key == "name") {
      json_type type;
      if (auto e = fv.type().get(type)) return e;
      if (type == json_type::string) {
        std::string_view name;
        const error_code e = fv.get_string().get(name);
        if (e && !is_value_error(e)) return e;
        if (!e) info->name = std::string(name);
      } else {
        ++*malformed;
      }
      continue;
    }
    int32_t* target32 = nullptr;
    int64_t* target64 = nullptr;
    bool is_id = false;
    if (key == "id") {
      target32 = &info->id;
      is_id = true;
    } else if (key == "computeMajor") {
      target32 = &info->compute_major;
    } else if (key == "computeMinor") {
      target32 = &info->compute_minor;
    } else if (key == "numSms" || key == "multiProcessorCount") {
      target32 = &info->sm_count;
    } else if (key == "maxThreadsPerMultiprocessor" || key == "maxThreadsPerMultiProcessor") {
      target32 = &info->max_threads_per_sm;
    } else if (key == "maxBlocksPerMultiProcessor" || key == "maxBlocksPerMultiprocessor") {
      target32 = &info->max_blocks_per_sm;
    } else if (key == "regsPerMultiprocessor" || key == "regsPerMultiProcessor") {
      target32 = &info->registers_per_sm;
    } else if (key == "sharedMemPerMultiprocessor" || key == "maxSharedMemoryPerMultiProcessor") {
      target32 = &info->shared_memory_per_sm_bytes;
    } else if (key == "warpSize") {
      target32 = &info->warp_size;
    } else if (key == "totalGlobalMem") {
      target64 = &info->total_memory_bytes;
    } else {
      continue;
    }
    int64_t n = 0;
    bool ok = false;
    if (auto e = read_integer(fv, &n, &ok)) return e;
    if (!ok || n < 0 || (target32 && !fits_int32(n))) {
      ++*malformed;
      continue;
    }
    if (target32) *target32 = static_cast<int32_t>(n);
    if (target64) *target64 = n;
    if (is_id) *has_id = true;
  }
  return SUCCESS;
}

}  // namespace

error_code read_device_properties(value& v, std::vector<DeviceInfo>* devices, uint64_t* malformed) noexcept {
  json_type type;
  if (auto e = v.type().get(type)) return e;
  if (type != json_type::array) {
    ++*malformed;
    return SUCCESS;
  }
  simdjson::ondemand::array array;
  if (auto e = v.get_array().get(array)) return e;
  for (auto element : array) {
    value item;
    if (auto e = element.get(item)) return e;
    json_type item_type;
    if (auto e = item.type().get(item_type)) return e;
    if (item_type != json_type::object) {
      ++*malformed;
      continue;
    }
    DeviceInfo info;
    bool has_id = false;
    if (auto e = read_device(item, &info, &has_id, malformed)) return e;
    if (!has_id) {
      ++*malformed;
      continue;
    }
    bool duplicate = false;
    for (const DeviceInfo& d : *devices) duplicate = duplicate || d.id == info.id;
    if (duplicate) {
      ++*malformed;
      continue;
    }
    devices->push_back(std::move(info));
  }
  return SUCCESS;
}

error_code read_distributed_info(value& v, bool* has_rank, int32_t* rank) noexcept {
  json_type type;
  if (auto e = v.type().get(type)) return e;
  if (type != json_type::object) return SUCCESS;
  simdjson::ondemand::object object;
  if (auto e = v.get_object().get(object)) return e;
  for (auto field_result : object) {
    simdjson::ondemand::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    if (field.key() != "rank") continue;
    int64_t n = 0;
    bool ok = false;
    if (auto e = read_integer(field.value(), &n, &ok)) return e;
    if (ok && n >= 0 && fits_int32(n)) {
      *has_rank = true;
      *rank = static_cast<int32_t>(n);
    }
  }
  return SUCCESS;
}

}  // namespace gpuutil::replay
