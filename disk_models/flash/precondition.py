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

  The erase counts stay 0 (wear figures count from the start of the run), the SLC
  cache starts empty, and the free pools hold the foreground threshold's blocks.
  The steady state is greedy's under uniform traffic whatever ``gc_policy`` the FTL
  uses and whatever the workload will be (blksim's choice; MQSim instead derives its
  steady state from the workload's address distribution, uniform or hot/cold,
  ``FTL::Perform_precondition`` in ``src/ssd/FTL.cpp``).
"""

from __future__ import annotations

import math

import numpy as np

from blksim.disk_models.base import DeviceError
from blksim.disk_models.flash import gc_policy as gcp
from blksim.disk_models.flash.unitmap import CHUNK

START_STATES = ("fresh", "full", "steady")
#: Relaxation length of the steady state, in turns of a plane's blocks in circulation.
RELAX_TURNS = 1


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


def plane_lpns(ftl, plane_index: int) -> np.ndarray:
    """The logical pages CWDP allocation sends to the plane at CWDP position
    ``plane_index`` (also where a sequential fill puts them under dynamic allocation)."""
    return np.arange(plane_index, ftl.logical_pages, ftl.planes, dtype=np.int64)


def _full(ftl) -> None:
    g = ftl.geometry
    ppb = g.pages_per_block
    planes = ftl.planes
    # the k-th lpn of the plane at CWDP position i (lpn i + planes k) goes to the
    # plane's k-th page: its blocks are the first of its fresh pool, in order, so
    # page k is at first_ppn[i] + k
    first_ppn = np.zeros(planes, dtype=np.int64)
    for i, plane in enumerate(ftl.cwdp):
        n = len(range(i, ftl.logical_pages, planes))
        nblocks = -(-n // ppb)
        if not nblocks:
            continue
        pool = ftl.free_pool[plane]
        blocks = [pool.popleft() for _ in range(nblocks)]
        if blocks != list(range(blocks[0], blocks[0] + nblocks)):
            raise AssertionError(f"plane {plane}: the fresh pool is not in block order")
        first_ppn[i] = blocks[0] * ppb
        ftl.p2l.put(blocks[0] * ppb, np.arange(i, ftl.logical_pages, planes, dtype=np.int64))
        for j, b in enumerate(blocks):
            written = min(ppb, n - j * ppb)
            ftl.valid[b] = ftl.wp[b] = written
            # the order of the fill, on the host-page clock, ending at 0
            ftl.written_at[b] = i + planes * (j * ppb + written - 1) - ftl.logical_pages
            ftl.state[b] = gcp.FULL if written == ppb else gcp.OPEN
            if written < ppb:
                ftl.open[0][plane] = b
        ftl.plane_valid[plane] = n
    # l2p, a chunk at a time in preallocated scratch arrays (numpy temporaries are
    # freed late on PyPy, and would add up to the map's size)
    j = np.arange(CHUNK, dtype=np.int64)
    lpn, i, k = np.empty_like(j), np.empty_like(j), np.empty_like(j)
    base = first_ppn.astype(ftl.l2p.dtype)
    for c in range(len(ftl.l2p.chunks)):
        np.add(j, c * CHUNK, out=lpn)
        np.floor_divide(lpn, planes, out=k)
        np.subtract(lpn, np.multiply(k, planes, out=i), out=i)      # lpn mod planes
        view = ftl.l2p.view(c)
        np.take(base, i, out=view)
        np.add(view, k, out=view, casting="unsafe")
    tail = ftl.logical_pages - (len(ftl.l2p.chunks) - 1) * CHUNK
    ftl.l2p.view(len(ftl.l2p.chunks) - 1)[tail:] = -1      # beyond the logical pages


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


#: Planes laid out together (their columns of the map written in one pass).
_GROUP = 16


def _steady(ftl, rng) -> None:
    g = ftl.geometry
    ppb = g.pages_per_block
    planes = ftl.planes
    circulating = ftl.tlc_blocks_per_plane - ftl.fg_threshold
    rows, extra = divmod(ftl.logical_pages, planes)   # CWDP positions < extra get one more
    counts = np.array([rows + (i < extra) for i in range(planes)], dtype=np.int64)
    v, last = steady_valid_counts(ppb, circulating, counts, rng)
    # host-page clock of each block's youngest data: one step ~ one block of host
    # writes in every plane
    written_at = last * (ppb * planes)
    columns_out = _Columns(ftl.l2p, rows, planes)
    # The order: slot j of a plane (its j-th valid page, in block order) holds the
    # plane's k-th lpn (lpn = i + planes k) with k = a (j + s) mod n: one multiplier a
    # coprime to the sizes for the drive, a random rotation s per plane. The sequences
    # below are shared by the planes of each size n, so each plane costs a few passes.
    sizes = sorted({int(n) for n in counts})
    a = _coprime_multiplier(sizes, rng)
    k_of = {}        # n -> (planes * (a j mod n)), the lpn offsets in slot order
    j_of = {}        # n -> (a^-1 k mod n), the slot of the k-th lpn before the rotation
    for n in sizes:
        ar = np.arange(n, dtype=np.int64)
        k_of[n] = (a * ar % n) * planes
        j_of[n] = pow(a, -1, n) * ar % n if n > 1 else ar
    ar = np.arange(max(sizes), dtype=np.int64)
    for g0 in range(0, planes, _GROUP):
        group = range(g0, min(g0 + _GROUP, planes))
        columns = np.empty((rows, len(group)), dtype=ftl.l2p.dtype)
        for c, i in enumerate(group):
            plane = ftl.cwdp[i]
            n = int(counts[i])
            pool = ftl.free_pool[plane]
            blocks = [pool.popleft() for _ in range(circulating)]
            vv = v[i]
            # the valid slots in block order: the first vv[j] pages of block j
            slots = np.repeat(np.asarray(blocks, dtype=np.int64) * ppb - (np.cumsum(vv) - vv), vv)
            slots += ar[:n]
            shift = int(rng.integers(0, n))
            lpn_of_slot = k_of[n] + i
            # slot j holds lpn_of_slot[(j + shift) mod n] (the other pages of the
            # blocks stay -1: programmed, invalid)
            ftl.p2l.scatter(slots[:n - shift], lpn_of_slot[shift:])
            ftl.p2l.scatter(slots[n - shift:], lpn_of_slot[:shift])
            # and lpn k sits in slot (j_of[k] - shift) mod n
            rotated = np.concatenate((slots[n - shift:], slots[:n - shift]))
            slot_of_k = rotated[j_of[n]]
            columns[:, c] = slot_of_k[:rows]
            if n > rows:
                ftl.l2p[rows * planes + i] = int(slot_of_k[rows])
            for blk, count, at in zip(blocks, vv.tolist(), written_at[i].tolist()):
                ftl.valid[blk] = count
                ftl.wp[blk] = ppb
                ftl.state[blk] = gcp.FULL
                ftl.written_at[blk] = at
            ftl.plane_valid[plane] = n
        columns_out.put(g0, columns)
    columns_out.finish()


class _Columns:
    """Writes the steady state's l2p a group of planes (columns) at a time: lpn
    ``r * planes + i`` is row r, column i. When a chunk holds whole rows (``planes``
    divides `unitmap.CHUNK`, as for power-of-two plane counts) each chunk's rows are
    written in place; otherwise the rows are gathered in one temporary array, put
    into the map at the end (twice the map's memory while it is built)."""

    #: Gather whatever the plane count (tests compare the two ways).
    gather_always = False

    def __init__(self, l2p, rows: int, planes: int) -> None:
        self.l2p, self.rows, self.planes = l2p, rows, planes
        self.in_place = CHUNK % planes == 0 and not self.gather_always
        self.views: list = []
        if self.in_place:
            per = CHUNK // planes
            self.views = [l2p.view(c).reshape(per, planes)
                          for c in range(-(-rows // per))]
        else:
            self.by_row = np.full((rows, planes), -1, dtype=l2p.dtype)

    def put(self, g0: int, columns: np.ndarray) -> None:
        """Columns ``g0 ..`` of every row."""
        g1 = g0 + columns.shape[1]
        if not self.in_place:
            self.by_row[:, g0:g1] = columns
            return
        per = CHUNK // self.planes
        for c, view in enumerate(self.views):
            r0 = c * per
            r1 = min(self.rows, r0 + per)
            view[:r1 - r0, g0:g1] = columns[r0:r1]

    def finish(self) -> None:
        """Put the gathered rows into the map (the other case has nothing left)."""
        if not self.in_place:
            self.l2p.put(0, self.by_row.reshape(-1))
            del self.by_row
