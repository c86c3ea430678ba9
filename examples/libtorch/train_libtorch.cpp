// A LibTorch training loop profiled with gpuutil's C++ step scope.
//
// A small MLP on synthetic data, SGD, with a planted slow input pipeline
// (--loader-ms sleeps before each batch). Each step runs inside a
// gpuutil::StepScope; the phases are marked as host ranges with PyTorch's
// own names ("enumerate(DataLoader)#...", "## forward ##", "## backward ##",
// "Optimizer.step#SGD.step"), so every report carries the per-thread host
// breakdown (steps[].host). Writes one JSON report per step (--output) and
// prints the breakdown of each step. On a machine with a GPU, the profiler
// also collects device activity when its CUPTI collector can start.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "gpuutil/clock.h"
#include "gpuutil/profiler.h"
#include "gpuutil/range_classify.h"

namespace {

// Records [construction, destruction) as a host range on the calling thread.
class RangeScope {
 public:
  RangeScope(gpuutil::Session& session, uint32_t thread, const char* name)
      : session_(session), thread_(thread), name_(name), start_ns_(gpuutil::session_now_ns()) {}
  ~RangeScope() {
    gpuutil::HostRange r;
    r.name = session_.intern(name_);
    r.start_ns = start_ns_;
    r.end_ns = gpuutil::session_now_ns();
    r.thread = thread_;
    r.category = gpuutil::classify_range(name_, false);
    session_.add_range(r);
  }
  RangeScope(const RangeScope&) = delete;
  RangeScope& operator=(const RangeScope&) = delete;

 private:
  gpuutil::Session& session_;
  uint32_t thread_;
  const char* name_;
  int64_t start_ns_;
};

const char* arg(int argc, char** argv, const char* flag, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = std::atoi(arg(argc, argv, "--steps", "5"));
  const int loader_ms = std::atoi(arg(argc, argv, "--loader-ms", "20"));
  const std::string output = arg(argc, argv, "--output", "steps_libtorch.jsonl");
  torch::manual_seed(0);
  torch::set_num_threads(1);

  auto model = torch::nn::Sequential(torch::nn::Linear(64, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01));

  gpuutil::ProfilerOptions options;
  options.session.jsonl_path = output;
  gpuutil::Profiler prof(options);
  const std::string off = prof.start();
  if (!off.empty()) std::printf("gpuutil: host-only (%s)\n", off.c_str());
  gpuutil::Session& session = prof.session();
  const uint32_t thread = session.thread_index(0, 0, "main");

  for (int i = 0; i < steps; ++i) {
    gpuutil::StepScope step(prof, i);
    torch::Tensor x, y;
    {
      RangeScope r(session, thread, "enumerate(DataLoader)#SyntheticLoader.__next__");
      std::this_thread::sleep_for(std::chrono::milliseconds(loader_ms));
      x = torch::randn({32, 64});
      y = torch::randint(0, 10, {32});
    }
    torch::Tensor loss;
    {
      RangeScope r(session, thread, "## forward ##");
      loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    }
    {
      RangeScope r(session, thread, "Optimizer.zero_grad#SGD.zero_grad");
      opt.zero_grad();
    }
    {
      RangeScope r(session, thread, "## backward ##");
      loss.backward();
    }
    {
      RangeScope r(session, thread, "Optimizer.step#SGD.step");
      opt.step();
    }
  }
  prof.stop();

  int reported = 0;
  for (const auto& out : prof.take_reports()) {
    for (const auto& s : out.report.steps) {
      for (const auto& h : s.host) {
        std::printf("step %lld wall %.1f ms:", static_cast<long long>(s.step), static_cast<double>(s.wall_ns) / 1e6);
        for (int c = 0; c < gpuutil::kHostCategoryCount; ++c) {
          std::printf(" %s=%.1f", gpuutil::to_string(static_cast<gpuutil::HostCategory>(c)),
                      static_cast<double>(h.breakdown_ns[static_cast<size_t>(c)]) / 1e6);
        }
        std::printf("\n");
      }
      ++reported;
    }
  }
  std::printf("gpuutil: %d step reports written to %s\n", reported, output.c_str());
  return reported == steps ? 0 : 1;
}
