"""Builds gpuutil's LibTorch hook against the installed torch.

    python -m gpuutil.torch.build [--verbose]

Prints the build folder on success; exits 1 with the reason otherwise.
"""

from __future__ import annotations

import argparse
import sys

from gpuutil.torch import _ext


def main(argv: "list[str] | None" = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    module, reason = _ext.load(build=True, verbose=args.verbose)
    if module is None:
        print(f"gpuutil.torch.build: {reason}", file=sys.stderr)
        return 1
    print(_ext.build_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
