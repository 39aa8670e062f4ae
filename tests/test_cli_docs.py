"""``blksim docs`` and ``blksim examples``: the installed docs and examples."""

from __future__ import annotations

import re

from blksim.cli import main


def test_docs_lists_every_page_with_its_title(capsys):
    assert main(["docs"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  configuration +Configuration and command line$", out, re.M)
    assert "teaching" in out and "architecture" in out


def test_docs_prints_a_page_and_names_the_valid_ones_for_a_typo(capsys):
    assert main(["docs", "configuration.md"]) == 0
    assert capsys.readouterr().out.startswith("# Configuration and command line")
    assert main(["docs", "configuraton"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("blksim: error: docs configuraton: no such page; valid: ")
    assert "configuration" in err and "\n" == err[-1] and err.count("\n") == 1


def test_examples_copy_makes_runnable_files_and_never_overwrites(tmp_path, capsys):
    dest = tmp_path / "ex"
    assert main(["examples", "--copy", str(dest)]) == 0
    assert (dest / "teaching-queue.trace").is_file()
    assert main(["run", str(dest / "teaching-queue.toml"), "-q"]) == 0
    capsys.readouterr()
    (dest / "mixed.toml").write_text("# mine\n")
    assert main(["examples", "--copy", str(dest)]) == 2
    assert "would overwrite" in capsys.readouterr().err
    assert (dest / "mixed.toml").read_text() == "# mine\n"


def test_help_names_the_docs_folder(capsys):
    from blksim.cli.app import build_parser
    text = build_parser().format_help()
    assert "Documentation: " in text and "source tree" not in text
