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
  int64_t start_ns = auto_start_ns_;
  if (pieces_n_ > 0) {
    const Carve c = carve(now_ns, false);
    if (c.end_ns > start_ns) {
      // Before the first step no gap between two steps holds this time.
      if (steps_closed_ == 0) session_.add_outside_ns(c.end_ns - start_ns);
      name(c);
      start_ns = c.end_ns;
    }
  }
  session_.close_step(next_step_, start_ns, now_ns);
  ++next_step_;
  ++steps_closed_;
  auto_start_ns_ = now_ns;
  pieces_n_ = 0;
  train_at_ = -1;
  train_by_backward_ = false;
  return after_boundary(now_ns);
}

void StepPath::finish_auto(int64_t t_ns) {
  if (steps_closed_ == 0 || t_ns <= auto_start_ns_) return;
  const Carve c = carve(t_ns, true);
  session_.add_outside_ns(t_ns - auto_start_ns_);
  name(c);
  auto_start_ns_ = t_ns;
  pieces_n_ = 0;
  train_at_ = -1;
  train_by_backward_ = false;
}

void StepPath::note_forward(ForwardKind kind, int64_t start_ns, int64_t end_ns) {
  if (kind == ForwardKind::kTraining) {
    if (train_at_ < 0) {
      train_at_ = pieces_n_;
      train_by_backward_ = false;
    }
    return;
  }
  if (train_at_ >= 0) return;  // inside the step: its own work
  Piece p;
  p.start_ns = start_ns;
  p.end_ns = std::max(end_ns, start_ns);
  p.kind = OutsideKind::kEvaluation;
  p.weak = kind == ForwardKind::kEvalMode;
  p.forwards = 1;
  add_piece(p);
}

void StepPath::note_backward(int64_t /*t_ns*/) {
  if (train_at_ < 0) {
    train_at_ = pieces_n_;
    train_by_backward_ = true;
  }
}

void StepPath::note_outside(OutsideKind kind, int64_t start_ns, int64_t end_ns) {
  if (train_at_ >= 0) return;
  Piece p;
  p.start_ns = start_ns;
  p.end_ns = std::max(end_ns, start_ns);
  p.kind = kind;
  add_piece(p);
}

void StepPath::mark_outside(OutsideKind kind, int64_t t_ns) {
  if (train_at_ >= 0) return;
  Piece p;
  p.start_ns = t_ns;
  p.end_ns = t_ns;
  p.kind = kind;
  p.mark = true;
  add_piece(p);
}

// Consecutive pieces of one kind merge (an evaluation loop's forwards are
// one piece); a full table merges into its last piece.
void StepPath::add_piece(const Piece& p) {
  if (pieces_n_ > 0) {
    Piece& last = pieces_[static_cast<size_t>(pieces_n_ - 1)];
    const bool same = last.kind == p.kind && last.weak == p.weak && last.mark == p.mark;
    if (same || pieces_n_ == kMaxPieces) {
      last.start_ns = std::min(last.start_ns, p.start_ns);  // a range noted at its end covers earlier pieces
      last.end_ns = std::max(last.end_ns, p.end_ns);
      last.forwards += p.forwards;
      return;
    }
  }
  pieces_[static_cast<size_t>(pieces_n_++)] = p;
}

StepPath::Carve StepPath::carve(int64_t limit_ns, bool all) const {
  Carve c;
  c.end_ns = auto_start_ns_;
  int n = pieces_n_;
  if (!all) {
    if (train_at_ >= 0) {
      n = train_at_;
      // An eval-mode forward right before a backward was that backward's
      // forward (training with frozen batch norm or dropout).
      if (train_by_backward_) {
        while (n > 0 && pieces_[static_cast<size_t>(n - 1)].weak) --n;
      }
    }
    int forwards = 0;
    bool other_work = false;
    for (int i = 0; i < n; ++i) {
      forwards += pieces_[static_cast<size_t>(i)].forwards;
      other_work = other_work || pieces_[static_cast<size_t>(i)].forwards == 0;
    }
    if (forwards < 2 && !other_work) return c;  // one forward: a teacher's, a frozen part's
  }
  constexpr size_t kOther = static_cast<size_t>(OutsideKind::kOther);
  std::array<int64_t, kOutsideKindCount> tentative{};
  int64_t seg_ns = auto_start_ns_;   // the last mark, or the boundary
  int64_t prev_ns = auto_start_ns_;  // the end of the last piece
  int prev_kind = -1;
  const bool join_leading = steps_closed_ > 0;  // before the first step it is start-up: other
  for (int i = 0; i < n; ++i) {
    const Piece& p = pieces_[static_cast<size_t>(i)];
    const auto k = static_cast<size_t>(p.kind);
    if (p.mark) {
      const int64_t e = std::min(std::max(p.end_ns, seg_ns), limit_ns);
      c.named[k] += e - seg_ns;
      tentative = {};
      seg_ns = e;
      prev_ns = std::max(prev_ns, e);
      prev_kind = static_cast<int>(k);
      continue;
    }
    const int64_t s = std::max(p.start_ns, prev_ns);
    const int64_t e = std::min(p.end_ns, limit_ns);
    if (e <= s) continue;  // inside work already counted
    if (prev_kind == static_cast<int>(k) || (prev_kind < 0 && join_leading)) {
      tentative[k] += e - prev_ns;
    } else {
      tentative[kOther] += s - prev_ns;
      tentative[k] += e - s;
    }
    prev_ns = e;
    prev_kind = static_cast<int>(k);
  }
  for (size_t k = 0; k < kOutsideKindCount; ++k) c.named[k] += tentative[k];
  c.end_ns = prev_ns;
  if (all && limit_ns > prev_ns) {
    c.named[kOther] += limit_ns - prev_ns;
    c.end_ns = limit_ns;
  }
  return c;
}

void StepPath::name(const Carve& c) {
  for (OutsideKind k : {OutsideKind::kEvaluation, OutsideKind::kCheckpoint}) {
    const int64_t ns = c.named[static_cast<size_t>(k)];
    if (ns > 0) session_.name_outside(k, ns);  // the rest is "other" (the session's remainder)
  }
}

OptimizerStep StepPath::optimizer_stepped(uintptr_t optimizer) {
  bool known = false;
  for (int i = 0; i < std::min(optimizers_, kMaxOptimizers); ++i) {
    known = known || optimizer_ids_[static_cast<size_t>(i)] == optimizer;
  }
  if (!known) {
    if (optimizers_ < kMaxOptimizers) optimizer_ids_[static_cast<size_t>(optimizers_)] = optimizer;
    optimizers_ = std::min(optimizers_ + 1, kMaxOptimizers);
    // The newest optimizer ends the iteration: a GAN's D step then its G
    // step, a WGAN's critic steps then its generator's.
    if (optimizers_ >= 2 && !cycle_off_) closing_ = optimizer;
  }
  if (closing_ == 0 || optimizer == closing_) {
    skipped_in_a_row_ = 0;
    return OptimizerStep::kCloses;
  }
  if (++skipped_in_a_row_ > kMaxSkippedSteps) {
    closing_ = 0;
    cycle_off_ = true;
    skipped_in_a_row_ = 0;
    return OptimizerStep::kCloses;
  }
  if (!said_skipped_) {
    said_skipped_ = true;
    return OptimizerStep::kFirstSkip;
  }
  return OptimizerStep::kSkipped;
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
  pieces_n_ = 0;
  train_at_ = -1;
  train_by_backward_ = false;
}

}  // namespace gpuutil
