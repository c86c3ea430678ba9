// Turns RawEvents read from a Kineto trace into EventStore entries.
//
// Owns the per-import state the mapping needs: the (pid, tid) -> thread
// index map, thread/process names from metadata events, step-range
// candidates, and the ROCm flag. consume() is called once per event in file
// order; finish() completes the store (thread names, the ROCm device-id
// fix, sorting, step windows). Malformed events are counted in the store's
// diagnostics and skipped; nothing here throws except std::bad_alloc.
// Internal to the replay collector.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "import/kineto/kineto_category.h"
#include "import/kineto/kineto_event.h"
#include "gpuutil/events.h"
#include "gpuutil/range_classify.h"

namespace gpuutil::replay {

// Longest accepted event duration: one day. Longer ones are clock faults.
inline constexpr int64_t kMaxEventDurationNs = int64_t{86'400} * 1'000'000'000;
// Event times kept: [-2^61, 2^62] ns (before 1897 to after 2116 on the Unix
// epoch, or any relative clock), so the difference of any two, and any sum
// of a difference and a duration, fits in int64 throughout the analysis.
// An event outside is event_timestamp_out_of_range.
inline constexpr int64_t kMinEventTimeNs = -(int64_t{1} << 61);
inline constexpr int64_t kMaxEventTimeNs = int64_t{1} << 62;

class KinetoMapper {
 public:
  explicit KinetoMapper(EventStore* store) : store_(store) {}

  // `index` is the event's position in traceEvents (for diagnostics).
  void consume(const RawEvent& event, uint64_t index);
  // True when consume() would neither store nor count anything for `event`
  // (flow arrows, instants, known-unused categories), whatever came before:
  // such events may be dropped before they reach the mapper.
  static bool is_inert(const RawEvent& event);
  // Marks the trace as ROCm (e.g. from hip_* top-level keys).
  void mark_rocm() { rocm_ = true; }
  // Completes the store; call once, after the last consume().
  void finish();

 private:
  struct PairHash {
    size_t operator()(const std::pair<int64_t, int64_t>& p) const noexcept {
      return std::hash<int64_t>()(p.first) * 0x9E3779B97F4A7C15ull ^ std::hash<int64_t>()(p.second);
    }
  };
  using ThreadKey = std::pair<int64_t, int64_t>;

  void complete_event(const RawEvent& e, uint64_t index);
  void metadata_event(const RawEvent& e, uint64_t index);
  void device_event(const RawEvent& e, EventClass cls, int64_t start_ns, int64_t end_ns, uint64_t index);
  void api_event(const RawEvent& e, uint32_t thread, int64_t start_ns, int64_t end_ns);
  void range_event(const RawEvent& e, EventClass cls, uint32_t thread, int64_t start_ns, int64_t end_ns);

  // Counts `d` once; formats the example only for the first occurrence.
  void note(Diag d, uint64_t index, const char* what, std::string_view detail = {});
  // pid/tid -> number; labels that are not numbers get stable synthetic ids.
  bool host_id(const JsonId& id, int64_t* out);
  bool thread_index(const RawEvent& e, uint32_t* out);
  void finish_thread_names();
  void finish_devices();

  // Name classification, once per distinct name (kernel names are long and
  // repeat thousands of times): indexed by NameId.
  struct NameFacts {
    uint8_t known = 0;  // bit per fact below
    bool communication = false;
    ApiClass api{HostApiKind::kOther, SyncKind::kNone};
    RangeCategory op_category = RangeCategory::kOp;
    RangeCategory range_category = RangeCategory::kAnnotation;
  };
  NameFacts& facts(NameId id);
  bool is_communication(NameId id, std::string_view name);
  ApiClass api_class(NameId id, std::string_view name);
  RangeCategory range_category(NameId id, std::string_view name, bool is_op);

  EventStore* store_;
  std::vector<NameFacts> name_facts_;
  std::unordered_map<ThreadKey, uint32_t, PairHash> thread_of_;
  ThreadKey last_key_{0, 0};
  uint32_t last_thread_ = UINT32_MAX;
  std::unordered_map<std::string, int64_t> label_ids_;
  std::unordered_map<ThreadKey, std::string, PairHash> thread_names_;
  std::unordered_map<int64_t, std::string> process_names_;
  std::vector<StepWindow> step_candidates_;
  bool rocm_ = false;
};

}  // namespace gpuutil::replay
