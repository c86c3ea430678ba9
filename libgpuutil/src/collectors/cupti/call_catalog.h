// What each CUPTI runtime and driver callback means to the collector,
// derived from the CUPTI headers and the callback's name, never from a list
// of names remembered by hand.
//
// Two sources, both generated or read at run time:
//  - the parameter structs CUPTI passes a callback as functionParams
//    (generated_cuda_runtime_api_meta.h, generated_cuda_meta.h): for every
//    struct that has one, where its stream, launch config, byte count and
//    event are (cmake/GpuutilCuptiTables.cmake turns the headers into a
//    table, compiled here with offsetof). A call whose parameters say
//    nothing (CUDA 13's __cudaLaunchKernel has no struct in 13.0's headers)
//    has no stream read at API exit; its device record names its stream.
//  - the callback's name (cuptiGetCallbackName), classified by
//    gpuutil::classify_call (range_classify.h) into launch, graph launch,
//    copy, memset, sync, event record, stream wait, stream work, host
//    function, capture begin/end, stream create/destroy or other.
// tests/cpp/test_call_coverage.cpp checks, for every callback id of the
// headers the build used, that an id whose name or parameters say it
// submits or waits for device work is classified, and fails when one
// launch id is taken out.
//
// CallRoles turns both into one flag word per callback id (CallFlag), read
// on the hot path by api_callbacks.cpp.
//
// Contract: CallRoles::build runs on the control thread before callbacks
// are enabled; the roles are read-only afterwards and read from any thread.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "collectors/cupti/cupti_api.h"

namespace gpuutil::cupti {

// Where a callback's functionParams carry what the collector reads (byte
// offsets; -1: not there).
struct CallParams {
  int16_t stream = -1;         // the stream handle (cudaStream_t / CUstream)
  int16_t config = -1;         // a pointer to a launch config (cudaLaunchConfig_t / CUlaunchConfig) ...
  int16_t config_stream = -1;  // ... with the stream at this offset in it
  int16_t count = -1;          // a size_t byte (or element) count of a copy or memset
  int16_t event = -1;          // an event handle (cudaEvent_t / CUevent)
  bool has_stream() const { return stream >= 0 || config >= 0; }
};

// The parameter layout of a callback by its exact name
// ("cudaLaunchKernel_v7000", "cuMemcpyHtoDAsync_v2_ptsz"); all -1 when the
// headers have no struct for it (or one with none of those members).
CallParams call_params(std::string_view callback_name);
// Every entry of the generated table (tests walk it).
struct NamedCallParams {
  const char* name;
  CallParams params;
};
const NamedCallParams* call_params_table(size_t* count);

enum CallFlag : uint16_t {
  kCallEnqueue = 1,        // enqueues device work that yields a record
  kCallGraph = 2,          // many records with one correlation id (graph launch, batch copy, multi-device launch)
  kCallSync = 4,           // a context-wide synchronisation (device, context)
  kCallCaptureBegin = 8,   // stream capture begins (on its stream; the calling thread when unknown)
  kCallCaptureEnd = 16,    // and ends
  kCallCount = 32,         // its parameters carry the byte count (CallParams::count)
  kCallHostRecord = 64,    // enqueues nothing, but its API record is analysed (syncs, events, stream work)
  kCallApiRecord = 128,    // enqueues, and its API record is traced: the tracker waits for both
  kCallStreamSync = 256,   // the host waits for one stream (cudaStreamSynchronize)
  kCallEventRecord = 512,  // records an event on a stream (CallParams::event)
  kCallStreamWait = 1024,  // a stream waits for an event (CallParams::event)
  kCallStreamCreate = 2048,   // a stream was created (resource callback): its handle, id and context
  kCallStreamDestroy = 4096,  // a stream is being destroyed (resource callback)
  kCallPerThreadStream = 8192,  // a _ptsz variant: a NULL stream is the calling thread's per-thread stream
};

class CallRoles {
 public:
  // The role of every callback id of both API domains (names from
  // cuptiGetCallbackName); driver == false leaves the driver domain out.
  void build(const CuptiApi& api, bool driver);
  uint16_t flags(CUpti_CallbackDomain domain, uint32_t cbid) const {
    const auto& t = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_ : driver_;
    return cbid < t.size() ? t[cbid] : 0;
  }
  CallParams params(CUpti_CallbackDomain domain, uint32_t cbid) const {
    const auto& t = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_params_ : driver_params_;
    return cbid < t.size() ? t[cbid] : CallParams{};
  }
  // The ids with a role, to enable one at a time.
  const std::vector<uint32_t>& ids(CUpti_CallbackDomain domain) const {
    return domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_ids_ : driver_ids_;
  }
  // The role of one name (what build() gives its id).
  static uint16_t flags_of(std::string_view callback_name, const CallParams& params);

 private:
  std::vector<uint16_t> runtime_, driver_;
  std::vector<CallParams> runtime_params_, driver_params_;
  std::vector<uint32_t> runtime_ids_, driver_ids_;
};

}  // namespace gpuutil::cupti
