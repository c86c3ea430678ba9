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
    // A forced flush hands over work the device had not finished.
    ++stats_.unfinished;
    session_.count(Diag::cupti_timestamp_invalid, 1, std::string(what) + " not finished by the device when flushed");
    return false;
  }
  if (start == 0 || end == 0 || end < start || start > uint64_t(INT64_MAX) || end > uint64_t(INT64_MAX)) {
    session_.count(Diag::cupti_timestamp_invalid, 1, what);
    return false;
  }
  return true;
}

void RecordDecoder::track_device(uint32_t correlation_id, uint32_t stream, uint32_t context) {
  if (tracker_ != nullptr) tracker_->on_device(correlation_id, stream, context);
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
// Fields every device record shares: times, correlation, device, stream.
template <class Record>
DeviceActivity copy_placement(const Record& r) {
  DeviceActivity a;
  a.start_ns = static_cast<int64_t>(r.start);
  a.end_ns = static_cast<int64_t>(r.end);
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
      if (!times_ok(k->start, k->end, "kernel")) return;
      const KernelName& n = kernel_name(k->name);
      DeviceActivity a = copy_placement(*k);
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
      track_device(k->correlationId, k->streamId, k->contextId);
      store(a);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      if (!times_ok(m->start, m->end, "memcpy")) return;
      DeviceActivity a = copy_placement(*m);
      a.bytes = m->bytes;
      a.kind = ActivityKind::kMemcpy;
      a.direction = direction(m->copyKind);
      a.host_pageable = m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE || m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
      a.graph_id = m->graphId;
      track_device(m->correlationId, m->streamId, m->contextId);
      store(a);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer-to-peer copies
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      if (!times_ok(m->start, m->end, "memcpy")) return;
      DeviceActivity a = copy_placement(*m);
      a.bytes = m->bytes;
      a.kind = ActivityKind::kMemcpy;
      a.direction = MemcpyDirection::kPeerToPeer;
      a.graph_id = m->graphId;
      track_device(m->correlationId, m->streamId, m->contextId);
      store(a);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if (!times_ok(m->start, m->end, "memset")) return;
      DeviceActivity a = copy_placement(*m);
      a.bytes = m->bytes;
      a.kind = ActivityKind::kMemset;
      a.graph_id = m->graphId;
      track_device(m->correlationId, m->streamId, m->contextId);
      store(a);
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* r = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      if (!times_ok(r->start, r->end, "api")) return;
      const ApiName& n = api_name(
          record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, r->cbid);
      HostApiCall c;
      c.start_ns = static_cast<int64_t>(r->start);
      c.end_ns = static_cast<int64_t>(r->end);
      c.correlation_id = r->correlationId;
      c.name = n.id;
      c.thread = thread(r->threadId);
      c.kind = n.cls.kind;
      c.sync = n.cls.sync;
      c.graph = n.cls.graph;
      if (tracker_ != nullptr && !learn_calls_) tracker_->on_api_record(r->correlationId, r->threadId);
      if (tracker_ != nullptr && learn_calls_ && r->returnValue == 0) {  // a failed call enqueued nothing
        if (n.role.expects_record) tracker_->on_enqueue(r->correlationId, c.start_ns, r->threadId, n.role.graph_launch);
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
        tracker_->on_device_sync(static_cast<int64_t>(y->end), y->contextId);
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
