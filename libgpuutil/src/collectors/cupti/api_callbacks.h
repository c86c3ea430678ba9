// Launches learnt at API exit through the callback API, on the CUPTI
// subscription gpuutil already holds (cbid-filtered cuptiEnableCallback),
// and streams learnt from CUPTI's resource callbacks on it.
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
// ring that the drain thread empties into the LaunchTracker. What each
// callback id means comes from call_catalog.h (the CUPTI headers and the
// callback's name): calls that enqueue device work (launch, graph launch,
// copy, memset) unless they failed (the return value is not success) or
// copy or set zero bytes (the byte count where the parameter struct has
// one), syncs, stream-capture marks, event records and stream waits, and
// every other traced call (its API record is waited for). From the call's
// parameter struct (generated_cuda_runtime_api_meta.h, generated_cuda_meta.h)
// come the raw stream handle it enqueues on and, for event records and
// stream waits, the event handle, with the call's CUcontext: nothing is
// resolved and nothing is dereferenced but the parameters CUPTI passes.
//
// Nesting: an enqueue call made inside another on the same thread (a
// driver call inside a runtime call, __cudaLaunchKernel inside a wrapper)
// is one piece of device work with two correlation ids; it is pushed with
// `nested_in` = the outer call's id, and the tracker waits for one record
// carrying either (a thread_local depth counter, reset when callbacks are
// enabled again, so a call whose exit was never seen cannot stick).
//
// Default streams: the legacy default stream of a context and a thread's
// per-thread default stream have no creation callback; the first call a
// thread makes in a context (while that context is current, so valid) asks
// CUPTI for both ids, once (cuptiGetStreamIdEx with a NULL stream; a small
// thread_local cache, no allocation), and they come along with the call.
//
// Streams: STREAM_CREATED and STREAM_DESTROY_STARTING resource callbacks
// run on the creating (destroying) thread while the stream is valid; there
// its CUPTI stream id and context id are read (cuptiGetStreamIdEx,
// cuptiGetContextId) and pushed as a LearntCall, so the drain thread maps a
// call's stream handle to the id its records carry without ever passing a
// handle to CUPTI after the stream may be gone (a recycled handle names the
// new stream from its creation on). A stream created before gpuutil
// subscribed is learnt from its first launch's device record instead.
//
// Hot path (the application's threads): no allocation, no lock; no vendor
// call but two CUPTI queries once per stream created and two once per
// (thread, context); a full ring drops the call (counted as
// cupti_calls_dropped by the collector: that launch is not waited for).
//
// Contract: CallRoles (call_catalog.h) is built by the control thread before
// callbacks are enabled and is read-only afterwards; CallRing::push from any
// thread, pop from the drain thread only.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "collectors/cupti/call_catalog.h"
#include "collectors/cupti/cupti_api.h"
#include "collectors/cupti/launch_tracker.h"
#include "collectors/cupti/mpmc_ring.h"

namespace gpuutil::cupti {

struct LearntCall {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t thread = 0;          // (uint32_t)pthread_self(), what CUPTI's API records carry
  uint64_t stream_handle = 0;   // the raw CUstream of the call (kStreamExplicit), never dereferenced
  uint64_t context_handle = 0;  // the raw CUcontext of the call (CUpti_CallbackData::context)
  uint64_t event_handle = 0;    // event records and stream waits: the raw event handle
  uint32_t correlation_id = 0;
  uint32_t context = 0;    // CUPTI's context id (contextUid) current to the calling thread
  uint32_t nested_in = 0;  // an enqueue made inside another enqueue call of the thread: that call's id
  uint32_t stream_id = 0;  // stream create/destroy (resource callbacks): CUPTI's stream id
  // The first call of this thread in its context also says that context's
  // legacy default stream id and this thread's per-thread default stream id
  // (kUnknownStream: not looked up, or CUPTI could not say).
  uint32_t legacy_stream_id = kUnknownStream;
  uint32_t per_thread_stream_id = kUnknownStream;
  uint16_t flags = 0;      // CallFlag
  uint16_t cbid = 0;       // its callback id (names it when it names no kernel)
  uint8_t domain = 0;      // CUpti_CallbackDomain of the call
  uint8_t stream_kind = kStreamNone;  // StreamKind
  char name[50] = {};  // the kernel's name (symbolName), NUL-terminated, may be cut (the cell: 128 bytes)
};

// The calls learnt, from the application's threads to the drain thread.
using CallRing = MpmcRing<LearntCall>;

// At API enter: the call's start into correlationData, and the nesting of
// enqueue calls on this thread.
void enter_call(const CallRoles& roles, CUpti_CallbackDomain domain, uint32_t cbid, const CUpti_CallbackData& d,
                int64_t now_ns);
// At API exit: fills `out` and returns true when the call must be learnt
// (see the top of this file). start_ns is read from correlationData (set at
// enter), end_ns is now_ns.
bool learn_call(const CallRoles& roles, CUpti_CallbackDomain domain, uint32_t cbid, const CUpti_CallbackData& d,
                int64_t now_ns, LearntCall& out, const CuptiApi* api = nullptr);
// A resource callback (CUPTI_CB_DOMAIN_RESOURCE): a stream created or about
// to be destroyed, as a LearntCall; false for anything else.
bool learn_stream(const CuptiApi& api, uint32_t cbid, const CUpti_ResourceData& d, int64_t now_ns, LearntCall& out);
// Callbacks were enabled again: a nesting seen before no longer holds.
void reset_call_nesting();

}  // namespace gpuutil::cupti
