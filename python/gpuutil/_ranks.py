"""Who this process is in its job: its rank and world size (from the
launcher's environment, else an initialised torch.distributed process
group), the per-rank name of its JSON Lines file, and its job id (the
``job_id`` label of its Prometheus series, gpuutil.fleet.identity).
"""

from __future__ import annotations

import os
import sys
from typing import Optional


def rank_and_world() -> "tuple[int, int]":
    def env_int(name: str, default: int) -> int:
        try:
            return int(os.environ.get(name, default))
        except ValueError:
            return default

    if "RANK" not in os.environ:
        # Launchers that do not export RANK (Lightning's DDP subprocesses set
        # LOCAL_RANK/NODE_RANK only): the initialised process group knows.
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                return dist.get_rank(), dist.get_world_size()
        except Exception:  # noqa: BLE001 - fall back to the environment
            pass
    return env_int("RANK", 0), env_int("WORLD_SIZE", 1)


def ranked_path(path: str, rank: int, world: int) -> str:
    """steps.jsonl -> steps.rank3.jsonl when the job has several ranks."""
    if world <= 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext or '.jsonl'}"


def job_id_of(explicit: Optional[str]) -> str:
    from gpuutil.fleet.identity import job_id

    return job_id(explicit)
