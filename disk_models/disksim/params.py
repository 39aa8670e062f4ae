"""Reader for DiskSim 4.0 parameter files (``.diskspecs``, ``.model``, ``.parv``).

The syntax (DiskSim's libparam): top-level blocks ``typename Name { key = value, ... }``;
a value is a number, a bare word or file name, a list ``[ v, v, ... ]``, a nested block
``typename { ... }`` (optionally named), or ``source file`` which reads another file
(relative to the including one) and stands for the block it defines. ``#`` starts a
comment that runs to the end of the line. Keys may hold spaces and punctuation
("Rotation speed (in rpms)"); they end at ``=``.

Every key keeps the file and line it was read from, so later errors can name them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_INT = re.compile(r"[+-]?\d+\Z")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?\Z")
_WORD_END = set(",[]{}=#") | set(" \t\r\n")


class DiskSimError(ValueError):
    """A DiskSim parameter file that is malformed or asks for something blksim does not support.

    The message starts with ``file:line:``.
    """


@dataclass
class Param:
    """One ``key = value`` with where it was written."""

    key: str
    value: object
    file: str
    line: int


@dataclass
class Block:
    """A ``typename [Name] { ... }`` block: its parameters in file order."""

    type: str
    name: str
    params: list = field(default_factory=list)
    file: str = ""
    line: int = 0

    def get(self, key: str):
        """The `Param` for ``key`` (the last one if repeated), or None."""
        found = None
        for p in self.params:
            if p.key == key:
                found = p
        return found


@dataclass
class PList:
    """A ``[ ... ]`` list."""

    items: list
    file: str
    line: int


class _Reader:
    def __init__(self, path: Path, stack: tuple) -> None:
        self.path = path
        self.name = str(path)
        try:
            self.text = path.read_text(encoding="latin-1")
        except FileNotFoundError:
            raise DiskSimError(f"{stack[-1] if stack else path}: no such file: {path}") from None
        self.pos = 0
        self.line = 1
        self.stack = stack + (str(path.resolve()),)

    def fail(self, msg: str, line: int | None = None) -> DiskSimError:
        return DiskSimError(f"{self.name}:{self.line if line is None else line}: {msg}")

    def skip(self) -> None:
        """Skip blanks and comments."""
        t = self.text
        n = len(t)
        while self.pos < n:
            c = t[self.pos]
            if c == "\n":
                self.line += 1
                self.pos += 1
            elif c in " \t\r":
                self.pos += 1
            elif c == "#":
                while self.pos < n and t[self.pos] != "\n":
                    self.pos += 1
            else:
                return

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str, what: str) -> None:
        if self.peek() != ch:
            found = self.peek() or "end of file"
            raise self.fail(f"expected {ch!r} {what}, found {found!r}")
        self.pos += 1

    def word(self) -> str:
        self.skip()
        t = self.text
        start = self.pos
        while self.pos < len(t) and t[self.pos] not in _WORD_END:
            self.pos += 1
        return t[start:self.pos]

    def key(self) -> tuple:
        self.skip()
        line = self.line
        t = self.text
        start = self.pos
        while self.pos < len(t) and t[self.pos] not in "=,{}[]#\n":
            self.pos += 1
        k = " ".join(t[start:self.pos].split())
        if not k:
            raise self.fail("expected a parameter name")
        if self.peek() != "=":
            raise self.fail(f"expected '=' after parameter name {k!r}", line)
        self.pos += 1
        return k, line

    # ---------------------------------------------------------------- grammar

    def top(self) -> list:
        """Top-level items: blocks (``source`` includes are followed)."""
        out = []
        while self.peek():
            line = self.line
            w = self.word()
            if not w:
                raise self.fail(f"unexpected {self.peek()!r} at top level")
            if w == "source":
                out.extend(self.include(line))
                continue
            if w in ("instantiate", "topology"):
                raise self.fail(f"'{w}' statements are not read by blksim (drive descriptions "
                                f"only: typename Name {{ ... }} blocks and 'source' includes)")
            name = ""
            if self.peek() != "{":
                name = self.word()
            out.append(self.block(w, name, line))
        return out

    def include(self, line: int) -> list:
        fname = self.word()
        if not fname:
            raise self.fail("'source' needs a file name", line)
        path = (self.path.parent / fname)
        if str(path.resolve()) in self.stack:
            raise self.fail(f"'source {fname}' includes itself", line)
        if not path.is_file():
            raise self.fail(f"'source {fname}': no such file {path}", line)
        return _Reader(path, self.stack).top()

    def block(self, typename: str, name: str, line: int) -> Block:
        self.expect("{", f"to open block {typename} {name}".rstrip())
        b = Block(typename, name, [], self.name, line)
        while True:
            c = self.peek()
            if c == "}":
                self.pos += 1
                return b
            if not c:
                raise self.fail(f"end of file inside block {typename} {name} (opened at line "
                                f"{line})".replace("  ", " "))
            k, kline = self.key()
            b.params.append(Param(k, self.value(), self.name, kline))
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c != "}":
                raise self.fail(f"expected ',' or '}}' after the value of {k!r}, found {c!r}")

    def value(self):
        c = self.peek()
        line = self.line
        if c == "[":
            self.pos += 1
            items = []
            while True:
                c = self.peek()
                if c == "]":
                    self.pos += 1
                    return PList(items, self.name, line)
                if not c:
                    raise self.fail(f"end of file inside a list (opened at line {line})")
                items.append(self.value())
                c = self.peek()
                if c == ",":
                    self.pos += 1
                elif c != "]":
                    raise self.fail(f"expected ',' or ']' in a list, found {c!r}")
        if c in ("", ",", "]", "}", "{", "="):
            raise self.fail(f"expected a value, found {c or 'end of file'!r}")
        w = self.word()
        if w == "source":
            blocks = self.include(line)
            if len(blocks) != 1:
                raise self.fail(f"'source' as a value must name a file holding one block, "
                                f"found {len(blocks)}", line)
            return blocks[0]
        if _INT.match(w):
            try:
                return int(w)
            except ValueError:          # beyond int()'s 4,300-digit limit
                raise self.fail(f"expected a number, found one of {len(w):,} digits") from None
        if _FLOAT.match(w):
            return float(w)
        c = self.peek()
        if c == "{":
            return self.block(w, "", line)
        if c and c not in ",]}":
            # "typename Name { ... }" as a value
            save = (self.pos, self.line)
            name = self.word()
            if name and self.peek() == "{":
                return self.block(w, name, line)
            self.pos, self.line = save
        return w


def parse_file(path) -> list:
    """The top-level blocks of a DiskSim parameter file, with ``source`` includes resolved."""
    return _Reader(Path(path), ()).top()


def parse_text(text: str, name: str = "<text>", base: Path | None = None) -> list:
    """Like `parse_file` for text in memory (``base``: directory for ``source`` includes)."""
    r = _Reader.__new__(_Reader)
    r.path = (base or Path(".")) / name
    r.name = name
    r.text = text
    r.pos = 0
    r.line = 1
    r.stack = ()
    return r.top()
