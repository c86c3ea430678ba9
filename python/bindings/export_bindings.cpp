// pybind11 bindings of the timeline exporters (gpuutil._core.perfetto_trace_files).
//
// Same shape as analyze_files in module.cpp: paths in, JSON text out, the
// GIL released for all C++ work; an unreadable file raises ValueError
// "cannot read PATH: reason" (the Python wrapper turns it into TraceError).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/perfetto.h"
#include "gpuutil/trace_dirs.h"

namespace py = pybind11;

namespace {

std::string perfetto_trace_files(const std::vector<std::string>& paths, int indent) {
  if (paths.empty()) throw py::value_error("perfetto_trace_files: no trace paths given");
  std::string text, error;
  {
    py::gil_scoped_release release;
    // A directory (tensorboard_trace_handler's) stands for the traces in it.
    const gpuutil::TraceDirsResult expanded = gpuutil::expand_trace_dirs(paths);
    error = expanded.error;
    std::vector<gpuutil::ImportResult> results;
    results.reserve(expanded.paths.size());
    for (size_t i = 0; i < expanded.paths.size() && error.empty(); ++i) {
      // `-` is standard input, streamed like the analyze path's.
      const std::string& path = expanded.paths[i];
      results.push_back(path == "-" ? gpuutil::import_kineto_fd(0, "<stdin>") : gpuutil::import_kineto_file(path));
      if (!results.back().ok) error = "cannot read " + results.back().store.source + ": " + results.back().error;
    }
    const bool any_event = std::any_of(results.begin(), results.end(), [](const gpuutil::ImportResult& r) {
      const gpuutil::EventStore& s = r.store;
      return !s.activities.empty() || !s.ranges.empty() || !s.api_calls.empty() || !s.counters.empty();
    });
    if (error.empty() && !any_event) {
      // An empty timeline is no export: say so rather than write an empty trace.
      error = "cannot export " + (results.empty() ? std::string("the input") : results.front().store.source) +
              ": it holds no device activity, host range, runtime call or counter to draw";
    }
    if (error.empty()) {
      std::set<int32_t> ranks;
      for (const auto& r : results) ranks.insert(r.store.rank);
      if (ranks.size() != results.size()) {
        for (size_t i = 0; i < results.size(); ++i) results[i].store.rank = static_cast<int32_t>(i);
      }
      std::vector<const gpuutil::EventStore*> stores;
      for (const auto& r : results) stores.push_back(&r.store);
      text = gpuutil::timeline_to_chrome_trace(stores, gpuutil::AnalysisOptions{}, indent);
    }
  }
  if (!error.empty()) {
    std::replace(error.begin(), error.end(), '\n', ' ');
    throw py::value_error(error);
  }
  return text;
}

}  // namespace

void bind_export(py::module_& m) {
  m.def("perfetto_trace_files", &perfetto_trace_files, py::arg("paths"), py::arg("indent") = -1,
        "Import trace files (one per rank) and return the Chrome trace / Perfetto JSON of the timeline\n"
        "with an idle-cause track (see gpuutil/perfetto.h). Raises ValueError 'cannot read PATH: ...'.");
}
