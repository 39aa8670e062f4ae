"""The ``blksim`` command line and its terminal tables.

Nothing else in blksim imports this package: it sits on top of the engine
(`blksim.sim`), the lower rooms and the studies in `blksim.experiments`.
``main`` is the console script's entry point.
"""

from blksim.cli.app import main

__all__ = ["main"]
