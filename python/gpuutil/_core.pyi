"""Type stubs for gpuutil._core, the pybind11 module over the C++ core."""

from typing import Dict, List, Optional, Tuple

class TraceError(ValueError):
    """A trace file could not be read at all; message 'cannot read PATH: reason'."""

def analyze_files(
    paths: List[str],
    flops_per_step: Optional[float] = None,
    dtype: str = "bf16",
    peak_tflops: Optional[float] = None,
    indent: int = -1,
) -> str:
    """Import and analyse trace files (one per rank); the gpuutil.report/1 JSON text."""

def version() -> str:
    """The gpuutil library version."""

def report_schema() -> str:
    """The report schema id, e.g. 'gpuutil.report/1'."""

def diagnostics_registry() -> List[Dict[str, str]]:
    """Every diagnostic counter: dicts with name, severity, description."""

def perfetto_trace_files(paths: List[str], indent: int = -1) -> str:
    """Import trace files (one per rank); the Chrome trace / Perfetto JSON of the timeline
    with an idle-cause track. Raises ValueError 'cannot read PATH: reason'."""

class NvmlSampler:
    """NVML device-counter sampler (libgpuutil/src/collectors/nvml); see gpuutil.nvml."""

    def __init__(
        self,
        interval_s: float = 0.2,
        gpm: bool = False,
        max_samples: int = 65536,
        devices: Optional[List[Tuple[int, str, int]]] = None,
    ) -> None:
        """devices: (cuda_device_id, uuid, nvml_index) tuples, see gpuutil.nvml.DeviceRef;
        None samples every NVML device labelled by NVML index."""
    def open(self) -> bool: ...
    @property
    def error(self) -> str: ...
    def set_devices(self, devices: List[Tuple[int, str, int]]) -> int: ...
    @property
    def device_count(self) -> int: ...
    @property
    def devices(self) -> List[Tuple[int, str, str, str]]:
        """(device label, NVML UUID, kind, parent GPU UUID) of each device sampled."""
    @property
    def interval_ns(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    def sample_once(self) -> None: ...
    def start(self) -> bool: ...
    def stop(self) -> None: ...
    def problems(self) -> List[str]: ...
    def drain_into(self, session: object) -> None:
        """Moves the buffered samples into a gpuutil._core.Session."""

def now_ns() -> int:
    """The session clock (CLOCK_MONOTONIC ns)."""

def nvtx_push_step(step: int) -> None:
    """Pushes a 'step N' range in the gpuutil NVTX domain (visible in Nsight Systems)."""

def nvtx_pop_step() -> None:
    """Pops the range pushed by nvtx_push_step."""

class Session:
    """The live session core (libgpuutil/include/gpuutil/session.h)."""

    def __init__(
        self,
        jsonl_path: str = "",
        rank: int = 0,
        flops_per_step: Optional[float] = None,
        dtype: str = "bf16",
        peak_tflops: Optional[float] = None,
        max_pending_events: int = 4194304,
        hardware_flops_per_step: Optional[float] = None,
    ) -> None: ...
    @property
    def ok(self) -> bool: ...
    @property
    def error(self) -> str: ...
    def begin_step(self, step: int, t_ns: int) -> None: ...
    def end_step(self, t_ns: int) -> None: ...
    def close_step(self, step: int, start_ns: int, end_ns: int) -> None: ...
    def step_open(self) -> bool: ...
    def thread_index(self, pid: int, tid: int, name: str = "") -> int: ...
    def add_range(self, name: str, start_ns: int, end_ns: int, thread: int, is_op: bool = False) -> None: ...
    def add_counter(self, name: str, ts_ns: int, device: int, value: float) -> None: ...
    def count(self, name: str, n: int = 1, example: str = "") -> None: ...
    def add_standing_diagnostic(self, name: str, example: str = "") -> None: ...
    def set_steps_source(self, source: str) -> None: ...
    def set_flops_per_step(self, flops: Optional[float], source: str) -> None: ...
    def mark_complete_until(self, t_ns: int) -> None: ...
    def collect(self, complete_until_ns: Optional[int] = None) -> List[str]: ...
    def finish(self, t_ns: int) -> List[str]: ...
    @property
    def steps_reported(self) -> int: ...
    @property
    def outside_steps_ns(self) -> int: ...
    @property
    def pending_events(self) -> int: ...
    def run_totals_json(self) -> str: ...

class TorchHookDrain:
    """Drains gpuutil's LibTorch hook (its C interface, ``hook.api()``) into a Session, in C++."""

    def __init__(self, session: Session, api: object) -> None: ...
    def drain(self) -> int: ...

class LiveCollector:
    """CUPTI (and optionally NVTX) collection feeding a Session; see gpuutil._live."""

    def __init__(
        self,
        session: Session,
        buffer_count: int = 16,
        buffer_bytes: int = 2097152,
        library_dirs: List[str] = ...,
        driver_api: bool = False,
        gpu: bool = True,
        nvtx: bool = False,
        nvtx_library: str = "",
    ) -> None: ...
    def start(self) -> str: ...
    @property
    def nvtx_off(self) -> str: ...
    def step_boundary(self, t_ns: int) -> int: ...
    def stop(self) -> None: ...
    @property
    def running(self) -> bool: ...
    @property
    def library_path(self) -> str: ...
    def counters(self) -> Dict[str, int]: ...
