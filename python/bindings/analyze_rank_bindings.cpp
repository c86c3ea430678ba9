// Python binding of one rank's offline analysis (gpuutil/analyze_rank.h):
// the function each fan-out worker runs (python/gpuutil/fanout/_worker.py).
// A path is streamed by the importer; bytes (a remote file fetched whole,
// still compressed) are parsed in place, without a copy. The GIL is
// released for all C++ work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gpuutil/analyze_rank.h"

namespace py = pybind11;

void bind_analyze_rank(py::module_& m) {
  m.def(
      "analyze_rank",
      [](const std::string& name, std::optional<py::bytes> data, std::optional<int32_t> rank,
         std::optional<double> flops_per_step, const std::string& dtype, std::optional<double> peak_tflops,
         std::optional<uint64_t> max_memory_bytes) {
        gpuutil::AnalysisOptions options;
        options.flops_per_step = flops_per_step;
        options.dtype = dtype;
        options.peak_tflops = peak_tflops;
        gpuutil::ImportOptions import;
        if (max_memory_bytes) import.memory_budget_bytes = *max_memory_bytes;
        gpuutil::RankAnalysis result;
        if (data) {
          // The bytes object is kept alive by `data` and immutable: parsed in place.
          char* buffer = nullptr;
          Py_ssize_t size = 0;
          if (PyBytes_AsStringAndSize(data->ptr(), &buffer, &size) != 0) throw py::error_already_set();
          const std::string_view view(buffer, static_cast<size_t>(size));
          py::gil_scoped_release release;
          result = gpuutil::analyze_rank_bytes(view, name, options, import, rank);
        } else {
          py::gil_scoped_release release;
          result = gpuutil::analyze_rank(gpuutil::TraceInput{name, nullptr}, options, import, rank);
        }
        if (!result.ok) {
          PyErr_SetString(py::module_::import("gpuutil._core").attr("TraceError").ptr(), result.error.c_str());
          throw py::error_already_set();
        }
        return py::make_tuple(result.rank, result.steps, py::bytes(result.batch_json), py::bytes(result.summary_json));
      },
      py::arg("name"), py::arg("data") = py::none(), py::arg("rank") = py::none(),
      py::arg("flops_per_step") = py::none(), py::arg("dtype") = "bf16", py::arg("peak_tflops") = py::none(),
      py::arg("max_memory_bytes") = py::none(),
      "Import one rank's trace (the file `name`, or `data`: its bytes, JSON or gzip, named `name`) and analyse it "
      "alone.\n\nReturns (rank, steps, batch_json, summary_json): the rank's RankStep batch as a live rank "
      "publishes it (ClusterAssembler.ingest takes it) and its report without per-step detail, both UTF-8 JSON "
      "bytes. rank: overrides the trace's distributedInfo.rank. Raises TraceError (one line naming `name`) when "
      "the trace cannot be read. The GIL is released while the C++ core works.");
}
