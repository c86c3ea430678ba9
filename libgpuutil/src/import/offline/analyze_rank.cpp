// One rank's trace in, its RankStep batch and compact report out (see
// gpuutil/analyze_rank.h): import, analyse alone, derive the batch the
// cross-rank assembler takes, serialise the report without its steps.
#include "gpuutil/analyze_rank.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "gpuutil/cluster.h"
#include "gpuutil/report_json.h"

namespace gpuutil {

namespace {

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// Analyses what was imported from the input named `name` (consumed).
RankAnalysis analyze_imported(ImportResult imported, const std::string& name, const AnalysisOptions& options,
                              std::optional<int32_t> rank) {
  RankAnalysis out;
  if (!imported.ok) {
    // (Some import errors name the input already: not twice.)
    const std::string prefix = "cannot read " + name + ": ";
    out.error = one_line(imported.error.rfind(prefix, 0) == 0 ? imported.error : prefix + imported.error);
    return out;
  }
  if (rank) imported.store.rank = *rank;
  out.rank = imported.store.rank;
  Report report;
  {
    const std::vector<const EventStore*> stores{&imported.store};
    report = analyze(stores, options);
  }
  imported = ImportResult{};  // the events are not needed past the analysis

  // The host a multi-rank report gives the rank (cluster_view_of): the
  // source's file name.
  RankBatch batch;
  batch.rank = out.rank;
  const size_t slash = name.find_last_of('/');
  batch.host = slash == std::string::npos ? name : name.substr(slash + 1);
  batch.finished = true;
  for (const auto& step : report.steps) {
    if (auto rs = rank_step_of(step, out.rank)) batch.steps.push_back(std::move(*rs));
  }
  out.steps = batch.steps.size();
  out.batch_json = rank_batch_to_json(batch);
  report.steps.clear();
  report.steps.shrink_to_fit();
  out.summary_json = report_to_json(report);
  out.ok = true;
  return out;
}

}  // namespace

RankAnalysis analyze_rank(const TraceInput& input, const AnalysisOptions& options, const ImportOptions& import,
                          std::optional<int32_t> rank) {
  if (input.text != nullptr) {
    return analyze_imported(import_kineto_json(*input.text, input.name, import), input.name, options, rank);
  }
  if (input.fd >= 0) return analyze_imported(import_kineto_fd(input.fd, input.name, import), input.name, options, rank);
  return analyze_imported(import_kineto_file(input.name, import), input.name, options, rank);
}

RankAnalysis analyze_rank_bytes(std::string_view data, const std::string& name, const AnalysisOptions& options,
                                const ImportOptions& import, std::optional<int32_t> rank) {
  return analyze_imported(import_kineto_json(data, name, import), name, options, rank);
}

}  // namespace gpuutil
