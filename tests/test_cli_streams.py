"""Standard input and output as a shell uses them.

* A closed output never turns a failure into success: ``ccost check --policy spec | head -1`` under
  ``set -o pipefail`` exits 1 when the policy fails, as it does without the pipe (before: 0). The verb runs
  to its result with the output gone (``ccost.cli._Output``); a closed output is not an error of its own.
* ``check -`` and ``eval -`` read at most the 4 MiB a spec may have, like ``fmt -`` (before: 20 MB of zeros
  took 6 s and 1.8 GB; 100 MB 50 s and 8.9 GB).

The pipe cases run through a real shell (bash with ``pipefail``) and are ``slow`` (each starts ccost);
their in-process siblings give ``main`` a stdout whose reader is gone.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ccost.cli import main

REPO = Path(__file__).resolve().parents[1]

FAILING = """import "std/gpus.ccost"
import "std/links.ccost"
import "std/clusters.ccost"
import "std/models.ccost"
plan a { model = llama3_70b; cluster = hgx_h100; phase = decode; batch = 32; seq = 4096; tp = 1 }
plan b { model = llama3_70b; cluster = hgx_h100; phase = decode; batch = 32; seq = 4096; tp = 8 }
policy { max_overhead = 1 %; min_efficiency = 99 %; max_memory = 90 % }
"""


class _Gone(io.TextIOBase):
    """A standard output whose reader has exited: every write and flush is EPIPE."""

    def __init__(self):
        self.writes = 0

    def write(self, text):
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self):
        raise io.UnsupportedOperation("no descriptor")


@pytest.fixture
def failing(tmp_path):
    path = tmp_path / "fail.ccost"
    path.write_text(FAILING)
    return path


def test_a_failing_policy_still_exits_1_when_stdout_is_gone(failing, monkeypatch, capsys):
    gone = _Gone()
    monkeypatch.setattr(sys, "stdout", gone)
    assert main(["check", "--policy", str(failing)]) == 1
    assert gone.writes == 1  # the first line found the pipe closed; the rest went nowhere
    assert "BrokenPipe" not in capsys.readouterr().err


def test_a_passing_check_still_exits_0_and_errors_still_exit_2_when_stdout_is_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stdout", _Gone())
    assert main(["check", str(REPO / "specs" / "a1-tp-decode.ccost")]) == 0
    bad = tmp_path / "bad.ccost"
    bad.write_text("plan p { tp = }\n")
    assert main(["eval", str(bad)]) == 2


def test_fmt_check_still_exits_1_when_stdout_is_gone(tmp_path, monkeypatch):
    spec = tmp_path / "ugly.ccost"
    spec.write_text("link   x{alpha=2 us;bandwidth=450 GB/s}\n" * 1)
    monkeypatch.setattr(sys, "stdout", _Gone())
    assert main(["fmt", "--check", str(spec)]) == 1


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    ccost = shutil.which("ccost") or f"{sys.executable} -m ccost"
    return subprocess.run(["bash", "-o", "pipefail", "-c", command.replace("ccost ", f"{ccost} ", 1)],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO / "compiler")})


@pytest.mark.slow  # starts ccost through bash, eight times
@pytest.mark.parametrize("command,status", [
    ("ccost check --policy fail.ccost | head -1", 1),
    ("ccost check --policy fail.ccost 2>&1 | head -1", 1),
    ("ccost check --policy fail.ccost | true", 1),
    ("ccost fmt --check specs/ | head -1", 1),
    ("ccost eval --format json fail.ccost specs/ | head -c 10", 0),
    ("ccost eval broken.ccost 2>&1 | true", 2),
    ("ccost check specs/ | true", 0),
    ("ccost --help | head -1", 0),
])
def test_a_pipe_that_closes_early_keeps_the_exit_status_under_pipefail(tmp_path, command, status):
    (tmp_path / "fail.ccost").write_text(FAILING)
    (tmp_path / "broken.ccost").write_text("plan p { tp = }\n")
    (tmp_path / "specs").mkdir()
    for i in range(40):  # a diff longer than a pipe's buffer, so the writer meets the closed pipe
        (tmp_path / "specs" / f"s{i:02d}.ccost").write_text(
            "".join(f"link   x{j}{{alpha=2 us;bandwidth=450 GB/s}}\n" for j in range(40)))
    done = _shell(command, tmp_path)
    assert done.returncode == status, (command, done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
    assert "Exception ignored" not in done.stderr


# --------------------------------------------------------------------------------------------------
# 31.5: standard input bounded like a file

class _Endless(io.RawIOBase):
    """Zeros without end, counting what was read."""

    def __init__(self):
        self.read_bytes = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = len(b)
        b[:] = bytes(n)
        self.read_bytes += n
        return n


@pytest.mark.parametrize("verb", ["check", "eval", "fmt"])
def test_standard_input_is_read_up_to_the_spec_limit_then_refused(verb, monkeypatch, capsys):
    from ccost.syntax.parse import MAX_FILE_BYTES

    endless = _Endless()
    stdin = io.TextIOWrapper(io.BufferedReader(endless, buffer_size=1 << 16))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main([verb, "-"]) == 2
    err = capsys.readouterr().err
    assert "E002" in err and "standard input" in err and "limit of 4.0 MiB" in err, err
    assert endless.read_bytes <= MAX_FILE_BYTES + (1 << 17)  # the limit and one buffer, not on and on


def test_a_stream_the_verb_closed_itself_is_not_flushed_at_the_end():
    # The language server closes stdout as it exits (after `shutdown` and `exit`): the final flush of the
    # wrapper must not raise "I/O operation on closed file" and turn the server's exit 0 into a traceback
    # and exit 1 (found by bench/fuzz_lsp.py: "server exit status 1").
    import io

    from ccost.cli import _Output

    raw = io.StringIO()
    out = _Output(raw)
    out.write("x")
    raw.close()
    out.flush()  # no ValueError
    assert not out.reader_gone


@pytest.mark.slow  # starts the language server in a process of its own (the unit test above stays in the loop)
def test_the_language_server_exits_0_after_shutdown_and_exit():
    import json
    import subprocess
    import sys

    pytest.importorskip("pygls", reason="the `lsp` extra (in the test extra) runs the language server")

    def msg(o):
        b = json.dumps(o).encode()
        return b"Content-Length: %d\r\n\r\n" % len(b) + b

    inp = (msg({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
           + msg({"jsonrpc": "2.0", "method": "initialized", "params": {}})
           + msg({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}) + msg({"jsonrpc": "2.0", "method": "exit"}))
    p = subprocess.run([sys.executable, "-m", "ccost", "lsp"], input=inp, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert b"Traceback" not in p.stderr


def test_numpys_floating_point_notices_do_not_reach_the_user(monkeypatch, capsys):
    # the issue-31 fuzz saw "RuntimeWarning: overflow encountered in divide" with a source line on stderr for
    # specs at the edges of the field ranges; an overflow gives inf, shown as such, and nothing else
    import warnings

    import numpy as np

    from ccost.commands import check as check_cmd

    def run(args):
        with np.errstate(all="warn"):
            np.float64(1e308) * np.float64(10.0)
            np.ones(1) / np.zeros(1)
        return 0

    monkeypatch.setattr(check_cmd, "run", run)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        assert main(["check", "whatever.ccost"]) == 0
    assert [str(w.message) for w in shown] == []
    assert "Warning" not in capsys.readouterr().err


def test_an_arrival_rate_below_one_a_day_is_refused_where_it_is_written(tmp_path, capsys):
    # at 1e-300 requests/s the simulated arrival times overflowed and every latency read 0 s, exit 0
    spec = (Path(__file__).resolve().parent.parent / "specs" / "sla-mixtral-h100.ccost").read_text()
    lines = [("  rate = 1e-300" if ln.lstrip().startswith("rate ") else ln) for ln in spec.splitlines()]
    assert lines != spec.splitlines()
    p = tmp_path / "tiny.ccost"
    p.write_text("\n".join(lines) + "\n")
    assert main(["check", str(p)]) == 2
    err = capsys.readouterr().err
    assert "E203" in err and "`rate` must be at least 0.00001; got 1e-300" in err and f"{p}:" in err
