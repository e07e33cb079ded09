"""The bad-spec corpus: every file in tests/bad/*.ccost states its expected diagnostics at the top,

    # E: CODE LINE:COL             an error in this file
    # W: CODE LINE:COL             a warning
    # E: CODE lib/x.ccost:LINE:COL an error in an imported file (path relative to tests/bad)

(the convention of tests/parse_errors, where a description may follow the position),

and the checker must report exactly those: same codes, same places, nothing more. Expectations are written
by hand (there is no update mode). Files under tests/bad/lib/ are helpers that corpus files import.

A case may also say what the help must give the user (issue 10: a hint that leads to the fix):

    # help: TEXT                   some diagnostic's help contains TEXT
    # not: TEXT                    no message or help contains TEXT (a hint that was wrong)
    # fix: OLD => NEW              NEW is what a help tells the user to write (spaces aside), and the file
                                   with OLD replaced by NEW (outside comments) checks without errors
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest
from ccost import cli
from ccost.check import check_file

BAD = Path(__file__).parent / "bad"
CASES = sorted(BAD.glob("*.ccost"))
# Same shape as tests/parse_errors (H1a): an optional description may follow the position.
EXPECT = re.compile(r"^# ([EW]): ([EW]\d{3}) (?:(\S+):)?(\d+):(\d+)(?:\s.*)?$")


def expectations(path: Path) -> Counter:
    found: Counter = Counter()
    for line in path.read_bytes().decode("utf-8", "replace").splitlines():
        if re.match(r"^#\s*[EW]\s*:", line):
            m = EXPECT.match(line)
            assert m, f"{path.name}: malformed expectation line {line!r}"
            sev, code, file, ln, col = m.groups()
            assert code[0] == sev, f"{path.name}: {line!r}: an {code} under `# {sev}:`"
            found[(code, os.path.normpath(file or path.name), int(ln), int(col))] += 1
    return found


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
    from ccost.check import check_text

    helps, nots, fixes = hint_expectations(path)
    result = check_file(str(path))
    said = [(d.message, d.help or "") for d in result.diagnostics]
    all_help = " | ".join(_squash(h) for _, h in said)
    for text in helps:
        assert _squash(text) in all_help, f"no help says {text!r}: {all_help}"
    for text in nots:
        assert not any(text in m or text in h for m, h in said), f"{text!r} was said: {said}"
    if fixes:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        for old, new in fixes:
            assert _squash(new) in all_help, f"the fix {new!r} is not what the help says: {all_help}"
            hits = [i for i, ln in enumerate(lines) if not ln.lstrip().startswith("#") and old in ln]
            assert len(hits) == 1, f"{old!r} should occur once outside comments, found {len(hits)}"
            lines[hits[0]] = lines[hits[0]].replace(old, new)
        fixed = check_text("".join(lines), str(path))
        errors = [f"{d.span}: {d.code} {d.message}" for d in fixed.diagnostics if d.is_error]
        assert errors == [] and fixed.spec is not None, errors


def test_hinted_cases_exist():
    """The five wrong hints of issue 10 are corpus cases with the hint a user needs."""
    assert {c.stem for c in HINTED} >= {"params_count_suffix", "unit_lower_case", "unit_split_by_spaces",
                                        "field_name_from_a_config", "tp_beyond_the_node"}


def test_corpus_is_large_enough():
    assert len(CASES) >= 40
    # every case expects something: a file with no expectation would pass vacuously
    assert [c.name for c in CASES if not expectations(c)] == []


@pytest.mark.parametrize("path", CASES, ids=[c.stem for c in CASES])
def test_bad_spec(path: Path):
    expected = expectations(path)
    result = check_file(str(path))
    got: Counter = Counter()
    for d in result.diagnostics:
        assert d.span is not None, f"{d.code} without a place: {d.message}"
        rel = os.path.relpath(os.path.abspath(d.span.file), BAD)
        got[(d.code, os.path.normpath(rel), d.span.line, d.span.column)] += 1
    assert got == expected, "\n".join(f"{d.span}: {d.code} {d.message}" for d in result.diagnostics)
    if any(code.startswith("E") for code, *_ in expected):
        assert result.spec is None
    else:
        assert result.spec is not None  # warnings only: the spec is usable
    for d in result.diagnostics:
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
