// CUPTI record -> DeviceActivity / HostApiCall (see record_decoder.h).
#include "collectors/cupti/record_decoder.h"

#include <cstring>

#include "gpuutil/range_classify.h"

namespace gpuutil::cupti {

namespace {

MemcpyDirection direction(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return MemcpyDirection::kHostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return MemcpyDirection::kDeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return MemcpyDirection::kDeviceToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return MemcpyDirection::kHostToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return MemcpyDirection::kPeerToPeer;
    default:
      return MemcpyDirection::kUnknown;
  }
}

uint32_t clamp_u32(int32_t v) { return v > 0 ? static_cast<uint32_t>(v) : 0u; }

}  // namespace

RecordDecoder::RecordDecoder(const CuptiApi& api, EventSink& session, int64_t pid, LaunchTracker* tracker,
                             bool os_tid_threads)
    : api_(api), session_(session), pid_(pid), tracker_(tracker), os_tid_threads_(os_tid_threads) {}

bool RecordDecoder::times_ok(uint64_t start, uint64_t end, const char* what) {
  if (end == 0 && std::strcmp(what, "api") != 0) {
    // A forced flush hands over work the device had not finished; CUPTI
    // also writes zero times when it had no device memory for them.
    ++stats_.unfinished;
    session_.count(Diag::cupti_timestamp_invalid, 1,
                   std::string(what) + " with no end time (not finished by the device when flushed, or no timing "
                                       "collected); its launch waits no more, its time is not counted");
    return false;
  }
  if (start == 0 || end == 0 || end < start || start > uint64_t(INT64_MAX) || end > uint64_t(INT64_MAX)) {
    session_.count(Diag::cupti_timestamp_invalid, 1, what);
    return false;
  }
  return true;
}

bool RecordDecoder::device_times(const char* what, uint64_t start, uint64_t end, int64_t launch_start_ns,
                                 DeviceActivity& a) {
  if (!times_ok(start, end, what)) return false;
  a.start_ns = to_session(start);
  a.end_ns = to_session(end);
  // On another clock: a record stamped before CUPTI's clock was changed
  // (another client registered its own), or after a re-registration left
  // it on the previous clock: it would land far from its launch.
  if (launch_start_ns != INT64_MIN &&
      (a.start_ns < launch_start_ns - kLaunchSkewNs || a.start_ns - launch_start_ns > kLongestQueueNs)) {
    ++stats_.clock_mismatched;
    session_.count(Diag::cupti_clock_mismatch, 1,
                   std::string(what) + " starting " + std::to_string((a.start_ns - launch_start_ns) / 1000) +
                       " us from its launch call's start (correlation id " + std::to_string(a.correlation_id) + ")");
    return false;
  }
  return true;
}

bool RecordDecoder::arrived(uint32_t correlation_id, uint32_t stream, uint32_t context, const char* what,
                            uint64_t start, uint64_t end, DeviceActivity& a) {
  // The record came, whatever its times say: its launch waits no more;
  // unless a forced flush handed over work the device had not finished.
  int64_t launch_start = INT64_MIN;
  if (tracker_ != nullptr && !(forced_ && end == 0)) {
    launch_start = tracker_->launch_start_ns(correlation_id);
    tracker_->on_device(correlation_id, stream, context);
  }
  return device_times(what, start, end, launch_start, a);
}

// A call that enqueues device work, learnt from its API record. Two such
// calls of one thread whose times nest are one piece of work (a driver
// call inside a runtime call: the thread was in both at once); their
// records may come in either order.
void RecordDecoder::learn_enqueue(const CUpti_ActivityAPI& r, const HostApiCall& c, bool multi) {
  if (last_enqueue_.size() >= 4096 && last_enqueue_.count(r.threadId) == 0) last_enqueue_.clear();  // bounded
  LastEnqueue& last = last_enqueue_[r.threadId];
  const bool have = last.correlation_id != 0 && last.correlation_id != r.correlationId;
  if (have && c.start_ns >= last.start_ns && c.end_ns <= last.end_ns) {
    tracker_->on_enqueue(r.correlationId, c.start_ns, r.threadId, multi, 0, kUnknownStream, 0, {}, false,
                         last.correlation_id);  // inside the last one
    return;
  }
  if (have && last.start_ns >= c.start_ns && last.end_ns <= c.end_ns) {
    tracker_->on_enqueue(r.correlationId, c.start_ns, r.threadId, multi);
    tracker_->nest(last.correlation_id, r.correlationId);  // the last one was inside this one
  } else {
    tracker_->on_enqueue(r.correlationId, c.start_ns, r.threadId, multi);
  }
  last = {r.correlationId, c.start_ns, c.end_ns};
}

const RecordDecoder::ApiName& RecordDecoder::internal_launch_name() {
  if (!internal_launch_) {
    constexpr std::string_view kName = "cuInternalLaunchKernel";  // classify_call: a launch
    internal_launch_ = ApiName{session_.intern(kName), classify_api(kName), api_role(kName)};
  }
  return *internal_launch_;
}

const RecordDecoder::KernelName& RecordDecoder::kernel_name(const char* name) {
  if (!name) name = "<unnamed kernel>";
  auto it = kernel_names_.find(name);
  if (it != kernel_names_.end() && it->second.text.compare(0, std::string::npos, name, it->second.text.size()) == 0 &&
      name[it->second.text.size()] == '\0') {
    return it->second;
  }
  const std::string_view text(name);
  KernelName k{session_.intern(text), is_communication_kernel(text), std::string(text)};
  return kernel_names_.insert_or_assign(name, std::move(k)).first->second;
}

const RecordDecoder::ApiName& RecordDecoder::api_name(CUpti_CallbackDomain domain, uint32_t cbid) {
  const uint64_t key = (uint64_t(domain) << 32) | cbid;
  auto it = api_names_.find(key);
  if (it != api_names_.end()) return it->second;
  const char* name = nullptr;
  if (!api_.GetCallbackName || api_.GetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) {
    name = nullptr;
  }
  std::string text = name ? name : (domain == CUPTI_CB_DOMAIN_DRIVER_API ? "cu" : "cuda") + std::string("Api#") +
                                       std::to_string(cbid);
  // cuptiGetCallbackName's "cudaDeviceSynchronize_v3020" is Kineto's
  // "cudaDeviceSynchronize": live names equal imported ones.
  text.resize(strip_api_version(text).size());
  ApiName a{session_.intern(text), classify_api(text), api_role(text)};
  return api_names_.emplace(key, a).first->second;
}

uint32_t RecordDecoder::thread(uint32_t tid) {
  if (const uint64_t g = session_.thread_generation(); g != threads_generation_) {
    threads_.clear();  // a key now names a newer thread
    threads_generation_ = g;
  }
  auto it = threads_.find(tid);
  if (it != threads_.end()) return it->second;
  const uint32_t idx = os_tid_threads_ ? session_.thread_index_for_os_tid(pid_, tid) : session_.thread_index(pid_, tid);
  threads_.emplace(tid, idx);
  return idx;
}

namespace {
// Fields every device record shares: correlation, device, stream (times:
// device_times()).
template <class Record>
DeviceActivity copy_placement(const Record& r) {
  DeviceActivity a;
  a.correlation_id = r.correlationId;
  a.device = static_cast<int32_t>(r.deviceId);
  a.stream = static_cast<int32_t>(r.streamId);
  return a;
}
}  // namespace

void RecordDecoder::store(const DeviceActivity& a) {
  session_.add_activity(a);
  ++stats_.activities;
  ++stats_.stored;
  if (a.end_ns > stats_.max_end_ns) stats_.max_end_ns = a.end_ns;
}

void RecordDecoder::decode(const CUpti_Activity* record) {
  ++stats_.records;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      DeviceActivity a = copy_placement(*k);
      if (!arrived(k->correlationId, k->streamId, k->contextId, "kernel", k->start, k->end, a)) return;
      const KernelName& n = kernel_name(k->name);
      a.name = n.id;
      a.kind = ActivityKind::kKernel;
      a.is_communication = n.communication;
      a.grid[0] = clamp_u32(k->gridX);
      a.grid[1] = clamp_u32(k->gridY);
      a.grid[2] = clamp_u32(k->gridZ);
      a.block[0] = clamp_u32(k->blockX);
      a.block[1] = clamp_u32(k->blockY);
      a.block[2] = clamp_u32(k->blockZ);
      a.registers_per_thread = k->registersPerThread;
      a.shared_memory_bytes = clamp_u32(k->staticSharedMemory) + clamp_u32(k->dynamicSharedMemory);
      a.graph_id = k->graphId;
      if (a.graph_id != 0) ++stats_.graph_records;
      store(a);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      DeviceActivity a = copy_placement(*m);
      if (!arrived(m->correlationId, m->streamId, m->contextId, "memcpy", m->start, m->end, a)) return;
      a.bytes = m->bytes;
      a.kind = ActivityKind::kMemcpy;
      a.direction = direction(m->copyKind);
      a.host_pageable = m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE || m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
      a.graph_id = m->graphId;
      store(a);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer-to-peer copies
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      DeviceActivity a = copy_placement(*m);
      if (!arrived(m->correlationId, m->streamId, m->contextId, "memcpy", m->start, m->end, a)) return;
      a.bytes = m->bytes;
      a.kind = ActivityKind::kMemcpy;
      a.direction = MemcpyDirection::kPeerToPeer;
      a.graph_id = m->graphId;
      store(a);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      DeviceActivity a = copy_placement(*m);
      if (!arrived(m->correlationId, m->streamId, m->contextId, "memset", m->start, m->end, a)) return;
      a.bytes = m->bytes;
      a.kind = ActivityKind::kMemset;
      a.graph_id = m->graphId;
      store(a);
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API: {
      const auto* r = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      if (!times_ok(r->start, r->end, "api")) return;
      // An internal launch (a driver launch outside any public API call,
      // cupti_activity.h) is a launch whose cbid means nothing.
      const bool internal = record->kind == CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API;
      const ApiName& n = internal ? internal_launch_name()
                                  : api_name(record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                                                        : CUPTI_CB_DOMAIN_DRIVER_API,
                                             r->cbid);
      HostApiCall c;
      c.start_ns = to_session(r->start);
      c.end_ns = to_session(r->end);
      c.correlation_id = r->correlationId;
      c.name = n.id;
      c.thread = thread(r->threadId);
      c.kind = n.cls.kind;
      c.sync = n.cls.sync;
      c.graph = n.cls.graph;
      if (tracker_ != nullptr && !learn_calls_) tracker_->on_api_record(r->correlationId, r->threadId);
      // Learnt from its record: without the callback API every call, and an
      // internal launch always (no callback announces it).
      if (tracker_ != nullptr && (learn_calls_ || internal) && r->returnValue == 0) {  // a failed call enqueued nothing
        if (n.role.expects_record) learn_enqueue(*r, c, n.role.multi_record);
        if (n.role.capture == CaptureMark::kBegin) tracker_->on_capture_begin(r->threadId, c.start_ns);
        if (n.role.capture == CaptureMark::kEnd) tracker_->on_capture_end(r->threadId, c.end_ns);
      }
      session_.add_api_call(c);
      ++stats_.api_calls;
      ++stats_.stored;
      if (c.end_ns > stats_.max_end_ns) stats_.max_end_ns = c.end_ns;
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      // A context-wide sync finishes that context's (device's) earlier work.
      const auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      if (tracker_ != nullptr && y->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE && y->end != 0 &&
          y->end <= uint64_t(INT64_MAX)) {
        tracker_->on_device_sync(to_session(y->end), y->contextId);
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:  // only while another client (Kineto) pushes ids
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return;  // recognised; the host side is in the API records (see header)
    default:
      session_.count(Diag::cupti_record_unknown_kind, 1, "kind " + std::to_string(int(record->kind)));
      return;
  }
}

void RecordDecoder::decode_buffer(uint8_t* buffer, size_t valid_bytes) {
  CUpti_Activity* record = nullptr;
  for (;;) {
    const CUptiResult r = api_.ActivityGetNextRecord(buffer, valid_bytes, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) return;
    if (r != CUPTI_SUCCESS) {
      session_.count(Diag::cupti_buffer_invalid, 1, "cuptiActivityGetNextRecord: " + api_.describe(r));
      return;
    }
    decode(record);
  }
}

}  // namespace gpuutil::cupti
