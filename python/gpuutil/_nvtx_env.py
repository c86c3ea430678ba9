"""Claims NVTX injection for gpuutil at ``import gpuutil``.

NVTX reads ``NVTX_INJECTION64_PATH`` on each binary's first NVTX call, so
the variable must point at the packaged ``libgpuutil_nvtx.so`` before the
program's first ``torch.cuda.nvtx`` call: ``import gpuutil`` sets it (unless
another tool, such as Nsight Systems, already did). Kept apart from the
collectors so that importing the package stays cheap (the command line
starts without loading them).
"""

import os

#: The packaged NVTX injection library.
NVTX_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libgpuutil_nvtx.so")


def claim_nvtx_injection() -> None:
    """Sets NVTX_INJECTION64_PATH to our library if no other tool owns it."""
    if not os.path.exists(NVTX_LIBRARY):
        return
    if not os.environ.get("NVTX_INJECTION64_PATH"):
        os.environ["NVTX_INJECTION64_PATH"] = NVTX_LIBRARY
