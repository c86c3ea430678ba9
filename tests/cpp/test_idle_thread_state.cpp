// Idle causes decided by what each thread was doing during the gap, interval
// by interval (issue 37, defects 1-4; docs/accounting.md, "Idle causes"):
// launch only while the launch runs and the device picks the work up, host
// sync only while a blocking call runs, a device-side wait as dependency
// whether or not the ending work has a launch record, and the thread that
// was in something named when the launching thread was idle. Each timeline
// is planted at the size it had on the real trace that showed the defect.
#include <gtest/gtest.h>

#include <string>

#include "gpuutil/analysis.h"
#include "planted.h"
#include "step_checks.h"

namespace gpuutil {
namespace {

using test::Planted;
using test::us;

using test::culprit_ns;
using test::expect_identities;
using test::idle;
using test::top_culprit;

bool has_finding(const Report& r, const std::string& id) {
  for (const auto& f : r.findings) {
    if (f.id == id) return true;
  }
  return false;
}

// ---- 1. launch ends when the launch call has returned and the device could
//         have picked the work up ----

// SGLang decode (H100): a kernel's launch returned 6 us after it began; the
// host then sat 463 ms in a 256-byte blocking copy that waited for the GPU
// (it ended after the kernel started), and the device stayed idle the whole
// time. The device waited on something it was given, not on a launch.
//   device: graph kernels [0, 900) us                 ....... idle .......  k1 [464000, 464100)
//   host:   cudaGraphLaunch [0, 20)  aten::index [1000, 1012) > cudaLaunchKernel [1002, 1008)
//           aten::_local_scalar_dense [1020, 464150) > cudaMemcpyAsync (256 B, pageable) [1025, 464140)
TEST(IdleThreadState, LaunchEndsWhenTheCallReturnedNotWhenTheDeviceStartedTheWork) {
  Planted p;
  p.step(1, 0, 465'000);
  const uint64_t graph = p.enqueue("cudaGraphLaunch", 0, 20);
  p.kernel_of(graph, "decode_graph_kernel", 28, 900);
  p.range("aten::index", 1'000, 1'012);
  const uint64_t k1 = p.enqueue("cudaLaunchKernel", 1'002, 1'008);
  p.kernel_of(k1, "index_kernel", 464'000, 464'100);
  p.range("aten::_local_scalar_dense", 1'020, 464'150);
  const uint64_t copy = p.enqueue("cudaMemcpyAsync", 1'025, 464'140);
  p.memcpy_of(copy, 464'110, 464'112, MemcpyDirection::kDeviceToHost, 256, /*pageable=*/true);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  // Launch: the op's dispatch and the call [1000, 1008), then the device's
  // pick-up time from the call's start (the window's fastest plain
  // launch-to-start, capped at 20 us; k1 is the only plain launch): [1000, 1022).
  EXPECT_EQ(idle(d, IdleCause::kLaunch), us(28) + us(22));  // and the graph's own launch, [0, 28)
  // The rest waited on the device: the copy the host sat in began after
  // the launch and ended after the kernel started (a consequence).
  EXPECT_EQ(idle(d, IdleCause::kDependency), us(464'000 - 1'022));
  EXPECT_EQ(top_culprit(d, IdleCause::kDependency), "aten::index");
  // Host sync only after the kernel: the copy's DMA waited for it (and the
  // host sat in the copy until 464,150).
  EXPECT_LE(idle(d, IdleCause::kHostSync), us(100));
  EXPECT_FALSE(has_finding(r, "idle_launch"));
}

// vLLM with piecewise graphs (H100): the host issued the whole forward by
// +26 ms; the device started it 149 ms in and ran behind until 282 ms.
// Before, the 149 ms before the first kernel was launch ("launch-bound
// 48.4%: use CUDA graphs"); the device was waiting, not the host.
TEST(IdleThreadState, ForwardIssuedLongBeforeTheDeviceRanItIsNotLaunchBound) {
  Planted p;
  p.step(1, 0, 300'000);
  // 100 launches, 260 us apart from 100 us: every call 6 us, every op 12 us.
  for (int i = 0; i < 100; ++i) {
    const double t = 100 + 260.0 * i;
    p.range("aten::linear", t, t + 12);
    const uint64_t c = p.enqueue("cudaLaunchKernel", t + 4, t + 10);
    // Device: from 149 ms, back to back, 1.33 ms each (ends at 282 ms).
    p.kernel_of(c, "gemm", 149'000 + 1'330.0 * i, 149'000 + 1'330.0 * (i + 1));
  }
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  // [0, 100): host before the first op; [100, 124): the first op's dispatch
  // and pick-up (20 us cap from the call at 104); the rest of [0, 149 ms)
  // is the device waiting on what it was given.
  EXPECT_EQ(idle(d, IdleCause::kLaunch), us(24));
  EXPECT_EQ(idle(d, IdleCause::kDependency), us(149'000 - 124));
  EXPECT_FALSE(has_finding(r, "idle_launch"));
}

// A launch whose work starts a few microseconds after the call returned is
// still being submitted: launch, as before (a loop of small launches).
TEST(IdleThreadState, WorkStartingRightAfterItsCallReturnedIsStillLaunch) {
  Planted p;
  p.step(1, 0, 1'000);
  p.kernel("k0", 0, 100);
  p.range("aten::add", 150, 170);
  const uint64_t c = p.enqueue("cudaLaunchKernel", 160, 168);
  p.kernel_of(c, "add_kernel", 185, 1'000);  // 17 us after the call returned
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  EXPECT_EQ(idle(d, IdleCause::kLaunch), us(35));
  EXPECT_EQ(idle(d, IdleCause::kHost), us(50));
  EXPECT_EQ(idle(d, IdleCause::kDependency), 0);
}

// ---- 2. host sync only while a blocking call runs ----

// ResNet (V100): a 2 us cudaStreamSynchronize under aten::to ended just after
// the GPU went idle; then the first convolution created cuDNN's handle
// (241 ms of cudaStreamCreateWithFlags inside it) before its launch. That is
// the convolution's host work (warm-up), not 249.7 ms of host sync.
TEST(IdleThreadState, HostWorkAfterAShortSyncIsTheWorkNotHostSync) {
  Planted p;
  p.step(1, 0, 260'000);
  p.range("aten::mm", 0, 10);
  p.kernel("k0", 10, 5'000, 2);
  p.range("aten::to", 4'990, 5'004);
  p.api("cudaStreamSynchronize", 4'999, 5'001);
  p.range("aten::conv2d", 5'010, 255'000);
  p.range("aten::cudnn_convolution", 5'020, 254'990);
  p.api("cudaStreamCreateWithFlags", 5'030, 246'030);
  p.range("aten::add", 255'100, 255'120);
  p.kernel("add_kernel", 255'125, 255'500, 255'105);
  p.kernel("conv_kernel", 255'500, 260'000, 254'950);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  // [5000, 5001): the rest of the sync; nothing after it is host sync.
  EXPECT_EQ(idle(d, IdleCause::kHostSync), us(1));
  EXPECT_EQ(culprit_ns(d, IdleCause::kHost, "aten::cudnn_convolution"), us(254'990 - 5'020));
  EXPECT_EQ(top_culprit(d, IdleCause::kHost), "aten::cudnn_convolution");
}

// The same trace: DataLoader iterator creation (randperm and Python, 313 ms)
// right after a 6 us sync is host work, named by what ran.
TEST(IdleThreadState, IteratorCreationAfterASyncIsHostWorkNamedByItsOps) {
  Planted p;
  p.step(1, 0, 320'000);
  p.kernel("k0", 10, 5'000, 2);
  p.range("aten::item", 4'994, 5'002);
  p.api("cudaStreamSynchronize", 4'995, 5'001);
  p.range("DataLoader.__iter__", 5'010, 318'000, 0, /*is_op=*/false);
  p.range("aten::randperm", 5'020, 200'000);
  p.range("aten::add", 318'100, 318'120);
  p.kernel("add_kernel", 318'125, 320'000, 318'105);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  EXPECT_EQ(idle(d, IdleCause::kHostSync), us(2));
  EXPECT_EQ(culprit_ns(d, IdleCause::kHost, "aten::randperm"), us(200'000 - 5'020));
  EXPECT_EQ(culprit_ns(d, IdleCause::kHost, "DataLoader.__iter__"), us(318'000 - 200'000) + us(10));
  EXPECT_FALSE(has_finding(r, "idle_host_sync"));
}

// ---- 3. a sync the host was still in when the work started explains
//         nothing, launch record or not ----

// SGLang decode: the step's graph was launched before the trace began (no
// launch record); the host sat in .item() until after the graph's kernels
// ran. 64 ms of the step was host sync where the next four steps of the same
// pattern, with their launch records, were dependency.
TEST(IdleThreadState, ASyncStillRunningWhenUnlaunchedWorkStartsIsDependencyNotHostSync) {
  Planted p;
  for (int s = 0; s < 5; ++s) {
    const double t = s * 70'000.0;
    p.step(s, t, t + 70'000);
    p.range("aten::item", t + 100, t + 65'200);
    p.api("cudaStreamSynchronize", t + 110, t + 65'150);
    if (s == 0) {
      p.kernel("graph_kernel", t + 64'100, t + 65'000);  // launched before the trace began
    } else {
      const uint64_t g = p.enqueue("cudaGraphLaunch", t + 40, t + 60);
      p.kernel_of(g, "graph_kernel", t + 64'100, t + 65'000);
    }
  }
  const Report r = analyze(p.store());
  ASSERT_EQ(r.steps.size(), 5u);
  for (const auto& step : r.steps) {
    SCOPED_TRACE("step " + std::to_string(step.step));
    const auto& d = step.devices.at(0);
    expect_identities(d);
    // [0 or 60, 64100): the device waited; the host's sync is a consequence.
    EXPECT_GE(idle(d, IdleCause::kDependency), us(64'000));
    EXPECT_LE(idle(d, IdleCause::kHostSync), us(200));  // only [65000, 65200), after the work
  }
}

// ---- 4. the thread that was in something explains the time ----

// An MLP without step markers (whole-trace window): the autograd thread
// launched most kernels; the trace ends with a 1.6 s stretch in which only
// the main thread's final cudaDeviceSynchronize is recorded, at its end.
// The main thread was the one working (unrecorded host work, then the
// sync); the autograd thread had finished.
TEST(IdleThreadState, TailWithOnlyTheMainThreadsFinalSyncNamesTheMainThread) {
  Planted p;
  const uint32_t autograd = p.thread("pt_autograd_0");
  for (int i = 0; i < 10; ++i) {
    const double t = 1'000.0 * i;
    p.range("aten::linear", t, t + 20).kernel("fwd", t + 25, t + 200, t + 10);
    for (int j = 0; j < 3; ++j) {
      const double u = t + 300 + 200.0 * j;
      p.range("AddmmBackward0", u, u + 20, autograd).kernel("bwd", u + 25, u + 190, u + 10, autograd);
    }
  }
  p.api("cudaDeviceSynchronize", 1'609'890, 1'609'900);  // the device finished at 9,890
  const Report r = analyze(p.store());
  ASSERT_EQ(r.steps.size(), 1u);
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  // The tail, and main's own time before each forward (9 x 110 us).
  EXPECT_EQ(culprit_ns(d, IdleCause::kHost, "main, no op or range"), us(1'600'000) + 9 * us(110));
  // Only between its own nodes (12 x 100 us before the next node began)
  // is the autograd thread named.
  EXPECT_EQ(culprit_ns(d, IdleCause::kHost, "pt_autograd_0, no op or range"), 12 * us(100));
  EXPECT_EQ(idle(d, IdleCause::kHostSync), us(10));
}

// DDP (V100): the step begins with the main thread in DDP's buffer broadcast
// (_broadcast_coalesced, an op that is no collective range) while the
// autograd thread, which launched the step's work, records nothing.
TEST(IdleThreadState, MainThreadInAnOpExplainsTimeTheIdleAutogradThreadDoesNot) {
  Planted p;
  const uint32_t autograd = p.thread("pt_autograd_0");
  p.step(1, 0, 30'000);
  p.range("DistributedDataParallel.forward", 0, 12'000, 0, /*is_op=*/false);
  p.range("aten::_broadcast_coalesced", 100, 11'000);
  for (int i = 0; i < 20; ++i) {
    const double t = 12'000 + 900.0 * i;
    p.range("AddmmBackward0", t, t + 100, autograd).kernel("bwd", t + 110, t + 800, t + 100, autograd);
  }
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  expect_identities(d);
  EXPECT_EQ(culprit_ns(d, IdleCause::kHost, "aten::_broadcast_coalesced"), us(10'900));
  // The autograd thread names only its own stretches: between its nodes
  // (19 x 100 us) and after the last kernel (100 us), the main thread then
  // in nothing.
  EXPECT_EQ(culprit_ns(d, IdleCause::kHost, "pt_autograd_0, no op or range"), 20 * us(100));
}

// A 4 us gap between an NCCL kernel and a short copy with no launch record
// is the device's turnaround, as it is when the copy has its launch record.
TEST(IdleThreadState, ShortGapBeforeWorkWithoutALaunchRecordIsAKernelGap) {
  for (bool with_launch : {false, true}) {
    SCOPED_TRACE(with_launch ? "launch record" : "no launch record");
    Planted p;
    p.step(1, 0, 1'000);
    p.range("aten::mm", 0, 10);
    p.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 500, 5);
    if (with_launch) {
      const uint64_t c = p.enqueue("cudaMemcpyAsync", 100, 110);
      p.memcpy_of(c, 504, 510, MemcpyDirection::kDeviceToDevice, 4096, false);
    } else {
      p.memcpy(504, 510, MemcpyDirection::kDeviceToDevice, 4096);
    }
    p.range("aten::add", 600, 620).kernel("add", 625, 1'000, 610);
    const Report r = analyze(p.store());
    const auto& d = r.steps.at(0).devices.at(0);
    expect_identities(d);
    EXPECT_EQ(idle(d, IdleCause::kKernelGap), us(4));
  }
}

}  // namespace
}  // namespace gpuutil
