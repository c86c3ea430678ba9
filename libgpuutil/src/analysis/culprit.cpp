// Spelling out culprit keys (see culprit.h).
#include "analysis/culprit.h"

namespace gpuutil {

std::string culprit_name(const EventStore& store, CulpritKey key) {
  if ((key & kThreadCulpritBit) == 0) {
    const std::string_view name = store.names.view(static_cast<NameId>(key));
    return name.empty() ? "(no name in the trace)" : std::string(name);
  }
  if (key == kNoHostCulprit) return "(no host events for the launching thread)";
  const auto thread = static_cast<uint32_t>((key >> 32) & 0x7fffffffu);
  const auto phase = static_cast<NameId>(key & 0xffffffffu);
  std::string out;
  if (thread < store.threads.size() && !store.threads[thread].name.empty()) {
    out = store.threads[thread].name;
  } else if (thread < store.threads.size()) {
    out = "thread " + std::to_string(store.threads[thread].display_tid());
  } else {
    out = "thread #" + std::to_string(thread);
  }
  if (phase != kNoName) out += ", in " + std::string(store.names.view(phase));
  out += ", no op or range";
  return out;
}

}  // namespace gpuutil
