// Forward and backward phases of a trace recorded without module ranges,
// for the host breakdown (host_breakdown.h): what gives a CPU
// torch.profiler trace `forward` and `backward` by the same rules as a
// live session's ranges (docs/accounting.md, "Forward and backward in
// traces").
//
// Live, forward is the outermost nn.Module call ("nn.Module: Net") and
// backward the whole torch.autograd.backward call ("## backward ##"); a
// trace without with_modules=True has neither, only ops. Its autograd
// structure says the same thing: ops that ran under autograd carry Kineto's
// "Sequence number" (HostRange::autograd), and backward runs as
// "autograd::engine::evaluate_function: ..." ranges. So, per thread:
//   forward phase   from the first autograd op to the end of the last one
//                   of a run of them (Python time between the ops included,
//                   as inside a module call); an autograd op inside a
//                   dataloader, backward, host_sync or collective range is
//                   not one (DataLoader collation, ops of backward nodes);
//   backward phase  from the first backward range to the end of the last
//                   one of a run (the autograd engine's time between nodes
//                   included, as inside backward()), on a thread that also
//                   ran forward: the thread that called backward(), as live;
//                   an autograd worker thread (GPU backward) keeps its node
//                   ranges as they are. Backward ranges are
//                   "autograd::engine::evaluate_function: ..." and, in
//                   traces without those, autograd node ops
//                   ("AddmmBackward0", AccumulateGrad, aten::*_backward),
//                   which are never forward.
// A run ends where a range of another phase starts (dataloader, optimizer,
// backward for a forward run; dataloader, optimizer, an autograd op for a
// backward run) or a step range (ProfilerStep#N) starts; the store's step
// windows are not read (a live batch and a whole trace see the same
// phases). Where it differs from the live ranges:
// the loss computed after the model (F.cross_entropy) is forward here (it
// runs under autograd) but not live unless the loss is an nn.Module, and
// ops that ran under autograd outside a model (a .to() of the batch, a
// metric computed with grad mode on) can open or form a short phase.
//
// Only for stores with autograd ops (traces), and each phase only when the
// store has none of its named ranges: a forward-category range (module
// ranges, "## forward ##") turns forward phases off, "## backward ##" turns
// backward phases off. Live sessions are never affected.
//
// Internal to the analysis core; pure.
#pragma once

#include <cstdint>
#include <vector>

#include "gpuutil/events.h"
#include "gpuutil/report.h"

namespace gpuutil {

struct AutogradPhase {
  uint32_t thread;        // index into EventStore::threads
  int64_t start_ns;
  int64_t end_ns;
  HostCategory category;  // kForward or kBackward
};

// Every phase of the store, by thread then start (they overlap only where
// the ranges they come from do; the host breakdown counts an instant once).
std::vector<AutogradPhase> autograd_phases(const EventStore& store);

}  // namespace gpuutil
