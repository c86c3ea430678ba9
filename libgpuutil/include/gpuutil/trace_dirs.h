// Trace paths as users give them: a directory stands for the traces in it,
// which is what torch.profiler's tensorboard_trace_handler writes (one
// `<worker>.<ms>.pt.trace.json[.gz]` per worker and profiling cycle).
//
// Contract: pure file-system reads (stat, readdir), no trace is opened;
// thread-safe. A path that is not a directory (a file, `-`, a FIFO, a
// missing path, which the importer then names) is kept as it is.
#pragma once

#include <string>
#include <vector>

namespace gpuutil {

struct TraceDirsResult {
  bool ok = false;
  std::vector<std::string> paths;  // when ok: the inputs, directories expanded
  std::string error;               // one line, "cannot read DIR: why", when !ok
};

// Expands every directory into its trace files (regular files named
// *.json or *.json.gz, not recursive), sorted by name. Fails, naming the
// directory, when it holds none, or when it holds several
// tensorboard_trace_handler files of one worker (several profiling cycles
// of one process are not several ranks: the user names the one to read).
TraceDirsResult expand_trace_dirs(const std::vector<std::string>& paths);

}  // namespace gpuutil
