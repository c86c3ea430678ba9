// Python binding of the cross-rank assembler (gpuutil/cluster.h): the
// leader rank's exchange thread (gpuutil/torch/_cluster.py) feeds it the
// rank batches it reads from the c10d store and renders the view. All work
// runs without the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "gpuutil/cluster.h"

namespace py = pybind11;

void bind_cluster(py::module_& m) {
  py::class_<gpuutil::ClusterAssembler>(m, "ClusterAssembler",
                                        "Assembles the cross-rank view from rank batches (docs/distributed.md).")
      .def(py::init([](int32_t world_size, size_t window_steps, size_t recent_steps) {
             gpuutil::ClusterOptions o;
             o.world_size = world_size;
             o.window_steps = window_steps;
             o.recent_steps = recent_steps;
             return new gpuutil::ClusterAssembler(o);
           }),
           py::arg("world_size"), py::arg("window_steps") = 128, py::arg("recent_steps") = 8)
      .def(
          "ingest",
          [](gpuutil::ClusterAssembler& a, const std::string& json) {
            int32_t rank = -1;
            bool finished = false;
            std::string error;
            {
              py::gil_scoped_release release;
              error = gpuutil::ingest_rank_batch_json(a, json, &rank, &finished);
            }
            return py::make_tuple(error, rank, finished);
          },
          py::arg("json"),
          "Adds one rank batch; returns (error, rank, finished): error is '' or a one-line message (nothing added "
          "then).")
      .def("set_host", &gpuutil::ClusterAssembler::set_host, py::arg("rank"), py::arg("host"))
      .def("set_clock_offset", &gpuutil::ClusterAssembler::set_clock_offset, py::arg("rank"), py::arg("offset_ns"),
           py::arg("uncertainty_ns"))
      .def("mark_finished", &gpuutil::ClusterAssembler::mark_finished, py::arg("rank"), py::arg("heard_from") = true)
      .def("advance", &gpuutil::ClusterAssembler::advance, py::arg("final") = false,
           py::call_guard<py::gil_scoped_release>())
      .def(
          "view_json",
          [](const gpuutil::ClusterAssembler& a, int indent) {
            py::gil_scoped_release release;
            return gpuutil::cluster_view_to_json(a.view(), indent);
          },
          py::arg("indent") = -1, "The view as JSON: {ranks, cluster, findings}.")
      .def_property_readonly("pending_steps", &gpuutil::ClusterAssembler::pending_steps)
      .def_property_readonly("duplicates", &gpuutil::ClusterAssembler::duplicates)
      .def_property_readonly("foreign", &gpuutil::ClusterAssembler::foreign)
      .def_property_readonly("late", &gpuutil::ClusterAssembler::late);
}
