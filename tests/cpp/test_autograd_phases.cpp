// Forward and backward in traces without module ranges (issue 26, item
// 11; analysis/autograd_phases.h): a CPU torch.profiler step planted as the
// real one is (a DataLoader whose collation runs under autograd, the
// model's ops and the loss carrying "Sequence number", zero_grad, backward
// as evaluate_function ranges on the calling thread, the optimizer) gets
// forward from the first to the last autograd op and backward from the
// first to the last node, as a live session's ranges would; module ranges
// turn the rule off; a GPU autograd worker thread keeps its node ranges;
// older traces' node ops are backward, never forward.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/autograd_phases.h"
#include "gpuutil/analysis.h"
#include "gpuutil/kineto_import.h"

namespace gpuutil {
namespace {

struct Ev {
  const char* cat;
  std::string name;
  double ts_us;
  double dur_us;
  int seq;  // "Sequence number", -1: none
  int tid = 1;
};

std::string trace_of(const std::vector<Ev>& events) {
  std::string doc = "{\"traceEvents\": [";
  for (size_t i = 0; i < events.size(); ++i) {
    const Ev& e = events[i];
    doc += std::string(i ? "," : "") + "{\"ph\": \"X\", \"cat\": \"" + e.cat + "\", \"name\": \"" + e.name +
           "\", \"pid\": 7, \"tid\": " + std::to_string(e.tid) + ", \"ts\": " + std::to_string(1000 + e.ts_us) +
           ", \"dur\": " + std::to_string(e.dur_us) + ", \"args\": {\"Record function id\": 0";
    if (e.seq >= 0) doc += ", \"Sequence number\": " + std::to_string(e.seq) + ", \"Fwd thread id\": 0";
    doc += "}}";
  }
  return doc + "]}";
}

// One training step of a CPU torch.profiler trace (times in us, relative to
// the step), as the real one (tests/python/test_cpu_trace_forward.py makes
// one) lays it out.
std::vector<Ev> cpu_step() {
  return {
      {"user_annotation", "ProfilerStep#7", 0, 460, -1},
      {"user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 8, 166, -1},
      {"cpu_op", "aten::stack", 129, 9, 49},  // collation peeks the autograd counter too
      {"cpu_op", "aten::linear", 187, 27, 49},
      {"cpu_op", "aten::t", 187.5, 2, 49},
      {"cpu_op", "aten::addmm", 197, 17, 50},
      {"cpu_op", "aten::relu", 220, 4, 51},
      {"cpu_op", "aten::linear", 229, 8, 52},
      {"cpu_op", "aten::addmm", 230, 7, 53},
      {"cpu_op", "aten::cross_entropy_loss", 245, 14, 54},
      {"user_annotation", "Optimizer.zero_grad#SGD.zero_grad", 270, 9, -1},
      {"cpu_op", "aten::ones_like", 298, 3, -1},
      {"cpu_op", "autograd::engine::evaluate_function: NllLossBackward0", 317, 6, 55},
      {"cpu_op", "NllLossBackward0", 318, 4, 55},
      {"cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 332, 23, 53},
      {"cpu_op", "AddmmBackward0", 333, 14, 53},
      {"cpu_op", "aten::mm", 335, 4, -1},
      {"cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 358, 2, -1},
      {"cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 376, 16, 50},
      {"user_annotation", "Optimizer.step#SGD.step", 416, 41, -1},
      {"cpu_op", "aten::add_", 443, 3, -1},
  };
}

HostThreadStepReport main_thread(const std::vector<Ev>& events) {
  ImportResult imp = import_kineto_json(trace_of(events));
  EXPECT_TRUE(imp.ok) << imp.error;
  const Report r = analyze(imp.store);
  EXPECT_EQ(r.steps.size(), 1u);
  for (const auto& h : r.steps.at(0).host) {
    if (h.tid == 1) return h;
  }
  ADD_FAILURE() << "no host thread 1";
  return {};
}

int64_t at(const HostThreadStepReport& h, HostCategory c) { return h.breakdown_ns[static_cast<size_t>(c)]; }

bool named(const HostThreadStepReport& h, HostCategory c, const std::string& name) {
  for (const auto& n : h.culprits[static_cast<size_t>(c)]) {
    if (n.name == name) return true;
  }
  return false;
}

TEST(KinetoSequenceNumber, MarksOnlyOpsThatRanUnderAutograd) {
  ImportResult imp = import_kineto_json(trace_of(cpu_step()));
  ASSERT_TRUE(imp.ok) << imp.error;
  size_t marked = 0;
  for (const HostRange& r : imp.store.ranges) {
    const std::string name(imp.store.names.view(r.name));
    if (name == "aten::linear" || name == "aten::stack" || name == "NllLossBackward0") {
      EXPECT_TRUE(r.autograd) << name;
    }
    if (name == "aten::ones_like" || name == "aten::add_" || name.rfind("Optimizer", 0) == 0) {
      EXPECT_FALSE(r.autograd) << name;
    }
    marked += r.autograd ? 1 : 0;
  }
  EXPECT_EQ(marked, 13u);  // every event planted with a sequence number
}

TEST(HostBreakdownAutogradPhases, ACpuTraceGetsForwardAndBackwardAsLiveRangesWould) {
  const HostThreadStepReport h = main_thread(cpu_step());
  EXPECT_EQ(h.wall_ns, 460'000);
  EXPECT_EQ(at(h, HostCategory::kDataloader), 166'000);  // the collation's autograd op stays dataloader
  EXPECT_EQ(at(h, HostCategory::kForward), 259'000 - 187'000);  // first model op .. end of the loss
  EXPECT_EQ(at(h, HostCategory::kBackward), 392'000 - 317'000);  // first .. last node, engine time between
  EXPECT_EQ(at(h, HostCategory::kOptimizer), 9'000 + 41'000);
  EXPECT_EQ(at(h, HostCategory::kOther), 460'000 - 166'000 - 72'000 - 75'000 - 50'000);
  // The model's ops name the forward time (not "other" any more); the
  // Python time between them has no name.
  EXPECT_TRUE(named(h, HostCategory::kForward, "aten::linear"));
  EXPECT_TRUE(named(h, HostCategory::kForward, "aten::cross_entropy_loss"));
  EXPECT_FALSE(named(h, HostCategory::kOther, "aten::linear"));
  int64_t sum = 0;
  for (int64_t v : h.breakdown_ns) sum += v;
  EXPECT_EQ(sum, h.wall_ns);
}

TEST(HostBreakdownAutogradPhases, ModuleRangesTurnTheForwardRuleOff) {
  std::vector<Ev> events = cpu_step();
  events.push_back({"user_annotation", "nn.Module: Net", 186, 52, -1});  // with_modules=True
  const HostThreadStepReport h = main_thread(events);
  EXPECT_EQ(at(h, HostCategory::kForward), 52'000);  // the module call, the loss after it not included
}

TEST(HostBreakdownAutogradPhases, AGpuAutogradWorkerKeepsItsNodeRanges) {
  std::vector<Ev> events;
  for (const Ev& e : cpu_step()) {
    Ev moved = e;
    if (e.name.find("Backward") != std::string::npos || e.name.find("AccumulateGrad") != std::string::npos ||
        e.name == "aten::mm") {
      moved.tid = 2;  // backward nodes on the device's autograd thread
    }
    events.push_back(moved);
  }
  ImportResult imp = import_kineto_json(trace_of(events));
  ASSERT_TRUE(imp.ok) << imp.error;
  const Report r = analyze(imp.store);
  ASSERT_EQ(r.steps.size(), 1u);
  for (const auto& h : r.steps[0].host) {
    if (h.tid == 2) {
      EXPECT_EQ(at(h, HostCategory::kBackward), 6'000 + 23'000 + 2'000 + 16'000);  // nodes only
    }
    if (h.tid == 1) {
      EXPECT_EQ(at(h, HostCategory::kForward), 72'000);
      EXPECT_EQ(at(h, HostCategory::kBackward), 0);
    }
  }
}

TEST(HostBreakdownAutogradPhases, NodeOpsOfOlderTracesAreBackwardNeverForward) {
  std::vector<Ev> events;
  for (const Ev& e : cpu_step()) {
    if (e.name.rfind("autograd::engine::evaluate_function", 0) == 0) continue;  // no evaluate_function ranges
    events.push_back(e);
  }
  events.push_back({"cpu_op", "AddmmBackward", 377, 14, 50});
  const std::vector<AutogradPhase> phases = [&] {
    ImportResult imp = import_kineto_json(trace_of(events));
    EXPECT_TRUE(imp.ok) << imp.error;
    return autograd_phases(imp.store);
  }();
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].category, HostCategory::kForward);
  EXPECT_EQ(phases[0].end_ns - phases[0].start_ns, 72'000);  // ends at the loss, not at a node
  EXPECT_EQ(phases[1].category, HostCategory::kBackward);
  EXPECT_EQ(phases[1].end_ns - phases[1].start_ns, 391'000 - 318'000);
}

TEST(HostBreakdownAutogradPhases, ALiveStoreHasNone) {
  EventStore s;
  s.threads.push_back({1, 1, "main"});
  HostRange r;
  r.name = s.names.intern("aten::linear");
  r.category = RangeCategory::kOp;
  r.start_ns = 0;
  r.end_ns = 10;
  s.ranges.push_back(r);  // live ranges carry no autograd mark
  EXPECT_TRUE(autograd_phases(s).empty());
}

}  // namespace
}  // namespace gpuutil
