"""The built-in collector factories, in the order a profile tries them:
CUPTI and NVTX (gpuutil._live, when this build has them), the PyTorch hook
and the cross-rank view (only when the program imported torch: ``import
gpuutil`` never imports it). gpuutil._collectors.factories() puts them
first in its list the first time a profile starts.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, List

if TYPE_CHECKING:  # pragma: no cover - _collectors imports this module
    from gpuutil._collectors import CollectorHandle


# -- the built-in collectors, tried in this order at start ---------------------
def _torch_collector(prof: "CollectorHandle"):  # type: ignore[no-untyped-def]
    # The PyTorch hook attaches only when the program already imported torch:
    # `import gpuutil` itself never imports it.
    if "torch" not in sys.modules:
        return None
    from gpuutil.torch import TorchCollector

    return TorchCollector(prof)


def _cluster_collector(prof: "CollectorHandle"):  # type: ignore[no-untyped-def]
    # The cross-rank view needs torch.distributed; like the PyTorch hook it
    # attaches only when the program imported torch (docs/distributed.md).
    if "torch" not in sys.modules or not prof.cluster_options["enabled"]:
        return None
    from gpuutil.torch._cluster import ClusterCollector

    o = prof.cluster_options
    return ClusterCollector(prof, interval_ms=o["interval_ms"], timeout_s=o["timeout_s"], leader=o["leader"])


def builtin_factories() -> "List[Callable[[CollectorHandle], Any]]":
    out: "List[Callable[[CollectorHandle], Any]]" = []
    try:  # live CUPTI and NVTX collectors; gpuutil stays usable (host-only) without them
        from gpuutil import _live
    except ImportError:  # pragma: no cover - a build without live_bindings
        pass
    else:
        out += [_live._factory, _live._nvtx_factory]
    return out + [_torch_collector, _cluster_collector]
