// Launches learnt at API exit, streams at their creation (see api_callbacks.h).
#include "collectors/cupti/api_callbacks.h"

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstring>

namespace gpuutil::cupti {

static_assert(sizeof(LearntCall) == 128, "one ring cell's call: keep it to two cache lines");

namespace {

// The enqueue calls in flight on this thread: how deep, and the outermost
// one's correlation id. `generation` ties them to one enabling of the
// callbacks (a call whose exit was never seen is forgotten then).
struct Nesting {
  uint64_t generation = 0;
  uint32_t depth = 0;
  uint32_t outer = 0;
};
thread_local Nesting t_nesting;
std::atomic<uint64_t> g_generation{1};

// Contexts whose default streams this thread already reported (a few; a
// thread rarely uses more than one or two contexts).
struct DefaultsSeen {
  uint64_t generation = 0;
  uintptr_t contexts[4] = {};
  unsigned next = 0;
};
thread_local DefaultsSeen t_defaults;

// The legacy and per-thread default stream ids of `context`, the first time
// this thread calls in it (since callbacks were enabled).
void default_streams(const CuptiApi* api, CUcontext context, LearntCall& out) {
  if (api == nullptr || api->GetStreamIdEx == nullptr || context == nullptr) return;
  DefaultsSeen& seen = t_defaults;
  const uint64_t g = g_generation.load(std::memory_order_relaxed);
  if (seen.generation != g) seen = DefaultsSeen{g, {}, 0};
  const uintptr_t c = reinterpret_cast<uintptr_t>(context);
  for (uintptr_t known : seen.contexts) {
    if (known == c) return;
  }
  seen.contexts[seen.next++ % 4] = c;
  uint32_t id = 0;
  if (api->GetStreamIdEx(context, nullptr, 0, &id) == CUPTI_SUCCESS) out.legacy_stream_id = id;
  if (api->GetStreamIdEx(context, nullptr, 1, &id) == CUPTI_SUCCESS) out.per_thread_stream_id = id;
}

// Copies a pointer-sized value out of the parameters CUPTI passed.
uintptr_t read_handle(const void* params, int16_t offset) {
  uintptr_t h = 0;
  std::memcpy(&h, static_cast<const char*>(params) + offset, sizeof(h));
  return h;
}

}  // namespace

void reset_call_nesting() { g_generation.fetch_add(1, std::memory_order_relaxed); }

void enter_call(const CallRoles& roles, CUpti_CallbackDomain domain, uint32_t cbid, const CUpti_CallbackData& d,
                int64_t now_ns) {
  if (d.correlationData != nullptr) *d.correlationData = static_cast<uint64_t>(now_ns);
  if (!(roles.flags(domain, cbid) & kCallEnqueue)) return;
  Nesting& n = t_nesting;
  const uint64_t g = g_generation.load(std::memory_order_relaxed);
  if (n.generation != g || n.depth == 0) {
    n.generation = g;
    n.depth = 0;
    n.outer = d.correlationId;
  }
  ++n.depth;
}

bool learn_call(const CallRoles& roles, CUpti_CallbackDomain domain, uint32_t cbid, const CUpti_CallbackData& d,
                int64_t now_ns, LearntCall& out, const CuptiApi* api) {
  const uint16_t f = roles.flags(domain, cbid);
  if (f == 0) return false;
  uint32_t nested_in = 0;
  if (f & kCallEnqueue) {
    Nesting& n = t_nesting;
    if (n.generation == g_generation.load(std::memory_order_relaxed) && n.depth > 0) {
      --n.depth;
      if (n.depth > 0 && n.outer != d.correlationId) nested_in = n.outer;
    }
  }
  // cudaError_t and CUresult are both int-sized enums; 0 is success.
  const bool failed = d.functionReturnValue != nullptr && *static_cast<const int*>(d.functionReturnValue) != 0;
  if (failed && !(f & kCallHostRecord)) return false;  // enqueued nothing (its API record still comes)
  const CallParams p = roles.params(domain, cbid);
  if (!failed && (f & kCallCount) && d.functionParams != nullptr) {
    size_t count = 0;
    std::memcpy(&count, static_cast<const char*>(d.functionParams) + p.count, sizeof(count));
    if (count == 0) return false;  // enqueues nothing
  }
  out.flags = failed ? uint16_t(f & kCallHostRecord) : f;
  out.correlation_id = d.correlationId;
  out.context = d.contextUid;
  out.nested_in = nested_in;
  out.stream_id = 0;
  out.legacy_stream_id = out.per_thread_stream_id = kUnknownStream;
  out.end_ns = now_ns;
  const int64_t start = d.correlationData != nullptr ? static_cast<int64_t>(*d.correlationData) : 0;
  out.start_ns = start > 0 && start <= now_ns ? start : now_ns;
  out.thread = static_cast<uint32_t>(pthread_self());
  out.domain = static_cast<uint8_t>(domain);
  out.cbid = static_cast<uint16_t>(cbid);
  // The stream: the raw handle and the context, resolved later if ever.
  out.stream_kind = kStreamNone;
  out.stream_handle = 0;
  out.event_handle = 0;
  out.context_handle = reinterpret_cast<uintptr_t>(d.context);
  const bool reads_stream = out.flags & (kCallEnqueue | kCallStreamSync | kCallEventRecord | kCallStreamWait |
                                         kCallCaptureBegin | kCallCaptureEnd);
  if (reads_stream && d.functionParams != nullptr && p.has_stream()) {
    uintptr_t h = 0;
    bool have = true;
    if (p.stream >= 0) {
      h = read_handle(d.functionParams, p.stream);
    } else {
      const uintptr_t config = read_handle(d.functionParams, p.config);
      have = config != 0;
      if (have) std::memcpy(&h, reinterpret_cast<const char*>(config) + p.config_stream, sizeof(h));
    }
    if (have) {
      // NULL is the legacy default stream, or the per-thread one in a _ptsz
      // call; 0x1 and 0x2 name them explicitly (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
      if (h == 0) {
        out.stream_kind = (f & kCallPerThreadStream) ? kStreamPerThread : kStreamLegacy;
      } else if (h == reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY)) {
        out.stream_kind = kStreamLegacy;
      } else if (h == reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD)) {
        out.stream_kind = kStreamPerThread;
      } else {
        out.stream_kind = kStreamExplicit;
        out.stream_handle = h;
      }
    }
  }
  if (reads_stream) default_streams(api, d.context, out);
  if ((out.flags & (kCallEventRecord | kCallStreamWait)) && d.functionParams != nullptr && p.event >= 0) {
    out.event_handle = read_handle(d.functionParams, p.event);
  }
  out.name[0] = '\0';
  if (d.symbolName != nullptr) {
    size_t i = 0;
    for (; i + 1 < sizeof(out.name) && d.symbolName[i] != '\0'; ++i) out.name[i] = d.symbolName[i];
    out.name[i] = '\0';
  }
  return true;
}

bool learn_stream(const CuptiApi& api, uint32_t cbid, const CUpti_ResourceData& d, int64_t now_ns, LearntCall& out) {
  const bool created = cbid == CUPTI_CBID_RESOURCE_STREAM_CREATED;
  if (!created && cbid != CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING) return false;
  const CUstream stream = d.resourceHandle.stream;
  if (stream == nullptr) return false;
  out = LearntCall{};
  out.flags = created ? kCallStreamCreate : kCallStreamDestroy;
  out.start_ns = out.end_ns = now_ns;
  out.thread = static_cast<uint32_t>(pthread_self());
  out.domain = static_cast<uint8_t>(CUPTI_CB_DOMAIN_RESOURCE);
  out.cbid = static_cast<uint16_t>(cbid);
  out.stream_kind = kStreamExplicit;
  out.stream_handle = reinterpret_cast<uintptr_t>(stream);
  out.context_handle = reinterpret_cast<uintptr_t>(d.context);
  // The stream is valid here (created, or not yet destroyed): its id and
  // its context's id, asked now and never again.
  uint32_t id = 0, context = 0;
  if (api.GetStreamIdEx != nullptr && api.GetStreamIdEx(d.context, stream, 0, &id) == CUPTI_SUCCESS) {
    out.stream_id = id;
  } else {
    out.stream_id = kUnknownStream;
  }
  if (api.GetContextId != nullptr && api.GetContextId(d.context, &context) == CUPTI_SUCCESS) out.context = context;
  return true;
}

}  // namespace gpuutil::cupti
