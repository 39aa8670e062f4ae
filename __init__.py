"""blksim: a discrete-event simulator of Linux block-layer I/O schedulers.

The repository's root is this package. Its rooms:

- ``blksim.sim``: the engine (bios and requests, the block layer, the run loop,
  metrics, configuration); ``blksim.sim.cli`` is the command line.
- ``blksim.schedulers``: the elevators (noop, deadline, anticipatory, cfq, and
  the textbook algorithms) and their registry.
- ``blksim.disk_models``: drive mechanics, on-board cache and queue, presets.
- ``blksim.traces``: trace readers and writers, synthetic workloads.
- ``blksim.experiments``: studies built on the rest (validation, figures).
"""

__version__ = "0.1.0"
