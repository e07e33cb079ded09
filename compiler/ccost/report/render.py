"""Rendering: the Jinja environment, the two HTML variants, the PDF, and the highlighted spec source.

Jinja runs with ``autoescape=True`` (STYLE.md: ``select_autoescape`` would not escape ``*.html.j2``, and
spec titles are untrusted) and ``StrictUndefined`` (a misspelt field in a template is an error, not an
empty cell). The only unescaped inserts are SVG made by ``ccost.report.charts`` and Pygments' output,
both of which escape the text they carry.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import jinja2
from markupsafe import Markup, escape

from ccost.diagnostics import escape_controls
from ccost.report.view import ReportView, SourceFile
from ccost.resources import resource_dir

VARIANTS = ("screen", "print")


_BREAK_AFTER = re.compile(r"([/\-_.:+=&?,])")


def soft_wrap(text: object, longest: int = 24) -> str:
    """``text`` with zero-width spaces inside every word longer than ``longest`` characters (a URL in a
    ``source``, a long identifier): after its punctuation, and every ``longest`` characters of a run
    without any, so a table column can wrap it instead of growing past the page. Short words are kept."""
    def soften(word: str) -> str:
        if len(word) <= longest:
            return word
        parts = _BREAK_AFTER.sub("\\1\u200b", word).split("\u200b")
        return "\u200b".join("\u200b".join(p[i:i + longest] for i in range(0, len(p), longest)) or p
                              for p in parts)

    return " ".join(soften(w) for w in str(text).split(" "))


_CODE_SPAN = re.compile(r"(`[^`\n]+`)")


def prose(text: object, soft: bool = False) -> Markup:
    """Text of the review with its `code spans` as ``<code>``: recommendations, checklist notes, warnings
    and assumptions name plans, fields and commands in backticks (as ``ccost eval`` prints them), which a
    browser or PDF would otherwise show as literal backticks. Everything is escaped; ``soft`` adds the
    soft break points of ``soft_wrap`` to the plain text (table cells)."""
    out = []
    for part in _CODE_SPAN.split(str(text)):
        if len(part) > 1 and part.startswith("`") and part.endswith("`"):
            out.append(Markup("<code>%s</code>") % part[1:-1])
        elif part:
            out.append(escape(soft_wrap(part) if soft else part))
    return Markup("").join(out)


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = _environment()
    env.filters["soft"] = soft_wrap
    env.filters["prose"] = prose
    return env


def _environment() -> jinja2.Environment:
    from ccost.report.chart_cache import template_cache

    return jinja2.Environment(
        bytecode_cache=template_cache(),
        loader=jinja2.FileSystemLoader(str(resource_dir("templates"))),
        autoescape=True,
        finalize=visible,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
        keep_trailing_newline=True,
        auto_reload=False,
    )


def visible(value):
    """Every value a template prints, with control characters (NUL, ESC, ...) and bidirectional overrides
    (U+202E reverses what follows) written as escapes (``\\x00``, ``\\u202e``), as the terminal shows them
    (``diagnostics.escape_controls``): a title or a spec line cannot hide or reorder text in the review.
    Markup (the highlighted spec, the charts) keeps being markup."""
    if isinstance(value, str):
        shown = escape_controls(str(value))
        if shown != value:
            return Markup(shown) if isinstance(value, Markup) else shown
    return value


def render_html(view: ReportView, variant: str = "screen") -> str:
    """The review as HTML. ``screen`` is the self-contained file written next to the PDF; ``print`` is the
    same content with the A4 page layout, fed to WeasyPrint."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown report variant {variant!r}; expected one of {VARIANTS}")
    return environment().get_template(f"report/{variant}.html").render(r=view)


def render_summary_html(view: ReportView, variant: str = "screen") -> str:
    """The summary review (``ccost report --summary``): the full review's cover and summary chapter, then
    its charts, rendered by the full review's own template blocks from the same view model, so the parts
    they share are the same HTML (``report/summary.html`` fills the blocks the full review's chapters
    are in)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown report variant {variant!r}; expected one of {VARIANTS}")
    return environment().get_template("report/summary.html").render(r=view, variant=f"report/{variant}.html")


def render_pdf(print_html: str, fetcher=None) -> bytes:
    """Render the print variant to PDF bytes; nothing is fetched but ``data:`` URIs.

    ``fetcher`` defaults to a fresh ``DataOnlyFetcher``; tests pass a spy. The PDF's creation date is
    the page's ``dcterms.created`` (the provenance date). The font subsets carry a timestamp that
    fontTools takes from ``SOURCE_DATE_EPOCH`` (else the clock): ``write_review`` sets it.
    """
    from ccost.report.weasy import import_weasyprint

    weasyprint = import_weasyprint()  # its shared libraries looked up once per system, not per run

    from ccost.report.fetcher import DataOnlyFetcher
    from ccost.report.fonts import harfbuzz_subsetting

    fetcher = fetcher or DataOnlyFetcher()
    # base_url None: a relative URL cannot resolve to the working folder either.
    document = weasyprint.HTML(string=print_html, base_url=None, url_fetcher=fetcher)
    with harfbuzz_subsetting(), without_cycle_collection():  # (ccost.report.fonts; see below)
        return document.write_pdf()


@contextmanager
def without_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off for one PDF, and what was alive before it never scanned again.

    WeasyPrint allocates a few hundred thousand boxes, styles and cffi objects per review, and each
    allocation burst makes the collector walk every live object (the parsed spec, the view model,
    WeasyPrint's and Pango's modules) looking for cycles: about 0.4 s of A1's 2.4 s render, for almost
    nothing (reference counting frees nearly all of it; the peak memory grows by ~3 MB). The objects
    alive before the render are moved to the permanent generation (``gc.freeze``) and the collector is
    off until the PDF is written; then both are as they were, and the cycles left are collected as usual."""
    was_enabled = gc.isenabled()
    freeze = gc.get_freeze_count() == 0  # a caller's own frozen objects stay frozen: leave it alone
    if freeze:
        gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.unfreeze()
        if was_enabled:
            gc.enable()


#: A run of the highlighted source with no break opportunity longer than ``LONG_RUN`` characters (a
#: generated comment, a long string) gets a zero-width space every ``BREAK_EVERY`` characters. WeasyPrint
#: lays such a run out again for each printed line it wraps onto, so its time grew with the square of the
#: run (issue 31: one 100 kB comment line took over 60 s to review; bench/linear_inputs.py). Real spec
#: lines have spaces far more often, so their text, and every committed review, is unchanged.
LONG_RUN = 200
BREAK_EVERY = 100
_TAG_OR_TEXT = re.compile(r"(<[^>]*>)")
_UNBROKEN = re.compile(r"(?:[^\s<>&]|&#?\w+;){%d,}" % LONG_RUN)
_UNIT = re.compile(r"&#?\w+;|.", re.DOTALL)


def _break_long_runs(html: str) -> str:
    """``html`` with a zero-width space every ``BREAK_EVERY`` characters of each text run longer than
    ``LONG_RUN`` (an entity such as ``&amp;`` counts as one character; tags are left alone). Linear."""
    def soften(m: re.Match) -> str:
        units = _UNIT.findall(m.group(0))
        return "\u200b".join("".join(units[i:i + BREAK_EVERY]) for i in range(0, len(units), BREAK_EVERY))

    parts = _TAG_OR_TEXT.split(html)
    return "".join(p if i % 2 else _UNBROKEN.sub(soften, p) for i, p in enumerate(parts))


def highlight_source(path: str, text: str) -> SourceFile:
    """A spec file, line-numbered and highlighted with the ``.ccost`` Pygments lexer (inline styles, so
    the HTML needs no stylesheet file), with break opportunities in overly long runs (``LONG_RUN``)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    from ccost.lexer import CcostLexer

    formatter = HtmlFormatter(noclasses=True, linenos="inline", style="default", nobackground=True,
                              wrapcode=True)
    return SourceFile(path, _break_long_runs(highlight(text, CcostLexer(), formatter)))
