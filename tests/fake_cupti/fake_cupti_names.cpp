// Callback ids and names of the CUDA runtime and driver APIs, from the CUPTI
// headers the fake was built against (cupti_runtime_cbid.h,
// cupti_driver_cbid.h; the tables are generated from them by CMake), so
// cuptiGetCallbackName answers what the real library answers:
// "cudaLaunchKernel_v7000", "cuLaunchKernel", ...
#include <cstring>
#include <string_view>

#include "cupti_id_tables.h"
#include "fake_state.h"

namespace fake {

namespace {

using cupti_ids::Entry;
using cupti_ids::kDriver;
using cupti_ids::kRuntime;

template <size_t N>
const char* find(const Entry (&table)[N], uint32_t id) {
  for (const Entry& e : table) {
    if (e.id == id) return e.name;
  }
  return nullptr;
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (the name Kineto traces use).
std::string_view without_version(std::string_view n) {
  const size_t v = n.rfind("_v");
  if (v == std::string_view::npos || v + 2 >= n.size()) return n;
  for (size_t i = v + 2; i < n.size(); ++i) {
    if (n[i] < '0' || n[i] > '9') return n;
  }
  return n.substr(0, v);
}

template <size_t N>
uint32_t lookup(const Entry (&table)[N], std::string_view name) {
  for (const Entry& e : table) {
    if (name == e.name) return e.id;
  }
  for (const Entry& e : table) {
    if (name == without_version(e.name)) return e.id;
  }
  return 0;
}

}  // namespace

const char* callback_name(CUpti_CallbackDomain domain, uint32_t cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return find(kRuntime, cbid);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return find(kDriver, cbid);
  return nullptr;
}

uint32_t callback_id(const char* name, int* domain) {
  if (name == nullptr) return 0;
  const std::string_view n(name);
  if (uint32_t id = lookup(kRuntime, n)) {
    if (domain) *domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    return id;
  }
  if (uint32_t id = lookup(kDriver, n)) {
    if (domain) *domain = CUPTI_CB_DOMAIN_DRIVER_API;
    return id;
  }
  return 0;
}

uint32_t callback_id_count(CUpti_CallbackDomain domain) {
  return domain == CUPTI_CB_DOMAIN_RUNTIME_API ? uint32_t(CUPTI_RUNTIME_TRACE_CBID_SIZE)
                                              : uint32_t(CUPTI_DRIVER_TRACE_CBID_SIZE);
}

}  // namespace fake

extern "C" uint32_t fake_cupti_cbid(const char* name, int* domain) { return fake::callback_id(name, domain); }
