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

const std::string& Diagnostics::example(Diag d) const {
  static const std::string kNone;
  for (const auto& [diag, text] : examples_) {
    if (diag == d) return text;
  }
  return kNone;
}

void Diagnostics::add(Diag d, uint64_t n, std::string_view example) {
  counts_[static_cast<size_t>(d)] += n;
  if (!example.empty() && this->example(d).empty()) {
    examples_.emplace_back(d, std::string(example.substr(0, kMaxExampleBytes)));
  }
}

void Diagnostics::merge(const Diagnostics& other) {
  for (size_t i = 0; i < kDiagCount; ++i) counts_[i] += other.counts_[i];
  for (const auto& [diag, text] : other.examples_) {
    if (example(diag).empty()) examples_.emplace_back(diag, text);
  }
}

bool Diagnostics::any_error() const {
  for (size_t i = 0; i < kDiagCount; ++i) {
    if (counts_[i] > 0 && kInfos[i].severity == Severity::kError) return true;
  }
  return false;
}

}  // namespace gpuutil
