// pybind11 bindings of the NVML sampler (gpuutil._core.NvmlSampler).
//
// Used by python/gpuutil/nvml.py, the opt-in live collector that drains
// device counters into a profile's Session each step. Devices are given as
// (cuda_device_id, uuid, nvml_index) tuples (gpuutil.nvml.DeviceRef);
// None samples every NVML device labelled by NVML index. Blocking calls
// (open, a sampling pass, changing devices, stopping the thread) release
// the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "gpuutil/nvml_sampler.h"
#include "gpuutil/session.h"

namespace py = pybind11;

namespace {

using RefTuple = std::tuple<int32_t, std::string, int32_t>;  // (cuda_device_id, uuid, nvml_index)

std::vector<gpuutil::NvmlDeviceRef> to_refs(const std::vector<RefTuple>& devices) {
  std::vector<gpuutil::NvmlDeviceRef> out;
  for (const auto& [id, uuid, index] : devices) out.push_back({id, uuid, index});
  return out;
}

}  // namespace

void bind_nvml(py::module_& m) {
  py::class_<gpuutil::NvmlSampler>(m, "NvmlSampler")
      .def(py::init([](double interval_s, bool gpm, size_t max_samples,
                       const std::optional<std::vector<RefTuple>>& devices) {
             if (!std::isfinite(interval_s) || interval_s <= 0) throw py::value_error("interval_s must be > 0");
             gpuutil::NvmlSamplerOptions o;
             o.interval_ns = static_cast<int64_t>(interval_s * 1e9);
             o.gpm = gpm;
             o.max_samples = max_samples;
             if (devices) o.devices = to_refs(*devices);
             return new gpuutil::NvmlSampler(o);
           }),
           py::arg("interval_s") = 0.2, py::arg("gpm") = false, py::arg("max_samples") = size_t{1} << 16,
           py::arg("devices") = py::none())
      .def("open", &gpuutil::NvmlSampler::open, py::call_guard<py::gil_scoped_release>(),
           "Loads NVML (GPUUTIL_NVML_LIBRARY or libnvidia-ml.so.1); False with .error set when it cannot.")
      .def_property_readonly("error", &gpuutil::NvmlSampler::error)
      .def(
          "set_devices",
          [](gpuutil::NvmlSampler& s, const std::vector<RefTuple>& devices) { return s.set_devices(to_refs(devices)); },
          py::arg("devices"), py::call_guard<py::gil_scoped_release>(),
          "Replaces the devices sampled; returns how many were opened (problems() says why others were not).")
      .def_property_readonly("device_count", &gpuutil::NvmlSampler::device_count)
      .def_property_readonly(
          "devices",
          [](const gpuutil::NvmlSampler& s) {
            py::list out;
            for (const auto& d : s.devices()) {
              out.append(py::make_tuple(d.device, d.uuid, gpuutil::to_string(d.kind), d.parent_uuid));
            }
            return out;
          },
          "The devices sampled: (device label, NVML UUID, kind, parent GPU UUID) tuples; kind is 'gpu', "
          "'mig_device' or 'gpu_in_mig_mode'.")
      .def_property_readonly("interval_ns", &gpuutil::NvmlSampler::interval_ns)
      .def_property_readonly("dropped", &gpuutil::NvmlSampler::dropped)
      .def("sample_once", &gpuutil::NvmlSampler::sample_once, py::call_guard<py::gil_scoped_release>())
      .def("start", &gpuutil::NvmlSampler::start)
      .def("stop", &gpuutil::NvmlSampler::stop, py::call_guard<py::gil_scoped_release>())
      .def("problems", &gpuutil::NvmlSampler::problems)
      .def(
          "drain_into", [](gpuutil::NvmlSampler& s, gpuutil::Session& session) { s.drain(session); },
          py::arg("session"), py::call_guard<py::gil_scoped_release>(),
          "Moves the buffered counter samples into a gpuutil._core.Session.");
}
