"""The bad-spec corpus: every file in tests/bad/*.ccost carries its expected diagnostics as comments on the
lines they point at (mypy's test-data convention), and the checker must report exactly those::

    plan p1 {
      tp = 0  # E:8: E203 `tp` must be at least 1; got 0
    }

One marker per diagnostic, ``# SEV[@WHERE]:COL: CODE MESSAGE``:

- SEV is ``E`` (an error) or ``W`` (a warning); COL is the 1-based column ``ccost check`` prints;
- without WHERE the diagnostic is on the comment's own line; ``@+N`` / ``@-N`` mean N lines below / above
  it (for a line that cannot carry a comment, such as one past the end of the file, or a line whose
  diagnostic sits at its end); ``@lib/x.ccost:LINE`` is a line of an imported file, path relative to
  tests/bad (the updater puts these on line 1);
- MESSAGE is compared exactly; ending it with ``…`` compares the beginning only. The updater writes
  messages up to 100 characters in full and cuts longer ones at a space with ``…``, so a long message is
  still pinned by its first ~100 characters and a reworded tail does not churn the corpus;
- several markers may share a line: ``tp = 16  # W:8: W301 …  # W:8: W302 …``.

Same codes, lines, columns and messages, nothing more; the order of markers does not matter. The checker
runs in-process, from tests/bad as the working directory, so paths in messages read ``lib/x.ccost``; the
checkout's absolute path, where a message names it, reads ``<repo>``.

When the checker's output changes on purpose, rewrite the comments from the actual output, then read
the diff (an expected value is never taken from the tool unchecked)::

    pytest tests/test_bad_corpus.py --update-expectations

Met expectations stay as written (a shortened ``…`` one included), others are rewritten in place, new ones
appended to their line; nothing else in a file changes and no line is added or removed. A test of the
updater is at the end of this module. Files under tests/bad/lib/ are helpers that corpus files import.

A case may also say what the help must give the user (a hint that leads to the fix), in lines
of their own:

    # help: TEXT                   some diagnostic's help contains TEXT
    # not: TEXT                    no message or help contains TEXT (a hint that was wrong)
    # fix: OLD => NEW              NEW is what a help tells the user to write (spaces aside), and the file
                                   with OLD replaced by NEW (outside comments) checks without errors
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from ccost import cli
from ccost.check import check_file, check_text

import inline_expect as ie

BAD = Path(__file__).parent / "bad"
REPO = BAD.parent.parent
CASES = sorted(BAD.glob("*.ccost"))


def diagnostics_of(path: Path, monkeypatch) -> tuple[list[ie.Diag], object]:
    """``ccost check`` of one case, in-process, run from the case's folder."""
    monkeypatch.chdir(path.parent)
    result = check_file(path.name)
    return as_diags(result, path.parent), result


def as_diags(result, folder: Path) -> list[ie.Diag]:
    out = []
    for d in result.diagnostics:
        assert d.span is not None, f"{d.code} without a place: {d.message}"
        rel = os.path.normpath(os.path.relpath(os.path.abspath(d.span.file), folder))
        # a scrubber, as in coverage.py's gold files: the checkout's own path reads <repo> in the comments
        message = d.message.replace(str(REPO.resolve()), "<repo>")
        out.append(ie.Diag("E" if d.is_error else "W", d.code, rel, d.span.line, d.span.column, message))
    return out


def without_expectations(path: Path) -> str:
    """The case's text with its expectation comments taken off (what the user's file would look like)."""
    lines = [(ie.split_line(b)[0].rstrip(" \t") if ie.split_line(b)[1] else b, e) for b, e in ie.read_lines(path)]
    return "".join(b + e for b, e in lines)


def hint_expectations(path: Path) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    helps, nots, fixes = [], [], []
    for line in path.read_bytes().decode("utf-8", "replace").splitlines():
        if line.startswith("# help: "):
            helps.append(line[len("# help: "):])
        elif line.startswith("# not: "):
            nots.append(line[len("# not: "):])
        elif line.startswith("# fix: "):
            old, sep, new = line[len("# fix: "):].partition(" => ")
            assert sep, f"{path.name}: a fix line needs OLD => NEW: {line!r}"
            fixes.append((old, new))
    return helps, nots, fixes


HINTED = [c for c in CASES if any(hint_expectations(c))]


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("path", HINTED, ids=[c.stem for c in HINTED])
def test_hint_leads_to_the_fix(path: Path):
    helps, nots, fixes = hint_expectations(path)
    result = check_file(str(path))
    said = [(d.message, d.help or "") for d in result.diagnostics]
    all_help = " | ".join(_squash(h) for _, h in said)
    for text in helps:
        assert _squash(text) in all_help, f"no help says {text!r}: {all_help}"
    for text in nots:
        assert not any(text in m or text in h for m, h in said), f"{text!r} was said: {said}"
    if fixes:
        lines = without_expectations(path).splitlines(keepends=True)
        for old, new in fixes:
            assert _squash(new) in all_help, f"the fix {new!r} is not what the help says: {all_help}"
            hits = [i for i, ln in enumerate(lines) if not ln.lstrip().startswith("#") and old in ln]
            assert len(hits) == 1, f"{old!r} should occur once outside comments, found {len(hits)}"
            lines[hits[0]] = lines[hits[0]].replace(old, new)
        fixed = check_text("".join(lines), str(path))
        errors = [f"{d.span}: {d.code} {d.message}" for d in fixed.diagnostics if d.is_error]
        assert errors == [] and fixed.spec is not None, errors


def test_hinted_cases_exist():
    """Five hints that once led users astray are corpus cases with the hint a user needs."""
    assert {c.stem for c in HINTED} >= {"params_count_suffix", "unit_lower_case", "unit_split_by_spaces",
                                        "field_name_from_a_config", "tp_beyond_the_node"}


def test_corpus_is_large_enough():
    assert len(CASES) >= 40
    # every case expects something: a file with no expectation would pass vacuously
    assert [c.name for c in CASES if not ie.parse(c)] == []


@pytest.mark.parametrize("path", CASES, ids=[c.stem for c in CASES])
def test_bad_spec(path: Path, monkeypatch, request):
    expected = ie.parse(path)
    actual, result = diagnostics_of(path, monkeypatch)
    report = ie.compare(path.relative_to(BAD.parent.parent), expected, actual)
    if report and request.config.getoption("update_expectations", False):
        ie.update(path, actual)
        expected = ie.parse(path)
        actual, result = diagnostics_of(path, monkeypatch)
        again = ie.compare(path.relative_to(BAD.parent.parent), expected, actual)
        assert again is None, "the updated comments are still not met (did a comment move a diagnostic? " \
                              "put it on another line with @+N / @-N by hand):\n" + again
        report = None
    if report:
        pytest.fail(report, pytrace=False)
    for d in actual:
        assert d.code[0] == d.sev, f"{d.code} reported as {d.sev}"
    if any(d.sev == "E" for d in actual):
        assert result.spec is None
    else:
        assert result.spec is not None  # warnings only: the spec is usable
    for d in actual:
        assert d.message and not d.message.endswith(".")


def test_ten_megabyte_file(tmp_path: Path):
    # Generated here rather than committed. Size limit of read_source: a clear E002, nothing parsed.
    big = tmp_path / "big.ccost"
    member = "  alpha = 2 us\n"
    big.write_text("link x {\n" + member * (10 * 1024 * 1024 // len(member)) + "}\n")
    assert big.stat().st_size >= 10 * 1024 * 1024
    result = check_file(str(big))
    assert [d.code for d in result.diagnostics] == ["E002"]
    assert result.spec is None


def test_five_mistakes_through_the_cli(capsys):
    """All five reported in one run, each with FILE:LINE:COL, the source line, a caret and a help."""
    path = BAD / "five_mistakes.ccost"
    status = cli.main(["check", str(path)])
    out, err = capsys.readouterr()
    assert status == 2
    assert "Traceback" not in err and "internal error" not in err
    assert out == ""  # nothing is "ok"
    blocks = [b for b in err.split("\n\n") if "error[" in b]
    assert len(blocks) == 5
    codes = [re.search(r"error\[(E\d+)\]", b).group(1) for b in blocks]
    assert codes == ["E201", "E202", "E101", "E103", "E203"]
    for block in blocks:
        lines = block.splitlines()
        head = re.match(r"^(.*five_mistakes\.ccost):(\d+):(\d+): error\[E\d+\]: .+", lines[0])
        assert head, lines[0]
        line_no, col = int(head.group(2)), int(head.group(3))
        source = path.read_text().splitlines()[line_no - 1]
        assert any(ln.endswith("| " + source) for ln in lines), block
        caret_line = next(ln for ln in lines if ln.rstrip().endswith("^"))
        bar = caret_line.index("|")
        assert caret_line.index("^") - (bar + 2) == col - 1  # caret under the column named
        assert any("= help:" in ln for ln in lines), block
    assert err.rstrip().endswith("5 errors")


def test_cli_mixes_clean_and_bad_specs(capsys):
    """Exit 2 if any spec has errors; the clean one still gets its summary line."""
    status = cli.main(["check", str(BAD / "lib" / "base.ccost"), str(BAD / "tp_zero.ccost")])
    out, err = capsys.readouterr()
    assert status == 2
    assert out.strip() == f"{BAD / 'lib' / 'base.ccost'}: ok (1 plan)"
    assert "error[E203]" in err


def test_warnings_only_exit_zero(capsys):
    status = cli.main(["check", str(BAD / "pp_not_dividing_layers.ccost")])
    out, err = capsys.readouterr()
    assert status == 0
    assert "warning[W303]" in err
    assert out.strip().endswith("pp_not_dividing_layers.ccost: ok (2 plans, 1 warning)")


# ---------------------------------------------------------------------------------------------------
# The comments themselves: they change no diagnostic, and the updater does what the docstring says.

@pytest.mark.parametrize("path", CASES, ids=[c.stem for c in CASES])
def test_the_comments_do_not_change_the_diagnostics(path: Path, monkeypatch, tmp_path):
    """The same diagnostics, places and words with and without the expectation comments."""
    with_comments, _ = diagnostics_of(path, monkeypatch)
    bare = without_expectations(path)
    if path.stem == "non_utf8":  # not text: check the bare bytes as a file (it imports nothing)
        copy = tmp_path / path.name
        copy.write_bytes(bare.encode("utf-8", "surrogateescape"))
        without, _ = diagnostics_of(copy, monkeypatch)
    else:
        monkeypatch.chdir(path.parent)
        without = as_diags(check_text(bare, path.name), path.parent)
    assert without == with_comments


def _case_copy(tmp_path: Path, name: str) -> Path:
    shutil.copytree(BAD / "lib", tmp_path / "lib")
    shutil.copy(BAD / name, tmp_path / name)
    return tmp_path / name


def _run(path: Path, monkeypatch) -> tuple[list[ie.Diag], str | None]:
    actual, _ = diagnostics_of(path, monkeypatch)
    return actual, ie.compare(Path(path.name), ie.parse(path), actual)


def test_a_failing_expectation_names_file_and_line_and_the_update_fixes_it(tmp_path, monkeypatch):
    path = _case_copy(tmp_path, "tp_zero.ccost")
    original = path.read_bytes()
    # tp_zero's plan sets tp = 0 on line 5 (column 8 is the 0): make its comment wrong in the message and
    # add an expectation nothing meets on line 2
    text = original.decode()
    assert "  tp = 0  # E:8: E203 `tp` must be at least 1; got 0\n" in text
    text = text.replace("at least 1; got 0", "at least 2; got 0")
    lines = text.splitlines(keepends=True)
    lines[1] = lines[1].rstrip("\n") + "  # W:1: W999 nothing says this\n"
    path.write_text("".join(lines))

    actual, report = _run(path, monkeypatch)
    assert report is not None
    assert "tp_zero.ccost:5: expected, not reported: # E:8: E203 `tp` must be at least 2; got 0" in report
    assert "tp_zero.ccost:2: expected, not reported: # W:1: W999 nothing says this" in report
    assert "tp_zero.ccost:5: reported, not expected: # E:8: E203 `tp` must be at least 1; got 0" in report
    assert "-tp_zero.ccost:5:8: E203 `tp` must be at least 2; got 0" in report.splitlines()
    assert "+tp_zero.ccost:5:8: E203 `tp` must be at least 1; got 0" in report.splitlines()
    assert "-tp_zero.ccost:2:1: W999 nothing says this" in report.splitlines()
    assert "--update-expectations" in report

    assert ie.update(path, actual) is True
    assert path.read_bytes() == original  # the stale marker is gone with its separator, the message fixed
    assert _run(path, monkeypatch)[1] is None
    assert ie.update(path, actual) is False  # met: nothing to write


def test_the_updater_writes_new_markers_and_changes_nothing_else(tmp_path, monkeypatch):
    # two diagnostics on one line (tp_beyond_nvlink) and one in an imported file (import_cycle), from
    # files with no comments, CRLF line ends in one of them
    nv = _case_copy(tmp_path, "tp_beyond_nvlink.ccost")
    bare = without_expectations(nv).replace("\n", "\r\n")
    nv.write_bytes(bare.encode())
    actual, report = _run(nv, monkeypatch)
    assert report is not None and [d.code for d in actual] == ["W301", "W302"]
    ie.update(nv, actual)
    assert _run(nv, monkeypatch)[1] is None
    new = nv.read_bytes().decode()
    assert new.count("\r\n") == bare.count("\r\n") and new.count("\n") == bare.count("\n")
    (line,) = [ln for ln in new.split("\r\n") if "# W:" in ln]
    assert line.startswith("  tp = 16  # W:8: W301 the tensor-parallel group of plan `p1` (tp = 16) is larger")
    assert line.endswith("…  # W:8: W302 tp = 16 does not divide kv_heads = 8 of model `m70`: each KV head is "
                         "replicated on 2 GPUs")
    assert without_expectations(nv) == bare

    cyc = tmp_path / "import_cycle.ccost"
    shutil.copy(BAD / "import_cycle.ccost", cyc)
    bare = without_expectations(cyc)
    cyc.write_text(bare)
    actual, _ = _run(cyc, monkeypatch)
    ie.update(cyc, actual)
    first = cyc.read_text().splitlines()[0]
    assert first.endswith("  # E@lib/cycle_b.ccost:2:8: E105 import cycle: import_cycle.ccost → "
                          "lib/cycle_b.ccost → import_cycle.ccost")
    assert _run(cyc, monkeypatch)[1] is None and without_expectations(cyc) == bare


def test_a_shortened_message_is_a_prefix_and_stays_as_written(tmp_path, monkeypatch):
    path = _case_copy(tmp_path, "tp_zero.ccost")
    path.write_text(path.read_text().replace("at least 1; got 0", "at least 1…"))
    before = path.read_bytes()
    actual, report = _run(path, monkeypatch)
    assert report is None
    assert ie.update(path, actual) is False and path.read_bytes() == before
    path.write_text(path.read_text().replace("at least 1…", "at most 1…"))
    assert _run(path, monkeypatch)[1] is not None  # a prefix must still be the message's beginning


@pytest.mark.parametrize("marker", ["# E: E203 5:8", "# E:8: W203 x", "# E:8:E203 x", "# E@x:8: E203 x"])
def test_a_malformed_expectation_is_an_error_not_ignored(tmp_path, marker):
    path = tmp_path / "x.ccost"
    path.write_text(f"plan p {{\n  tp = 0  {marker}\n}}\n")
    with pytest.raises(ie.MalformedExpectation, match=r"x\.ccost:2: "):
        ie.parse(path)


def test_relative_places():
    # written by hand: a comment on line 2 that means line 3 (@+1) and one on line 3 that means line 1 (@-2)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.ccost"
        path.write_text("a\n# E@+1:4: E001 next\nb  # W@-2:1: W001 first…\n")
        got = [(e.file, e.line, e.col, e.code, e.message, e.prefix, e.at) for e in ie.parse(path)]
    assert got == [("r.ccost", 3, 4, "E001", "next", False, 2), ("r.ccost", 1, 1, "W001", "first", True, 3)]


# ---------------------------------------------------------------------------------------------------
# Every hint that proposes a value is the fix: applied, it checks clean of its own
# diagnostic and means what the field documents. The `# fix:` lines above pin chosen cases by hand; this
# applies every `NAME = VALUE` a help proposes for the member (or the block) the diagnostic points at.

_PROPOSAL = re.compile(r"`([A-Za-z_]\w*) = ([^`]+?)`")
_STRUCTURE = ("...", "…", "NAME", "PLAN", "[", "{", ";")  # a pattern to fill in, a list, a block: not a value


def _fields_named(name: str):
    from ccost import schema as SC

    return [f for k in SC.SCHEMA.values() for f in k.fields if f.name == name]


def _apply(line: str, name: str, value: str, add: bool) -> str | None:
    """``line`` with member ``name`` set to ``value``: its written value replaced, or (``add``, a block's
    opening line) the member added after the ``{``. None when the line has neither."""
    m = re.search(rf"(?<![\w.]){re.escape(name)}\s*=\s*([^;}}#\n]*[^;}}#\s])", line)
    if m is not None:
        return line[:m.start(1)] + value + line[m.end(1):]
    if add and "{" in line:
        i = line.index("{") + 1
        return line[:i] + f" {name} = {value};" + line[i:]
    return None


def _rate_time(value: str) -> str | None:
    """The time unit after the last ``/`` of a proposed quantity (``3.50 USD/h`` → ``h``), else None."""
    from ccost import units as U

    unit = value.split(" ", 1)[1] if " " in value.strip() else ""
    if "/" not in unit:
        return None
    per = unit.rsplit("/", 1)[1].strip()
    try:
        return per if U.parse_unit(per)[1] == U.TIME else None
    except U.UnitError:
        return None


def _proposals(path: Path):
    """(diagnostic, name, value, is an addition) for every value a help of the case proposes at the line of
    its diagnostic, in the case file itself."""
    result = check_text(without_expectations(path), str(path))
    lines = without_expectations(path).splitlines(keepends=True)
    for d in result.diagnostics:
        if not d.help or d.span is None or os.path.abspath(d.span.file) != str(path):
            continue
        add = d.help.lstrip().startswith("add ")
        for name, value in _PROPOSAL.findall(d.help):
            if any(s in value for s in _STRUCTURE) or re.fullmatch(r"[A-Z]+", value.strip()) \
                    or not _fields_named(name):
                continue
            if _apply(lines[d.span.line - 1], name, value.strip(), add) is not None:
                yield d, name, value.strip(), add


REPLACEABLE = [c for c in CASES if c.stem != "non_utf8"]


@pytest.mark.parametrize("path", REPLACEABLE, ids=[c.stem for c in REPLACEABLE])
def test_every_value_a_hint_proposes_is_the_fix(path: Path, monkeypatch):
    monkeypatch.chdir(path.parent)
    path = path.resolve()
    text = without_expectations(path)
    for d, name, value, add in _proposals(path):
        lines = text.splitlines(keepends=True)
        lines[d.span.line - 1] = _apply(lines[d.span.line - 1], name, value, add)
        fixed = check_text("".join(lines), str(path))
        here = [f"{x.code} {x.message}" for x in fixed.diagnostics if x.span is not None
                and os.path.abspath(x.span.file) == str(path) and x.span.line == d.span.line
                and (x.is_error or x.code == d.code)]
        assert here == [], f"{path.name}:{d.span.line}: the help's `{name} = {value}` (for {d.code}) leaves {here}"
        # what the field documents: a rate per the time its name and example give it (`USD/h`, not `USD/s`)
        per = _rate_time(value)
        if per is not None:
            documented = {f.per_time for f in _fields_named(name) if f.type.kind == "quantity"}
            assert documented == {per}, f"{path.name}: `{name} = {value}` is per {per}; the field is per {documented}"


def test_the_hint_corpus_covers_the_hints_that_misled_on_units():
    """The two hints that misled (a price per second, one token for 1 KiB) are cases whose applied
    proposals the test above checks: at least one proposal each."""
    found = {p.stem: [(n, v) for _, n, v, _ in _proposals(p.resolve())]
             for p in (BAD / "price_without_time.ccost", BAD / "tokens_in_kib.ccost")}
    assert found == {"price_without_time": [("price_per_gpu_hour", "3.50 USD/h")],
                     "tokens_in_kib": [("input_tokens", "1024")]}
