"""The pygls wiring of ``ccost lsp``: LSP requests in, ``ccost.lsp.features`` answers out.

Diagnostics are published when a document is opened or saved and, while it is being edited, once the
edits pause (``DEBOUNCE_S``): an editor sends a change per keystroke, and checking a large spec takes
seconds, so only the latest version is checked — on one worker thread, so that hover and completion
still answer while a check runs — and a check's diagnostics are published only while its version is
still the latest. Hover, completion, go to definition and formatting read the document as the editor
has it, unsaved edits included, and answer only for documents the editor opened (never a file read from
disk because a request named it); imports are read from disk, as ``ccost check`` reads them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import re
import threading
from concurrent.futures import Future
from urllib.parse import unquote, urlparse

from lsprotocol import types as L
from pygls.exceptions import FeatureNotificationError
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from ccost import __version__
from ccost.lsp import features as F

#: How long edits must pause before a document is checked again (one keystroke's gap is ~0.1-0.2 s).
DEBOUNCE_S = 0.3

_SEVERITY = {"error": L.DiagnosticSeverity.Error, "warning": L.DiagnosticSeverity.Warning,
             "note": L.DiagnosticSeverity.Information}
_ITEM_KIND = {"field": L.CompletionItemKind.Field, "unit": L.CompletionItemKind.Unit,
              "value": L.CompletionItemKind.EnumMember, "reference": L.CompletionItemKind.Reference,
              "keyword": L.CompletionItemKind.Keyword}
_BEYOND_BMP = re.compile("[\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
log = logging.getLogger(__name__)


def path_of(uri: str) -> str:
    """A file path for a document URI (an untitled buffer gets a name in the current folder, so that
    relative imports resolve from there)."""
    p = urlparse(uri)
    if p.scheme == "file":
        return unquote(p.path)
    return os.path.join(os.getcwd(), os.path.basename(unquote(p.path)) or "untitled.ccost")


def uri_of(path: str) -> str:
    from pathlib import Path

    return Path(os.path.abspath(path)).as_uri()


# --------------------------------------------------------------------------------------------------
# Positions: LSP counts characters in the client's code units (UTF-16 by default), ccost in code points


def _units(doc: TextDocument, line: str, points: int) -> int:
    """The client's position of code point ``points`` of ``line``."""
    if line.isascii() or (doc.position_codec.encoding != L.PositionEncodingKind.Utf8
                          and not _BEYOND_BMP.search(line, 0, points)):
        return points
    return doc.position_codec.client_num_units(line[:points])


def _points(doc: TextDocument, line: str, units: int) -> int:
    """The code point of ``line`` at the client's position ``units``."""
    if line.isascii() or (doc.position_codec.encoding != L.PositionEncodingKind.Utf8
                          and not _BEYOND_BMP.search(line)):
        return units
    count = 0
    for i, ch in enumerate(line):
        if count >= units:
            return i
        count += doc.position_codec.client_num_units(ch)
    return len(line)


def text_of(doc: TextDocument) -> str:
    """The document's text as a file could hold it. JSON can carry a lone UTF-16 surrogate (an editor's
    buffer may hold one) that no UTF-8 file can: each becomes U+FFFD, one character for one, so positions
    stay where they were."""
    text = doc.source
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _line(text_lines: list[str], n: int) -> str:
    return text_lines[n] if 0 <= n < len(text_lines) else ""


def _opened(ls: LanguageServer, uri: str) -> TextDocument | None:
    """The document the editor opened under ``uri``, or None: a request about any other URI is not
    answered (pygls would read the file from disk)."""
    return ls.workspace.text_documents.get(unquote(uri))


def _at(ls: LanguageServer, params) -> tuple[str, str, int, int] | None:
    """What a position request asks about: the document's text as the editor has it, its path, line and
    character (both 0-based, in code points); None for a document that is not open."""
    doc = _opened(ls, params.text_document.uri)
    if doc is None:
        return None
    text = text_of(doc)
    line = params.position.line
    return text, path_of(doc.uri), line, _points(doc, _line(text.split("\n"), line),
                                                 params.position.character)


# --------------------------------------------------------------------------------------------------
# Diagnostics: the latest version, after the edits pause, on a worker thread


class Worker:
    """One thread that runs the calls given to it in turn. A daemon: the server exits when the editor
    says so, even in the middle of a long check."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, name="ccost-check", daemon=True).start()

    def submit(self, call) -> Future:
        future: Future = Future()
        self.jobs.put((call, future))
        return future

    def _run(self) -> None:
        while True:
            call, future = self.jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to the future's owner
                future.set_exception(exc)


class Diagnoser:
    """Checks each open document once its edits pause and publishes the result for the version checked,
    only while that version is still the latest (a newer one has its own check queued)."""

    def __init__(self, server: LanguageServer):
        self.server = server
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.worker = Worker()

    def _current(self, uri: str, version: int | None, text: str) -> bool:
        """Whether ``version`` (with ``text``: a document closed and opened again restarts its versions)
        is what the editor has open now."""
        doc = _opened(self.server, uri)
        return doc is not None and doc.version == version and text_of(doc) == text

    def schedule(self, uri: str, delay: float = DEBOUNCE_S) -> None:
        old = self.timers.pop(uri, None)
        if old is not None:
            old.cancel()
        self.timers[uri] = asyncio.get_running_loop().call_later(delay, self._start, uri)

    def cancel(self, uri: str) -> None:
        old = self.timers.pop(uri, None)
        if old is not None:
            old.cancel()

    def _start(self, uri: str) -> None:
        self.timers.pop(uri, None)
        doc = _opened(self.server, uri)
        if doc is None:
            return
        text, version, loop = text_of(doc), doc.version, asyncio.get_running_loop()

        def check() -> list[F.Problem] | None:
            if not self._current(uri, version, text):  # edited while queued: the newer one is scheduled
                return None
            return F.diagnostics(text, path_of(uri))

        future = self.worker.submit(check)
        future.add_done_callback(lambda f: loop.call_soon_threadsafe(self._done, uri, version, text, f))

    def _done(self, uri: str, version: int | None, text: str, future: Future) -> None:
        try:
            problems = future.result()
        except Exception as exc:  # a bug: logged and shown like pygls's own handler errors
            log.exception("checking %s failed", uri)
            self.server.report_server_error(exc, FeatureNotificationError)
            return
        if problems is None or not self._current(uri, version, text):
            return
        lines = text.split("\n")
        doc = _opened(self.server, uri)

        def pos(line: int, character: int) -> L.Position:
            return L.Position(line, _units(doc, _line(lines, line), character))

        self.server.text_document_publish_diagnostics(L.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=[
                L.Diagnostic(range=L.Range(pos(p.line, p.character), pos(p.end_line, p.end_character)),
                             message=p.message, severity=_SEVERITY.get(p.severity), code=p.code,
                             source="ccost")
                for p in problems]))

    def clear(self, uri: str) -> None:
        self.cancel(uri)
        self.server.text_document_publish_diagnostics(L.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


def build() -> LanguageServer:
    server = LanguageServer("ccost", __version__, text_document_sync_kind=L.TextDocumentSyncKind.Full)
    checks = Diagnoser(server)

    @server.feature(L.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: LanguageServer, params: L.DidOpenTextDocumentParams) -> None:
        F.forget()  # an opened file may be one the others import
        checks.schedule(params.text_document.uri, 0.0)

    @server.feature(L.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LanguageServer, params: L.DidChangeTextDocumentParams) -> None:
        checks.schedule(params.text_document.uri)

    @server.feature(L.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: LanguageServer, params: L.DidSaveTextDocumentParams) -> None:
        F.forget()  # the saved file may be imported by the open ones: check them all again
        for doc in list(ls.workspace.text_documents.values()):
            checks.schedule(doc.uri, 0.0)

    @server.feature(L.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: LanguageServer, params: L.DidCloseTextDocumentParams) -> None:
        checks.clear(params.text_document.uri)

    @server.feature(L.TEXT_DOCUMENT_HOVER)
    def hover(ls: LanguageServer, params: L.HoverParams) -> L.Hover | None:
        at = _at(ls, params)
        md = F.hover(*at) if at is not None else None
        if md is None:
            return None
        return L.Hover(contents=L.MarkupContent(kind=L.MarkupKind.Markdown, value=md))

    @server.feature(L.TEXT_DOCUMENT_COMPLETION,
                    L.CompletionOptions(trigger_characters=[" ", "=", ".", "["]))
    def completion(ls: LanguageServer, params: L.CompletionParams) -> L.CompletionList:
        at = _at(ls, params)
        items = F.complete(*at) if at is not None else []
        return L.CompletionList(is_incomplete=False, items=[
            L.CompletionItem(label=i.label, kind=_ITEM_KIND.get(i.kind), detail=i.detail,
                             documentation=L.MarkupContent(kind=L.MarkupKind.Markdown, value=i.doc)
                             if i.doc else None, insert_text=i.insert)
            for i in items])

    @server.feature(L.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: LanguageServer, params: L.DefinitionParams) -> L.Location | None:
        at = _at(ls, params)
        found = F.definition(*at) if at is not None else None
        if found is None:
            return None
        path, span = found
        start = L.Position(span.line - 1, span.column - 1)
        end = L.Position(span.end_line - 1, max(span.end_column - 1, span.column - 1))
        return L.Location(uri=uri_of(path), range=L.Range(start, end))

    @server.feature(L.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls: LanguageServer, params: L.DocumentFormattingParams) -> list[L.TextEdit] | None:
        doc = _opened(ls, params.text_document.uri)
        if doc is None:
            return None
        text = text_of(doc)
        out = F.formatted(text, path_of(doc.uri))
        if out is None or out == text:
            return [] if out is not None else None
        lines = text.split("\n")
        end = L.Position(len(lines) - 1, _units(doc, lines[-1], len(lines[-1])))
        return [L.TextEdit(range=L.Range(L.Position(0, 0), end), new_text=out)]

    @server.feature(L.SHUTDOWN)
    def shutdown(ls: LanguageServer, params) -> None:
        for uri in list(checks.timers):
            checks.cancel(uri)

    return server


def main() -> int:
    build().start_io()
    return 0
