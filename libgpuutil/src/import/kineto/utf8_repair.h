// Replacing invalid UTF-8 in a trace before JSON parsing.
//
// simdjson rejects a whole document for one invalid byte, and PyTorch writes
// operator and Python function names without validating them. Rather than
// refusing such a trace, each byte that is not part of a valid UTF-8
// sequence is replaced by '?' in place and the repair is counted under
// event_malformed (one count per document, the example says how many bytes).
// Internal to the replay collector.
#pragma once

#include "import/source/trace_bytes.h"
#include "gpuutil/diagnostics.h"

namespace gpuutil::replay {

// Returns the number of bytes replaced (0 for valid input, which costs one
// SIMD validation pass). The importer calls it only after a failed parse,
// since simdjson's parse validates UTF-8 itself.
size_t repair_utf8(TraceBytes* bytes, Diagnostics* diagnostics);

}  // namespace gpuutil::replay
