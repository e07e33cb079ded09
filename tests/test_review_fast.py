"""A review in a blink: the summary review, the chart cache, HarfBuzz font subsetting,
the HTML-only path. What is tested is that each shortcut gives the same review as the long way (no
timing: bench/report_bench.py measures the speed)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
A1 = Path("specs/a1-tp-decode.ccost")
EPOCH = "1767225600"


@pytest.fixture(scope="module")
def a1():
    """The real A1 review (check -> evaluate -> explain -> view), built from the repository root."""
    import os

    from ccost.report import review

    old = Path.cwd()
    os.chdir(REPO)
    try:
        return review(A1, include_git=False, environ={"SOURCE_DATE_EPOCH": EPOCH}, cwd=REPO)
    finally:
        os.chdir(old)


def _section(html: str, ident: str) -> str:
    start = html.index(f'<section class="chapter" id="{ident}"')
    return html[start:html.index("</section>", start) + len("</section>")]


def _figures(html: str) -> list[str]:
    return re.findall(r'<figure class="chart">.*?</figure>', html, flags=re.S)


# --- the summary review -----------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["screen", "print"])
def test_summary_shares_the_full_reviews_html(a1, variant):
    from ccost.report.render import render_html, render_summary_html

    full, short = render_html(a1.view, variant), render_summary_html(a1.view, variant)
    # The summary chapter (recommendation, key numbers, checklist verdicts, warnings): the same HTML.
    assert _section(short, "summary") == _section(full, "summary")
    # The cover's provenance stamp and the title: the same.
    stamp = re.compile(r'<table class="stamp">.*?</table>', re.S)
    assert stamp.search(short).group(0) == stamp.search(full).group(0)
    assert re.search(r"<h1.*?</h1>", short).group(0) == re.search(r"<h1.*?</h1>", full).group(0)
    # Every chart of the full review, and nothing else: A1 has a sweep (2 charts) and a comparison (1).
    assert _figures(short) == _figures(full) and len(_figures(full)) == 3
    # What the summary leaves to the full review.
    for ident in ("inputs", "checklist", "assumptions", "appendix", "plan-tp8"):
        assert f'id="{ident}"' in full and f'id="{ident}"' not in short
    assert "design review · summary" in short and 'class="toc"' not in short


@pytest.mark.parametrize("variant", ["screen", "print"])
def test_summary_built_alone_is_the_summary_of_the_full_review(a1, variant):
    """`report --summary` skips what only the full review shows (the step-by-step derivations, the
    highlighted spec): the summary it writes is the one the full review's view model gives, byte for
    byte."""
    import os

    from ccost.report import review
    from ccost.report.render import render_summary_html

    old = Path.cwd()
    os.chdir(REPO)
    try:
        lean = review(A1, include_git=False, environ={"SOURCE_DATE_EPOCH": EPOCH}, cwd=REPO, summary=True)
    finally:
        os.chdir(old)
    assert lean.view.sources == () and all(p.groups == () for p in lean.view.plans)  # what it skipped
    assert a1.view.sources and all(p.groups for p in a1.view.plans)
    assert render_summary_html(lean.view, variant) == render_summary_html(a1.view, variant)
    assert lean.document == a1.document


def test_summary_without_charts_has_no_chart_chapter(a1):
    import dataclasses

    from ccost.report.render import render_summary_html

    view = dataclasses.replace(a1.view, plans=tuple(dataclasses.replace(p, figures=()) for p in a1.view.plans),
                               sweeps=tuple(dataclasses.replace(s, figures=()) for s in a1.view.sweeps),
                               compares=tuple(dataclasses.replace(c, figure=None) for c in a1.view.compares),
                               searches=())
    html = render_summary_html(view, "print")
    assert 'id="charts"' not in html and 'id="summary"' in html


def test_summary_output_paths(tmp_path):
    from ccost.report import output_paths

    p = output_paths("specs/a1.ccost", None, cwd=tmp_path, summary=True)
    assert p == {"html": tmp_path / "reports/a1-summary.html", "pdf": tmp_path / "reports/a1-summary.pdf",
                 "yaml": tmp_path / "reports/a1.yaml"}
    p = output_paths("specs/a1.ccost", "out/", "html", cwd=tmp_path, summary=True)
    assert p == {"html": tmp_path / "out/a1-summary.html", "yaml": tmp_path / "out/a1.yaml"}
    # a file named by -o is written as named
    p = output_paths("specs/a1.ccost", "out/short.pdf", "pdf", cwd=tmp_path, summary=True)
    assert p == {"pdf": tmp_path / "out/short.pdf", "yaml": tmp_path / "out/short.yaml"}


def test_cli_summary_html_writes_the_summary_and_the_yaml(tmp_path, capsys, monkeypatch):
    from ccost.cli import main

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    assert main(["report", str(A1), "--summary", "--format", "html", "-o", f"{tmp_path}/", "--no-git"]) == 0
    out = capsys.readouterr().out.split()
    assert [Path(p).name for p in out] == ["a1-tp-decode-summary.html", "a1-tp-decode.yaml"]
    html = (tmp_path / "a1-tp-decode-summary.html").read_text()
    assert 'id="summary"' in html and 'id="charts"' in html and 'id="appendix"' not in html
    # the YAML is the results document, whichever review is written
    assert (tmp_path / "a1-tp-decode.yaml").read_bytes() == (REPO / "reports/a1-tp-decode.yaml").read_bytes()
    assert not list(tmp_path.glob("*.pdf"))


def test_cli_html_only_is_the_committed_review(tmp_path, capsys, monkeypatch):
    """`--format html` writes exactly the HTML `--format both` writes (reports/ holds it)."""
    from ccost.cli import main

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    assert main(["report", str(A1), "--format", "html", "-o", f"{tmp_path}/", "--no-git"]) == 0
    assert (tmp_path / "a1-tp-decode.html").read_bytes() == (REPO / "reports/a1-tp-decode.html").read_bytes()
    assert not (tmp_path / "a1-tp-decode.pdf").exists()


@pytest.mark.slow
def test_summary_pdf_is_short_deterministic_and_inside_the_page(a1, tmp_path, monkeypatch):
    import pypdf

    from ccost.cli import main
    from ccost.report.render import render_summary_html
    from test_report import _boxes_past_right_margin

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    pdfs = []
    for run in ("one", "two"):
        assert main(["report", str(A1), "--summary", "--format", "pdf", "-o", f"{tmp_path}/{run}/",
                     "--no-git"]) == 0
        pdfs.append((tmp_path / run / "a1-tp-decode-summary.pdf").read_bytes())
    assert pdfs[0] == pdfs[1]
    reader = pypdf.PdfReader(io.BytesIO(pdfs[0]))
    assert 2 <= len(reader.pages) <= 4
    text = " ".join(p.extract_text() for p in reader.pages)
    # the recommendation and key numbers of the summary chapter, as the full review prints them
    rec_title = a1.view.summary.recommendations[0][0]
    assert rec_title.split("`")[0].strip() in text
    assert "Key numbers" in text and "Checklist verdicts" in text and "Charts" in text
    assert _boxes_past_right_margin(render_summary_html(a1.view, "print")) == []


# --- the chart cache --------------------------------------------------------------------------------

def test_chart_cache_returns_the_same_svg_without_drawing(tmp_path, monkeypatch):
    from ccost.report import chart_cache

    monkeypatch.delenv("CCOST_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(chart_cache, "_memory", {})
    calls = []

    @chart_cache.cached
    def chart(xs, title):
        calls.append(xs)
        return f"<svg>{xs!r} {title}</svg>"

    assert chart([1.0, 2.0], "t") == "<svg>[1.0, 2.0] t</svg>" and len(calls) == 1
    chart_cache._memory.clear()  # a new process: only the folder remembers
    assert chart([1.0, 2.0], "t") == "<svg>[1.0, 2.0] t</svg>" and len(calls) == 1
    assert len(list((tmp_path / "ccost" / "charts").glob("*.svg"))) == 1
    # a cut file is not a chart: drawn again (and stored whole)
    stored = next((tmp_path / "ccost" / "charts").glob("*.svg"))
    stored.write_text("<svg>[1.0, 2.0")
    chart_cache._memory.clear()
    assert chart([1.0, 2.0], "t") == "<svg>[1.0, 2.0] t</svg>" and len(calls) == 2
    assert stored.read_text() == "<svg>[1.0, 2.0] t</svg>"
    # any change of a value, however small, is another chart
    assert chart([1.0, 2.0000000000000004], "t") != chart([1.0, 2.0], "t") and len(calls) == 3


def test_chart_cache_off_and_unwritable(tmp_path, monkeypatch):
    from ccost.report import chart_cache

    calls = []

    @chart_cache.cached
    def chart(x):
        calls.append(x)
        return f"<svg>{x}</svg>"

    monkeypatch.setattr(chart_cache, "_memory", {})
    monkeypatch.setenv("CCOST_NO_CACHE", "1")  # off: nothing written anywhere
    assert chart_cache.cache_dir() is None and chart(1) == "<svg>1</svg>"
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.delenv("CCOST_NO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # cannot be made: drawn, not an error
    chart_cache._memory.clear()
    assert chart(1) == "<svg>1</svg>" and len(calls) == 2


def test_cached_chart_is_the_drawn_chart(tmp_path, monkeypatch):
    from ccost.report import chart_cache, charts

    monkeypatch.delenv("CCOST_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(chart_cache, "_memory", {})
    args = (["a", "b"], [1e-3, 2e-3], [1e-4, 3e-4], [2e-4, 1e-4], [1.3e-3, 2.4e-3], "t")
    drawn = charts.compare_chart.uncached(*args)
    assert charts.compare_chart(*args) == drawn  # miss: drawn and stored
    chart_cache._memory.clear()
    assert charts.compare_chart(*args) == drawn  # hit: read back
    assert "<svg" in drawn


# --- fonts subset by HarfBuzz -----------------------------------------------------------------------

@pytest.mark.slow
def test_harfbuzz_subsets_give_the_same_text_as_fonttools(a1):
    """The PDF with HarfBuzz subsets reads back the same text, page by page, as with WeasyPrint's own
    fontTools subsets, and embeds no more font data."""
    import pypdf

    from ccost.report import fonts
    from ccost.report.render import render_html, render_pdf

    if not fonts.available():
        pytest.skip("uharfbuzz is not installed")
    html = render_html(a1.view, "print")
    fast = render_pdf(html)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fonts, "available", lambda: False)
        slow = render_pdf(html)

    def pages(pdf):
        return [p.extract_text() for p in pypdf.PdfReader(io.BytesIO(pdf)).pages]

    def font_bytes(pdf):
        reader = pypdf.PdfReader(io.BytesIO(pdf))
        total = 0
        for page in reader.pages:
            for f in (page["/Resources"].get("/Font") or {}).values():
                desc = f.get_object()["/DescendantFonts"][0].get_object()["/FontDescriptor"].get_object()
                total += len(desc["/FontFile2"].get_object().get_data())
        return total

    assert pages(fast) == pages(slow)
    assert font_bytes(fast) <= font_bytes(slow) * 1.1


def test_harfbuzz_subset_keeps_glyph_ids_and_only_the_used_glyphs():
    from ccost.report import fonts

    if not fonts.available():
        pytest.skip("uharfbuzz is not installed")
    from fontTools.ttLib import TTFont

    path = _dejavu()
    data = path.read_bytes()
    full = TTFont(io.BytesIO(data))
    order = full.getGlyphOrder()
    used = {order.index(full.getBestCmap()[ord(c)]) for c in "α-β 42"}
    sub = TTFont(io.BytesIO(fonts.subset_font(data, 0, used, hinting=False, notdef_outline=False)))
    glyf = sub["glyf"]
    kept = sub.getGlyphOrder()
    assert len(kept) == max(used) + 1  # ids up to the last used one, so the PDF's ids stay valid
    for gid in used:  # the used glyphs keep their ids and outlines
        assert glyf[kept[gid]].numberOfContours == full["glyf"][order[gid]].numberOfContours
    drawn = [gid for gid, name in enumerate(kept) if glyf[name].numberOfContours]
    assert set(drawn) <= used | {0}  # every other glyph is empty
    assert "GSUB" not in sub and "GPOS" not in sub


def test_the_pdf_fonts_take_the_harfbuzz_path(monkeypatch):
    """With uharfbuzz installed (a dependency), every font of a PDF is subset by ``fonts.subset_font``:
    neither of WeasyPrint's own subsetters (fontTools, or the system's libharfbuzz-subset) runs."""
    import weasyprint.pdf.fonts as wfonts

    from ccost.report import fonts
    from ccost.report.render import render_pdf

    assert fonts.available(), "uharfbuzz is a dependency of ccost (pyproject.toml)"
    assert fonts.subsetter() == "uharfbuzz"
    calls = []
    real = fonts.subset_font

    def spy(data, index, glyphs, hinting, notdef_outline):
        out = real(data, index, glyphs, hinting, notdef_outline)
        calls.append((len(glyphs), out is not None))
        return out

    def refuse(self, *args):
        raise AssertionError("WeasyPrint's own subsetter ran")

    monkeypatch.setattr(fonts, "subset_font", spy)
    monkeypatch.setattr(wfonts.Font, "_fonttools_subset", refuse)
    monkeypatch.setattr(wfonts.Font, "_harfbuzz_subset", refuse)
    # two faces: DejaVu Sans and DejaVu Sans Mono (Bold would be a third)
    pdf = render_pdf("<p>α-β 42 <code>tp = 8</code></p>")
    assert pdf.startswith(b"%PDF")
    assert len(calls) == 2 and all(ok for _, ok in calls)
    # and WeasyPrint's method is its own again once the PDF is written
    assert wfonts.Font.subset.__name__ == "subset" and wfonts.Font.subset.__qualname__.startswith("Font.")


def test_fonts_subsetter_names_weasyprints_choice_without_uharfbuzz(monkeypatch):
    from weasyprint.text import ffi

    from ccost.report import fonts

    monkeypatch.setattr(fonts, "available", lambda: False)
    monkeypatch.setattr(ffi, "harfbuzz_subset", None)
    assert fonts.subsetter() == "fontTools"


@pytest.mark.parametrize("enabled", [True, False])
def test_the_cycle_collector_is_as_it_was_after_a_pdf(enabled):
    """``render_pdf`` turns Python's cycle collector off while WeasyPrint runs (a speed-up); afterwards
    it is on or off as before and nothing stays frozen, also when the render fails."""
    import gc

    from ccost.report.render import without_cycle_collection

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    assert gc.get_freeze_count() == 0
    try:
        with without_cycle_collection():
            assert not gc.isenabled() and gc.get_freeze_count() > 0
        assert gc.isenabled() is enabled and gc.get_freeze_count() == 0
        with pytest.raises(RuntimeError):
            with without_cycle_collection():
                raise RuntimeError("a render that fails")
        assert gc.isenabled() is enabled and gc.get_freeze_count() == 0
        # objects a caller froze itself stay frozen
        gc.freeze()
        mine = gc.get_freeze_count()
        with without_cycle_collection():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled and gc.get_freeze_count() == mine
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


def _dejavu() -> Path:
    import subprocess

    out = subprocess.run(["fc-match", "-f", "%{file}", "DejaVu Sans"], capture_output=True, text=True)
    path = Path(out.stdout.strip())
    if not path.is_file():
        pytest.skip("DejaVu Sans not found by fontconfig")
    return path


# --- WeasyPrint's library lookups, remembered ------------------------------------------------------

_IMPORT = """
import ctypes.util, sys
real = ctypes.util.find_library
if sys.argv[1] == "no-lookups":
    def refuse(name):
        raise AssertionError(f"find_library({name!r}) was called")
    ctypes.util.find_library = real = refuse
from ccost.report.weasy import import_weasyprint
w = import_weasyprint()
assert w.HTML and ctypes.util.find_library is real, "find_library is restored"
"""


# slow (~1.5 s: two fresh interpreters import WeasyPrint): out of the inner loop, run by CI
@pytest.mark.slow
def test_weasyprint_library_lookups_are_remembered(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from ccost.report import weasy

    if not sys.platform.startswith("linux"):
        pytest.skip("the table is kept on Linux only")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("CCOST_NO_CACHE", None)
    table = tmp_path / "ccost" / "libraries.json"

    def run(mode):
        return subprocess.run([sys.executable, "-c", _IMPORT, mode], env=env, capture_output=True, text=True)

    first = run("look-up")
    assert first.returncode == 0, first.stderr
    saved = json.loads(table.read_text())
    assert saved["stamp"] == weasy._stamp()
    # what WeasyPrint asked for: pango (found under one of its names) among them
    assert any(v and "pango-1.0" in v for v in saved["found"].values())
    # a second run asks the system nothing
    second = run("no-lookups")
    assert second.returncode == 0, second.stderr
    # a table of another state of the system is not used: it is rebuilt
    table.write_text(json.dumps({"stamp": "linux|another ld.so.cache|", "found": {"pango-1.0": "bogus"}}))
    assert run("no-lookups").returncode != 0
    assert run("look-up").returncode == 0
    assert json.loads(table.read_text()) == saved
