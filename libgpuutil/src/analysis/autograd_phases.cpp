// Forward and backward phases of traces without module ranges (see
// analysis/autograd_phases.h): one sweep per thread over its ranges in
// start order (enclosing ranges first), keeping the ranges that exclude
// forward seeds on a stack and one open run per phase.
#include "analysis/autograd_phases.h"

#include <algorithm>
#include <string_view>

namespace gpuutil {

namespace {

struct Run {
  bool open = false;
  int64_t lo = 0;
  int64_t hi = 0;
};

bool named_backward(std::string_view name) {
  return name == "## backward ##" || name.rfind("## backward:", 0) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// An op of the backward pass recorded without an evaluate_function range
// around it (older traces, or nested in one): an autograd node
// ("AddmmBackward0", "CudnnConvolutionBackward"), AccumulateGrad, or an
// aten backward kernel ("aten::convolution_backward"). They run under
// autograd too, but are backward, never forward.
bool backward_op(std::string_view name) {
  std::string_view stem = name;
  while (!stem.empty() && stem.back() >= '0' && stem.back() <= '9') stem.remove_suffix(1);
  if (ends_with(stem, "Backward") && stem.size() > 8 && stem.find(' ') == std::string_view::npos) return true;
  if (ends_with(name, "AccumulateGrad")) return true;
  return name.rfind("aten::", 0) == 0 && name.find("_backward") != std::string_view::npos;
}

// Ranges inside which an autograd op is not forward: DataLoader collation,
// backward nodes' own ops, blocking syncs and collectives.
bool excludes_forward(RangeCategory c) {
  return c == RangeCategory::kDataloader || c == RangeCategory::kBackward || c == RangeCategory::kHostSync ||
         c == RangeCategory::kCollective;
}

}  // namespace

std::vector<AutogradPhase> autograd_phases(const EventStore& store) {
  std::vector<AutogradPhase> out;
  bool any_autograd = false, forward_named = false, backward_named = false;
  for (const HostRange& r : store.ranges) {
    any_autograd = any_autograd || r.autograd;
    if (r.category == RangeCategory::kForward) forward_named = true;
    if (r.category == RangeCategory::kBackward && !backward_named) backward_named = named_backward(store.names.view(r.name));
  }
  const bool forward = any_autograd && !forward_named;
  const bool backward = any_autograd && !backward_named;
  if (!forward && !backward) return out;

  std::vector<std::vector<uint32_t>> by_thread(store.threads.size());
  for (uint32_t i = 0; i < store.ranges.size(); ++i) {
    const HostRange& r = store.ranges[i];
    if (r.category == RangeCategory::kPython || r.end_ns <= r.start_ns) continue;
    if (r.thread >= by_thread.size()) by_thread.resize(r.thread + 1);
    by_thread[r.thread].push_back(i);
  }
  std::vector<int64_t> excluding;  // ends of the enclosing excluding ranges, innermost last
  for (uint32_t t = 0; t < by_thread.size(); ++t) {
    auto& idx = by_thread[t];
    std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
      const HostRange& x = store.ranges[a];
      const HostRange& y = store.ranges[b];
      if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
      if (x.end_ns != y.end_ns) return x.end_ns > y.end_ns;
      return a < b;
    });
    Run fwd, bwd;
    bool forward_seen = false;  // backward phases only on a thread that ran forward (the caller of backward())
    const size_t thread_first = out.size();
    const auto close = [&](Run& run, HostCategory c) {
      if (run.open && run.hi > run.lo) out.push_back({t, run.lo, run.hi, c});
      run.open = false;
    };
    const auto extend = [](Run& run, const HostRange& r) {
      if (!run.open) {
        run = {true, r.start_ns, r.end_ns};
      } else {
        run.hi = std::max(run.hi, r.end_ns);
      }
    };
    excluding.clear();
    for (uint32_t i : idx) {
      const HostRange& r = store.ranges[i];
      while (!excluding.empty() && excluding.back() <= r.start_ns) excluding.pop_back();
      RangeCategory category = r.category;
      if (category == RangeCategory::kOp && r.autograd && backward_op(store.names.view(r.name))) {
        category = RangeCategory::kBackward;
      }
      switch (category) {
        case RangeCategory::kDataloader:
        case RangeCategory::kOptimizer:
        case RangeCategory::kStep:
          close(fwd, HostCategory::kForward);
          close(bwd, HostCategory::kBackward);
          break;
        case RangeCategory::kBackward:
          close(fwd, HostCategory::kForward);
          if (backward) extend(bwd, r);
          break;
        case RangeCategory::kOp:
          if (forward && r.autograd && excluding.empty()) {
            close(bwd, HostCategory::kBackward);
            extend(fwd, r);
            forward_seen = true;
          }
          break;
        default:
          break;
      }
      if (excludes_forward(category)) excluding.push_back(r.end_ns);
    }
    close(fwd, HostCategory::kForward);
    close(bwd, HostCategory::kBackward);
    if (!forward_seen) {  // an autograd worker thread: its node ranges stand as they are
      out.erase(std::remove_if(out.begin() + static_cast<long>(thread_first), out.end(),
                               [](const AutogradPhase& p) { return p.category == HostCategory::kBackward; }),
                out.end());
    }
  }
  return out;
}

}  // namespace gpuutil
