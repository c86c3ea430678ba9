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
