// gpuutil's LibTorch hook: a RecordFunction observer that turns PyTorch's
// own ranges into categorisable host ranges, built against the installed
// torch (gpuutil/torch/_ext.py builds and loads it; docs/pytorch.md).
//
// Which ranges, in two tiers (docs/pytorch.md, "Collection tiers"):
// - USER_SCOPE (record_function: "enumerate(DataLoader)#...",
//   "Optimizer.step#...", user annotations, gloo's collective execution
//   "gloo:*" on its worker threads). PyTorch runs this callback only for
//   USER_SCOPE ranges, but while *any* global callback is registered it
//   rebuilds each thread's active-callback lists whenever it switches
//   thread-local state (autograd, DataLoader): +3.4% of the instructions of
//   a 1 ms CPU step in a first count, +0.54% in a second on another VM
//   (benchmarks/RESULTS.md). So it is always on only with
//   user_scope_always (gpuutil asks for it under torch.distributed with
//   gloo and several ranks, whose "gloo:*" ranges the cross-rank view
//   needs every step);
//   otherwise it is part of the detail tier, and gpuutil's Python wrappers
//   time DataLoader waits and zero_grad on the other steps;
// - detail (set_detail(true), on the steps gpuutil samples): one callback
//   for USER_SCOPE (unless always on), BACKWARD_FUNCTION (the autograd
//   engine's "autograd::engine::evaluate_function: ...") when
//   autograd_nodes is on, and FUNCTION scope (every aten op pays for a
//   RecordFunction then) for the names a category needs (aten::item,
//   aten::_local_scalar_dense, c10d::*, record_param_comms) when
//   function_scope is on. Adding and removing it is RecordFunction's own
//   mechanism (addGlobalCallback / removeCallback), done at step
//   boundaries only.
//
// Hot path (the callbacks, on the application's threads): no allocation
// after a thread's first range, no locks, no Python: each finished range goes
// into the thread's queue (hook_ring.h, shared with gpuutil's trace replay:
// segments from one slab, so one thread may buffer up to the whole slab
// between step ends), keyed by the thread id CUPTI records. The drainer
// (drain(), called by gpuutil at step end with the GIL held) reads the
// queues.
//
// The drainer is gpuutil's core, through the C interface in hook_abi.h
// (`api()` returns it as a capsule): ranges go straight from the rings into
// the session in C++, with no Python object per range. `drain()` returns
// them as Python tuples instead, for tests and debugging.
#include <torch/extension.h>

#include <ATen/record_function.h>
#include <torch/version.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <pthread.h>
#include <unistd.h>

#include "hook_abi.h"
#include "hook_ring.h"

namespace {

constexpr int kMaxDepth = 64;  // tracked nesting depth per thread; deeper ranges are counted as dropped

struct HookTag {};
using Rings = gpuutil_hook::RingSet<HookTag>;

struct ThreadState {
  int depth = 0;
  int in_optimizer = 0;  // open "Optimizer.step#..." ranges on this thread
  int64_t start_ns[kMaxDepth];
};

std::atomic<bool> g_enabled{false};
bool g_started = false;
at::CallbackHandle g_handle = 0;         // USER_SCOPE while started, with user_scope_always
at::CallbackHandle g_detail_handle = 0;  // detail scopes, while detail is on
bool g_function_scope = false, g_autograd_nodes = false, g_user_always = true;
thread_local ThreadState t_state;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // gpuutil's session clock
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

// Whether a range is recorded (the same answer at enter and exit).
bool wanted(const at::RecordFunction& fn) {
  // Async ranges start and end on different threads, except gloo's: its
  // worker thread runs each collective from start to completion inside one
  // ("gloo:all_reduce"), which is the instance the cross-rank view measures.
  if (fn.isAsync()) return fn.scope() == at::RecordScope::USER_SCOPE && starts_with(fn.name(), "gloo:");
  switch (fn.scope()) {
    case at::RecordScope::USER_SCOPE:
    case at::RecordScope::BACKWARD_FUNCTION:
      return true;
    case at::RecordScope::FUNCTION: {
      // .item() inside optimizer.step() is the optimizers' own read of
      // their step counters (AdamW: one per parameter), which waits for
      // nothing: not a host sync (as in the Python hooks).
      const char* n = fn.name();
      return n[0] == 'a' ? t_state.in_optimizer == 0 &&
                               (std::strcmp(n, "aten::item") == 0 || std::strcmp(n, "aten::_local_scalar_dense") == 0)
                         : (starts_with(n, "c10d::") || starts_with(n, "record_param_comms"));
    }
    default:
      return false;
  }
}

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  if (!g_enabled.load(std::memory_order_relaxed) || !wanted(fn)) return nullptr;
  ThreadState& s = t_state;
  if (s.depth < kMaxDepth) s.start_ns[s.depth] = now_ns();
  ++s.depth;
  if (fn.scope() == at::RecordScope::USER_SCOPE && starts_with(fn.name(), "Optimizer.step#")) ++s.in_optimizer;
  return nullptr;
}

void on_exit(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!wanted(fn)) return;
  ThreadState& s = t_state;
  if (s.depth <= 0) return;  // entered before the hook was enabled
  --s.depth;
  if (s.in_optimizer > 0 && fn.scope() == at::RecordScope::USER_SCOPE && starts_with(fn.name(), "Optimizer.step#")) {
    --s.in_optimizer;
  }
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  if (s.depth >= kMaxDepth) {  // nested deeper than its start time was kept: counted, not silent
    Rings::lost();
    return;
  }
  const uint8_t kind =
      fn.scope() == at::RecordScope::FUNCTION ? 1 : fn.scope() == at::RecordScope::BACKWARD_FUNCTION ? 2 : 0;
  Rings::record(fn.name(), s.start_ns[s.depth], now_ns(), kind);
}

using Scopes = std::unordered_set<at::RecordScope, std::hash<at::RecordScope>>;

at::CallbackHandle add_callback(const Scopes& scopes) {
  return at::addGlobalCallback(
      at::RecordFunctionCallback(on_enter, on_exit).needsInputs(false).needsOutputs(false).needsIds(false).scopes(
          scopes));
}

// Turns the detail tier on or off (at a step boundary; training thread).
// Returns whether it is on.
bool set_detail(bool on) {
  const bool any = g_function_scope || g_autograd_nodes || !g_user_always;
  if (on && any && g_started && g_detail_handle == 0) {
    Scopes scopes;
    if (!g_user_always) scopes.insert(at::RecordScope::USER_SCOPE);
    if (g_autograd_nodes) scopes.insert(at::RecordScope::BACKWARD_FUNCTION);
    if (g_function_scope) scopes.insert(at::RecordScope::FUNCTION);
    g_detail_handle = add_callback(scopes);
  } else if (!on && g_detail_handle != 0) {
    at::removeCallback(g_detail_handle);
    g_detail_handle = 0;
  }
  return g_detail_handle != 0;
}

// A child forked while the hook runs (a DataLoader worker, by default on
// Linux) inherits the callbacks but has no drainer: it records nothing, so
// it never fills its copy of the queues' slab.
void stop_recording_in_child() { g_enabled.store(false, std::memory_order_relaxed); }

void start(bool function_scope, bool autograd_nodes, bool detail, bool user_scope_always) {
  if (g_started) return;
  static const bool at_fork = pthread_atfork(nullptr, nullptr, &stop_recording_in_child) == 0;
  (void)at_fork;
  g_function_scope = function_scope;
  g_autograd_nodes = autograd_nodes;
  g_user_always = user_scope_always;
  g_started = true;
  if (g_user_always && g_handle == 0) g_handle = add_callback({at::RecordScope::USER_SCOPE});
  set_detail(detail);
  g_enabled.store(true);
}

// Switches USER_SCOPE to always on (or back to the detail tier) while
// started, at a step boundary: torch.distributed came up after start.
void set_user_scope_always(bool on) {
  if (!g_started || on == g_user_always) return;
  const bool detail = g_detail_handle != 0;
  set_detail(false);
  g_user_always = on;
  if (on && g_handle == 0) {
    g_handle = add_callback({at::RecordScope::USER_SCOPE});
  } else if (!on && g_handle != 0) {
    at::removeCallback(g_handle);
    g_handle = 0;
  }
  set_detail(detail);
}

void stop() {
  g_enabled.store(false);
  set_detail(false);
  g_started = false;
  if (g_handle != 0) {
    at::removeCallback(g_handle);
    g_handle = 0;
  }
}

uint64_t drain_into(gpuutil_hook_range_fn sink, void* ctx) { return Rings::drain_into(sink, ctx); }

const GpuutilHookApi g_api = {GPUUTIL_HOOK_API_VERSION, &drain_into};

// The same as Python tuples: ([(name, start_ns, end_ns, tid, kind)], dropped).
py::tuple drain() {
  py::list out;
  const uint64_t dropped = drain_into(
      [](void* ctx, const char* name, int64_t start_ns, int64_t end_ns, int64_t thread_key, int64_t, int kind) {
        static_cast<py::list*>(ctx)->append(py::make_tuple(py::str(name), start_ns, end_ns, thread_key, kind));
      },
      &out);
  return py::make_tuple(out, dropped);
}

std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "gpuutil's RecordFunction observer (built against the installed torch)";
  m.def("start", &start, py::arg("function_scope") = true, py::arg("autograd_nodes") = true,
        py::arg("detail") = true, py::arg("user_scope_always") = true,
        "Registers the USER_SCOPE observer (now and until stop() with user_scope_always; else as part of the "
        "detail tier) and, with detail, the detail one (FUNCTION scope when function_scope, BACKWARD_FUNCTION "
        "when autograd_nodes); scopes are fixed until stop(). A second start() before stop() does nothing.");
  m.def("set_detail", &set_detail, py::arg("on"),
        "Adds or removes the detail observer (at a step boundary); returns whether it is on (never without "
        "detail scopes: with user_scope_always and neither function_scope nor autograd_nodes there are none).");
  m.def("set_user_scope_always", &set_user_scope_always, py::arg("on"),
        "While started: USER_SCOPE on at every step (on) or with the detail tier only (off); at a step boundary.");
  m.def("stop", &stop, "Disables and removes the observer.");
  m.def("drain", &drain,
        "Returns ([(name, start_ns, end_ns, thread_key, kind)], dropped) since the last drain; thread_key is "
        "(uint32_t)pthread_self() of the recording thread (threading.get_ident() & 0xffffffff).");
  m.def(
      "api", [] { return py::capsule(static_cast<const void*>(&g_api), GPUUTIL_HOOK_API_CAPSULE); },
      "The C drain interface (hook_abi.h) as a capsule, for gpuutil's core.");
  m.def("now_ns", &now_ns, "The hook's clock (CLOCK_MONOTONIC ns, gpuutil's session clock).");
  m.def("torch_version", &torch_version, "The torch version this extension was compiled against.");
  m.def(
      "queue_stats",
      [] {
        return py::dict(py::arg("segments") = Rings::segments(), py::arg("segments_free") = Rings::segments_free(),
                        py::arg("segments_touched") = Rings::segments_touched(),
                        py::arg("queues_made") = Rings::queues_made());
      },
      "The range queues' slab (hook_ring.h): segments in it (0 before the first range), free now, ever written, "
      "and queue headers made; for tests.");
  m.attr("segment_ranges") = Rings::kSegmentRanges;
  m.attr("max_segments") = Rings::kSegments;
}
