// Run-time loading of libcupti into the CuptiApi function table.
#include "collectors/cupti/cupti_api.h"

#include <dlfcn.h>

#include <cstdlib>

namespace gpuutil::cupti {

namespace {

const char* const kSonames[] = {"libcupti.so.13", "libcupti.so.12"};

template <typename F>
bool sym(void* h, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(h, name));
  return out != nullptr;
}

}  // namespace

std::vector<std::string> cupti_search_paths(const std::vector<std::string>& candidate_dirs) {
  std::vector<std::string> out;
  std::vector<std::string> dirs = candidate_dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.push_back(std::string(home) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  for (const auto& d : dirs) {
    if (d.empty() || d[0] != '/') continue;  // never a relative path: it would resolve against the cwd
    for (const char* so : kSonames) out.push_back(d + "/" + so);
  }
  return out;
}

std::string CuptiApi::bind(void* h) {
  handle = h;
  if (!sym(h, "cuptiGetVersion", GetVersion)) return "cuptiGetVersion";
  if (!sym(h, "cuptiGetResultString", GetResultString)) return "cuptiGetResultString";
  if (!sym(h, "cuptiGetCallbackName", GetCallbackName)) return "cuptiGetCallbackName";
  if (!sym(h, "cuptiActivityRegisterCallbacks", ActivityRegisterCallbacks)) return "cuptiActivityRegisterCallbacks";
  if (!sym(h, "cuptiActivityRegisterTimestampCallback", ActivityRegisterTimestampCallback))
    return "cuptiActivityRegisterTimestampCallback";
  if (!sym(h, "cuptiActivityEnable", ActivityEnable)) return "cuptiActivityEnable";
  if (!sym(h, "cuptiActivityDisable", ActivityDisable)) return "cuptiActivityDisable";
  if (!sym(h, "cuptiActivityFlushAll", ActivityFlushAll)) return "cuptiActivityFlushAll";
  if (!sym(h, "cuptiActivityGetNextRecord", ActivityGetNextRecord)) return "cuptiActivityGetNextRecord";
  if (!sym(h, "cuptiActivityGetNumDroppedRecords", ActivityGetNumDroppedRecords))
    return "cuptiActivityGetNumDroppedRecords";
  sym(h, "cuptiActivityEnableRuntimeApi", ActivityEnableRuntimeApi);
  sym(h, "cuptiActivityEnableDriverApi", ActivityEnableDriverApi);
  sym(h, "cuptiSubscribe_v2", Subscribe_v2);
  sym(h, "cuptiSubscribe", Subscribe);
  sym(h, "cuptiUnsubscribe", Unsubscribe);
  sym(h, "cuptiGetThreadIdType", GetThreadIdType);
  sym(h, "cuptiEnableCallback", EnableCallback);
  sym(h, "cuptiActivitySetAttribute", ActivitySetAttribute);
  sym(h, "cuptiGetTimestamp", GetTimestamp);
  sym(h, "cuptiGetStreamIdEx", GetStreamIdEx);
  sym(h, "cuptiGetContextId", GetContextId);
  return "";
}

CuptiRelease cupti_release(uint32_t v) {
  if (v >= 10000) return {v / 10000, (v / 100) % 100, v % 100};
  // CUPTI_API_VERSION before 13.0 (cupti_version.h): one number per release.
  switch (v) {
    case 19: return {12, 0, 0};
    case 20: return {12, 2, 0};
    case 21: return {12, 3, 0};
    case 22: return {12, 4, 0};
    case 23: return {12, 5, 0};
    case 24: return {12, 6, 0};
    case 25: return {12, 7, 0};
    case 26: return {12, 8, 0};
    case 27: return {12, 9, 0};
    case 28: return {12, 9, 1};
    case 13: return {11, 0, 0};
    case 14: return {11, 1, 0};
    case 15: return {11, 2, 0};
    case 16: return {11, 5, 0};
    case 17: return {11, 6, 0};
    case 18: return {11, 8, 0};
    default: return {};
  }
}

std::string describe_cupti_version(uint32_t v) {
  const CuptiRelease r = cupti_release(v);
  if (r.major == 0) return "an unknown release (API version " + std::to_string(v) + ")";
  std::string out = std::to_string(r.major) + "." + std::to_string(r.minor);
  if (r.update != 0) out += " Update " + std::to_string(r.update);
  return out + " (API version " + std::to_string(v) + ")";
}

std::string CuptiApi::load(const std::vector<std::string>& candidate_dirs) {
  auto try_open = [this](const std::string& p, int flags, std::string& why) -> bool {
    void* h = dlopen(p.c_str(), flags);
    if (!h) return false;
    const std::string missing = bind(h);
    if (!missing.empty()) {
      why = p + " lacks " + missing;
      return false;
    }
    path = p;
    return true;
  };
  std::string why;
  if (const char* env = std::getenv("GPUUTIL_CUPTI_LIBRARY"); env && *env) {
    if (try_open(env, RTLD_NOW | RTLD_LOCAL, why)) return "";
    const char* err = dlerror();
    return std::string("GPUUTIL_CUPTI_LIBRARY=") + env + " could not be loaded: " +
           (why.empty() ? (err ? err : "dlopen failed") : why);
  }
  for (const char* so : kSonames) {
    if (try_open(so, RTLD_NOW | RTLD_NOLOAD, why)) return "";
  }
  const std::vector<std::string> paths = cupti_search_paths(candidate_dirs);
  for (const auto& p : paths) {
    if (try_open(p, RTLD_NOW | RTLD_LOCAL, why)) return "";
  }
  std::string tried = "libcupti.so.13/.12 not found (tried the loaded copy";
  for (const auto& p : paths) tried += ", " + p;
  tried += "); install nvidia-cuda-cupti or set GPUUTIL_CUPTI_LIBRARY";
  if (!why.empty()) tried += " (" + why + ")";
  return tried;
}

std::string CuptiApi::describe(CUptiResult r) const {
  const char* s = nullptr;
  if (GetResultString && GetResultString(r, &s) != CUPTI_SUCCESS) s = nullptr;
  return std::string(s ? s : "CUPTI_ERROR") + " (" + std::to_string(static_cast<int>(r)) + ")";
}

}  // namespace gpuutil::cupti
