// The live step path (gpuutil/step_path.h): range-name slots, the automatic
// step sequence and when the Python side is due at a boundary.
#include "gpuutil/step_path.h"

#include <algorithm>

#include "gpuutil/range_classify.h"

namespace gpuutil {

StepPath::StepPath(Session& session, int64_t report_interval_ns)
    : session_(session), report_interval_ns_(std::max<int64_t>(0, report_interval_ns)) {
  slot("gpuutil: too many range names", false);  // kOverflowSlot
}

uint32_t StepPath::slot(std::string_view name, bool is_op) {
  std::lock_guard<std::mutex> lock(slots_mu_);
  const uint32_t n = slot_count_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; ++i) {
    if (slots_[i].is_op == is_op && slot_names_[i] == name) return i;
  }
  if (n == kMaxSlots) return kOverflowSlot;
  slot_names_[n] = std::string(name);
  slots_[n] = {session_.intern(name), classify_range(name, is_op), is_op};
  slot_count_.store(n + 1, std::memory_order_release);
  return n;
}

std::string_view StepPath::slot_name(uint32_t slot) const {
  return slot < slot_count_.load(std::memory_order_acquire) ? std::string_view(slot_names_[slot])
                                                            : std::string_view(slot_names_[kOverflowSlot]);
}

void StepPath::add(uint32_t slot, int64_t start_ns, int64_t end_ns, uint32_t thread) {
  if (slot >= slot_count_.load(std::memory_order_acquire)) slot = kOverflowSlot;
  const Slot& s = slots_[slot];
  HostRange r;
  r.name = s.name;
  r.start_ns = start_ns;
  r.end_ns = std::max(end_ns, start_ns);
  r.thread = thread;
  r.category = s.category;
  session_.add_range(r);
}

BoundaryDue StepPath::close_auto_step(int64_t now_ns) {
  session_.close_step(next_step_, auto_start_ns_, now_ns);
  ++next_step_;
  auto_start_ns_ = now_ns;
  return after_boundary(now_ns);
}

BoundaryDue StepPath::end_user_step(int64_t now_ns) {
  session_.end_step(now_ns);
  return after_boundary(now_ns);
}

BoundaryDue StepPath::after_boundary(int64_t now_ns) {
  ++boundaries_;
  prev_boundary_ns_ = last_boundary_ns_;
  last_boundary_ns_ = now_ns;
  unreported_ = true;
  if (now_ns - last_report_ns_ >= report_interval_ns_) {
    last_report_ns_ = now_ns;
    return BoundaryDue::kReport;
  }
  return boundaries_ >= wake_at_ ? BoundaryDue::kPerStep : BoundaryDue::kNothing;
}

void StepPath::wake_in(int64_t boundaries) { wake_at_ = boundaries_ + std::max<int64_t>(1, boundaries); }

void StepPath::mark_reported(int64_t now_ns) { last_report_ns_ = now_ns; }

void StepPath::restart(int64_t t_ns) {
  auto_start_ns_ = t_ns;
  last_report_ns_ = 0;
}

}  // namespace gpuutil
