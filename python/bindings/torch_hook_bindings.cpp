// Drains gpuutil's LibTorch hook into a live Session, in C++.
//
// The hook (python/gpuutil/torch/csrc/record_function_hook.cpp) is built
// against the installed torch; this module is built without torch. They
// meet through the plain C interface in hook_abi.h, handed over once as a
// capsule (`TorchHookDrain(session, hook.api())`). At each step end one
// `drain()` call moves every recorded range from the hook's rings into the
// session: no Python object per range, names interned and classified once
// per distinct name, thread indices resolved once per thread.
//
// Rules applied to the hook's ranges (docs/pytorch.md):
// - `Optimizer.step#...` is skipped: step pre/post hooks time the optimizer
//   step (PyTorch's own range closes after the automatic step boundary);
// - autograd nodes (kind 2) get the engine's prefix,
//   "autograd::engine::evaluate_function: ", as Kineto traces spell them;
// - ranges dropped by full rings are counted (torch_ranges_dropped).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <unistd.h>
#include <utility>

#include "gpuutil/range_classify.h"
#include "gpuutil/session.h"
#include "hook_abi.h"

namespace py = pybind11;

namespace {

constexpr std::string_view kBackwardPrefix = "autograd::engine::evaluate_function: ";
constexpr size_t kMaxCachedNames = 4096;  // distinct names cached; the cache restarts beyond

class TorchHookDrain {
 public:
  TorchHookDrain(gpuutil::Session& session, const py::capsule& api) : session_(session), pid_(::getpid()) {
    if (std::string_view(api.name() ? api.name() : "") != GPUUTIL_HOOK_API_CAPSULE) {
      throw py::value_error(std::string("expected a capsule named ") + GPUUTIL_HOOK_API_CAPSULE);
    }
    api_ = api.get_pointer<const GpuutilHookApi>();
    if (api_ == nullptr || api_->version != GPUUTIL_HOOK_API_VERSION) {
      throw py::value_error("the LibTorch hook speaks another interface version; rebuild it");
    }
  }

  // Moves every range recorded since the last drain into the session.
  // Returns the number of ranges added.
  uint64_t drain() {
    added_ = 0;
    const uint64_t dropped = api_->drain(&TorchHookDrain::on_range, this);
    if (dropped > 0) session_.count(gpuutil::Diag::torch_ranges_dropped, dropped, std::to_string(dropped) + " ranges");
    return added_;
  }

 private:
  struct NameInfo {
    gpuutil::NameId id;
    gpuutil::RangeCategory category;
    bool skip;
  };

  static void on_range(void* ctx, const char* name, int64_t start_ns, int64_t end_ns, int64_t tid, int kind) {
    static_cast<TorchHookDrain*>(ctx)->add(name, start_ns, end_ns, tid, kind);
  }

  void add(std::string_view name, int64_t start_ns, int64_t end_ns, int64_t tid, int kind) {
    const NameInfo& info = lookup(name, kind);
    if (info.skip) return;
    gpuutil::HostRange r;
    r.name = info.id;
    r.start_ns = start_ns;
    r.end_ns = end_ns;
    r.thread = thread(tid);
    r.category = info.category;
    session_.add_range(r);
    ++added_;
  }

  const NameInfo& lookup(std::string_view name, int kind) {
    auto& names = names_[kind == 2 ? 2 : kind == 1 ? 1 : 0];
    auto it = names.find(name);
    if (it != names.end()) return it->second;
    if (names.size() >= kMaxCachedNames) names.clear();
    std::string full = kind == 2 ? std::string(kBackwardPrefix) + std::string(name) : std::string(name);
    NameInfo info{};
    info.skip = kind == 0 && name.substr(0, 15) == "Optimizer.step#";
    if (!info.skip) {
      info.id = session_.intern(full);
      info.category = gpuutil::classify_range(full, kind == 1);
    }
    return names.emplace(std::string(name), info).first->second;
  }

  uint32_t thread(int64_t tid) {
    if (tid == last_tid_) return last_thread_;
    auto it = threads_.find(tid);
    if (it == threads_.end()) {
      // The kernel's name for the thread ("pt_autograd_0", ...); a thread
      // the session already knows (the training thread) keeps its name.
      std::string comm;
      std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/comm");
      std::getline(f, comm);
      it = threads_.emplace(tid, session_.thread_index(pid_, tid, comm)).first;
    }
    last_tid_ = tid;
    last_thread_ = it->second;
    return last_thread_;
  }

  gpuutil::Session& session_;
  const GpuutilHookApi* api_ = nullptr;
  int64_t pid_;
  std::map<std::string, NameInfo, std::less<>> names_[3];  // by kind
  std::map<int64_t, uint32_t> threads_;
  int64_t last_tid_ = -1;
  uint32_t last_thread_ = 0;
  uint64_t added_ = 0;
};

}  // namespace

void bind_torch_hook(py::module_& m) {
  py::class_<TorchHookDrain>(m, "TorchHookDrain")
      .def(py::init<gpuutil::Session&, const py::capsule&>(), py::arg("session"), py::arg("api"),
           py::keep_alive<1, 2>(), py::keep_alive<1, 3>(),
           "Connects the LibTorch hook's C drain interface (hook.api()) to a Session.")
      .def("drain", &TorchHookDrain::drain,
           "Moves every range recorded since the last drain into the session; returns how many were added.");
}
