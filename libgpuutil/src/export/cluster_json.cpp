// JSON of the cross-rank view (gpuutil/cluster.h; docs/report-schema.md,
// "Cluster"): the batch of RankSteps a live rank publishes through the c10d
// store, its parser (every field checked: a malformed batch is rejected
// whole with a one-line error, never half-ingested), and the view's
// summary.ranks / summary.cluster / findings.
#include <nlohmann/json.hpp>

#include <string>

#include "export/json_writer.h"
#include "export/report_json_parts.h"
#include "gpuutil/cluster.h"

namespace gpuutil {

namespace {

template <typename T>
void optional_member(JsonWriter& w, const char* key, const std::optional<T>& v) {
  w.key(key);
  if (v) {
    w.value(*v);
  } else {
    w.null();
  }
}

void ints_json(JsonWriter& w, const char* key, const std::vector<int32_t>& v) {
  w.key(key);
  w.begin_array();
  for (int32_t x : v) w.value(x);
  w.end_array();
}

void rank_summary_json(JsonWriter& w, const RankSummary& r) {
  w.begin_object();
  w.member("rank", r.rank);
  w.member("host", r.host);
  w.member("steps", r.steps);
  w.member("last_step", r.last_step);
  w.member("finished", r.finished);
  optional_member(w, "step_wall_p50_ns", r.step_wall_p50_ns);
  optional_member(w, "own_p50_ns", r.own_p50_ns);
  w.member("basis", r.basis);
  w.key("breakdown_ns");
  w.begin_object();
  for (const auto& [name, ns] : r.breakdown_ns) w.member(name, ns);
  w.end_object();
  w.member("collective_wait_ns", r.collective_wait_ns);
  optional_member(w, "collective_wait_p50_ns", r.collective_wait_p50_ns);
  w.member("collective_transfer_ns", r.collective_transfer_ns);
  optional_member(w, "relative_perf", r.relative_perf);
  w.member("throttled_steps", r.throttled_steps);
  optional_member(w, "clock_offset_ns", r.clock_offset_ns);
  optional_member(w, "clock_uncertainty_ns", r.clock_uncertainty_ns);
  optional_member(w, "start_skew_p50_ns", r.start_skew_p50_ns);
  w.end_object();
}

void cluster_step_json(JsonWriter& w, const ClusterStep& s) {
  w.begin_object();
  w.member("step", s.step);
  optional_member(w, "straggler", s.straggler);
  w.key("ranks");
  w.begin_array();
  for (const auto& r : s.ranks) {
    w.begin_object();
    w.member("rank", r.rank);
    w.member("wall_ns", r.wall_ns);
    w.member("collective_wait_ns", r.collective_wait_ns);
    w.member("own_ns", r.own_ns);
    optional_member(w, "start_skew_ns", r.start_skew_ns);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

using nlohmann::json;

// Checked accessors: throw std::runtime_error with the field's name.
int64_t get_int(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) throw std::runtime_error(std::string("'") + key + "' must be an integer");
  return it->get<int64_t>();
}

std::optional<int64_t> get_optional_int(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) throw std::runtime_error(std::string("'") + key + "' must be an integer or null");
  return it->get<int64_t>();
}

RankStep parse_step(const json& j) {
  if (!j.is_object()) throw std::runtime_error("a step must be an object");
  RankStep s;
  s.step = get_int(j, "step");
  s.start_ns = get_int(j, "start_ns");
  s.wall_ns = get_int(j, "wall_ns");
  if (s.wall_ns < 0) throw std::runtime_error("'wall_ns' must be >= 0");
  s.basis = j.value("basis", "");
  if (const auto it = j.find("categories_ns"); it != j.end()) {
    if (!it->is_object()) throw std::runtime_error("'categories_ns' must be an object");
    for (const auto& [name, v] : it->items()) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) throw std::runtime_error("category values must be integers >= 0");
      s.categories_ns.emplace_back(name, v.get<int64_t>());
    }
  }
  if (const auto it = j.find("collectives"); it != j.end()) {
    if (!it->is_array()) throw std::runtime_error("'collectives' must be an array");
    for (const auto& c : *it) {
      if (!c.is_array() || c.size() != 2 || !c[0].is_string() || !c[1].is_number_integer()) {
        throw std::runtime_error("a collective must be [group, dur_ns]");
      }
      s.collectives.push_back({c[0].get<std::string>(), c[1].get<int64_t>()});
    }
  }
  s.collectives_dropped = static_cast<uint64_t>(get_optional_int(j, "collectives_dropped").value_or(0));
  s.throttled = j.value("throttled", false);
  return s;
}

}  // namespace

void cluster_members(JsonWriter& w, const ClusterView& v) {
  w.key("ranks");
  w.begin_array();
  for (const auto& r : v.ranks) rank_summary_json(w, r);
  w.end_array();
  w.key("cluster");
  w.begin_object();
  w.member("world_size", v.world_size);
  ints_json(w, "missing_ranks", v.missing_ranks);
  ints_json(w, "short_ranks", v.short_ranks);
  w.member("steps_compared", v.steps_compared);
  w.member("collective_instances", v.collective_instances);
  w.member("collective_mismatches", v.collective_mismatches);
  w.member("collectives_dropped", v.collectives_dropped);
  w.member("late_steps", v.late_steps);
  w.member("straggler_threshold_ns", v.straggler_threshold_ns);
  w.key("recent_steps");
  w.begin_array();
  for (const auto& s : v.recent) cluster_step_json(w, s);
  w.end_array();
  w.end_object();
}

std::string cluster_view_to_json(const ClusterView& view, int indent) {
  std::string out;
  JsonWriter w(out, indent < 0 ? -1 : indent);
  w.begin_object();
  cluster_members(w, view);
  w.key("findings");
  w.begin_array();
  for (const auto& f : view.findings) finding_json(w, f);
  w.end_array();
  w.end_object();
  w.finish();
  return out;
}

std::string rank_batch_to_json(const RankBatch& b) {
  json j;
  j["rank"] = b.rank;
  j["host"] = b.host;
  j["finished"] = b.finished;
  j["clock_offset_ns"] = b.clock_offset_ns ? json(*b.clock_offset_ns) : json(nullptr);
  j["clock_uncertainty_ns"] = b.clock_uncertainty_ns ? json(*b.clock_uncertainty_ns) : json(nullptr);
  json steps = json::array();
  for (const auto& s : b.steps) {
    json cats = json::object();
    for (const auto& [name, ns] : s.categories_ns) cats[name] = ns;
    json coll = json::array();
    for (const auto& c : s.collectives) coll.push_back(json::array({c.group, c.dur_ns}));
    steps.push_back({{"step", s.step},
                     {"start_ns", s.start_ns},
                     {"wall_ns", s.wall_ns},
                     {"basis", s.basis},
                     {"categories_ns", std::move(cats)},
                     {"collectives", std::move(coll)},
                     {"collectives_dropped", s.collectives_dropped},
                     {"throttled", s.throttled}});
  }
  j["steps"] = std::move(steps);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ingest_rank_batch_json(ClusterAssembler& assembler, const std::string& text, int32_t* rank,
                                   bool* finished) {
  try {
    const json j = json::parse(text);
    if (!j.is_object()) return "a rank batch must be a JSON object";
    RankBatch b;
    b.rank = static_cast<int32_t>(get_int(j, "rank"));
    b.host = j.value("host", "");
    b.finished = j.value("finished", false);
    b.clock_offset_ns = get_optional_int(j, "clock_offset_ns");
    b.clock_uncertainty_ns = get_optional_int(j, "clock_uncertainty_ns");
    const auto it = j.find("steps");
    if (it == j.end() || !it->is_array()) return "'steps' must be an array";
    for (const auto& s : *it) b.steps.push_back(parse_step(s));
    // Parsed whole: now apply.
    if (!b.host.empty()) assembler.set_host(b.rank, b.host);
    if (b.clock_offset_ns) assembler.set_clock_offset(b.rank, *b.clock_offset_ns, b.clock_uncertainty_ns.value_or(0));
    for (auto& s : b.steps) assembler.add(b.rank, std::move(s));
    if (b.finished) assembler.mark_finished(b.rank);
    if (rank) *rank = b.rank;
    if (finished) *finished = b.finished;
    return "";
  } catch (const std::exception& e) {
    std::string msg = std::string("bad rank batch: ") + e.what();
    for (char& c : msg) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return msg;
  }
}

}  // namespace gpuutil
