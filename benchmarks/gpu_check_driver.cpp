// gpu_check_driver: the torch-free scenario of the GPU check
// (benchmarks/gpu_check.py). A plain C++ training-like loop that drives the
// GPU only through the CUDA driver API (cuLaunchKernel, as Triton, NCCL and
// cuBLASLt do) with a kernel JIT-compiled from PTX, profiled by
// gpuutil::Profiler. It plants a host-side gap of known length per step and
// a known number of kernels, and writes what gpuutil reported as JSON.
//
//   gpu_check_driver --out result.json [--steps 12] [--kernels 40]
//                    [--kernel-cycles 40000] [--host-ms 5] [--cupti-library PATH]
//
// libcuda is dlopen'ed ($GPUUTIL_CHECK_LIBCUDA, else libcuda.so.1), so the
// same program runs on a GPU and, in the check's --self-test, on the fake
// CUPTI's simulated device (which also exports the driver calls used here).
// libcupti: --cupti-library (gpu_check.py passes the one its Python side
// loaded; it becomes $GPUUTIL_CUPTI_LIBRARY here), else the collector's own
// search with the toolkit's extras/CUPTI/lib64 and the nvidia/cu13/lib wheel
// folders added (gpu_check_cupti_dirs.h).
// Exit status: 0 when it ran (pass/fail is decided by gpu_check.py), 2 when
// CUDA could not be used.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_check_cupti_dirs.h"
#include "gpu_check_spin_ptx.h"
#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"

namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuCtxSynchronize)();

  std::string load(const char* path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) return std::string("cannot load ") + path + ": " + dlerror();
    auto sym = [h](const char* n, auto& out) {
      out = reinterpret_cast<std::decay_t<decltype(out)>>(dlsym(h, n));
      return out != nullptr;
    };
    if (!sym("cuInit", cuInit) || !sym("cuDeviceGet", cuDeviceGet) ||
        !sym("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain) || !sym("cuCtxSetCurrent", cuCtxSetCurrent) ||
        !sym("cuModuleLoadData", cuModuleLoadData) || !sym("cuModuleGetFunction", cuModuleGetFunction) ||
        !sym("cuLaunchKernel", cuLaunchKernel) || !sym("cuCtxSynchronize", cuCtxSynchronize)) {
      return std::string(path) + " lacks a driver entry point";
    }
    return "";
  }
};

int64_t arg(int argc, char** argv, const char* name, int64_t def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0) out_path = argv[i + 1];
    if (std::strcmp(argv[i], "--cupti-library") == 0 && *argv[i + 1]) setenv("GPUUTIL_CUPTI_LIBRARY", argv[i + 1], 1);
  }
  const int64_t steps = arg(argc, argv, "--steps", 12);
  const int64_t kernels = arg(argc, argv, "--kernels", 40);
  unsigned long long cycles = static_cast<unsigned long long>(arg(argc, argv, "--kernel-cycles", 40'000));
  const int64_t host_ms = arg(argc, argv, "--host-ms", 5);
  if (out_path.empty()) {
    std::fprintf(stderr, "usage: gpu_check_driver --out FILE [--steps N] [--kernels K] [--kernel-cycles C] [--host-ms M] "
                         "[--cupti-library PATH]\n");
    return 2;
  }
  const char* lib = std::getenv("GPUUTIL_CHECK_LIBCUDA");
  Driver cu{};
  if (std::string why = cu.load(lib && *lib ? lib : "libcuda.so.1"); !why.empty()) {
    std::fprintf(stderr, "gpu_check_driver: %s\n", why.c_str());
    return 2;
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUfunction spin = nullptr;
  if (cu.cuInit(0) || cu.cuDeviceGet(&dev, 0) || cu.cuDevicePrimaryCtxRetain(&ctx, dev) || cu.cuCtxSetCurrent(ctx) ||
      cu.cuModuleLoadData(&mod, gpu_check::kSpinPtx) || cu.cuModuleGetFunction(&spin, mod, "spin")) {
    std::fprintf(stderr, "gpu_check_driver: CUDA setup failed (no GPU, or the PTX did not JIT)\n");
    return 2;
  }
  gpuutil::ProfilerOptions o;
  o.live.nvtx = false;
  o.live.cupti_library_dirs = gpu_check::cupti_candidate_dirs();
  gpuutil::Profiler prof(o);
  const std::string off = prof.start();
  std::vector<int64_t> host_ns;  // each step's planted gap as it really lasted (a loaded host oversleeps)
  host_ns.reserve(static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    gpuutil::StepScope step(prof, s);
    const int64_t t0 = gpuutil::session_now_ns();
    usleep(static_cast<useconds_t>(host_ms * 1000));  // planted host time: the GPU is idle
    host_ns.push_back(gpuutil::session_now_ns() - t0);
    for (int64_t k = 0; k < kernels; ++k) {
      void* params[] = {&cycles};
      cu.cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
    }
    cu.cuCtxSynchronize();
  }
  prof.stop();
  const gpuutil::LiveCounters counters = prof.collector().counters();
  nlohmann::json j;
  j["gpu_collection_off"] = off;
  j["cupti_library"] = prof.collector().library_path();
  j["planted"] = {{"steps", steps}, {"kernels_per_step", kernels}, {"host_ms", host_ms}, {"host_ns", host_ns}};
  j["counters"] = {{"driver_cbids", counters.driver_cbids},           {"runtime_cbids", counters.runtime_cbids},
                   {"records_dropped", counters.records_dropped},     {"buffers_starved", counters.buffers_starved},
                   {"records_unfinished", counters.records_unfinished}, {"completion_timeouts", counters.completion_timeouts}};
  j["reports"] = nlohmann::json::array();
  for (const auto& r : prof.take_reports()) j["reports"].push_back(nlohmann::json::parse(r.json));
  std::ofstream(out_path) << j.dump() << "\n";
  return 0;
}
