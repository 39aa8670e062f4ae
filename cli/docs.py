"""``blksim docs`` and ``blksim examples``: where the installed documentation and
example configurations are, and a copy of the examples to edit.

Both folders install with the package (``blksim/docs``, ``blksim/examples``), so an
installed user, who has no source tree, reads the same pages and runs the same
examples as someone working in a clone.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from blksim.cli.common import UserError


def package_folder(name: str) -> Path:
    """The installed folder ``name`` (``docs`` or ``examples``) of the blksim package."""
    import blksim
    # pip installs the package as plain files, so its folders are real folders
    folder = Path(blksim.__file__).parent / name
    if not folder.is_dir():
        raise UserError(f"this blksim installation has no {name}/ folder (looked in {folder})")
    return folder


def docs_epilog() -> str:
    """The ``--help`` epilog: where the documentation is."""
    try:
        where = str(package_folder("docs"))
    except UserError:
        where = "docs/ of the source distribution"
    return (f"Documentation: {where} (`blksim docs` lists the pages, `blksim docs NAME` prints "
            f"one). Example configurations: `blksim examples`.")


def _title(path: Path, comment: str | None) -> str:
    """A file's one-line description: a Markdown page's first heading, or a
    configuration's first comment line."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = line.strip()
            if comment is None and text.startswith("#"):
                return text.lstrip("#").strip()
            if comment is not None:
                if text.startswith(comment):
                    return text.lstrip(comment).strip()
                if text:
                    break
    return ""


def add_docs_commands(subparsers) -> None:
    """Add ``docs`` and ``examples`` to the CLI's subparsers."""
    p = subparsers.add_parser(
        "docs", help="where the documentation is; print one page",
        description="Without NAME: the folder of the installed documentation and its pages, "
                    "one line each. With NAME (e.g. configuration, api, plugins): print that "
                    "page (Markdown) to standard output.")
    p.add_argument("name", nargs="?", metavar="NAME", help="a page, with or without .md")

    p = subparsers.add_parser(
        "examples", help="the example configurations; copy them to edit",
        description="Without --copy: the folder of the installed example configurations, fio "
                    "job files and traces, one line each. --copy DIR copies them into DIR "
                    "(created if missing; existing files are never overwritten), ready for "
                    "`blksim run DIR/mixed.toml`.")
    p.add_argument("--copy", metavar="DIR", help="copy every example into DIR")


def cmd_docs(args, out=None) -> int:
    """``blksim docs [NAME]``."""
    out = out or sys.stdout
    folder = package_folder("docs")
    pages = sorted(folder.glob("*.md"))
    if args.name:
        stem = args.name[:-3] if args.name.endswith(".md") else args.name
        page = folder / f"{stem}.md"
        if not page.is_file():
            valid = ", ".join(p.stem for p in pages)
            raise UserError(f"docs {args.name}: no such page; valid: {valid}")
        out.write(page.read_text(encoding="utf-8"))
        return 0
    out.write(f"Documentation in {folder}:\n\n")
    width = max(len(p.stem) for p in pages)
    for p in pages:
        out.write(f"  {p.stem:{width}}  {_title(p, None)}\n")
    out.write("\n`blksim docs NAME` prints a page.\n")
    return 0


def _example_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts
                  and not any(part.endswith(".egg-info") for part in p.parts))


def cmd_examples(args, out=None) -> int:
    """``blksim examples [--copy DIR]``."""
    out = out or sys.stdout
    folder = package_folder("examples")
    files = _example_files(folder)
    if args.copy:
        return _copy_examples(folder, files, Path(args.copy), out)
    out.write(f"Examples in {folder}:\n\n")
    top = [p for p in files if p.parent == folder]
    width = max(len(p.name) for p in top)
    for p in top:
        comment = ";" if p.suffix == ".fio" else "#" if p.suffix == ".toml" else None
        title = _title(p, comment) if comment else ""
        out.write(f"  {p.name:{width}}  {title}\n")
    for sub in sorted({p.relative_to(folder).parts[0] for p in files if p.parent != folder}):
        out.write(f"  {sub + '/':{width}}  (a folder: see its README)\n")
    out.write("\n`blksim examples --copy DIR` copies them into DIR to edit and run.\n")
    return 0


def _copy_examples(folder: Path, files: list[Path], dest: Path, out) -> int:
    targets = [(p, dest / p.relative_to(folder)) for p in files]
    existing = [str(t) for _, t in targets if t.exists()]
    if existing:
        shown = ", ".join(existing[:3]) + (" ..." if len(existing) > 3 else "")
        raise UserError(f"examples --copy {dest}: would overwrite {len(existing)} file(s): "
                        f"{shown}; choose an empty folder")
    for src, target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
    out.write(f"copied {len(targets)} files to {dest}\n")
    return 0
