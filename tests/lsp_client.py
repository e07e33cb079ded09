"""A real LSP client for the tests and bench/fuzz_lsp.py: pygls's ``LanguageClient`` driving
``python -m ccost lsp`` over pipes, as an editor does.

``Session`` records every ``textDocument/publishDiagnostics`` (with the version it is for), every
``window/showMessage`` and ``window/logMessage``, and the server's standard error (read as it comes, so a
chatty server can never block on a full pipe). ``internal_errors()`` lists what counts as a failure of the
server rather than of the spec: a message or a log line of an exception, an error response other than a
cancelled request, a server that exited before it was told to.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field

from lsprotocol import types as L
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient

#: error codes of responses that are not the server's fault: a request the client cancelled
CANCELLED = -32800


@dataclass
class Session:
    cwd: str | None = None
    client: LanguageClient = field(default_factory=lambda: LanguageClient("ccost-test", "1"))
    published: dict[str, list[tuple[int | None, list[L.Diagnostic]]]] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)  # window/showMessage and logMessage (errors)
    errors: list[str] = field(default_factory=list)  # error responses
    stderr: list[str] = field(default_factory=list)
    _tasks: list[asyncio.Task] = field(default_factory=list)

    async def start(self) -> "Session":
        c = self.client

        @c.feature(L.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _diagnostics(ls, params: L.PublishDiagnosticsParams):
            self.published.setdefault(params.uri, []).append((params.version, params.diagnostics))

        @c.feature(L.WINDOW_SHOW_MESSAGE)
        def _show(ls, params: L.ShowMessageParams):
            if params.type == L.MessageType.Error:
                self.messages.append(params.message)

        @c.feature(L.WINDOW_LOG_MESSAGE)
        def _log(ls, params: L.LogMessageParams):
            if params.type == L.MessageType.Error:
                self.messages.append(params.message)

        await c.start_io(sys.executable, "-m", "ccost", "lsp", cwd=self.cwd)
        self._tasks.append(asyncio.create_task(self._drain(c._server.stderr)))
        await c.initialize_async(L.InitializeParams(capabilities=L.ClientCapabilities()))
        c.initialized(L.InitializedParams())
        return self

    async def _drain(self, stream) -> None:
        while True:
            line = await stream.readline()
            if not line:
                return
            self.stderr.append(line.decode("utf-8", "replace"))

    # ----------------------------------------------------------------------------------------------
    # Documents

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.client.text_document_did_open(L.DidOpenTextDocumentParams(
            L.TextDocumentItem(uri=uri, language_id="ccost", version=version, text=text)))

    def change(self, uri: str, text: str, version: int) -> None:
        self.client.text_document_did_change(L.DidChangeTextDocumentParams(
            L.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [L.TextDocumentContentChangeWholeDocument(text=text)]))

    def edit(self, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        """An incremental change (a range replaced), as editors send when the server accepts them."""
        self.client.text_document_did_change(L.DidChangeTextDocumentParams(
            L.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [L.TextDocumentContentChangePartial(range=L.Range(L.Position(*start), L.Position(*end)),
                                                text=text)]))

    def save(self, uri: str) -> None:
        self.client.text_document_did_save(L.DidSaveTextDocumentParams(L.TextDocumentIdentifier(uri)))

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(L.DidCloseTextDocumentParams(L.TextDocumentIdentifier(uri)))

    async def diagnostics(self, uri: str, version: int | None = None,
                          timeout: float = 60.0) -> list[L.Diagnostic]:
        """The diagnostics published for ``uri`` (for ``version``, when given), waiting for them."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while loop.time() < end:
            for v, diags in reversed(self.published.get(uri, [])):
                if version is None or v == version:
                    return diags
            await asyncio.sleep(0.02)
        raise TimeoutError(f"no diagnostics for {uri} (version {version}) in {timeout} s")

    # ----------------------------------------------------------------------------------------------
    # Requests: each returns the result, or None after an error response (recorded in ``errors``)

    async def _ask(self, coro):
        try:
            return await coro
        except JsonRpcException as exc:
            if getattr(exc, "code", None) != CANCELLED:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            return None
        except RuntimeError as exc:  # pygls fails the pending requests of a server that exited
            self.errors.append(f"no answer: {exc}")
            return None

    async def hover(self, uri: str, line: int, character: int):
        return await self._ask(self.client.text_document_hover_async(
            L.HoverParams(L.TextDocumentIdentifier(uri), L.Position(line, character))))

    async def complete(self, uri: str, line: int, character: int):
        return await self._ask(self.client.text_document_completion_async(
            L.CompletionParams(L.TextDocumentIdentifier(uri), L.Position(line, character))))

    async def definition(self, uri: str, line: int, character: int):
        return await self._ask(self.client.text_document_definition_async(
            L.DefinitionParams(L.TextDocumentIdentifier(uri), L.Position(line, character))))

    async def format(self, uri: str):
        return await self._ask(self.client.text_document_formatting_async(L.DocumentFormattingParams(
            L.TextDocumentIdentifier(uri), L.FormattingOptions(tab_size=2, insert_spaces=True))))

    # ----------------------------------------------------------------------------------------------

    def exited_early(self) -> bool:
        server = self.client._server
        return server is not None and server.returncode is not None

    async def stop(self, timeout: float = 30.0) -> int | None:
        """Shut the server down as an editor does; kill it if it does not exit within ``timeout``.
        Returns its exit status (None when it had to be killed)."""
        c, server = self.client, self.client._server
        try:
            if server.returncode is None:
                await asyncio.wait_for(c.shutdown_async(None), timeout)
                c.exit(None)
                await asyncio.wait_for(server.wait(), timeout)
            status = server.returncode
        except (asyncio.TimeoutError, JsonRpcException, ConnectionError, RuntimeError):
            status = None
        if server.returncode is None:
            server.kill()
            await server.wait()
        c._stop_event.set()
        for t in self._tasks + c._async_tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, *c._async_tasks, return_exceptions=True)
        return status

    def internal_errors(self) -> list[str]:
        """What went wrong inside the server: error responses, error messages to the editor, and any
        traceback or error log line on its standard error."""
        log = "".join(self.stderr)
        out = list(self.errors) + [f"message: {m}" for m in self.messages]
        if "Traceback" in log or "ERROR" in log or "Exception" in log:
            out.append("stderr: " + log[-3000:])
        return out
