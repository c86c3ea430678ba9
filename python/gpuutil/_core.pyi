"""Type stubs for gpuutil._core, the pybind11 module over the C++ core."""

from typing import Dict, List, Optional

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

    def __init__(self, interval_s: float = 0.2, gpm: bool = False, max_samples: int = 65536) -> None: ...
    def open(self) -> bool: ...
    @property
    def error(self) -> str: ...
    @property
    def device_count(self) -> int: ...
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
