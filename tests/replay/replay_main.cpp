// gpuutil_replay: plays Kineto traces recorded on GPUs through gpuutil's live
// path on the faithful fake CUPTI, and compares the live per-step breakdown
// with `gpuutil analyze` of the same trace (tests/replay/replay.h).
//
//   build/tests/replay/gpuutil_replay TRACE... [--json] [--scale K|auto]
//                                      [--device-records thread|device]
//
// Prints, per trace, the largest per-bucket difference between replay and
// offline analysis (ns) and exits 1 if any differs or a step is missing
// (2 on unreadable input). --json prints instead the live per-step reports
// merged into one report document, with the comparison under "replay".
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "replay.h"

using namespace gpuutil;

namespace {

constexpr int64_t kAutoScaleSpanNs = 10'000'000'000;  // traces longer than this are compressed to ~10 s

int64_t span_ns(const EventStore& s) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& w : s.steps) {
    lo = std::min(lo, w.start_ns);
    hi = std::max(hi, w.end_ns);
  }
  return hi > lo ? hi - lo : 0;
}

nlohmann::json merged(const std::vector<StepOutput>& steps, const replay::Comparison& c,
                      const replay::ReplayStats& st, int64_t scale) {
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
  r["time_scale"] = scale;
  r["threads"] = st.threads;
  r["api_calls"] = st.api_calls;
  r["api_unknown"] = st.api_unknown;
  r["device_only"] = st.device_only;
  r["ranges"] = st.ranges;
  r["max_lateness_ns"] = st.max_lateness_ns;
  r["wall_s"] = st.wall_s;
  for (const auto& b : c.buckets) r["max_abs_diff_ns"][b.bucket] = b.max_abs_ns;
  r["problems"] = c.problems;
  doc["replay"] = r;
  return doc;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> traces;
  bool json = false;
  std::string scale_arg = "auto";
  replay::ReplayOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--scale" && i + 1 < argc) {
      scale_arg = argv[++i];
    } else if (a == "--device-records" && i + 1 < argc) {
      const std::string m = argv[++i];
      if (m != "thread" && m != "device") {
        std::fprintf(stderr, "gpuutil_replay: --device-records takes thread or device, not %s\n", m.c_str());
        return 2;
      }
      opt.device_records = m == "device" ? 1 : 0;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: gpuutil_replay TRACE... [--json] [--scale K|auto] [--device-records thread|device]\n");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "gpuutil_replay: unknown option %s\n", a.c_str());
      return 2;
    } else {
      traces.push_back(a);
    }
  }
  if (traces.empty()) {
    std::fprintf(stderr, "usage: gpuutil_replay TRACE... [--json] [--scale K|auto] [--device-records thread|device]\n");
    return 2;
  }
  int rc = 0;
  for (const auto& path : traces) {
    ImportResult in = import_kineto_file(path);
    if (!in.ok) {
      std::fprintf(stderr, "gpuutil_replay: %s: %s\n", path.c_str(), in.error.c_str());
      return 2;
    }
    int64_t scale = 1;
    if (scale_arg == "auto") {
      const int64_t span = span_ns(in.store);
      scale = span > kAutoScaleSpanNs ? (span + kAutoScaleSpanNs - 1) / kAutoScaleSpanNs : 1;
    } else {
      scale = std::atoll(scale_arg.c_str());
      if (scale < 1) {
        std::fprintf(stderr, "gpuutil_replay: --scale takes an integer >= 1 or auto\n");
        return 2;
      }
    }
    const EventStore store = scale == 1 ? std::move(in.store) : replay::scaled(in.store, scale);
    const Report offline = analyze(store);
    const replay::ReplayResult r = replay::replay(store, opt);
    if (!r.error.empty()) {
      std::fprintf(stderr, "gpuutil_replay: %s: %s\n", path.c_str(), r.error.c_str());
      return 2;
    }
    const replay::Comparison c = replay::compare(offline, r.steps);
    if (c.max_abs_ns() != 0 || !c.problems.empty()) rc = 1;
    if (json) {
      std::printf("%s\n", merged(r.steps, c, r.stats, scale).dump().c_str());
      continue;
    }
    std::printf("%s: %lld steps replayed in %.1f s (time scale 1/%lld, %d threads, %llu calls, %llu ranges, "
                "worst lateness %.2f ms)\n",
                path.c_str(), static_cast<long long>(c.steps), r.stats.wall_s, static_cast<long long>(scale),
                r.stats.threads, static_cast<unsigned long long>(r.stats.api_calls),
                static_cast<unsigned long long>(r.stats.ranges), double(r.stats.max_lateness_ns) / 1e6);
    for (const auto& b : c.buckets) {
      std::printf("  %-18s max |replay - analyze| = %lld ns%s\n", b.bucket.c_str(), static_cast<long long>(b.max_abs_ns),
                  b.max_abs_ns ? (" (step " + std::to_string(b.step) + ")").c_str() : "");
    }
    for (const auto& p : c.problems) std::printf("  problem: %s\n", p.c_str());
  }
  return rc;
}
