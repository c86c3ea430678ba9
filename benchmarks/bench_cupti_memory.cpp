// Memory over many simulated steps: a live session fed by the CUPTI
// collector (kernels from the fake CUPTI when GPUUTIL_CUPTI_LIBRARY names
// it) and NVTX-free host ranges, reported and pruned every step. Prints RSS
// every 10% of the run; it must stay flat.
//
//   GPUUTIL_CUPTI_LIBRARY=build-live/tests/cpp/libfake_cupti.so build-live/benchmarks/bench_cupti_memory [steps]
//   (steps defaults to 1000000)
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"

namespace {
long rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace gpuutil;
  const long steps = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  using Launch = void (*)(const char*, uint32_t, int64_t, int64_t);
  Launch launch = nullptr;
  if (const char* lib = std::getenv("GPUUTIL_CUPTI_LIBRARY")) {
    if (void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)) {
      launch = reinterpret_cast<Launch>(dlsym(h, "fake_cupti_launch_kernel"));
    }
  }
  ProfilerOptions o;
  o.live.nvtx = false;
  o.live.cupti_buffer_count = 8;
  o.live.cupti_buffer_bytes = 256 << 10;
  o.keep_reports = 16;
  Profiler prof(o);
  const std::string off = prof.start();
  std::printf("GPU collection: %s\n", off.empty() ? "on (fake CUPTI)" : off.c_str());
  std::printf("| steps done | RSS kB | pending events |\n|---|---|---|\n");
  long first = -1, max_rss = 0, min_rss = 1L << 40;
  for (long s = 0; s < steps; ++s) {
    {
      StepScope step(prof, s);
      if (launch) {
        launch("gemm", 7, 2000, 500);
        launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20, 1000, 500);
      }
    }
    if (s % 1024 == 0) prof.take_reports();
    if ((s + 1) % (steps / 10 > 0 ? steps / 10 : 1) == 0) {
      const long r = rss_kb();
      if (first < 0) first = r;
      max_rss = std::max(max_rss, r);
      min_rss = std::min(min_rss, r);
      std::printf("| %ld | %ld | %zu |\n", s + 1, r, prof.session().pending_events());
    }
  }
  prof.stop();
  std::printf("\nRSS after the first 10%%: %ld kB; range over the rest: %ld..%ld kB (%.1f%%)\n", first, min_rss,
              max_rss, 100.0 * double(max_rss - min_rss) / double(first));
  return 0;
}
