// The fake CUPTI's matrix as text, and the cells tests run under
// (docs/live-collection.md, "The fake's matrix").
//
// One spelling everywhere: GPUUTIL_FAKE_CUPTI_MATRIX (read by the fake when
// it loads), gpuutil_replay --matrix, and test names. A cell is a
// comma-separated list of settings; unnamed settings keep their defaults:
//
//   seal=1|0                    default flush seals a partly filled buffer (1) or keeps appending to it (0)
//   records=thread|device       device records reserved in the writing buffer at launch, or written per device at completion
//   buffers=thread|global|switch  per-thread buffers, one global buffer, or per thread until the first default flush
//   api=start|exit              API record written when the call is made (before its device records) or at its exit
//   skew=N                      device timestamps N ns earlier than host ones
//   hold=0|1                    each buffer slot holds a prefetched empty buffer no default flush returns
//   client=kineto|teardown+per_thread_reset+other_thread+own_clock+keeps_subscription   the second client's behaviour
//   launch=chevron|runtime      kernels launched through CUDA 13's <<<>>> (__cudaLaunchKernel) or cudaLaunchKernel
//   nested=0|outer|inner        runtime launches/copies call the driver inside; the record carries the outer or inner id
//   flush=always|lazy           a default flush always returns what is complete, or every other one returns nothing
//   graphs=launch|internal      graph nodes' records on the launch stream, or on internal stream ids
//   subscribers=one|multi       one subscriber (<= 13.1), or CUPTI 13.2's multiple-subscriber mode
//
// "default" (or "") names the cell with every default.
//
// Which cells run: ci_cells() in CI; GPUUTIL_FAKE_CUPTI_CELLS=full runs the
// whole product (the documented longer run), and any other value is a
// ';'-separated list of cells.
//
// Header-only: the fake parses its environment variable with it, the tests
// and the replay tool name and choose cells with it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "fake_cupti.h"

namespace fake_matrix {

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = s.find(sep, a);
    out.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return out;
}

struct ClientFlag {
  const char* name;
  int flag;
};
inline constexpr ClientFlag kClientFlags[] = {{"teardown", FAKE_CUPTI_CLIENT_TEARDOWN},
                                              {"per_thread_reset", FAKE_CUPTI_CLIENT_PER_THREAD_RESET},
                                              {"other_thread", FAKE_CUPTI_CLIENT_OTHER_THREAD},
                                              {"own_clock", FAKE_CUPTI_CLIENT_OWN_CLOCK},
                                              {"keeps_subscription", FAKE_CUPTI_CLIENT_KEEPS_SUBSCRIPTION}};

// Parses a cell into `out` (starting from the defaults). "" on success, else
// what is wrong, in one line.
inline std::string parse(const std::string& text, fake_cupti_matrix& out) {
  out = fake_cupti_matrix{};
  if (text.empty() || text == "default") return "";
  for (const std::string& item : split(text, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return "\"" + item + "\" is not key=value";
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    auto pick = [&](std::initializer_list<const char*> names, int& field) -> std::string {
      int i = 0;
      for (const char* n : names) {
        if (v == n) {
          field = i;
          return "";
        }
        ++i;
      }
      std::string all;
      for (const char* n : names) all += std::string(all.empty() ? "" : "|") + n;
      return k + " takes " + all + ", not \"" + v + "\"";
    };
    std::string err;
    if (k == "seal") {
      int sealed = 1;
      err = pick({"0", "1"}, sealed);
      out.keep_appending = sealed ? 0 : 1;
    } else if (k == "records") {
      err = pick({"thread", "device"}, out.device_records);
    } else if (k == "buffers") {
      err = pick({"thread", "global", "switch"}, out.buffers);
    } else if (k == "api") {
      err = pick({"start", "exit"}, out.api_record_at_exit);
    } else if (k == "hold") {
      err = pick({"0", "1"}, out.hold_empty);
    } else if (k == "skew") {
      char* end = nullptr;
      const long long ns = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0') return "skew takes an integer (ns), not \"" + v + "\"";
      out.skew_ns = ns;
    } else if (k == "client") {
      if (v == "kineto") continue;
      for (const std::string& f : split(v, '+')) {
        int flag = 0;
        for (const ClientFlag& c : kClientFlags) flag = f == c.name ? c.flag : flag;
        if (flag == 0) {
          return "client takes kineto or teardown+per_thread_reset+other_thread+own_clock+keeps_subscription, not \"" +
                 f + "\"";
        }
        out.second_client |= flag;
      }
    } else if (k == "launch") {
      err = pick({"chevron", "runtime"}, out.launch_api);
    } else if (k == "nested") {
      err = pick({"0", "outer", "inner"}, out.nested_driver);
    } else if (k == "flush") {
      err = pick({"always", "lazy"}, out.lazy_flush);
    } else if (k == "graphs") {
      err = pick({"launch", "internal"}, out.graph_internal_streams);
    } else if (k == "subscribers") {
      err = pick({"one", "multi"}, out.multi_subscriber);
    } else {
      return "unknown setting \"" + k +
             "\" (seal, records, buffers, api, skew, hold, client, launch, nested, flush, graphs, subscribers)";
    }
    if (!err.empty()) return err;
  }
  return "";
}

// The cell's settings that differ from the defaults, in parse()'s spelling
// ("default" when none).
inline std::string name(const fake_cupti_matrix& m) {
  std::vector<std::string> parts;
  if (m.keep_appending) parts.push_back("seal=0");
  if (m.device_records) parts.push_back("records=device");
  if (m.buffers == FAKE_CUPTI_BUFFERS_GLOBAL) parts.push_back("buffers=global");
  if (m.buffers == FAKE_CUPTI_BUFFERS_SWITCH) parts.push_back("buffers=switch");
  if (m.api_record_at_exit) parts.push_back("api=exit");
  if (m.skew_ns) parts.push_back("skew=" + std::to_string(m.skew_ns));
  if (m.hold_empty) parts.push_back("hold=1");
  if (m.second_client) {
    std::string c;
    for (const ClientFlag& f : kClientFlags) {
      if (m.second_client & f.flag) c += std::string(c.empty() ? "" : "+") + f.name;
    }
    parts.push_back("client=" + c);
  }
  if (m.launch_api == FAKE_CUPTI_LAUNCH_RUNTIME) parts.push_back("launch=runtime");
  if (m.nested_driver) parts.push_back(m.nested_driver == FAKE_CUPTI_NESTED_INNER_ID ? "nested=inner" : "nested=outer");
  if (m.lazy_flush) parts.push_back("flush=lazy");
  if (m.graph_internal_streams) parts.push_back("graphs=internal");
  if (m.multi_subscriber) parts.push_back("subscribers=multi");
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out.empty() ? "default" : out;
}

// name() as a GoogleTest parameter name (letters, digits, underscores).
inline std::string test_name(const fake_cupti_matrix& m) {
  std::string n = name(m);
  for (char& c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) c = '_';
  }
  return n;
}

inline fake_cupti_matrix cell(const std::string& text) {
  fake_cupti_matrix m{};
  const std::string err = parse(text, m);
  if (!err.empty()) {
    std::fprintf(stderr, "fake CUPTI matrix \"%s\": %s\n", text.c_str(), err.c_str());
    std::abort();
  }
  return m;
}

// A few microseconds: CUPTI's interpolation of GPU times onto the CPU clock.
// A constant offset, within what the issue describes ("a kernel's start may
// precede its launch call's end"): less than the fake's launch latencies
// (4-5 us), so no kernel appears to start before its launch call began.
inline constexpr int64_t kSkewNs = 3000;

// What CI runs: the defaults, each unknown flipped alone, and two cells
// with the adverse settings at once, one per device-record placement (the
// second with every behaviour issue 36 added).
inline std::vector<fake_cupti_matrix> ci_cells() {
  return {cell("default"),        cell("seal=0"),
          cell("records=device"), cell("buffers=global"),
          cell("buffers=switch"), cell("api=exit"),
          cell("skew=3000"),      cell("hold=1"),
          cell("launch=runtime"), cell("nested=outer"),
          cell("nested=inner"),   cell("flush=lazy"),
          cell("graphs=internal"), cell("subscribers=multi"),
          cell("seal=0,buffers=global,api=exit,skew=3000"),
          cell("records=device,buffers=switch,api=exit,skew=3000,nested=inner,flush=lazy,graphs=internal")};
}

// Every combination of the first six unknowns (the second client is
// varied by the coexistence tests themselves; the settings issue 36 added
// are crossed with them in ci_cells()): 2 x 2 x 3 x 2 x 2 x 2 = 96 cells.
inline std::vector<fake_cupti_matrix> full_cells() {
  std::vector<fake_cupti_matrix> out;
  for (int seal : {0, 1})
    for (int records : {0, 1})
      for (int buffers : {0, 1, 2})
        for (int api : {0, 1})
          for (int64_t skew : {int64_t(0), kSkewNs})
            for (int hold : {0, 1}) {
              fake_cupti_matrix m{};
              m.keep_appending = seal ? 0 : 1;
              m.device_records = records;
              m.buffers = buffers;
              m.api_record_at_exit = api;
              m.skew_ns = skew;
              m.hold_empty = hold;
              out.push_back(m);
            }
  return out;
}

// The cells this run covers: GPUUTIL_FAKE_CUPTI_CELLS unset or "ci" ->
// ci_cells(); "full" -> full_cells(); else a ';'-separated list of cells.
inline std::vector<fake_cupti_matrix> cells_for_run() {
  const char* env = std::getenv("GPUUTIL_FAKE_CUPTI_CELLS");
  const std::string v = env ? env : "";
  if (v.empty() || v == "ci") return ci_cells();
  if (v == "full") return full_cells();
  std::vector<fake_cupti_matrix> out;
  for (const std::string& c : split(v, ';')) out.push_back(cell(c));
  return out;
}

}  // namespace fake_matrix

// How GoogleTest prints a cell (found by argument-dependent lookup).
inline void PrintTo(const fake_cupti_matrix& m, std::ostream* os) { *os << fake_matrix::name(m); }
