// gpuutil_replay: plays Kineto traces recorded on GPUs through gpuutil's live
// path on the faithful fake CUPTI, under one or more cells of the fake's
// matrix, and compares the live per-step reports with `gpuutil analyze` of
// the same trace: buckets, culprits, launch latency, counts and findings
// (tests/replay/replay.h). The usage text below is the reference.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_cupti_matrix.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "replay.h"

using namespace gpuutil;

namespace {

constexpr int64_t kAutoScaleSpanNs = 10'000'000'000;  // traces longer than this are compressed to ~10 s

const char kUsage[] =
    "usage: gpuutil_replay TRACE... [--json] [--scale K|auto] [--progress]\n"
    "                      [--cupti-seal 0|1] [--device-records thread|device] [--buffers thread|global|switch]\n"
    "                      [--api-record-at start|exit] [--skew-ns N] [--hold-empty 0|1]\n"
    "                      [--matrix CELL] [--cells ci|full|CELL;CELL...]\n"
    "\n"
    "Plays each trace in real time through gpuutil's live path on the fake CUPTI and compares every step\n"
    "with `gpuutil analyze` of the same trace: breakdown buckets, idle culprits, launch latency, kernel/\n"
    "copy/memset counts and the run's findings. Exit 0 when all are equal, 1 when any differs or a step\n"
    "is missing, 2 on bad arguments or an unreadable trace. \"culprit_names\": culprits equal but for\n"
    "CUPTI's version suffix on API names (cudaDeviceSynchronize_v3020 live, cudaDeviceSynchronize in Kineto).\n"
    "\n"
    "The fake CUPTI's matrix: what the CUPTI headers leave open, one setting each (defaults first;\n"
    "docs/live-collection.md, \"The fake's matrix\"):\n"
    "  --cupti-seal 1|0          a default flush seals a partly filled buffer (1), or leaves a buffer\n"
    "                            holding an unfinished record open and keeps appending to it (0)\n"
    "  --device-records thread|device\n"
    "                            device records reserved at launch in the buffer being written (thread),\n"
    "                            or written per device once finished (device)\n"
    "  --buffers thread|global|switch\n"
    "                            per-thread buffers, one global buffer (PER_THREAD_ACTIVITY_BUFFER=0), or\n"
    "                            per thread until the first default flush, then global (as Kineto does)\n"
    "  --api-record-at start|exit\n"
    "                            an API record written before its call's device records, or after them\n"
    "                            at the call's exit (what CUPTI does)\n"
    "  --skew-ns N               device timestamps N ns earlier than host ones (CUPTI's GPU->CPU\n"
    "                            interpolation): the offline side analyses the same skewed records\n"
    "  --hold-empty 0|1          CUPTI holds a prefetched empty buffer per slot that no default flush returns\n"
    "  --matrix CELL             the same as one string: seal=0,records=device,buffers=global,api=exit,\n"
    "                            skew=3000,hold=1 (settings not named keep their defaults; \"default\")\n"
    "  --cells ci|full|CELL;...  replay each trace under every cell of a list: the cells CI runs, all 96,\n"
    "                            or the ones given; the single-setting options then do not apply\n"
    "\n"
    "  --json                    print the live reports merged into one document per trace and cell, the\n"
    "                            comparison under \"replay\"\n"
    "  --scale K|auto            divide trace times by K (auto: traces over 10 s are compressed to ~10 s)\n"
    "  --progress                one line per replayed step on stderr\n";

int bad(const std::string& why) {
  std::fprintf(stderr, "gpuutil_replay: error: %s\n", why.c_str());
  return 2;
}

int64_t span_ns(const EventStore& s) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& w : s.steps) {
    lo = std::min(lo, w.start_ns);
    hi = std::max(hi, w.end_ns);
  }
  return hi > lo ? hi - lo : 0;
}

nlohmann::json merged(const std::vector<StepOutput>& steps, const replay::Comparison& c,
                      const replay::ReplayStats& st, int64_t scale, const fake_cupti_matrix& cell) {
  nlohmann::json doc;
  nlohmann::json all_steps = nlohmann::json::array();
  std::map<std::string, nlohmann::json> diags;
  for (const auto& o : steps) {
    nlohmann::json j = nlohmann::json::parse(o.json);
    if (doc.empty()) {
      doc["schema"] = j["schema"];
      doc["sources"] = j["sources"];
    }
    for (auto& s : j["steps"]) all_steps.push_back(s);
    for (auto& d : j["diagnostics"]) {
      const std::string name = d["name"];
      auto it = diags.find(name);
      if (it == diags.end()) {
        diags[name] = d;
      } else {
        it->second["count"] = it->second["count"].get<uint64_t>() + d["count"].get<uint64_t>();
      }
    }
  }
  doc["steps"] = all_steps;
  doc["diagnostics"] = nlohmann::json::array();
  for (auto& [name, d] : diags) doc["diagnostics"].push_back(d);
  nlohmann::json r;
  r["cell"] = fake_matrix::name(cell);
  r["time_scale"] = scale;
  r["threads"] = st.threads;
  r["api_calls"] = st.api_calls;
  r["api_unknown"] = st.api_unknown;
  r["device_only"] = st.device_only;
  r["ranges"] = st.ranges;
  r["max_lateness_ns"] = st.max_lateness_ns;
  r["wall_s"] = st.wall_s;
  for (const auto& b : c.buckets) r["max_abs_diff_ns"][b.bucket] = b.max_abs_ns;
  r["differing"] = nlohmann::json::object();
  for (const auto& [what, n] : c.differing) r["differing"][what] = n;
  r["differences"] = c.differences;
  r["problems"] = c.problems;
  r["equal"] = c.equal();
  doc["replay"] = r;
  return doc;
}

void print_text(const std::string& path, const replay::Comparison& c, const replay::ReplayResult& r, int64_t scale,
                const fake_cupti_matrix& cell) {
  std::printf("%s [%s]: %lld steps replayed in %.1f s (time scale 1/%lld, %d threads, %llu calls, %llu ranges, "
              "worst lateness %.2f ms): %s\n",
              path.c_str(), fake_matrix::name(cell).c_str(), static_cast<long long>(c.steps), r.stats.wall_s,
              static_cast<long long>(scale), r.stats.threads, static_cast<unsigned long long>(r.stats.api_calls),
              static_cast<unsigned long long>(r.stats.ranges), double(r.stats.max_lateness_ns) / 1e6,
              c.equal() ? "equal" : "DIFFERS");
  for (const auto& b : c.buckets) {
    std::printf("  %-18s max |replay - analyze| = %lld ns%s\n", b.bucket.c_str(), static_cast<long long>(b.max_abs_ns),
                b.max_abs_ns ? (" (step " + std::to_string(b.step) + ")").c_str() : "");
  }
  for (const char* what : {"culprits", "culprit_names", "launch_latency", "counts", "findings"}) {
    const auto it = c.differing.find(what);
    std::printf("  %-18s %s\n", what,
                it == c.differing.end() ? "equal" : (std::to_string(it->second) + " differ").c_str());
  }
  for (const auto& d : c.differences) std::printf("  differs: %s\n", d.c_str());
  for (const auto& p : c.problems) std::printf("  problem: %s\n", p.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> traces;
  bool json = false, progress = false;
  std::string scale_arg = "auto", cells_arg, matrix_arg;
  std::vector<std::string> settings;  // from the single-setting options, in parse()'s spelling
  auto value = [&](int& i, const std::string& opt, std::string& out) {
    if (i + 1 >= argc) return bad(opt + " needs a value");
    out = argv[++i];
    return 0;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    if (a == "--json") {
      json = true;
    } else if (a == "--progress") {
      progress = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--scale") {
      if (value(i, a, scale_arg)) return 2;
    } else if (a == "--matrix") {
      if (value(i, a, matrix_arg)) return 2;
    } else if (a == "--cells") {
      if (value(i, a, cells_arg)) return 2;
    } else if (a == "--cupti-seal" || a == "--device-records" || a == "--buffers" || a == "--api-record-at" ||
               a == "--skew-ns" || a == "--hold-empty") {
      if (value(i, a, v)) return 2;
      const char* key = a == "--cupti-seal"       ? "seal"
                        : a == "--device-records" ? "records"
                        : a == "--buffers"        ? "buffers"
                        : a == "--api-record-at"  ? "api"
                        : a == "--skew-ns"        ? "skew"
                                                  : "hold";
      settings.push_back(std::string(key) + "=" + v);
    } else if (!a.empty() && a[0] == '-') {
      return bad("unknown option " + a + " (see --help)");
    } else {
      traces.push_back(a);
    }
  }
  if (traces.empty()) return bad("no trace given (see --help)");
  std::vector<fake_cupti_matrix> cells;
  if (!cells_arg.empty()) {
    if (!settings.empty() || !matrix_arg.empty()) return bad("--cells replaces --matrix and the single settings");
    if (cells_arg == "ci") {
      cells = fake_matrix::ci_cells();
    } else if (cells_arg == "full") {
      cells = fake_matrix::full_cells();
    } else {
      for (const std::string& c : fake_matrix::split(cells_arg, ';')) {
        fake_cupti_matrix m{};
        const std::string err = fake_matrix::parse(c, m);
        if (!err.empty()) return bad("--cells: " + err);
        cells.push_back(m);
      }
    }
  } else {
    std::string cell = matrix_arg == "default" ? "" : matrix_arg;
    for (const auto& s : settings) cell += (cell.empty() ? "" : ",") + s;
    fake_cupti_matrix m{};
    const std::string err = fake_matrix::parse(cell, m);
    if (!err.empty()) return bad(err);
    cells.push_back(m);
  }
  int rc = 0;
  for (const auto& path : traces) {
    ImportResult in = import_kineto_file(path);
    if (!in.ok) return bad(path + ": " + in.error);
    int64_t scale = 1;
    if (scale_arg == "auto") {
      const int64_t span = span_ns(in.store);
      scale = span > kAutoScaleSpanNs ? (span + kAutoScaleSpanNs - 1) / kAutoScaleSpanNs : 1;
    } else {
      char* end = nullptr;
      scale = std::strtoll(scale_arg.c_str(), &end, 10);
      if (scale < 1 || *end != '\0') return bad("--scale takes an integer >= 1 or auto, not " + scale_arg);
    }
    const EventStore store = scale == 1 ? std::move(in.store) : replay::scaled(in.store, scale);
    for (const fake_cupti_matrix& cell : cells) {
      const Report offline = analyze(replay::skewed(store, cell.skew_ns));
      replay::ReplayOptions opt;
      opt.cell = cell;
      opt.progress = progress;
      const replay::ReplayResult r = replay::replay(store, opt);
      if (!r.error.empty()) return bad(path + ": " + r.error);
      const replay::Comparison c = replay::compare(offline, r.steps);
      if (!c.equal()) rc = 1;
      if (json) {
        std::printf("%s\n", merged(r.steps, c, r.stats, scale, cell).dump().c_str());
      } else {
        print_text(path, c, r, scale, cell);
      }
      std::fflush(stdout);
    }
  }
  return rc;
}
