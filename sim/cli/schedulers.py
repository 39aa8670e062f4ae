"""``blksim schedulers``: every scheduler with its tunables."""

from __future__ import annotations


def cmd_schedulers(_args) -> int:
    """``blksim schedulers``."""
    from blksim.schedulers import SCHEDULERS
    for name, cls in SCHEDULERS.items():
        print(name)
        if not cls.tunables:
            print("    (no tunables)")
        for t in cls.tunables:
            print(f"    queue/iosched/{t.name:18} default {t.default:<6} {t.unit:10} "
                  f"[{t.minimum}..{t.maximum}]  {t.doc}")
    return 0
