// Workload classification (libgpuutil/src/analysis/workload.h).
//
// Planted event stores pin each kind (training, inference, capture,
// unknown) and the capture-window arithmetic; the shared real traces pin
// the classifier on every trace there.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "analysis/windows.h"
#include "analysis/workload.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"
#include "gpuutil/report.h"
#include "planted.h"
#include "traces.h"

namespace gpuutil {
namespace {

using test::Planted;
using test::us;

Workload classify(const EventStore& s) {
  const EventSpan span = event_span(s);
  return classify_workload(workload_signals(s, span, analysis_windows(s, span)));
}

bool has(const std::string& text, const std::string& word) { return text.find(word) != std::string::npos; }

// One step of eager inference: a forward op launches k0, then the host does
// 600 us of CPU work (aten::layer_norm) with the GPU idle, then launches k1.
// idle_host 600 us, idle_launch 200 us of the 1000 us step.
Planted host_bound_forward() {
  Planted p;
  p.step(0, 0, 1000);
  p.range("aten::linear", 0, 2).kernel("gemm", 2, 100, 1);
  p.range("aten::layer_norm", 100, 700);
  p.range("aten::linear", 700, 900).kernel("gemm", 900, 1000, 899);
  return p;
}

// --- classification on planted stores -------------------------------------

TEST(Workload, BackwardAndOptimizerOpsAreTraining) {
  Planted p = host_bound_forward();
  p.range("autograd::engine::evaluate_function: AddmmBackward0", 910, 950);
  p.range("AddmmBackward0", 911, 949);
  p.range("Optimizer.step#SGD.step", 960, 990, 0, false);
  p.range("aten::_foreach_add_", 961, 970);
  p.range("aten::_foreach_add_", 995, 996);  // outside the optimizer range: not counted
  const Workload w = classify(p.store());
  EXPECT_EQ(w.kind, "training");
  EXPECT_TRUE(has(w.evidence, "2 backward ops (e.g. autograd::engine::evaluate_function: AddmmBackward0)"))
      << w.evidence;
  EXPECT_TRUE(has(w.evidence, "1 optimizer op (e.g. Optimizer.step#SGD.step) with 1 aten::_foreach_* op"))
      << w.evidence;
  EXPECT_TRUE(has(w.evidence, "; 1 step")) << w.evidence;
  EXPECT_EQ(w.capture_ns, 0);
}

TEST(Workload, BackwardAloneOrOptimizerAloneIsTraining) {
  Planted backward;
  backward.range("aten::convolution_backward", 0, 10);
  EXPECT_EQ(classify(backward.store()).kind, "training");
  Planted annotated;
  annotated.range("## backward ##", 0, 10, 0, false);
  EXPECT_EQ(classify(annotated.store()).kind, "training");
  Planted fused;
  fused.range("aten::linear", 0, 5).range("aten::_fused_adamw_", 5, 10);
  EXPECT_EQ(classify(fused.store()).kind, "training");
  Planted zero_grad;
  zero_grad.range("Optimizer.zero_grad#Adam.zero_grad", 0, 10, 0, false);
  EXPECT_EQ(classify(zero_grad.store()).kind, "training");
}

TEST(Workload, ForwardOnlyIsInference) {
  const Workload w = classify(host_bound_forward().store());
  EXPECT_EQ(w.kind, "inference");
  EXPECT_EQ(w.evidence.rfind("no backward or optimizer ops; 3 forward layer ops (e.g. aten::linear)", 0), 0u)
      << w.evidence;
}

TEST(Workload, ForeachOpsOutsideAnOptimizerAreNotTraining) {
  Planted p = host_bound_forward();
  p.range("aten::_foreach_mul_", 950, 960);
  EXPECT_EQ(classify(p.store()).kind, "inference");
}

TEST(Workload, NoModelOpsIsUnknown) {
  Planted p;
  p.range("aten::sum", 0, 10).kernel("reduce", 10, 20, 5);
  const Workload w = classify(p.store());
  EXPECT_EQ(w.kind, "unknown");
  EXPECT_TRUE(has(w.evidence, "no backward, optimizer or model-layer ops")) << w.evidence;
  EXPECT_TRUE(has(w.evidence, "no step markers")) << w.evidence;
  EXPECT_EQ(classify(EventStore{}).kind, "unknown");
}

// A CUDA-graph capture: the host records launches between
// cudaStreamBeginCapture and cudaStreamEndCapture (no kernel runs), then
// instantiates the graph; the GPU stays idle. 890 us of the 1000 us step.
Planted capture_run() {
  Planted p;
  p.step(0, 0, 1000);
  p.range("aten::linear", 0, 2).kernel("warmup_gemm", 2, 50, 1);
  p.api("cudaStreamBeginCapture", 60, 61);
  for (int i = 0; i < 8; ++i) {
    const double t = 100 + 100 * i;
    p.range("aten::linear", t, t + 50).api("cudaLaunchKernel", t + 40, t + 41);  // recorded, not run
  }
  p.api("cudaStreamEndCapture", 900, 905);
  p.api("cudaGraphInstantiateWithFlags", 905, 950);
  return p;
}

TEST(Workload, CaptureWindowCoveringMostOfTheRunIsCapture) {
  const Workload w = classify(capture_run().store());
  EXPECT_EQ(w.kind, "capture");
  EXPECT_EQ(w.capture_ns, us(950) - us(60));  // begin .. end, joined by the instantiation
  EXPECT_TRUE(has(w.evidence, "89.0% of the analysed time; 1 stream-capture window, 1 graph instantiation"))
      << w.evidence;
}

TEST(Workload, DriverAndPerThreadStreamCaptureNamesCount) {
  Planted p;
  p.step(0, 0, 100);
  p.range("aten::linear", 0, 1);
  p.api("cuStreamBeginCapture_v2", 10, 11).api("cuStreamEndCapture", 80, 81);
  Planted q;
  q.step(0, 0, 100);
  q.api("cudaStreamBeginCapture_ptsz", 5, 6).api("cudaStreamEndCapture_ptsz", 95, 96);
  EXPECT_EQ(classify(p.store()).kind, "capture");
  EXPECT_EQ(classify(p.store()).capture_ns, us(71));
  EXPECT_EQ(classify(q.store()).capture_ns, us(91));
}

TEST(Workload, CaptureStatusQueriesAreNotCapture) {
  // What real traces contain: torch asks whether a stream is capturing.
  Planted p = host_bound_forward();
  p.api("cudaStreamIsCapturing", 10, 11).api("cudaStreamGetCaptureInfo_v2", 20, 21);
  const Workload w = classify(p.store());
  EXPECT_EQ(w.kind, "inference");
  EXPECT_EQ(w.capture_ns, 0);
  EXPECT_FALSE(has(w.evidence, "capture")) << w.evidence;
}

TEST(Workload, CaptureStillOpenAtTheTraceEndIsClosedThere) {
  Planted p;
  p.step(0, 0, 1000);
  p.range("aten::linear", 0, 2).kernel("gemm", 2, 100, 1);
  p.api("cudaStreamBeginCapture", 400, 401);
  const Workload w = classify(p.store());
  EXPECT_EQ(w.capture_ns, us(600));
  EXPECT_EQ(w.kind, "capture");
}

TEST(Workload, ShortCaptureKeepsTheKindAndRecordsItsTime) {
  Planted p = host_bound_forward();
  p.api("cudaStreamBeginCapture", 100, 101).api("cudaStreamEndCapture", 399, 400);
  const Workload w = classify(p.store());
  EXPECT_EQ(w.kind, "inference");
  EXPECT_EQ(w.capture_ns, us(300));
  EXPECT_TRUE(has(w.evidence, "not counted as recoverable idle")) << w.evidence;
}

TEST(Workload, CaptureOutsideTheStepsIsNotCounted) {
  Planted p = host_bound_forward();
  p.api("cudaStreamBeginCapture", 1100, 1101).api("cudaStreamEndCapture", 1500, 1501);
  EXPECT_EQ(classify(p.store()).capture_ns, 0);
}

// --- the shared real traces -----------------------------------------------

Report analyze_trace(const std::string& path) {
  auto imp = import_kineto_file(path);
  EXPECT_TRUE(imp.ok) << imp.error;
  return analyze({&imp.store}, AnalysisOptions{});
}

TEST(WorkloadRealTraces, EverySharedTraceIsClassified) {
  GPUUTIL_REQUIRE_TRACES();
  // What each trace is (its README and its ops): a new trace must be added here.
  const std::map<std::string, std::string> expected = {
      {"hta_alexnet_a100_sync.json.gz", "inference"},  // forward benchmark ("...|warmup|forward"), no backward
      {"hta_cpu_only.json.gz", "unknown"},             // aten::empty and gloo only
      {"hta_event_sync_a100.json.gz", "unknown"},      // aten::sum / aten::item microbenchmark
      {"hta_mi250_rocm_train.json.gz", "training"},
      {"hta_nccl_a100_rank0.json.gz", "training"},
      {"hta_no_gpu_with_dataloader.json.gz", "training"},
      {"hta_sampled_rank0.json.gz", "training"},
      {"hta_sampled_rank1.json.gz", "training"},
      {"hta_train_v100_dataloader_nccl_rank1.json.gz", "training"},
      {"hta_train_v100_ns_resolution.json.gz", "training"},
      {"kineto_resnet50_nw4_v100.json.gz", "training"},
      {"tracelens_h100_bert_small_inference.json.gz", "inference"},
      {"tracelens_mi300x_torch_compile_triton.json.gz", "inference"},  // a compiled forward
  };
  size_t seen = 0;
  for (const auto& path : test::all_traces()) {
    const std::string name = std::filesystem::path(path).filename().string();
    const auto it = expected.find(name);
    if (it == expected.end()) {
      ADD_FAILURE() << name << " is not in the expected classification list";
      continue;
    }
    ++seen;
    const Report r = analyze_trace(path);
    EXPECT_EQ(r.workload.kind, it->second) << name << ": " << r.workload.evidence;
    EXPECT_EQ(r.workload.capture_ns, 0) << name;  // none of them captures a graph
    EXPECT_FALSE(r.workload.evidence.empty()) << name;
  }
  EXPECT_EQ(seen, expected.size());
}

}  // namespace
}  // namespace gpuutil
