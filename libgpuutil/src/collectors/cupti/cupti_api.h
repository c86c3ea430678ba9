// The one wrapper around every CUPTI entry point gpuutil calls.
//
// libcupti is never linked: CuptiApi::load() dlopens a library and fills a
// plain table of function pointers. Tests replace entries (or load the fake
// CUPTI in tests/fake_cupti through the same path). Nothing outside
// collectors/cupti includes this header, because it includes cupti.h.
//
// Library search order (first that loads wins), see docs/live-collection.md:
//   1. $GPUUTIL_CUPTI_LIBRARY (an explicit override; no fallback if it fails)
//   2. a copy already in the process (dlopen RTLD_NOLOAD of libcupti.so.13,
//      then .12): the one torch loaded
//   3. the caller's candidates (Python passes the nvidia-cuda-cupti wheel
//      directories it found on sys.path)
//   4. $CUDA_HOME/lib64, then /usr/local/cuda/lib64
//
// Contract: load() is called by the control thread; the table is then
// read-only and may be used from any thread.
#pragma once

#include <cupti.h>

#include <string>
#include <vector>

namespace gpuutil::cupti {

struct CuptiApi {
  CUptiResult (*GetVersion)(uint32_t*) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
      nullptr;
  CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;

  void* handle = nullptr;  // dlopen handle (never dlclosed: CUPTI may still call us)
  std::string path;        // the library that was loaded

  // Loads libcupti following the search order above. Returns "" on success,
  // else a one-line reason naming every place tried.
  std::string load(const std::vector<std::string>& candidate_dirs);

  // Fills the table from an already opened handle; "" or the missing symbol.
  std::string bind(void* dl_handle);

  // "CUPTI_ERROR_UNKNOWN (999)" style text for a result code.
  std::string describe(CUptiResult r) const;
};

// The ordered list of library paths load() tries (for tests and docs).
std::vector<std::string> cupti_search_paths(const std::vector<std::string>& candidate_dirs);

}  // namespace gpuutil::cupti
