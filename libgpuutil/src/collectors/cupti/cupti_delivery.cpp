// Delivery and completeness (see cupti_collector.h): the callbacks CUPTI
// calls (buffers, API exit, stream resources), the drain thread, flushes,
// the launch tracker's bounds, stuck and missing device work.
#include <time.h>

#include <algorithm>
#include <cstdio>

#include "collectors/cupti/collector_callbacks.h"
#include "collectors/cupti/cupti_collector.h"
#include "gpuutil/clock.h"
#include "gpuutil/range_classify.h"

namespace gpuutil::cupti {

std::atomic<CuptiCollector*>& active_collector() {
  static std::atomic<CuptiCollector*> active{nullptr};
  return active;
}

std::atomic<int>& callbacks_in_flight() {
  static std::atomic<int> n{0};
  return n;
}

std::string seconds(int64_t ns) {
  char b[40];
  std::snprintf(b, sizeof(b), "%.3f s", double(ns) / 1e9);
  return b;
}

void CUPTIAPI CallbackAccess::requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  callbacks_in_flight().fetch_add(1);
  CuptiCollector* c = active_collector().load();
  if (c) {
    const int64_t now = session_now_ns();
    uint8_t* b = c->pool_->acquire(now);
    if (b) {
      *buffer = b;
      *size = c->pool_->buffer_bytes();
      // Rotate by record count, whatever a default flush does with a
      // partly filled buffer (cupti_activity.h: "filled with at most that
      // many records before it is returned").
      *max_records = c->max_records_.load(std::memory_order_relaxed);
      // The most records any buffer handed out may take (0: as many API
      // records, the smallest, as fit): takeover evidence needs more calls.
      const size_t holds = *max_records != 0 ? *max_records : *size / sizeof(CUpti_ActivityAPI);
      size_t most = c->most_records_per_buffer_.load(std::memory_order_relaxed);
      while (holds > most && !c->most_records_per_buffer_.compare_exchange_weak(most, holds)) {
      }
      c->last_buffer_event_ns_.store(now, std::memory_order_relaxed);
    } else {
      c->starved_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  callbacks_in_flight().fetch_sub(1);
}

void CUPTIAPI CallbackAccess::completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
  callbacks_in_flight().fetch_add(1);
  CuptiCollector* c = active_collector().load();
  if (c) {
    if (buffer != nullptr && !c->pool_->owns(buffer)) {
      // Another client's buffer (its registration was replaced by ours):
      // never read, freed or kept.
      c->foreign_.fetch_add(1, std::memory_order_relaxed);
    } else if (buffer == nullptr || valid > size || size != c->pool_->buffer_bytes() ||
               !c->pool_->complete(buffer, valid)) {
      c->invalid_.fetch_add(1, std::memory_order_relaxed);
    } else {
      c->completed_.fetch_add(1, std::memory_order_relaxed);
      c->last_buffer_event_ns_.store(session_now_ns(), std::memory_order_relaxed);
    }
    size_t dropped = 0;
    if (c->api_.ActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
      c->dropped_.fetch_add(dropped, std::memory_order_relaxed);
    }
    sem_post(&c->wake_);
  }
  callbacks_in_flight().fetch_sub(1);
}

// The callback API on gpuutil's subscription (api_callbacks.h): the call's
// start at enter, the call itself at exit; streams as they are created and
// destroyed.
void CUPTIAPI CallbackAccess::api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (data == nullptr) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    callbacks_in_flight().fetch_add(1);
    CuptiCollector* c = active_collector().load();
    LearntCall call;
    if (c != nullptr && c->calls_ && c->callbacks_on_.load(std::memory_order_relaxed) &&
        learn_stream(c->api_, cbid, *static_cast<const CUpti_ResourceData*>(data), session_now_ns(), call)) {
      if (!c->calls_->push(call)) c->calls_dropped_.fetch_add(1, std::memory_order_relaxed);
    }
    callbacks_in_flight().fetch_sub(1);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  callbacks_in_flight().fetch_add(1);
  CuptiCollector* c = active_collector().load();
  if (c != nullptr && c->calls_ && c->callbacks_on_.load(std::memory_order_relaxed)) {
    if (d->callbackSite == CUPTI_API_ENTER) {
      enter_call(c->roles_, domain, cbid, *d, session_now_ns());
    } else {
      LearntCall call;
      if (learn_call(c->roles_, domain, cbid, *d, session_now_ns(), call, &c->api_)) {
        if (c->calls_->push(call)) {
          c->calls_learnt_.fetch_add(1, std::memory_order_relaxed);
        } else {
          c->calls_dropped_.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  } else if (d->callbackSite == CUPTI_API_ENTER && d->correlationData != nullptr) {
    *d->correlationData = static_cast<uint64_t>(session_now_ns());
  }
  callbacks_in_flight().fetch_sub(1);
}

void CuptiCollector::probe_clock() {
  if (clock_reset_.exchange(false)) clock_.reset();
  uint64_t t = 0;
  const int64_t before = session_now_ns();
  if (api_.GetTimestamp == nullptr || api_.GetTimestamp(&t) != CUPTI_SUCCESS) return;
  clock_.observe(t, before, session_now_ns());
}

void CuptiCollector::drain_completed() {
  tracker_->begin_drain(session_now_ns());  // stream progress is stamped with it
  probe_clock();
  drain_calls();  // calls first: a device record may come before its call, not the other way round
  uint8_t* buffer;
  size_t valid;
  while (pool_->take_completed(buffer, valid)) {
    if (valid > 0) decoder_->decode_buffer(buffer, valid);
    pool_->release(buffer, options_.zeroed_buffers ? valid : 0);
  }
  // CUPTI holds buffers with unfinished records while the GPU runs behind:
  // keep a quarter of the pool free, up to max_buffer_count.
  if (pool_->free_count() * 4 < pool_->count()) pool_->grow(std::max<size_t>(pool_->count() / 2, 8));
  publish_counters();
}

void CuptiCollector::publish_counters() {
  auto publish = [this](std::atomic<uint64_t>& src, uint64_t& seen, Diag d) {
    const uint64_t now = src.load(std::memory_order_relaxed);
    if (now > seen) session_.count(d, now - seen);
    seen = now;
  };
  publish(dropped_, dropped_published_, Diag::cupti_records_dropped);
  publish(starved_, starved_published_, Diag::cupti_buffer_starved);
  publish(invalid_, invalid_published_, Diag::cupti_buffer_invalid);
  publish(foreign_, foreign_published_, Diag::cupti_foreign_buffers);
  if (const uint64_t dropped = calls_dropped_.load(std::memory_order_relaxed); dropped > calls_dropped_published_) {
    session_.count(Diag::cupti_records_dropped, dropped - calls_dropped_published_,
                   "API callbacks: the call ring was full; those launches are not waited for");
    calls_dropped_published_ = dropped;
  }
  if (!graph_noted_ && decoder_->stats().graph_records > 0 && release_.major == 13 && release_.minor == 0) {
    graph_noted_ = true;
    session_.add_standing_diagnostic(
        Diag::cupti_graph_correlation,
        session_index_ > 1 ? "CUPTI 13.0 and profile #" + std::to_string(session_index_) +
                                 " in this process: graph kernels carry wrong correlation ids, their launches are "
                                 "misattributed"
                           : "CUPTI 13.0: right in this first profile of the process, wrong in any later one");
  }
}

void CuptiCollector::do_flush(uint32_t flag) {
  const bool forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
  if (forced) drain_completed();  // what came before is ordinary delivery
  last_flush_result_ = api_.ActivityFlushAll(flag);  // completion callbacks enqueue; we drain below
  // Drops in the global queue (or while no buffer completes) surface here.
  size_t dropped = 0;
  if (api_.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    dropped_.fetch_add(dropped, std::memory_order_relaxed);
  }
  decoder_->set_forced_delivery(forced);
  drain_completed();
  decoder_->set_forced_delivery(false);
}

void CuptiCollector::report_missing(const LaunchTracker::Released& r, const std::string& why) {
  if (r.count == 0) return;
  records_missing_ += r.count;
  const std::string stream = r.stream == kUnknownStream ? "an unknown stream" : "stream " + std::to_string(r.stream);
  session_.count(Diag::cupti_record_missing, r.count,
                 std::to_string(r.count) + " launches no longer waited for, the first " + call_name(r.name) + " on " +
                     stream + " at t=" + seconds(r.earliest_start_ns) + " (correlation id " +
                     std::to_string(r.correlation_id) + "): " + why);
}

// Launches whose record will not come stop holding later steps: the device
// finished them (a sync, later work on their stream) and their record is
// missing after missing_after_ns or missing_after_steps steps, or at once
// when CUPTI reports dropped records; a launch with no stream to judge by, after unproven_after_ns
// while later work of its context finished. (The reasons are worded only
// for a release that happened: this runs after every drained flush.)
void CuptiCollector::release_missing(int64_t now) {
  if (const uint64_t dropped = dropped_.load(std::memory_order_relaxed); dropped > dropped_released_) {
    dropped_released_ = dropped;
    if (const auto r = tracker_->release_overdue(INT64_MAX); r.count > 0) {
      report_missing(r, "finished on the device, and CUPTI reported dropped records (cupti_records_dropped)");
    }
  }
  if (const auto r = tracker_->release_overdue(now - options_.missing_after_ns); r.count > 0) {
    report_missing(r, "finished on the device (a sync, or later work on its stream), yet no record came for " +
                          seconds(options_.missing_after_ns) + " (lost with its buffer, or dropped)");
  }
  // ... or while missing_after_steps steps ended after it began.
  if (const int64_t held = session_.held_step_end_ns(options_.missing_after_steps); held != INT64_MIN) {
    if (const auto r = tracker_->release_overdue(INT64_MAX, held); r.count > 0) {
      report_missing(r, "finished on the device (a sync, or later work on its stream), yet no record came while " +
                            std::to_string(options_.missing_after_steps) + " steps ended after it");
    }
  }
  if (const auto r = tracker_->release_unproven(now - options_.unproven_after_ns); r.count > 0) {
    report_missing(r, "no record for " + seconds(options_.unproven_after_ns) +
                          " while later work of its context finished (its stream is unknown: its call's parameters "
                          "name none)");
  }
}

// After a default flush that began at flush_start_ns: data is complete up
// to the earliest of that time and the oldest call still waiting for its
// records (and, when calls are not learnt at API exit, the oldest buffer
// CUPTI still holds with records in it). Nothing is given up for lack of
// time here; the bounds are steps and memory (hold_steps_within_bounds),
// and records proven missing (release_missing).
void CuptiCollector::update_complete_until(int64_t flush_start_ns) {
  int64_t until = flush_start_ns;
  if (!callbacks_on_.load(std::memory_order_relaxed)) {
    // API records teach the tracker: a held buffer with records may hide
    // launches (an empty prefetched one hides none: buffers go out zeroed).
    until = std::min(until, pool_->oldest_held_since_ns(/*written_only=*/options_.zeroed_buffers));
  }
  tracker_->on_flush_drained(flush_start_ns);
  release_missing(session_now_ns());
  until = std::min(until, tracker_->oldest_waiting_ns());
  int64_t evicted_latest = INT64_MIN;
  if (const uint64_t evicted = tracker_->take_evicted(&evicted_latest); evicted > 0) {
    timeouts_ += evicted;
    session_.count(Diag::cupti_completion_timeout, evicted,
                   std::to_string(evicted) + " launches no longer waited for: over " +
                       std::to_string(tracker_->waiting()) + " waiting (memory bound)");
    evicted_floor_ns_ = std::min(evicted_floor_ns_, evicted_latest);
    session_.mark_incomplete_until(evicted_latest, "launches no longer waited for (memory bound: the launch table is full)");
  }
  // Evicted launches may still deliver records: nothing after them is
  // complete until every launch since has its records.
  if (tracker_->waiting() == 0) evicted_floor_ns_ = INT64_MAX;
  until = std::min(until, evicted_floor_ns_);
  int64_t cur = complete_until_ns_.load();
  while (until > cur && !complete_until_ns_.compare_exchange_weak(cur, until)) {
  }
  // Adaptive flushing: at drain_poll_ms once data caught up with what was
  // asked for, backing off (doubling) while the GPU trails.
  const int64_t poll = int64_t(options_.drain_poll_ms) * 1'000'000;
  int64_t wanted;
  {
    std::lock_guard<std::mutex> lock(flush_mu_);
    wanted = wanted_until_ns_;
  }
  if (complete_until_ns_.load() >= wanted) {
    flush_interval_ns_ = poll;
  } else {
    flush_interval_ns_ = std::min<int64_t>(std::max(flush_interval_ns_, poll) * 2,
                                           int64_t(options_.max_flush_interval_ms) * 1'000'000);
  }
}

void CuptiCollector::drain_calls() {
  decoder_->learn_calls_from_records(!callbacks_on_.load(std::memory_order_relaxed));
  if (!calls_) return;
  // Calls made after the last buffer request or completion: each wrote an
  // API record into some buffer (takeover evidence, takeover_watch.h).
  const int64_t last_buffer_ns = last_buffer_event_ns_.load(std::memory_order_relaxed);
  if (last_buffer_ns != calls_counted_after_ns_) {
    calls_counted_after_ns_ = last_buffer_ns;
    calls_after_buffer_event_ = 0;
  }
  LearntCall c;
  while (calls_->pop(c)) {
    if (c.flags & kCallStreamCreate) {
      tracker_->on_stream_created(c.stream_handle, c.stream_id, c.context);
      ++streams_created_;
      continue;
    }
    if (c.flags & kCallStreamDestroy) {
      tracker_->on_stream_destroyed(c.stream_handle);
      continue;
    }
    if (c.start_ns > last_buffer_ns) ++calls_after_buffer_event_;  // (resource callbacks write no API record)
    auto& by_cbid = learnt_by_cbid_[c.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? 0 : 1];
    if (c.cbid >= by_cbid.size()) by_cbid.resize(size_t(c.cbid) + 1, 0);
    ++by_cbid[c.cbid];
    const StreamRef ref{c.stream_kind, c.stream_handle, c.context_handle};
    if (c.legacy_stream_id != kUnknownStream || c.per_thread_stream_id != kUnknownStream) {
      tracker_->on_default_streams(c.context_handle, c.thread, c.context, c.legacy_stream_id, c.per_thread_stream_id);
    }
    if (c.flags & kCallCaptureBegin) tracker_->on_capture_begin(c.thread, c.start_ns, ref);
    if (c.flags & kCallCaptureEnd) tracker_->on_capture_end(c.thread, c.end_ns, ref);
    if (c.flags & kCallEventRecord) tracker_->on_event_record(c.event_handle, ref, c.thread, c.end_ns);
    if (c.flags & kCallStreamWait) tracker_->on_stream_wait(c.event_handle, ref, c.thread, c.end_ns);
    if (c.flags & kCallSync) tracker_->on_device_sync(c.end_ns, c.context);
    if (c.flags & kCallStreamSync) tracker_->on_stream_sync(c.end_ns, ref, c.thread);
    if (c.flags & kCallHostRecord) tracker_->on_host_call(c.correlation_id, c.start_ns, c.thread);
    if (c.flags & kCallEnqueue) {
      // The kernel's name when CUPTI gave one (symbolName), else what the
      // call is (a copy, a graph, a launch that named no kernel).
      uint32_t name = 0;
      const uint32_t call_key = (uint32_t(c.domain) << 17) | ((c.flags & kCallGraph) ? 1u << 16 : 0u) | c.cbid;
      if (c.name[0] == '\0') {
        if (auto hit = unnamed_call_ids_.find(call_key); hit != unnamed_call_ids_.end()) name = hit->second;
      }
      if (name == 0) {
        const std::string label = c.name[0] != '\0' ? std::string(c.name) : unnamed_call(c);
        auto [it, added] = call_name_ids_.emplace(label, uint32_t(call_names_.size() + 1));
        if (added) call_names_.push_back(label);
        name = it->second;
        if (c.name[0] == '\0') unnamed_call_ids_.emplace(call_key, name);
      }
      if (c.nested_in != 0) ++nested_calls_;
      tracker_->on_enqueue(c.correlation_id, c.start_ns, c.thread, (c.flags & kCallGraph) != 0, c.context,
                           kUnknownStream, name, ref, (c.flags & kCallApiRecord) != 0, c.nested_in);
    }
  }
}

std::string CuptiCollector::call_name(uint32_t id) const {
  // 0: learnt from its API record (no callback API), which names no kernel.
  return id >= 1 && id <= call_names_.size() ? call_names_[id - 1]
                                             : "a launch whose kernel name CUPTI did not give (learnt from its API record)";
}

std::string CuptiCollector::unnamed_call(const LearntCall& c) const {
  const char* raw = nullptr;
  std::string api = "an API call";
  if (api_.GetCallbackName != nullptr &&
      api_.GetCallbackName(static_cast<CUpti_CallbackDomain>(c.domain), c.cbid, &raw) == CUPTI_SUCCESS && raw) {
    api = std::string(strip_api_suffixes(raw));
  }
  if (c.flags & kCallGraph) {
    return api.find("Graph") != std::string::npos ? "a CUDA graph launched by " + api : "the work of " + api;
  }
  if (api.find("Memcpy") != std::string::npos) return "a copy (" + api + ")";
  if (api.find("Memset") != std::string::npos) return "a memset (" + api + ")";
  return "a kernel whose name CUPTI did not give, launched by " + api;
}

// The oldest launch whose device work has not delivered (and is not known
// finished), with no device record arriving on its stream for
// stuck_after_ns: named once (gpu_stuck, a diagnostic and a finding over
// the steps it spans) until it completes.
void CuptiCollector::watch_stuck(int64_t now) {
  const uint64_t records = tracker_->device_records();
  if (records != progress_records_) {
    progress_records_ = records;
    progress_ns_ = now;
  }
  const LaunchTracker::Waiting w = tracker_->oldest_waiting(/*device_only=*/true);
  if (stuck_corr_ != 0 && w.correlation_id != stuck_corr_) {
    session_.end_interval(Diag::gpu_stuck, now);
    stuck_corr_ = 0;
  }
  if (w.start_ns == INT64_MAX || stuck_corr_ != 0) return;
  if (now - w.start_ns < options_.stuck_after_ns) return;  // not waiting long enough to be stuck
  // Progress on its own stream when that stream ever delivered a record
  // (a hung stream beside busy ones is still named), else on any stream.
  // Its stream id comes from the stream registry (resource callbacks and
  // earlier records): no handle is passed to CUPTI here.
  int64_t progress = progress_ns_;
  if (w.stream != kUnknownStream) {
    if (const int64_t p = tracker_->stream_progress_ns(w.context, w.stream); p != INT64_MIN) progress = p;
  }
  const int64_t quiet_since = std::max(progress, w.start_ns);
  if (now - quiet_since < options_.stuck_after_ns) return;
  stuck_corr_ = w.correlation_id;
  ++stuck_count_;
  const std::string stream = w.stream == kUnknownStream ? "an unknown stream" : "stream " + std::to_string(w.stream);
  const std::string why = "GPU stuck in " + call_name(w.name) + " on " + stream + " since t=" + seconds(w.start_ns) +
                          " (session clock, launch correlation id " + std::to_string(w.correlation_id) +
                          "): no device record for " + seconds(now - quiet_since);
  session_.count(Diag::gpu_stuck, 1, why);
  session_.begin_interval(Diag::gpu_stuck, w.start_ns, why);
}

// The bounds on waiting: steps and memory. Past them, launches whose
// records are proven missing (overdue) stop holding first; only then are
// the oldest held step boundaries reported incomplete (never as idle). The
// tracker keeps waiting, so records that come while a later step is held
// still count.
void CuptiCollector::hold_steps_within_bounds(int64_t now) {
  const bool memory = tracker_->waiting() * 4 > size_t(3) << 20 ||  // the table's bound is 1M
                      pool_->outstanding() * 4 >= pool_->max_count() * 3;
  const size_t keep = memory ? std::min<size_t>(options_.max_held_steps, 1) : options_.max_held_steps;
  const int64_t give_up = session_.held_step_end_ns(keep);
  if (give_up != INT64_MIN && give_up > complete_until_ns_.load() && give_up > given_up_until_ns_) {
    if (tracker_->overdue() > 0) {
      report_missing(tracker_->release_overdue(INT64_MAX),
                     "finished on the device, no record came, and " + std::to_string(keep) +
                         " steps waited behind it (cupti_max_held_steps)");
      return;  // the next flush moves the watermark past them
    }
    given_up_until_ns_ = give_up;
    ++steps_given_up_;
    const LaunchTracker::Waiting w = tracker_->oldest_waiting(/*device_only=*/true);
    std::string why = memory ? "CUPTI holds most of the activity buffer pool, or the launch table is nearly full "
                               "(memory bound)"
                             : "more than " + std::to_string(options_.max_held_steps) +
                                   " steps waited for device records (cupti_max_held_steps)";
    if (w.start_ns != INT64_MAX) why += "; oldest launch waiting: " + call_name(w.name) + " since t=" + seconds(w.start_ns);
    session_.mark_incomplete_until(give_up, why);
  }
  // Buffers rotate by record count: about 100 ms of records each at the
  // rate seen (the calls learnt count at once, records only once their
  // buffer came back), so a buffer CUPTI keeps open while the GPU never
  // idles still comes back soon; at high rates the size bound wins (0).
  if (options_.buffer_max_records == 0 && now - sized_at_ns_ >= 100'000'000) {
    const uint64_t calls = calls_learnt_.load(std::memory_order_relaxed);
    const uint64_t records = decoder_->stats().records;
    const uint64_t n = std::max<uint64_t>(records - records_at_sizing_, 2 * (calls - calls_at_sizing_));
    const uint64_t per_100ms = n * 100'000'000 / uint64_t(now - sized_at_ns_);
    const size_t cap = pool_->buffer_bytes() / 64;  // more than any buffer holds
    max_records_.store(per_100ms >= cap ? 0 : std::max<size_t>(size_t(per_100ms), 32), std::memory_order_relaxed);
    sized_at_ns_ = now;
    calls_at_sizing_ = calls;
    records_at_sizing_ = records;
  }
}

void CuptiCollector::drain_loop() {
  for (;;) {
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += long(options_.drain_poll_ms) * 1'000'000L;
    deadline.tv_sec += deadline.tv_nsec / 1'000'000'000L;
    deadline.tv_nsec %= 1'000'000'000L;
    sem_timedwait(&wake_, &deadline);
    drain_completed();
    int64_t wanted;
    uint64_t forced;
    {
      std::lock_guard<std::mutex> lock(flush_mu_);
      wanted = wanted_until_ns_;
      forced = forced_requested_;
    }
    if (forced != 0) {
      const int64_t flush_start = session_now_ns();
      do_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      // Every buffer came back: finished work's records are in, or missing.
      report_missing(tracker_->on_forced_flush_drained(flush_start), "no record came back with a forced flush");
      // CUPTI goes to another client (suspend): what still runs reaches it,
      // not gpuutil, so nothing is waited for any more.
      tracker_->clear();
      std::lock_guard<std::mutex> lock(flush_mu_);
      forced_done_ = forced;
      forced_requested_ = 0;
    } else if (wanted > complete_until_ns_.load() && session_now_ns() - last_flush_ns_ >= flush_interval_ns_) {
      // Flush until everything up to `wanted` is in, at most once per flush
      // interval (drain_poll_ms while flushes bring data, backing off to
      // max_flush_interval_ms while they do not): a flush closes the buffers
      // being written and takes CUPTI's locks the launching threads use.
      const int64_t flush_start = session_now_ns();
      last_flush_ns_ = flush_start;
      ++flushes_;
      do_flush(0);
      update_complete_until(flush_start);
      watch_takeover();
    } else if (taken_over_.load(std::memory_order_acquire)) {
      // Taken over: gpuutil waits for nothing, and only watches whether its
      // buffers flow again (a false alarm), with a default flush once a
      // second (it hands the other client its complete buffers early, and
      // changes none of its records).
      bool silent;
      {
        std::lock_guard<std::mutex> lock(watch_mu_);
        silent = watch_->cause() == TakeoverCause::kBuffersSilent ||
                 watch_->cause() == TakeoverCause::kRecordsElsewhere;
      }
      const int64_t now = session_now_ns();
      if (silent && now - last_flush_ns_ >= 1'000'000'000) {
        last_flush_ns_ = now;
        do_flush(0);
        watch_takeover();
      }
    }
    if (!taken_over_.load(std::memory_order_acquire)) {
      const int64_t now = session_now_ns();
      watch_stuck(now);
      hold_steps_within_bounds(now);
    }
    flush_cv_.notify_all();
    if (quit_.load(std::memory_order_acquire)) {
      drain_completed();
      return;
    }
  }
}

}  // namespace gpuutil::cupti
