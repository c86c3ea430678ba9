// Planted-timeline tests of culprit choice (docs/accounting.md,
// "Culprits"): a culprit names the innermost useful unit. Issue 26, item 7,
// at the sizes it was seen at: the all-reduces inside a compiled backward
// (not the 402 ms `CompiledFunctionBackward` around them), the Python
// frames under a coarse request annotation, and the thread that was
// actually blocked rather than an idle autograd thread.
#include <gtest/gtest.h>

#include <string>

#include "analysis/culprit.h"
#include "gpuutil/analysis.h"
#include "planted.h"

namespace gpuutil {
namespace {

using test::Planted;
using test::us;

const NamedTime* culprit(const DeviceStepReport& d, IdleCause c, const std::string& name) {
  for (const auto& n : d.culprits[static_cast<size_t>(c)]) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

int64_t idle(const DeviceStepReport& d, IdleCause c) { return d.breakdown.idle_ns[static_cast<size_t>(c)]; }

void expect_identities(const DeviceStepReport& d) {
  EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);
  EXPECT_EQ(d.breakdown.busy_ns(), d.busy_ns);
}

Planted& python_frame(Planted& p, const std::string& name, double start_us, double end_us, uint32_t thread = 0) {
  p.range(name, start_us, end_us, thread, /*is_op=*/false);
  p.store().ranges.back().category = RangeCategory::kPython;
  return p;
}

// A compiled DDP backward on the autograd thread: one 402 ms
// `CompiledFunctionBackward` op holding 404 all-reduces per step, each a
// c10d::allreduce_ that launches an NCCL kernel, with a GEMM (aten::mm)
// between them. Per 995 us round i from t = 1000 + 995 i:
//   host:   c10d::allreduce_ [t, t+50) > launch at t+40;  aten::mm [t+400, t+450) > launch at t+440
//   device: nccl [t+60, t+360)                             gemm [t+460, t+900)
// Each late launch is named by the unit that queued it, never by the
// region around all of them.
TEST(Culprits, AllReducesInsideACompiledBackwardAreNamedNotTheCompiledRegion) {
  constexpr int kAllReduces = 404;
  constexpr double kRound = 995;
  Planted p;
  const uint32_t autograd = p.thread("pt_autograd_0");
  const double end = 1000 + kRound * kAllReduces;  // 402,980 us: a 402 ms region
  p.step(1, 0, end + 1000);
  p.range("autograd::engine::evaluate_function: CompiledFunctionBackward", 1000, end, autograd);
  p.range("CompiledFunctionBackward", 1000, end, autograd);
  for (int i = 0; i < kAllReduces; ++i) {
    const double t = 1000 + kRound * i;
    p.range("c10d::allreduce_", t, t + 50, autograd);
    p.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 60, t + 360, t + 40, autograd, 0, 20);
    p.range("aten::mm", t + 400, t + 450, autograd);
    p.kernel("gemm", t + 460, t + 900, t + 440, autograd);
  }
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  // No queued-work culprit is the region.
  for (IdleCause c : {IdleCause::kLaunch, IdleCause::kKernelGap, IdleCause::kDependency}) {
    EXPECT_EQ(culprit(d, c, "CompiledFunctionBackward"), nullptr) << to_string(c);
  }
  // Each all-reduce's launch is the all-reduce's: 404 of them, 20 us each.
  const NamedTime* allreduce = culprit(d, IdleCause::kLaunch, "c10d::allreduce_");
  ASSERT_NE(allreduce, nullptr);
  EXPECT_EQ(allreduce->count, static_cast<uint64_t>(kAllReduces));
  EXPECT_EQ(allreduce->ns, kAllReduces * us(20));
  const NamedTime* mm = culprit(d, IdleCause::kLaunch, "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->ns, kAllReduces * us(60));
  // The host time in each all-reduce before its launch is the collective's.
  const NamedTime* waiting = culprit(d, IdleCause::kCollective, "c10d::allreduce_");
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->ns, kAllReduces * us(40));
  // Only the region's own time (no unit inside it) is named by it:
  // [t+360, t+400) and [t+900, t+995) of each round.
  const NamedTime* self = culprit(d, IdleCause::kHost, "CompiledFunctionBackward");
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(self->ns, kAllReduces * (us(40) + us(95)));
  EXPECT_EQ(idle(d, IdleCause::kLaunch), kAllReduces * us(80));
}

// An op that wraps only a couple of launching ops (aten::cross_entropy_loss
// runs log_softmax and nll_loss) or is named like a dispatcher operator
// stays the unit.
TEST(Culprits, DispatcherOpsAndSmallWrappersStayTheUnit) {
  Planted p;
  p.step(1, 0, 1000).kernel("k0", 0, 10, 1);
  p.range("aten::cross_entropy_loss", 100, 300);
  for (int i = 0; i < 4; ++i) {
    const double t = 110 + 40 * i;
    p.range(i % 2 ? "aten::nll_loss_nd" : "aten::log_softmax", t, t + 30);
    p.kernel("k", t + 50, t + 55, t + 20);
  }
  p.range("AddmmBackward", 400, 500);
  p.range("aten::mm", 410, 440).kernel("g1", 460, 470, 430);
  p.range("aten::sum", 445, 480).kernel("g2", 490, 495, 470);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  EXPECT_NE(culprit(d, IdleCause::kLaunch, "aten::cross_entropy_loss"), nullptr);
  EXPECT_EQ(culprit(d, IdleCause::kLaunch, "aten::log_softmax"), nullptr);
  EXPECT_NE(culprit(d, IdleCause::kLaunch, "AddmmBackward"), nullptr);
  EXPECT_EQ(culprit(d, IdleCause::kLaunch, "aten::mm"), nullptr);
}

TEST(Culprits, DispatcherOpNamesAreNamespacedWithoutSpaces) {
  EXPECT_TRUE(dispatcher_op_name("aten::cross_entropy_loss"));
  EXPECT_TRUE(dispatcher_op_name("torch::autograd::AccumulateGrad"));
  EXPECT_FALSE(dispatcher_op_name("CompiledFunctionBackward"));
  EXPECT_FALSE(dispatcher_op_name("Torch-Compiled Region: 0/0"));
  EXPECT_FALSE(dispatcher_op_name("autograd::engine::evaluate_function: AddmmBackward0"));
  EXPECT_FALSE(dispatcher_op_name("::x"));
}

// An inference server's 50 ms request annotation (a user range, not an op)
// with the Python frames of the request under it: the GPU waits 29.5 ms
// for the next launch while the host pre-processes in Python. The frames
// name that time, not the request.
//   host:   handle_request [0, 50000)
//             server.py(40): handle [1000, 49000)
//               model.py(12): preprocess [2000, 30000)
//               aten::linear [30500, 31200) > launch at 31090
//   device: k0 [0, 1000)  gemm [31100, 32000)
TEST(Culprits, PythonFramesUnderACoarseRequestAnnotationNameItsTime) {
  Planted p;
  p.step(1, 0, 50000).kernel("k0", 0, 1000, 10);
  p.range("handle_request", 0, 50000, 0, /*is_op=*/false);
  python_frame(p, "server.py(40): handle", 1000, 49000);
  python_frame(p, "model.py(12): preprocess", 2000, 30000);
  p.range("aten::linear", 30500, 31200).kernel("gemm", 31100, 32000, 31090);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  const NamedTime* pre = culprit(d, IdleCause::kHost, "model.py(12): preprocess");
  ASSERT_NE(pre, nullptr);
  EXPECT_EQ(pre->ns, us(28000));
  const NamedTime* handle = culprit(d, IdleCause::kHost, "server.py(40): handle");
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(handle->ns, us(1000) + us(500) + us(17000));  // [1000,2000), [30000,30500), [32000,49000)
  // The request names only the time no frame covers: [49000, 50000).
  const NamedTime* request = culprit(d, IdleCause::kHost, "handle_request");
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->ns, us(1000));
  EXPECT_EQ(culprit(d, IdleCause::kLaunch, "aten::linear")->ns, us(600));
}

// An op still names its time under a Python frame.
TEST(Culprits, AnOpUnderAPythonFrameNamesItsTime) {
  Planted p;
  p.step(1, 0, 1000).kernel("k0", 0, 100, 1);
  python_frame(p, "train.py(10): step", 100, 900);
  p.range("aten::nonzero", 200, 600);
  p.range("aten::mm", 850, 880).kernel("gemm", 880, 1000, 870);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  EXPECT_EQ(culprit(d, IdleCause::kHost, "aten::nonzero")->ns, us(400));
  EXPECT_EQ(culprit(d, IdleCause::kHost, "train.py(10): step")->ns, us(100) + us(250));
}

// DDP's buffer broadcast at the start of forward: the main thread is
// blocked 23.8 ms in c10d::broadcast_ while the GPU is idle. The work that
// ends the gap (the broadcast's NCCL kernel) has no launch in the trace, so
// the window's main launching thread explains the gap: the autograd thread
// (backward launches most kernels), which recorded nothing then. The
// thread that was actually blocked, the main thread, explains it.
//   main:     DistributedDataParallel.forward [0, 30000) > c10d::broadcast_ [200, 24000)
//             forward ops [24500, 29250), 4 launches; ## backward ## [30000, 60000)
//   autograd: evaluate_function nodes from 31000, 1400 us apart, 20 launches
TEST(Culprits, IdleAutogradThreadIsNotNamedWhileTheMainThreadIsInDdpBufferBroadcast) {
  Planted p;
  const uint32_t autograd = p.thread("pt_autograd_0");
  p.step(1, 0, 60000);
  p.range("DistributedDataParallel.forward", 0, 30000);
  p.range("## backward ##", 30000, 60000, 0, /*is_op=*/false);
  p.range("c10d::broadcast_", 200, 24000);
  p.kernel("ncclKernel_Broadcast_RING_LL_Sum_float", 24000, 24100);  // no launch in the trace
  for (int i = 0; i < 4; ++i) {
    const double t = 24500 + 1250 * i;
    p.range("aten::linear", t, t + 1000).kernel("fwd", t + 1010, t + 1200, t + 900);
  }
  for (int i = 0; i < 20; ++i) {
    const double t = 31000 + 1400 * i;
    p.range("autograd::engine::evaluate_function: AddmmBackward0", t, t + 1000, autograd);
    p.range("AddmmBackward0", t, t + 1000, autograd);
    p.kernel("bwd", t + 1010, t + 1300, t + 900, autograd);
  }
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  // The autograd thread names only its own stretches while the main thread
  // waits in backward: the engine starting [30000, 31000), the time
  // between its nodes (19 x 100 us) and after its last kernel [58900, 60000).
  const NamedTime* autograd_idle = culprit(d, IdleCause::kHost, "pt_autograd_0, no op or range");
  ASSERT_NE(autograd_idle, nullptr);
  EXPECT_EQ(autograd_idle->ns, us(1000) + 19 * us(100) + us(1100));
  const NamedTime* broadcast = culprit(d, IdleCause::kCollective, "c10d::broadcast_");
  ASSERT_NE(broadcast, nullptr);
  EXPECT_EQ(broadcast->ns, us(23800));
  // [0, 200) before the broadcast, and DDP's forward between its ops.
  const NamedTime* ddp = culprit(d, IdleCause::kHost, "DistributedDataParallel.forward");
  ASSERT_NE(ddp, nullptr);
  EXPECT_EQ(ddp->ns, us(200) + us(400) + 3 * us(50) + us(550));
}

// Between its nodes the autograd thread records nothing while the main
// thread waits inside backward (a phase, no op): the autograd thread is
// the one working, and stays the culprit.
TEST(Culprits, AutogradThreadBetweenNodesStaysTheCulpritWhileMainWaitsInBackward) {
  Planted p;
  const uint32_t autograd = p.thread("pt_autograd_0");
  p.step(1, 0, 10000);
  p.range("## backward ##", 0, 10000, 0, /*is_op=*/false);
  for (int i = 0; i < 5; ++i) {
    const double t = 100 + 2000 * i;
    p.range("autograd::engine::evaluate_function: MulBackward0", t, t + 1000, autograd);
    p.kernel("bwd", t + 1100, t + 1200, t + 900, autograd);
  }
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  const NamedTime* between = culprit(d, IdleCause::kHost, "pt_autograd_0, no op or range");
  ASSERT_NE(between, nullptr);
  EXPECT_EQ(between->ns, us(100) + 4 * us(800) + us(700));
}

}  // namespace
}  // namespace gpuutil
