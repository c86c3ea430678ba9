// The live step path: what the training thread pays at each step boundary
// and for each coarse host range (forward, backward, optimizer step, a host
// sync), kept in C++ so that Python hooks only hand over a timestamp.
//
// Three things, all vendor-free:
// - a table of range names, each interned and classified once (a "slot"),
//   so adding a range costs no string work;
// - the automatic step sequence (steps end at optimizer.step(); each runs
//   from the previous boundary): closing a step is one call;
// - when the Python side is due at a boundary: a report batch every
//   report_interval_ns, and the per-step work collectors asked for (wake_in),
//   so boundaries in between never enter Python.
//
// Contract:
// - slot() and add() are thread-safe; add() takes only the session's lock
//   (as Session::add_range does). Slots are never reallocated, so add() reads
//   the table without a lock; at most kMaxSlots names, after which slot()
//   returns the overflow slot (named "gpuutil: too many range names") and
//   counts nothing else.
// - The boundary methods (close_auto_step, end_user_step, wake_in,
//   mark_reported) are called by the one thread that marks steps (the
//   application's, with the GIL held in Python); they are not thread-safe
//   against each other.
// - Times are session-clock nanoseconds (session_now_ns()).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "gpuutil/events.h"
#include "gpuutil/session.h"

namespace gpuutil {

// What the Python side has to do after a boundary.
enum class BoundaryDue : uint8_t {
  kNothing = 0,    // nothing: the boundary was all C++
  kPerStep = 1,    // the collectors' per-step work (wake_in came due)
  kReport = 2,     // that and a report batch (report_interval_ns has passed)
};

class StepPath {
 public:
  static constexpr uint32_t kMaxSlots = 4096;
  static constexpr uint32_t kOverflowSlot = 0;
  static constexpr int64_t kNoBoundaryNs = -(int64_t(1) << 62);  // before the first boundary

  // report_interval_ns: a report batch is due at the first boundary at
  // least this long after the previous one (0: at every boundary).
  StepPath(Session& session, int64_t report_interval_ns);
  StepPath(const StepPath&) = delete;
  StepPath& operator=(const StepPath&) = delete;

  // --- ranges (any thread) ---
  // The slot of `name` (interned and classified as Session's add_range
  // would: classify_range(name, is_op)); the same slot for the same
  // (name, is_op) again.
  uint32_t slot(std::string_view name, bool is_op);
  // The range [start_ns, end_ns) named by `slot` on session thread `thread`.
  // A slot that was never returned by slot() is counted as the overflow slot.
  void add(uint32_t slot, int64_t start_ns, int64_t end_ns, uint32_t thread);
  std::string_view slot_name(uint32_t slot) const;

  // --- step boundaries (the step-marking thread) ---
  // Closes the automatic step [auto_start_ns, now_ns) as step next_step(),
  // then the next one starts at now_ns.
  BoundaryDue close_auto_step(int64_t now_ns);
  // Ends the user-marked open step at now_ns (Session::end_step).
  BoundaryDue end_user_step(int64_t now_ns);
  // The Python side's per-step work is due again `boundaries` boundaries
  // from now (1: at the next one). Values below 1 count as 1.
  void wake_in(int64_t boundaries);
  // A report batch was made at now_ns (also when Python made one outside a
  // boundary, e.g. flush()): the next is due report_interval_ns later.
  void mark_reported(int64_t now_ns);
  // Restarts the automatic sequence at t_ns (the profile's start).
  void restart(int64_t t_ns);

  int64_t next_step() const { return next_step_; }
  void set_next_step(int64_t step) { next_step_ = step; }
  int64_t boundaries() const { return boundaries_; }  // since construction
  int64_t auto_start_ns() const { return auto_start_ns_; }
  int64_t last_boundary_ns() const { return last_boundary_ns_; }
  int64_t prev_boundary_ns() const { return prev_boundary_ns_; }  // the one before the last
  // Steps were closed since the last report batch.
  bool unreported() const { return unreported_; }
  void set_unreported(bool v) { unreported_ = v; }

 private:
  BoundaryDue after_boundary(int64_t now_ns);

  struct Slot {
    NameId name = kNoName;
    RangeCategory category = RangeCategory::kAnnotation;
    bool is_op = false;
  };

  Session& session_;
  const int64_t report_interval_ns_;
  mutable std::mutex slots_mu_;  // slot() only
  std::array<Slot, kMaxSlots> slots_{};
  std::array<std::string, kMaxSlots> slot_names_{};
  std::atomic<uint32_t> slot_count_{0};

  int64_t next_step_ = 0;
  int64_t auto_start_ns_ = 0;
  int64_t boundaries_ = 0;
  int64_t wake_at_ = 1;  // boundaries_ value at which Python is due
  int64_t last_report_ns_ = 0;
  int64_t last_boundary_ns_ = kNoBoundaryNs;
  int64_t prev_boundary_ns_ = kNoBoundaryNs;
  bool unreported_ = false;
};

}  // namespace gpuutil
