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
// parallel (the importer is thread-safe; each call owns its parser).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/diagnostics.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report_json.h"

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

namespace {

// Raised (as gpuutil._core.TraceError, a ValueError) when an input cannot be
// read at all: missing file, broken gzip, invalid JSON.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Imports every path, in parallel when there are several (one file per
// thread; each file then parses on one thread, so the cores are not
// oversubscribed), or a single file with the importer's own two-thread
// parse. Results keep the order of `paths`.
std::vector<gpuutil::ImportResult> import_all(const std::vector<std::string>& paths) {
  std::vector<gpuutil::ImportResult> results(paths.size());
  const size_t hw = std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t workers = std::min(paths.size(), hw);
  if (workers <= 1) {
    for (size_t i = 0; i < paths.size(); ++i) results[i] = gpuutil::import_kineto_file(paths[i]);
    return results;
  }
  std::atomic<size_t> next{0};
  gpuutil::ImportOptions one_thread;
  one_thread.threads = 1;
  auto work = [&]() {
    for (size_t i = next.fetch_add(1); i < paths.size(); i = next.fetch_add(1)) {
      results[i] = gpuutil::import_kineto_file(paths[i], one_thread);
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return results;
}

std::string analyze_files(const std::vector<std::string>& paths, std::optional<double> flops_per_step,
                          const std::string& dtype, std::optional<double> peak_tflops, int indent) {
  if (paths.empty()) throw py::value_error("analyze_files: no trace paths given");
  gpuutil::AnalysisOptions options;
  options.flops_per_step = flops_per_step;
  options.dtype = dtype;
  options.peak_tflops = peak_tflops;

  std::string json;
  std::string error;
  {
    py::gil_scoped_release release;
    std::vector<gpuutil::ImportResult> results = import_all(paths);
    for (size_t i = 0; i < results.size() && error.empty(); ++i) {
      if (!results[i].ok) error = "cannot read " + paths[i] + ": " + results[i].error;
    }
    if (error.empty()) {
      // One file is one rank. When the traces do not name distinct ranks
      // themselves, the position on the command line does.
      std::set<int32_t> ranks;
      for (const auto& r : results) ranks.insert(r.store.rank);
      if (ranks.size() != results.size()) {
        for (size_t i = 0; i < results.size(); ++i) results[i].store.rank = static_cast<int32_t>(i);
      }
      std::vector<const gpuutil::EventStore*> stores;
      stores.reserve(results.size());
      for (const auto& r : results) stores.push_back(&r.store);
      const gpuutil::Report report = gpuutil::analyze(stores, options);
      json = gpuutil::report_to_json(report, indent);
    }
  }
  if (!error.empty()) {
    // Keep the message one line whatever the importer wrote.
    std::replace(error.begin(), error.end(), '\n', ' ');
    std::replace(error.begin(), error.end(), '\r', ' ');
    throw TraceError(error);
  }
  return json;
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
        "Import Kineto/PyTorch-profiler trace files (one per rank) and analyse them.\n\n"
        "Returns the gpuutil.report/1 JSON document as a string (compact when indent < 0).\n"
        "Raises TraceError (a ValueError) 'cannot read PATH: ERROR' when a file cannot be read.\n"
        "The GIL is released while the C++ core works.");
  bind_session(m);
  bind_export(m);
  bind_nvml(m);
  bind_live(m);
  bind_torch_hook(m);
  bind_cluster(m);
  bind_step_path(m);
  m.def("version", []() { return std::string(GPUUTIL_VERSION); }, "The gpuutil library version.");
  m.def("report_schema", []() { return std::string(gpuutil::kReportSchema); },
        "The JSON report schema id, e.g. 'gpuutil.report/1'.");
  m.def("diagnostics_registry", &diagnostics_registry,
        "Every diagnostic counter the core can report: a list of dicts with name, severity, description.");
}
