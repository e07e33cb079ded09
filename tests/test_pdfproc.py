"""The review's PDF rendered by a second process (ccost.report.pdfproc): the same bytes as a render in this
process, the render's errors raised here, a dead helper replaced by a render here, and used only where a
fork is safe. The process tests run in a fresh interpreter: a fork is refused where other threads run
(a test of this session may have left some)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = "<html><body><h1>Plan tp8</h1><p>T = 2 µs + 64 MiB / 400 GB/s = 169.77 µs</p></body></html>"


def _fresh(code: str, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter with ``env`` set; its last line of output must be ``ok``."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "SOURCE_DATE_EPOCH": "1767225600", **env})
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stdout + run.stderr
    return run


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the render process forks: Linux only")
def test_the_render_process_writes_the_bytes_of_a_render_here_and_ends():
    _fresh(f"""
        import os
        from ccost.report.pdfproc import PdfProcess, _render
        p = PdfProcess.start()
        assert p is not None and p._process.pid != os.getpid()
        p.submit({PAGE!r}, 1767225600)
        there = p.result()
        import sys
        assert "weasyprint" not in sys.modules  # the PDF was rendered there, not here
        p.close()
        assert not p._process.is_alive() and p._process.exitcode == 0, p._process.exitcode
        here = _render({PAGE!r}, 1767225600)
        assert there == here and there.startswith(b"%PDF"), (len(there), len(here))
        print("ok")
    """, CCOST_PDF_PROCESS="1")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the render process forks: Linux only")
def test_an_error_of_the_render_is_raised_here_as_it_was_there():
    _fresh("""
        from ccost.report.fetcher import BlockedFetch
        from ccost.report.pdfproc import PdfProcess
        p = PdfProcess.start()
        p.submit('<html><body><img src="file:///etc/passwd"><p>x</p></body></html>', 1767225600)
        try:
            p.result()
        except BlockedFetch as exc:
            assert "file:///etc/passwd" in str(exc), exc
        else:
            raise AssertionError("the blocked fetch was not raised")
        finally:
            p.close()
        print("ok")
    """, CCOST_PDF_PROCESS="1")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the render process forks: Linux only")
def test_a_dead_render_process_is_replaced_by_a_render_here():
    _fresh(f"""
        from ccost.report.pdfproc import PdfProcess, _render
        p = PdfProcess.start()
        p._process.kill(); p._process.join()
        p.submit({PAGE!r}, 1767225600)
        assert p.result() == _render({PAGE!r}, 1767225600)
        p.close()
        print("ok")
    """, CCOST_PDF_PROCESS="1")


@pytest.mark.slow
def test_a_spec_with_errors_leaves_the_prestarted_process_unused_and_exits(tmp_path):
    bad = tmp_path / "bad.ccost"
    bad.write_text("gpu g {\n  memory: 80 parsecs\n}\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "ccost", "report", str(bad), "-o", f"{tmp_path}/out/"],
                         cwd=REPO, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "CCOST_PDF_PROCESS": "1"})
    assert run.returncode == 2 and "error" in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()


def test_the_process_is_used_only_where_a_fork_is_safe(monkeypatch):
    from ccost.report import pdfproc

    monkeypatch.setattr(pdfproc, "_READY", None)  # no process started early by another test
    monkeypatch.setenv(pdfproc.ENV, "1")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not pdfproc.usable() and pdfproc.PdfProcess.start() is None
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # another thread: a fork would copy it mid-step
    assert not pdfproc.usable()
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert pdfproc.usable()
    monkeypatch.setenv(pdfproc.ENV, "0")
    assert not pdfproc.usable()
    # unset: only with two cores and WeasyPrint not loaded yet (a process importing it again gains nothing)
    monkeypatch.delenv(pdfproc.ENV)
    monkeypatch.setattr(pdfproc, "available", lambda: 1)
    assert not pdfproc.usable()
    monkeypatch.setattr(pdfproc, "available", lambda: 2)
    monkeypatch.setitem(sys.modules, "weasyprint", object())
    assert not pdfproc.usable()
    monkeypatch.delitem(sys.modules, "weasyprint")
    assert pdfproc.usable()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the render process forks: Linux only")
def test_a_report_that_fails_early_leaves_no_render_process_behind(tmp_path, monkeypatch, capsys):
    # in this process (as a test or an editor would call it): the process started early is ended with the
    # command, not kept for the life of the caller
    import multiprocessing

    from ccost import cli
    from ccost.report import pdfproc

    monkeypatch.setenv(pdfproc.ENV, "1")
    monkeypatch.setattr(threading, "active_count", lambda: 1)  # the fork is safe enough for this check
    started = []
    real = pdfproc.PdfProcess.start.__func__
    monkeypatch.setattr(pdfproc.PdfProcess, "start", classmethod(lambda cls: started.append(real(cls)) or started[-1]))
    # standard input is refused before any review is built: the process started early is never used
    assert cli.main(["report", "-", "-o", f"{tmp_path}/out/"]) == 2
    assert "E504" in capsys.readouterr().err
    assert started and started[0] is not None  # it was started ...
    assert pdfproc._READY is None and not started[0]._process.is_alive()  # ... and ended with the command
    assert not [p for p in multiprocessing.active_children() if p.name == "ccost-pdf"]
