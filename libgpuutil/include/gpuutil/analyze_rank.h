// One rank's trace in, what the cross-rank view needs out: the unit of work
// of the offline fan-out (python/gpuutil/fanout/, docs/distributed.md,
// "Offline, at scale"). A worker process (a local pool's, a Dask or Ray
// worker) imports and analyses one rank's trace alone and sends back only
// the compact results below, never the trace or its events; the parent
// feeds every rank's batch to one ClusterAssembler (gpuutil/cluster.h), as
// the live leader does with the batches the ranks publish.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gpuutil/analysis.h"
#include "gpuutil/analyze_traces.h"
#include "gpuutil/kineto_import.h"

namespace gpuutil {

struct RankAnalysis {
  bool ok = false;
  std::string error;  // one line, "cannot read NAME: why", when !ok
  int32_t rank = 0;   // the rank analysed (the trace's distributedInfo.rank, or the override)
  // rank_batch_to_json() of the rank's steps (one RankStep per step, by
  // rank_step_of()), host = the input's base name, finished = true: what a
  // live rank publishes, so ingest_rank_batch_json() takes it as it is.
  std::string batch_json;
  // The rank's own gpuutil.report/1 report without its per-step detail
  // ("steps" is empty): sources, workload, loaders, summary (devices with
  // their culprits), findings, diagnostics. Bounded by the number of
  // devices and the report's top-N lists, not by the trace's size.
  std::string summary_json;
  uint64_t steps = 0;  // steps in the batch
};

// Imports `input` (a path streamed by the importer, or a document already
// in memory: JSON or gzip) and analyses it as a single rank. `rank`, when
// set, overrides the rank the trace names (--rank-from-name). The import
// holds one rank's events at a time and frees them before returning.
//
// Contract: never throws on bad data (an unreadable input gives !ok and the
// error names input.name); std::bad_alloc may escape. Thread-safe (no shared
// state); the caller owns `input.text` for the duration of the call.
RankAnalysis analyze_rank(const TraceInput& input, const AnalysisOptions& options, const ImportOptions& import = {},
                          std::optional<int32_t> rank = std::nullopt);
// The same for a document in memory (JSON or gzip; a remote file fetched
// whole, still compressed), named `name`; not copied, owned by the caller.
RankAnalysis analyze_rank_bytes(std::string_view data, const std::string& name, const AnalysisOptions& options,
                                const ImportOptions& import = {}, std::optional<int32_t> rank = std::nullopt);

}  // namespace gpuutil
