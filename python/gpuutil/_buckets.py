"""The breakdown buckets of gpuutil.report/1, in report order: one list for
every module that reads or writes them (tables, compare, exports, sinks).
They mirror the C++ IdleCause enum (libgpuutil/include/gpuutil/report.h)."""

#: Idle causes, the ``culprits`` keys and the ``idle_*`` bucket suffixes.
#: ``kernel_gap`` came later (reports written before it lack it: read it with
#: ``.get(key, 0)``).
IDLE_CAUSES = ("dataloader", "host_sync", "collective", "launch", "host", "dependency", "unattributed",
               "kernel_gap")

#: Idle causes that are the device's own overhead, not something to fix: never
#: a step's "largest idle cause".
OVERHEAD_CAUSES = ("kernel_gap",)

#: Buckets older reports may lack (added after schema /1 was first written).
OPTIONAL_BUCKETS = ("idle_kernel_gap",)

#: Every key of ``breakdown_ns``; they sum to ``wall_ns``.
BREAKDOWN_KEYS = ("compute", "communication", "memory") + tuple(f"idle_{c}" for c in IDLE_CAUSES)

#: Every key of a host thread's ``breakdown_ns``; they sum to its ``wall_ns``.
HOST_CATEGORIES = ("dataloader", "forward", "backward", "optimizer", "host_sync", "collective", "other")
