"""Inline expectations for the bad-spec corpus (tests/bad/*.ccost), read and rewritten.

The format (documented for users of the corpus in tests/test_bad_corpus.py) is one comment per expected
diagnostic, on the line the diagnostic points at::

    tp = 0  # E:8: E203 `tp` must be at least 1; got 0

``# SEV[@WHERE]:COL: CODE MESSAGE``, where SEV is E or W; WHERE is absent (this line), ``+N``/``-N`` (N lines
below/above the comment) or ``FILE:LINE`` (a line of an imported file, path relative to the case's folder);
several markers may follow one another on one line. MESSAGE is the whole message, or its beginning followed
by ``…`` (a prefix, for long messages).

Lines are handled as text decoded with ``surrogateescape`` and split on ``\\n`` only, so rewriting a file
changes nothing but the expectation comments, even in a file that is not UTF-8 or has CRLF line ends.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

ELLIPSIS = "…"
# What the updater writes in full; a longer message is cut at a space and written as a prefix.
FULL_MESSAGE_LIMIT = 100
SEPARATOR = "  "  # between the code and the first marker, and between markers

# A marker starts a line or follows whitespace. LOOSE finds anything that means to be one, STRICT parses
# it: a LOOSE match that STRICT does not parse is a malformed expectation, never silently ignored.
LOOSE = re.compile(r"(?<!\S)#\s?[EW](?:@\S*?)?:")
STRICT = re.compile(
    r"(?<!\S)# (?P<sev>[EW])(?:@(?P<where>[+-]\d+|[^\s:]+:\d+))?:(?P<col>\d+): (?P<code>[EW]\d{3}) (?P<msg>)"
)


class MalformedExpectation(ValueError):
    pass


@dataclass(frozen=True)
class Diag:
    """A diagnostic as the corpus compares it; ``file`` is relative to the case's folder."""

    sev: str
    code: str
    file: str
    line: int
    col: int
    message: str

    def key(self) -> tuple[str, int, int, str]:
        return (self.file, self.line, self.col, self.code)

    def show(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.code} {self.message}"


@dataclass(frozen=True)
class Expectation:
    sev: str
    code: str
    file: str
    line: int
    col: int
    message: str  # without the trailing ellipsis
    prefix: bool
    at: int  # the 1-based line the comment is on
    where: str | None
    text: str  # the marker as written, e.g. "# E:8: E203 ..."

    def matches(self, d: Diag) -> bool:
        if (self.file, self.line, self.col, self.code) != d.key():
            return False
        return d.message.startswith(self.message) if self.prefix else d.message == self.message

    def show(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.code} {self.message}{ELLIPSIS if self.prefix else ''}"


def read_lines(path: Path) -> list[tuple[str, str]]:
    """(body, line end) pairs; joining them gives the file's bytes back."""
    text = path.read_bytes().decode("utf-8", "surrogateescape")
    parts = text.split("\n")
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if last and part == "":
            break
        if part.endswith("\r"):
            out.append((part[:-1], "\r\n" if not last else "\r"))
        else:
            out.append((part, "" if last else "\n"))
    return out


def write_lines(path: Path, lines: list[tuple[str, str]]) -> None:
    path.write_bytes("".join(b + e for b, e in lines).encode("utf-8", "surrogateescape"))


def split_line(body: str) -> tuple[str, list[str]]:
    """The code part (up to the first marker, trailing whitespace kept) and the markers as written."""
    starts = [m.start() for m in LOOSE.finditer(body)]
    if not starts:
        return body, []
    markers = []
    for a, b in zip(starts, starts[1:] + [len(body)]):
        markers.append(body[a:b].rstrip())
    return body[: starts[0]], markers


def parse(path: Path) -> list[Expectation]:
    own = path.name
    found = []
    for at, (body, _) in enumerate(read_lines(path), start=1):
        for marker in split_line(body)[1]:
            m = STRICT.match(marker)
            if not m:
                raise MalformedExpectation(f"{path.name}:{at}: malformed expectation {marker!r}")
            if m["code"][0] != m["sev"]:
                raise MalformedExpectation(f"{path.name}:{at}: {m['code']} under `# {m['sev']}`")
            msg = marker[m.end("msg"):]
            prefix = msg.endswith(ELLIPSIS)
            if prefix:
                msg = msg[: -len(ELLIPSIS)]
            where = m["where"]
            if where is None:
                file, line = own, at
            elif where[0] in "+-":
                file, line = own, at + int(where)
            else:
                file, _, ln = where.rpartition(":")
                file, line = os.path.normpath(file), int(ln)
            found.append(Expectation(m["sev"], m["code"], file, line, int(m["col"]), msg, prefix, at, where,
                                     marker))
    return found


def compare(path: Path, expected: list[Expectation], actual: list[Diag]) -> str | None:
    """None if every diagnostic is expected and every expectation met; otherwise a report that names the
    file and line of each difference, as a diff of expected (-) against actual (+)."""
    left = list(actual)
    missing = []
    for e in expected:
        hit = next((d for d in left if e.matches(d)), None)
        if hit is None:
            missing.append(e)
        else:
            left.remove(hit)
    if not missing and not left:
        return None
    lines = [f"{path}: the diagnostics differ from the inline expectations"]
    for e in missing:
        lines.append(f"{path}:{e.at}: expected, not reported: {e.text}")
    for d in left:
        where = path if d.file == path.name else path.parent / d.file
        lines.append(f"{where}:{d.line}: reported, not expected: # {d.sev}:{d.col}: {d.code} {d.message}")
    want = sorted(e.show() for e in expected)
    got = sorted(d.show() if not any(e.matches(d) and e.prefix for e in expected)
                 else next(e.show() for e in expected if e.matches(d)) for d in actual)
    lines += ["", "--- expected (inline comments)", "+++ actual (ccost check)"]
    lines += [ln for ln in difflib.unified_diff(want, got, lineterm="", n=len(want) + len(got))][2:]
    lines.append("(rewrite the comments: pytest tests/test_bad_corpus.py --update-expectations)")
    return "\n".join(lines)


def _cut(message: str) -> str:
    message = message.split("\n", 1)[0] + (ELLIPSIS if "\n" in message else "")
    if len(message) <= FULL_MESSAGE_LIMIT:
        return message
    head = message[:FULL_MESSAGE_LIMIT]
    return head[: head.rfind(" ")] + ELLIPSIS if " " in head else head + ELLIPSIS


def marker_for(d: Diag, where: str | None, message: str | None = None) -> str:
    at = "" if where is None else f"@{where}"
    return f"# {d.sev}{at}:{d.col}: {d.code} {_cut(d.message) if message is None else message}"


def update(path: Path, actual: list[Diag]) -> bool:
    """Rewrite the expectation comments of ``path`` from ``actual``; True if the file changed.

    An expectation that is met stays as written (a prefix stays a prefix); one whose diagnostic moved or
    changed its words is rewritten in place; a new diagnostic gets a marker at the end of its own line (a
    line past the end of the file: the last line, with ``@+N``; a diagnostic in another file: line 1, with
    ``@FILE:LINE``). Nothing else in the file changes, and no line is added or removed (that would move
    the diagnostics): a line left holding only stale markers keeps its code part, blank if it had none.
    """
    lines = read_lines(path)
    expected = parse(path)
    placed: dict[int, list[str]] = {}
    left = list(expected)
    pending = []
    for d in actual:
        hit = next((e for e in left if e.matches(d)), None)
        if hit is not None:
            left.remove(hit)
            placed.setdefault(hit.at, []).append(hit.text)
        else:
            pending.append(d)
    for d in pending:
        same = next((e for e in left if (e.file, e.line, e.col, e.code) == d.key()), None)
        if same is not None:  # the words changed: rewrite it where it was
            left.remove(same)
            placed.setdefault(same.at, []).append(marker_for(d, same.where))
        elif d.file != path.name:
            placed.setdefault(1, []).append(marker_for(d, f"{d.file}:{d.line}"))
        elif d.line <= len(lines):
            placed.setdefault(d.line, []).append(marker_for(d, None))
        else:
            placed.setdefault(len(lines), []).append(marker_for(d, f"+{d.line - len(lines)}"))
    new = []
    for at, (body, end) in enumerate(lines, start=1):
        code, old = split_line(body)
        markers = placed.get(at, [])
        if markers == old:
            new.append((body, end))
        elif markers:
            lead = code if old or code == "" else code + SEPARATOR
            new.append((lead + SEPARATOR.join(markers), end))
        else:
            new.append((code.rstrip(" \t"), end))
    if new == lines:
        return False
    write_lines(path, new)
    return True
