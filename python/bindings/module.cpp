// pybind11 module gpuutil._core: the thin bridge from Python to the C++ core.
//
// It exposes only what the public Python API (python/gpuutil/_api.py) needs:
// analysing trace files into the JSON report (gpuutil.report/1), the
// library version, the report schema id and the diagnostics registry. The
// report crosses the boundary as a JSON string, so Python sees exactly what
// every other exporter sees and no C++ object lifetimes leak into Python.
//
// Threading: analyze_files() releases the GIL for all C++ work (import,
// analysis, serialisation), and imports the files of a multi-rank job in
// parallel (gpuutil/analyze_traces.h, which the native gpuutil-analyze
// command shares).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/analyze_traces.h"
#include "gpuutil/diagnostics.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/range_classify.h"
#include "gpuutil/report_json.h"
#include "gpuutil/trace_dirs.h"

#ifndef GPUUTIL_VERSION
#define GPUUTIL_VERSION "0.1.0"  // keep in step with project() in CMakeLists.txt
#endif

namespace py = pybind11;

void bind_session(py::module_& m);  // session_bindings.cpp
void bind_export(py::module_& m);   // export_bindings.cpp
void bind_nvml(py::module_& m);     // nvml_bindings.cpp
void bind_live(py::module_& m);     // live_bindings.cpp
void bind_torch_hook(py::module_& m);  // torch_hook_bindings.cpp
void bind_cluster(py::module_& m);     // cluster_bindings.cpp
void bind_step_path(py::module_& m);   // step_path_bindings.cpp
void bind_analyze_rank(py::module_& m);  // analyze_rank_bindings.cpp

namespace {

// Raised (as gpuutil._core.TraceError, a ValueError) when an input cannot be
// read at all: missing file, broken gzip, invalid JSON.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `-` is standard input (as on the command line), read by the importer's
// streaming reader; every other path is a file, FIFO or /dev/fd/N.
std::vector<gpuutil::TraceInput> trace_inputs(const std::vector<std::string>& paths) {
  std::vector<gpuutil::TraceInput> inputs;
  inputs.reserve(paths.size());
  bool standard_input = false;
  for (const auto& p : paths) {
    if (p == "-") {
      if (standard_input) throw py::value_error("standard input (-) can be given once");
      standard_input = true;
      inputs.push_back(gpuutil::TraceInput{"<stdin>", nullptr, 0});
    } else {
      inputs.push_back(gpuutil::TraceInput{p, nullptr});
    }
  }
  return inputs;
}

std::string analyze_files(const std::vector<std::string>& paths, std::optional<double> flops_per_step,
                          const std::string& dtype, std::optional<double> peak_tflops, int indent,
                          std::optional<uint64_t> max_memory_bytes, bool progress) {
  if (paths.empty()) throw py::value_error("analyze_files: no trace paths given");
  gpuutil::AnalysisOptions options;
  options.flops_per_step = flops_per_step;
  options.dtype = dtype;
  options.peak_tflops = peak_tflops;
  // A directory (tensorboard_trace_handler's) stands for the traces in it.
  const gpuutil::TraceDirsResult expanded = gpuutil::expand_trace_dirs(paths);
  if (!expanded.ok) throw TraceError(expanded.error);
  const std::vector<gpuutil::TraceInput> inputs = trace_inputs(expanded.paths);
  gpuutil::ImportOptions import;
  if (max_memory_bytes) import.memory_budget_bytes = *max_memory_bytes;
  // Waiting lines go straight to the process's stderr (the GIL is released).
  if (progress) import.on_wait = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  gpuutil::AnalyzeTracesResult result;
  {
    py::gil_scoped_release release;
    result = gpuutil::analyze_traces(inputs, options, indent, import);
  }
  if (!result.ok) throw TraceError(result.error);
  return std::move(result.json);
}

uint64_t parse_memory_size(const std::string& text) {
  uint64_t bytes = 0;
  std::string why;
  if (!gpuutil::parse_memory_size(text, &bytes, &why)) throw py::value_error(why);
  return bytes;
}

py::list diagnostics_registry() {
  py::list out;
  for (size_t i = 0; i < gpuutil::kDiagCount; ++i) {
    const gpuutil::DiagInfo& info = gpuutil::diag_info(static_cast<gpuutil::Diag>(i));
    py::dict d;
    d["name"] = info.name;
    d["severity"] = gpuutil::to_string(info.severity);
    d["description"] = info.description;
    out.append(std::move(d));
  }
  return out;
}

}  // namespace

// The module holds no mutable state, so it is safe without the GIL (free-threaded builds).
PYBIND11_MODULE(_core, m, py::mod_gil_not_used()) {
  m.doc() = "gpuutil C++ core: trace import, step analysis and the JSON report.";

  py::register_exception<TraceError>(m, "TraceError", PyExc_ValueError);

  m.def("analyze_files", &analyze_files, py::arg("paths"), py::arg("flops_per_step") = py::none(),
        py::arg("dtype") = "bf16", py::arg("peak_tflops") = py::none(), py::arg("indent") = -1,
        py::arg("max_memory_bytes") = py::none(), py::arg("progress") = false,
        "Import Kineto/PyTorch-profiler trace files (one per rank; '-' is standard input) and analyse them.\n\n"
        "Returns the gpuutil.report/1 JSON document as a string (compact when indent < 0).\n"
        "max_memory_bytes: the import's memory budget (None: the default; 0: none).\n"
        "progress: print a line on stderr while waiting for an input (a FIFO's writer).\n"
        "Raises TraceError (a ValueError) 'cannot read PATH: ERROR' when a file cannot be read.\n"
        "The GIL is released while the C++ core works.");
  m.def("parse_memory_size", &parse_memory_size, py::arg("text"),
        "Bytes of a memory size such as '512M', '2G' or 'unlimited' (0). Raises ValueError (one line).");
  m.attr("DEFAULT_MAX_MEMORY_BYTES") = gpuutil::kDefaultImportMemoryBudgetBytes;
  m.def("set_communication_kernel_patterns", &gpuutil::set_communication_kernel_patterns, py::arg("substrings"),
        "Kernel-name substrings (case-insensitive) that mark the user's own communication kernels, besides the "
        "built-in families; replaces $GPUUTIL_COMM_KERNELS for the process (docs/accounting.md, 'Communication').");
  m.def("communication_kernel_patterns", &gpuutil::communication_kernel_patterns,
        "The user's communication-kernel substrings in force (case-folded).");
  bind_session(m);
  bind_export(m);
  bind_nvml(m);
  bind_live(m);
  bind_torch_hook(m);
  bind_cluster(m);
  bind_step_path(m);
  bind_analyze_rank(m);
  m.def("version", []() { return std::string(GPUUTIL_VERSION); }, "The gpuutil library version.");
  m.def("report_schema", []() { return std::string(gpuutil::kReportSchema); },
        "The JSON report schema id, e.g. 'gpuutil.report/1'.");
  m.def("diagnostics_registry", &diagnostics_registry,
        "Every diagnostic counter the core can report: a list of dicts with name, severity, description.");
}
