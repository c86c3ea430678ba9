// Run totals of a live session (see gpuutil/run_totals.h).
#include "gpuutil/run_totals.h"

namespace gpuutil {

void RunTotals::add(const Report& report) {
  for (const StepReport& s : report.steps) {
    ++steps;
    steps_wall_ns += s.wall_ns;
    for (const DeviceStepReport& d : s.devices) {
      DeviceTotals& t = devices[{d.rank, d.device}];
      if (t.name.empty()) t.name = d.name;
      t.wall_ns += d.wall_ns;
      t.breakdown.compute_ns += d.breakdown.compute_ns;
      t.breakdown.communication_ns += d.breakdown.communication_ns;
      t.breakdown.memory_ns += d.breakdown.memory_ns;
      for (size_t i = 0; i < t.breakdown.idle_ns.size(); ++i) t.breakdown.idle_ns[i] += d.breakdown.idle_ns[i];
    }
    for (const HostThreadStepReport& h : s.host) {
      HostThreadTotals& t = threads[{h.rank, h.tid}];
      if (t.name.empty()) t.name = h.name;
      ++t.steps;
      t.wall_ns += h.wall_ns;
      for (size_t i = 0; i < t.breakdown_ns.size(); ++i) t.breakdown_ns[i] += h.breakdown_ns[i];
    }
  }
  for (const Finding& f : report.findings) {
    FindingTotals& t = findings[f.id];
    if (t.title.empty()) {
      t.title = f.title;
      t.fix = f.fix;
    }
    t.recoverable_ns += f.recoverable_ns;
    ++t.steps;
  }
}

}  // namespace gpuutil
