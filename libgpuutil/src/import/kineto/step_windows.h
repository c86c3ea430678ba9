// Training-step windows from step ranges, with the whole-trace fallback.
//
// Input: the host ranges that named a step ("ProfilerStep#N", in any host
// category). Output: EventStore::steps sorted by start and non-overlapping,
// plus steps_source and the steps_missing / steps_overlapping /
// steps_duplicated diagnostics. At most one window per step number.
// Internal to the replay collector; reusable by any collector that sees
// step ranges.
#pragma once

#include <vector>

#include "gpuutil/events.h"

namespace gpuutil::replay {

// Sorts `candidates` by start (longer first on equal starts), drops each
// window whose step number an earlier kept window has (steps_duplicated:
// the earliest window of a number is kept), clips each window that starts
// before the previous one ended to that end (dropping it when nothing is
// left) and counts steps_overlapping. With no candidates, the result is one window
// (step 0) spanning every interval in the store, steps_source
// "whole_trace", and steps_missing; an empty store gets no window.
void build_step_windows(std::vector<StepWindow> candidates, EventStore* store);

}  // namespace gpuutil::replay
