"""Outputs land together or not at all, and user strings cannot drive the terminal (issue 11, item 6).

Each case leaves a previous review in place first and checks, after the failed run, that every previous
output is byte for byte what it was and that no temporary file (``.<name>.*.tmp``) is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ccost import cli
from ccost.report.atomic import AtomicFiles, OutputError, Terminated, check_targets

REPO = Path(__file__).resolve().parent.parent
HOSTILE = REPO / "tests" / "hostile"
SPEC = """link l { alpha = 2 us; bandwidth = 450 GB/s }
gpu g { memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s }
cluster c { gpu = g; intra_node = l }
model m { layers = 80; hidden = 8192; params = 70e9 }
plan p { model = m; cluster = c; phase = decode; tp = 8 }
"""


def _previous(folder: Path, stem: str = "a1") -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    old = {}
    for ext in ("html", "pdf"):
        (folder / f"{stem}.{ext}").write_bytes(f"previous {ext}\n".encode())
        old[f"{stem}.{ext}"] = (folder / f"{stem}.{ext}").read_bytes()
    return old


def _untouched(folder: Path, old: dict[str, bytes]) -> None:
    for name, data in old.items():
        assert (folder / name).read_bytes() == data, f"{name} was replaced"
    leftovers = [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == [], leftovers


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    p = tmp_path / "a1.ccost"
    p.write_text(SPEC)
    return p


def test_a_folder_in_place_of_an_output_fails_before_anything_is_written(spec, tmp_path, capsys):
    out = tmp_path / "o"
    old = _previous(out)
    (out / "a1.yaml").mkdir()  # the case: mkdir -p o/a1.yaml
    assert cli.main(["report", str(spec), "-o", str(out) + "/", "--format", "html"]) == 2
    err = capsys.readouterr().err
    assert "error[E504]" in err and "a1.yaml" in err and "folder" in err
    _untouched(out, old)


def test_a_name_too_long_is_E504_not_an_internal_error(spec, tmp_path, capsys):
    out = tmp_path / "o"
    old = _previous(out)
    assert cli.main(["report", str(spec), "-o", str(out / ("x" * 300 + ".pdf"))]) == 2
    err = capsys.readouterr().err
    assert "error[E504]" in err and "longer than" in err and "internal error" not in err
    _untouched(out, old)


def test_output_over_a_device_is_refused(spec, capsys):
    assert cli.main(["report", str(spec), "-o", "/dev/null", "--format", "html"]) == 2
    assert "error[E504]" in capsys.readouterr().err
    assert not Path("/dev/null.html").exists()


def test_a_parent_that_is_a_file_is_refused(spec, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert cli.main(["report", str(spec), "-o", str(tmp_path / "afile" / "sub") + "/", "--format", "html"]) == 2
    assert "error[E504]" in capsys.readouterr().err
    assert (tmp_path / "afile").read_text() == "x"


def test_check_targets_writes_and_creates_nothing(tmp_path):
    target = tmp_path / "new" / "deeper" / "r.html"
    check_targets([target])
    assert not (tmp_path / "new").exists()
    with pytest.raises(OutputError) as info:
        check_targets([tmp_path])
    assert info.value.filename == str(tmp_path)


def test_a_failed_rename_puts_back_what_was_replaced(tmp_path, monkeypatch):
    a, b = tmp_path / "a.html", tmp_path / "b.yaml"
    a.write_text("old a")
    b.write_text("old b")
    real = os.replace
    calls = []

    def flaky(src, dst):
        calls.append(dst)
        if Path(dst) == b:
            raise OSError(5, "I/O error", str(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError), AtomicFiles() as out:
        out.write(a, b"new a")
        out.write(b, b"new b")
    monkeypatch.setattr(os, "replace", real)
    assert a.read_text() == "old a" and b.read_text() == "old b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.yaml"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_signal_while_writing_removes_the_temporary_files(tmp_path, signum):
    a = tmp_path / "a.html"
    a.write_text("old")
    before = signal.getsignal(signum)
    with pytest.raises(Terminated) as info, AtomicFiles() as out:
        out.write(a, b"new")
        os.kill(os.getpid(), signum)  # the handler raises at the next bytecode
        time.sleep(5)
    assert info.value.code == 128 + signum
    assert a.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.html"]
    assert signal.getsignal(signum) == before  # the program's own handler is back


_SLOW_RENDER = """
import sys, time
import ccost.report.render as r
def slow(*a, **k):
    print("RENDERING", file=sys.stderr, flush=True)
    time.sleep(60)
r.render_pdf = slow
from ccost.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_signal_during_the_pdf_render_leaves_the_previous_review(spec, tmp_path, signame):
    """The real command, stopped while WeasyPrint would be rendering (the HTML is already written aside)."""
    out = tmp_path / "o"
    old = _previous(out)
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_RENDER, "report", str(spec), "-o", str(out) + "/"],
                            stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    assert "RENDERING" in line
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # the HTML waits aside
    proc.send_signal(getattr(signal, signame))
    rest = proc.stderr.read()
    assert proc.wait(timeout=30) == 128 + getattr(signal, signame)
    assert f"{signame}: stopped; no output was replaced" in rest
    _untouched(out, old)


# ---------------------------------------------------------------------------------------------------
# Control characters


def test_titles_with_escape_sequences_are_shown_escaped(capsys):
    spec = HOSTILE / "control_chars.ccost"
    for argv in (["eval", str(spec)], ["explain", str(spec), "p"], ["diff", str(spec), str(spec)]):
        assert cli.main(argv) == 0
        out, err = capsys.readouterr()
        assert "\x1b" not in out + err and "\x07" not in out + err, argv
    cli.main(["eval", str(spec)])
    assert "plan\\x1b[2J\\x07 title" in capsys.readouterr().out
    # JSON and YAML escape them by their own rules
    cli.main(["eval", str(spec), "--format", "json"])
    assert "\\u001b[2J" in capsys.readouterr().out
    cli.main(["eval", str(spec), "--format", "yaml"])
    assert "\x1b" not in capsys.readouterr().out


def test_diagnostic_source_lines_show_control_pictures_with_carets_in_place(tmp_path, capsys):
    p = tmp_path / "x.ccost"
    p.write_text('link l "\x1b[2J" { alpha = 2 us; bandwidth = 450 GB; }\n')
    assert cli.main(["check", str(p)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err
    source = next(line for line in err.splitlines() if "link l" in line)
    carets = next(line for line in err.splitlines() if line.rstrip().endswith("^"))
    assert "␛[2J" in source
    col = source.index("450")
    assert carets.index("^") == col  # one picture per control character: the columns still line up


def test_internal_error_text_is_escaped(monkeypatch, capsys, spec):
    import ccost.commands.check as C

    def boom(args):
        raise RuntimeError("bad \x1b[2J thing")

    monkeypatch.setattr(C, "run", boom)
    assert cli.main(["check", str(spec)]) == 70
    err = capsys.readouterr().err
    assert "\x1b" not in err and "bad \\x1b[2J thing" in err
