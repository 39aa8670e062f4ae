"""The progress line: shown on a terminal for long runs, never otherwise."""

import io

from blksim.cli.progress import Progress


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_wanted_only_on_a_terminal_and_not_quiet():
    assert Progress.wanted(False, FakeTerminal())
    assert not Progress.wanted(True, FakeTerminal())
    assert not Progress.wanted(False, io.StringIO())


def test_draws_simulated_time_and_requests_after_the_delay():
    out = FakeTerminal()
    p = Progress("deadline", 60.0, stream=out, delay=0.0)
    p.update(12.5, 12345)
    p.finish(60.0, 99999)
    text = out.getvalue()
    assert "simulated 12.5 s / 60.0 s" in text and "requests 12,345" in text
    last = text.rstrip("\n").split("\r")[-1]
    assert text.endswith("\n") and "requests 99,999" in last and "100%" in last


def test_short_runs_draw_nothing():
    out = FakeTerminal()
    p = Progress("noop", None, stream=out, delay=3600.0)
    p.update(1.0, 10)
    p.finish(2.0, 20)
    assert out.getvalue() == ""
