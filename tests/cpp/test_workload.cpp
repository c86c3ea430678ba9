// Workload classification (libgpuutil/src/analysis/workload.h) and the
// workload-aware findings it drives (findings.cpp, docs/findings.md
// "Workload").
//
// Planted event stores pin each kind (training, inference, capture,
// unknown), the capture-window arithmetic, and that findings choose the fix
// by kind: inference gets batching / CUDA graphs, never the optimizer fix,
// and CUDA-graph capture time is a note, not recoverable waste. The shared
// real traces pin the classifier on every trace there and the fixes the
// table leads with.
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

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  for (const auto& f : fs) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

std::vector<std::string> ids(const std::vector<Finding>& fs) {
  std::vector<std::string> out;
  for (const auto& f : fs) out.push_back(f.id);
  return out;
}

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

TEST(Workload, TheMemoGivesClassifyWorkloadsAnswerForEverySequenceOfSignals) {
  // Windows of one batch one after another: the same signals but for the
  // time (reused), a different step count or example (respelled), capture
  // coming and going (respelled: the capture share depends on the time).
  WorkloadSignals train;
  train.backward_ops = 12;
  train.backward_example = "AddmmBackward0";
  train.optimizer_ops = 3;
  train.optimizer_example = "Optimizer.step#SGD.step";
  train.steps = 1;
  train.steps_source = "session";
  train.analysed_ns = 1000;
  std::vector<WorkloadSignals> seq;
  seq.push_back(train);
  train.analysed_ns = 5000;
  seq.push_back(train);
  train.steps_source = "optimizer_step";
  seq.push_back(train);
  train.forward_example = "aten::linear";
  seq.push_back(train);
  train.capture_windows = 1;
  train.capture_ns = 600;
  seq.push_back(train);
  train.analysed_ns = 1000;  // now capture dominates: "capture"
  seq.push_back(train);
  train.capture_windows = 0;
  train.capture_ns = 0;
  seq.push_back(train);
  WorkloadSignals infer;
  infer.forward_ops = 7;
  infer.forward_example = "aten::conv2d";
  infer.steps = 1;
  seq.push_back(infer);
  seq.push_back(infer);
  WorkloadMemo memo;
  for (size_t i = 0; i < seq.size(); ++i) {
    const Workload want = classify_workload(seq[i]);
    const Workload& got = memo.classify(seq[i]);
    EXPECT_EQ(got.kind, want.kind) << i;
    EXPECT_EQ(got.evidence, want.evidence) << i;
    EXPECT_EQ(got.capture_ns, want.capture_ns) << i;
  }
  EXPECT_EQ(classify_workload(seq[5]).kind, "capture");
}

// --- findings by workload, through analyze() ------------------------------

TEST(WorkloadFindings, InferenceGetsGraphsAndBatchingNotTheOptimizerFix) {
  Planted p = host_bound_forward();
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  EXPECT_EQ(r.workload.kind, "inference");
  const Finding* host = find(r.findings, "idle_host");
  ASSERT_NE(host, nullptr) << ::testing::PrintToString(ids(r.findings));
  EXPECT_TRUE(has(host->fix, "CUDA graphs")) << host->fix;
  EXPECT_TRUE(has(host->fix, "reduce-overhead")) << host->fix;
  EXPECT_TRUE(has(host->fix, "batching")) << host->fix;
  EXPECT_TRUE(has(host->fix, "queue-delay budget")) << host->fix;
  EXPECT_TRUE(has(host->fix, "MIG/MPS")) << host->fix;
  const Finding* launch = find(r.findings, "idle_launch");
  ASSERT_NE(launch, nullptr);
  EXPECT_TRUE(has(launch->fix, "batching")) << launch->fix;
  for (const auto& f : r.findings) EXPECT_FALSE(has(f.fix, "optimizer")) << f.id << ": " << f.fix;
}

TEST(WorkloadFindings, TrainingKeepsTheOptimizerFix) {
  Planted p = host_bound_forward();
  p.range("autograd::engine::evaluate_function: AddmmBackward0", 910, 950);
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  EXPECT_EQ(r.workload.kind, "training");
  const Finding* host = find(r.findings, "idle_host");
  ASSERT_NE(host, nullptr);
  EXPECT_TRUE(has(host->fix, "fused/foreach optimizers")) << host->fix;
  for (const auto& f : r.findings) EXPECT_FALSE(has(f.fix, "queue-delay")) << f.id << ": " << f.fix;
}

TEST(WorkloadFindings, InferenceIdleDataloaderGetsServingFixTrainingGetsWorkers) {
  const auto dataloader_fix = [](bool training) {
    Planted p;
    p.step(0, 0, 1000);
    p.range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 400, 0, false);
    p.range("aten::linear", 399, 1000).kernel("gemm", 400, 1000, 399);
    if (training) p.range("aten::threshold_backward", 999, 1000);
    const Report r = analyze({&p.store()}, AnalysisOptions{});
    const Finding* f = find(r.findings, "idle_dataloader");
    return f ? f->fix : std::string("<none>");
  };
  const std::string inference = dataloader_fix(false);
  EXPECT_TRUE(has(inference, "continuous batching")) << inference;
  EXPECT_TRUE(has(inference, "model instances")) << inference;
  const std::string training = dataloader_fix(true);
  EXPECT_TRUE(has(training, "num_workers")) << training;
  EXPECT_FALSE(has(training, "batching")) << training;
}

TEST(WorkloadFindings, CaptureRunHasNoIdleWasteOnlyACaptureNote) {
  Planted p = capture_run();
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  EXPECT_EQ(r.workload.kind, "capture");
  ASSERT_GT(r.summary.devices.at(0).breakdown.idle_total_ns(), us(900));  // the GPU really idled
  for (const auto& f : r.findings) {
    EXPECT_NE(f.id.rfind("idle_", 0), 0u) << f.id << ": " << f.title;
    EXPECT_EQ(f.recoverable_ns, 0) << f.id;
  }
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].id, "graph_capture");
  EXPECT_TRUE(has(r.findings[0].title, "CUDA-graph capture run")) << r.findings[0].title;
  EXPECT_TRUE(has(r.findings[0].title, "expected")) << r.findings[0].title;
  EXPECT_EQ(r.findings[0].recoverable_ns, 0);
}

TEST(WorkloadFindings, SameRunWithoutCaptureCallsChargesTheIdle) {
  Planted p = capture_run();
  auto& calls = p.store().api_calls;
  calls.erase(std::remove_if(calls.begin(), calls.end(),
                             [&](const HostApiCall& c) {
                               const auto n = p.store().names.view(c.name);
                               return n.find("Capture") != std::string_view::npos ||
                                      n.find("GraphInstantiate") != std::string_view::npos;
                             }),
              calls.end());
  const Report r = analyze({&p.store()}, AnalysisOptions{});
  EXPECT_EQ(r.workload.kind, "inference");
  EXPECT_EQ(find(r.findings, "graph_capture"), nullptr);
  int64_t idle_recoverable_ns = 0;
  for (const auto& f : r.findings) {
    if (f.id.rfind("idle_", 0) == 0) idle_recoverable_ns += f.recoverable_ns;
  }
  EXPECT_GT(idle_recoverable_ns, us(500)) << ::testing::PrintToString(ids(r.findings));
}

TEST(WorkloadFindings, PartialCaptureTimeIsNotRecoverable) {
  // Two steps; the host captures during the first 300 us of step 0 (GPU
  // idle, idle_host), then the device is busy.
  const auto run = [](bool capture) {
    Planted p;
    p.step(0, 0, 1000).step(1, 1000, 2000);
    p.range("aten::linear", 0, 300);
    if (capture) p.api("cudaStreamBeginCapture", 0, 0.005).api("cudaStreamEndCapture", 299.995, 300);
    p.range("aten::linear", 300, 301).kernel("gemm", 301, 1000, 300.5);
    p.range("aten::linear", 999, 1000).kernel("gemm", 1000, 2000, 999.5);
    return analyze({&p.store()}, AnalysisOptions{});
  };
  const Report plain = run(false);
  const Finding* host = find(plain.findings, "idle_host");
  ASSERT_NE(host, nullptr) << ::testing::PrintToString(ids(plain.findings));
  EXPECT_EQ(host->recoverable_ns, us(300));

  const Report captured = run(true);
  EXPECT_EQ(captured.workload.kind, "inference");
  EXPECT_EQ(captured.workload.capture_ns, us(300));
  EXPECT_EQ(find(captured.findings, "idle_host"), nullptr) << ::testing::PrintToString(ids(captured.findings));
  const Finding* note = find(captured.findings, "graph_capture");
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->recoverable_ns, 0);
  EXPECT_TRUE(has(note->title, "15.0% of the analysed time")) << note->title;
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

TEST(WorkloadRealTraces, BertInferenceGetsAnInferenceFix) {
  GPUUTIL_REQUIRE_TRACES();
  const Report r = analyze_trace(test::trace_path("tracelens_h100_bert_small_inference.json.gz"));
  EXPECT_EQ(r.workload.kind, "inference");
  EXPECT_EQ(r.workload.evidence.rfind("no backward or optimizer ops", 0), 0u) << r.workload.evidence;
  ASSERT_FALSE(r.findings.empty());
  bool inference_fix = false;
  for (const auto& f : r.findings) {
    EXPECT_FALSE(has(f.fix, "optimizer")) << f.id << ": " << f.fix;
    inference_fix = inference_fix || has(f.fix, "batching");
  }
  EXPECT_TRUE(inference_fix) << ::testing::PrintToString(ids(r.findings));
  EXPECT_TRUE(has(r.findings[0].fix, "CUDA graphs") || has(r.findings[0].fix, "batching")) << r.findings[0].fix;
}

TEST(WorkloadRealTraces, TrainingTracesKeepTrainingFixes) {
  GPUUTIL_REQUIRE_TRACES();
  for (const char* name : {"kineto_resnet50_nw4_v100.json.gz", "hta_train_v100_ns_resolution.json.gz",
                           "hta_train_v100_dataloader_nccl_rank1.json.gz", "hta_sampled_rank0.json.gz"}) {
    const Report r = analyze_trace(test::trace_path(name));
    EXPECT_EQ(r.workload.kind, "training") << name;
    for (const auto& f : r.findings) {
      EXPECT_FALSE(has(f.fix, "queue-delay") || has(f.fix, "continuous batching")) << name << " " << f.id;
      if (f.id == "idle_host") {
        EXPECT_TRUE(has(f.fix, "fused/foreach optimizers")) << name;
      }
      if (f.id == "idle_dataloader") {
        EXPECT_TRUE(has(f.fix, "num_workers")) << name;
      }
    }
  }
  // ResNet-50 has host-bound gaps: the training fix names the optimizer.
  const Report resnet = analyze_trace(test::trace_path("kineto_resnet50_nw4_v100.json.gz"));
  ASSERT_NE(find(resnet.findings, "idle_host"), nullptr) << ::testing::PrintToString(ids(resnet.findings));
}

}  // namespace
}  // namespace gpuutil
