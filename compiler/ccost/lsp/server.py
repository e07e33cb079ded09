"""The pygls wiring of ``ccost lsp``: LSP requests in, ``ccost.lsp.features`` answers out.

Diagnostics are published on open, on every change (full-text sync; checking a spec takes milliseconds)
and on save. Hover, completion, go to definition and formatting read the document as the editor has it,
unsaved edits included; imports are read from disk.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

from lsprotocol import types as L
from pygls.lsp.server import LanguageServer

from ccost import __version__
from ccost.lsp import features as F

_SEVERITY = {"error": L.DiagnosticSeverity.Error, "warning": L.DiagnosticSeverity.Warning,
             "note": L.DiagnosticSeverity.Information}
_ITEM_KIND = {"field": L.CompletionItemKind.Field, "unit": L.CompletionItemKind.Unit,
              "value": L.CompletionItemKind.EnumMember, "reference": L.CompletionItemKind.Reference,
              "keyword": L.CompletionItemKind.Keyword}


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


def _at(ls: LanguageServer, params) -> tuple[str, str, int, int]:
    """What a position request asks about: the document's text as the editor has it, its path, line and
    character (both 0-based)."""
    doc = ls.workspace.get_text_document(params.text_document.uri)
    return doc.source, path_of(doc.uri), params.position.line, params.position.character


def build() -> LanguageServer:
    server = LanguageServer("ccost", __version__, text_document_sync_kind=L.TextDocumentSyncKind.Full)

    def publish(uri: str) -> None:
        doc = server.workspace.get_text_document(uri)
        problems = F.diagnostics(doc.source, path_of(uri))
        server.text_document_publish_diagnostics(L.PublishDiagnosticsParams(uri=uri, diagnostics=[
            L.Diagnostic(range=L.Range(L.Position(p.line, p.character),
                                       L.Position(p.end_line, p.end_character)),
                         message=p.message, severity=_SEVERITY.get(p.severity), code=p.code, source="ccost")
            for p in problems]))

    @server.feature(L.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: LanguageServer, params: L.DidOpenTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(L.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LanguageServer, params: L.DidChangeTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(L.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: LanguageServer, params: L.DidSaveTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(L.TEXT_DOCUMENT_HOVER)
    def hover(ls: LanguageServer, params: L.HoverParams) -> L.Hover | None:
        md = F.hover(*_at(ls, params))
        if md is None:
            return None
        return L.Hover(contents=L.MarkupContent(kind=L.MarkupKind.Markdown, value=md))

    @server.feature(L.TEXT_DOCUMENT_COMPLETION,
                    L.CompletionOptions(trigger_characters=[" ", "=", ".", "["]))
    def completion(ls: LanguageServer, params: L.CompletionParams) -> L.CompletionList:
        items = F.complete(*_at(ls, params))
        return L.CompletionList(is_incomplete=False, items=[
            L.CompletionItem(label=i.label, kind=_ITEM_KIND.get(i.kind), detail=i.detail,
                             documentation=L.MarkupContent(kind=L.MarkupKind.Markdown, value=i.doc)
                             if i.doc else None, insert_text=i.insert)
            for i in items])

    @server.feature(L.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: LanguageServer, params: L.DefinitionParams) -> L.Location | None:
        found = F.definition(*_at(ls, params))
        if found is None:
            return None
        path, span = found
        start = L.Position(span.line - 1, span.column - 1)
        end = L.Position(span.end_line - 1, max(span.end_column - 1, span.column - 1))
        return L.Location(uri=uri_of(path), range=L.Range(start, end))

    @server.feature(L.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls: LanguageServer, params: L.DocumentFormattingParams) -> list[L.TextEdit] | None:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        out = F.formatted(doc.source, path_of(doc.uri))
        if out is None or out == doc.source:
            return [] if out is not None else None
        lines = doc.source.split("\n")
        end = L.Position(len(lines) - 1, len(lines[-1]))
        return [L.TextEdit(range=L.Range(L.Position(0, 0), end), new_text=out)]

    return server


def main() -> int:
    build().start_io()
    return 0
