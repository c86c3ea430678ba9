// Workload classification (see workload.h; the rules are in
// docs/findings.md, "Workload").
//
// Names are classified once per NameId. Backward: the autograd engine's
// ranges ("autograd::engine::evaluate_function: ...", "## backward ##"),
// autograd node ops ("AddmmBackward0") and aten backward kernels
// ("aten::convolution_backward"). Optimizer: torch.optim's profiling ranges
// ("Optimizer.step#SGD.step", "Optimizer.zero_grad#..."), "## optimizer ##"
// and the fused optimizer ops (aten::_fused_adam_, ...). Forward: the ops
// that make up model layers (linear/matmul, convolution, attention,
// normalization, embedding) and forward ranges ("## forward ##",
// "nn.Module: ..."). Capture: CUDA/HIP stream capture begin..end on one
// thread, plus graph instantiation calls. torch.cuda.graph and vLLM record
// no profiler range of their own around capture (vLLM's "Capturing CUDA
// graphs" is a progress-bar label, not a trace event), so the API calls are
// the signal.
#include "analysis/workload.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "analysis/intervals.h"
#include "analysis/text_format.h"
#include "gpuutil/range_classify.h"

namespace gpuutil {

namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
bool contains(std::string_view s, std::string_view n) { return s.find(n) != std::string_view::npos; }

enum class OpRole : uint8_t { kNone, kBackward, kOptimizer, kForeach, kForward };

// The op's name after its namespace ("aten::linear" -> "linear").
std::string_view base_name(std::string_view name) {
  const size_t colon = name.rfind("::");
  return colon == std::string_view::npos ? name : name.substr(colon + 2);
}

// "AddmmBackward0", "ReluBackward": an autograd node (ends in Backward + digits).
bool is_autograd_node(std::string_view name) {
  while (!name.empty() && name.back() >= '0' && name.back() <= '9') name.remove_suffix(1);
  return ends_with(name, "Backward") && name.size() > 8 && name.find(' ') == std::string_view::npos;
}

bool is_layer_op(std::string_view name) {
  const std::string_view b = base_name(name);
  constexpr std::array<std::string_view, 9> kLayers = {"linear", "addmm",  "mm",        "bmm",          "baddbmm",
                                                        "matmul", "einsum", "embedding", "embedding_bag"};
  for (std::string_view l : kLayers) {
    if (b == l) return true;
  }
  return contains(b, "convolution") || starts_with(b, "conv1d") || starts_with(b, "conv2d") ||
         starts_with(b, "conv3d") || starts_with(b, "conv_transpose") || contains(b, "attention") ||
         contains(b, "layer_norm") || contains(b, "batch_norm") || contains(b, "group_norm") || contains(b, "rms_norm");
}

OpRole role_of(std::string_view name, RangeCategory category) {
  switch (category) {
    case RangeCategory::kBackward: return OpRole::kBackward;
    case RangeCategory::kOptimizer: return OpRole::kOptimizer;
    case RangeCategory::kForward: return OpRole::kForward;
    case RangeCategory::kOp: break;
    default: return OpRole::kNone;
  }
  if (is_autograd_node(name)) return OpRole::kBackward;
  if (starts_with(name, "aten::") && contains(name, "_backward")) return OpRole::kBackward;
  if (starts_with(name, "aten::_fused_adam") || starts_with(name, "aten::_fused_sgd") ||
      starts_with(name, "aten::_fused_adagrad")) {
    return OpRole::kOptimizer;
  }
  if (starts_with(name, "aten::_foreach_")) return OpRole::kForeach;
  if (is_layer_op(name)) return OpRole::kForward;
  return OpRole::kNone;
}

// cudaGraphInstantiate, cudaGraphInstantiateWithFlags, cuGraphInstantiate_v2, hipGraphInstantiate, ...
bool is_graph_instantiate(std::string_view name) {
  return (starts_with(name, "cuda") || starts_with(name, "cu") || starts_with(name, "hip")) &&
         contains(name, "GraphInstantiate");
}


// "1 backward op", "3 backward ops".
std::string count_of(uint64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string counted(uint64_t n, const std::string& noun, const std::string& example) {
  std::string s = count_of(n, noun);
  if (!example.empty()) s += " (e.g. " + example + ")";
  return s;
}

std::string steps_text(const WorkloadSignals& s) {
  if (s.steps == 0) return "no step markers (one whole-trace window)";
  return count_of(s.steps, "step") + (s.steps_source.empty() ? "" : " from " + s.steps_source);
}

}  // namespace

WorkloadSignals& WorkloadSignals::operator+=(const WorkloadSignals& o) {
  backward_ops += o.backward_ops;
  if (backward_example.empty()) backward_example = o.backward_example;
  optimizer_ops += o.optimizer_ops;
  if (optimizer_example.empty()) optimizer_example = o.optimizer_example;
  foreach_in_optimizer += o.foreach_in_optimizer;
  forward_ops += o.forward_ops;
  if (forward_example.empty()) forward_example = o.forward_example;
  capture_windows += o.capture_windows;
  graph_instantiations += o.graph_instantiations;
  capture_ns += o.capture_ns;
  analysed_ns += o.analysed_ns;
  steps += o.steps;
  if (steps_source.empty()) steps_source = o.steps_source;
  return *this;
}

WorkloadIndex::WorkloadIndex(const EventStore& store, const EventSpan& span) {
  WorkloadSignals& out = base_;

  // Ranges: one classification per (name, category).
  std::unordered_map<uint64_t, OpRole> roles;
  std::vector<std::vector<Interval>> optimizer_by_thread;
  std::vector<const HostRange*> foreach_ops;
  for (const auto& r : store.ranges) {
    const uint64_t key = (static_cast<uint64_t>(r.name) << 8) | static_cast<uint64_t>(r.category);
    auto it = roles.find(key);
    if (it == roles.end()) it = roles.emplace(key, role_of(store.names.view(r.name), r.category)).first;
    switch (it->second) {
      case OpRole::kBackward:
        if (out.backward_ops++ == 0) out.backward_example = std::string(store.names.view(r.name));
        break;
      case OpRole::kOptimizer:
        if (out.optimizer_ops++ == 0) out.optimizer_example = std::string(store.names.view(r.name));
        if (r.thread >= optimizer_by_thread.size()) optimizer_by_thread.resize(r.thread + 1);
        optimizer_by_thread[r.thread].push_back({r.start_ns, r.end_ns});
        break;
      case OpRole::kForeach: foreach_ops.push_back(&r); break;
      case OpRole::kForward:
        if (out.forward_ops++ == 0) out.forward_example = std::string(store.names.view(r.name));
        break;
      case OpRole::kNone: break;
    }
  }
  // aten::_foreach_* ops count as optimizer work only inside an optimizer range.
  std::vector<IntervalList> optimizer_union(optimizer_by_thread.size());
  for (size_t t = 0; t < optimizer_by_thread.size(); ++t) {
    optimizer_union[t] = union_of(std::move(optimizer_by_thread[t]));
  }
  for (const HostRange* r : foreach_ops) {
    if (r->thread < optimizer_union.size() && containing(optimizer_union[r->thread], r->start_ns) >= 0) {
      ++out.foreach_in_optimizer;
    }
  }

  // Capture windows: begin..end on the calling thread, in call order.
  enum class CaptureCall : uint8_t { kNone, kBegin, kEnd, kInstantiate };
  std::unordered_map<NameId, CaptureCall> call_kinds;  // one classification per name
  const auto call_kind = [&](NameId id) {
    auto it = call_kinds.find(id);
    if (it != call_kinds.end()) return it->second;
    const std::string_view name = store.names.view(id);
    const CaptureMark mark = api_role(name).capture;
    const CaptureCall k = is_graph_instantiate(name)   ? CaptureCall::kInstantiate
                          : mark == CaptureMark::kBegin ? CaptureCall::kBegin
                          : mark == CaptureMark::kEnd   ? CaptureCall::kEnd
                                                        : CaptureCall::kNone;
    call_kinds.emplace(id, k);
    return k;
  };
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < store.api_calls.size(); ++i) {
    if (call_kind(store.api_calls[i].name) != CaptureCall::kNone) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const auto& x = store.api_calls[a];
    const auto& y = store.api_calls[b];
    return x.thread != y.thread ? x.thread < y.thread : x.start_ns < y.start_ns;
  });
  std::vector<Interval> raw;
  std::unordered_map<uint32_t, int64_t> open;  // thread -> capture begin
  for (uint32_t i : order) {
    const HostApiCall& c = store.api_calls[i];
    const CaptureCall k = call_kind(c.name);
    if (k == CaptureCall::kInstantiate) {
      ++out.graph_instantiations;
      raw.push_back({c.start_ns, c.end_ns});
      continue;
    }
    if (k == CaptureCall::kBegin) {
      open.emplace(c.thread, c.start_ns);  // a nested begin keeps the outer one
      continue;
    }
    // End: closes the thread's open window, or one that began before the trace.
    auto it = open.find(c.thread);
    const int64_t begin = it != open.end() ? it->second : (span.empty() ? c.start_ns : span.lo);
    if (it != open.end()) open.erase(it);
    raw.push_back({begin, c.end_ns});
    ++out.capture_windows;
  }
  for (const auto& [thread, begin] : open) {  // still capturing when the trace ends
    (void)thread;
    raw.push_back({begin, span.empty() ? begin : span.hi});
    ++out.capture_windows;
  }
  capture_ = union_of(std::move(raw));
}

WorkloadSignals WorkloadIndex::signals(const std::vector<StepWindow>& windows, bool markers,
                                       const std::string& steps_source) const {
  WorkloadSignals out = base_;
  if (markers) {
    out.steps = windows.size();
    out.steps_source = steps_source;
  }
  for (const auto& w : windows) {
    out.analysed_ns += w.wall_ns();
    out.capture_ns += covered_ns(capture_, w.start_ns, w.end_ns);
  }
  return out;
}

Workload classify_workload(const WorkloadSignals& s) {
  Workload w;
  w.capture_ns = s.capture_ns;
  const double capture_share =
      s.analysed_ns > 0 ? static_cast<double>(s.capture_ns) / static_cast<double>(s.analysed_ns) : 0.0;
  std::string capture_text;
  if (s.capture_windows > 0 || s.graph_instantiations > 0) {
    capture_text = "CUDA-graph capture " + ms_text(s.capture_ns) + " (" + pct_text(capture_share) + " of the analysed time; " +
                   count_of(s.capture_windows, "stream-capture window") + ", " +
                   count_of(s.graph_instantiations, "graph instantiation") + ")";
  }
  if (s.analysed_ns > 0 && capture_share > kCaptureDominant) {
    w.kind = "capture";
    w.evidence = capture_text + ": the device idles while work is recorded, not run";
    return w;
  }
  std::string e;
  if (s.backward_ops > 0 || s.optimizer_ops > 0) {
    w.kind = "training";
    if (s.backward_ops > 0) e = counted(s.backward_ops, "backward op", s.backward_example);
    if (s.optimizer_ops > 0) {
      if (!e.empty()) e += ", ";
      e += counted(s.optimizer_ops, "optimizer op", s.optimizer_example);
      if (s.foreach_in_optimizer > 0) e += " with " + count_of(s.foreach_in_optimizer, "aten::_foreach_* op");
    }
  } else if (s.forward_ops > 0) {
    w.kind = "inference";
    e = "no backward or optimizer ops; " + counted(s.forward_ops, "forward layer op", s.forward_example);
  } else {
    w.kind = "unknown";
    e = "no backward, optimizer or model-layer ops";
  }
  e += "; " + steps_text(s);
  if (!capture_text.empty()) e += "; " + capture_text + ", not counted as recoverable idle";
  w.evidence = std::move(e);
  return w;
}

namespace {

bool no_capture(const WorkloadSignals& s) {
  return s.capture_windows == 0 && s.graph_instantiations == 0 && s.capture_ns == 0;
}

// Equal in everything classify_workload reads when there is no capture.
bool same_without_capture(const WorkloadSignals& a, const WorkloadSignals& b) {
  return no_capture(a) && no_capture(b) && a.backward_ops == b.backward_ops &&
         a.optimizer_ops == b.optimizer_ops && a.foreach_in_optimizer == b.foreach_in_optimizer &&
         a.forward_ops == b.forward_ops && a.steps == b.steps && a.backward_example == b.backward_example &&
         a.optimizer_example == b.optimizer_example && a.forward_example == b.forward_example &&
         a.steps_source == b.steps_source;
}

}  // namespace

const Workload& WorkloadMemo::classify(const WorkloadSignals& signals) {
  if (!valid_ || !same_without_capture(last_, signals)) {
    workload_ = classify_workload(signals);
    last_ = signals;
    valid_ = true;
  }
  return workload_;
}

}  // namespace gpuutil
