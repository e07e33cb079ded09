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


# ---------------------------------------------------------------------------------------------------
# Faults (issue 31, item 16): a crash's leftovers cleaned by the next run, one run at a time in a folder,
# no traceback from the render process, fmt and init on links, full disks and `-`

def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_the_next_run_removes_what_a_killed_run_left(tmp_path):
    from ccost.report.atomic import write_atomic

    dead, live = _dead_pid(), os.getppid()  # a process that has exited; pytest's parent, running
    stale = [tmp_path / f".a1.html.{dead}.abcd1234.tmp", tmp_path / f".a1.html.{dead}.efgh5678.bak.tmp"]
    kept = [tmp_path / f".a1.html.{live}.ijkl9012.tmp",  # a run still writing
            tmp_path / f".a1.yaml.{dead}.mnop3456.tmp",  # another output: its own next run removes it
            tmp_path / ".a1.html.qrstuvwx.tmp"]  # not a name ccost writes now: left alone
    for p in stale + kept:
        p.write_text("half")
    write_atomic(tmp_path / "a1.html", b"new")
    assert (tmp_path / "a1.html").read_bytes() == b"new"
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)


_KILLED_RENDER = """
import sys, time
import ccost.report.render as r
def slow(*a, **k):
    print("RENDERING", file=sys.stderr, flush=True)
    time.sleep(3)
    return b"%PDF-1.7 fake"
r.render_pdf = slow
from ccost.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # starts ccost and its render process, kills it, and waits for the render to end
def test_a_review_killed_mid_render_leaves_nothing_the_next_run_keeps_and_prints_no_traceback(spec, tmp_path):
    """SIGKILL of `ccost report` while its render process renders the PDF: the render process finds its
    parent gone and exits quietly (before: a BrokenPipeError traceback), and the temporary files the
    killed run left are removed by the next run (before: never)."""
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RENDER, "report", str(spec), "-o", str(out) + "/"],
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "CCOST_PDF_PROCESS": "1"})
    assert "RENDERING" in proc.stderr.readline()
    left = sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp"))
    assert left and all(f".{proc.pid}." in name for name in left)
    proc.kill()
    rest = proc.stderr.read()  # until the render process, the pipe's last writer, has exited
    proc.wait()
    assert "Traceback" not in rest and "BrokenPipe" not in rest, rest
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == left  # nothing cleaned them
    assert cli.main(["report", str(spec), "-o", str(out) + "/", "--format", "html"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["a1.html", "a1.yaml"]


def test_the_render_process_exits_quietly_when_the_review_process_is_gone(monkeypatch, capsys):
    """The in-process sibling of the test above: ``_serve`` with the other end of its pipe closed."""
    import multiprocessing as mp

    from ccost.report import pdfproc

    monkeypatch.setattr(pdfproc, "_render", lambda html, epoch: b"%PDF-1.7")
    monkeypatch.setattr("ccost.report.weasy.import_weasyprint", lambda: (_ for _ in ()).throw(ImportError))
    ours, theirs = mp.Pipe()
    ours.send(("<p>x</p>", 0))
    ours.close()  # the review process is gone before the PDF is ready
    extra, _ = mp.Pipe()
    pdfproc._serve(theirs, extra)  # raises nothing
    assert "Traceback" not in capsys.readouterr().err


def test_a_commit_waits_for_another_run_holding_the_folder(tmp_path):
    """Two runs writing one review: the renames of a commit are made under an exclusive lock on the folder,
    so a second commit waits for the first to finish (the fast sibling of the concurrent test below)."""
    import fcntl
    import threading

    done = []
    fd = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another run, mid-commit

    def commit():
        with AtomicFiles() as out:
            out.write(tmp_path / "a.html", b"mine")
        done.append(True)

    t = threading.Thread(target=commit)
    t.start()
    time.sleep(0.5)
    assert not done and not (tmp_path / "a.html").exists()
    os.close(fd)  # the other run's commit ends
    t.join(10)
    assert done and (tmp_path / "a.html").read_bytes() == b"mine"


def _writer(args):
    folder, tag, rounds, barrier = args
    for r in range(rounds):
        if barrier.broken:
            return tag
        barrier.wait()
        with AtomicFiles() as out:
            for name in ("a.html", "a.pdf", "a.yaml"):
                out.write(Path(folder) / name, f"{tag} {r}".encode())
        barrier.wait()
    return tag


@pytest.mark.slow  # four processes, 40 rounds
def test_four_runs_writing_one_review_at_once_leave_one_runs_files(tmp_path):
    """Issue 31: four concurrent reports into one folder left the YAML of one beside the HTML of another in
    1 trial of 40. Here each of 40 rounds starts four writers together; after each, the three files are
    one writer's."""
    import multiprocessing as mp

    rounds = 40
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(5, timeout=60)  # shared by inheritance: a barrier cannot be pickled to a pool
    writers = [ctx.Process(target=_writer, args=((str(tmp_path), f"w{i}", rounds, barrier),)) for i in range(4)]
    for w in writers:
        w.start()
    try:
        for _ in range(rounds):
            barrier.wait()  # all start
            barrier.wait()  # all committed
            got = {(tmp_path / n).read_text().split()[0] for n in ("a.html", "a.pdf", "a.yaml")}
            assert len(got) == 1, got
    finally:
        barrier.abort()
        for w in writers:
            w.join(30)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_fmt_through_a_symlink_rewrites_the_target_and_keeps_the_link(tmp_path, capsys):
    (tmp_path / ".git").mkdir()
    (tmp_path / "shared").mkdir()
    target = tmp_path / "shared" / "hw.ccost"
    target.write_text("link   x{alpha=2 us;bandwidth=450 GB/s}\n")
    link = tmp_path / "hw.ccost"
    link.symlink_to(target)
    assert cli.main(["fmt", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)  # before: replaced by a regular file
    assert target.read_text().startswith("link x {")
    assert "1 file reformatted" in capsys.readouterr().err


def test_fmt_refuses_a_symlink_that_leads_outside_the_project(tmp_path, capsys):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / ".git").mkdir()
    outside = tmp_path / "outside.ccost"
    outside.write_text("link   x{alpha=2 us;bandwidth=450 GB/s}\n")
    (tmp_path / "p" / "hw.ccost").symlink_to(outside)
    assert cli.main(["fmt", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "E504" in err and "leads outside the project" in err and "reformatted" not in err.split("error")[0]
    assert outside.read_text() == "link   x{alpha=2 us;bandwidth=450 GB/s}\n"


def test_fmt_on_a_full_disk_says_so_and_counts_nothing(tmp_path, monkeypatch, capsys):
    import errno

    spec = tmp_path / "s.ccost"
    before = "link   x{alpha=2 us;bandwidth=450 GB/s}\n"
    spec.write_text(before)

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("ccost.report.atomic.os.fsync", full)
    assert cli.main(["fmt", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "reformatted" not in err.replace("left unchanged", ""), err
    assert spec.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["s.ccost"]


def test_init_dash_prints_the_spec_and_writes_no_file_named_dash(tmp_path, monkeypatch, capsys):
    from ccost.check import check_text

    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "-"]) == 0
    out = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == [] and check_text(out, "plan.ccost").ok
    assert out.startswith("# A starter capacity plan")  # the spec only: a shell can redirect it


def test_init_creates_the_folders_of_its_path(tmp_path, capsys):
    """Issue 26 item 10: `ccost init dir/x.ccost` creates dir/ (before: `cannot write`)."""
    path = tmp_path / "plans" / "new" / "x.ccost"
    assert cli.main(["init", str(path)]) == 0
    assert path.is_file() and oct(path.stat().st_mode & 0o777) == "0o644"
    assert cli.main(["init", str(path)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_init_on_a_full_disk_leaves_nothing(tmp_path, monkeypatch, capsys):
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("ccost.report.atomic.os.fsync", full)
    assert cli.main(["init", str(tmp_path / "x.ccost")]) == 2
    assert "No space left" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_nul_and_bidi_overrides_reach_the_review_escaped(tmp_path):
    """A spec line or title carrying NUL or U+202E (which reverses the text after it) is shown as
    `\\x00` / `\\u202e` in the HTML review, as on the terminal, never raw."""
    from ccost.report import render, review

    spec = tmp_path / "s.ccost"
    spec.write_text(SPEC.replace('plan p {', 'plan p "evil \u202e title" {') + "# a comment \x00 and \u202e here\n")
    html = render.render_html(review(spec, include_git=False, cwd=tmp_path).view, "screen")
    assert "\x00" not in html and "\u202e" not in html
    assert "evil \\u202e title" in html and "a comment \\x00 and \\u202e here" in html
