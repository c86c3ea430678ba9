// Scripted workloads for the fake CUPTI, run on the fake's own thread (its
// host calls are made from that thread, so their API records carry that
// thread's id):
//  - steps: a training step loop (dataloader wait, copies, kernels over
//    several streams, NCCL kernels, an optional sync at the end) with host
//    and device times computed ahead on the session clock;
//  - streaming: kernel records at a sustained rate from emit_threads threads.
#include <time.h>

#include <algorithm>
#include <vector>

#include "fake_state.h"

using namespace fake;

namespace {

void sleep_until(int64_t t_ns) {
  for (int64_t now = mono_ns(); now < t_ns; now = mono_ns()) {
    const int64_t d = std::min<int64_t>(t_ns - now, 2'000'000);
    timespec ts{0, static_cast<long>(d)};
    nanosleep(&ts, nullptr);
  }
}

void run_steps(fake_cupti_scenario sc) {
  int64_t h = mono_ns();
  const int streams = sc.streams > 0 ? sc.streams : 1;
  std::vector<int64_t> stream_free(static_cast<size_t>(streams) + 1, 0);
  auto hook = [&](int type, int64_t step, const char* name, int64_t a, int64_t b) {
    if (sc.hook) sc.hook(sc.hook_ctx, type, step, name, a, b);
  };
  // One API call [h, h + launch_api_ns) with one piece of work scheduled
  // behind the stream's previous work.
  auto launch = [&](uint32_t cbid, fake_cupti_work w, size_t si, int64_t duration) {
    w.start_ns = std::max(h + sc.launch_latency_ns, stream_free[si]);
    w.end_ns = w.start_ns + duration;
    stream_free[si] = w.end_ns;
    fake_cupti_call c{};
    c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    c.cbid = cbid;
    c.start_ns = h;
    c.end_ns = h + sc.launch_api_ns;
    c.work = &w;
    c.n_work = 1;
    fake_cupti_call_api(&c);
    h += sc.launch_api_ns;
  };
  for (int step = 0; step < sc.steps; ++step) {
    hook(0, step, "", h, h);
    if (sc.dataloader_ns > 0) {
      hook(2, step, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", h, h + sc.dataloader_ns);
      h += sc.dataloader_ns;
    }
    for (int m = 0; m < sc.memcpy_per_step; ++m) {
      fake_cupti_work w{};
      w.kind = FAKE_CUPTI_MEMCPY;
      w.stream = 7;
      w.bytes = sc.memcpy_bytes;
      w.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
      w.src_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
      w.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
      launch(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, w, 0, sc.memcpy_ns);
    }
    for (int k = 0; k < sc.kernels_per_step; ++k) {
      const size_t si = static_cast<size_t>(k % streams);
      fake_cupti_work w{};
      w.kind = FAKE_CUPTI_KERNEL;
      w.name = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn";
      w.stream = 7 + static_cast<uint32_t>(si);
      w.grid[0] = 132;
      w.block[0] = 256;
      w.registers_per_thread = 32;
      launch(fake_cupti_launch_cbid(0), w, si, sc.kernel_ns);  // the cell's: CUDA 13's <<<>>> by default
    }
    for (int k = 0; k < sc.nccl_kernels_per_step; ++k) {
      fake_cupti_work w{};
      w.kind = FAKE_CUPTI_KERNEL;
      w.name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
      w.stream = 20;
      w.grid[0] = 16;
      w.block[0] = 512;
      launch(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, w, static_cast<size_t>(streams), sc.nccl_ns);
    }
    if (sc.sync_at_step_end) {
      const int64_t gpu_done = *std::max_element(stream_free.begin(), stream_free.end());
      const int64_t end = std::max(h, gpu_done) + 1000;
      fake_cupti_call c{};
      c.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
      c.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;
      c.start_ns = h;
      c.end_ns = end;
      c.sync = FAKE_CUPTI_SYNC_STREAM;
      c.sync_stream = 7;
      fake_cupti_call_api(&c);
      h = end;
    }
    if (sc.pace_realtime) sleep_until(h);
    hook(1, step, "", h, h);
  }
}

void run_stream(fake_cupti_scenario sc, int threads) {
  const int64_t t0 = mono_ns();
  const double ns_per_record = 1e9 / (sc.records_per_s > 0 ? sc.records_per_s : 1e6);
  const uint64_t batch = 256;
  auto emit = [&](int t) {
    std::vector<fake_cupti_work> work;
    for (uint64_t i = uint64_t(t) * batch; i < sc.stream_records; i += batch * uint64_t(threads)) {
      sleep_until(t0 + static_cast<int64_t>(double(i) * ns_per_record));
      const int64_t now = mono_ns();
      work.clear();
      for (uint64_t j = i; j < std::min(sc.stream_records, i + batch); ++j) {
        fake_cupti_work w{};
        w.kind = FAKE_CUPTI_KERNEL;
        w.name = "void at::native::vectorized_elementwise_kernel<4>";
        w.stream = 7;
        w.start_ns = now - 900;
        w.end_ns = now - 100;
        w.grid[0] = 132;
        w.block[0] = 256;
        work.push_back(w);
      }
      emit_device_work_batch(work.data(), work.size());
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(emit, t);
  emit(0);
  for (auto& th : pool) th.join();
}

}  // namespace

extern "C" {

int fake_cupti_run_scenario(const fake_cupti_scenario* scenario) {
  State& s = st();
  if (s.scenario.joinable()) return -1;
  int threads;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    threads = s.cfg.emit_threads > 0 ? s.cfg.emit_threads : 1;
  }
  const fake_cupti_scenario sc = *scenario;
  s.scenario = std::thread([sc, threads] {
    if (sc.steps > 0) {
      run_steps(sc);
    } else {
      run_stream(sc, threads);
    }
  });
  return 0;
}

void fake_cupti_wait(void) {
  State& s = st();
  if (s.scenario.joinable()) s.scenario.join();
  if (s.teardown.joinable()) s.teardown.join();
}

}  // extern "C"
