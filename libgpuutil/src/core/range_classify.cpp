// Name classification shared by every collector (see gpuutil/range_classify.h).
//
// Three pure string functions: what a host range means (step, data loading,
// optimizer, host sync, collective, forward/backward, plain op or
// annotation), what a CUDA/HIP runtime or driver call does to the device
// and the host (launch, async copy, blocking copy, synchronize), and whether
// a kernel is a collective-communication kernel. The rules are deliberately
// conservative: a name is only given a specific meaning when PyTorch, NCCL or
// the CUDA/HIP API reference defines it; everything else stays kOp /
// kAnnotation / kOther.
#include "gpuutil/range_classify.h"

#include <array>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

namespace gpuutil {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Parses a non-negative decimal integer that makes up all of `digits`.
int64_t parse_non_negative(std::string_view digits) {
  if (digits.empty() || digits.size() > 18) return -1;  // 18 digits always fit int64
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// The API family prefix ("cuda", "__cuda" (CUDA 13's `<<<>>>` entry
// points), "cu", "hip") removed, or "" when the name is not a CUDA
// runtime/driver or HIP call.
std::string_view api_stem(std::string_view name) {
  if (starts_with(name, "__cuda")) return name.substr(6);
  if (starts_with(name, "cuda")) return name.substr(4);
  if (starts_with(name, "hip")) return name.substr(3);
  if (starts_with(name, "cu")) return name.substr(2);
  return {};
}

constexpr ApiClass kOtherApi{HostApiKind::kOther, SyncKind::kNone};

}  // namespace

std::string_view strip_api_version(std::string_view name) {
  const size_t us = name.rfind("_v");
  if (us != std::string_view::npos && us + 2 < name.size() && parse_non_negative(name.substr(us + 2)) >= 0) {
    return name.substr(0, us);
  }
  return name;
}

// Strips the version / per-thread-stream suffixes CUPTI and roctracer append
// to API names ("cudaLaunchKernel_v7000", "cudaMemcpyAsync_ptsz",
// "cuMemcpyHtoDAsync_v2", "cudaStreamGetCaptureInfo_v2"), repeatedly.
std::string_view strip_api_suffixes(std::string_view name) {
  for (;;) {
    if (ends_with(name, "_ptsz") || ends_with(name, "_ptds")) {
      name.remove_suffix(5);
      continue;
    }
    if (ends_with(name, "_spt")) {
      name.remove_suffix(4);
      continue;
    }
    const std::string_view unversioned = strip_api_version(name);
    if (unversioned.size() == name.size()) return name;
    name = unversioned;
  }
}

bool is_phase_range(std::string_view name) {
  if (starts_with(name, "ProfilerStep") || starts_with(name, "gpuutil.step")) return true;
  constexpr std::string_view kOpen = "## ", kClose = " ##";
  if (name.size() < kOpen.size() + kClose.size() || !starts_with(name, kOpen)) return false;
  if (name.substr(name.size() - kClose.size()) != kClose) return false;
  return name.find(':') == std::string_view::npos;
}

int64_t parse_step_number(std::string_view name) {
  constexpr std::array<std::string_view, 2> kPrefixes = {"ProfilerStep#", "gpuutil.step#"};
  for (std::string_view prefix : kPrefixes) {
    if (starts_with(name, prefix)) return parse_non_negative(name.substr(prefix.size()));
  }
  return -1;
}

RangeCategory classify_range(std::string_view name, bool is_op) {
  if (parse_step_number(name) >= 0) return RangeCategory::kStep;

  // torch.utils.data.DataLoader's iterator: "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__".
  if (starts_with(name, "enumerate(DataLoader)")) return RangeCategory::kDataloader;

  // torch.optim.Optimizer's profiling hooks: "Optimizer.step#SGD.step", "Optimizer.zero_grad#Adam.zero_grad".
  // Gradient clipping is part of the update: gpuutil's Python hooks time
  // torch.nn.utils.clip_grad_norm_ / clip_grad_value_ under these names.
  if (starts_with(name, "Optimizer.step#") || starts_with(name, "Optimizer.zero_grad#") ||
      name == "Optimizer.step" || name == "Optimizer.zero_grad" || name == "## optimizer ##" ||
      name == "torch.nn.utils.clip_grad_norm_" || name == "torch.nn.utils.clip_grad_value_") {
    return RangeCategory::kOptimizer;
  }

  // Ops that copy a scalar to the host and therefore wait for the device;
  // "## host_sync: Tensor.cpu ##" etc. from gpuutil's Python hooks.
  if (name == "aten::item" || name == "aten::_local_scalar_dense" || starts_with(name, "## host_sync")) {
    return RangeCategory::kHostSync;
  }

  // Host side of collectives: record_function names of ProcessGroup calls.
  constexpr std::array<std::string_view, 7> kCollectivePrefixes = {
      "nccl:", "gloo:", "record_param_comms", "c10d::", "ProcessGroupNCCL", "ProcessGroupGloo", "ProcessGroupMPI"};
  for (std::string_view prefix : kCollectivePrefixes) {
    if (starts_with(name, prefix)) return RangeCategory::kCollective;
  }

  // Autograd engine node evaluation ("autograd::engine::evaluate_function: AddmmBackward0").
  if (starts_with(name, "autograd::engine::evaluate_function") || name == "## backward ##" ||
      starts_with(name, "## backward:")) {
    return RangeCategory::kBackward;
  }

  // Forward only where the name says so unambiguously: the "## forward ##"
  // annotations of training loops, nn.Module calls recorded with
  // with_modules=True ("nn.Module: ResNet_0"), "DistributedDataParallel.forward".
  if (name == "## forward ##" || starts_with(name, "## forward:") || starts_with(name, "nn.Module: ") ||
      (ends_with(name, ".forward") && name.size() > 8 && name.find(' ') == std::string_view::npos)) {
    return RangeCategory::kForward;
  }

  return is_op ? RangeCategory::kOp : RangeCategory::kAnnotation;
}

ApiCategory classify_call(std::string_view name) {
  const std::string_view stem = api_stem(strip_api_suffixes(name));
  if (stem.empty()) return ApiCategory::kOther;
  auto any_of = [&](std::initializer_list<std::string_view> needles) {
    for (std::string_view n : needles) {
      if (contains(stem, n)) return true;
    }
    return false;
  };
  // Graphs: only a launch runs one (and an upload is stream-ordered work);
  // every other Graph* call builds, instantiates or edits one. Graphics*
  // is interop: mapping resources is ordered on a stream.
  if (starts_with(stem, "Graphics")) {
    return stem == "GraphicsMapResources" || stem == "GraphicsUnmapResources" ? ApiCategory::kStreamWork
                                                                              : ApiCategory::kOther;
  }
  if (starts_with(stem, "Graph")) {
    if (stem == "GraphLaunch") return ApiCategory::kGraphLaunch;
    if (stem == "GraphUpload") return ApiCategory::kStreamWork;
    return ApiCategory::kOther;
  }
  // The host waits: DeviceSynchronize, ThreadSynchronize, CtxSynchronize,
  // StreamSynchronize, EventSynchronize.
  if (ends_with(stem, "Synchronize")) return ApiCategory::kSync;
  if (any_of({"LaunchHostFunc", "StreamAddCallback"})) return ApiCategory::kHostFunc;
  // Kernel launches: cudaLaunchKernel(ExC), __cudaLaunchKernel, cooperative
  // (multi-device) launches, cuLaunchKernel(Ex), the legacy cudaLaunch,
  // cuLaunch, cuLaunchGrid(Async), HIP's (Ext)(Module)LaunchKernel.
  if ((contains(stem, "Launch") && contains(stem, "Kernel")) || stem == "Launch" || stem == "LaunchGrid" ||
      stem == "LaunchGridAsync") {
    return ApiCategory::kLaunch;
  }
  if (contains(stem, "Memcpy")) return ApiCategory::kCopy;
  if (contains(stem, "Memset")) return ApiCategory::kMemset;
  if (starts_with(stem, "StreamBeginCapture")) return ApiCategory::kCaptureBegin;
  if (starts_with(stem, "StreamEndCapture")) return ApiCategory::kCaptureEnd;
  if (starts_with(stem, "StreamCreate") || stem == "GreenCtxStreamCreate") return ApiCategory::kStreamCreate;
  if (starts_with(stem, "StreamDestroy")) return ApiCategory::kStreamDestroy;
  if (starts_with(stem, "EventRecord") || ends_with(stem, "RecordEvent")) return ApiCategory::kEventRecord;
  if (any_of({"WaitEvent", "StreamWaitValue", "WaitExternalSemaphores"})) return ApiCategory::kStreamWait;
  if (any_of({"MemPrefetch", "MemDiscard", "StreamWriteValue", "StreamBatchMemOp", "SignalExternalSemaphores",
              "MallocAsync", "FreeAsync", "MallocFromPoolAsync", "MemAllocAsync", "MemAllocFromPoolAsync",
              "MemMapArrayAsync", "StreamAttachMemAsync", "MemBatchDecompressAsync"})) {
    return ApiCategory::kStreamWork;
  }
  return ApiCategory::kOther;
}

const char* to_string(ApiCategory c) {
  switch (c) {
    case ApiCategory::kOther: return "other";
    case ApiCategory::kLaunch: return "launch";
    case ApiCategory::kGraphLaunch: return "graph_launch";
    case ApiCategory::kCopy: return "copy";
    case ApiCategory::kMemset: return "memset";
    case ApiCategory::kSync: return "sync";
    case ApiCategory::kEventRecord: return "event_record";
    case ApiCategory::kStreamWait: return "stream_wait";
    case ApiCategory::kStreamWork: return "stream_work";
    case ApiCategory::kHostFunc: return "host_func";
    case ApiCategory::kCaptureBegin: return "capture_begin";
    case ApiCategory::kCaptureEnd: return "capture_end";
    case ApiCategory::kStreamCreate: return "stream_create";
    case ApiCategory::kStreamDestroy: return "stream_destroy";
  }
  return "other";
}

ApiClass classify_api(std::string_view name) {
  const std::string_view stem = api_stem(strip_api_suffixes(name));
  switch (classify_call(name)) {
    case ApiCategory::kSync:
      if (stem == "DeviceSynchronize" || stem == "ThreadSynchronize") return {HostApiKind::kSynchronize, SyncKind::kDevice};
      if (stem == "StreamSynchronize") return {HostApiKind::kSynchronize, SyncKind::kStream};
      if (stem == "EventSynchronize") return {HostApiKind::kSynchronize, SyncKind::kEvent};
      if (stem == "CtxSynchronize") return {HostApiKind::kSynchronize, SyncKind::kContext};
      return kOtherApi;
    case ApiCategory::kLaunch:
      return {HostApiKind::kLaunch, SyncKind::kNone};
    case ApiCategory::kGraphLaunch:
      return {HostApiKind::kLaunch, SyncKind::kNone, true};
    case ApiCategory::kMemset:
      // Synchronous memset APIs return once the memset is enqueued for
      // device memory: treat them like their async variants.
      return {HostApiKind::kAsyncCopy, SyncKind::kNone};
    case ApiCategory::kCopy:
      if (ends_with(stem, "Async")) return {HostApiKind::kAsyncCopy, SyncKind::kNone};
      // hipMemcpyWithStream is what PyTorch ROCm uses for blocking copies.
      if (stem == "MemcpyWithStream") return {HostApiKind::kBlockingCopy, SyncKind::kOther};
      // Explicit device-to-device copies perform no host-side
      // synchronization (CUDA "API synchronization behavior").
      if (contains(stem, "DtoD")) return {HostApiKind::kAsyncCopy, SyncKind::kNone};
      return {HostApiKind::kBlockingCopy, SyncKind::kOther};
    case ApiCategory::kStreamWork:
      // A prefetch enqueues a migration the way an async copy does (its
      // records are unified-memory ones, which gpuutil does not trace).
      if (starts_with(stem, "MemPrefetch")) return {HostApiKind::kAsyncCopy, SyncKind::kNone};
      return kOtherApi;
    default:
      return kOtherApi;
  }
}

ApiRole api_role(std::string_view name) {
  ApiRole role;
  role.category = classify_call(name);
  const std::string_view stem = api_stem(strip_api_suffixes(name));
  switch (role.category) {
    case ApiCategory::kLaunch:
      role.expects_record = true;
      role.multi_record = contains(stem, "MultiDevice");  // a record on each device
      break;
    case ApiCategory::kGraphLaunch:
      role.expects_record = role.graph_launch = role.multi_record = true;
      break;
    case ApiCategory::kCopy:
      role.expects_record = true;
      role.multi_record = contains(stem, "Batch");  // a record per copy of the batch
      break;
    case ApiCategory::kMemset:
      role.expects_record = true;
      break;
    case ApiCategory::kCaptureBegin:
      role.capture = CaptureMark::kBegin;
      break;
    case ApiCategory::kCaptureEnd:
      role.capture = CaptureMark::kEnd;
      break;
    default:
      break;
  }
  role.traced = role.category != ApiCategory::kOther;
  return role;
}

namespace {

// Communication kernels by what they do, case-folded substrings: the
// collective libraries (NCCL, RCCL, MSCCL/MSCCL++, NVSHMEM), expert-parallel
// dispatch/combine (DeepEP's deep_ep:: and dpsk::ep:: namespaces, pplx
// kernels), torch's symmetric-memory collectives (symm_mem, multimem
// all-reduce), the custom all-reduce of vLLM and SGLang
// (cross_device_reduce_1stage/2stage), a collective verb in any library's
// kernel (one_shot_all_reduce, twoShotAllReduceKernel, all_to_all,
// reduce_scatter, all_gather), and c10d's own kernels.
constexpr std::array<std::string_view, 21> kCommunicationNeedles = {
    "nccl",      "rccl",          "msccl",      "nvshmem",   "c10d::",     "deep_ep",   "deepep",
    "dpsk::ep",  "pplx",          "symm_mem",   "multimem",  "cross_device_reduce",      "allreduce",
    "all_reduce", "allgather",    "all_gather", "reducescatter", "reduce_scatter", "alltoall", "all_to_all",
    "alltoallv"};

bool has_folded(std::string_view name, std::string_view needle) {
  if (needle.empty() || name.size() < needle.size()) return false;
  for (size_t i = 0; i + needle.size() <= name.size(); ++i) {
    size_t j = 0;
    while (j < needle.size() && ascii_lower(name[i + j]) == needle[j]) ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

std::mutex g_user_mu;
std::vector<std::string> g_user_patterns;  // case-folded
bool g_user_from_env = false;

std::vector<std::string> folded(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (std::string p : in) {
    for (char& c : p) c = ascii_lower(c);
    if (!p.empty()) out.push_back(std::move(p));
  }
  return out;
}

// GPUUTIL_COMM_KERNELS, read once: comma-separated substrings.
void load_env_locked() {
  if (g_user_from_env) return;
  g_user_from_env = true;
  const char* env = std::getenv("GPUUTIL_COMM_KERNELS");
  if (env == nullptr) return;
  std::vector<std::string> parts;
  std::string cur;
  for (const char* p = env;; ++p) {
    if (*p == ',' || *p == '\0') {
      size_t a = cur.find_first_not_of(" \t"), b = cur.find_last_not_of(" \t");
      if (a != std::string::npos) parts.push_back(cur.substr(a, b - a + 1));
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  g_user_patterns = folded(parts);
}

// The built-in families (kCommunicationNeedles) in one pass.
bool is_builtin_communication_kernel(std::string_view name) {
  // One pass: only a position whose letter can start a needle is compared
  // (templated kernel names run to kilobytes, and a trace has hundreds of
  // distinct ones).
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = ascii_lower(name[i]);
    if (c != 'n' && c != 'r' && c != 'm' && c != 'c' && c != 'd' && c != 'p' && c != 's' && c != 'a') continue;
    for (std::string_view needle : kCommunicationNeedles) {
      if (needle[0] != c || name.size() - i < needle.size()) continue;
      size_t j = 1;
      while (j < needle.size() && ascii_lower(name[i + j]) == needle[j]) ++j;
      if (j == needle.size()) return true;
    }
  }
  return false;
}

}  // namespace

void set_communication_kernel_patterns(const std::vector<std::string>& substrings) {
  std::lock_guard<std::mutex> lock(g_user_mu);
  g_user_from_env = true;  // an explicit setting replaces the environment's
  g_user_patterns = folded(substrings);
}

std::vector<std::string> communication_kernel_patterns() {
  std::lock_guard<std::mutex> lock(g_user_mu);
  load_env_locked();
  return g_user_patterns;
}

bool is_communication_kernel(std::string_view name) {
  if (is_builtin_communication_kernel(name)) return true;
  std::lock_guard<std::mutex> lock(g_user_mu);
  load_env_locked();
  for (const std::string& p : g_user_patterns) {
    if (has_folded(name, p)) return true;
  }
  return false;
}

}  // namespace gpuutil
