// A small CUDA driver API on the fake CUPTI's simulated device, exported
// under libcuda's names (cuInit, cuModuleLoadData, cuLaunchKernel,
// cuMemcpyHtoDAsync_v2, cuStreamSynchronize, ...). A program that dlopens
// libcuda.so.1 and dlsyms these can be pointed at libfake_cupti.so instead
// and run unchanged without a GPU: every call produces the DRIVER-domain API
// record and device records real CUPTI would (when traced), from the calling
// thread, and synchronizing calls block until the simulated work is done.
// Modules accept any image (PTX is "JIT-compiled" by doing nothing); a
// kernel runs config.driver_kernel_ns (default 10 us).
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "fake_state.h"

using namespace fake;

struct CUfunc_st {
  std::string name;
};
struct CUmod_st {
  int unused;
};

namespace {

CUmod_st g_module{0};

// Streams are the fake's handles (fake_streams.cpp): NULL is the legacy
// default stream, id 7 as CUPTI reports it.
uint32_t stream_id(CUstream s) { return stream_id_of(s); }

// Runs one driver call: its API record and its device work.
CUresult call(const char* name, const fake_cupti_work* work = nullptr, int sync = FAKE_CUPTI_SYNC_NONE,
              uint32_t sync_stream = 0) {
  int domain = 0;
  fake_cupti_call c{};
  c.cbid = callback_id(name, &domain);
  c.domain = CUPTI_CB_DOMAIN_DRIVER_API;
  c.api_ns = 3000;
  c.work = work;
  c.n_work = work ? 1 : 0;
  c.sync = sync;
  c.sync_stream = sync_stream;
  fake_cupti_call_api(&c);
  return CUDA_SUCCESS;
}

int64_t kernel_ns() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.cfg.driver_kernel_ns > 0 ? s.cfg.driver_kernel_ns : 10'000;
}

fake_cupti_work copy_work(uint8_t copy_kind, size_t bytes, CUstream stream) {
  fake_cupti_work w{};
  w.kind = FAKE_CUPTI_MEMCPY;
  w.stream = stream_id(stream);
  w.bytes = bytes;
  w.copy_kind = copy_kind;
  w.src_kind = copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE
                                                             : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  w.dst_kind = copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
                                                             : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  w.latency_ns = 2000;
  w.duration_ns = 1000 + static_cast<int64_t>(bytes / 20);  // ~20 GB/s
  return w;
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) { return call("cuInit"); }

CUresult CUDAAPI cuDriverGetVersion(int* version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (!device || ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = context_handle(0);
  return call("cuDevicePrimaryCtxRetain");
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return call("cuDevicePrimaryCtxRelease_v2"); }

CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return call("cuCtxSetCurrent"); }

CUresult CUDAAPI cuCtxSynchronize(void) { return call("cuCtxSynchronize", nullptr, FAKE_CUPTI_SYNC_DEVICE); }

CUresult CUDAAPI cuStreamCreate(CUstream* stream, unsigned int) {
  static std::atomic<uint32_t> next{13};
  if (!stream) return CUDA_ERROR_INVALID_VALUE;
  *stream = stream_handle(0, next.fetch_add(1));
  return call("cuStreamCreate");
}

CUresult CUDAAPI cuStreamDestroy(CUstream stream) {
  const uint32_t id = stream_id(stream);
  const CUresult r = call("cuStreamDestroy_v2");
  // STREAM_DESTROY_STARTING to subscribers; the handle is recycled.
  if (stream != nullptr && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD) fake_cupti_destroy_stream(0, id);
  return r;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream stream) {
  return call("cuStreamSynchronize", nullptr, FAKE_CUPTI_SYNC_STREAM, stream_id(stream));
}

CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  *module = &g_module;
  return call("cuModuleLoadData");
}

CUresult CUDAAPI cuModuleUnload(CUmodule) { return call("cuModuleUnload"); }

CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
  *f = new CUfunc_st{name};  // lives as long as the module would
  return call("cuModuleGetFunction");
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream stream, void**,
                                void**) {
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  fake_cupti_work w{};
  w.kind = FAKE_CUPTI_KERNEL;
  w.name = f->name.c_str();
  w.stream = stream_id(stream);
  w.grid[0] = gx;
  w.grid[1] = gy;
  w.grid[2] = gz;
  w.block[0] = bx;
  w.block[1] = by;
  w.block[2] = bz;
  w.shared_memory_bytes = shared_bytes;
  w.registers_per_thread = 32;
  w.latency_ns = 4000;
  w.duration_ns = kernel_ns();
  return call("cuLaunchKernel", &w);
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
  if (!ptr) return CUDA_ERROR_INVALID_VALUE;
  *ptr = reinterpret_cast<CUdeviceptr>(std::calloc(1, bytes ? bytes : 1));
  return call("cuMemAlloc_v2");
}

CUresult CUDAAPI cuMemFree(CUdeviceptr ptr) {
  std::free(reinterpret_cast<void*>(ptr));
  return call("cuMemFree_v2");
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr, const void*, size_t bytes, CUstream stream) {
  const fake_cupti_work w = copy_work(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, bytes, stream);
  return call("cuMemcpyHtoDAsync_v2", &w);
}

CUresult CUDAAPI cuMemcpyDtoH(void*, CUdeviceptr, size_t bytes) {
  const fake_cupti_work w = copy_work(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, bytes, nullptr);
  return call("cuMemcpyDtoH_v2", &w, FAKE_CUPTI_SYNC_DEVICE);
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr, unsigned int, size_t n, CUstream stream) {
  fake_cupti_work w{};
  w.kind = FAKE_CUPTI_MEMSET;
  w.stream = stream_id(stream);
  w.bytes = n * 4;
  w.latency_ns = 2000;
  w.duration_ns = 1000;
  return call("cuMemsetD32Async", &w);
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** str) {
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  *str = error == CUDA_SUCCESS ? "no error" : "fake driver error";
  return CUDA_SUCCESS;
}

}  // extern "C"
