"""The review's PDF rendered by a process started before the review is built (issue 16).

Importing WeasyPrint (Pango, HarfBuzz and fontconfig through cffi, its CSS machinery, fontTools) takes
~0.2 s, about as long as checking, evaluating and building the view of a spec like A1. ``ccost report``
therefore forks one process as it starts: that process imports WeasyPrint while this one builds the
review, then receives the print HTML, renders it with ``render.render_pdf`` (the same function, the same
bytes) and sends the PDF back. On two cores the import is hidden; the summary review takes ~0.2 s less.

It is used only where it can help and cannot surprise: on Linux (``fork`` there copies this process as it
is, with nothing to re-import; macOS's system frameworks are not fork-safe), with one thread running
(a fork copies no other thread), with at least two cores to run on, and while WeasyPrint is not loaded
here yet (``CCOST_PDF_PROCESS=0`` turns it off, ``=1`` uses it even on one core). Otherwise ``start`` returns ``None`` and the PDF is rendered in this process, as it is when the
helper dies (its pipe closes: the render is done here instead, nothing lost). An error of the render
(a blocked fetch, say) is raised here as it was raised there.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ccost.cores import available


#: ``0``: always render in this process; ``1``: use the render process wherever it is safe, even where it
#: cannot help (the tests use this); unset: where it is safe and can help.
ENV = "CCOST_PDF_PROCESS"


def usable() -> bool:
    """Whether a render process can be forked here safely and (unless ``CCOST_PDF_PROCESS=1``) with
    profit (see the module's note)."""
    asked = os.environ.get(ENV, "")
    if asked == "0" or not sys.platform.startswith("linux") or threading.active_count() != 1:
        return False
    return asked == "1" or (available() >= 2 and "weasyprint" not in sys.modules)


class PdfProcess:
    """A forked process with WeasyPrint imported, rendering one print HTML to PDF bytes.

    ``submit(html, epoch)`` sends the page (``epoch``: the provenance date, ``SOURCE_DATE_EPOCH`` of the
    render), ``result()`` waits for the PDF; ``close()`` ends the process (also at this process's exit:
    it is a daemon, and it exits by itself when its pipe closes)."""

    def __init__(self, conn, process):
        self._conn = conn
        self._process = process
        self._sent: tuple[str, int] | None = None
        self._done = False  # its PDF (or error) received: it is exiting by itself

    @classmethod
    def start(cls) -> "PdfProcess | None":
        """A render process (the one ``prestarted`` started, if any), or ``None`` where one cannot help
        (``usable``) or cannot be started."""
        global _READY
        if _READY is not None:
            ready, _READY = _READY, None
            return ready
        if not usable():
            return None
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        try:
            ours, theirs = ctx.Pipe()
            process = ctx.Process(target=_serve, args=(theirs, ours), daemon=True, name="ccost-pdf")
            process.start()
        except OSError:  # no process or pipe to spare: render here
            return None
        theirs.close()
        return cls(ours, process)

    def submit(self, html: str, epoch: int) -> None:
        self._sent = (html, epoch)
        try:
            self._conn.send(self._sent)
        except OSError:  # the process is gone: result() renders here
            pass

    def result(self) -> bytes:
        """The PDF of the submitted page; raises what the render raised."""
        assert self._sent is not None, "submit() first"
        try:
            status, value = self._conn.recv()
        except (EOFError, OSError):  # the process died (killed for memory, say): render here instead
            return _render(*self._sent)
        self._done = True
        if status == "error":
            raise value
        return value

    def close(self) -> None:
        """End the process: it exits by itself once its PDF is sent; one still importing, waiting or
        rendering (the review failed, or a signal stopped it) is terminated at once."""
        self._conn.close()
        if self._done:
            self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()


_READY: PdfProcess | None = None


@contextmanager
def prestarted() -> Iterator[None]:
    """Start the render process of the next ``PdfProcess.start`` now, as ``ccost report`` begins: its
    WeasyPrint import then runs beside the imports, the check and the evaluation of the spec. Left unused
    (the spec has errors, say), it is ended when the block ends."""
    global _READY
    if _READY is None:
        _READY = PdfProcess.start()
    try:
        yield
    finally:
        unused, _READY = _READY, None
        if unused is not None:
            unused.close()


def _render(html: str, epoch: int) -> bytes:
    from ccost.report import render, source_date_epoch

    with source_date_epoch(epoch):
        return render.render_pdf(html)


def _serve(conn, parent_end) -> None:
    """The render process: import WeasyPrint, wait for one page, send back its PDF or the error. It says
    nothing of its own: when the review process has gone (killed, or stopped by Ctrl-C, which reaches the
    whole process group; it ends this process itself), it exits quietly, without a traceback."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the review process's to handle
    parent_end.close()
    # A short-lived process: the cycle collector would walk every object copied from the parent (and copy
    # the pages it touches) for the few cycles an import leaves.
    import gc

    gc.disable()
    try:
        from ccost.report.weasy import import_weasyprint

        weasyprint = import_weasyprint()
        if not conn.poll():  # the page is not here yet: a line of text readies fontconfig and Pango meanwhile
            weasyprint.HTML(string="<p>ccost</p>").render()
    except Exception:  # noqa: BLE001 - the render below raises it again, where it is reported
        pass
    try:
        html, epoch = conn.recv()
    except (EOFError, OSError):  # the review failed before its PDF: nothing to do
        return
    try:
        reply = ("ok", _render(html, epoch))
    except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
        reply = ("error", exc)
    try:
        try:
            conn.send(reply)
        except (OSError, EOFError):  # the review process is gone: no one to answer
            return
        except Exception:  # noqa: BLE001 - an error that cannot be pickled: its text
            conn.send(("error", RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}")))
    except (OSError, EOFError):
        return
    finally:
        conn.close()
