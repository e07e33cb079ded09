"""Tests of the .ccost grammar and parser (``ccost.syntax.parse``).

Expectations for bad inputs (``tests/parse_errors/*.ccost``; the checker's corpus ``tests/bad/*.ccost``
has moved to comments on the lines they mean, with an update mode: see tests/test_bad_corpus.py)::

    # E: E004 3:12 two members on one line

Every comment line of that shape, anywhere in the file (by custom on the first lines), declares one
expected diagnostic: its code, its ``LINE:COL`` (1-based, as printed by ``ccost check``), and optionally a
piece of text its message must contain. The set of (code, line, column) the tool reports must equal the
set declared -- no missing diagnostic, and no extra one (an extra one is a cascade). Since the ``# E:``
lines are comments, they do not disturb the input; lines are counted including them. The expected
values were worked out by hand from the file, never copied from the tool's output.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccost.diagnostics import CODES, CcostError, Span, render_all
from ccost.syntax import parse as P
from ccost.syntax import tree as T
from ccost.syntax.parse import MAX_FILE_BYTES, parse, read_source

HERE = Path(__file__).resolve().parent
ERROR_CASES = sorted((HERE / "parse_errors").glob("*.ccost"))
EXPECT_RE = re.compile(r"^\s*#\s*E:\s*(?P<code>[EW]\d{3})\s+(?P<line>\d+):(?P<col>\d+)\s*(?P<text>.*?)\s*$")


def expected_diagnostics(text: str) -> list[tuple[str, int, int, str]]:
    """The ``# E: CODE LINE:COL text`` expectations of a file (see the module docstring)."""
    out = []
    for line in text.splitlines():
        m = EXPECT_RE.match(line)
        if m:
            out.append((m["code"], int(m["line"]), int(m["col"]), m["text"]))
    return out


def errors_of(text: str, path: str = "t.ccost") -> list:
    with pytest.raises(CcostError) as info:
        parse(text, path)
    return info.value.diagnostics


def one_error(text: str, path: str = "t.ccost"):
    diags = errors_of(text, path)
    assert len(diags) == 1, render_all(diags, {path: text})
    return diags[0]


def member_value(text: str, name: str = "x"):
    """The value of member ``name`` in a one-block spec."""
    f = parse(f"link l {{\n  {name} = {text}\n}}\n", "v.ccost")
    (m,) = f.blocks[0].members
    return m.value


# ---------------------------------------------------------------------------------------------------
# A complete spec: Llama-3-70B decode at TP=8 on one node

EXAMPLE = '''\
# Llama-3-70B decode at TP=8 on one HGX H100 node (worked example 1 of the reference notes).
link nvlink4 "NVLink 4 through NVSwitch" {
  alpha     = 2 us                  # per hop
  bandwidth = 450 GB/s              # per GPU, per direction
  source    = "spec sheet"
}

gpu h100 "H100 SXM 80GB" {
  memory         = 80 GB
  hbm_bandwidth  = 3.35 TB/s
  flops          = 989 TFLOP/s      # dense BF16 peak
  achieved_flops = 600 TFLOP/s
}

cluster hgx { gpu = h100; nodes = 1; gpus_per_node = 8; intra_node = nvlink4 }

model llama3_70b "Llama-3-70B" {
  layers = 80; hidden = 8192; heads = 64; kv_heads = 8
  params = 70.6e9                   # 141.2 GB of BF16 weights; the notes round to 141 GB
  weights = bf16; activations = bf16
}

plan tp8 "TP=8 decode, batch 32" {
  model = llama3_70b; cluster = hgx
  phase = decode; batch = 32
  tp = 8
  allreduce = ring
}

plan tp8_tree extends tp8 { allreduce = tree }

sweep tp_scaling "When does TP stop helping?" {
  base = tp8_tree
  tp   = [1, 2, 4, 8, 16, 32, 64]
}

policy { max_overhead = 30 %; min_efficiency = 70 % }
'''


def test_language_example_blocks():
    f = parse(EXAMPLE, "ex.ccost")
    assert f.path == "ex.ccost"
    assert [(b.kind, b.name) for b in f.blocks] == [
        ("link", "nvlink4"), ("gpu", "h100"), ("cluster", "hgx"), ("model", "llama3_70b"),
        ("plan", "tp8"), ("plan", "tp8_tree"), ("sweep", "tp_scaling"), ("policy", None)]
    assert [b.title for b in f.blocks] == [
        "NVLink 4 through NVSwitch", "H100 SXM 80GB", None, "Llama-3-70B", "TP=8 decode, batch 32", None,
        "When does TP stop helping?", None]
    assert [len(b.members) for b in f.blocks] == [3, 4, 4, 7, 6, 1, 2, 2]
    assert f.imports == ()
    tree_block = f.blocks[5]
    assert tree_block.extends == "tp8" and tree_block.members[0].value == T.Ref("tree", None, Span(
        "ex.ccost", 30, 41, 30, 45))


def test_language_example_values_and_spans():
    f = parse(EXAMPLE, "ex.ccost")
    link = f.blocks[0]
    # `  alpha     = 2 us`: alpha in columns 3-7, `2` at 15, `us` at 17-18 (end exclusive 19).
    alpha = link.members[0]
    assert alpha.name == "alpha"
    assert alpha.name_span == Span("ex.ccost", 3, 3, 3, 8)
    assert alpha.value == T.Number(2.0, "2", "us", Span("ex.ccost", 3, 15, 3, 19), Span("ex.ccost", 3, 17, 3, 19))
    assert alpha.span == Span("ex.ccost", 3, 3, 3, 19)
    # `  bandwidth = 450 GB/s`: 450 at 15-17, GB/s at 19-22.
    bw = link.members[1].value
    assert (bw.value, bw.text, bw.unit, bw.unit_span) == (450.0, "450", "GB/s", Span("ex.ccost", 4, 19, 4, 23))
    assert link.members[2].value == T.String("spec sheet", Span("ex.ccost", 5, 15, 5, 27))
    # the block: `link` at 2:1, name at 2:6-12, closing brace at 6:1
    assert link.kind_span == Span("ex.ccost", 2, 1, 2, 5)
    assert link.name_span == Span("ex.ccost", 2, 6, 2, 13)
    assert link.span == Span("ex.ccost", 2, 1, 6, 2)
    # `plan tp8_tree extends tp8 {`: name at 6-13, tp8 at 23-25
    pt = f.blocks[5]
    assert pt.name_span == Span("ex.ccost", 30, 6, 30, 14)
    assert pt.extends_span == Span("ex.ccost", 30, 23, 30, 26)
    model = f.blocks[3]
    params = model.members[4]
    assert params.name == "params" and params.value.value == 70.6e9 and params.value.unit is None
    assert model.members[5].value == T.Ref("bf16", None, Span("ex.ccost", 20, 13, 20, 17))
    # the keyword `model` and `gpu` as field names
    assert f.blocks[4].members[0].name == "model"
    assert f.blocks[2].members[0].name == "gpu"
    sweep = f.blocks[6]
    tp = sweep.members[1].value
    assert isinstance(tp, T.ListExpr)
    assert [n.value for n in tp.items] == [1, 2, 4, 8, 16, 32, 64]
    policy = f.blocks[7]
    assert policy.name is None and policy.name_span is None
    assert [(m.name, m.value.value, m.value.unit) for m in policy.members] == [
        ("max_overhead", 30.0, "%"), ("min_efficiency", 70.0, "%")]


def test_language_example_comments():
    f = parse(EXAMPLE, "ex.ccost")
    assert [c.text for c in f.comments] == [
        "# Llama-3-70B decode at TP=8 on one HGX H100 node (worked example 1 of the reference notes).",
        "# per hop", "# per GPU, per direction", "# dense BF16 peak",
        "# 141.2 GB of BF16 weights; the notes round to 141 GB"]
    # `  alpha     = 2 us                  # per hop`: 2 + 16 + 18 characters before the `#`
    assert f.comments[1].span == Span("ex.ccost", 3, 37, 3, 46)
    assert f.comments[0].span.line == 1 and f.comments[0].span.column == 1


def test_every_spec_in_the_repository_parses():
    specs = sorted((HERE.parent / "specs").rglob("*.ccost"))
    for p in specs:
        f = parse(read_source(p), str(p))
        assert f.blocks or f.imports, p


# ---------------------------------------------------------------------------------------------------
# Syntax features

@pytest.mark.parametrize("text,value", [
    ("8", 8.0), ("3.35", 3.35), ("70.6e9", 70.6e9), ("1_000_000", 1_000_000.0), (".5", 0.5),
    ("2.5E-3", 0.0025), ("1e+3", 1000.0), ("5.", 5.0),
])
def test_numbers(text, value):
    n = member_value(text)
    assert isinstance(n, T.Number) and n.value == value and n.text == text and n.unit is None


@pytest.mark.parametrize("text,number,unit", [
    ("450 GB/s", "450", "GB/s"), ("2 us", "2", "us"), ("2 µs", "2", "µs"), ("2 μs", "2", "μs"),
    ("80 GiB", "80", "GiB"), ("989 TFLOP/s", "989", "TFLOP/s"), ("400 Gbit/s", "400", "Gbit/s"),
    ("30 %", "30", "%"), ("2us", "2", "us"), ("1.5 TFLOPS", "1.5", "TFLOPS"),
])
def test_quantities(text, number, unit):
    n = member_value(text)
    assert isinstance(n, T.Number) and (n.text, n.unit) == (number, unit)
    # the unit span starts where the unit is written: `  x = ` is 6 characters
    start = 7 + text.index(unit)
    assert n.unit_span == Span("v.ccost", 2, start, 2, start + len(unit))


def test_a_unit_without_a_number_is_a_reference():
    assert member_value("us") == T.Ref("us", None, Span("v.ccost", 2, 7, 2, 9))


def test_precedence_and_associativity():
    v = member_value("1 + 2 * 3")
    assert isinstance(v, T.BinOp) and v.op == "+" and isinstance(v.right, T.BinOp) and v.right.op == "*"
    v = member_value("8 - 2 - 1")  # (8 - 2) - 1
    assert v.op == "-" and isinstance(v.left, T.BinOp) and v.left.op == "-" and v.right.value == 1
    v = member_value("8 / 2 / 2")  # (8 / 2) / 2
    assert v.op == "/" and v.left.op == "/"
    v = member_value("-2 * 3")  # unary minus binds tighter
    assert v.op == "*" and isinstance(v.left, T.Neg) and v.left.operand.value == 2
    v = member_value("(1 + 2) * 3")
    assert v.op == "*" and isinstance(v.left, T.Paren) and v.left.inner.op == "+"
    assert v.left.span == Span("v.ccost", 2, 7, 2, 14)
    v = member_value("- -4 us")
    assert isinstance(v, T.Neg) and isinstance(v.operand, T.Neg) and v.operand.operand.unit == "us"
    v = member_value("2 us * 3")
    assert v.op == "*" and v.left.unit == "us" and v.right.value == 3


def test_references_calls_lists():
    v = member_value("h100.memory * 0.9")
    assert v.left == T.Ref("h100", "memory", Span("v.ccost", 2, 7, 2, 18))
    assert member_value("tp8.model") == T.Ref("tp8", "model", Span("v.ccost", 2, 7, 2, 16))
    v = member_value("max(1, 2 us,)")
    assert isinstance(v, T.Call) and v.func == "max" and [a.value for a in v.args] == [1, 2]
    assert member_value("f()").args == ()
    v = member_value("[1, [2, 3], a,]")
    assert isinstance(v, T.ListExpr) and len(v.items) == 3 and isinstance(v.items[1], T.ListExpr)
    assert member_value("[]").items == ()
    v = member_value("ceil(log2(8) / 2)")
    assert v.func == "ceil" and v.args[0].left.func == "log2"


def test_strings_and_booleans():
    s = member_value(r'"a \"quoted\" word, a back\\slash"')
    assert s.value == 'a "quoted" word, a back\\slash'
    assert member_value('""').value == ""
    assert member_value("true") == T.Bool(True, Span("v.ccost", 2, 7, 2, 11))
    assert member_value("false").value is False
    assert member_value("truely") == T.Ref("truely", None, Span("v.ccost", 2, 7, 2, 13))


def test_keywords_are_field_names():
    f = parse("plan p { model = m; gpu = h; cluster = c; link = l; plan = q; sweep = s; compare = x\n"
              " policy = p; search = z; import = 1; extends = 2; true = false }\n", "k.ccost")
    (b,) = f.blocks
    assert [m.name for m in b.members] == ["model", "gpu", "cluster", "link", "plan", "sweep", "compare",
                                           "policy", "search", "import", "extends", "true"]
    assert b.members[-1].value.value is False
    # keywords inside longer names stay names
    f = parse("link linker { models = gpus }", "k.ccost")
    assert f.blocks[0].name == "linker" and f.blocks[0].members[0].value.name == "gpus"


def test_separators_blank_lines_and_comments():
    text = ("# head\n\nlink a   # after header\n{\n\n  x = 1 ; y = 2;;\n  # alone\n\n  z = [\n    1,  # one\n"
            "    2,\n  ]\n  w = max(\n    1,\n    2)\n}\n\n\nimport \"std/gpus.ccost\"  # tail")
    f = parse(text, "s.ccost")
    (b,) = f.blocks
    assert [m.name for m in b.members] == ["x", "y", "z", "w"]
    assert len(b.members[2].value.items) == 2
    assert f.imports == (T.Import("std/gpus.ccost", Span("s.ccost", 19, 1, 19, 24), Span("s.ccost", 19, 8, 19, 24)),)
    assert [(c.text, c.span.line, c.span.column) for c in f.comments] == [
        ("# head", 1, 1), ("# after header", 3, 10), ("# alone", 7, 3), ("# one", 10, 9), ("# tail", 19, 26)]


def test_blocks_all_kinds_and_shapes():
    text = "\n".join([
        'link a "A" { x = 1 }', "gpu b {}", "cluster c extends d { }", 'model e "E" extends f {}',
        "plan g {\n}", "sweep h { base = g }", "compare i { plans = [g] }", "policy {}", "search j { }",
    ])
    f = parse(text, "b.ccost")
    assert [(b.kind, b.name, b.title, b.extends) for b in f.blocks] == [
        ("link", "a", "A", None), ("gpu", "b", None, None), ("cluster", "c", None, "d"),
        ("model", "e", "E", "f"), ("plan", "g", None, None), ("sweep", "h", None, None),
        ("compare", "i", None, None), ("policy", None, None, None), ("search", "j", None, None)]
    # two blocks on one line
    assert len(parse("link a { x = 1 } link b { x = 2 }", "b.ccost").blocks) == 2


def test_empty_and_comment_only_files():
    assert parse("", "e.ccost").items == ()
    f = parse("# only a comment\n\n   \n", "e.ccost")
    assert f.items == () and f.comments[0].text == "# only a comment"


def test_crlf_gives_the_same_tree_as_lf():
    lf = parse(EXAMPLE, "ex.ccost")
    crlf = parse(EXAMPLE.replace("\n", "\r\n"), "ex.ccost")
    assert crlf.items == lf.items
    assert [c.text for c in crlf.comments] == [c.text for c in lf.comments]  # no `\r` in comment text


def test_bom_is_accepted():
    f = parse("\ufefflink a { x = 1 }\n", "bom.ccost")
    # the BOM is invisible in an editor, so it is not a column: `x` is the 10th character after it
    assert f.blocks[0].name == "a" and f.blocks[0].members[0].name_span.column == 10


def test_moderately_large_file():
    # 300 blocks of the §1 example's link, renamed: a generated catalogue-sized file
    text = "".join(f'link l{i} "L{i}" {{\n  alpha = 2 us\n  bandwidth = {i + 1} GB/s\n}}\n' for i in range(300))
    f = parse(text, "big.ccost")
    assert len(f.blocks) == 300 and f.blocks[299].members[1].value.value == 300
    assert f.blocks[299].span.line == 299 * 4 + 1


# ---------------------------------------------------------------------------------------------------
# Friendly errors

def test_missing_equals():
    d = one_error("link a {\n  alpha 2 us\n}\n")
    assert (d.code, d.span.line, d.span.column) == ("E005", 2, 9)
    assert d.message == "expected `=` after the field name `alpha`, found `2`"
    assert d.help == "write `alpha = 2 us`"


def test_two_members_on_one_line():
    d = one_error("cluster c {\n  nodes = 1 gpus = 8\n}\n")
    assert (d.code, d.span.line, d.span.column, d.span.end_column) == ("E004", 2, 13, 17)
    assert "separate members with `;` or a newline" in d.help
    assert "`nodes = 1; gpus = ...`" in d.help


def test_two_members_recovers_both_members():
    # after the E004 the parser reads `gpus = 8` as a member, so a later error is still found
    diags = errors_of("cluster c {\n  nodes = 1 gpus = 8\n  x 1\n}\n")
    assert [(d.code, d.span.line) for d in diags] == [("E004", 2), ("E005", 3)]


def test_missing_closing_brace_points_at_the_open_block():
    d = one_error("model m {\n  layers = 80\n")
    assert (d.code, d.span.line, d.span.column) == ("E003", 1, 1)
    assert "`model m`" in d.message and d.help == "add `}` after the block's last member"
    diags = errors_of("link a {\n  x = 1\ngpu b {\n  y = 2\nplan c {\n}\n")
    assert [(d.code, d.span.line) for d in diags] == [("E003", 1), ("E003", 3)]


def test_unterminated_string():
    d = one_error('link a {\n  source = "spec sheet\n}\n')
    assert (d.code, d.span.line, d.span.column) == ("E003", 2, 12)
    d = one_error('link a "NVLink {\n  alpha = 2 us\n}\n')  # a title: the body is still read
    assert (d.code, d.span.line, d.span.column) == ("E003", 1, 8)


def test_stray_characters():
    d = one_error("link a {\n  x = 1 ?\n}\n")
    assert (d.code, d.span.line, d.span.column, d.message) == ("E001", 2, 9, "unexpected character `?`")
    d = one_error("link a {\n  x = 'abc'\n}\n")
    assert d.code == "E001" and "double quotes" in d.help
    d = one_error("link a {\n  x = 1\u00a0+ 2\n}\n")
    assert "U+00A0" in d.message


def test_unknown_top_level_word_suggests_a_kind():
    d = one_error("modle m {\n  layers = 80\n}\n")
    assert (d.code, d.span.line, d.span.column) == ("E001", 1, 1)
    assert d.help == "did you mean `model`?"


def test_block_name_rules():
    assert one_error("plan { }").code == "E001"
    assert one_error("policy p { }").code == "E001"
    d = one_error("gpu import { }")
    assert (d.code, d.span.column) == ("E110", 5)


def test_several_errors_one_per_line_no_cascade():
    text = "link a {\n  alpha 2 us\n  b = 1 +\n  c = (2\n}\nfoo\nlink z { q = 1 }\n"
    diags = errors_of(text)
    assert [(d.code, d.span.line) for d in diags] == [("E005", 2), ("E001", 3), ("E001", 4), ("E001", 6)]


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda p: p.stem)
def test_parse_error_corpus(case: Path):
    text = case.read_text(encoding="utf-8")
    expected = expected_diagnostics(text)
    assert expected, f"{case.name} has no `# E:` line"
    diags = errors_of(text, case.name)
    got = sorted((d.code, d.span.line, d.span.column) for d in diags)
    assert got == sorted((c, ln, col) for c, ln, col, _ in expected), render_all(diags, {case.name: text})
    for code, line, col, fragment in expected:
        d = next(d for d in diags if (d.code, d.span.line, d.span.column) == (code, line, col))
        assert fragment in d.message, (fragment, d.message)
        assert d.code in CODES


def test_corpus_is_big_enough():
    assert len(ERROR_CASES) >= 12


# Syntax errors are told by example (``ccost.syntax.parse.SITUATIONS``): each example must be diagnosed with
# its situation's code, and the examples must stop in every parser state their situation stands for, so that
# no state a situation names in words is left to chance.

@pytest.mark.parametrize("name", sorted(P.SITUATIONS))
def test_every_syntax_example_is_diagnosed_with_its_situation_s_code(name):
    for text in P.SITUATIONS[name]:
        first = errors_of(text)[0]
        assert first.code == P.SITUATION_CODES[name], (text, first.code, first.message)


def _entered_states():
    """The LALR table, and the states a terminal is shifted into (where a token can stop the parser)."""
    from lark.parsers.lalr_analysis import Shift

    states = P._parser().parser.parser.parser.parse_table.states
    entered = {arg for acts in states.values() for t, (a, arg) in acts.items() if a is Shift and t.isupper()}
    return states, entered, Shift


def _situation_states() -> dict[str, set[int]]:
    """Each situation's states, from the table: what the rule it stands for asks of the parser."""
    states, _, Shift = _entered_states()

    def shifted(term, frm=None):
        return {arg for s, acts in states.items() if frm is None or s in frm
                for t, (a, arg) in acts.items() if t == term and a is Shift}

    header = {s for s, a in states.items() if "LBRACE" in a}  # where a block's `{` may come
    return {
        "header": header,
        "after_extends": shifted("EXTENDS", header),
        "field_name": {s for s, a in states.items() if "EQUAL" in a},  # where `=` may come
        "after_unit": shifted("UNIT"),
        # where a member may end, and no name (nor a unit, which a name would be lexed as) may come
        "value_end": {s for s, a in states.items() if {"_NL", "SEMICOLON"} <= a.keys() and not
                      {"NAME", "UNIT"} & a.keys()},
        "after_import": shifted("IMPORT"),
        "item_start": {s for s, a in states.items() if {"IMPORT", "$END"} <= a.keys()},  # a block, an import
    }


def _stopped_in(text: str):
    from lark.exceptions import UnexpectedToken

    try:
        P._example_error(text)
    except UnexpectedToken as exc:
        return exc.state.position
    raise AssertionError(f"{text!r} does not stop at a token")


@pytest.mark.parametrize("name", sorted(P.SITUATIONS))
def test_the_syntax_examples_reach_every_state_of_their_situation(name):
    _, entered, _ = _entered_states()
    want = _situation_states()[name]
    reached = {_stopped_in(text) for text in P.SITUATIONS[name]}
    assert reached <= want, f"examples of {name} stop outside it: {sorted(reached - want)}"
    # every state a token is shifted into; a state reached only by a reduction is an error state when the
    # look-ahead that reduced into it cannot follow (a keyword field then `}`, say), which the examples
    # show where they can (the field_name examples end in `}`, `;` and a newline)
    missing = sorted(want & entered - reached)
    assert not missing, f"states of {name} no example reaches: {missing}"


def test_a_situation_matches_an_error_in_another_nesting():
    """Lark's ``match_examples`` compares the depth of the parser's stack too; ccost compares the state, so
    `nodes = (1 + 1) gpus = 8` is the situation of `nodes = 1 gpus = 8` (after a unit) however deep."""
    for text in ("cluster c { nodes = (1 + 1) * 2 gpus = 8 }", "cluster c { nodes = 1 gpus = 8 }"):
        found = [(d.code, d.message.split(":")[0]) for d in errors_of(text)]
        assert found == [("E004", "two members on one line")], (text, found)


def test_deep_nesting_is_refused_not_a_crash():
    d = one_error("link a { x = " + "(" * 10_000 + "1" + ")" * 10_000 + " }\n")
    assert (d.code, d.span.line, d.span.column) == ("E006", 1, 14 + 200)  # the 201st `(`
    d = one_error("link a { x = " + "[" * 10_000 + " }\n")
    assert d.code == "E006"
    d = one_error("link a { x = " + "-" * 10_000 + "1 }\n")
    assert (d.code, d.span.column) == ("E006", 14)
    d = one_error("link a { x = " + " + ".join(["1"] * 1000) + " }\n")
    assert d.code == "E006"


def test_depth_just_under_the_limit_is_fine():
    v = member_value("(" * 150 + "1" + ")" * 150)
    for _ in range(150):
        assert isinstance(v, T.Paren)
        v = v.inner
    assert v.value == 1


SMALL = 'link a "A" {\n  alpha = 2 us  # c\n  b = [1, (2 + x.y) * 3, f(4,)]\n  s = "q\\"q"\n}\npolicy { m = 30 % }\n'


def test_no_input_produces_a_traceback():
    # every truncation and every one-character deletion of a small spec either parses or raises
    # CcostError with spans inside the file
    variants = [SMALL[:i] for i in range(len(SMALL))] + [SMALL[:i] + SMALL[i + 1:] for i in range(len(SMALL))]
    variants += [SMALL[:i] + c + SMALL[i:] for i in range(0, len(SMALL), 3) for c in '{}()[]"=;\n']
    for v in variants:
        try:
            parse(v, "f.ccost")
        except CcostError as e:
            assert e.diagnostics
            n_lines = v.count("\n") + 1
            for d in e.diagnostics:
                assert d.span is not None and 1 <= d.span.line <= n_lines, (v, d)


# ---------------------------------------------------------------------------------------------------
# read_source

def test_read_source_ok_bom_crlf(tmp_path):
    p = tmp_path / "a.ccost"
    p.write_bytes(b"\xef\xbb\xbflink a {\r\n  x = 1\r\n}\r\n")
    text = read_source(p)
    assert not text.startswith("\ufeff")
    f = parse(text, str(p))
    assert f.blocks[0].members[0].name_span == Span(str(p), 2, 3, 2, 4)


def test_read_source_missing_and_directory(tmp_path):
    with pytest.raises(CcostError) as info:
        read_source(tmp_path / "nope.ccost")
    (d,) = info.value.diagnostics
    assert d.code == "E002" and "no such file" in d.message
    with pytest.raises(CcostError) as info:
        read_source(tmp_path)
    assert "directory" in info.value.diagnostics[0].message


def test_read_source_not_utf8(tmp_path):
    p = tmp_path / "latin1.ccost"
    # `link a {\n` is 9 bytes (offsets 0-8); `  source = "caf` takes offsets 9-23; the é is byte 24,
    # on line 2 at column 24 - 9 + 1 = 16
    p.write_bytes(b'link a {\n  source = "caf\xe9"\n}\n')
    with pytest.raises(CcostError) as info:
        read_source(p)
    (d,) = info.value.diagnostics
    assert d.code == "E002"
    assert "byte offset 24" in d.message and "line 2, column 16" in d.message and "0xe9" in d.message
    assert (d.span.line, d.span.column) == (2, 16)


def test_read_source_10_mb_file_is_refused_with_its_size(tmp_path):
    p = tmp_path / "huge.ccost"
    with open(p, "wb") as fh:  # sparse: cheap to make, and never read by read_source
        fh.truncate(10 * 1024 * 1024)
    with pytest.raises(CcostError) as info:
        read_source(p)
    (d,) = info.value.diagnostics
    assert d.code == "E002" and "10.0 MiB" in d.message and "4.0 MiB" in d.message
    assert MAX_FILE_BYTES == 4 * 1024 * 1024


def test_parse_error_carries_sources():
    with pytest.raises(CcostError) as info:
        parse("link a {", "s.ccost")
    assert info.value.sources == {"s.ccost": "link a {"}


def test_help_lines_of_the_smaller_mistakes():
    d = one_error("plan p { tp = 8, pp = 2 }")
    assert d.help == "separate members with `;` or a newline"
    d = one_error("import std/gpus.ccost\n")
    assert d.help == 'write `import "std/gpus.ccost"`'
    d = one_error("link a {\n  x = [1 2]\n}\n")
    assert (d.span.line, d.span.column, d.help) == (2, 10, "separate list items with `,`: `[1, 2, 4]`")
    d = one_error("link a {\n  x = 1 +\n}\n")
    assert "ends with `+`" in d.help


def test_keyword_prefixes_are_names_and_typos_get_a_suggestion():
    # `planner` must not lex as the keyword `plan` followed by `ner`
    d = one_error("planner p { }\n")
    assert d.message.endswith("found `planner`") and d.help == "did you mean `plan`?"
    f = parse("link extender { importance = trueish }", "k.ccost")
    assert f.blocks[0].name == "extender" and f.blocks[0].members[0].value.name == "trueish"


def test_parser_builds_without_a_cache(monkeypatch, tmp_path):
    """The LALR tables built from scratch, as on a fresh machine: a cached table file once hid a missing
    dependency (lark's strict mode needs interegular) from CI."""
    import ccost.syntax.parse as P

    monkeypatch.setenv("CCOST_NO_CACHE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(P, "_PARSER", None)
    assert P._cache_path("x") is False
    tree = P.parse('link l { alpha = 2 us; bandwidth = 450 GB/s }\n', "fresh.ccost")
    assert len(tree.items) == 1
    assert not any(tmp_path.iterdir()), "nothing may be written to the cache folder with the cache off"
