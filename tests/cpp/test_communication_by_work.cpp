// Communication recognised by what device work does, not by its library's
// name (issue 37, item 5; docs/accounting.md, "Communication"): DeepEP's
// dispatch/combine kernels at the size of a DeepSeek-V3-style training step,
// and a custom kernel launched inside a c10d collective range.
#include <gtest/gtest.h>

#include <string>

#include "gpuutil/analysis.h"
#include "planted.h"

namespace gpuutil {
namespace {

using test::Planted;
using test::us;

// A DeepSeek-V3-style MoE step (H800): DeepEP's dispatch and combine ran
// 98.6 of 112 ms on their own stream, 96.4 ms of it under compute. gpuutil
// reported 0% communication.
//   stream 7:  compute, ten 10 ms kernels [0, 100) ms
//   stream 20: deep_ep dispatch/combine alternating, [3.6, 102.2) ms
TEST(CommunicationByWork, DeepEpDispatchAndCombineAreCommunicationAtDeepSeekScale) {
  Planted p;
  p.step(1, 0, 112'000);
  for (int i = 0; i < 10; ++i) p.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 10'000.0 * i, 10'000.0 * (i + 1));
  const char* names[] = {"void deep_ep::internode::dispatch<true, 8, 1024>(int4*, float*, int*)",
                         "void deep_ep::internode::combine<__nv_bfloat16, 8>(int4*, float*, int const*)"};
  for (int i = 0; i < 17; ++i) {
    const double start = 3'600 + 5'800.0 * i;
    p.kernel(names[i % 2], start, start + 5'800, -1, 0, 0, 20);
  }
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  EXPECT_EQ(d.communication_total_ns, us(98'600));
  EXPECT_EQ(d.communication_overlap_ns, us(96'400));
  EXPECT_EQ(d.breakdown.communication_ns, us(2'200));  // exposed: [100, 102.2) ms
  EXPECT_EQ(d.breakdown.compute_ns, us(100'000));
  EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);
}

// A kernel no library table knows, launched inside c10d::alltoall_base_ on
// the host, is that collective's work: communication, named by the range.
TEST(CommunicationByWork, KernelLaunchedInsideACollectiveRangeIsCommunication) {
  Planted p;
  p.step(1, 0, 2'000);
  p.range("aten::mm", 0, 20).kernel("gemm", 25, 1'000, 10);
  p.range("c10d::alltoall_base_", 30, 60);
  const uint64_t a2a = p.enqueue("cudaLaunchKernel", 40, 45);
  p.kernel_of(a2a, "team_x::shuffle_tokens_kernel<128>", 500, 1'500, 20);
  const Report r = analyze(p.store());
  const auto& d = r.steps.at(0).devices.at(0);
  EXPECT_EQ(d.communication_total_ns, us(1'000));
  EXPECT_EQ(d.communication_overlap_ns, us(500));
  EXPECT_EQ(d.breakdown.communication_ns, us(500));
  EXPECT_EQ(d.breakdown.total_ns(), d.wall_ns);
  // The same kernel launched outside any collective range stays compute.
  Planted q;
  q.step(1, 0, 2'000);
  q.range("aten::mm", 0, 20).kernel("gemm", 25, 1'000, 10);
  q.range("aten::index_select", 30, 60);
  const uint64_t k = q.enqueue("cudaLaunchKernel", 40, 45);
  q.kernel_of(k, "team_x::shuffle_tokens_kernel<128>", 500, 1'500, 20);
  const Report rq = analyze(q.store());
  EXPECT_EQ(rq.steps.at(0).devices.at(0).communication_total_ns, 0);
}

}  // namespace
}  // namespace gpuutil
