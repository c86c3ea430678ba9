// Turns CUPTI activity records into the plain event model, once, at the edge.
//
// Decodes CUpti_ActivityKernel10 (CONCURRENT_KERNEL and KERNEL),
// CUpti_ActivityMemcpy6, CUpti_ActivityMemcpyPtoP4 (MEMCPY2: peer copies),
// CUpti_ActivityMemset4, CUpti_ActivityAPI (RUNTIME and DRIVER; names via
// cuptiGetCallbackName, classified by classify_api; INTERNAL_LAUNCH_API, a
// driver launch outside any public API call, as a launch), and recognises
// SYNCHRONIZATION, EXTERNAL_CORRELATION and OVERHEAD records (counted, no
// event: the synchronizing API call already carries the host side of a
// sync). Anything else is counted as cupti_record_unknown_kind. NCCL
// kernels are marked is_communication by is_communication_kernel().
//
// Every device record goes to the LaunchTracker the moment it is read,
// whatever its timestamps: it arrived, so its launch waits no more (but for
// one with no end time in a forced flush's buffers: unfinished work). Records
// with zero or reversed timestamps (a forced flush hands over unfinished
// work with zero times; CUPTI writes zeros when it had no device memory for
// timing) are then counted (cupti_timestamp_invalid) and kept out of busy
// time. Timestamps go through the ClockMap (clock_map.h: identity while
// CUPTI stamps with the session clock), and a device record that lands
// more than kLaunchSkewNs (1 s) before its own launch call began, or more than a
// day after (a record stamped on another clock), is counted
// (cupti_clock_mismatch) and kept out of steps. Every context-wide
// SYNCHRONIZATION record goes to the tracker as a sync. API calls that
// enqueue device work and stream-capture marks go there too unless the
// collector learns them at API exit through the callback API
// (learn_calls_from_records(false)); a failed call (returnValue != 0)
// enqueues nothing and is never tracked. Two enqueue calls of one thread
// whose API records nest in time are one piece of work (a driver call made
// inside a runtime call): one record of either completes it.
//
// Threads: API records carry CUPTI's thread id, (uint32_t)pthread_self() by
// default; that is the session's thread key for every source
// (gpuutil/thread_key.h). When another tool switched CUPTI to OS thread ids
// (CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM), threads are joined by OS tid. A
// key that a source has since met on a new thread (a reused pthread_t: the
// sink's thread_generation() changed) names that newest thread.
//
// Contract: one decoder per collector, used only by its drain thread. It
// caches names by CUPTI's name pointer / callback id, so the session lock is
// taken once per stored event.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "collectors/cupti/clock_map.h"
#include "collectors/cupti/cupti_api.h"
#include "collectors/cupti/launch_tracker.h"
#include "gpuutil/range_classify.h"
#include "gpuutil/event_sink.h"

namespace gpuutil::cupti {

struct DecodeStats {
  uint64_t records = 0;  // every record read from buffers
  uint64_t stored = 0;   // events handed to the session
  uint64_t activities = 0;
  uint64_t api_calls = 0;
  int64_t max_end_ns = 0;  // latest end time of any stored event
  uint64_t unfinished = 0;   // device records delivered before the device finished them (zero timestamps)
  uint64_t graph_records = 0;  // device records of CUDA graph nodes
  uint64_t clock_mismatched = 0;  // device records on another clock than their launch's (kept out)
};

class RecordDecoder {
 public:
  // A kernel may appear to start this much before its launch call began
  // before it is taken to be on another clock. Physically it cannot start
  // before; CUPTI's GPU->CPU interpolation moves it by microseconds, and a
  // record on another clock is off by far more than a second (CUPTI's
  // default clock against the session clock, rdtsc ticks against ns: 1e14
  // ns and beyond, pytorch/pytorch#192021).
  static constexpr int64_t kLaunchSkewNs = 1'000'000'000;
  // ... and this long after it (a queue behind a hang).
  static constexpr int64_t kLongestQueueNs = int64_t(86'400) * 1'000'000'000;

  // `tracker` may be null (decode benchmarks). `os_tid_threads`: CUPTI
  // reports OS thread ids instead of pthread_self().
  RecordDecoder(const CuptiApi& api, EventSink& session, int64_t pid, LaunchTracker* tracker = nullptr,
                bool os_tid_threads = false);

  // Decodes every record in buffer[0, valid_bytes).
  void decode_buffer(uint8_t* buffer, size_t valid_bytes);
  // Decodes one record (exposed for the decode benchmark).
  void decode(const CUpti_Activity* record);

  const DecodeStats& stats() const { return stats_; }
  // Whether API records tell the tracker about launches and captures (true
  // until the collector's API callback does it).
  void learn_calls_from_records(bool on) { learn_calls_ = on; }
  // Record timestamps through `map` (null: as they are). Not owned.
  void set_clock_map(const ClockMap* map) { clock_ = map; }
  // Buffers handed over by a forced flush are being decoded: a record with
  // no end time is work the device had not finished (its launch still
  // waits), not a record CUPTI could not time.
  void set_forced_delivery(bool on) { forced_ = on; }

 private:
  void store(const DeviceActivity& a);
  struct KernelName {
    NameId id;
    bool communication;
    std::string text;  // to verify a pointer-cache hit (names can be freed)
  };
  struct ApiName {
    NameId id;
    ApiClass cls;
    ApiRole role;
  };
  const KernelName& kernel_name(const char* name);
  const ApiName& api_name(CUpti_CallbackDomain domain, uint32_t cbid);
  uint32_t thread(uint32_t tid);
  bool times_ok(uint64_t start, uint64_t end, const char* what);
  // A device record arrived (to the tracker); false when its times keep it out.
  bool arrived(uint32_t correlation_id, uint32_t stream, uint32_t context, const char* what, uint64_t start,
               uint64_t end, DeviceActivity& a);
  bool device_times(const char* what, uint64_t start, uint64_t end, int64_t launch_start_ns, DeviceActivity& a);
  int64_t to_session(uint64_t t) const {
    return clock_ == nullptr ? static_cast<int64_t>(t) : clock_->to_session(t);
  }
  const ApiName& internal_launch_name();
  void learn_enqueue(const CUpti_ActivityAPI& r, const HostApiCall& c, bool multi);
  struct LastEnqueue {
    uint32_t correlation_id = 0;
    int64_t start_ns = 0;
    int64_t end_ns = 0;
  };
  std::unordered_map<uint32_t, LastEnqueue> last_enqueue_;  // thread -> its last enqueue learnt from an API record

  const CuptiApi& api_;
  EventSink& session_;
  int64_t pid_;
  LaunchTracker* tracker_;
  bool os_tid_threads_;
  bool learn_calls_ = true;
  const ClockMap* clock_ = nullptr;
  bool forced_ = false;
  std::optional<ApiName> internal_launch_;
  DecodeStats stats_;
  std::unordered_map<const char*, KernelName> kernel_names_;
  std::unordered_map<uint64_t, ApiName> api_names_;
  std::unordered_map<uint32_t, uint32_t> threads_;
  uint64_t threads_generation_ = 0;  // the sink's thread_generation() threads_ was filled under
};

}  // namespace gpuutil::cupti
