"""Inputs that took time out of proportion to their size are bounded early, with a clear error, or made
linear. bench/linear_inputs.py prints the time against the size of each; these tests
check the diagnostics and the mechanisms, never a time (tests/README.md: speed targets live in bench/).

* `layers = 0+0+…` of 1.3 M terms took 21–44 s and 1.9 GB to reach E006: the parser now stops at the
  201st operator of one expression, before Lark builds a tree (syntax/parse.py, MAX_OPERATORS);
* a list of 1 M items took 37 s and 1.4 GB to reach E402: the parser stops at the 10,001st item
  (schema.MAX_LIST_ITEMS);
* 100 imports of 4 MiB made a 420 MB HTML review: a spec and its imports come to at most 8 MiB
  (schema.MAX_TOTAL_BYTES, E113);
* a review of one 100 kB comment line took over 60 s: WeasyPrint lays an unbroken run out again for each
  printed line it wraps onto; the cover shows at most 600 characters of the opening comment, the source
  appendix gets a break opportunity every 100 characters of a run longer than 200, and a title or a
  string field is at most 1,000 characters (a 20,000-character title took two minutes).
"""

from __future__ import annotations

from pathlib import Path

from ccost import schema as SC
from ccost.check import check_file, check_text
from ccost.report.build import ABOUT_CHARS, opening_comment
from ccost.report.render import BREAK_EVERY, LONG_RUN, highlight_source
from ccost.syntax.parse import MAX_OPERATORS

REPO = Path(__file__).resolve().parent.parent


def test_a_sum_of_a_million_terms_stops_at_the_first_operator_past_the_bound():
    text = "model m { layers = " + "+".join(["0"] * 1_300_000) + "; hidden = 8; params = 1e6 }\n"
    r = check_text(text, "x.ccost")
    (d,) = r.diagnostics
    assert (d.code, d.message, d.span.line, d.span.column) == (
        "E006", f"an expression of more than {MAX_OPERATORS} operators", 1, 21)  # the first `+`
    # at the bound it still parses (and the tree is as deep as its terms: the builder's E006)
    at = "model m { layers = " + "+".join(["1"] * (MAX_OPERATORS + 1)) + "; hidden = 8; params = 1e6 }\n"
    assert [d.message for d in check_text(at, "x.ccost").diagnostics] == [
        f"expression nested more than {MAX_OPERATORS} levels deep"]
    # operators count per member: two members of 150 each are fine
    two = ("model m { layers = " + "+".join(["1"] * 151) + "\n hidden = " + "+".join(["1"] * 151)
           + "\n params = 1e9 }\n")
    assert check_text(two, "x.ccost").errors == []


def test_a_list_of_a_million_items_is_refused_at_the_bound():
    items = ", ".join(["1"] * 1_000_000)
    r = check_text(f"plan p {{ tp = 1 }}\nsweep s {{ base = p; tp = [{items}] }}\n", "x.ccost")
    (d,) = r.diagnostics
    assert (d.code, d.message, d.span.line, d.span.column) == (
        "E402", f"a list of more than {SC.MAX_LIST_ITEMS:,} items", 2, 26)  # at its `[`
    assert "range(" in d.help
    # commas inside a call or a nested bracket are not the list's items
    ok = "plan p { tp = 1 }\nsweep s { base = p; tp = [" + ", ".join(["range(1, 2)"] * 5_001) + "] }\n"
    assert not any(d.code == "E402" for d in check_text(ok, "x.ccost").diagnostics)


def test_the_spec_and_its_imports_are_bounded_in_all(tmp_path):
    # three files of 3 MiB of comments (each under the 4 MiB a file may have), 9 MiB in all
    body = ("# " + "x" * 1000 + "\n") * (3 * 2**20 // 1003)
    for i in range(3):
        (tmp_path / f"i{i}.ccost").write_text(body + f"link l{i} {{ alpha = 2 us; bandwidth = 1 GB/s }}\n")
    top = tmp_path / "top.ccost"
    top.write_text("".join(f'import "i{i}.ccost"\n' for i in range(3)))
    r = check_file(str(top))
    (d,) = r.diagnostics
    assert d.code == "E113" and d.span.line == 3
    assert d.message.startswith("importing `i2.ccost` brings the spec and its imports to 9.0 MiB, more than 8 MiB")


def test_the_cover_shows_a_bounded_opening_comment():
    about = opening_comment("# " + "x" * 100_000 + "\nlink a { alpha = 2 us; bandwidth = 1 GB/s }\n")
    assert len(about) == ABOUT_CHARS + 2 and about.endswith(" …")
    words = opening_comment("# " + "word " * 1_000)
    assert len(words) <= ABOUT_CHARS + 2 and words.endswith("word …")
    # what the examples say is unchanged: a sentence up to its full stop
    assert opening_comment("# Serving Llama-3-70B on one node.\n# More.\nplan p {}") == \
        "Serving Llama-3-70B on one node."


def test_the_source_appendix_breaks_long_runs_and_leaves_ordinary_lines_alone():
    long = highlight_source("x.ccost", "# " + "x" * 1_000 + "\nlink a { alpha = 2 us }  # a &amp; b\n").html
    assert long.count("\u200b") == 1_000 // BREAK_EVERY - 1  # between the ten pieces of the run
    assert "x" * BREAK_EVERY + "\u200b" + "x" in long and "x" * (BREAK_EVERY + 1) not in long
    for spec in sorted((REPO / "specs").glob("**/*.ccost")):  # every bundled line: not a character added
        text = spec.read_text(encoding="utf-8")
        assert "\u200b" not in highlight_source(spec.name, text).html, spec
    assert LONG_RUN > 2 * BREAK_EVERY - 1


def test_titles_and_strings_are_bounded():
    title = "y" * (SC.MAX_TEXT_CHARS + 1)
    r = check_text(f'link l "{title}" {{ alpha = 2 us; bandwidth = 1 GB/s; source = "{title}" }}\n', "x.ccost")
    assert [(d.code, d.message) for d in r.diagnostics] == [
        ("E203", f"the title of link `l` has {SC.MAX_TEXT_CHARS + 1:,} characters, more than "
                 f"{SC.MAX_TEXT_CHARS:,}"),
        ("E203", f"`source` has {SC.MAX_TEXT_CHARS + 1:,} characters, more than {SC.MAX_TEXT_CHARS:,}")]
    ok = "y" * SC.MAX_TEXT_CHARS
    assert check_text(f'link l "{ok}" {{ alpha = 2 us; bandwidth = 1 GB/s; source = "{ok}" }}\n',
                      "x.ccost").diagnostics == []
