// The diagnostics registry and counters (see gpuutil/diagnostics.h).
#include "gpuutil/diagnostics.h"

namespace gpuutil {

namespace {
constexpr DiagInfo kInfos[] = {
#define GPUUTIL_DIAG_INFO(name, sev, desc) {#name, Severity::sev, desc},
    GPUUTIL_DIAGNOSTICS(GPUUTIL_DIAG_INFO)
#undef GPUUTIL_DIAG_INFO
};
static_assert(sizeof(kInfos) / sizeof(kInfos[0]) == kDiagCount, "registry out of sync");
constexpr size_t kMaxExampleBytes = 200;
}  // namespace

const char* to_string(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "unknown";
}

const DiagInfo& diag_info(Diag d) { return kInfos[static_cast<size_t>(d)]; }

void Diagnostics::add(Diag d, uint64_t n, std::string_view example) {
  const auto i = static_cast<size_t>(d);
  counts_[i] += n;
  if (examples_[i].empty() && !example.empty()) {
    examples_[i] = std::string(example.substr(0, kMaxExampleBytes));
  }
}

void Diagnostics::merge(const Diagnostics& other) {
  for (size_t i = 0; i < kDiagCount; ++i) {
    counts_[i] += other.counts_[i];
    if (examples_[i].empty()) examples_[i] = other.examples_[i];
  }
}

bool Diagnostics::any_error() const {
  for (size_t i = 0; i < kDiagCount; ++i) {
    if (counts_[i] > 0 && kInfos[i].severity == Severity::kError) return true;
  }
  return false;
}

}  // namespace gpuutil
