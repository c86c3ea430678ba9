// Launches learnt at API exit through the callback API, on the CUPTI
// subscription gpuutil already holds (cbid-filtered cuptiEnableCallback).
//
// Why: the launch tracker must know every call that enqueues device work to
// say when a step's data is complete. Its API record is not enough: it sits
// in an activity buffer CUPTI may hold for as long as that buffer holds an
// unfinished device record (a default flush that does not seal a partly
// filled buffer, a prefetched buffer CUPTI keeps), so the launches in it
// would be unknown exactly while they matter. The callback runs on the
// calling thread when the call returns, whatever CUPTI does with buffers.
//
// At API enter the call's start (session clock) goes into the callback's
// correlationData; at exit a LearntCall is pushed onto a bounded lock-free
// ring that the drain thread empties into the LaunchTracker. Learnt: calls
// that enqueue device work (launch, graph launch, copy, memset) unless they
// failed (the return value is not success) or copy or set zero bytes (the
// byte count of the copy and memset calls whose parameters carry it at the
// same place), context-wide syncs (cudaDeviceSynchronize, cuCtxSynchronize:
// they complete only that context's work) and stream-capture marks. The
// kernel's name (symbolName) comes along, to name a stuck kernel, and so
// does the raw stream handle from the call's parameters (the generated
// *_params structs of generated_cuda_runtime_api_meta.h and
// generated_cuda_meta.h, for the launch, copy, memset and graph-launch calls
// listed in api_callbacks.cpp) with the call's CUcontext: nothing is
// resolved at exit. The drain thread turns a handle into CUPTI's stream id
// (cuptiGetStreamIdEx) only for a launch it is about to name stuck
// (resolve_stream); a per-thread default stream can only be resolved on its
// own thread, so its id is learnt from the device records of earlier
// launches of that thread instead (LaunchTracker::per_thread_stream).
//
// Hot path (the application's threads): no allocation, no lock, no vendor
// call; a full ring drops the call (counted as cupti_calls_dropped by the
// collector: that launch is not waited for).
//
// Contract: CallRoles is built once by the control thread before callbacks
// are enabled and is read-only afterwards; CallRing::push from any thread,
// pop from the drain thread only.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "collectors/cupti/cupti_api.h"
#include "collectors/cupti/launch_tracker.h"
#include "collectors/cupti/mpmc_ring.h"

namespace gpuutil::cupti {

enum CallFlag : uint8_t {
  kCallEnqueue = 1,        // enqueues device work that yields a record
  kCallGraph = 2,          // a graph launch (many records, one correlation id)
  kCallSync = 4,           // a context-wide synchronisation
  kCallCaptureBegin = 8,   // stream capture begins on the calling thread
  kCallCaptureEnd = 16,    // and ends
  kCallCountAt16 = 32,     // its parameters carry the byte count as a size_t at offset 16
  kCallHostRecord = 64,    // enqueues nothing, but its API record is analysed (syncs, events)
  kCallApiRecord = 128,    // enqueues, and its API record is traced: the tracker waits for both
};

// Where a call's parameters carry its stream handle.
struct StreamParam {
  int16_t offset = -1;      // of the handle (or of the pointer to the launch config) in functionParams; -1: none
  int16_t indirect = -1;    // >= 0: functionParams+offset points to a config struct with the handle at this offset
  bool per_thread = false;  // a _ptsz variant: NULL means the per-thread default stream
};
// The stream parameter of a callback by its name ("cudaLaunchKernel_v7000",
// "cuMemcpyHtoDAsync_v2_ptsz"), from the CUDA 13 generated params structs.
StreamParam stream_param(std::string_view callback_name);

struct LearntCall {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t thread = 0;  // (uint32_t)pthread_self(), what CUPTI's API records carry
  uint32_t correlation_id = 0;
  uint32_t context = 0;  // CUPTI's context id (contextUid), as activity records carry it
  uint8_t flags = 0;
  uint8_t domain = 0;   // CUpti_CallbackDomain of the call
  uint16_t cbid = 0;    // its callback id (names it when it names no kernel)
  uint8_t stream_kind = kStreamNone;  // StreamKind
  char name[43] = {};  // the kernel's name (symbolName), NUL-terminated, may be cut
  uint64_t stream_handle = 0;   // the raw CUstream of the call (kStreamExplicit), never dereferenced
  uint64_t context_handle = 0;  // the raw CUcontext of the call (CUpti_CallbackData::context)
};

// The calls learnt, from the application's threads to the drain thread.
using CallRing = MpmcRing<LearntCall>;

class CallRoles {
 public:
  // The role of every callback id of both API domains (names from
  // cuptiGetCallbackName); driver == false leaves the driver domain out.
  void build(const CuptiApi& api, bool driver);
  uint8_t flags(CUpti_CallbackDomain domain, uint32_t cbid) const {
    const auto& t = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_ : driver_;
    return cbid < t.size() ? t[cbid] : 0;
  }
  StreamParam stream(CUpti_CallbackDomain domain, uint32_t cbid) const {
    const auto& t = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_stream_ : driver_stream_;
    return cbid < t.size() ? t[cbid] : StreamParam{};
  }
  // The ids with a role, to enable one at a time.
  const std::vector<uint32_t>& ids(CUpti_CallbackDomain domain) const {
    return domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_ids_ : driver_ids_;
  }

 private:
  std::vector<uint8_t> runtime_, driver_;
  std::vector<StreamParam> runtime_stream_, driver_stream_;
  std::vector<uint32_t> runtime_ids_, driver_ids_;
};

// At API exit: fills `out` and returns true when the call must be learnt
// (see the top of this file). start_ns is read from correlationData (set at
// enter), end_ns is now_ns.
bool learn_call(const CallRoles& roles, CUpti_CallbackDomain domain, uint32_t cbid, const CUpti_CallbackData& d,
                int64_t now_ns, LearntCall& out);

// CUPTI's stream id of a learnt call's stream (kStreamExplicit or
// kStreamLegacy; cuptiGetStreamIdEx with the call's context), called by the
// drain thread off the hot path. False when it cannot say: no entry point,
// no stream, a per-thread default stream (only its own thread can resolve
// it), or CUPTI refused (the stream was destroyed since).
bool resolve_stream(const CuptiApi& api, uint8_t stream_kind, uint64_t stream_handle, uint64_t context_handle,
                    uint32_t* stream_id);

}  // namespace gpuutil::cupti
