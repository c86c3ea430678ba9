// Trace files in, the JSON report out: the one offline path that
// gpuutil.analyze() (python/bindings/module.cpp) and the native
// `gpuutil-analyze` command (libgpuutil/cli) share, so both give the same
// bytes for the same traces.
#pragma once

#include <string>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"

namespace gpuutil {

// One input: a trace file (a path, which may be a FIFO or a /dev/fd/N of a
// pipe), a descriptor (standard input), or a document already in memory.
struct TraceInput {
  std::string name;                   // the file's path, or the name the report gives the input ("<stdin>")
  const std::string* text = nullptr;  // when set, the document itself (JSON or gzip), not owned
  int fd = -1;                        // when >= 0 (and no text), read from it (not owned), e.g. 0
};

struct AnalyzeTracesResult {
  bool ok = false;
  std::string json;   // the gpuutil.report/1 report when ok
  std::string error;  // one line, "cannot read NAME: why", when !ok
};

// Imports every input (several files in parallel, one thread each; a single
// file with the importer's own parallel parse), one input per rank, and
// analyses them into one report serialised with report_to_json(indent).
// When the traces do not name distinct ranks themselves, an input's
// position in `inputs` is its rank. `import` applies to every input; its
// memory budget is shared by all of them (one ImportBudget of
// import.memory_budget_bytes, unless it names a shared one itself), so
// the stores of a many-rank job are bounded together.
//
// Contract: `inputs` is not empty (else !ok). Never throws on bad data: an
// input that cannot be read at all makes the result !ok and names the first
// such input; std::bad_alloc may escape. Thread-safe (no shared state).
AnalyzeTracesResult analyze_traces(const std::vector<TraceInput>& inputs, const AnalysisOptions& options,
                                   int indent = -1, const ImportOptions& import = {});

}  // namespace gpuutil
