"""One Diagnostic type for every stage, a registry of error codes, and rendering.

Every stage (parse, resolve, check, lower, calibrate, ...) reports problems as ``Diagnostic`` values and
collects them in a ``Diagnostics`` bag instead of raising on the first one, so a user sees all the errors of
a file in one run (docs/language.md, Diagnostics; principle: diagnostics are a product). A stage that cannot
go on raises ``CcostError`` carrying the bag; the CLI renders it and exits 2. No other exception type is meant
to reach a user.

Rendering follows ruff / rustc::

    specs/x.ccost:4:15: error[E201]: alpha needs a time, like 2 us; got a plain number
      |
    4 |   alpha     = 2
      |               ^
      = help: write the unit after the number: `alpha = 2 us`
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Iterator


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source file. Lines and columns are 1-based; ``end_*`` is exclusive on the column."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def point(file: str, line: int, column: int) -> "Span":
        return Span(file, line, column, line, column + 1)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


# The registry of codes: one line each, so messages and docs never drift between call sites.
# E0xx syntax, E1xx names and references, E2xx units and values, E3xx topology, E4xx evaluation,
# E5xx tools (calibrate, fmt, diff), W... warnings.
CODES: dict[str, str] = {
    "E001": "syntax error",
    "E002": "file cannot be read (missing, not UTF-8, too large)",
    "E003": "unterminated string or block",
    "E004": "two members on one line",
    "E005": "missing `=` in a member",
    "E006": "expression nested too deeply or of too many operators",
    "E101": "unknown reference",
    "E102": "duplicate name",
    "E103": "unknown field",
    "E104": "missing required field",
    "E105": "import cycle",
    "E106": "imported file not found",
    "E107": "extends cycle or extends of another kind",
    "E108": "reference to a block of the wrong kind",
    "E109": "more than one policy block",
    "E110": "a keyword used as a name",
    "E111": "unknown function or wrong arguments",
    "E112": "reference cycle between fields (`a.x` needs `b.y` needs `a.x`)",
    "E113": "import refused: outside the project or std/, absolute, nested too deeply, or past the total size",
    "E201": "wrong dimension for a field",
    "E202": "unknown unit",
    "E203": "value out of range",
    "E204": "not one of the allowed values",
    "E205": "wrong type (number, string, list, reference)",
    "E206": "units do not combine",
    "E207": "fields of one block contradict each other (a model's heads, experts or parameter split; a "
            "traffic's arrivals or lengths)",
    "E301": "parallel degrees do not fit the cluster",
    "E302": "inter_node link missing on a multi-node cluster",
    "E303": "a training target's global batch does not split into whole sequences per replica (or contradicts `batch`)",
    "E401": "plan cannot be evaluated",
    "E402": "search, sweep or written list too large",
    "E404": "a search's model × cluster × phase × stack combination cannot be evaluated",
    "E403": "a cost asked of a plan that is not priced (no price per GPU-hour or node-hour)",
    "E501": "calibration log cannot be read or fitted",
    "E502": "git revision or file cannot be read",
    "E503": "formatting would change the meaning of the spec",
    "E504": "an output (review, results YAML, reformatted spec) cannot be rendered or written",
    "W501": "calibration log: rows not fitted, or counts that disagree",
    "E510": "a Hugging Face config.json cannot be read or does not describe a model",
    "W510": "config.json's parameter count disagrees with the checkpoint's size",
    "E511": "`ccost init`: the file to write already exists or cannot be written",
    "E512": "an optional part of ccost (an extra: `lsp`, `distributed`) is not installed; the help gives the command",
    "E513": "a search's worker processes or Dask cluster failed (scheduler unreachable, worker died)",
    "E514": "`ccost export`: no online plan or capacity search to export, or its search finds no fleet",
    "E515": "a traffic's `trace` file cannot be read or holds no request token counts",
    "W301": "tensor-parallel group leaves the NVLink domain",
    "W302": "tensor parallelism does not divide kv_heads",
    "W303": "pipeline parallelism does not divide layers",
    "W304": "expert parallelism does not divide experts",
    "W305": "a training choice that has no effect as written",
    "W306": "a serving field that has no effect as written",
    "W307": "context parallelism does not split the sequence into equal chunks",
    "W308": "micro-batches of unequal size",
    "W309": "a training target whose goodput cannot be modelled (the cluster gives no `checkpoint_bandwidth`)",
    "W401": "plan does not fit in GPU memory",
    "W402": "achieved_flops absent; peak flops used",
}

#: Registered codes that no stage raises, each with why. They keep their number (a code is never given a
#: second meaning) and the Diagnostics table of docs/language.md says they are not raised.
#: tests/test_diagnostic_codes.py holds both ways: every code in the sources is in ``CODES``, and every
#: code in ``CODES`` is raised somewhere or is here.
RESERVED: dict[str, str] = {
    "W402": "a FLOP-bound plan on a GPU without `achieved_flops` is a `warn` of checklist item 1, whose note "
            "says which FLOP/s the compute was priced at (the peak, peak × the stack's gemm_efficiency, or a "
            "measured kernel curve's rate, which passes), as `ccost explain` derives it",
}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    span: Span | None = None
    help: str | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.code not in CODES:  # a programming error, caught by the test suite
            raise ValueError(f"unregistered diagnostic code {self.code}")

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


def error(code: str, message: str, span: Span | None = None, help: str | None = None,
          notes: Iterable[str] = ()) -> Diagnostic:
    return Diagnostic(code, Severity.ERROR, message, span, help, tuple(notes))


def warning(code: str, message: str, span: Span | None = None, help: str | None = None,
            notes: Iterable[str] = ()) -> Diagnostic:
    return Diagnostic(code, Severity.WARNING, message, span, help, tuple(notes))


@dataclass
class Diagnostics:
    """A bag that a stage fills; ``raise_if_errors`` ends the stage once, with all of them."""

    items: list[Diagnostic] = field(default_factory=list)
    _seen: set[Diagnostic] = field(default_factory=set, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._seen = set(self.items)

    def add(self, d: Diagnostic) -> None:
        # A set, not `d in self.items`: 20,000 errors must not cost 20,000² comparisons.
        if d not in self._seen:
            self._seen.add(d)
            self.items.append(d)

    def extend(self, ds: Iterable[Diagnostic]) -> None:
        for d in ds:
            self.add(d)

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.is_error]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.WARNING]

    def has_errors(self) -> bool:
        return any(d.is_error for d in self.items)

    def raise_if_errors(self) -> None:
        if self.has_errors():
            raise CcostError(self.sorted())

    def sorted(self) -> list[Diagnostic]:
        def key(d: Diagnostic):
            s = d.span
            return (s.file, s.line, s.column) if s else ("", 0, 0)
        return sorted(self.items, key=key)


class CcostError(Exception):
    """Raised by a stage that cannot go on; carries every diagnostic collected so far."""

    def __init__(self, diagnostics: Diagnostic | Iterable[Diagnostic]):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics: list[Diagnostic] = list(diagnostics)
        super().__init__("; ".join(f"{d.code}: {d.message}" for d in self.diagnostics))


# ---------------------------------------------------------------------------------------------------
# Rendering

_COLOURS = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "note": "\x1b[1;36m",
            "bold": "\x1b[1m", "blue": "\x1b[1;34m", "reset": "\x1b[0m"}


# Control characters (C0 but tab and newline, DEL, C1) and the bidirectional overrides a title or a file
# may carry: written raw, `\x1b[2J` clears the terminal, `\x1b]0;...\x07` retitles it, U+202E reverses
# what follows. Every text ccost prints for people goes through ``escape_controls``.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\u202e``): safe on a
    terminal, and still says what the character was. Tabs and newlines are kept."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


def _visible_line(line: str) -> str:
    """A source line for the caret display: each control character becomes one visible character (the
    Unicode control pictures ␛ ␇ ..., or �), so the carets below stay under the right column."""
    def picture(m: re.Match) -> str:
        o = ord(m.group())
        return chr(0x2400 + o) if o < 0x20 else "\u2421" if o == 0x7F else "\ufffd"
    return _CONTROL.sub(picture, line)


def use_colour(stream=None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    stream = stream or sys.stderr
    if os.environ.get("NO_COLOR"):
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def render(d: Diagnostic, sources: dict[str, str] | None = None, colour: bool = False,
           max_caret_lines: int = 1) -> str:
    """Render one diagnostic. ``sources`` maps a file name to its text, to show the line and carets."""

    def c(name: str, text: str) -> str:
        return f"{_COLOURS[name]}{text}{_COLOURS['reset']}" if colour else text

    sev = d.severity.value
    where = escape_controls(f"{d.span}: ") if d.span else ""
    out = [f"{c('bold', where) if where else ''}{c(sev, f'{sev}[{d.code}]')}: {escape_controls(d.message)}"]
    text = (sources or {}).get(d.span.file) if d.span else None
    if d.span and text is not None:
        lines = text.split("\n")  # lines as the lexer counts them (splitlines would also split at \x1c, \u2028 ...)
        if 1 <= d.span.line <= len(lines):
            line_text = _visible_line(lines[d.span.line - 1].rstrip("\r").replace("\t", " "))
            if len(line_text) > 200:  # a 10 MB one-line file should not flood the terminal
                line_text = line_text[:200] + " ..."
            gutter = str(d.span.line)
            pad = " " * len(gutter)
            start = max(d.span.column, 1)
            if d.span.end_line == d.span.line:
                end = max(d.span.end_column, start + 1)
            else:
                end = len(line_text) + 1
            end = min(end, max(len(line_text) + 1, start + 1), start + 200)
            carets = " " * (start - 1) + "^" * max(end - start, 1)
            out.append(f"{pad} {c('blue', '|')}")
            out.append(f"{c('blue', gutter)} {c('blue', '|')} {line_text}")
            out.append(f"{pad} {c('blue', '|')} {c(sev, carets)}")
    pad = " " * (len(str(d.span.line)) if d.span and text is not None else 0)
    for note in d.notes:
        out.append(f"{pad} {c('blue', '=')} note: {escape_controls(note)}")
    if d.help:
        out.append(f"{pad} {c('blue', '=')} help: {escape_controls(d.help)}")
    return "\n".join(out)


def render_all(diags: Iterable[Diagnostic], sources: dict[str, str] | None = None, colour: bool = False,
               limit: int = 50) -> str:
    """Render many, capped with '... and N more' so a pathological file cannot flood the terminal."""
    diags = list(diags)
    shown = [render(d, sources, colour) for d in diags[:limit]]
    if len(diags) > limit:
        shown.append(f"... and {len(diags) - limit} more")
    n_err = sum(1 for d in diags if d.is_error)
    n_warn = sum(1 for d in diags if d.severity is Severity.WARNING)
    parts = []
    if n_err:
        parts.append(f"{n_err} error{'s' if n_err != 1 else ''}")
    if n_warn:
        parts.append(f"{n_warn} warning{'s' if n_warn != 1 else ''}")
    if parts:
        shown.append(", ".join(parts))
    return "\n\n".join(shown[:-1]) + ("\n\n" if len(shown) > 1 else "") + shown[-1] if shown else ""
