// The C interface between gpuutil's LibTorch hook (record_function_hook.cpp,
// compiled against the installed torch) and gpuutil's core module
// (python/bindings/torch_hook_bindings.cpp, compiled without torch).
//
// The hook publishes one `GpuutilHookApi` in a PyCapsule named
// GPUUTIL_HOOK_API_CAPSULE (`module.api()`); the core calls `drain` at each
// step end and receives every recorded range through `sink`, in C, with no
// Python objects and no allocation per range. Plain C types only, so the two
// sides may be built by different compilers and C++ ABIs.
//
// Contract:
// - `version` is GPUUTIL_HOOK_API_VERSION; a consumer refuses other values.
// - `drain` is single-consumer: call it from one thread at a time.
// - `name` is NUL-terminated, valid only during the callback, truncated to
//   GPUUTIL_HOOK_NAME_BYTES bytes.
// - `kind`: 0 user scope, 1 op (FUNCTION scope), 2 autograd node.
// - `thread_key` is (uint32_t)pthread_self() of the recording thread, the id
//   CUPTI puts in its API records; `os_tid` is its OS thread id (gettid),
//   only for naming the thread.
// - Times are CLOCK_MONOTONIC nanoseconds (gpuutil's session clock).
// - `drain` returns the number of ranges dropped (full rings) since the
//   previous drain.
#pragma once

#include <stdint.h>

#define GPUUTIL_HOOK_API_VERSION 2
#define GPUUTIL_HOOK_API_CAPSULE "gpuutil.torch_hook_api.v2"
#define GPUUTIL_HOOK_NAME_BYTES 104

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*gpuutil_hook_range_fn)(void* ctx, const char* name, int64_t start_ns, int64_t end_ns,
                                      int64_t thread_key, int64_t os_tid, int kind);

typedef struct GpuutilHookApi {
  uint32_t version;
  uint64_t (*drain)(gpuutil_hook_range_fn sink, void* ctx);
} GpuutilHookApi;

#ifdef __cplusplus
}
#endif
