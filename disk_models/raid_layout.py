"""Where a RAID array's logical blocks live on its members, and which member I/Os a read
or a write costs: RAID 0, 1, 10, 5 and 6 (left-symmetric), healthy or with one member
failed.

The array is cut into strips of ``strip`` sectors (the stripe unit); a stripe is one
strip on every member at the same offset (a "row"). Layouts:

* RAID 0: data strip ``k`` on member ``k mod n``, row ``k div n``.
* RAID 1: every member holds every block (n copies).
* RAID 10: members paired (0-1, 2-3, ...); data strips striped over the pairs as in
  RAID 0, each on both members of its pair.
* RAID 5, left-symmetric (Linux md's default, ``ALGORITHM_LEFT_SYMMETRIC`` in
  drivers/md/raid5.c, and the usual hardware layout): in row ``r`` parity is on member
  ``n - 1 - (r mod n)``, and the row's data strips follow it round the members, so
  consecutive strips land on consecutive members.
* RAID 6, left-symmetric (``raid5_compute_sector`` in drivers/md/raid5.c, level 6,
  ``ALGORITHM_LEFT_SYMMETRIC``, Linux 6.6, the same since RAID 6 joined raid5.c in
  2.6.30): P on member ``n - 1 - (r mod n)`` as RAID 5's parity, Q on the member after it
  (``(P + 1) mod n``), and data strip ``d`` of the row on ``(P + 2 + d) mod n``: n - 2 data
  strips a row, both parities rotating.

Writes to RAID 5 and 6 (`plan_write`): a row whose data strips are all written whole
needs no read (a full-stripe write: data and new parity, P and Q for RAID 6). Otherwise
the parity of the sectors written is updated either by read-modify-write (read the old
data being replaced and the old parity, P and Q for RAID 6, write the new data and
parity) or by reconstruct-write (read the row's data that is not being written, write the
new data and parity), whichever reads fewer member I/Os (Chen et al., "RAID:
High-Performance, Reliable Secondary Storage", ACM Computing Surveys 26(2), 1994); a tie
goes to read-modify-write, which touches fewer members. Member I/Os are counted per strip:
one I/O per member per row. (Linux md chooses between the two by a like count in
``handle_stripe_dirtying``; for RAID 6 it does read-modify-write since 4.1, where
``setup_conf`` enables it when the CPU's RAID 6 routines can fold a change into a
syndrome, ``xor_syndrome``.)

With one member failed, a RAID 5 or 6 read of a piece on it reads the row's other data
strips and P, the XOR of which gives it back (RAID 6 needs Q only when two are lost, which
is not modelled); a write never reads the failed member: the plan that avoids it is used,
and a failed parity member is simply not written.
"""

from __future__ import annotations

from typing import NamedTuple

LEVELS = ("raid0", "raid1", "raid10", "raid5", "raid6")
#: The levels with parity strips (one a row for RAID 5, two for RAID 6)
PARITY_LEVELS = ("raid5", "raid6")


class RaidLayoutError(ValueError):
    """An array that cannot be built (level, member count, strip size)."""


class MemberIO(NamedTuple):
    """One I/O to a member: ``nr_sectors`` sectors from ``sector`` of member ``member``."""

    member: int
    sector: int
    nr_sectors: int
    write: bool


class RaidLayout:
    """An array of ``members`` members of ``member_sectors`` sectors each, in strips of
    ``strip`` sectors, at ``level``; ``failed`` names a failed member (redundant levels
    only) or is None."""

    def __init__(self, level: str, members: int, member_sectors: int, strip: int = 128,
                 failed: int | None = None) -> None:
        if level not in LEVELS:
            raise RaidLayoutError(f"level: expected one of {', '.join(LEVELS)}, found {level!r}")
        least = {"raid0": 2, "raid1": 2, "raid10": 4, "raid5": 3, "raid6": 4}[level]
        if members < least:
            raise RaidLayoutError(f"level {level} needs at least {least} members, found "
                                  f"{members}")
        if level == "raid10" and members % 2:
            raise RaidLayoutError(f"level raid10 needs an even number of members, found "
                                  f"{members}")
        if strip < 1:
            raise RaidLayoutError(f"strip: expected a positive number of sectors, found {strip}")
        if member_sectors < strip:
            raise RaidLayoutError(f"a member of {member_sectors} sectors is smaller than one "
                                  f"strip ({strip} sectors)")
        if failed is not None:
            if level == "raid0":
                raise RaidLayoutError("raid0 has no redundancy: it cannot run with a failed "
                                      "member")
            if not 0 <= failed < members:
                raise RaidLayoutError(f"failed: expected a member 0..{members - 1}, "
                                      f"found {failed}")
        self.level = level
        self.members = members
        self.strip = strip
        self.failed = failed
        self.rows = member_sectors // strip          # whole strips only
        data_members = {"raid0": members, "raid1": 1, "raid10": members // 2,
                        "raid5": members - 1, "raid6": members - 2}[level]
        self.data_members = data_members
        self.capacity = self.rows * strip * data_members

    # ---------------------------------------------------------------- addresses
    def locate(self, lba: int) -> list:
        """The (member, sector) copies of logical sector ``lba`` (data, not parity)."""
        if not 0 <= lba < self.capacity:
            raise RaidLayoutError(f"sector {lba} is outside the array ({self.capacity} sectors)")
        if self.level == "raid1":
            return [(m, lba) for m in range(self.members)]
        k, within = divmod(lba, self.strip)
        row, col = divmod(k, self.data_members)
        sector = row * self.strip + within
        if self.level == "raid0":
            return [(col, sector)]
        if self.level == "raid10":
            return [(2 * col, sector), (2 * col + 1, sector)]
        return [(self._data_member(row, col), sector)]

    def parity_member(self, row: int) -> int:
        """RAID 5 and 6: the member holding row ``row``'s parity (P), left-symmetric."""
        return self.members - 1 - (row % self.members)

    def q_member(self, row: int) -> int:
        """RAID 6: the member holding row ``row``'s second parity (Q), the one after P."""
        return (self.parity_member(row) + 1) % self.members

    def parity_members(self, row: int) -> tuple:
        """The members holding row ``row``'s parity: (P,) for RAID 5, (P, Q) for RAID 6,
        () for the other levels."""
        if self.level == "raid5":
            return (self.parity_member(row),)
        if self.level == "raid6":
            return (self.parity_member(row), self.q_member(row))
        return ()

    def _data_member(self, row: int, col: int) -> int:
        """RAID 5 and 6: the member of row ``row``'s data strip ``col``, the strips
        following the row's parities round the members."""
        skip = 1 if self.level == "raid5" else 2
        return (self.parity_member(row) + skip + col) % self.members

    def _check(self, lba: int, nr: int) -> None:
        if nr <= 0 or lba < 0 or lba + nr > self.capacity:
            raise RaidLayoutError(f"request {lba}+{nr} is outside the array "
                                  f"({self.capacity} sectors)")

    def _pieces(self, lba: int, nr: int):
        """(row, data column, first sector on the member, sectors) for each strip-sized
        piece of [lba, lba + nr)."""
        self._check(lba, nr)
        strip = self.strip
        while nr:
            k, within = divmod(lba, strip)
            n = min(nr, strip - within)
            row, col = divmod(k, self.data_members)
            yield row, col, row * strip + within, n
            lba += n
            nr -= n

    # ---------------------------------------------------------------- reads
    def plan_read(self, lba: int, nr: int, choose=None) -> list:
        """Member reads for a read of ``nr`` sectors from ``lba``. ``choose(copies)``
        picks one of a mirrored piece's members (default: the first working one); a
        piece on the failed member of a RAID 5 is rebuilt from every other member of
        its row."""
        if self.level == "raid1":
            copies = [m for m in range(self.members) if m != self.failed]
            self._check(lba, nr)
            return [MemberIO(choose(copies) if choose else copies[0], lba, nr, False)]
        out = []
        for row, col, sector, n in self._pieces(lba, nr):
            if self.level == "raid0":
                out.append(MemberIO(col, sector, n, False))
            elif self.level == "raid10":
                copies = [m for m in (2 * col, 2 * col + 1) if m != self.failed]
                out.append(MemberIO(choose(copies) if choose else copies[0], sector, n, False))
            else:
                member = self._data_member(row, col)
                if member != self.failed:
                    out.append(MemberIO(member, sector, n, False))
                else:   # degraded: the row's other data and P, XOR-ed (RAID 6: not Q)
                    q = self.q_member(row) if self.level == "raid6" else None
                    out.extend(MemberIO(m, sector, n, False) for m in range(self.members)
                               if m != member and m != q)
        return out

    # ---------------------------------------------------------------- writes
    def plan_write(self, lba: int, nr: int) -> list:
        """Member I/Os (reads first, then writes) for a write of ``nr`` sectors from
        ``lba``: each copy written for the mirrored levels; for RAID 5 and 6, per row, a
        full-stripe write, read-modify-write or reconstruct-write (module docstring)."""
        pieces = list(self._pieces(lba, nr))
        if self.level == "raid0":
            return [MemberIO(col, sector, n, True) for _, col, sector, n in pieces]
        if self.level == "raid1":
            return [MemberIO(m, lba, nr, True) for m in range(self.members) if m != self.failed]
        if self.level == "raid10":
            return [MemberIO(m, sector, n, True) for _, col, sector, n in pieces
                    for m in (2 * col, 2 * col + 1) if m != self.failed]
        rows: dict = {}
        for row, col, sector, n in pieces:
            rows.setdefault(row, []).append((col, sector, n))
        reads, writes = [], []
        for row, written in rows.items():
            r, w = self._parity_row(row, written)
            reads.extend(r)
            writes.extend(w)
        return reads + writes

    def _parity_row(self, row: int, written: list) -> tuple:
        """(reads, writes) of one row of a RAID 5 or 6 write: ``written`` is its data
        pieces, (data column, first sector on the member, sectors)."""
        strip = self.strip
        base = row * strip
        # the parities kept up to date: P (and Q), but not a failed one
        parities = [p for p in self.parity_members(row) if p != self.failed]
        # the sectors of the row the parity must be recomputed over
        lo = min(sector for _, sector, _ in written)
        hi = max(sector + n for _, sector, n in written)
        members = {col: self._data_member(row, col) for col, _, _ in written}
        full = len(written) == self.data_members and all(n == strip for _, _, n in written)
        writes = [MemberIO(members[col], sector, n, True) for col, sector, n in written
                  if members[col] != self.failed]
        for parity in parities:
            writes.append(MemberIO(parity, lo if not full else base, hi - lo if not full
                                   else strip, True))
        if full or not parities:               # no old parity to fold the change into
            return [], writes

        def read_modify_write():
            # the old data being replaced, and the old parity (P and Q)
            return ([MemberIO(members[col], sector, n, False) for col, sector, n in written]
                    + [MemberIO(parity, lo, hi - lo, False) for parity in parities])

        def reconstruct_write():
            # the row's other data, over the same sectors
            return [MemberIO(self._data_member(row, col), lo, hi - lo, False)
                    for col in range(self.data_members) if col not in members]

        # the plan that reads fewer member I/Os (a tie: read-modify-write); each builds
        # its I/Os only when chosen
        rmw_first = len(written) + len(parities) <= self.data_members - len(written)
        if self.failed is not None:
            # an I/O to the failed member is impossible: its data can only be
            # reconstructed, so the plan that avoids reading it is the one to use
            rmw, rcw = read_modify_write(), reconstruct_write()
            if any(io.member == self.failed for io in rmw):
                return [io for io in rcw if io.member != self.failed], writes
            if any(io.member == self.failed for io in rcw):
                return rmw, writes
            return (rmw if rmw_first else rcw), writes
        return (read_modify_write() if rmw_first else reconstruct_write()), writes
