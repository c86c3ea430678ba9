// Python bindings for the live session core (gpuutil::Session).
//
// Used by gpuutil.profile(): step boundaries and coarse host ranges come
// from Python at most a few times per step; collectors with a hot path
// (CUPTI, NVTX, RecordFunction) feed the session from C++ instead. Reports
// cross as compact JSON strings, like analyze_files().
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuutil/clock.h"
#include "gpuutil/range_classify.h"
#include "gpuutil/report_json.h"
#include "gpuutil/report_read.h"
#include "gpuutil/run_totals.h"
#include "gpuutil/session.h"

namespace py = pybind11;

namespace {

std::vector<std::string> jsons(std::vector<gpuutil::StepOutput>&& outs) {
  std::vector<std::string> v;
  v.reserve(outs.size());
  for (auto& o : outs) v.push_back(std::move(o.json));
  return v;
}

gpuutil::Diag diag_by_name(const std::string& name) {
  for (size_t i = 0; i < gpuutil::kDiagCount; ++i) {
    if (name == gpuutil::diag_info(static_cast<gpuutil::Diag>(i)).name) return static_cast<gpuutil::Diag>(i);
  }
  throw py::value_error("unknown diagnostic: " + name);
}

}  // namespace

void bind_session(py::module_& m) {
  m.def("now_ns", &gpuutil::session_now_ns, "The session clock (CLOCK_MONOTONIC ns).");
  m.def(
      "run_totals_of_reports",
      [](const std::vector<std::string>& reports, std::optional<int64_t> outside_steps_ns,
         const std::map<std::string, int64_t>& outside_named_ns) {
        std::vector<gpuutil::Report> parsed(reports.size());
        for (size_t i = 0; i < reports.size(); ++i) {
          std::string error;
          if (!gpuutil::report_from_json(reports[i], &parsed[i], &error)) {
            throw py::value_error("report " + std::to_string(i + 1) + ": " + error);
          }
        }
        gpuutil::RunTotals t = gpuutil::run_totals_of_reports(parsed);
        if (outside_steps_ns) {
          // The run's own record (gpuutil.run/1, written at the profile's
          // stop): the outside time no step report holds (before the first
          // step, after the last), named as the live session named it.
          if (*outside_steps_ns < 0) throw py::value_error("outside_steps_ns is negative");
          t.outside_steps_ns = *outside_steps_ns;
          t.outside_named_ns = {};
          for (const auto& [name, ns] : outside_named_ns) {
            bool known = false;
            for (size_t k = 0; k < gpuutil::kOutsideKindCount; ++k) {
              if (name == gpuutil::outside_kind_name(static_cast<gpuutil::OutsideKind>(k))) {
                t.outside_named_ns[k] = std::max<int64_t>(0, ns);
                known = true;
              }
            }
            if (!known) throw py::value_error("unknown outside-steps kind: " + name);
          }
        }
        return gpuutil::run_totals_to_json(t);
      },
      py::arg("reports"), py::arg("outside_steps_ns") = py::none(),
      py::arg("outside_named_ns") = std::map<std::string, int64_t>{},
      "Run totals (the JSON Session.run_totals_json gives) of step reports read back from a file, each a "
      "gpuutil.report/1 JSON document, in file order: the run's findings by the same rules as prof.summary().\n"
      "outside_steps_ns / outside_named_ns: the run record's outside time (gpuutil.run/1), replacing the gaps "
      "between the reports' steps.");
  py::class_<gpuutil::Session>(m, "Session")
      .def(py::init([](const std::string& jsonl_path, int rank, std::optional<double> flops_per_step,
                       const std::string& dtype, std::optional<double> peak_tflops, size_t max_pending_events,
                       std::optional<double> hardware_flops_per_step) {
             gpuutil::SessionOptions o;
             o.jsonl_path = jsonl_path;
             o.rank = rank;
             o.analysis.flops_per_step = flops_per_step;
             o.analysis.dtype = dtype;
             o.analysis.peak_tflops = peak_tflops;
             o.analysis.hardware_flops_per_step = hardware_flops_per_step;
             o.max_pending_events = max_pending_events;
             return std::make_unique<gpuutil::Session>(std::move(o));
           }),
           py::arg("jsonl_path") = "", py::arg("rank") = 0, py::arg("flops_per_step") = py::none(),
           py::arg("dtype") = "bf16", py::arg("peak_tflops") = py::none(),
           py::arg("max_pending_events") = size_t(1) << 22, py::arg("hardware_flops_per_step") = py::none())
      .def_property_readonly("ok", &gpuutil::Session::ok)
      .def_property_readonly("error", &gpuutil::Session::error)
      .def("begin_step", &gpuutil::Session::begin_step, py::arg("step"), py::arg("t_ns"))
      .def("end_step", &gpuutil::Session::end_step, py::arg("t_ns"))
      .def("close_step", &gpuutil::Session::close_step, py::arg("step"), py::arg("start_ns"), py::arg("end_ns"),
           "Records the closed step [start_ns, end_ns) (automatic steps).")
      .def("step_open", &gpuutil::Session::step_open)
      .def("set_detail", &gpuutil::Session::set_detail, py::arg("t_ns"), py::arg("on"),
           "From t_ns on the detail tier is on/off; each step report says \"detail\": its state at the step's end.")
      .def_property_readonly("findings_seen", &gpuutil::Session::findings_seen,
                             "How many distinct finding ids the reported steps have had so far.")
      .def("thread_index", &gpuutil::Session::thread_index, py::arg("pid"), py::arg("key"), py::arg("name") = "",
           py::arg("os_tid") = 0,
           "The session thread for `key`: threading.get_ident() & 0xffffffff, the id CUPTI records "
           "((uint32_t)pthread_self()); `name` and `os_tid` (threading.get_native_id()) name it in reports.")
      .def(
          "add_range",
          [](gpuutil::Session& s, const std::string& name, int64_t start_ns, int64_t end_ns, uint32_t thread,
             bool is_op) {
            gpuutil::HostRange r;
            r.name = s.intern(name);
            r.start_ns = start_ns;
            r.end_ns = end_ns;
            r.thread = thread;
            r.category = gpuutil::classify_range(name, is_op);
            s.add_range(r);
          },
          py::arg("name"), py::arg("start_ns"), py::arg("end_ns"), py::arg("thread"), py::arg("is_op") = false,
          "Adds a host range; its category follows PyTorch's naming rules.")
      .def(
          "add_counter",
          [](gpuutil::Session& s, const std::string& name, int64_t ts_ns, int32_t device, double value) {
            gpuutil::CounterSample c;
            c.counter = s.intern(name);
            c.ts_ns = ts_ns;
            c.device = device;
            c.value = value;
            s.add_counter(c);
          },
          py::arg("name"), py::arg("ts_ns"), py::arg("device"), py::arg("value"),
          "Adds a counter sample (e.g. torch_allocated_bytes; docs/report-schema.md, health).")
      .def(
          "count", [](gpuutil::Session& s, const std::string& name, uint64_t n, const std::string& example) {
            s.count(diag_by_name(name), n, example);
          },
          py::arg("name"), py::arg("n") = 1, py::arg("example") = "")
      .def(
          "add_standing_diagnostic",
          [](gpuutil::Session& s, const std::string& name, const std::string& example) {
            s.add_standing_diagnostic(diag_by_name(name), example);
          },
          py::arg("name"), py::arg("example") = "", "Counted once in every later report.")
      .def("set_steps_source", &gpuutil::Session::set_steps_source, py::arg("source"))
      .def(
          "set_devices",
          [](gpuutil::Session& s, const std::vector<py::dict>& devices) {
            std::vector<gpuutil::DeviceInfo> out;
            for (const auto& d : devices) {
              gpuutil::DeviceInfo i;
              auto get = [&d](const char* k, auto def) {
                return d.contains(k) ? d[k].cast<decltype(def)>() : def;
              };
              i.id = get("id", int32_t(0));
              i.name = get("name", std::string());
              i.compute_major = get("compute_major", int32_t(0));
              i.compute_minor = get("compute_minor", int32_t(0));
              i.sm_count = get("sm_count", int32_t(0));
              i.max_threads_per_sm = get("max_threads_per_sm", int32_t(0));
              i.max_blocks_per_sm = get("max_blocks_per_sm", int32_t(0));
              i.registers_per_sm = get("registers_per_sm", int32_t(0));
              i.shared_memory_per_sm_bytes = get("shared_memory_per_sm_bytes", int32_t(0));
              i.warp_size = get("warp_size", int32_t(0));
              i.total_memory_bytes = get("total_memory_bytes", int64_t(0));
              out.push_back(std::move(i));
            }
            s.set_devices(std::move(out));
          },
          py::arg("devices"),
          "Static facts about the devices (dicts with the DeviceInfo fields: id, name, compute_major, sm_count, "
          "...): MFU's peak and the SM efficiency/occupancy estimates need them.")
      .def("set_flops_per_step", &gpuutil::Session::set_flops_per_step, py::arg("flops"), py::arg("source"),
           "FLOPs per step for MFU from the next analysed step on; source becomes flops_source.")
      .def(
          "set_loader",
          [](gpuutil::Session& s, const std::string& name, std::optional<int64_t> num_workers,
             std::optional<bool> pin_memory, std::optional<bool> persistent_workers,
             std::optional<int64_t> prefetch_factor) {
            gpuutil::LoaderSettings settings;
            settings.num_workers = num_workers;
            settings.pin_memory = pin_memory;
            settings.persistent_workers = persistent_workers;
            settings.prefetch_factor = prefetch_factor;
            s.set_loader(name, settings);
          },
          py::arg("name"), py::arg("num_workers") = py::none(), py::arg("pin_memory") = py::none(),
          py::arg("persistent_workers") = py::none(), py::arg("prefetch_factor") = py::none(),
          "The live DataLoader behind the wait ranges `name` has these settings (None: unknown): reports "
          "carry them in `loaders` and findings never recommend one it has.")
      .def("mark_complete_until", &gpuutil::Session::mark_complete_until, py::arg("t_ns"))
      .def(
          "collect",
          [](gpuutil::Session& s, std::optional<int64_t> complete_until_ns) {
            std::vector<gpuutil::StepOutput> outs;
            {
              py::gil_scoped_release release;
              if (complete_until_ns) s.mark_complete_until(*complete_until_ns);
              outs = s.collect();
            }
            return jsons(std::move(outs));
          },
          py::arg("complete_until_ns") = py::none(),
          "Marks data complete up to complete_until_ns (if given), analyses the reportable steps; returns their "
          "JSON lines.")
      .def("start_worker", &gpuutil::Session::start_worker,
           "Starts the background reporter: report_async() then never analyses on the calling thread.")
      .def(
          "report_async",
          [](gpuutil::Session& s, int64_t complete_until_ns) {
            s.mark_complete_until(complete_until_ns);
            py::list lines;
            {
              // Converted and freed before the worker wakes: freeing what it
              // allocated while it allocates would contend for its malloc arena.
              const std::vector<std::string> outs = s.take_lines();
              for (const auto& line : outs) lines.append(py::str(line));
            }
            s.request_report();
            return lines;
          },
          py::arg("complete_until_ns"),
          "Marks data complete up to complete_until_ns, returns the JSON lines the worker finished since the last "
          "call, and wakes it to analyse the newly reportable steps (returns at once).")
      .def(
          "finish", [](gpuutil::Session& s, int64_t t_ns) {
            std::vector<gpuutil::StepOutput> outs;
            {
              py::gil_scoped_release release;
              outs = s.finish(t_ns);
            }
            return jsons(std::move(outs));
          },
          py::arg("t_ns"))
      .def("keep_rank_steps", &gpuutil::Session::keep_rank_steps, py::arg("max_steps"),
           "Keeps every reported step's compact cross-rank summary (at most max_steps) for "
           "take_rank_batch_json(); 0 turns it off.")
      .def(
          "take_rank_batch_json",
          [](gpuutil::Session& s, int32_t rank, const std::string& host, bool finished,
             std::optional<int64_t> clock_offset_ns, std::optional<int64_t> clock_uncertainty_ns, int64_t shift_ns) {
            gpuutil::RankBatch b;
            uint64_t dropped = 0;
            {
              py::gil_scoped_release release;
              b.steps = s.take_rank_steps(&dropped);
            }
            b.rank = rank;
            b.host = host;
            b.finished = finished;
            b.clock_offset_ns = clock_offset_ns;
            b.clock_uncertainty_ns = clock_uncertainty_ns;
            for (auto& st : b.steps) st.start_ns += shift_ns;
            return py::make_tuple(gpuutil::rank_batch_to_json(b), dropped, b.steps.size());
          },
          py::arg("rank"), py::arg("host"), py::arg("finished") = false, py::arg("clock_offset_ns") = py::none(),
          py::arg("clock_uncertainty_ns") = py::none(), py::arg("shift_ns") = 0,
          "Takes the kept step summaries as one rank batch (JSON; docs/distributed.md) of `rank` (the job's rank, "
          "which may differ from the session's when RANK was not in the environment): returns (json, dropped, "
          "steps). shift_ns is added to step starts (the rank's published clock).")
      .def("write_jsonl_line", &gpuutil::Session::write_jsonl_line, py::arg("line"),
           py::call_guard<py::gil_scoped_release>(), "Appends a line to the JSON Lines file (if any).")
      .def(
          "output_status",
          [](const gpuutil::Session& s) {
            const gpuutil::Session::OutputStatus o = s.output_status();
            py::dict d;
            d["path"] = o.path;
            d["lines_written"] = o.lines_written;
            d["lines_lost"] = o.lines_lost;
            d["last_error"] = o.last_error;
            return d;
          },
          "The JSON Lines file: {path, lines_written, lines_lost, last_error} (path '' without one).")
      .def("close_output", &gpuutil::Session::close_output, py::call_guard<py::gil_scoped_release>(),
           "Closes the JSON Lines file (at the profile's stop).")
      .def_property_readonly("steps_reported", &gpuutil::Session::steps_reported)
      .def_property_readonly("outside_steps_ns", &gpuutil::Session::outside_steps_ns)
      .def_property_readonly("pending_events", &gpuutil::Session::pending_events)
      .def(
          "run_totals_json", [](const gpuutil::Session& s) { return gpuutil::run_totals_to_json(s.run_totals()); },
          "Sums over every reported step (devices, host threads, findings) as JSON.");
}
