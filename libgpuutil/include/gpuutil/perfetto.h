// Chrome trace / Perfetto JSON export of the analysed timeline.
//
// Contract: a pure function of the stores (no I/O); call from any thread.
// The output is a Chrome Trace Event Format JSON object that opens in
// ui.perfetto.dev and chrome://tracing:
//   - one process per (rank, GPU), named "rank R GPU D (name)";
//   - one thread per CUDA stream with the device's kernels, memcpys and
//     memsets as complete ("X") slices; work that overlaps on a stream (clock
//     skew in a trace) goes to an extra "stream S #k" lane, so slices never
//     partially overlap on a track;
//   - a "steps" thread with one slice per step window;
//   - an "idle causes" thread with one slice per attributed idle piece, named
//     by cause ("dataloader", "host_sync", ...), args.culprit when known;
//     pieces come from the same attribution the report uses, so per step
//     their durations sum to the report's idle_ns per cause;
//   - counter ("C") events for every sampled counter of the device (NVML,
//     GPM, allocator), one track per counter name;
//   - one host process per rank with host events, named "rank R host"
//     (sorted before the rank's GPUs): a "steps" thread and a thread per
//     host thread with its ranges (cat: the range category, "op",
//     "dataloader", ...) and runtime calls (cat "runtime"); slices that do
//     not nest on a thread go to extra "<thread> #k" lanes (at most 64).
// Timestamps are microseconds (Chrome's unit) with ns precision, relative to
// otherData.time_origin_ns (the earliest step, activity, counter sample,
// range or runtime call). A store with no events at all exports nothing.
#pragma once

#include <string>
#include <vector>

#include "gpuutil/analysis.h"
#include "gpuutil/events.h"

namespace gpuutil {

std::string timeline_to_chrome_trace(const std::vector<const EventStore*>& stores, const AnalysisOptions& options,
                                     int indent = -1);

}  // namespace gpuutil
