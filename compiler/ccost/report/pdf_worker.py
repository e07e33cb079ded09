"""The PDF rendered by a child process that got ready while the spec was checked and evaluated (issue 16).

``ccost report`` spends its first ~0.4 s importing ccost, checking and evaluating the spec and building
the view model, and WeasyPrint needs ~0.3 s of its own before the first box is laid out: its import
(cffi reading Pango's declarations, fontTools), then fontconfig and the fonts of a first page. Those do
not depend on each other. ``PdfWorker`` forks a child at the start of the command that does WeasyPrint's
part on the other core — it imports it and lays out a line in each of the review's faces — and then
renders the print HTML the parent sends it with ``render.render_pdf``, the very function the parent
would have called: the same bytes.

Only where ``fork`` is safe (Linux, and a process with one thread; macOS forks badly once system
frameworks are loaded, so not there), only for a review with a PDF, and never under
``CCOST_NO_WORKER=1``. When the child cannot be started or dies, the parent renders the PDF itself: a
worker can cost time, never the review. An error of the render itself (a blocked fetch) is raised in the
parent as if it had rendered. On a busy machine (no free core) it gains nothing and costs ~0.05 s.
"""

from __future__ import annotations

import os
import sys
import threading

# A line in each face the review uses (body, bold, monospace, monospace bold), so that fontconfig and
# Pango have found and opened them before the review's first page.
_WARM_UP = ("<p>ccost <b>review</b> <code>tp = 8</code> <code><b>T_step</b></code> α·β µs × − ≤ — "
            "0123456789</p>")


def _warm_up() -> None:
    """WeasyPrint imported (as ``render_pdf`` imports it), a line laid out and written in each face."""
    from ccost.report.fetcher import DataOnlyFetcher
    from ccost.report.fonts import harfbuzz_subsetting
    from ccost.report.weasy import import_weasyprint

    weasyprint = import_weasyprint()
    with harfbuzz_subsetting():
        weasyprint.HTML(string=_WARM_UP, base_url=None, url_fetcher=DataOnlyFetcher()).write_pdf()


def _serve(conn) -> None:
    """The child: get WeasyPrint ready, then render each HTML received until told to stop."""
    import signal

    # Ctrl-C reaches the whole process group: the parent handles it (and stops this child)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _warm_up()
    except Exception:  # noqa: BLE001 - the render below says what is wrong, or the parent does
        pass
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        html, epoch = job
        try:
            from ccost.report import source_date_epoch
            from ccost.report.render import render_pdf

            with source_date_epoch(epoch):
                result = ("ok", render_pdf(html))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - sent back, raised in the parent (BlockedFetch is a
            result = ("error", exc)  # BaseException: WeasyPrint must not swallow it)
        try:
            try:
                conn.send(result)
            except OSError:
                raise
            except Exception:  # noqa: BLE001 - an exception that does not pickle: the parent renders
                conn.send(("failed", None))
        except OSError:  # the parent is gone
            return


class PdfWorker:
    """A started child process that renders PDFs (``render``), or none where it cannot run."""

    def __init__(self, start: bool = True) -> None:
        self._proc = None
        self._conn = None
        self._busy = False
        # fork copies one thread: with others running, a lock one of them holds could never be released
        # in the child (an import lock, a logging handler's); single-threaded, as the CLI is, it is safe.
        if (not start or os.environ.get("CCOST_NO_WORKER") or not sys.platform.startswith("linux")
                or threading.active_count() > 1):
            return
        try:
            import multiprocessing

            ctx = multiprocessing.get_context("fork")
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child,), name="ccost-pdf", daemon=True)
            proc.start()
            child.close()
        except (OSError, ValueError, ImportError):
            return
        self._proc, self._conn = proc, parent

    @property
    def running(self) -> bool:
        return self._proc is not None

    def render(self, print_html: str, epoch: int) -> bytes:
        """The PDF of ``print_html`` with ``epoch`` as SOURCE_DATE_EPOCH (``render.render_pdf``)."""
        if self._conn is not None:
            try:
                self._busy = True
                self._conn.send((print_html, epoch))
                status, payload = self._conn.recv()  # EOFError as soon as the child is gone
                self._busy = False
            except (EOFError, OSError):
                self.close()
            else:
                if status == "ok":
                    return payload
                if status == "error":
                    raise payload
        from ccost.report import source_date_epoch
        from ccost.report.render import render_pdf

        with source_date_epoch(epoch):
            return render_pdf(print_html)

    def close(self) -> None:
        """Stop the child: told to when it waits for work, killed when it is still getting ready (a
        spec with errors must not wait for WeasyPrint's import) or rendering."""
        proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
        if proc is None:
            return
        if not self._busy and proc.is_alive():
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
            proc.join(timeout=0.05)
        if proc.is_alive():
            proc.kill()
        proc.join()
        conn.close()

    def __enter__(self) -> PdfWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
