"""``python -m gpuutil``: the same command line as the ``gpuutil`` script."""

import sys

from gpuutil.cli import main

sys.exit(main())
