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
  // Optional entry points (nullptr when the library lacks them).
  CUptiResult (*ActivityEnableRuntimeApi)(CUpti_CallbackId, uint8_t) = nullptr;
  CUptiResult (*ActivityEnableDriverApi)(CUpti_CallbackId, uint8_t) = nullptr;
  CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, CUpti_SubscriberParams*) = nullptr;
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*GetThreadIdType)(CUpti_ActivityThreadIdType*) = nullptr;
  // The callback API on gpuutil's subscription: launches learnt at API exit.
  CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) = nullptr;
  CUptiResult (*ActivitySetAttribute)(CUpti_ActivityAttribute, size_t*, void*) = nullptr;
  CUptiResult (*GetTimestamp)(uint64_t*) = nullptr;
  // A stream handle to CUPTI's stream id (what activity records carry).
  CUptiResult (*GetStreamIdEx)(CUcontext, CUstream, uint8_t, uint32_t*) = nullptr;
  // A CUcontext to CUPTI's context id (what activity records carry).
  CUptiResult (*GetContextId)(CUcontext, uint32_t*) = nullptr;

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

// CUPTI's API version as a release: 130001 -> {13, 0, 1}; the small numbers
// of CUPTI <= 12.9 (19 -> 12.0, ..., 27 -> 12.9, 28 -> 12.9 Update 1) are
// translated with the table in cupti_version.h. major = 0 when unknown.
struct CuptiRelease {
  uint32_t major = 0;
  uint32_t minor = 0;
  uint32_t update = 0;  // CUPTI's own patch number (13.x) / toolkit update (12.9 Update 1)
};
CuptiRelease cupti_release(uint32_t api_version);
// "13.0 Update 1 (API version 130001)", "12.9 (API version 27)".
std::string describe_cupti_version(uint32_t api_version);

}  // namespace gpuutil::cupti
