"""Who a process is, from inside it: the labels that join gpuutil's series
with each other and with dcgm-exporter's, with no prolog file and no
per-job copy of any series.

- :func:`job_id`: the ``job_id`` label (never ``job``, which Prometheus
  keeps for the scrape job and renames a target's own to ``exported_job``):
  ``gpuutil.profile(job_id=...)`` or ``PrometheusMetrics(job_id=...)``, else
  ``SLURM_JOB_ID``, else ``TORCHELASTIC_RUN_ID`` (torchrun's rendezvous id,
  unless it is torchrun's default ``none``), else on Kubernetes
  ``<namespace>/<pod>`` (``POD_NAMESPACE``/``POD_NAME`` from the downward
  API, else the service account's namespace file and ``HOSTNAME``), else
  the script's name.
- :func:`gpu_names`: each CUDA device's ``UUID`` label with the value
  dcgm-exporter uses (``GPU-…``; a MIG instance's ``MIG-…``, with its
  parent GPU's UUID beside it). In order: an explicit override (the
  ``gpu_uuids`` argument or ``GPUUTIL_GPU_UUIDS``, for CPU-only jobs and
  tests, or a process that can name its GPUs no other way), else the
  devices torch has initialised (``get_device_properties(i).uuid``) or
  ``CUDA_VISIBLE_DEVICES``' UUIDs (gpuutil.nvml.select_devices), spelled as
  NVML spells them when NVML can be loaded, else with NVML's ``GPU-``
  prefix added to torch's bare form. A device none of these names has no
  UUID (the label is left empty), and is never guessed.

Pure functions of the environment given; only :func:`gpu_names` asks NVML
(through gpuutil's own loader) and a torch the program imported.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

#: Where the service account's namespace is mounted in every Kubernetes pod.
K8S_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
#: The override: a comma-separated list of UUIDs, CUDA device i is entry i.
UUIDS_ENV = "GPUUTIL_GPU_UUIDS"
_PREFIXES = ("GPU-", "MIG-")


def job_id_and_source(explicit: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
                      argv0: Optional[str] = None) -> Tuple[str, str]:
    """The job id and where it came from ("argument", "SLURM_JOB_ID",
    "TORCHELASTIC_RUN_ID", "kubernetes", "script"). Raises ValueError for an
    explicit id that is empty or not a string."""
    if explicit is not None:
        if not isinstance(explicit, str) or not explicit.strip():
            raise ValueError(f"job_id must be a non-empty string, not {explicit!r}")
        return explicit.strip(), "argument"
    env = os.environ if environ is None else environ
    slurm = env.get("SLURM_JOB_ID", "").strip()
    if slurm:
        return slurm, "SLURM_JOB_ID"
    run_id = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if run_id and run_id != "none":  # torchrun's default --rdzv-id is "none"
        return run_id, "TORCHELASTIC_RUN_ID"
    if env.get("KUBERNETES_SERVICE_HOST"):
        pod = env.get("POD_NAME", "").strip() or env.get("HOSTNAME", "").strip()
        namespace = env.get("POD_NAMESPACE", "").strip() or _read_first_line(K8S_NAMESPACE_FILE)
        if pod:
            return (f"{namespace}/{pod}" if namespace else pod), "kubernetes"
    path = sys.argv[0] if argv0 is None else argv0
    script = os.path.basename(path)
    if script == "__main__.py":  # python -m package: the package's name
        script = os.path.basename(os.path.dirname(path))
    script = os.path.splitext(script)[0] if script not in ("", "-c", "-") else ""
    return (script or "python"), "script"


def job_id(explicit: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
           argv0: Optional[str] = None) -> str:
    """The ``job_id`` label value (see the module's docstring for the order)."""
    return job_id_and_source(explicit, environ, argv0)[0]


def _read_first_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().strip()
    except OSError:
        return ""


class GpuName(NamedTuple):
    """A device's names as dcgm-exporter and NVML spell them."""

    uuid: str  #: "GPU-…" or, for a MIG instance, "MIG-…"
    parent_uuid: str = ""  #: a MIG instance's GPU ("GPU-…"); "" otherwise


UuidOverride = Union[Mapping[int, str], Sequence[str], str, None]


def parse_override(value: UuidOverride) -> Optional[Dict[int, str]]:
    """``gpu_uuids`` as {CUDA device id: UUID}: a mapping, a sequence (entry
    i is device i) or a comma-separated string; None stays None. Raises
    ValueError for an entry that is not a ``GPU-``/``MIG-`` UUID."""
    if value is None:
        return None
    if isinstance(value, str):
        items: Iterable[Tuple[Any, Any]] = enumerate(e.strip() for e in value.split(","))
    elif isinstance(value, Mapping):
        items = value.items()
    else:
        items = enumerate(value)
    out: Dict[int, str] = {}
    for device, uuid in items:
        uuid = str(uuid).strip()
        if not uuid.upper().startswith(_PREFIXES) or len(uuid) <= 4:
            raise ValueError(f"gpu_uuids: {uuid!r} (device {device}) is not a GPU-… or MIG-… UUID")
        out[int(device)] = uuid[:4].upper() + uuid[4:].lower()
    return out


def override_from_environment(environ: Optional[Mapping[str, str]] = None) -> Optional[Dict[int, str]]:
    """``GPUUTIL_GPU_UUIDS`` parsed (None when unset or empty); raises
    ValueError naming the variable for a bad entry."""
    env = os.environ if environ is None else environ
    text = env.get(UUIDS_ENV, "").strip()
    if not text:
        return None
    try:
        return parse_override(text)
    except ValueError as e:
        raise ValueError(f"{UUIDS_ENV}: {e}") from None


def gpu_names(devices: Iterable[int], override: Optional[Mapping[int, str]] = None,
              environ: Optional[Mapping[str, str]] = None, torch: Any = None,
              nvml: bool = True) -> Dict[int, GpuName]:
    """{CUDA device id: GpuName} for those of ``devices`` that can be named
    (see the module's docstring); the others are left out."""
    wanted = sorted(set(int(d) for d in devices))
    if override is not None:
        return {d: GpuName(override[d]) for d in wanted if d in override}
    from gpuutil.nvml import select_devices

    selection = select_devices(environ, torch)
    if selection is None:
        return {}
    refs = [r for r in selection.devices if r.cuda_device_id in wanted]
    named: Dict[int, GpuName] = {}
    if nvml and refs:
        named = _names_from_nvml(refs)
    for r in refs:
        if r.cuda_device_id not in named and r.uuid:
            named[r.cuda_device_id] = GpuName(_spelled(r.uuid))
    return named


def _spelled(uuid: str) -> str:
    """NVML's spelling of a UUID as torch or CUDA_VISIBLE_DEVICES gives it
    (torch prints it bare; NVML and dcgm-exporter prefix "GPU-")."""
    uuid = uuid.strip()
    if uuid.upper().startswith(_PREFIXES):
        return uuid[:4].upper() + uuid[4:].lower()
    return "GPU-" + uuid.lower()


def _names_from_nvml(refs: List[Any]) -> Dict[int, GpuName]:
    """NVML's own names of the devices (exact UUID, MIG or not, parent), or
    {} when NVML cannot be loaded."""
    try:
        from gpuutil import _core

        sampler = _core.NvmlSampler(devices=[tuple(r) for r in refs])
        if not sampler.open():
            return {}
        out = {}
        for label, uuid, kind, parent in sampler.devices:
            if uuid:
                out[int(label)] = GpuName(uuid, parent if kind == "mig_device" else "")
        return out
    except Exception:  # noqa: BLE001 - naming is best effort; the spelled UUID is used instead
        return {}
