// Process-wide counts of which pass trace imports took, so tests can check
// that the parallel or streaming pass really ran (and was not silently replaced by the
// serial fallback) on the documents it is meant for. Incremented by
// kineto_import.cpp; thread-safe. Internal to the replay collector.
#pragma once

#include <cstdint>

namespace gpuutil::replay {

struct ImportPassCounts {
  uint64_t split_done = 0;      // parallel passes that produced the result
  uint64_t split_abandoned = 0;  // parallel attempts thrown away for the serial pass
  uint64_t stream_done = 0;      // streaming passes that produced the result
  uint64_t stream_abandoned = 0;  // streaming attempts thrown away for the whole-document pass
};

ImportPassCounts import_pass_counts();

}  // namespace gpuutil::replay
