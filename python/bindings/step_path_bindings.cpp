// Python bindings for the live step path (gpuutil/step_path.h): the calls a
// training step makes into gpuutil, each one C++ call with no Python frame
// of gpuutil's own behind it.
//
// `StepPath(session, report_interval_ns, main_thread_ident)` adds what only
// the Python side knows:
// - the calling thread's session index, cached per thread (the thread is
//   registered once, named by threading.current_thread().name), so a hook
//   hands over a start time and nothing else;
// - outermost-call depths per thread for forward (nn.Module calls) and
//   backward (torch.autograd.backward), and the optimizer-step stack, so a
//   nested call never makes a second range;
// - the range name of a module or optimizer class, built and classified
//   once per class;
// - the optimizer post-hook itself (`optimizer_post`, registered with
//   torch.optim's global hook): it records the step's range and, on the
//   main thread, closes the automatic step; only when the profile's Python
//   side is due (a report batch, or a collector's per-step work it asked
//   for with wake_in) does it call `on_due(now_ns, report)`;
// - an attribute swapped while an optimizer step runs
//   (`swap_in_optimizer(owner, name, inside, outside)`): from the first
//   optimizer pre-hook until the last post-hook, on any thread, owner.name is
//   `inside`, otherwise `outside`. gpuutil's `Tensor.item` wrapper steps
//   aside this way once it meets an `.item()` inside an optimizer step:
//   optimizers read their CPU step counters with `.item()` once per
//   parameter (AdamW: 27 calls per step of the benchmarks' transformer),
//   which would each pay a Python wrapper for a range that is not kept; two
//   attribute stores per step cost less than one such call.
//
// - what the work between automatic steps is, on the main thread, for the
//   step path to carve it out of the step it would open (gpuutil/step_path.h):
//   each outermost forward's state at its end (grad mode, read through
//   torch.is_grad_enabled, and module.training: a call and an attribute read,
//   once per outermost forward), each outermost backward, torch.save
//   (`outside_range`) and a framework's own events (`mark_outside`);
// - which optimizers step (a weak reference each, so a new optimizer at a
//   dead one's address is a new one), so that with two or more per iteration
//   (a GAN) one step per iteration ends at the one seen last
//   (StepPath::optimizer_stepped), with the optimizers_per_iteration
//   diagnostic saying so;
// - the compile_warmup interval while torch.compile compiles
//   (`compile_begin`/`compile_end`, from Dynamo's compile callbacks).
//
// Automatic steps have three modes: 0 "ask" (the post-hook calls `ask()`,
// the profile's auto_step_boundary, which decides whether steps are
// automatic), 1 "auto" (closed here), 2 "off" (user-marked steps, stopped,
// or forked). All methods are called with the GIL held.
#include <pybind11/pybind11.h>

#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpuutil/clock.h"
#include "gpuutil/session.h"
#include "gpuutil/step_path.h"
#include "gpuutil/thread_key.h"

namespace py = pybind11;

namespace {

std::atomic<uint64_t> g_next_serial{1};

// One thread's state for one StepPath (a few paths may be alive at once).
struct ThreadState {
  static constexpr int kMaxOptimizerDepth = 16;
  uint64_t serial = 0;  // the StepPath this is for; 0 = unused
  uint32_t thread = 0;  // session thread index
  int forward_depth = 0;
  int64_t forward_start_ns = 0;
  int backward_depth = 0;
  int64_t backward_start_ns = 0;
  int optimizer_depth = 0;
  int64_t optimizer_start_ns[kMaxOptimizerDepth] = {};
};

constexpr size_t kStatesPerThread = 4;
thread_local std::array<ThreadState, kStatesPerThread> t_states;

class PyStepPath {
 public:
  PyStepPath(gpuutil::Session& session, int64_t report_interval_ns, uint64_t main_thread_ident)
      : session_(session),
        path_(session, report_interval_ns),
        serial_(g_next_serial.fetch_add(1)),
        main_thread_(main_thread_ident),
        backward_slot_(path_.slot("## backward ##", false)) {}

  gpuutil::StepPath& path() { return path_; }

  // This thread's state, registering the thread on first use.
  ThreadState& state() {
    for (ThreadState& s : t_states) {
      if (s.serial == serial_) return s;
    }
    ThreadState* pick = &t_states[0];
    for (ThreadState& s : t_states) {
      if (s.serial < pick->serial) pick = &s;  // unused (0) or the oldest path
    }
    *pick = ThreadState{};
    pick->serial = serial_;
    std::string name;
    try {
      name = py::module_::import("threading").attr("current_thread")().attr("name").cast<std::string>();
    } catch (const py::error_already_set&) {
      name.clear();  // interpreter shutting down: an unnamed thread
    }
    pick->thread = session_.thread_index(::getpid(), gpuutil::this_thread_key(), name, gpuutil::this_os_tid());
    return *pick;
  }

  uint32_t thread_here() { return state().thread; }

  void add(uint32_t slot, int64_t start_ns) { path_.add(slot, start_ns, gpuutil::session_now_ns(), state().thread); }

  uint32_t named_slot(const std::string& name, bool is_op) {
    auto& cache = is_op ? op_names_ : range_names_;
    auto it = cache.find(name);
    if (it == cache.end()) it = cache.emplace(name, path_.slot(name, is_op)).first;
    return it->second;
  }

  // --- forward: the outermost nn.Module call on this thread ---
  void forward_enter() {
    ThreadState& s = state();
    if (s.forward_depth++ == 0) s.forward_start_ns = gpuutil::session_now_ns();
  }
  void forward_exit(py::handle module) {
    ThreadState& s = state();
    if (s.forward_depth <= 0) return;  // entered before the profile started
    if (--s.forward_depth == 0) {
      const int64_t now_ns = gpuutil::session_now_ns();
      path_.add(class_slot(module, module_slots_, "nn.Module: ", ""), s.forward_start_ns, now_ns, s.thread);
      if (mode_ != kOff && on_main_thread()) path_.note_forward(forward_kind(module), s.forward_start_ns, now_ns);
    }
  }
  int forward_depth() { return state().forward_depth; }

  // --- backward: the outermost torch.autograd.backward on this thread ---
  void backward_enter() {
    ThreadState& s = state();
    if (s.backward_depth++ == 0) {
      s.backward_start_ns = gpuutil::session_now_ns();
      if (mode_ != kOff && on_main_thread()) path_.note_backward(s.backward_start_ns);
    }
  }
  void backward_exit() {
    ThreadState& s = state();
    if (s.backward_depth <= 0) return;
    if (--s.backward_depth == 0) path_.add(backward_slot_, s.backward_start_ns, gpuutil::session_now_ns(), s.thread);
  }

  // --- optimizer step: global pre/post hooks of torch.optim ---
  void optimizer_pre() {
    ThreadState& s = state();
    const int d = s.optimizer_depth++;
    if (optimizers_running_++ == 0) swap_to(swap_inside_);
    s.optimizer_start_ns[d < ThreadState::kMaxOptimizerDepth ? d : ThreadState::kMaxOptimizerDepth - 1] =
        gpuutil::session_now_ns();
  }
  void optimizer_post(py::handle optimizer) {
    ThreadState& s = state();
    if (s.optimizer_depth <= 0) return;  // its pre-hook ran before the profile started
    const int d = --s.optimizer_depth;
    if (optimizers_running_ > 0 && --optimizers_running_ == 0) swap_to(swap_outside_);
    const int64_t start_ns =
        s.optimizer_start_ns[d < ThreadState::kMaxOptimizerDepth ? d : ThreadState::kMaxOptimizerDepth - 1];
    const int64_t now_ns = gpuutil::session_now_ns();
    path_.add(class_slot(optimizer, optimizer_slots_, "Optimizer.step#", ".step"), start_ns, now_ns, s.thread);
    if (d != 0 || !on_main_thread() || mode_ == kOff) return;
    const gpuutil::OptimizerStep verdict = path_.optimizer_stepped(optimizer_serial(optimizer));
    if (verdict == gpuutil::OptimizerStep::kFirstSkip) say_optimizers_per_iteration();
    if (verdict != gpuutil::OptimizerStep::kCloses) return;
    if (mode_ == kAuto) {
      due(now_ns, path_.close_auto_step(now_ns));
    } else if (mode_ == kAsk && ask_) {
      ask_();
    }
  }
  bool in_optimizer() { return state().optimizer_depth > 0; }

  // --- non-training work between automatic steps (main thread) ---
  void outside_range(const std::string& kind, int64_t start_ns) {
    if (mode_ != kOff && on_main_thread()) path_.note_outside(outside_kind(kind), start_ns, gpuutil::session_now_ns());
  }
  void mark_outside(const std::string& kind) {
    if (mode_ != kOff && on_main_thread()) path_.mark_outside(outside_kind(kind), gpuutil::session_now_ns());
  }
  // The profile stops: the time after the last automatic step is outside steps.
  void finish_auto(int64_t now_ns) { path_.finish_auto(now_ns); }
  // Optimizers stepping per iteration when steps hold an iteration each (0: one per step).
  int optimizers_per_iteration() const { return said_ ? path_.optimizers_seen() : 0; }

  // --- torch.compile: Dynamo's compile start/end callbacks (any thread) ---
  void compile_begin(const std::string& example) {
    if (compiling_++ == 0) session_.begin_interval(gpuutil::Diag::compile_warmup, gpuutil::session_now_ns(), example);
  }
  void compile_end() {
    if (compiling_ > 0 && --compiling_ == 0) session_.end_interval(gpuutil::Diag::compile_warmup, gpuutil::session_now_ns());
  }

  // owner.name is `inside` while any optimizer step runs, `outside` otherwise
  // (set now to the one that holds); clear_swap() stops swapping.
  void swap_in_optimizer(py::object owner, py::str name, py::object inside, py::object outside) {
    swap_owner_ = std::move(owner);
    swap_name_ = std::move(name);
    swap_inside_ = std::move(inside);
    swap_outside_ = std::move(outside);
    swap_to(optimizers_running_ > 0 ? swap_inside_ : swap_outside_);
  }
  void clear_swap() {
    swap_owner_ = py::object();
    swap_name_ = py::object();
    swap_inside_ = py::object();
    swap_outside_ = py::object();
  }
  bool swapping() const { return static_cast<bool>(swap_owner_); }

  // Python's own boundary (auto_step_boundary deciding, or a user step):
  // (now_ns, due as an int).
  py::tuple close_auto_step() {
    const int64_t now_ns = gpuutil::session_now_ns();
    return py::make_tuple(now_ns, static_cast<int>(path_.close_auto_step(now_ns)));
  }

  void set_mode(int mode) {
    if (mode < kAsk || mode > kOff) throw py::value_error("mode must be 0 (ask), 1 (auto) or 2 (off)");
    mode_ = mode;
  }
  int mode() const { return mode_; }
  void set_callbacks(py::object ask, py::object on_due) {
    ask_ = ask.is_none() ? py::object() : std::move(ask);
    on_due_ = on_due.is_none() ? py::object() : std::move(on_due);
  }

 private:
  static constexpr int kAsk = 0, kAuto = 1, kOff = 2;

  // A failed store (a read-only owner) ends the swap and leaves the error set
  // for nobody: the wrapper stays in place, which is only slower.
  void swap_to(const py::object& value) {
    if (!swap_owner_ || !value) return;
    if (PyObject_SetAttr(swap_owner_.ptr(), swap_name_.ptr(), value.ptr()) != 0) {
      PyErr_Clear();
      clear_swap();
    }
  }

  bool on_main_thread() const { return static_cast<uint64_t>(pthread_self()) == main_thread_; }

  static gpuutil::OutsideKind outside_kind(const std::string& kind) {
    if (kind == "evaluation") return gpuutil::OutsideKind::kEvaluation;
    if (kind == "checkpoint") return gpuutil::OutsideKind::kCheckpoint;
    throw py::value_error("kind must be 'evaluation' or 'checkpoint', not '" + kind + "'");
  }

  // Training, evaluation under no_grad/inference_mode, or a forward of a
  // module in eval mode with grad on. An error reading either counts as
  // training (the step stays as it was).
  gpuutil::ForwardKind forward_kind(py::handle module) {
    if (!is_grad_enabled_) {
      try {
        is_grad_enabled_ = py::module_::import("torch").attr("is_grad_enabled");
      } catch (const py::error_already_set&) {
        return gpuutil::ForwardKind::kTraining;
      }
    }
    PyObject* grad = PyObject_CallNoArgs(is_grad_enabled_.ptr());
    if (grad == nullptr) {
      PyErr_Clear();
      return gpuutil::ForwardKind::kTraining;
    }
    const bool grad_on = grad == Py_True;
    Py_DECREF(grad);
    if (!grad_on) return gpuutil::ForwardKind::kNoGrad;
    if (!training_name_) training_name_ = py::str("training");
    PyObject* training = PyObject_GetAttr(module.ptr(), training_name_.ptr());
    if (training == nullptr) {
      PyErr_Clear();
      return gpuutil::ForwardKind::kTraining;
    }
    const bool eval_mode = training == Py_False;
    Py_DECREF(training);
    return eval_mode ? gpuutil::ForwardKind::kEvalMode : gpuutil::ForwardKind::kTraining;
  }

  // A number per live optimizer object (a weak reference each: an object
  // made at a dead one's address gets a new number).
  uintptr_t optimizer_serial(py::handle optimizer) {
    for (auto& o : optimizers_) {
      if (o.ref && referent_is(o.ref, optimizer)) return o.serial;
    }
    Optimizer o;
    o.serial = ++optimizer_serials_;
    o.name = py::str(py::handle(reinterpret_cast<PyObject*>(Py_TYPE(optimizer.ptr()))).attr("__name__"));
    PyObject* ref = PyWeakref_NewRef(optimizer.ptr(), nullptr);
    if (ref == nullptr) {
      PyErr_Clear();  // not weak-referenceable: known by this number until the table is full
    } else {
      o.ref = py::reinterpret_steal<py::object>(ref);
    }
    if (optimizers_.size() >= static_cast<size_t>(gpuutil::StepPath::kMaxOptimizers)) optimizers_.erase(optimizers_.begin());
    optimizers_.push_back(std::move(o));
    return optimizers_.back().serial;
  }

  static bool referent_is(const py::object& ref, py::handle obj) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject* target = nullptr;
    if (PyWeakref_GetRef(ref.ptr(), &target) < 0) PyErr_Clear();
    const bool same = target == obj.ptr();
    Py_XDECREF(target);
    return same;
#else
    return PyWeakref_GetObject(ref.ptr()) == obj.ptr();
#endif
  }

  // The first optimizer step that did not end a step: say why, in every report from now on.
  void say_optimizers_per_iteration() {
    said_ = true;
    std::string names;
    for (const auto& o : optimizers_) names += (names.empty() ? "" : ", ") + o.name;
    const std::string last = optimizers_.empty() ? std::string("?") : optimizers_.back().name;
    session_.add_standing_diagnostic(
        gpuutil::Diag::optimizers_per_iteration,
        std::to_string(path_.optimizers_seen()) + " optimizers step per iteration (" + names +
            "): from step " + std::to_string(path_.next_step()) + " on, each automatic step ends at " + last +
            ".step() and holds one iteration; mark steps with prof.step() to choose where they end");
  }

  void due(int64_t now_ns, gpuutil::BoundaryDue d) {
    if (d != gpuutil::BoundaryDue::kNothing && on_due_) on_due_(now_ns, d == gpuutil::BoundaryDue::kReport);
  }

  // The slot of "<prefix><type(obj).__name__><suffix>", once per class.
  uint32_t class_slot(py::handle obj, std::unordered_map<PyObject*, uint32_t>& cache, const char* prefix,
                      const char* suffix) {
    PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()));
    auto it = cache.find(cls);
    if (it != cache.end()) return it->second;
    std::string name = prefix;
    name += py::str(py::handle(cls).attr("__name__")).cast<std::string>();
    name += suffix;
    classes_.append(py::handle(cls));  // the key stays valid while cached
    return cache.emplace(cls, path_.slot(name, false)).first->second;
  }

  gpuutil::Session& session_;
  gpuutil::StepPath path_;
  const uint64_t serial_;
  const uint64_t main_thread_;
  const uint32_t backward_slot_;
  int mode_ = kAsk;
  py::object ask_, on_due_;
  int optimizers_running_ = 0;  // open optimizer steps, every thread (the GIL orders the hooks)
  py::object is_grad_enabled_, training_name_;
  struct Optimizer {
    py::object ref;  // a weak reference
    uintptr_t serial = 0;
    std::string name;
  };
  std::vector<Optimizer> optimizers_;
  uintptr_t optimizer_serials_ = 0;
  bool said_ = false;
  int compiling_ = 0;  // nested compile callbacks (the GIL orders them)
  py::object swap_owner_, swap_name_, swap_inside_, swap_outside_;
  py::list classes_;
  std::unordered_map<PyObject*, uint32_t> module_slots_, optimizer_slots_;
  std::unordered_map<std::string, uint32_t> range_names_, op_names_;
};

}  // namespace

void bind_step_path(py::module_& m) {
  py::class_<PyStepPath>(m, "StepPath")
      .def(py::init<gpuutil::Session&, int64_t, uint64_t>(), py::arg("session"), py::arg("report_interval_ns"),
           py::arg("main_thread_ident"), py::keep_alive<1, 2>(),
           "The step path of one profile; main_thread_ident is threading.main_thread().ident (automatic steps end "
           "only on that thread).")
      .def("slot", &PyStepPath::named_slot, py::arg("name"), py::arg("is_op") = false,
           "The slot of a range name (interned and classified once).")
      .def("add", &PyStepPath::add, py::arg("slot"), py::arg("start_ns"),
           "Adds the range [start_ns, now) named by slot on the calling thread.")
      .def("thread_here", &PyStepPath::thread_here, "The calling thread's session index (registered once).")
      .def("forward_enter", &PyStepPath::forward_enter)
      .def("forward_exit", &PyStepPath::forward_exit, py::arg("module"),
           "Closes the outermost module call on this thread as 'nn.Module: <Class>'.")
      .def_property_readonly("forward_depth", &PyStepPath::forward_depth, "Open module calls on this thread.")
      .def("backward_enter", &PyStepPath::backward_enter)
      .def("backward_exit", &PyStepPath::backward_exit, "Closes the outermost backward on this thread.")
      .def(
          "optimizer_pre", [](PyStepPath& p, py::handle, py::handle, py::handle) { p.optimizer_pre(); },
          py::arg("optimizer"), py::arg("args"), py::arg("kwargs"), "torch.optim's global step pre-hook.")
      .def(
          "optimizer_post", [](PyStepPath& p, py::handle opt, py::handle, py::handle) { p.optimizer_post(opt); },
          py::arg("optimizer"), py::arg("args"), py::arg("kwargs"),
          "torch.optim's global step post-hook: the step's range, and the automatic step boundary.")
      .def("in_optimizer", &PyStepPath::in_optimizer, "An optimizer step is running on this thread.")
      .def("outside_range", &PyStepPath::outside_range, py::arg("kind"), py::arg("start_ns"),
           "Non-training work [start_ns, now) on the main thread ('checkpoint': torch.save): carved out of the "
           "automatic step it would open.")
      .def("mark_outside", &PyStepPath::mark_outside, py::arg("kind"),
           "A framework's event on the main thread: the work since the previous mark (or the boundary) was kind "
           "('evaluation', 'checkpoint') and ends now.")
      .def("finish_auto", &PyStepPath::finish_auto, py::arg("now_ns"),
           "The profile stops (call it only with automatic steps): the time after the last one is outside steps.")
      .def_property_readonly("optimizers_per_iteration", &PyStepPath::optimizers_per_iteration,
                             "Optimizers per iteration when automatic steps hold an iteration each (a GAN); 0 when "
                             "every optimizer step ends a step.")
      .def("compile_begin", &PyStepPath::compile_begin, py::arg("example"),
           "torch.compile starts compiling: steps overlapping until compile_end are warm-ups (compile_warmup).")
      .def("compile_end", &PyStepPath::compile_end)
      .def("swap_in_optimizer", &PyStepPath::swap_in_optimizer, py::arg("owner"), py::arg("name"),
           py::arg("inside"), py::arg("outside"),
           "While any optimizer step runs (first pre-hook to last post-hook, every thread) owner.name is inside, "
           "otherwise outside; set now. A failed store ends the swap.")
      .def("clear_swap", &PyStepPath::clear_swap, "Stops swapping (leaves the attribute as it is).")
      .def_property_readonly("swapping", &PyStepPath::swapping, "An attribute is swapped in optimizer steps.")
      .def("close_auto_step", &PyStepPath::close_auto_step, "Closes the automatic step now: (now_ns, due).")
      .def(
          "end_user_step", [](PyStepPath& p, int64_t now_ns) { return static_cast<int>(p.path().end_user_step(now_ns)); },
          py::arg("now_ns"), "Ends the user-marked step: due (0 nothing, 1 per-step work, 2 and a report).")
      .def_property("mode", &PyStepPath::mode, &PyStepPath::set_mode, "0 ask, 1 auto, 2 off (automatic steps).")
      .def("set_callbacks", &PyStepPath::set_callbacks, py::arg("ask"), py::arg("on_due"),
           "ask(): decides automatic steps (mode 0); on_due(now_ns, report): the Python side's boundary work. "
           "None clears (do so at stop: the callbacks hold the profile).")
      .def(
          "wake_in", [](PyStepPath& p, int64_t n) { p.path().wake_in(n); }, py::arg("boundaries"))
      .def(
          "mark_reported", [](PyStepPath& p, int64_t t) { p.path().mark_reported(t); }, py::arg("now_ns"))
      .def(
          "restart", [](PyStepPath& p, int64_t t) { p.path().restart(t); }, py::arg("t_ns"))
      .def_property(
          "next_step", [](PyStepPath& p) { return p.path().next_step(); },
          [](PyStepPath& p, int64_t s) { p.path().set_next_step(s); })
      .def_property(
          "unreported", [](PyStepPath& p) { return p.path().unreported(); },
          [](PyStepPath& p, bool v) { p.path().set_unreported(v); })
      .def_property_readonly("boundaries", [](PyStepPath& p) { return p.path().boundaries(); })
      .def_property_readonly("auto_start_ns", [](PyStepPath& p) { return p.path().auto_start_ns(); })
      .def_property_readonly("prev_boundary_ns", [](PyStepPath& p) { return p.path().prev_boundary_ns(); },
                             "The boundary before the last one (a large negative number before two).");
}
