"""docs/api.md's examples run: every ```python block, in order, in one namespace, and
a plain ``` block right after one shows what it prints.

Without pandas the block that asks for a DataFrame must fail with the message that
says how to get it; with pandas it runs like the others.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def fenced_blocks(text: str) -> list[tuple[str, str, str]]:
    """(language, body, text before it since the previous block) of every fenced block."""
    out = []
    end = 0
    for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, flags=re.M | re.S):
        out.append((m.group(1), m.group(2), text[end:m.start()]))
        end = m.end()
    return out


def examples(text: str) -> list[tuple[str, str | None]]:
    """Every python block with the output block right after it (None if there is none)."""
    blocks = fenced_blocks(text)
    out = []
    for k, (lang, body, _) in enumerate(blocks):
        if lang != "python":
            continue
        shown = None
        if k + 1 < len(blocks) and blocks[k + 1][0] == "" and not blocks[k + 1][2].strip():
            shown = blocks[k + 1][1]
        out.append((body, shown))
    return out


def test_every_python_block_of_api_md_runs_in_order_and_prints_what_is_shown():
    found = examples(DOC.read_text(encoding="utf-8"))
    assert len(found) >= 6 and sum(shown is not None for _, shown in found) >= 4
    has_pandas = importlib.util.find_spec("pandas") is not None
    namespace: dict = {"__name__": "api_md"}
    for k, (code, shown) in enumerate(found):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{DOC.name} block {k + 1}", "exec"), namespace)
        except ImportError as exc:
            assert not has_pandas and "requests_frame" in code, f"block {k + 1}: {exc}"
            assert "pip install pandas" in str(exc)
            continue
        if shown is not None:
            assert out.getvalue() == shown, f"block {k + 1} prints otherwise:\n{out.getvalue()}"


def test_the_block_reader_pairs_code_and_output():
    text = "x\n```python\nprint(1)\n```\n\n```\n1\n```\n\n```python\na = 2\n```\ntext\n```\nno\n```\n"
    assert examples(text) == [("print(1)\n", "1\n"), ("a = 2\n", None)]
