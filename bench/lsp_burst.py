"""A hover right after a burst of edits to a large spec answers promptly (issue 31, item 9).

    .venv/bin/python bench/lsp_burst.py [--kb 250] [--edits 30]

Starts ``ccost lsp`` through pygls's LSP client over stdio, opens a spec of about ``--kb`` kilobytes (the
A1 example's hardware and model, then decode plans until the size is reached), waits for its first
diagnostics (the time of one check of the document), then sends ``--edits`` changes back to back (each
the whole document with one plan's batch changed, as an editor with full-text sync sends a keystroke) and
at once a hover on a unit (which needs no check), a hover on a field (which shows the value the check
resolved, so it waits for the check of the latest version) and a hover on a plan's name (which evaluates
the plan). Prints the time of one check, each hover's answer time, what checking every edit in turn
would take (edits × one check) and the ratio. A benchmark, not a test: tests/test_lsp_server.py checks
the behaviour (only the latest version is checked) without timing it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def big_spec(kilobytes: int) -> str:
    base = (REPO / "specs" / "a1-tp-decode.ccost").read_text(encoding="utf-8")
    out = [base[:base.index("\nplan ")]]
    size, i = len(out[0]), 0
    while size < kilobytes * 1000:
        i += 1
        out.append(f'\nplan p{i} "plan {i}" {{\n  model = llama3_70b; cluster = hgx; phase = decode\n'
                   f"  batch = {i % 64 + 1}; tp = 8\n}}\n")
        size += len(out[-1])
    return "".join(out)


def position(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    i = text.index(needle) + offset
    return text.count("\n", 0, i), i - (text.rfind("\n", 0, i) + 1)


async def run(kilobytes: int, edits: int) -> None:
    from lsprotocol import types as L
    from pygls.lsp.client import LanguageClient

    text = big_spec(kilobytes)
    folder = Path(tempfile.mkdtemp(prefix="ccost-lsp-burst-"))
    spec = folder / "big.ccost"
    spec.write_text(text, encoding="utf-8")
    uri = spec.as_uri()
    client = LanguageClient("ccost-bench", "1")
    published: list[tuple[float, int | None]] = []

    @client.feature(L.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def _diagnostics(ls, params: L.PublishDiagnosticsParams):
        published.append((time.perf_counter(), params.version))

    await client.start_io(sys.executable, "-m", "ccost", "lsp", cwd=str(REPO))
    await client.initialize_async(L.InitializeParams(capabilities=L.ClientCapabilities()))
    client.initialized(L.InitializedParams())
    t0 = time.perf_counter()
    client.text_document_did_open(L.DidOpenTextDocumentParams(
        L.TextDocumentItem(uri=uri, language_id="ccost", version=1, text=text)))
    while not published:
        await asyncio.sleep(0.01)
    one_check = published[-1][0] - t0
    doc = L.TextDocumentIdentifier(uri)
    t0 = time.perf_counter()
    for v in range(2, edits + 2):
        text = text.replace("batch = 2; tp = 8", f"batch = {v % 60 + 2}; tp = 8", 1) if v > 2 else text
        client.text_document_did_change(L.DidChangeTextDocumentParams(
            L.VersionedTextDocumentIdentifier(uri=uri, version=v),
            [L.TextDocumentContentChangeWholeDocument(text=text)]))
    sent = time.perf_counter() - t0
    times = {}
    for name, at in (("unit (no check)", position(text, "450 GB/s  #", 5)),
                     ("field value (the check of the latest version)", position(text, "bandwidth        =")),
                     ("plan's numbers (check + evaluation)", position(text, "plan p1 ", 5))):
        t = time.perf_counter()
        answer = await client.text_document_hover_async(L.HoverParams(doc, L.Position(*at)))
        times[name] = (time.perf_counter() - t, answer is not None)
    last = edits + 1
    while not any(v == last for _, v in published):
        await asyncio.sleep(0.01)
    checked = len(published) - 1
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    print(f"document: {len(text.encode()) / 1000:.0f} kB; "
          f"one check (open to first diagnostics): {one_check:.2f} s")
    print(f"{edits} edits sent in {sent * 1000:.0f} ms; diagnostics published {checked} time(s) after them "
          f"(for version {last}, the latest)")
    for name, (dt, ok) in times.items():
        print(f"hover on a {name}: {dt:.2f} s{'' if ok else ' (no answer)'}")
    worst = max(dt for dt, _ in times.values())
    print(f"checking every edit in turn: {edits} × {one_check:.2f} s = {edits * one_check:.1f} s before the "
          f"first hover; the slowest hover took {worst:.2f} s ({edits * one_check / worst:.0f}× less)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kb", type=int, default=250)
    ap.add_argument("--edits", type=int, default=30)
    args = ap.parse_args()
    asyncio.run(run(args.kb, args.edits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
