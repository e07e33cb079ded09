"""Hostile files: imports stay inside the project, and every command reads user
files through one bounded reader that refuses what is not a regular file.

The traversal tests put a secret with a unique marker outside the project and check that no form of
import reads it: exit 2, E113 (or E106 for a name that simply does not exist), and not one byte of the
secret on stdout or stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from ccost import cli
from ccost.check import check_file, check_text, project_root
from ccost.diagnostics import CcostError
from ccost.userfiles import read_user_bytes

MARKER = "SECRETMARKER7731"
SECRET = f"{MARKER} = 1\nplan {MARKER}x {{ }}\n"


@contextmanager
def deadline(seconds: int = 5):
    """Fail (instead of hanging the suite) when a read blocks: a FIFO opened for reading without
    O_NONBLOCK waits for a writer forever, /dev/zero never ends."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"still reading after {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """tmp/outside/secret.ccost (+ a folder link to it), tmp/proj (not in git) with a spec folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.ccost").write_text(SECRET)
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "sub" / "link.ccost").symlink_to(outside / "secret.ccost")
    (proj / "linkdir").symlink_to(outside)
    (proj / "fine.ccost").write_text('link ok { alpha = 1 us; bandwidth = 1 GB/s }\n')
    return proj


# (import path, the code it must get): E113 refused, E106 a literal name that does not exist.
TRAVERSALS = [
    ("../outside/secret.ccost", "E113"),
    ("./../outside/secret.ccost", "E113"),
    ("sub/../../outside/secret.ccost", "E113"),
    ("sub/./../../outside/secret.ccost", "E113"),
    ("..//outside//secret.ccost", "E113"),
    ("../../../../../../../../../../../../etc/passwd", "E113"),
    ("../proj/../outside/secret.ccost", "E113"),
    ("/etc/passwd", "E113"),
    ("/proc/self/environ", "E113"),
    ("//etc/passwd", "E113"),
    ("std/../../../../../../../../etc/passwd", "E113"),
    ("std/../../outside/secret.ccost", "E113"),
    ("std/./../std/../../x.ccost", "E113"),
    ("sub/link.ccost", "E113"),  # a symlink to the secret
    ("linkdir/secret.ccost", "E113"),  # through a symlinked folder
    ("a\x00b.ccost", "E113"),  # a NUL byte
    ("..\\..\\outside\\secret.ccost", "E106"),  # backslashes: a literal name on POSIX
    ("%2e%2e/outside/secret.ccost", "E106"),  # not URL-decoded
    ("....//outside/secret.ccost", "E106"),  # a folder named '....'
]


@pytest.mark.parametrize("target,code", TRAVERSALS, ids=[repr(t) for t, _ in TRAVERSALS])
def test_traversal_forms_are_refused_without_reading(layout: Path, target: str, code: str, capsys, monkeypatch):
    monkeypatch.chdir(layout)
    spec = layout / "main.ccost"
    escaped = target.replace("\\", "\\\\")
    spec.write_text(f'import "{escaped}"\nimport "fine.ccost"\n')
    status = cli.main(["check", str(spec)])
    out, err = capsys.readouterr()
    assert status == 2
    assert MARKER not in out + err
    assert "root:" not in out + err  # /etc/passwd
    assert [d.code for d in check_file(str(spec)).errors] == [code], err


def test_proc_environ_import_echoes_nothing(tmp_path: Path):
    """The environment (secrets included) must not reach a CI log."""
    spec = tmp_path / "env.ccost"
    spec.write_text('import "/proc/self/environ"\n')
    env = {**os.environ, "CCOST_TEST_SECRET": MARKER}
    proc = subprocess.run([sys.executable, "-m", "ccost", "check", str(spec)], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert MARKER not in proc.stdout + proc.stderr
    assert "error[E113]" in proc.stderr


def test_imports_inside_a_git_work_tree_may_climb_within_it(tmp_path: Path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "lib").mkdir()
    (repo / "specs" / "deep").mkdir(parents=True)
    (repo / "lib" / "links.ccost").write_text("link ib { alpha = 5 us; bandwidth = 50 GB/s }\n")
    (tmp_path / "secret.ccost").write_text(SECRET)
    spec = repo / "specs" / "deep" / "x.ccost"
    spec.write_text('import "../../lib/links.ccost"\n')
    assert project_root(str(spec)) == str(repo)
    assert check_file(str(spec)).ok
    spec.write_text('import "../../../secret.ccost"\n')
    result = check_file(str(spec))
    assert [d.code for d in result.errors] == ["E113"]
    assert "git work tree" in result.errors[0].message
    assert MARKER not in str(result.sources)


def test_outside_git_the_spec_folder_is_the_project(tmp_path: Path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "l.ccost").write_text("link ib { alpha = 5 us; bandwidth = 50 GB/s }\n")
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "x.ccost"
    spec.write_text('import "../lib/l.ccost"\n')
    assert project_root(str(spec)) == str(tmp_path / "specs")
    assert [d.code for d in check_file(str(spec)).errors] == ["E113"]


def test_text_without_a_file_uses_the_current_folder(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "l.ccost").write_text("link ib { alpha = 5 us; bandwidth = 50 GB/s }\n")
    assert check_text('import "l.ccost"\n', "<stdin>").ok
    assert [d.code for d in check_text('import "../l.ccost"\n', "<stdin>").errors] == ["E113"]


def test_std_files_are_still_importable_and_cannot_be_left():
    assert check_text('import "std/gpus.ccost"\nimport "std/links.ccost"\n', "x.ccost").ok
    result = check_text('import "std/../gpus.ccost"\n', "x.ccost")
    assert [d.code for d in result.errors] == ["E113"]


def test_symlinked_self_import_is_a_cycle(tmp_path: Path):
    real = tmp_path / "real.ccost"
    real.write_text('import "self.ccost"\nlink a { alpha = 1 us; bandwidth = 1 GB/s }\n')
    (tmp_path / "self.ccost").symlink_to(real)
    assert [d.code for d in check_file(str(real)).errors] == ["E105"]


def test_import_chain_deeper_than_the_limit_is_one_clear_error(tmp_path: Path):
    from ccost.check import MAX_IMPORT_DEPTH

    n = 3000
    for i in range(n):
        (tmp_path / f"f{i}.ccost").write_text(f'import "f{i + 1}.ccost"\n')
    (tmp_path / f"f{n}.ccost").write_text("")
    result = check_file(str(tmp_path / "f0.ccost"))
    assert [d.code for d in result.errors] == ["E113"]
    assert f"more than {MAX_IMPORT_DEPTH} files deep" in result.errors[0].message
    # a chain within the limit is fine
    assert check_file(str(tmp_path / f"f{n - MAX_IMPORT_DEPTH + 1}.ccost")).ok


# ---------------------------------------------------------------------------------------------------
# Special files: refused by every command, at once


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.ccost"
    os.mkfifo(path)
    return path


SPECIAL = ["/dev/zero", "/dev/urandom", "FIFO"]


@pytest.mark.parametrize("which", SPECIAL)
@pytest.mark.parametrize("argv", [["check"], ["fmt", "--check"], ["fmt"], ["calibrate"], ["eval"],
                                  ["explain", "{}", "p"], ["diff", "{good}", "{}"]],
                         ids=lambda a: " ".join(a))
def test_special_files_are_refused_at_once(which, argv, fifo: Path, tmp_path: Path, capsys):
    target = str(fifo) if which == "FIFO" else which
    good = tmp_path / "good.ccost"
    good.write_text("link a { alpha = 1 us; bandwidth = 1 GB/s }\n")
    args = [a.format(target, good=good) for a in argv]
    if "{}" not in " ".join(argv):
        args.append(target)
    start = time.perf_counter()
    with deadline(10):
        status = cli.main(args)
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert status == 2, err
    assert "not a regular file" in err, err
    assert "internal error" not in err
    assert elapsed < 10  # the deadline guards a hang; the refusal itself takes milliseconds


def test_special_file_as_an_import(fifo: Path, tmp_path: Path):
    spec = tmp_path / "main.ccost"
    spec.write_text(f'import "{fifo.name}"\n')
    with deadline(10):
        result = check_file(str(spec))
    assert [(d.code, d.span.line if d.span else None) for d in result.errors] == [("E002", 1)]


def test_stdin_is_bounded_too(monkeypatch, capsys):
    import io

    from ccost.syntax.parse import MAX_FILE_BYTES

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"#" * (MAX_FILE_BYTES + 10))))
    assert cli.main(["fmt", "-"]) == 2
    assert "over the limit" in capsys.readouterr().err


def test_reader_limits_and_refusals(tmp_path: Path):
    f = tmp_path / "f.txt"
    f.write_bytes(b"x" * 100)
    assert read_user_bytes(f, limit=100) == b"x" * 100
    with pytest.raises(CcostError) as info:
        read_user_bytes(f, limit=99)
    assert "over the limit" in info.value.diagnostics[0].message
    with pytest.raises(FileNotFoundError):
        read_user_bytes(tmp_path / "missing", limit=10)
    with pytest.raises(CcostError) as info:
        read_user_bytes(tmp_path, limit=10)
    assert "directory" in info.value.diagnostics[0].message
    # a /proc file reports size 0 and has content: the limit holds while reading, not only from stat
    with pytest.raises(CcostError):
        read_user_bytes("/proc/self/environ", limit=1)
