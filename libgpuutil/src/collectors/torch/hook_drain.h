// Moves ranges recorded by gpuutil's LibTorch hook into a live session
// (its EventSink, gpuutil/event_sink.h).
//
// The hook (python/gpuutil/torch/csrc/record_function_hook.cpp) is built
// against the installed torch; the core is built without torch. They meet
// through the plain C interface in hook_abi.h: one drain() call moves every
// recorded range from the hook's per-thread queues into the session, with no
// Python object per range, names interned and classified once per distinct
// name, thread indices resolved once per thread. The same class drains the
// queues of gpuutil's trace replay, which records through the same queue
// code (hook_ring.h).
//
// Rules applied to the hook's ranges (docs/pytorch.md):
// - `Optimizer.step#...` is skipped: step pre/post hooks time the optimizer
//   step (PyTorch's own range closes after the automatic step boundary);
//   skip_optimizer_step = false keeps it (the replay of a recorded trace);
// - autograd nodes (kind 2) get the engine's prefix,
//   "autograd::engine::evaluate_function: ", as Kineto traces spell them;
// - ranges dropped with the queues' slab used up are counted
//   (torch_ranges_dropped);
// - threads are the session threads of the key CUPTI records
//   (gpuutil/thread_key.h), named by their OS tid; the OS tid is the key's
//   generation (a pthread_t glibc reused for a later thread is a new thread).
//
// Contract: drain() from one thread at a time (the queues have one consumer).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "gpuutil/event_sink.h"
#include "hook_abi.h"

namespace gpuutil::torch_hook {

class HookDrain {
 public:
  // `api` must outlive the drain; its version must be GPUUTIL_HOOK_API_VERSION
  // (check with compatible() first).
  HookDrain(EventSink& session, const GpuutilHookApi* api, bool skip_optimizer_step = true);
  static bool compatible(const GpuutilHookApi* api) {
    return api != nullptr && api->version == GPUUTIL_HOOK_API_VERSION;
  }

  // Moves every range recorded since the last drain into the session.
  // Returns the number of ranges added.
  uint64_t drain();

 private:
  struct NameInfo {
    NameId id;
    RangeCategory category;
    bool skip;
  };
  static void on_range(void* ctx, const char* name, int64_t start_ns, int64_t end_ns, int64_t thread_key,
                       int64_t os_tid, int kind);
  void add(std::string_view name, int64_t start_ns, int64_t end_ns, int64_t thread_key, int64_t os_tid, int kind);
  const NameInfo& lookup(std::string_view name, int kind);
  uint32_t thread(int64_t thread_key, int64_t os_tid);

  EventSink& session_;
  const GpuutilHookApi* api_;
  bool skip_optimizer_step_;
  int64_t pid_;
  std::map<std::string, NameInfo, std::less<>> names_[3];  // by kind
  std::map<std::pair<int64_t, int64_t>, uint32_t> threads_;  // by (thread key, OS tid)
  int64_t last_key_ = -1;
  int64_t last_os_tid_ = -1;
  uint32_t last_thread_ = 0;
  uint64_t added_ = 0;
};

}  // namespace gpuutil::torch_hook
