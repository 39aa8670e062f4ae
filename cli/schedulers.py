"""``blksim schedulers``: every scheduler with its tunables, built-in and plugin."""

from __future__ import annotations

import sys


def _print_tunables(cls, out) -> None:
    if not cls.tunables:
        print("    (no tunables)", file=out)
    for t in cls.tunables:
        since = f" (from Linux {t.since})" if getattr(t, "since", "") else ""
        print(f"    queue/iosched/{t.name:18} default {t.default:<6} {t.unit:10} "
              f"[{t.minimum}..{t.maximum}]  {t.doc}{since}", file=out)


def cmd_schedulers(_args, out=None, err=None) -> int:
    """``blksim schedulers``: the built-ins, then each installed plugin (a broken plugin is
    one warning line on stderr and does not stop the listing)."""
    from blksim.schedulers import MQ_SCHEDULERS, SCHEDULERS
    from blksim.schedulers.registry import GROUP, plugin_listing
    out = out or sys.stdout
    err = err or sys.stderr
    for name, cls in SCHEDULERS.items():
        print(name, file=out)
        _print_tunables(cls, out)
    for name, cls in MQ_SCHEDULERS.items():
        print(f"{name}  (multi-queue kernels: 5.4 to 6.6)", file=out)
        _print_tunables(cls, out)
    plugins, broken = plugin_listing()
    for name, cls, value in plugins:
        if name in SCHEDULERS or name in MQ_SCHEDULERS:
            print(f"blksim: warning: scheduler plugin {name!r} ({value}) is hidden by the "
                  f"built-in {name}; run it as {value}", file=err)
            continue
        print(f"{name}  (plugin: {value}, entry point group {GROUP})", file=out)
        _print_tunables(cls, out)
    for line in broken:
        print(f"blksim: warning: {line}", file=err)
    return 0
