// The live step path: what the training thread pays at each step boundary
// and for each coarse host range (forward, backward, optimizer step, a host
// sync), kept in C++ so that Python hooks only hand over a timestamp.
//
// Three things, all vendor-free:
// - a table of range names, each interned and classified once (a "slot"),
//   so adding a range costs no string work;
// - the automatic step sequence (steps end at optimizer.step(); each runs
//   from the previous boundary): closing a step is one call;
// - which of the work between two automatic steps is not training
//   (evaluation, checkpoint writes): it is carved out of the step it would
//   open and counted as outside steps, named; so is the time after the last
//   step (finish_auto); with several optimizers per iteration (a GAN), one
//   step per iteration (optimizer_stepped);
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
//   mark_reported, finish_auto, optimizer_stepped) and the notes of what the
//   work between steps is (note_*, mark_outside) are called by the one thread
//   that marks steps (the application's, with the GIL held in Python); they
//   are not thread-safe against each other. Notes cost a few stores (a fixed
//   table of kMaxPieces pieces, merged when full); close_auto_step reads them
//   once.
// - Times are session-clock nanoseconds (session_now_ns()).
#pragma once

#ifdef GPUUTIL_LOWER_LAYER
#error "the runtime (gpuutil/session.h, step_path.h, profiler.h) is included from a lower layer: collectors use gpuutil/event_sink.h (docs/architecture.md)"
#endif

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "gpuutil/events.h"
#include "gpuutil/run_totals.h"
#include "gpuutil/session.h"

namespace gpuutil {

// What the Python side has to do after a boundary.
enum class BoundaryDue : uint8_t {
  kNothing = 0,    // nothing: the boundary was all C++
  kPerStep = 1,    // the collectors' per-step work (wake_in came due)
  kReport = 2,     // that and a report batch (report_interval_ns has passed)
};

// What an outermost forward was, by the state it ran in.
enum class ForwardKind : uint8_t {
  kTraining = 0,  // grad mode on, module.training
  kNoGrad = 1,    // under no_grad / inference_mode: evaluation (or a teacher, a rollout)
  kEvalMode = 2,  // grad mode on but module.eval(): evaluation, unless a backward follows it
};

// What optimizer_stepped() says about an optimizer step.
enum class OptimizerStep : uint8_t {
  kCloses = 0,     // it ends the automatic step
  kSkipped = 1,    // another optimizer ends the iteration's step
  kFirstSkip = 2,  // the same, for the first time (say so: a diagnostic)
};

class StepPath {
 public:
  static constexpr uint32_t kMaxSlots = 4096;
  static constexpr int kMaxPieces = 32;
  static constexpr int kMaxOptimizers = 8;
  // Optimizer steps in a row that an iteration may hold (a WGAN's critic
  // steps 5 times per generator step); past it, every optimizer step ends a
  // step again (the learnt iteration was wrong: optimizers stepped at
  // unrelated rates, or an optimizer's identity was reused).
  static constexpr int kMaxSkippedSteps = 64;
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
  // Restarts the automatic sequence at t_ns (the profile's start), with
  // nothing noted.
  void restart(int64_t t_ns);

  // --- what the work between automatic steps is (the step-marking thread) ---
  // close_auto_step() starts its step after the non-training work noted
  // since the previous boundary and before the step's first training work
  // (a training forward, or a backward), and counts the stretch before as
  // outside steps (Session::add_outside_ns for the stretch before the first
  // step; a gap otherwise), named (Session::name_outside): evaluation,
  // checkpoint, other. Forwards alone make evaluation only when they are at
  // least two (one no_grad forward before the training forward is a
  // teacher's or a frozen part's), and an eval-mode forward with grad on is
  // training when a backward follows it (frozen batch norm). Naming: each piece of work owns
  // its span, the gap to the next piece of the same kind (an evaluation
  // loop's data waits) and, after the first step, the gap from the boundary
  // to the first piece; a mark_outside() owns everything since the previous
  // mark (or the boundary); what is left is other.
  void note_forward(ForwardKind kind, int64_t start_ns, int64_t end_ns);
  void note_backward(int64_t t_ns);
  // Non-training work [start_ns, end_ns) (torch.save: kCheckpoint).
  void note_outside(OutsideKind kind, int64_t start_ns, int64_t end_ns);
  // A framework's own event (Hugging Face's on_evaluate, on_save): the work
  // since the previous mark, or the boundary, was `kind` and ended at t_ns.
  void mark_outside(OutsideKind kind, int64_t t_ns);
  // The profile stops at t_ns: with automatic steps, the time since the
  // last boundary is outside steps (named as above); nothing before the
  // first step was closed.
  void finish_auto(int64_t t_ns);
  // An outermost optimizer step of `optimizer` (a nonzero identity: the
  // bindings number each live optimizer object) ended on the step-marking
  // thread: does it end the
  // automatic step? Every one does, until a second optimizer steps: from then
  // on only the optimizer seen last does (one step per iteration of a GAN's
  // D and G steps), until kMaxSkippedSteps pass without it (then every one
  // again, for good).
  OptimizerStep optimizer_stepped(uintptr_t optimizer);
  int optimizers_seen() const { return optimizers_; }
  int64_t steps_closed() const { return steps_closed_; }  // automatic steps since construction

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

  // A piece of non-training work since the last boundary.
  struct Piece {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    OutsideKind kind = OutsideKind::kOther;
    bool weak = false;  // an eval-mode forward with grad on
    bool mark = false;  // mark_outside(): owns the time since the previous mark
    int32_t forwards = 0;
  };
  // Where the carved stretch ends and what it was.
  struct Carve {
    int64_t end_ns = 0;
    std::array<int64_t, kOutsideKindCount> named{};
  };
  void add_piece(const Piece& p);
  // The stretch from auto_start_ns_ that is outside steps: the pieces before
  // the step's training began (all of them and up to limit_ns with `all`).
  Carve carve(int64_t limit_ns, bool all) const;
  void name(const Carve& c);

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
  int64_t steps_closed_ = 0;

  std::array<Piece, kMaxPieces> pieces_{};
  int pieces_n_ = 0;
  int train_at_ = -1;               // pieces noted before the step's training began (-1: not yet)
  bool train_by_backward_ = false;  // and a backward was its first sign

  std::array<uintptr_t, kMaxOptimizers> optimizer_ids_{};
  int optimizers_ = 0;          // distinct optimizers seen (at most kMaxOptimizers kept)
  uintptr_t closing_ = 0;       // the optimizer that ends steps; 0: every one
  int skipped_in_a_row_ = 0;
  bool said_skipped_ = false;
  bool cycle_off_ = false;      // the learnt iteration failed: every optimizer step ends a step
};

}  // namespace gpuutil
