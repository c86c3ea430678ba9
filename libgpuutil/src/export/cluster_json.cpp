// JSON of the cross-rank view (gpuutil/cluster.h; docs/report-schema.md,
// "Cluster"): the batch of RankSteps a live rank publishes through the c10d
// store (written with the streaming JsonWriter), its parser (simdjson's DOM;
// every field checked: a malformed batch is rejected whole with a one-line
// error, never half-ingested), and the view's summary.ranks /
// summary.cluster / findings.
#include <simdjson.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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

// Checked accessors over a simdjson DOM object: throw std::runtime_error
// with the field's name. Integers are JSON integers that fit int64.
using simdjson::dom::element;
using simdjson::dom::object;

bool find(const object& o, const char* key, element* out) {
  return o.at_key(key).get(*out) == simdjson::SUCCESS;
}

int64_t as_int(const element& e, const char* what) {
  int64_t v = 0;
  if (!e.is_int64() || e.get_int64().get(v) != simdjson::SUCCESS) {
    throw std::runtime_error(std::string(what) + " must be an integer");
  }
  return v;
}

int64_t get_int(const object& o, const char* key) {
  element e;
  if (!find(o, key, &e)) throw std::runtime_error(std::string("'") + key + "' must be an integer");
  return as_int(e, (std::string("'") + key + "'").c_str());
}

std::optional<int64_t> get_optional_int(const object& o, const char* key) {
  element e;
  if (!find(o, key, &e) || e.is_null()) return std::nullopt;
  if (!e.is_int64()) throw std::runtime_error(std::string("'") + key + "' must be an integer or null");
  return as_int(e, key);
}

std::string get_string_or(const object& o, const char* key, const char* fallback) {
  element e;
  if (!find(o, key, &e)) return fallback;
  std::string_view v;
  if (e.get_string().get(v) != simdjson::SUCCESS) throw std::runtime_error(std::string("'") + key + "' must be a string");
  return std::string(v);
}

bool get_bool_or(const object& o, const char* key, bool fallback) {
  element e;
  if (!find(o, key, &e)) return fallback;
  bool v = false;
  if (e.get_bool().get(v) != simdjson::SUCCESS) throw std::runtime_error(std::string("'") + key + "' must be true or false");
  return v;
}

RankStep parse_step(const element& e) {
  object j;
  if (e.get_object().get(j) != simdjson::SUCCESS) throw std::runtime_error("a step must be an object");
  RankStep s;
  s.step = get_int(j, "step");
  s.start_ns = get_int(j, "start_ns");
  s.wall_ns = get_int(j, "wall_ns");
  if (s.wall_ns < 0) throw std::runtime_error("'wall_ns' must be >= 0");
  s.basis = get_string_or(j, "basis", "");
  element field;
  if (find(j, "categories_ns", &field)) {
    object cats;
    if (field.get_object().get(cats) != simdjson::SUCCESS) throw std::runtime_error("'categories_ns' must be an object");
    for (const auto [name, v] : cats) {
      if (!v.is_int64() || as_int(v, "a category value") < 0) {
        throw std::runtime_error("category values must be integers >= 0");
      }
      s.categories_ns.emplace_back(std::string(name), as_int(v, "a category value"));
    }
  }
  if (find(j, "collectives", &field)) {
    simdjson::dom::array list;
    if (field.get_array().get(list) != simdjson::SUCCESS) throw std::runtime_error("'collectives' must be an array");
    for (const element c : list) {
      // [group, dur_ns] or [group, dur_ns, start_offset_ns]
      simdjson::dom::array tuple;
      std::string_view group;
      if (c.get_array().get(tuple) != simdjson::SUCCESS || tuple.size() < 2 || tuple.size() > 3 ||
          tuple.at(0).get_string().get(group) != simdjson::SUCCESS || !tuple.at(1).is_int64() ||
          (tuple.size() == 3 && !tuple.at(2).is_int64())) {
        throw std::runtime_error("a collective must be [group, dur_ns, start_offset_ns]");
      }
      CollectiveSample sample{std::string(group), as_int(tuple.at(1).value_unsafe(), "dur_ns"), std::nullopt};
      if (tuple.size() == 3) {
        sample.start_offset_ns = as_int(tuple.at(2).value_unsafe(), "start_offset_ns");
        if (*sample.start_offset_ns < 0) throw std::runtime_error("'start_offset_ns' must be >= 0");
      }
      s.collectives.push_back(std::move(sample));
    }
  }
  s.collectives_dropped = static_cast<uint64_t>(get_optional_int(j, "collectives_dropped").value_or(0));
  s.throttled = get_bool_or(j, "throttled", false);
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

// Keys in sorted order and categories sorted by name, the last of a
// repeated name kept: the bytes nlohmann::json's dump gave when this built
// a DOM (tests/cpp/test_cluster.cpp compares), at a fraction of the cost on
// the training thread.
std::string rank_batch_to_json(const RankBatch& b) {
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  optional_member(w, "clock_offset_ns", b.clock_offset_ns);
  optional_member(w, "clock_uncertainty_ns", b.clock_uncertainty_ns);
  w.member("finished", b.finished);
  w.member("host", b.host);
  w.member("rank", b.rank);
  w.key("steps");
  w.begin_array();
  std::vector<const std::pair<std::string, int64_t>*> cats;
  for (const auto& s : b.steps) {
    w.begin_object();
    w.member("basis", s.basis);
    w.key("categories_ns");
    w.begin_object();
    cats.clear();
    for (const auto& c : s.categories_ns) cats.push_back(&c);
    // Stable: among equal names the last one given ends up last.
    std::stable_sort(cats.begin(), cats.end(), [](const auto* x, const auto* y) { return x->first < y->first; });
    for (size_t i = 0; i < cats.size(); ++i) {
      if (i + 1 < cats.size() && cats[i + 1]->first == cats[i]->first) continue;
      w.member(cats[i]->first, cats[i]->second);
    }
    w.end_object();
    w.key("collectives");
    w.begin_array();
    for (const auto& c : s.collectives) {
      w.begin_array();
      w.value(c.group);
      w.value(c.dur_ns);
      if (c.start_offset_ns) w.value(*c.start_offset_ns);
      w.end_array();
    }
    w.end_array();
    w.member("collectives_dropped", s.collectives_dropped);
    w.member("start_ns", s.start_ns);
    w.member("step", s.step);
    w.member("throttled", s.throttled);
    w.member("wall_ns", s.wall_ns);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  w.finish();
  return out;
}

std::string ingest_rank_batch_json(ClusterAssembler& assembler, const std::string& text, int32_t* rank,
                                   bool* finished) {
  try {
    simdjson::dom::parser parser;
    element root;
    if (const auto e = parser.parse(text).get(root)) return std::string("bad rank batch: ") + simdjson::error_message(e);
    object j;
    if (root.get_object().get(j) != simdjson::SUCCESS) return "a rank batch must be a JSON object";
    RankBatch b;
    const int64_t rank_value = get_int(j, "rank");
    if (rank_value < INT32_MIN || rank_value > INT32_MAX) throw std::runtime_error("'rank' is out of range");
    b.rank = static_cast<int32_t>(rank_value);
    b.host = get_string_or(j, "host", "");
    b.finished = get_bool_or(j, "finished", false);
    b.clock_offset_ns = get_optional_int(j, "clock_offset_ns");
    b.clock_uncertainty_ns = get_optional_int(j, "clock_uncertainty_ns");
    element steps_element;
    simdjson::dom::array steps;
    if (!find(j, "steps", &steps_element) || steps_element.get_array().get(steps) != simdjson::SUCCESS) {
      return "'steps' must be an array";
    }
    for (const element s : steps) b.steps.push_back(parse_step(s));
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
