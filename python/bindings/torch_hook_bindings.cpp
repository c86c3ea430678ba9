// Binds the core's drain of gpuutil's LibTorch hook (collectors/torch/
// hook_drain.h) for the PyTorch collector: `TorchHookDrain(session,
// hook.api())`, then one `drain()` per step end moves every recorded range
// into the session in C++.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <string_view>

#include "collectors/torch/hook_drain.h"
#include "gpuutil/session.h"
#include "hook_abi.h"

namespace py = pybind11;

namespace {

std::unique_ptr<gpuutil::torch_hook::HookDrain> make_drain(gpuutil::Session& session, const py::capsule& api) {
  if (std::string_view(api.name() ? api.name() : "") != GPUUTIL_HOOK_API_CAPSULE) {
    throw py::value_error(std::string("expected a capsule named ") + GPUUTIL_HOOK_API_CAPSULE +
                          " (the LibTorch hook was built from other gpuutil sources; rebuild it)");
  }
  const auto* hook = api.get_pointer<const GpuutilHookApi>();
  if (!gpuutil::torch_hook::HookDrain::compatible(hook)) {
    throw py::value_error("the LibTorch hook speaks another interface version; rebuild it");
  }
  return std::make_unique<gpuutil::torch_hook::HookDrain>(session, hook);
}

}  // namespace

void bind_torch_hook(py::module_& m) {
  py::class_<gpuutil::torch_hook::HookDrain>(m, "TorchHookDrain")
      .def(py::init(&make_drain), py::arg("session"), py::arg("api"), py::keep_alive<1, 2>(), py::keep_alive<1, 3>(),
           "Connects the LibTorch hook's C drain interface (hook.api()) to a Session.")
      .def("drain", &gpuutil::torch_hook::HookDrain::drain,
           "Moves every range recorded since the last drain into the session; returns how many were added.");
}
