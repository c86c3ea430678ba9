// Stream handles to CUPTI ids, and stream capture (see stream_registry.h).
#include "collectors/cupti/stream_registry.h"

#include <algorithm>
#include <limits>

namespace gpuutil::cupti {

namespace {
constexpr int64_t kOpen = std::numeric_limits<int64_t>::max();
constexpr size_t kCapturesPerKey = 16;
constexpr uint64_t kLegacyTag = uint64_t(1) << 63;
constexpr uint64_t kPerThreadTag = uint64_t(1) << 62;
constexpr uint64_t kContextTag = uint64_t(3) << 62;  // unknown streams of a context

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2));
  h ^= h >> 29;
  return h;
}

uint64_t tagged(uint64_t value, uint64_t tag) { return (value & ~(uint64_t(3) << 62)) | tag; }
}  // namespace

uint64_t StreamRegistry::thread_key(uint64_t thread) { return tagged(mix(thread, 0x7468), kPerThreadTag); }

uint64_t StreamRegistry::key(const StreamRef& ref, uint64_t thread) {
  switch (ref.kind) {
    case kStreamExplicit:
      return tagged(ref.handle, 0);
    case kStreamPerThread:
      return tagged(mix(thread, ref.context), kPerThreadTag);
    case kStreamLegacy:
      return tagged(mix(ref.context, 7), kLegacyTag);
    default:
      return tagged(mix(ref.context, 0x5eed), kContextTag);
  }
}

void StreamRegistry::created(uint64_t handle, uint32_t stream, uint32_t context) {
  if (handles_.size() >= kMaxHandles && handles_.count(handle) == 0) handles_.clear();  // bounded: learnt again
  handles_[handle] = {stream, context};
}

void StreamRegistry::destroyed(uint64_t handle) {
  handles_.erase(handle);
  captures_.erase(tagged(handle, 0));
}

void StreamRegistry::learn(const StreamRef& ref, uint64_t thread, uint32_t stream, uint32_t context) {
  if (ref.kind == kStreamNone) return;
  auto& map = ref.kind == kStreamExplicit ? handles_ : defaults_;
  const uint64_t k = ref.kind == kStreamExplicit ? ref.handle : key(ref, thread);
  auto it = map.find(k);
  if (it != map.end()) {
    if (it->second.stream == kUnknownStream) it->second = {stream, context};
    if (it->second.context == 0) it->second.context = context;
    return;
  }
  if (map.size() >= kMaxHandles) map.clear();
  map[k] = {stream, context};
}

ResolvedStream StreamRegistry::resolve(const StreamRef& ref, uint64_t thread) const {
  if (ref.kind == kStreamNone) return {};
  const auto& map = ref.kind == kStreamExplicit ? handles_ : defaults_;
  const auto it = map.find(ref.kind == kStreamExplicit ? ref.handle : key(ref, thread));
  return it == map.end() ? ResolvedStream{} : it->second;
}

StreamRegistry::Capture* StreamRegistry::open_capture(uint64_t k, int64_t t_ns) {
  const auto it = captures_.find(k);
  if (it == captures_.end()) return nullptr;
  for (auto c = it->second.rbegin(); c != it->second.rend(); ++c) {
    if (c->end_ns == kOpen && c->begin_ns <= t_ns) return &*c;
  }
  return nullptr;
}

const StreamRegistry::Capture* StreamRegistry::capture_at(uint64_t k, int64_t t_ns) const {
  const auto it = captures_.find(k);
  if (it == captures_.end()) return nullptr;
  for (const Capture& c : it->second) {
    if (c.begin_ns <= t_ns && t_ns < c.end_ns) return &c;
  }
  return nullptr;
}

void StreamRegistry::capture_begin(const StreamRef& ref, uint64_t thread, int64_t begin_ns) {
  if (captures_.size() >= kMaxKeys) captures_.clear();
  const uint64_t origin = key(ref, thread);
  auto add = [&](uint64_t k) {
    auto& list = captures_[k];
    list.push_back({begin_ns, kOpen, origin});
    if (list.size() > kCapturesPerKey) list.erase(list.begin());
  };
  add(origin);
  // Launches whose stream is unknown (no parameter struct: __cudaLaunchKernel)
  // in the capturing context are taken as captured too: during a capture
  // they go where the capturing code sends them, from the autograd threads
  // as well; and the capturing thread's, whatever their context.
  StreamRef context_ref;
  context_ref.context = ref.context;
  if (ref.kind != kStreamNone) add(key(context_ref, thread));
  add(thread_key(thread));
}

StreamRegistry::Ended StreamRegistry::capture_end(const StreamRef& ref, uint64_t thread, int64_t end_ns) {
  Ended out;
  const uint64_t k = key(ref, thread);
  Capture* open = open_capture(k, end_ns);
  if (open == nullptr) {
    // Its begin came before tracing started.
    auto& list = captures_[k];
    list.push_back({std::numeric_limits<int64_t>::min(), end_ns, k});
    out.begin_ns = list.back().begin_ns;
    out.keys.push_back(k);
    return out;
  }
  const uint64_t origin = open->origin;
  out.begin_ns = open->begin_ns;
  // Every capture opened by that BeginCapture ends: the stream's own, the
  // context fallback, the streams that joined through an event.
  for (auto& [key_of, list] : captures_) {
    for (Capture& c : list) {
      if (c.end_ns == kOpen && c.origin == origin) {
        c.end_ns = end_ns;
        out.keys.push_back(key_of);
      }
    }
  }
  for (auto it = events_.begin(); it != events_.end();) {
    it = it->second.origin == origin ? events_.erase(it) : std::next(it);
  }
  return out;
}

bool StreamRegistry::captured(const StreamRef& ref, uint64_t thread, int64_t t_ns) const {
  if (captures_.empty()) return false;
  if (capture_at(key(ref, thread), t_ns) != nullptr) return true;
  return ref.kind == kStreamNone && capture_at(thread_key(thread), t_ns) != nullptr;
}

void StreamRegistry::event_recorded(uint64_t event, const StreamRef& ref, uint64_t thread, int64_t t_ns) {
  if (event == 0) return;
  const Capture* c = capture_at(key(ref, thread), t_ns);
  if (c == nullptr) {
    events_.erase(event);  // re-recorded outside any capture
    return;
  }
  if (events_.size() >= kMaxEvents) events_.clear();
  events_[event] = {c->origin, t_ns};
}

void StreamRegistry::stream_waited(uint64_t event, const StreamRef& ref, uint64_t thread, int64_t t_ns) {
  const auto it = events_.find(event);
  if (it == events_.end() || ref.kind == kStreamNone) return;
  const uint64_t k = key(ref, thread);
  if (open_capture(k, t_ns) != nullptr) return;  // already capturing
  if (captures_.size() >= kMaxKeys) return;
  auto& list = captures_[k];
  list.push_back({t_ns, kOpen, it->second.origin});  // joins the capture until it ends
  if (list.size() > kCapturesPerKey) list.erase(list.begin());
}

void StreamRegistry::clear() {
  handles_.clear();
  defaults_.clear();
  captures_.clear();
  events_.clear();
}

}  // namespace gpuutil::cupti
