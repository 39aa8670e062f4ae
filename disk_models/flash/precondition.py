"""Start states of a flash drive, set up directly instead of simulating the fill.

- ``fresh``: every block erased, nothing mapped (the FTL as built).
- ``full``: every logical page written once, in order: each plane's logical pages
  (the ones CWDP allocation sends it, in increasing order) fill its TLC blocks one
  after the other; the last, partly written block is the host's open block.
- ``steady``: full, then overwritten at random until garbage collection is in its
  steady state. The per-block valid counts of that state are set up directly:

  1. start from the large-block limit of greedy collection under uniform random
     writes: the blocks in circulation (all TLC blocks but the free-block reserve,
     the foreground threshold) have ages spread evenly between 0 and the victims' age,
     and a block of age t keeps a fraction ``exp(-t / U)`` of its pages valid (each
     page survives each host write with probability 1 - 1/U, U the plane's logical
     pages), down to the victim fraction u* of `gc_policy.victim_fraction`; so block j
     of M holds ``pages_per_block x u*^((j + 1/2) / M)`` valid pages;
  2. relax it with the greedy process on valid counts only, all planes at once in
     numpy arrays, for one turn of the plane's blocks: each step the block with the
     fewest valid pages is collected and rewritten full (its own valid pages plus
     ``pages_per_block - v`` host writes), and the host writes invalidate pages of
     the other blocks: each overwrites a uniformly drawn valid page of the plane (the
     pages drawn at once per step, so a page may be drawn twice and is then counted
     once); the new block absorbs the difference so that the plane keeps exactly its
     logical pages. This adds
     the finite block size's spread that step 1 leaves out, and sets each block's age;
  3. lay the map out: each plane's logical pages go to the first ``v`` pages of its
     blocks (the rest of each block programmed and invalid) in a random affine order
     (slot j holds the plane's ``a (j + s) mod n``-th page, a coprime to n, one for the
     drive, s random per plane: spread over the blocks like a shuffle at a fraction of
     its cost); every logical page is mapped once and the counts match.

Neither ``full``'s layout nor ``steady``'s is stored: both are a function
(`blksim.disk_models.flash.startlayout.StartLayout`) that the FTL's maps read for
every entry not written since the start.

  The erase counts stay 0 (wear figures count from the start of the run), the SLC
  cache starts empty, and the free pools hold the foreground threshold's blocks.
  The steady state is greedy's under uniform traffic whatever ``gc_policy`` the FTL
  uses and whatever the workload will be (blksim's choice; MQSim instead derives its
  steady state from the workload's address distribution, uniform or hot/cold,
  ``FTL::Perform_precondition`` in ``src/ssd/FTL.cpp``).
"""

from __future__ import annotations

import gc
import math
from array import array

import numpy as np

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash import gc_policy as gcp
from blksim.disk_models.flash.startlayout import StartLayout

START_STATES = ("fresh", "full", "steady")
#: Relaxation length of the steady state, in turns of a plane's blocks in circulation.
RELAX_TURNS = 1
#: Blocks per plane relaxed at most (step 2 on a sample: `sampled_valid_counts`).
RELAX_SAMPLE_BLOCKS = 256


def precondition(ftl, state: str, seed: int) -> None:
    """Put a freshly built `PageMappingFtl` into ``state`` (module docstring)."""
    if state not in START_STATES:
        raise DeviceError(f"start state {state!r} is not supported; valid: "
                          f"{', '.join(START_STATES)}")
    if ftl.host_pages_written or ftl.start_state != "fresh":
        raise ValueError("precondition needs a freshly built FTL")
    ftl.start_state = state
    if state == "fresh":
        return
    rng = np.random.default_rng(seed)
    if state == "full":
        _full(ftl)
    else:
        _steady(ftl, rng)
    gc.collect()        # PyPy frees numpy temporaries late: before the run's own memory


def plane_lpns(ftl, plane_index: int) -> np.ndarray:
    """The logical pages CWDP allocation sends to the plane at CWDP position
    ``plane_index`` (also where a sequential fill puts them under dynamic allocation)."""
    return np.arange(plane_index, ftl.logical_pages, ftl.planes, dtype=np.int64)


def _full(ftl) -> None:
    g = ftl.geometry
    ppb = g.pages_per_block
    planes = ftl.planes
    # the k-th lpn of the plane at CWDP position i (lpn i + planes k) goes to the
    # plane's k-th page: its blocks are the first of its fresh pool, in order
    counts = np.zeros(g.blocks, dtype=np.int64)
    for i, plane in enumerate(ftl.cwdp):
        n = len(range(i, ftl.logical_pages, planes))
        nblocks = -(-n // ppb)
        if not nblocks:
            continue
        blocks = _take_first(ftl, plane, nblocks)
        for j, b in enumerate(blocks):
            written = counts[b] = min(ppb, n - j * ppb)
            ftl.valid[b] = ftl.wp[b] = written
            # the order of the fill, on the host-page clock, ending at 0
            ftl.written_at[b] = i + planes * (j * ppb + written - 1) - ftl.logical_pages
            ftl.state[b] = gcp.FULL if written == ppb else gcp.OPEN
            if written < ppb:
                ftl.open[0][plane] = b
        ftl.plane_valid[plane] = n
    _attach(ftl, StartLayout(g, ftl.logical_pages, ftl.cwdp, counts, 1, [0] * planes))


def _take_first(ftl, plane: int, nblocks: int) -> list:
    """The first ``nblocks`` blocks of the plane's fresh pool (in block order)."""
    pool = ftl.free_pool[plane]
    blocks = [pool.popleft() for _ in range(nblocks)]
    first = ftl.geometry.first_block_of_plane(plane)
    if blocks != list(range(first, first + nblocks)):
        raise AssertionError(f"plane {plane}: the fresh pool is not in block order")
    return blocks


def _attach(ftl, layout: StartLayout) -> None:
    """Make ``layout`` the base of both maps: read through it until written."""
    ftl.l2p.set_base(layout.forward, layout.forward_chunk)
    ftl.p2l.set_base(layout.reverse, layout.reverse_chunk)


def steady_valid_counts(ppb: int, blocks: int, lpns: np.ndarray, rng,
                        turns: int = RELAX_TURNS) -> tuple[np.ndarray, np.ndarray]:
    """(valid counts, last rewrite step) of ``blocks`` blocks per plane for planes that
    hold ``lpns[p]`` logical pages each (steps 1 and 2 of the module docstring). The
    counts of plane p sum to ``lpns[p]``; steps are <= 0 (0 = the last)."""
    planes = len(lpns)
    up = np.asarray(lpns, dtype=np.int64)
    # 1. the large-block limit: ages spread evenly, valid fraction exp(-age / U)
    fractions = np.empty((planes, blocks))
    for p in range(planes):
        u_star = gcp.victim_fraction(blocks * ppb / up[p])
        fractions[p] = u_star ** ((np.arange(blocks) + 0.5) / blocks)
    v = np.rint(fractions * ppb).astype(np.int64)
    _fix_totals(v, up, ppb, rng)
    # the oldest block (fewest valid) was rewritten first
    last = -np.argsort(np.argsort(-v, axis=1, kind="stable"), axis=1).astype(np.int64) - 1
    last -= turns * blocks
    # 2. relax with the greedy process on counts
    rows = np.arange(planes)
    offsets = np.cumsum(up) - up            # where each plane's pages start, flattened
    steps = turns * blocks
    for step in range(-steps + 1, 1):
        if step % 8 == 0:
            gc.collect()        # PyPy: the steps' numpy temporaries, freed late otherwise
        victim = v.argmin(axis=1)
        vmin = v[rows, victim]
        host = ppb - vmin
        # each host write overwrites a uniformly drawn valid page of its plane: draw
        # the pages, find their blocks on the flattened running count (uniform draws:
        # numpy's draws with array parameters, binomial included, abort PyPy 7.3's
        # cpyext when their temporaries are freed)
        plane_of_draw = np.repeat(rows, host)
        drawn = offsets[plane_of_draw] + (rng.random(len(plane_of_draw))
                                          * up[plane_of_draw]).astype(np.int64)
        hit = np.searchsorted(np.cumsum(v), drawn, side="right")
        inv = np.bincount(hit, minlength=v.size).reshape(v.shape)
        np.minimum(inv, v, out=inv)
        v -= inv
        v[rows, victim] = ppb
        excess = v.sum(axis=1) - up
        v[rows, victim] = np.clip(ppb - excess, 0, ppb)
        last[rows, victim] = step
    _fix_totals(v, up, ppb, rng)
    return v, last


def sampled_valid_counts(ppb: int, blocks: int, lpns: np.ndarray, rng,
                         sample: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`steady_valid_counts` for planes of ``blocks`` blocks, relaxed on groups of at
    most ``sample`` (`RELAX_SAMPLE_BLOCKS`) blocks.

    The valid counts' distribution in greedy's steady state depends on the block size
    and on alpha (physical pages in circulation per logical page), not on how many
    blocks share them, so a plane of B blocks is put together from G = ceil(B /
    sample) independently relaxed groups of ``ceil(B / G)`` blocks, each holding its
    share of the plane's pages (alpha kept). ``planes x G`` groups at most are relaxed
    (each one as a plane of `steady_valid_counts`; with fewer groups than that, plane
    p takes groups ``p, p + 1, ..`` round the list), then the extra blocks beyond B
    are dropped at random and each plane's total is made exact by +-1 steps
    (`_fix_totals`). A group's step is G steps of the plane: group g's block rewritten
    at its step t was rewritten at ``G t - g``. With B <= ``sample`` this is
    `steady_valid_counts` itself (G = 1, the same draws)."""
    sample = RELAX_SAMPLE_BLOCKS if sample is None else sample
    groups = -(-blocks // sample)
    if groups == 1:
        return steady_valid_counts(ppb, blocks, lpns, rng)
    per = -(-blocks // groups)
    up = np.asarray(lpns, dtype=np.int64)
    planes = len(up)
    rows = max(planes, groups)
    share = np.full(rows, int(round(float(up.mean()) * per / blocks)), dtype=np.int64)
    gv, glast = steady_valid_counts(ppb, per, share, rng)
    v = np.empty((planes, blocks), dtype=np.int64)
    last = np.empty((planes, blocks), dtype=np.int64)
    for p in range(planes):
        take = [(p + g) % rows for g in range(groups)]
        pv = gv[take].reshape(-1)
        plast = (glast[take] * groups - np.arange(groups)[:, None]).reshape(-1)
        keep = np.sort(rng.permutation(groups * per)[:blocks])
        v[p] = pv[keep]
        last[p] = plast[keep]
    _fix_totals(v, up, ppb, rng)
    return v, last


def _fix_totals(v: np.ndarray, up: np.ndarray, ppb: int, rng) -> None:
    """Make each row of ``v`` sum to ``up`` by +-1 steps on random blocks with room."""
    for p in range(len(up)):
        row = v[p]
        diff = int(up[p] - row.sum())
        while diff:
            ok = np.flatnonzero(row < ppb) if diff > 0 else np.flatnonzero(row > 0)
            pick = rng.permutation(ok)[:abs(diff)]
            row[pick] += 1 if diff > 0 else -1
            diff = int(up[p] - row.sum())


def _coprime_multiplier(sizes, rng) -> int:
    """A random multiplier coprime to every size in ``sizes``."""
    top = min(sizes)
    if top <= 2:
        return 1
    while True:
        a = int(rng.integers(1, top))
        if all(math.gcd(a, n) == 1 for n in sizes):
            return a


def _steady(ftl, rng) -> None:
    g = ftl.geometry
    ppb = g.pages_per_block
    planes = ftl.planes
    circulating = ftl.tlc_blocks_per_plane - ftl.fg_threshold
    rows, extra = divmod(ftl.logical_pages, planes)   # CWDP positions < extra get one more
    counts = np.array([rows + (i < extra) for i in range(planes)], dtype=np.int64)
    v, last = sampled_valid_counts(ppb, circulating, counts, rng)
    gc.collect()        # PyPy: the relaxation's numpy temporaries, before the layout
    # host-page clock of each block's youngest data: one step ~ one block of host
    # writes in every plane
    written_at = last * (ppb * planes)
    # The order: slot j of a plane (its j-th valid page, in block order) holds the
    # plane's k-th lpn (lpn = i + planes k) with k = a (j + s) mod n: one multiplier a
    # coprime to the sizes for the drive, a random rotation s per plane
    # (`startlayout`: the map is that function, not stored)
    a = _coprime_multiplier(sorted({int(n) for n in counts}), rng)
    block_counts = np.zeros(g.blocks, dtype=np.int64)
    shifts = []
    for i, plane in enumerate(ftl.cwdp):
        n = int(counts[i])
        shifts.append(int(rng.integers(0, n)))
        blocks = _take_first(ftl, plane, circulating)
        # the valid slots: the first v[b] pages of block b (the rest programmed, invalid)
        block_counts[blocks[0]:blocks[-1] + 1] = v[i]
        for blk, count, at in zip(blocks, array("q", v[i].tobytes()),
                                  array("q", written_at[i].tobytes())):
            ftl.valid[blk] = count
            ftl.wp[blk] = ppb
            ftl.state[blk] = gcp.FULL
            ftl.written_at[blk] = at
        ftl.plane_valid[plane] = n
    _attach(ftl, StartLayout(g, ftl.logical_pages, ftl.cwdp, block_counts, a, shifts))
