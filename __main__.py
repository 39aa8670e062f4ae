"""``python -m blksim``: the same as the ``blksim`` command."""

import sys

from blksim.sim.cli import main

sys.exit(main())
