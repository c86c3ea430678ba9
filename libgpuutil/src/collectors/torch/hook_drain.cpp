// Hook rings -> the session's EventSink (see hook_drain.h).
#include "collectors/torch/hook_drain.h"

#include <unistd.h>

#include <fstream>

#include "gpuutil/range_classify.h"

namespace gpuutil::torch_hook {

namespace {
constexpr std::string_view kBackwardPrefix = "autograd::engine::evaluate_function: ";
constexpr size_t kMaxCachedNames = 4096;  // distinct names cached; the cache restarts beyond
}  // namespace

HookDrain::HookDrain(EventSink& session, const GpuutilHookApi* api, bool skip_optimizer_step)
    : session_(session), api_(api), skip_optimizer_step_(skip_optimizer_step), pid_(::getpid()) {}

uint64_t HookDrain::drain() {
  added_ = 0;
  const uint64_t dropped = api_->drain(&HookDrain::on_range, this);
  if (dropped > 0) session_.count(Diag::torch_ranges_dropped, dropped, std::to_string(dropped) + " ranges");
  return added_;
}

void HookDrain::on_range(void* ctx, const char* name, int64_t start_ns, int64_t end_ns, int64_t thread_key,
                         int64_t os_tid, int kind) {
  static_cast<HookDrain*>(ctx)->add(name, start_ns, end_ns, thread_key, os_tid, kind);
}

void HookDrain::add(std::string_view name, int64_t start_ns, int64_t end_ns, int64_t thread_key, int64_t os_tid,
                    int kind) {
  const NameInfo& info = lookup(name, kind);
  if (info.skip) return;
  HostRange r;
  r.name = info.id;
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  r.thread = thread(thread_key, os_tid);
  r.category = info.category;
  session_.add_range(r);
  ++added_;
}

const HookDrain::NameInfo& HookDrain::lookup(std::string_view name, int kind) {
  auto& names = names_[kind == 2 ? 2 : kind == 1 ? 1 : 0];
  auto it = names.find(name);
  if (it != names.end()) return it->second;
  if (names.size() >= kMaxCachedNames) names.clear();
  std::string full = kind == 2 ? std::string(kBackwardPrefix) + std::string(name) : std::string(name);
  NameInfo info{};
  info.skip = skip_optimizer_step_ && kind == 0 && name.substr(0, 15) == "Optimizer.step#";
  if (!info.skip) {
    info.id = session_.intern(full);
    info.category = classify_range(full, kind == 1);
  }
  return names.emplace(std::string(name), info).first->second;
}

uint32_t HookDrain::thread(int64_t thread_key, int64_t os_tid) {
  if (thread_key == last_key_ && os_tid == last_os_tid_) return last_thread_;
  auto it = threads_.find({thread_key, os_tid});
  if (it == threads_.end()) {
    // The kernel's name for the thread ("pt_autograd_0", ...); a thread the
    // session already knows (the training thread) keeps its name.
    std::string comm;
    std::ifstream f("/proc/self/task/" + std::to_string(os_tid) + "/comm");
    std::getline(f, comm);
    it = threads_.emplace(std::make_pair(thread_key, os_tid), session_.thread_index(pid_, thread_key, comm, os_tid)).first;
  }
  last_key_ = thread_key;
  last_os_tid_ = os_tid;
  last_thread_ = it->second;
  return last_thread_;
}

}  // namespace gpuutil::torch_hook
