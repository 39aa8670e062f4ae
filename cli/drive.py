"""``blksim drive import | list | show``: DiskSim import and a look at drive presets.

`add_drive_commands(subparsers)` adds the ``drive`` command to blksim's parser and
`handle(args)` runs it. Errors are raised as `DeviceError` / `DiskSimError` (both
`ValueError`s) for the caller to print as one line with exit status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from blksim.disk_models.base import DeviceError


def add_drive_commands(subparsers) -> None:
    """Add ``drive import``, ``drive list`` and ``drive show`` to an argparse subparsers object."""
    p = subparsers.add_parser(
        "drive", help="import DiskSim drive descriptions; list and show drive presets",
        description="Import a DiskSim 4.0 drive description as a blksim preset, list the "
                    "presets, or describe one.")
    sub = p.add_subparsers(dest="drive_command", metavar="ACTION", required=True)
    pi = sub.add_parser(
        "import", help="convert X.diskspecs (+ the .model and .seek it refers to) to TOML",
        description="Read a DiskSim 4.0 X.diskspecs file and write a blksim drive TOML. "
                    "Parameters blksim does not use are listed on stderr, one per line. "
                    "Instead of a path, the name of a drive of DiskSim's validation set, "
                    "which ships with blksim (atlas10k, atlas_III, barracuda, cheetah4LP, "
                    "cheetah9LP, dec_rz26, hp_c2247a, hp_c2490a, hp_c3323a, ibm18es), imports "
                    "the description and bus times that drive's validation run uses (for "
                    "hp_c3323a, hp_c3323a_validate.diskspecs), as its preset was.")
    pi.add_argument("diskspecs", metavar="PATH.diskspecs|NAME")
    g = pi.add_mutually_exclusive_group()
    g.add_argument("--out", metavar="FILE.toml", help="where to write (default: ./NAME.toml)")
    g.add_argument("--name", help="preset name; writes disk_models/presets/NAME.toml")
    sub.add_parser("list", help="list the drive presets",
                   description="One line per preset: name, rpm, capacity, zones, cache, source; "
                               "then the flash presets ([device] flash = NAME): interface, "
                               "cells, capacity, power-loss protection, what the drive is.")
    ps = sub.add_parser("show", help="describe a preset or a drive TOML file",
                        description="Capacity, geometry, zones, seek, overheads, cache, queue.")
    ps.add_argument("drive", metavar="NAME|PATH")


def handle(args, out=None, err=None) -> int:
    """Run the ``drive`` action in ``args``; return the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    if args.drive_command == "import":
        return _import(args, out, err)
    if args.drive_command == "list":
        return _list(out)
    return _show(args.drive, out)


def _import(args, out, err) -> int:
    from blksim.disk_models.disksim.importer import import_diskspecs
    from blksim.disk_models.disksim.tomlout import to_toml, write_atomically
    from blksim.disk_models.presets import PRESET_DIR

    src, parv = _diskspecs_source(args.diskspecs)
    name = args.name or (Path(args.out).stem if args.out else src.stem)
    if args.name and ("/" in name or "\\" in name or not name):
        raise DeviceError(f"--name: expected a plain preset name, found {name!r}")
    drive, warnings = import_diskspecs(src, name=name, parv=parv)
    dest = Path(args.out) if args.out else (PRESET_DIR / f"{name}.toml" if args.name
                                            else Path(f"{name}.toml"))
    if not dest.parent.is_dir():
        raise DeviceError(f"--out: no such directory: {dest.parent}")
    write_atomically(dest, to_toml(drive, warnings, strip_dir=str(src.parent)))
    for w in warnings:
        print(f"warning: {w}", file=err)
    print(f"wrote {dest} ({len(warnings)} warnings)", file=out)
    return 0


def _diskspecs_source(text: str) -> tuple:
    """The .diskspecs file ``text`` names, and the .parv to take bus times from (None for
    a file of the user's): a path, or the name of a shipped validation drive."""
    from blksim.disk_models.disksim import validation_set

    path = Path(text)
    if path.exists() or "/" in text or "\\" in text or text.endswith(".diskspecs"):
        return path, None
    if text not in validation_set.DRIVES:
        raise DeviceError(f"{text}: no such file, and not a drive of the shipped DiskSim "
                          f"validation set; valid: {', '.join(validation_set.DRIVES)}")
    return validation_set.drive_files(validation_set.shipped_folder(), text)


def _list(out) -> int:
    from blksim.disk_models.presets import list_presets, load_preset

    rows = [("name", "rpm", "capacity GB", "zones", "cache", "source")]
    for n in list_presets():
        s = load_preset(n)
        src = s.source[0] if s.source else ""
        rows.append((n, f"{s.rpm:g}", f"{s.capacity * 512 / 1e9:.2f}", str(len(s.zones)),
                     "yes" if s.cache_params["enabled"] else "no",
                     src if len(src) <= 60 else src[:57] + "..."))
    _table(rows, out)
    _list_flash(out)
    return 0


def _list_flash(out) -> None:
    """The flash presets, after a blank line: the keys of their files (docs/flash.md)."""
    from blksim.disk_models.flash_presets import list_flash_presets, load_flash_preset

    rows = [("flash preset", "interface", "cells", "capacity GB", "PLP", "drive")]
    for n in list_flash_presets():
        t = load_flash_preset(n)
        rows.append((n, t.get("interface", "nvme"), t.get("nand", {}).get("cell", "?"),
                     f"{t.get('capacity', 0) / 1e9:.0f}", "yes" if t.get("plp") else "no",
                     t.get("description", "")))
    print(file=out)
    _table(rows, out)


def _table(rows, out) -> None:
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip(), file=out)


def _show(which: str, out) -> int:
    from blksim.disk_models.presets import load_drive
    from blksim.disk_models.seek import make_seek

    s = load_drive(which)
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"{s.name}: {s.description}" if s.description else s.name)
    for src in s.source:
        p(f"  source: {src}")
    p(f"capacity    {s.capacity} sectors ({s.capacity * 512 / 1e9:.3f} GB)"
      + (f"; the zones lay out {s.zoned_capacity}" if s.zoned_capacity != s.capacity else ""))
    p(f"rpm         {s.rpm:g} ({60e3 / s.rpm:.3f} ms per revolution)")
    p(f"heads       {s.heads}")
    p(f"cylinders   {s.cylinders}")
    if s.layout is not None:
        p(f"layout      DiskSim g1: sparing {s.layout.sparing}"
          + (f" (range {s.layout.range_cylinders} cylinders)"
             if s.layout.sparing == "sectors_per_range" else "")
          + f", mapping {s.layout.mapping}")
    else:
        p("layout      plain (no spares; skews cumulative across zones)")
    rows = [("zone", "cylinders", "sectors/track", "track skew", "cyl skew")]
    if s.layout is not None:
        rows[0] += ("offset", "empty", "spares", "slips", "defects")
    for i, z in enumerate(s.zones):
        ts = s.track_skew_sectors if z.track_skew_sectors is None else z.track_skew_sectors
        cs = s.cylinder_skew_sectors if z.cylinder_skew_sectors is None else z.cylinder_skew_sectors
        r = (str(i), f"{z.first_cyl}-{z.last_cyl}", str(z.sectors_per_track), str(ts), str(cs))
        if s.layout is not None:
            r += (str(z.first_block_offset_sectors), str(z.empty_sectors_at_front),
                  str(z.spares), str(len(z.slips)), str(len(z.defects)))
        rows.append(r)
    _table(rows, out)
    sk = s.seek
    model = make_seek(s)
    if sk.form == "curve":
        p(f"seek        curve: single {sk.single_cyl_ms} / avg {sk.avg_ms} / full stroke "
          f"{sk.full_stroke_ms} ms")
    elif sk.form == "table":
        p(f"seek        table of {len(sk.points)} measured points (linear interpolation)")
    else:
        p(f"seek        hpl: {sk.sqrt_const_ms} + {sk.sqrt_mult_ms}*sqrt(d) below "
          f"{sk.boundary_cyl} cylinders, {sk.linear_const_ms} + {sk.linear_mult_ms}*d beyond"
          + (", first ten measured" if sk.first_ten_ms else ""))
    dists = [1, 2, 10, 100, s.cylinders // 3, s.cylinders - 1]
    p("            " + ", ".join(f"{d} cyl {model.time(d) * 1e3:.3f} ms"
                                  for d in sorted(set(x for x in dists if x >= 1))))
    p(f"head switch {s.head_switch_ms} ms")
    p(f"settle      {s.write_settle_ms} ms added to write positioning")
    bus = "no bus time" if s.bus_mb_per_s == float("inf") else f"{s.bus_mb_per_s:.3f} MB/s"
    p(f"bus         {bus}")
    p(f"overheads   command {s.command_overhead_ms} ms, completion {s.completion_overhead_ms} ms")
    if s.overheads:
        p("            " + ", ".join(f"{k} {v}" for k, v in s.overheads))
    c = s.cache_params
    if c["enabled"]:
        p(f"cache       {c['segments']} segments x {c['segment_size_sectors']} sectors, "
          f"read-ahead {c['read_ahead_min_sectors']}..{c['read_ahead_max_sectors']} sectors, "
          f"fast write level {c['fast_write_level']}")
    else:
        p("cache       none")
    p(f"queue       depth {s.queue_depth}, policy {s.queue_policy}")
    return 0
