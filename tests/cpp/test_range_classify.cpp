// Pins every name-classification rule of gpuutil/range_classify.h: range
// categories, step numbers, CUDA/HIP API kinds and communication kernels.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpuutil/range_classify.h"

namespace gpuutil {
namespace {

TEST(RangeClassify, ProfilerStepIsStep) {
  EXPECT_EQ(classify_range("ProfilerStep#12", false), RangeCategory::kStep);
  EXPECT_EQ(classify_range("ProfilerStep#5", true), RangeCategory::kStep);  // "Operator" vintage
  EXPECT_EQ(classify_range("gpuutil.step#3", false), RangeCategory::kStep);
}

TEST(RangeClassify, ProfilerStepWithoutNumberIsNotStep) {
  EXPECT_EQ(classify_range("ProfilerStep#", false), RangeCategory::kAnnotation);
  EXPECT_EQ(classify_range("ProfilerStep#x", false), RangeCategory::kAnnotation);
  EXPECT_EQ(classify_range("ProfilerStep", true), RangeCategory::kOp);
}

TEST(RangeClassify, DataLoader) {
  EXPECT_EQ(classify_range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", false),
            RangeCategory::kDataloader);
  EXPECT_EQ(classify_range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", true),
            RangeCategory::kDataloader);
  EXPECT_EQ(classify_range("enumerate(DataLoader)", false), RangeCategory::kDataloader);
  EXPECT_EQ(classify_range("DataLoader", false), RangeCategory::kAnnotation);
}

TEST(RangeClassify, Optimizer) {
  EXPECT_EQ(classify_range("Optimizer.step#SGD.step", false), RangeCategory::kOptimizer);
  EXPECT_EQ(classify_range("Optimizer.step#FusedAdam.step", false), RangeCategory::kOptimizer);
  EXPECT_EQ(classify_range("Optimizer.zero_grad#SGD.zero_grad", false), RangeCategory::kOptimizer);
  EXPECT_EQ(classify_range("## optimizer ##", false), RangeCategory::kOptimizer);
  EXPECT_EQ(classify_range("MyOptimizer.step", false), RangeCategory::kAnnotation);
}

TEST(RangeClassify, HostSyncOps) {
  EXPECT_EQ(classify_range("aten::item", true), RangeCategory::kHostSync);
  EXPECT_EQ(classify_range("aten::_local_scalar_dense", true), RangeCategory::kHostSync);
  EXPECT_EQ(classify_range("aten::itemsize", true), RangeCategory::kOp);
  // gpuutil's Python hooks for blocking device-to-host copies.
  EXPECT_EQ(classify_range("## host_sync: Tensor.cpu ##", true), RangeCategory::kHostSync);
  EXPECT_EQ(classify_range("## host_sync: torch.cuda.synchronize ##", false), RangeCategory::kHostSync);
}

TEST(RangeClassify, Collectives) {
  EXPECT_EQ(classify_range("nccl:all_reduce", false), RangeCategory::kCollective);
  EXPECT_EQ(classify_range("nccl:_all_gather_base", false), RangeCategory::kCollective);
  EXPECT_EQ(classify_range("gloo:all_reduce", false), RangeCategory::kCollective);
  EXPECT_EQ(classify_range("record_param_comms", true), RangeCategory::kCollective);
  EXPECT_EQ(classify_range("c10d::allreduce_", true), RangeCategory::kCollective);
  EXPECT_EQ(classify_range("ProcessGroupNCCL::allreduce", false), RangeCategory::kCollective);
}

TEST(RangeClassify, Backward) {
  EXPECT_EQ(classify_range("autograd::engine::evaluate_function: AddmmBackward0", true),
            RangeCategory::kBackward);
  EXPECT_EQ(classify_range("## backward ##", false), RangeCategory::kBackward);
  // The op inside the autograd node stays an op.
  EXPECT_EQ(classify_range("AddmmBackward0", true), RangeCategory::kOp);
}

TEST(RangeClassify, ForwardOnlyWhenClear) {
  EXPECT_EQ(classify_range("## forward ##", false), RangeCategory::kForward);
  EXPECT_EQ(classify_range("## forward:bottom_mlp ##", false), RangeCategory::kForward);
  EXPECT_EQ(classify_range("nn.Module: ResNet_0", false), RangeCategory::kForward);
  EXPECT_EQ(classify_range("DistributedDataParallel.forward", false), RangeCategory::kForward);
  // Conservative: names that merely mention forward are not forward.
  EXPECT_EQ(classify_range("forward_hook", false), RangeCategory::kAnnotation);
  EXPECT_EQ(classify_range("<forward op>", true), RangeCategory::kOp);
  EXPECT_EQ(classify_range(".forward", false), RangeCategory::kAnnotation);
}

TEST(RangeClassify, FallbackDependsOnIsOp) {
  EXPECT_EQ(classify_range("aten::mm", true), RangeCategory::kOp);
  EXPECT_EQ(classify_range("aten::mm", false), RangeCategory::kAnnotation);
  EXPECT_EQ(classify_range("## load_batch ##", false), RangeCategory::kAnnotation);
  EXPECT_EQ(classify_range("", true), RangeCategory::kOp);
  EXPECT_EQ(classify_range("", false), RangeCategory::kAnnotation);
}

TEST(ParseStepNumber, Forms) {
  EXPECT_EQ(parse_step_number("ProfilerStep#12"), 12);
  EXPECT_EQ(parse_step_number("ProfilerStep#0"), 0);
  EXPECT_EQ(parse_step_number("gpuutil.step#7"), 7);
  EXPECT_EQ(parse_step_number("ProfilerStep#1009"), 1009);
  EXPECT_EQ(parse_step_number("ProfilerStep#"), -1);
  EXPECT_EQ(parse_step_number("ProfilerStep#-1"), -1);
  EXPECT_EQ(parse_step_number("ProfilerStep#12a"), -1);
  EXPECT_EQ(parse_step_number("ProfilerStep#99999999999999999999"), -1);
  EXPECT_EQ(parse_step_number("profilerstep#3"), -1);
  EXPECT_EQ(parse_step_number("aten::mm"), -1);
}

void expect_api(std::string_view name, HostApiKind kind, SyncKind sync) {
  const ApiClass c = classify_api(name);
  EXPECT_EQ(c.kind, kind) << name;
  EXPECT_EQ(c.sync, sync) << name;
}

TEST(ClassifyApi, Launches) {
  for (const char* name :
       {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
        "cuLaunchKernelEx", "cudaGraphLaunch", "cuGraphLaunch", "hipLaunchKernel", "hipExtLaunchKernel",
        "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipGraphLaunch", "cudaLaunchKernel_v7000",
        "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC_v11060", "cudaGraphLaunch_v10000", "cuLaunchGrid"}) {
    expect_api(name, HostApiKind::kLaunch, SyncKind::kNone);
  }
  expect_api("cudaLaunchHostFunc", HostApiKind::kOther, SyncKind::kNone);
}

TEST(ClassifyApi, AsyncCopies) {
  for (const char* name :
       {"cudaMemcpyAsync", "cudaMemsetAsync", "cudaMemcpy2DAsync", "cudaMemcpy3DAsync", "cudaMemcpyPeerAsync",
        "cudaMemcpyToSymbolAsync", "cuMemcpyAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2",
        "cuMemsetD32Async", "hipMemcpyAsync", "hipMemcpyHtoDAsync", "hipMemsetAsync", "cudaMemcpyAsync_ptsz",
        "cudaMemcpyAsync_v3020", "cudaMemPrefetchAsync"}) {
    expect_api(name, HostApiKind::kAsyncCopy, SyncKind::kNone);
  }
  // Synchronous memsets only enqueue work for device memory.
  for (const char* name : {"cudaMemset", "cudaMemset2D", "cuMemsetD8_v2", "hipMemset"}) {
    expect_api(name, HostApiKind::kAsyncCopy, SyncKind::kNone);
  }
  // Device-to-device copies never block the host.
  expect_api("cuMemcpyDtoD_v2", HostApiKind::kAsyncCopy, SyncKind::kNone);
  expect_api("hipMemcpyDtoD", HostApiKind::kAsyncCopy, SyncKind::kNone);
}

TEST(ClassifyApi, BlockingCopies) {
  for (const char* name : {"cudaMemcpy", "cudaMemcpy2D", "cudaMemcpyToSymbol", "cudaMemcpy_v3020", "cuMemcpyHtoD_v2",
                           "cuMemcpyDtoH_v2", "hipMemcpy", "hipMemcpyWithStream", "hipMemcpyDtoH"}) {
    expect_api(name, HostApiKind::kBlockingCopy, SyncKind::kOther);
  }
}

TEST(ClassifyApi, Synchronize) {
  expect_api("cudaDeviceSynchronize", HostApiKind::kSynchronize, SyncKind::kDevice);
  expect_api("cudaThreadSynchronize", HostApiKind::kSynchronize, SyncKind::kDevice);
  expect_api("hipDeviceSynchronize", HostApiKind::kSynchronize, SyncKind::kDevice);
  expect_api("cudaStreamSynchronize", HostApiKind::kSynchronize, SyncKind::kStream);
  expect_api("cudaStreamSynchronize_v3020", HostApiKind::kSynchronize, SyncKind::kStream);
  expect_api("cuStreamSynchronize", HostApiKind::kSynchronize, SyncKind::kStream);
  expect_api("hipStreamSynchronize", HostApiKind::kSynchronize, SyncKind::kStream);
  expect_api("cudaEventSynchronize", HostApiKind::kSynchronize, SyncKind::kEvent);
  expect_api("cuEventSynchronize", HostApiKind::kSynchronize, SyncKind::kEvent);
  expect_api("hipEventSynchronize", HostApiKind::kSynchronize, SyncKind::kEvent);
  expect_api("cudaCtxSynchronize", HostApiKind::kSynchronize, SyncKind::kContext);
  expect_api("cuCtxSynchronize", HostApiKind::kSynchronize, SyncKind::kContext);
  expect_api("hipCtxSynchronize", HostApiKind::kSynchronize, SyncKind::kContext);
}

TEST(ClassifyApi, NotHostSyncs) {
  // Device-side ordering and polling do not block the host.
  expect_api("cudaStreamWaitEvent", HostApiKind::kOther, SyncKind::kNone);
  expect_api("cuStreamWaitEvent", HostApiKind::kOther, SyncKind::kNone);
  expect_api("hipStreamWaitEvent", HostApiKind::kOther, SyncKind::kNone);
  expect_api("cudaEventQuery", HostApiKind::kOther, SyncKind::kNone);
  expect_api("cudaStreamQuery", HostApiKind::kOther, SyncKind::kNone);
}

TEST(ClassifyApi, Other) {
  for (const char* name : {"cudaMalloc", "cudaFree", "cudaEventRecord", "cudaGetDeviceProperties",
                           "cudaStreamGetCaptureInfo_v2", "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                           "hipCtxGetCurrent", "hipMalloc", "INVALID", "", "memcpy", "aten::copy_"}) {
    expect_api(name, HostApiKind::kOther, SyncKind::kNone);
  }
}

TEST(CommunicationKernel, NcclAndRccl) {
  EXPECT_TRUE(is_communication_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"));
  EXPECT_TRUE(is_communication_kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
  EXPECT_TRUE(is_communication_kernel("void ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)"));
  EXPECT_TRUE(is_communication_kernel("NCCLKERNEL"));
  EXPECT_TRUE(is_communication_kernel("rcclKernel_AllReduce"));
  EXPECT_TRUE(is_communication_kernel("void RCCL_generic_kernel"));
  EXPECT_TRUE(is_communication_kernel("mscclKernel_Sum_float"));
}

TEST(CommunicationKernel, OnePassScanAgreesWithASearchPerNeedleOnRandomNames) {
  // The reference is the rule as stated: each needle searched on its own.
  auto lower = [](std::string s) {
    for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    return s;
  };
  auto reference = [&](const std::string& name) {
    const std::string l = lower(name);
    for (const char* n : {"nccl", "rccl", "msccl", "nvshmem", "c10d::", "deep_ep", "deepep", "dpsk::ep", "pplx",
                          "symm_mem", "multimem", "cross_device_reduce", "allreduce", "all_reduce", "allgather",
                          "all_gather", "reducescatter", "reduce_scatter", "alltoall", "all_to_all"}) {
      if (l.find(n) != std::string::npos) return true;
    }
    return false;
  };
  // Names built from needle fragments, near-misses and case flips, so that
  // both answers come up often.
  const char* parts[] = {"nccl", "NcCl", "ncc", "rccl", "RCC", "msccl", "mscc", "MSCCL", "nvshmem", "nvshme",
                         "NVSHMEM", "c10d::", "C10D::", "c10d:", "n", "m", "r", "c", "ms", "nv", "_", "::", "void ",
                         "at::native::", "<4>", "kernel", "ncclnccl", "deep_", "ep", "DeepEP", "dpsk::", "all",
                         "_reduce", "reduce", "gather", "_to_", "a", "ll", "symm", "_mem", "multi", "mem", "pplx"};
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  int positives = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string name;
    const int n = static_cast<int>(next() % 6);
    for (int k = 0; k < n; ++k) name += parts[next() % (sizeof(parts) / sizeof(parts[0]))];
    ASSERT_EQ(is_communication_kernel(name), reference(name)) << name;
    positives += reference(name) ? 1 : 0;
  }
  EXPECT_GT(positives, 2000);
  EXPECT_LT(positives, 18000);
  EXPECT_TRUE(is_communication_kernel("xx c10d::broadcast_"));
  EXPECT_TRUE(is_communication_kernel("xx C10D::broadcast_"));  // every needle is case-folded
  EXPECT_FALSE(is_communication_kernel("nvshme"));              // a needle cut short at the end
}

TEST(CommunicationKernel, ComputeKernelsAreNot) {
  EXPECT_FALSE(is_communication_kernel("void at::native::vectorized_elementwise_kernel<4>"));
  EXPECT_FALSE(is_communication_kernel("volta_sgemm_128x64_nn"));
  EXPECT_FALSE(is_communication_kernel("triton_red_fused_add_mean_mul_pow_rsqrt_0"));
  EXPECT_FALSE(is_communication_kernel(""));
  // Reductions and copies are compute or memory, not collectives.
  EXPECT_FALSE(is_communication_kernel("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>"));
  EXPECT_FALSE(is_communication_kernel("void cub::DeviceReduceKernel<Policy600>"));
  EXPECT_FALSE(is_communication_kernel("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float>"));
  EXPECT_FALSE(is_communication_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64"));
}

// Issue 37, item 5: communication is recognised by what a kernel does, not
// by its library being NCCL: expert-parallel dispatch/combine (DeepEP), torch
// symmetric memory, NVSHMEM, MSCCL++, vLLM/SGLang custom all-reduce,
// TensorRT-LLM's one/two-shot all-reduce, any kernel named for a collective.
TEST(CommunicationKernel, ExpertParallelSymmetricMemoryAndCustomCollectivesAreCommunication) {
  for (const char* name : {
           "void deep_ep::intranode::dispatch<8, 768>(int4*, float*, int*, long*)",
           "void deep_ep::internode_ll::combine<7168, 8>(void*, int const*, void const*)",
           "dpsk::ep::dispatch_kernel<128>",
           "void nvshmemi_transfer_rma_nbi<float>(void*, void const*, unsigned long, int)",
           "void mscclpp::AllreduceAllpairs<float>(float*, float*)",
           "void c10d::symmetric_memory::one_shot_all_reduce_kernel<bf16, 8>(...)",
           "multimem_all_reduce_kernel<float>",
           "void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
           "void tensorrt_llm::kernels::twoShotAllReduceKernel<half, 8>(AllReduceParams)",
           "pplx::a2a_dispatch_kernel",
           "my_lib::all_to_all_single_kernel",
           "fused_reduce_scatter_matmul_comm",
       }) {
    EXPECT_TRUE(is_communication_kernel(name)) << name;
  }
}

// Users name their own: set_communication_kernel_patterns (and
// $GPUUTIL_COMM_KERNELS, read when nothing was set), case-insensitive
// substrings; the built-in families stay.
TEST(CommunicationKernel, UserPatternsNameTheirOwnCommunicationKernels) {
  EXPECT_FALSE(is_communication_kernel("void team_x::ExpertShuffleKernel<128>"));
  set_communication_kernel_patterns({"ExpertShuffle", ""});  // empty entries are dropped
  EXPECT_TRUE(is_communication_kernel("void team_x::ExpertShuffleKernel<128>"));
  EXPECT_TRUE(is_communication_kernel("ncclDevKernel_AllGather_RING_LL"));
  EXPECT_FALSE(is_communication_kernel("volta_sgemm_128x64_nn"));
  EXPECT_EQ(communication_kernel_patterns(), (std::vector<std::string>{"expertshuffle"}));
  set_communication_kernel_patterns({});
  EXPECT_FALSE(is_communication_kernel("void team_x::ExpertShuffleKernel<128>"));
}

// Live API names (cuptiGetCallbackName) are named as Kineto's traces name
// them: the version goes, a per-thread-stream variant stays a variant.
TEST(RangeClassify, ApiVersionSuffixIsDroppedOncePerThreadVariantsKept) {
  EXPECT_EQ(strip_api_version("cudaDeviceSynchronize_v3020"), "cudaDeviceSynchronize");
  EXPECT_EQ(strip_api_version("cudaLaunchKernel_ptsz_v7000"), "cudaLaunchKernel_ptsz");
  EXPECT_EQ(strip_api_version("cuLaunchKernel"), "cuLaunchKernel");
  EXPECT_EQ(strip_api_version("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync_v2_ptsz");
  EXPECT_EQ(strip_api_version("cudaFoo_v"), "cudaFoo_v");
  EXPECT_EQ(strip_api_suffixes("cudaMemcpyAsync_ptsz_v7000"), "cudaMemcpyAsync");
  EXPECT_EQ(strip_api_suffixes("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync");
  EXPECT_EQ(strip_api_suffixes("hipMemcpyAsync_spt"), "hipMemcpyAsync");
}

}  // namespace
}  // namespace gpuutil
