"""The search progress bar: points/s and ETA, on a terminal only, never in the output."""

from __future__ import annotations

import io
import json
from pathlib import Path

from ccost.progress import Bar, eta_text, rate_text

REPO = Path(__file__).resolve().parents[1]


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_rate_and_eta_text():
    assert rate_text(950) == "950 points/s"
    assert rate_text(12_345) == "12.3 k points/s"
    assert rate_text(1_380_000) == "1.38 M points/s"
    assert eta_text(0) == "0:00" and eta_text(0.2) == "0:01"  # rounded up: never "0:00" while work is left
    assert eta_text(75) == "1:15" and eta_text(3 * 3600 + 61) == "3:01:01"


def test_bar_shows_rate_and_eta():
    # 40 points at t = 0, 1,040 at t = 2 s: 500 points/s; 2,960 left of 4,000 -> 5.92 s -> 0:06.
    t = [0.0]
    tty = _FakeTTY()
    with Bar(tty, clock=lambda: t[0]) as bar:
        bar("fleet", 40, 4000)
        t[0] = 2.0
        bar("fleet", 1040, 4000)
        line = tty.getvalue().split("\r\x1b[K")[-1]
        assert line == ("search fleet  [#######.......................]   26 %  1,040 / 4,000 points  "
                        "500 points/s  ETA 0:06")
    assert tty.getvalue().endswith("\r\x1b[K")


def test_bar_restarts_its_clock_for_each_search():
    t = [0.0]
    tty = _FakeTTY()
    with Bar(tty, clock=lambda: t[0]) as bar:
        bar("a", 10, 100)
        t[0] = 5.0
        bar("a", 100, 100)
        bar("b", 10, 1000)  # a new search: its rate is not a's
        t[0] = 7.0
        bar("b", 210, 1000)  # 200 points in 2 s
        assert tty.getvalue().endswith("100 points/s  ETA 0:08")


def test_bar_restarts_for_the_same_search_run_again():
    # ccost diff prices the old and the new side: the same search name twice; the second run's rate is
    # its own (300 points in 3 s), not the first run's start.
    t = [0.0]
    tty = _FakeTTY()
    with Bar(tty, clock=lambda: t[0]) as bar:
        bar("s", 500, 1000)
        t[0] = 10.0
        bar("s", 1000, 1000)
        bar("s", 100, 1000)  # the second side starts
        t[0] = 13.0
        bar("s", 400, 1000)
        assert tty.getvalue().endswith("400 / 1,000 points  100 points/s  ETA 0:06")


def test_no_bar_off_a_terminal():
    t = [0.0]
    pipe = io.StringIO()
    with Bar(pipe, clock=lambda: t[0]) as bar:
        for i in range(1, 6):
            t[0] = i
            bar("s", i * 100, 600)
    assert pipe.getvalue() == ""


def test_json_output_never_carries_the_bar(tmp_path, capsys, monkeypatch):
    """With a terminal on stderr and the bar drawn at once, stdout is still only the JSON document."""
    import sys
    import time

    from ccost.cli import main

    monkeypatch.chdir(REPO)
    err = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(Bar.__init__, "__defaults__", (0.0, 0.0, time.monotonic))  # draw from the start
    assert main(["eval", "specs/search-llama70b-serving.ccost", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "search " in err.getvalue() and " points" in err.getvalue()  # the bar was drawn, on stderr
    assert "\x1b" not in out and "\r" not in out and "points/s" not in out
    assert json.loads(out)["searches"]


def _bar_of_a_run(**where) -> str:
    """The last line a bar draws for a 1,600-point search (tests/test_search.py's DECODE) run with
    ``where`` (jobs, scheduler), on a fake terminal whose clock moves one second per report."""
    from ccost import search

    from test_search import DECODE, _spec

    spec = _spec(DECODE.replace("OBJECTIVE", "latency"))
    s = spec.searches["s"]
    t = [0.0]

    def clock():
        t[0] += 1.0
        return t[0]

    tty = _FakeTTY()
    with Bar(tty, after=0, every=0, clock=clock) as bar:
        search.run_search(s, spec.policy, chunk=100, progress=lambda d, n: bar("s", d, n), **where)
    lines = tty.getvalue().split("\r\x1b[K")
    assert lines[-1] == ""  # erased at the end
    return lines[-2]


def test_bar_with_two_processes():
    # 16 chunks of 100 points in tasks of a few chunks: the bar moves as each task comes back, and ends
    # at every point with a rate and no time left
    line = _bar_of_a_run(jobs=2)
    assert "100 %  1,600 / 1,600 points" in line and "points/s  ETA 0:00" in line, line
