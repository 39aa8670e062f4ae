"""``python -m blksim``: the same as the ``blksim`` command."""

import sys

from blksim.cli import main

sys.exit(main())
