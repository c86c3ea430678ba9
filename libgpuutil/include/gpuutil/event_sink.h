// Where a live collector puts what it collects: the one interface between
// the collectors (libgpuutil/src/collectors/) and the live session that
// implements it (gpuutil/session.h).
//
// A collector needs somewhere to put events, a thread key -> index service,
// counted diagnostics and a way to say how far its data is complete; it never
// needs the session itself (steps, reports, sinks, the worker). So the
// collectors depend on this header only and are built as their own library
// (gpuutil_collectors), which does not link the runtime: an include of
// gpuutil/session.h there is a compile error, a call into the runtime a link
// error (CMakeLists.txt, docs/architecture.md).
//
// Contract (what Session guarantees; another implementation, e.g. a test's
// recorder, must keep the same):
// - Every method is thread-safe and may be called from a collector's drain
//   thread or any other thread, never from a vendor callback (CUPTI buffer
//   or API callbacks, NVTX handlers, RecordFunction): those write only into
//   their collector's own preallocated buffers.
// - Times are int64 ns in the session clock (gpuutil/clock.h).
// - The sink copies what it is given; the caller keeps ownership of its
//   arguments. The interface is not an owner: nobody deletes through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gpuutil/diagnostics.h"
#include "gpuutil/events.h"

namespace gpuutil {

class EventSink {
 public:
  // --- names and threads ---
  virtual NameId intern(std::string_view name) = 0;
  // The thread key -> index service. `key` is gpuutil::this_thread_key() of
  // the thread (what CUPTI records); `os_tid` (gettid) is the key's
  // generation: glibc hands the pthread_t of a thread that exited to the
  // next one it makes, so a key met again with another non-zero os_tid is a
  // new thread with its own entry and name. Without an os_tid (CUPTI's API
  // records) a key names its newest thread. `name` and `os_tid` name the
  // thread in reports; the first non-empty ones given are kept. A thread
  // first met by OS tid (thread_index_for_os_tid) is adopted when its key
  // arrives with that os_tid.
  virtual uint32_t thread_index(int64_t pid, int64_t key, std::string_view name = {}, int64_t os_tid = 0) = 0;
  // The thread with OS thread id `os_tid` (CUPTI switched to OS thread ids
  // by another tool).
  virtual uint32_t thread_index_for_os_tid(int64_t pid, int64_t os_tid) = 0;
  // Changes whenever a known key starts naming a new thread (a reused
  // pthread_t met with a new os_tid): a collector that caches key -> index
  // drops its cache when it changes. A relaxed atomic read.
  virtual uint64_t thread_generation() const = 0;

  // --- events ---
  // A device activity or API call whose start lies before the end of the
  // last reported step arrived late: it is counted (cupti_records_late) and
  // kept if an unreported step can still use it.
  virtual void add_activity(const DeviceActivity& a) = 0;
  virtual void add_api_call(const HostApiCall& c) = 0;
  virtual void add_range(const HostRange& r) = 0;
  // A host range whose name is not interned yet (a collector's staging
  // buffer: the drain thread stages ranges without the sink's lock).
  struct StagedRange {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    uint32_t thread = 0;
    RangeCategory category = RangeCategory::kAnnotation;
    char name[48] = {};  // NUL-terminated
  };
  // Adds every staged range (interning its name) under one lock and clears
  // `staged`. With wait false it returns false at once, taking nothing, when
  // another thread holds the sink (e.g. a report being analysed), so the
  // caller can go on draining its own producers meanwhile.
  virtual bool add_staged_ranges(std::vector<StagedRange>& staged, bool wait) = 0;
  virtual void add_counter(const CounterSample& c) = 0;

  // --- diagnostics ---
  // A data problem, counted in the report of the step it happened in.
  virtual void count(Diag d, uint64_t n = 1, std::string_view example = {}) = 0;
  // A condition that holds for the whole session (e.g. GPU collection is
  // off, and why): counted once in every report from the next one on. Adding
  // the same (diagnostic, example) again changes nothing.
  virtual void add_standing_diagnostic(Diag d, std::string_view example = {}) = 0;
  // A condition over an interval of session time (e.g. GPU collection
  // suspended while torch.profiler runs): every step report overlapping
  // [start_ns, end_ns) carries it once. end_interval() closes the open
  // interval of that diagnostic; until then it runs to infinity.
  virtual void begin_interval(Diag d, int64_t start_ns, std::string_view example) = 0;
  virtual void end_interval(Diag d, int64_t end_ns) = 0;

  // --- completeness ---
  // Every event ending before t_ns has been added: steps ending at or
  // before t_ns may be reported.
  virtual void mark_complete_until(int64_t t_ns) = 0;
  // The collector gave up waiting for data before t_ns (a bound was hit, or
  // the device never finished work launched before it): steps ending at or
  // before t_ns that are not complete are reported with complete = false and
  // cupti_step_incomplete counted with `cause`. t_ns = INT64_MAX: a stop with
  // unfinished work (see Session::mark_incomplete_until).
  virtual void mark_incomplete_until(int64_t t_ns, std::string_view cause) = 0;
  // The end of the newest closed, unreported step older than the newest
  // `keep` of them (INT64_MIN when at most `keep` wait): what a collector
  // bounding the steps held for its data gives up.
  virtual int64_t held_step_end_ns(size_t keep) const = 0;

 protected:
  EventSink() = default;
  EventSink(const EventSink&) = default;
  EventSink& operator=(const EventSink&) = default;
  ~EventSink() = default;
};

}  // namespace gpuutil
