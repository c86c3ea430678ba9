"""The breakdown buckets of gpuutil.report/1, in report order: one list for
every module that reads or writes them (tables, compare, exports, sinks).
They mirror the C++ IdleCause enum (libgpuutil/include/gpuutil/report.h)."""

#: Idle causes, the ``culprits`` keys and the ``idle_*`` bucket suffixes.
IDLE_CAUSES = ("dataloader", "host_sync", "collective", "launch", "host", "dependency", "unattributed")

#: Every key of ``breakdown_ns``; they sum to ``wall_ns``.
BREAKDOWN_KEYS = ("compute", "communication", "memory") + tuple(f"idle_{c}" for c in IDLE_CAUSES)

#: Every key of a host thread's ``breakdown_ns``; they sum to its ``wall_ns``.
HOST_CATEGORIES = ("dataloader", "forward", "backward", "optimizer", "host_sync", "collective", "other")
