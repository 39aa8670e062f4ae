"""Garbage collection: when to collect, which block to collect, and what to expect.

**When.** Each plane keeps a pool of erased ("free") blocks. Garbage collection runs
in the foreground when the pool falls below the *foreground threshold* (MQSim's
``GC_Exec_Threshold``, a fraction of the plane's blocks, whose default is 0.05:
MQSim's default, ``src/exec/Device_Parameter_Set.cpp``), and in the background, when
the drive is idle, below the higher *background threshold*. blksim's defaults are
its own choice: 1 % of the plane's blocks for the foreground (at least 2 blocks:
the next block the host opens and one held back for the collector) and twice that
for the background (at least one more block than the foreground).

**Which** (the victim), among the plane's closed blocks of the kind asked (TLC
blocks for collection, SLC blocks for folding); an open block is never a victim:

- ``greedy``: the block with the fewest valid pages, whose collection frees the
  most space for the least copying.
- ``cost-benefit``: the block with the largest ``age * (1 - u) / (2 u)``, u its
  fraction of valid pages and age the time since its data was last written
  (Rosenblum & Ousterhout, "The design and implementation of a log-structured file
  system", SOSP 1991 / ACM TOCS 1992, section 3.5; Kawaguchi, Nishioka & Motoda, "A
  flash-memory based file system", USENIX Winter 1995). A block with no valid page
  costs nothing and is taken at once. Age is counted in host pages written, not in
  seconds (blksim's choice: the policy then does not depend on the timing model),
  and a block filled by the collector keeps the age of the youngest data copied
  into it, as LFS keeps the modification time of the live data it moves.
- wear levelling (blksim's choice, the simplest two rules of the survey by Chang,
  Hsieh & Kuo, DAC 2007): between victims the policy cannot tell apart (equal valid
  pages, or equal score), the least-erased block; and when ``wear_limit`` is set and
  the plane's erase counts spread (max - min) beyond it, the least-erased closed
  block is taken whatever its contents ("static" wear levelling: its cold data moves
  and the little-worn block goes back to work).

**What to expect.** Under uniform random writes with greedy collection, the fraction
``u`` of valid pages in the victim solves ``u = exp(-alpha (1 - u))``, alpha the
physical-to-logical ratio T/U of the pages taking part (Xiang & Kurkoski, "An
improved analytical expression for write amplification in NAND flash", ICNC 2012,
arXiv:1110.4245; the same limit as Desnoyers' model of greedy and FIFO cleaning for
large blocks, "Analytic models of SSD write performance", ACM TOS 10(2), 2014), and
the write amplification is ``1 / (1 - u)``. `uniform_greedy_wa` computes it.
"""

from __future__ import annotations

import math

from blksim.disk_models.base import DeviceError

GC_POLICIES = ("greedy", "cost-benefit")

#: Block states, shared with `blksim.disk_models.flash.ftl`.
FREE, OPEN, FULL, ERASING = 0, 1, 2, 3

#: blksim's default foreground threshold, a fraction of a plane's blocks.
DEFAULT_GC_THRESHOLD = 0.01
#: MQSim's default GC_Exec_Threshold, for comparison runs.
MQSIM_GC_THRESHOLD = 0.05


def thresholds(blocks_per_plane: int, gc_threshold: float,
               background_threshold: float | None, where: str) -> tuple[int, int]:
    """(foreground, background) thresholds in free blocks per plane.

    ``gc_threshold`` and ``background_threshold`` are fractions of the plane's blocks
    (None: twice the foreground). Foreground is at least 2 blocks, background at
    least one more than foreground.
    """
    if not isinstance(gc_threshold, (int, float)) or not 0 <= gc_threshold < 0.5:
        raise DeviceError(f"{where}: gc_threshold must be a fraction of a plane's blocks "
                          f"in [0, 0.5), found {gc_threshold!r}")
    fg = max(2, int(gc_threshold * blocks_per_plane))
    if background_threshold is None:
        bg = max(fg + 1, 2 * fg)
    else:
        if not isinstance(background_threshold, (int, float)) or not (
                gc_threshold <= background_threshold < 0.5):
            raise DeviceError(f"{where}: gc_background_threshold must be at least "
                              f"gc_threshold and below 0.5, found {background_threshold!r}")
        bg = max(fg + 1, int(background_threshold * blocks_per_plane))
    return fg, bg


def check_policy(policy: str, where: str) -> str:
    """``policy`` if it is a known victim policy, else a `DeviceError` listing them."""
    if policy not in GC_POLICIES:
        raise DeviceError(f"{where}: gc_policy {policy!r} is not supported; valid: "
                          f"{', '.join(GC_POLICIES)}")
    return policy


def choose_victim(policy: str, lo: int, hi: int, want_slc: int, state, valid, cap, erases,
                  written_at, is_slc, clock: int, wear_limit: int | None) -> int:
    """The victim among blocks ``lo .. hi-1`` (one plane) that are closed (FULL) and of
    the kind asked (``want_slc`` 1 for SLC blocks, 0 for TLC), or -1 if none.

    ``state``, ``valid``, ``cap`` (pages the block holds), ``erases``, ``written_at``
    (host-page clock of its youngest data) and ``is_slc`` are per-block sequences;
    ``clock`` is the host pages written so far.
    """
    best = -1
    best_key = None
    least_worn = -1
    min_erase = max_erase = -1
    greedy = policy == "greedy"
    for b in range(lo, hi):
        if state[b] != FULL or is_slc[b] != want_slc:
            continue
        e = erases[b]
        if least_worn < 0 or e < min_erase:
            least_worn, min_erase = b, e
        if e > max_erase:
            max_erase = e
        v = valid[b]
        if greedy:
            key = (v, e)
        elif v == 0:
            key = (-math.inf, e)
        else:
            u = v / cap[b]
            # largest benefit/cost first: negate it so that the smallest key wins
            key = (-(clock - written_at[b]) * (1.0 - u) / (2.0 * u), e)
        if best_key is None or key < best_key:
            best, best_key = b, key
    if wear_limit is not None and best >= 0 and max_erase - min_erase > wear_limit:
        return least_worn
    return best


def victim_fraction(alpha: float) -> float:
    """The valid fraction of greedy's victims under uniform random writes: the root u in (0, 1) of ``f(u) = u - exp(-alpha (1 - u)) = 0`` for alpha > 1.

    f is concave, f(0) < 0, f(1) = 0 (the trivial root) and f'(1) = 1 - alpha < 0, so
    f is positive just below 1 and crosses zero once in (0, 1): bisection finds it.
    """
    lo, hi = 0.0, 1.0 - 1e-9
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mid - math.exp(-alpha * (1.0 - mid)) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def uniform_greedy_wa(alpha: float) -> float:
    """Write amplification of greedy collection under uniform random single-page
    writes, ``alpha`` = physical pages / logical pages taking part (> 1).

    ``1 / (1 - u)`` with u the root of ``u = exp(-alpha (1 - u))`` (see the module
    docstring for the sources). For alpha = 1.3 it gives 2.37, the value Xiang &
    Kurkoski report (2.36, against 2.35 simulated).
    """
    if alpha <= 1.0:
        raise ValueError(f"alpha must exceed 1, found {alpha!r}")
    return 1.0 / (1.0 - victim_fraction(alpha))
