"""The per-rank, per-step table for a dataframe (``--ranks-out``): one row
per rank and compared step, written as JSON Lines (``.jsonl``) or Parquet
(``.parquet``, needs pyarrow: the ``parquet`` extra).
"""

from __future__ import annotations

import json

from gpuutil.fanout._errors import FanoutError

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List


def ranks_out_format(path: str) -> str:
    """"jsonl" or "parquet" from the file name; FanoutError otherwise (or when pyarrow is missing)."""
    if path.endswith(".jsonl"):
        return "jsonl"
    if path.endswith(".parquet"):
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise FanoutError("--ranks-out *.parquet needs pyarrow: pip install 'gpuutil[parquet]' "
                              "(or write .jsonl)") from None
        return "parquet"
    raise FanoutError(f"--ranks-out {path}: the file name must end in .jsonl or .parquet")


def write_ranks_out(rows: List[Dict[str, Any]], path: str) -> None:
    """Writes the rows; OSError when the file cannot be written."""
    if ranks_out_format(path) == "jsonl":
        with open(path, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, separators=(",", ":")) + "\n")
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    names: List[str] = []
    for row in rows:
        for k in row:
            if k not in names:
                names.append(k)
    table = pa.table({k: [row.get(k) for row in rows] for k in names})
    pq.write_table(table, path)
