// Trace files in, the JSON report out (see gpuutil/analyze_traces.h):
// import every input, give each its rank, analyse, serialise.
#include "gpuutil/analyze_traces.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <set>
#include <thread>

#include "gpuutil/report_json.h"

namespace gpuutil {

namespace {

ImportResult import_one(const TraceInput& input, const ImportOptions& options) {
  if (input.text != nullptr) return import_kineto_json(*input.text, input.name, options);
  if (input.fd >= 0) return import_kineto_fd(input.fd, input.name, options);
  return import_kineto_file(input.name, options);
}

// Imports every input, in parallel when there are several (one file per
// thread; each file then parses on one thread, so the cores are not
// oversubscribed), or a single one with the importer's own parallel parse.
// Results keep the order of `inputs`.
std::vector<ImportResult> import_all(const std::vector<TraceInput>& inputs, const ImportOptions& options) {
  std::vector<ImportResult> results(inputs.size());
  // One budget for all inputs: their stores are held together.
  ImportBudget budget(options.memory_budget_bytes);
  ImportOptions shared = options;
  if (shared.shared_budget == nullptr) shared.shared_budget = &budget;
  // One input asks nothing of the hardware (reading the thread count costs
  // a sysfs read).
  const size_t workers =
      inputs.size() <= 1 ? 1 : std::min(inputs.size(), std::max<size_t>(1, std::thread::hardware_concurrency()));
  if (workers <= 1) {
    for (size_t i = 0; i < inputs.size(); ++i) results[i] = import_one(inputs[i], shared);
    return results;
  }
  std::atomic<size_t> next{0};
  ImportOptions one_thread = shared;
  one_thread.threads = 1;
  auto work = [&]() {
    for (size_t i = next.fetch_add(1); i < inputs.size(); i = next.fetch_add(1)) {
      results[i] = import_one(inputs[i], one_thread);
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace

AnalyzeTracesResult analyze_traces(const std::vector<TraceInput>& inputs, const AnalysisOptions& options,
                                   int indent, const ImportOptions& import) {
  AnalyzeTracesResult out;
  if (inputs.empty()) {
    out.error = "no trace given";
    return out;
  }
  std::vector<ImportResult> results = import_all(inputs, import);
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok) {
      // (Some import errors name the input already: not twice.)
      const std::string prefix = "cannot read " + inputs[i].name + ": ";
      out.error = results[i].error.rfind(prefix, 0) == 0 ? results[i].error : prefix + results[i].error;
      // Keep the message one line whatever the importer wrote.
      std::replace(out.error.begin(), out.error.end(), '\n', ' ');
      std::replace(out.error.begin(), out.error.end(), '\r', ' ');
      return out;
    }
  }
  // One file is one rank. When the traces do not name distinct ranks
  // themselves, the position in `inputs` does.
  std::set<int32_t> ranks;
  for (const auto& r : results) ranks.insert(r.store.rank);
  if (ranks.size() != results.size()) {
    for (size_t i = 0; i < results.size(); ++i) results[i].store.rank = static_cast<int32_t>(i);
  }
  std::vector<const EventStore*> stores;
  stores.reserve(results.size());
  for (const auto& r : results) stores.push_back(&r.store);
  out.json = report_to_json(analyze(stores, options), indent);
  out.ok = true;
  return out;
}

}  // namespace gpuutil
