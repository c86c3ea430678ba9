// gpuutil's LibTorch hook: a RecordFunction observer that turns PyTorch's
// own ranges into categorisable host ranges, built against the installed
// torch (gpuutil/torch/_ext.py builds and loads it; docs/pytorch.md).
//
// Which ranges: USER_SCOPE (record_function: "enumerate(DataLoader)#...",
// "Optimizer.step#...", user annotations) always; BACKWARD_FUNCTION (the
// autograd engine's "autograd::engine::evaluate_function: ...") when
// autograd_nodes is on;
// FUNCTION scope (every aten op) only for the names a category needs
// (aten::item, aten::_local_scalar_dense, c10d::*, record_param_comms),
// and only when function scope is enabled.
//
// Hot path (the callbacks, on the application's threads): no allocation
// after a thread's first range (its ring is allocated once then), no locks,
// no Python. Each thread writes into its own fixed-size ring (single
// producer); the drainer (drain(), called by gpuutil at step end with the
// GIL held) reads the rings (single consumer). A full ring drops the range
// and counts it. Rings are linked into a lock-free list and live until the
// process exits, so a thread that ends never leaves a dangling ring.
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
#include <sys/syscall.h>
#include <unistd.h>

#include "hook_abi.h"

namespace {

constexpr size_t kRingSize = 4096;  // ranges per thread between drains (power of two)
constexpr size_t kNameBytes = GPUUTIL_HOOK_NAME_BYTES;  // longer names are truncated
constexpr int kMaxDepth = 64;       // tracked nesting depth per thread

struct Record {
  int64_t start_ns;
  int64_t end_ns;
  uint8_t kind;  // 0 user scope, 1 op (FUNCTION), 2 autograd node (BACKWARD_FUNCTION)
  char name[kNameBytes + 7];
};
static_assert(sizeof(Record) == 128, "one record is two cache lines");

struct Ring {
  Record records[kRingSize];
  std::atomic<uint64_t> head{0};  // written by the owning thread (release)
  std::atomic<uint64_t> tail{0};  // written by the drainer (release)
  std::atomic<uint64_t> dropped{0};
  int64_t tid = 0;
  Ring* next = nullptr;  // immutable once published
};

struct ThreadState {
  Ring* ring = nullptr;
  int depth = 0;
  int64_t start_ns[kMaxDepth];
};

std::atomic<Ring*> g_rings{nullptr};
std::atomic<bool> g_enabled{false};
at::CallbackHandle g_handle = 0;
thread_local ThreadState t_state;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // gpuutil's session clock
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

// Whether a range is recorded (the same answer at enter and exit).
bool wanted(const at::RecordFunction& fn) {
  if (fn.isAsync()) return false;
  switch (fn.scope()) {
    case at::RecordScope::USER_SCOPE:
    case at::RecordScope::BACKWARD_FUNCTION:
      return true;
    case at::RecordScope::FUNCTION: {
      const char* n = fn.name();
      return n[0] == 'a' ? (std::strcmp(n, "aten::item") == 0 || std::strcmp(n, "aten::_local_scalar_dense") == 0)
                         : (starts_with(n, "c10d::") || starts_with(n, "record_param_comms"));
    }
    default:
      return false;
  }
}

Ring* this_thread_ring() {
  Ring* r = t_state.ring;
  if (r != nullptr) return r;
  r = new Ring();  // once per thread; owned by the list until process exit
  r->tid = static_cast<int64_t>(::syscall(SYS_gettid));
  Ring* head = g_rings.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!g_rings.compare_exchange_weak(head, r, std::memory_order_release, std::memory_order_relaxed));
  t_state.ring = r;
  return r;
}

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  if (!g_enabled.load(std::memory_order_relaxed) || !wanted(fn)) return nullptr;
  ThreadState& s = t_state;
  if (s.depth < kMaxDepth) s.start_ns[s.depth] = now_ns();
  ++s.depth;
  return nullptr;
}

void on_exit(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!wanted(fn)) return;
  ThreadState& s = t_state;
  if (s.depth <= 0) return;  // entered before the hook was enabled
  --s.depth;
  if (s.depth >= kMaxDepth || !g_enabled.load(std::memory_order_relaxed)) return;
  const int64_t end = now_ns();
  Ring* ring = this_thread_ring();
  const uint64_t head = ring->head.load(std::memory_order_relaxed);
  if (head - ring->tail.load(std::memory_order_acquire) >= kRingSize) {
    ring->dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Record& r = ring->records[head & (kRingSize - 1)];
  r.start_ns = s.start_ns[s.depth];
  r.end_ns = end;
  r.kind = fn.scope() == at::RecordScope::FUNCTION ? 1 : fn.scope() == at::RecordScope::BACKWARD_FUNCTION ? 2 : 0;
  const char* name = fn.name();
  size_t n = std::strlen(name);
  if (n > kNameBytes) n = kNameBytes;
  std::memcpy(r.name, name, n);
  r.name[n] = '\0';
  ring->head.store(head + 1, std::memory_order_release);
}

void start(bool function_scope, bool autograd_nodes) {
  if (g_handle == 0) {
    std::unordered_set<at::RecordScope, std::hash<at::RecordScope>> scopes = {at::RecordScope::USER_SCOPE};
    if (autograd_nodes) scopes.insert(at::RecordScope::BACKWARD_FUNCTION);
    if (function_scope) scopes.insert(at::RecordScope::FUNCTION);
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(on_enter, on_exit).needsInputs(false).needsOutputs(false).needsIds(false).scopes(
            scopes));
  }
  g_enabled.store(true);
}

void stop() {
  g_enabled.store(false);
  if (g_handle != 0) {
    at::removeCallback(g_handle);
    g_handle = 0;
  }
}

// Hands every range recorded since the last drain to `sink`, oldest first
// per thread; returns how many were dropped because a ring was full.
uint64_t drain_into(gpuutil_hook_range_fn sink, void* ctx) {
  uint64_t dropped = 0;
  for (Ring* r = g_rings.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    const uint64_t head = r->head.load(std::memory_order_acquire);
    uint64_t tail = r->tail.load(std::memory_order_relaxed);
    for (; tail != head; ++tail) {
      const Record& rec = r->records[tail & (kRingSize - 1)];
      sink(ctx, rec.name, rec.start_ns, rec.end_ns, r->tid, rec.kind);
    }
    r->tail.store(tail, std::memory_order_release);
    dropped += r->dropped.exchange(0, std::memory_order_relaxed);
  }
  return dropped;
}

const GpuutilHookApi g_api = {GPUUTIL_HOOK_API_VERSION, &drain_into};

// The same as Python tuples: ([(name, start_ns, end_ns, tid, kind)], dropped).
py::tuple drain() {
  py::list out;
  const uint64_t dropped = drain_into(
      [](void* ctx, const char* name, int64_t start_ns, int64_t end_ns, int64_t tid, int kind) {
        static_cast<py::list*>(ctx)->append(py::make_tuple(py::str(name), start_ns, end_ns, tid, kind));
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
        "Registers the observer (scopes are fixed until stop()).");
  m.def("stop", &stop, "Disables and removes the observer.");
  m.def("drain", &drain, "Returns ([(name, start_ns, end_ns, tid, kind)], dropped) since the last drain.");
  m.def(
      "api", [] { return py::capsule(static_cast<const void*>(&g_api), GPUUTIL_HOOK_API_CAPSULE); },
      "The C drain interface (hook_abi.h) as a capsule, for gpuutil's core.");
  m.def("now_ns", &now_ns, "The hook's clock (CLOCK_MONOTONIC ns, gpuutil's session clock).");
  m.def("torch_version", &torch_version, "The torch version this extension was compiled against.");
  m.attr("ring_size") = kRingSize;
}
