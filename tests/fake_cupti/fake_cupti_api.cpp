// The CUPTI entry points of the fake CUPTI, with CUPTI's real signatures and
// return codes (see fake_cupti.h). Each one only updates the shared state;
// delivery of buffers happens in fake_device.cpp.
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

#include "fake_state.h"

using namespace fake;

namespace {

// Whether a cuptiSubscribe_v2 caller asked for multiple subscribers (the
// field CUPTI 13.2 added after oldSubscriberSize; its structSize says).
bool asks_multiple(const CUpti_SubscriberParams* params) {
  if (params == nullptr) return false;
  const size_t at = offsetof(CUpti_SubscriberParams, oldSubscriberSize) + sizeof(size_t);
  if (params->structSize <= at) return false;
  return reinterpret_cast<const uint8_t*>(params)[at] != 0;
}

CUptiResult subscribe(CUpti_SubscriberHandle* subscriber, CUpti_SubscriberParams* params, CUpti_CallbackFunc callback,
                      void* user) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (params != nullptr && params->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  // CUPTI 13.2 (matrix subscribers=multi): several subscribers when all of
  // them asked; before, one.
  const bool multi = s.matrix.multi_subscriber && asks_multiple(params);
  std::string other;
  CUptiResult r = CUPTI_SUCCESS;
  if (s.cfg.subscribe_error != 0) {
    r = static_cast<CUptiResult>(s.cfg.subscribe_error);
    other = "Nsight Systems";
  } else if (!s.other_subscriber.empty()) {
    r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    other = "CUPTI for " + s.other_subscriber;
  } else if (!s.subscribers.empty()) {
    bool all = multi;
    for (const State::Subscriber& sub : s.subscribers) all = all && sub.allow_multiple;
    if (!all) {
      r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
      other = "CUPTI for (this process's first subscriber)";
    }
  }
  if (r != CUPTI_SUCCESS) {
    if (params != nullptr && params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0) {
      std::strncpy(params->oldSubscriberName, other.c_str(), params->oldSubscriberSize - 1);
      params->oldSubscriberName[params->oldSubscriberSize - 1] = '\0';
    }
    return r;
  }
  State::Subscriber sub;
  sub.token = new int(0);  // a distinct address per subscription (never freed: handles may be kept)
  sub.callback = callback;
  sub.user = user;
  sub.allow_multiple = multi;
  s.subscribers.push_back(sub);
  s.stats.subscribed = 1;
  s.stats.subscribers = static_cast<uint32_t>(s.subscribers.size());
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(sub.token);
  return CUPTI_SUCCESS;
}

State::Subscriber* find_subscriber(State& s, CUpti_SubscriberHandle h) {
  for (State::Subscriber& sub : s.subscribers) {
    if (reinterpret_cast<CUpti_SubscriberHandle>(sub.token) == h) return &sub;
  }
  return nullptr;
}

void set_kind(State& s, CUpti_ActivityKind kind, bool on) {
  const uint32_t bit = std::min<uint32_t>(static_cast<uint32_t>(kind), 31);
  const bool was = kind_enabled(s, kind);
  if (on) {
    s.stats.enabled_kinds_mask |= 1u << bit;
  } else {
    s.stats.enabled_kinds_mask &= ~(1u << bit);
  }
  // A kind overrides earlier per-callback-id settings (cupti_activity.h).
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    s.runtime_all = on;
    s.runtime_override.clear();
  }
  if (kind == CUPTI_ACTIVITY_KIND_DRIVER) {
    s.driver_all = on;
    s.driver_override.clear();
  }
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && on && !was) {
    ++s.stats.activity_sessions;
    // Each registration after the first: that many kernel records at the
    // head of this session on CUPTI's default clock.
    s.bad_clock_head = s.stats.timestamp_registrations > 1 ? s.stats.timestamp_registrations - 1 : 0;
  }
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  // subscribers=multi: the release that brought multiple subscribers.
  *version = s.cfg.version ? s.cfg.version : s.matrix.multi_subscriber ? 130200u : uint32_t(CUPTI_API_VERSION);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_INVALID_OPERATION: *str = "CUPTI_ERROR_INVALID_OPERATION"; break;
    case CUPTI_ERROR_UNKNOWN: *str = "CUPTI_ERROR_UNKNOWN"; break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: *str = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  if (!name) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* n = callback_name(domain, cbid);
  if (n == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *name = n;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* user) {
  return subscribe(subscriber, nullptr, callback, user);
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* user,
                                       CUpti_SubscriberParams* params) {
  return subscribe(subscriber, params, callback, user);
}

// The callback API: the subscriber's callback is called at API enter and
// exit of the enabled (domain, callback id)s of the runtime and driver APIs
// (fake_device.cpp, call_api).
CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                                         CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid == 0 || cbid >= CUPTI_CBID_RESOURCE_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  } else if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  } else if (callback_name(domain, cbid) == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  State::Subscriber* sub = find_subscriber(s, subscriber);
  if (sub == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (enable) {
    sub->enabled.insert({int(domain), cbid});
  } else {
    sub->enabled.erase({int(domain), cbid});
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto it = s.subscribers.begin(); it != s.subscribers.end(); ++it) {
    if (reinterpret_cast<CUpti_SubscriberHandle>(it->token) == subscriber) {
      s.subscribers.erase(it);
      s.stats.subscribers = static_cast<uint32_t>(s.subscribers.size());
      s.stats.subscribed = s.subscribers.empty() ? 0 : 1;
      return CUPTI_SUCCESS;
    }
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  if (!request || !complete) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.request = request;  // silently replaces another client's callbacks, as CUPTI does
    s.complete = complete;
    s.stats.callbacks_registered = 1;
  }
  ensure_worker();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.cfg.timestamp_error != 0) return static_cast<CUptiResult>(s.cfg.timestamp_error);
  if (f == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  s.timestamp.store(f);
  s.stats.timestamp_callback_set = 1;
  ++s.stats.timestamp_registrations;
  measure_clock_offset();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.cfg.enable_error != 0 && (s.cfg.enable_error_kind == 0 || s.cfg.enable_error_kind == int(kind))) {
    return static_cast<CUptiResult>(s.cfg.enable_error);
  }
  set_kind(s, kind, true);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  set_kind(s, kind, false);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, cbid) == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.runtime_override[cbid] = enable != 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (callback_name(CUPTI_CB_DOMAIN_DRIVER_API, cbid) == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.driver_override[cbid] = enable != 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.thread_id_type = type;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  if (!type) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  *type = s.thread_id_type;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  if (!timestamp) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = static_cast<uint64_t>(now_ns());
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  int64_t stall_ms = 0;
  {
    State& s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.stats.callbacks_registered) return CUPTI_ERROR_INVALID_OPERATION;
    if (s.cfg.flush_stalls > 0) {
      --s.cfg.flush_stalls;
      ++s.stats.flushes_stalled;
      stall_ms = s.cfg.flush_stall_ms;
    }
  }
  // The flushing thread is held off; the simulated GPU and the emitting
  // threads go on (no fake lock is held).
  if (stall_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
  flush_and_deliver(true, (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
  size_t pos = 0;
  if (*record) {
    const uint8_t* cur = reinterpret_cast<const uint8_t*>(*record);
    uint32_t size;
    std::memcpy(&size, cur - 8, 4);
    pos = static_cast<size_t>(cur - buffer) + ((size + 7) & ~size_t(7));
  }
  if (pos >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  if (pos + 8 > valid) return CUPTI_ERROR_INVALID_PARAMETER;
  uint32_t header[2];
  std::memcpy(header, buffer + pos, 8);
  if (header[1] != kMagic || pos + 8 + header[0] > valid) return CUPTI_ERROR_INVALID_PARAMETER;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + pos + 8);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  if (!size || !value) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (attr == CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER) {
    if (*size < sizeof(uint8_t)) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    // "Changing this attribute in the middle of the profiling session will
    // result in undefined behavior" (cupti_activity.h): here, records from
    // now on go where it says; buffers being written stay until flushed.
    s.per_thread = *static_cast<uint8_t*>(value) != 0;
    s.switch_pending = false;
  }
  if (attr == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER) {
    if (*size < sizeof(uint8_t)) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    s.zeroed_attr = *static_cast<uint8_t*>(value) != 0;
  }
  return CUPTI_SUCCESS;  // other attributes are accepted and have no effect
}

CUptiResult CUPTIAPI cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  if (!size || !value) return CUPTI_ERROR_INVALID_PARAMETER;
  if (attr != CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER) return CUPTI_ERROR_NOT_SUPPORTED;
  if (*size < sizeof(uint8_t)) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  *static_cast<uint8_t*>(value) = s.per_thread ? 1 : 0;
  *size = sizeof(uint8_t);
  return CUPTI_SUCCESS;
}

// "Destroys and cleans up all the resources associated with CUPTI in the
// current process" (cupti_activity.h): kinds, API enables, buffer and
// timestamp callbacks, the subscription; buffers it held are never returned
// (the client was to flush first). Any later call starts afresh.
CUptiResult CUPTIAPI cuptiFinalize(void) {
  finalize_all();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = st();
  // Lock-free: called from inside the completion callback.
  uint64_t d = s.pending_dropped.exchange(0);
  d += __atomic_exchange_n(&s.cfg.dropped_records, uint64_t(0), __ATOMIC_ACQ_REL);
  __atomic_fetch_add(&s.stats.dropped_reported, d, __ATOMIC_ACQ_REL);
  *dropped = static_cast<size_t>(d);
  return CUPTI_SUCCESS;
}

}  // extern "C"
