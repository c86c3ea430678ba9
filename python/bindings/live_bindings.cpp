// Python bindings for live collection (gpuutil::LiveCollector: CUPTI and NVTX).
//
// Used by python/gpuutil/_live.py. Every call is a control-path call (start,
// a step boundary, stop); the collector's hot path (CUPTI callbacks, the
// drain thread) never touches Python or the GIL. The GIL is released around
// calls that may wait on the drain thread.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "gpuutil/profiler.h"
#include "gpuutil/session.h"

namespace py = pybind11;

void bind_live(py::module_& m) {
  m.def("nvtx_push_step", &gpuutil::nvtx_push_step, py::arg("step"),
        "Pushes 'gpuutil.step#N' in the 'gpuutil' NVTX domain (visible in Nsight Systems; a no-op without an NVTX "
        "tool; gpuutil's own collector skips the domain).");
  m.def("nvtx_pop_step", &gpuutil::nvtx_pop_step, "Pops the range pushed by nvtx_push_step.");
  py::class_<gpuutil::LiveCollector>(m, "LiveCollector")
      .def(py::init([](gpuutil::Session& session, size_t buffer_count, size_t buffer_bytes,
                       std::vector<std::string> library_dirs, bool driver_api, bool gpu, bool nvtx,
                       std::string nvtx_library, int64_t completion_wait_ms, size_t max_held_steps,
                       int64_t stuck_after_ms, int64_t missing_after_ms) {
             gpuutil::LiveOptions o;
             o.gpu = gpu;
             o.nvtx = nvtx;
             o.nvtx_library = std::move(nvtx_library);
             o.cupti_buffer_count = buffer_count;
             o.cupti_buffer_bytes = buffer_bytes;
             o.cupti_library_dirs = std::move(library_dirs);
             o.cupti_driver_api = driver_api;
             o.cupti_completion_wait_ms = completion_wait_ms;
             o.cupti_max_held_steps = max_held_steps;
             o.cupti_stuck_after_ms = stuck_after_ms;
             o.cupti_missing_after_ms = missing_after_ms;
             return std::make_unique<gpuutil::LiveCollector>(session, std::move(o));
           }),
           py::arg("session"), py::arg("buffer_count") = 32, py::arg("buffer_bytes") = size_t(512) << 10,
           py::arg("library_dirs") = std::vector<std::string>{}, py::arg("driver_api") = true,
           py::arg("gpu") = true, py::arg("nvtx") = false, py::arg("nvtx_library") = "",
           py::arg("completion_wait_ms") = 2000, py::arg("max_held_steps") = 1000, py::arg("stuck_after_ms") = 30000,
           py::arg("missing_after_ms") = 10000, py::keep_alive<1, 2>())
      .def(
          "start",
          [](gpuutil::LiveCollector& c, const std::string& suspended_why) {
            py::gil_scoped_release release;
            return c.start(suspended_why);
          },
          py::arg("suspended_why") = "",
          "Starts collection. Returns '' when GPU (CUPTI) activity is collected, else why not (one line);\n"
          "NVTX collection (nvtx=True) starts too, with its own reason in nvtx_off. A non-empty\n"
          "suspended_why starts GPU collection suspended (another CUPTI client owns CUPTI; see resume).")
      .def_property_readonly("nvtx_off", &gpuutil::LiveCollector::nvtx_off)
      .def(
          "step_boundary",
          [](gpuutil::LiveCollector& c, int64_t t_ns) {
            py::gil_scoped_release release;
            return c.step_boundary(t_ns);
          },
          py::arg("t_ns"),
          "A step boundary; returns at once the time up to which device data is complete (every launch that "
          "began before it has its device record).")
      .def(
          "wait_complete",
          [](gpuutil::LiveCollector& c, int64_t t_ns, int64_t timeout_ms) {
            py::gil_scoped_release release;
            return c.wait_complete(t_ns, timeout_ms);
          },
          py::arg("t_ns"), py::arg("timeout_ms"),
          "Blocks until device data is complete up to t_ns or timeout_ms passed; returns the time up to which it is.")
      .def(
          "suspend",
          [](gpuutil::LiveCollector& c, const std::string& why, std::optional<int64_t> since_ns) {
            py::gil_scoped_release release;
            c.suspend(why, since_ns.value_or(INT64_MIN));
          },
          py::arg("why"), py::arg("since_ns") = py::none(),
          "Hands CUPTI to another client (torch.profiler): waits for launched work, disables, force-flushes,\n"
          "restores CUPTI's clock; steps until resume() carry gpu_collection_suspended.")
      .def(
          "resume",
          [](gpuutil::LiveCollector& c) {
            py::gil_scoped_release release;
            return c.resume();
          },
          "Takes CUPTI back after the other client stopped; '' or why not.")
      .def_property_readonly("suspended", &gpuutil::LiveCollector::suspended)
      .def(
          "stop",
          [](gpuutil::LiveCollector& c) {
            py::gil_scoped_release release;
            c.stop();
          },
          "Waits for launched work (bounded), disables CUPTI activity kinds, flushes, drains, restores CUPTI's "
          "clock and detaches.")
      .def_property_readonly("running", &gpuutil::LiveCollector::running)
      .def_property_readonly("library_path", &gpuutil::LiveCollector::library_path)
      .def("counters", [](const gpuutil::LiveCollector& c) {
        const gpuutil::LiveCounters k = c.counters();
        py::dict d;
        d["buffers_completed"] = k.buffers_completed;
        d["records_dropped"] = k.records_dropped;
        d["buffers_starved"] = k.buffers_starved;
        d["buffers_invalid"] = k.buffers_invalid;
        d["buffers_foreign"] = k.buffers_foreign;
        d["buffers_in_pool"] = k.buffers_in_pool;
        d["records_decoded"] = k.records_decoded;
        d["events_stored"] = k.events_stored;
        d["records_unfinished"] = k.records_unfinished;
        d["completion_timeouts"] = k.completion_timeouts;
        d["runtime_cbids"] = k.runtime_cbids;
        d["driver_cbids"] = k.driver_cbids;
        d["calls_learnt"] = k.calls_learnt;
        d["calls_dropped"] = k.calls_dropped;
        d["flushes"] = k.flushes;
        d["steps_given_up"] = k.steps_given_up;
        d["stuck"] = k.stuck;
        d["records_missing"] = k.records_missing;
        d["clock_mismatched"] = k.clock_mismatched;
        d["timestamp_registrations"] = k.timestamp_registrations;
        d["nested_calls"] = k.nested_calls;
        d["streams_created"] = k.streams_created;
        d["resubscribed"] = k.resubscribed;
        d["api_callbacks_on"] = k.api_callbacks_on;
        d["nvtx_ranges"] = k.nvtx_ranges;
        return d;
      })
      .def(
          "release_subscription",
          [](gpuutil::LiveCollector& c) {
            py::gil_scoped_release release;
            c.release_subscription();
          },
          "Lets go of CUPTI's subscription alone (collection goes on), so a client initialising now can subscribe.")
      .def(
          "take_subscription",
          [](gpuutil::LiveCollector& c) {
            py::gil_scoped_release release;
            return c.take_subscription();
          },
          "Asks for CUPTI's subscription again: '' when its callbacks are back, else why not.")
      .def(
          "learnt_calls",
          [](const gpuutil::LiveCollector& c) {
            py::dict d;
            for (const auto& [name, n] : c.learnt_calls().by_name) d[py::str(name)] = n;
            return d;
          },
          "Calls learnt at API exit, by CUPTI callback name ({'__cudaLaunchKernel_v13000': 12, ...}); after stop.");
}
