"""The schema table: the generated docs stay in step, the unit table agrees with Pint, defaults agree with
the entities, every documented example checks, a new block kind is one table entry, and checking does not
load heavy libraries."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from ccost import schema as SC
from ccost import spec as S
from ccost import units as U
from ccost.check import check_text
from ccost.cli import main

REPO = Path(__file__).resolve().parent.parent


def test_docs_language_md_is_in_step_with_the_schema():
    committed = (REPO / "docs" / "language.md").read_text(encoding="utf-8")
    assert committed == SC.markdown(), "docs/language.md is stale: run `ccost schema > docs/language.md`"


def test_ccost_schema_prints_the_reference(capsys):
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == SC.markdown()


def test_reference_covers_every_field_and_code():
    from ccost.diagnostics import CODES

    doc = SC.markdown()
    for kind in SC.SCHEMA.values():
        assert f"### {kind.name}" in doc
        for f in kind.fields:
            assert f"| `{f.name}` |" in doc
            assert f.doc and f.example
    for code in CODES:
        assert f"| {code} |" in doc
    assert "`cross_node`" in doc and "`hierarchical`" in doc


def test_unit_table_agrees_with_pint():
    """Pint is the source of truth; the committed table (units_table.py) is only a cache of it."""
    from ccost.units_table import UNITS

    assert set(UNITS) == set(U.table_units()), "units_table.py is stale: python -m ccost.units --regen"
    for name, (factor, dim) in UNITS.items():
        pf, pd = U._parse_with_pint(name, name, name)
        assert pd == dim, name
        assert pf == pytest.approx(factor, rel=1e-12), name


@pytest.mark.parametrize("unit,factor,dim", [
    # hand-written: decimal and binary prefixes, bits, FLOP, the TFLOPS alias
    ("us", 1e-6, U.TIME), ("µs", 1e-6, U.TIME), ("μs", 1e-6, U.TIME), ("min", 60.0, U.TIME),
    ("KB", 1e3, U.INFORMATION), ("kB", 1e3, U.INFORMATION), ("KiB", 1024.0, U.INFORMATION),
    ("GiB", 2.0**30, U.INFORMATION), ("Gbit", 1e9 / 8, U.INFORMATION), ("Gb", 1e9 / 8, U.INFORMATION),
    ("GB/s", 1e9, U.BANDWIDTH), ("Gbit/s", 1.25e8, U.BANDWIDTH), ("TFLOP", 1e12, U.COMPUTE),
    ("TFLOP/s", 1e12, U.FLOP_RATE), ("TFLOPS", 1e12, U.FLOP_RATE), ("%", 0.01, U.DIMENSIONLESS),
])
def test_units_users_write(unit, factor, dim):
    f, d = U.parse_unit(unit)
    assert d == dim and f == pytest.approx(factor)


def test_unknown_units_still_go_through_pint_and_suggest():
    with pytest.raises(U.UnitError) as e:
        U.parse_unit("GBps")
    assert e.value.suggestion == "GB/s"
    assert U.parse_unit("kFLOP/ms") == (pytest.approx(1e6), U.FLOP_RATE)  # not in the table: Pint answers


def test_schema_defaults_match_the_entities():
    """A default is written once, on the entity (ccost.spec); ``register`` gives it to the schema's field. Every
    kind the schema has is checked here (the list comes from the schema): its entity holds every field, and
    a field's default is the attribute's — a ``Same`` default (another field's value) or a required field
    leaves the attribute None or a placeholder the checker always overwrites."""
    assert list(SC.SCHEMA) == ["link", "kernels", "gpu", "cluster", "model", "stack", "traffic", "plan", "sweep", "compare", "search",
                               "policy"]
    for kind in SC.SCHEMA.values():
        attrs = {a.name: a for a in dataclasses.fields(kind.entity)}
        for f in kind.fields:
            assert f.name in attrs, f"{kind.name}.{f.name} is not an attribute of {kind.entity.__name__}"
            d = attrs[f.name].default
            if f.required:
                assert f.default is None, (kind.name, f.name)
            elif isinstance(f.default, SC.Same):
                assert d is None, (kind.name, f.name, d)
            else:
                assert d == f.default and type(d) is type(f.default), (kind.name, f.name, d, f.default)
    # by hand, from the docs and the reference notes: a few defaults a reader relies on
    plan, policy = SC.SCHEMA["plan"], SC.SCHEMA["policy"]
    assert [plan.field(n).default for n in ("batch", "tp", "allreduce", "schedule", "recompute", "load")] == [
        1, 1, "auto", "one_f_one_b", "selective", 1.0]
    assert [policy.field(n).default for n in ("max_overhead", "min_efficiency", "max_memory")] == [0.3, 0.7, 0.9]
    assert SC.SCHEMA["search"].field("limit").default == 10_000_000
    assert SC.SCHEMA["stack"].field("roofline").default == "operator"
    assert SC.SCHEMA["sweep"].field("base").required and SC.SCHEMA["compare"].field("by").default == "latency"


@dataclasses.dataclass(frozen=True)
class _Budget(S.Entity):
    limit: float = 1.0


def _budget(**kw) -> SC.BlockKind:
    fields = kw.pop("fields", (SC.Field("limit", SC.FRACTION, "the budget", "50 %"),))
    return SC.BlockKind(kw.pop("name", "budget"), "A budget.", fields, kw.pop("spec_attr", "budgets"),
                        kw.pop("entity", _Budget), "budget b { limit = 50 % }", **kw)


def test_register_takes_the_default_from_the_entity():
    kind = SC.SCHEMA["policy"]
    stand_in = dataclasses.replace(kind, fields=(SC.Field("max_memory", SC.FRACTION, "share", "90 %"),))
    saved = dict(SC.SCHEMA)
    try:
        assert SC.register(stand_in).field("max_memory").default == 0.90  # S.Policy's, not written above
    finally:
        SC.SCHEMA.clear()
        SC.SCHEMA.update(saved)


@pytest.mark.parametrize("kw,message", [
    # recipe (e), step 1 forgotten: the kind's collection is not on Spec (it was a TypeError from Spec(...)
    # for every spec checked); named after what to add
    ({}, "Spec.budgets, which ccost.spec.Spec does not have: add `budgets: Mapping[str, _Budget] = "
         "field(default_factory=dict)` to Spec"),
    # a collection of another kind's entities
    ({"spec_attr": "plans"}, "collects _Budget entities in Spec.plans, which holds"),
    ({"spec_attr": "policy", "named": False}, "collects _Budget entities in Spec.policy"),
    # recipe (c), step 2 forgotten: the field is not an attribute of the entity
    ({"spec_attr": "plans", "fields": (SC.Field("cap", SC.FRACTION, "a cap", "50 %"),)},
     "field `cap` of block kind `budget` is not an attribute of ccost.spec._Budget: add `cap: TYPE = DEFAULT`"),
    # a default written twice
    ({"spec_attr": "plans", "fields": (SC.Field("limit", SC.FRACTION, "the budget", "50 %", default=0.5),)},
     "writes default=0.5: a default is written once, on ccost.spec._Budget.limit"),
    # a default that is another field's value: the attribute must say None
    ({"spec_attr": "plans", "fields": (SC.Field("limit", SC.FRACTION, "the budget", "50 %",
                                                default=SC.Same("cap")),)},
     "ccost.spec._Budget.limit defaults to 1.0, but the schema's default is Same"),
])
def test_register_refuses_a_kind_the_spec_cannot_hold(kw, message):
    saved = dict(SC.SCHEMA)
    with pytest.raises(TypeError) as e:
        SC.register(_budget(**kw))
    assert message in str(e.value)
    assert SC.SCHEMA == saved


def test_phase_fields_come_from_the_schema():
    """W305/W306 read ``Field.phases``: a training-only or serving-only field is marked in one place, and its
    description (docs/language.md) says the phase first. A field belongs to one phase, whose record
    (``schema.PHASE_KINDS``) names the warning another phase's plan gets for writing it."""
    from ccost.check import plan as P

    plan = SC.SCHEMA["plan"]
    assert P.fields_of_phase("train") == ("fsdp", "schedule", "virtual_stages", "recompute", "sequence_parallel",
                                          "optimizer_sharding", "master_weights", "train_tokens", "train_steps",
                                          "global_batch", "global_batch_tokens", "microbatch_size", "deadline",
                                          "gpu_budget", "checkpoint_interval")
    assert P.fields_of_phase("serve") == ("concurrency", "input_tokens", "output_tokens", "chunk_tokens")
    for kind in SC.SCHEMA.values():
        for f in kind.fields:
            if kind.name != "plan":
                assert f.phases is None, (kind.name, f.name)
            elif f.phases is not None:
                assert len(f.phases) == 1 and SC.phase_kind(f.phases[0]).own_code, f.name  # W305 / W306
                assert f.doc.startswith(f.phases[0]), f.name
    # a field marked for training (or serving) in the schema is warned about elsewhere, with no other edit
    text = HARDWARE.replace("phase = train; seq = 4096", "phase = decode; overlap = 10 %")
    assert [d.code for d in check_text(text, "t.ccost").diagnostics] == []
    for phase, code in (("train", "W305"), ("serve", "W306")):
        marked = dataclasses.replace(plan, fields=tuple(
            dataclasses.replace(f, phases=(phase,)) if f.name == "overlap" else f for f in plan.fields))
        saved = dict(SC.SCHEMA)
        try:
            SC.SCHEMA["plan"] = marked
            diags = check_text(text, "t.ccost").diagnostics
        finally:
            SC.SCHEMA.clear()
            SC.SCHEMA.update(saved)
        assert [(d.code, d.message) for d in diags] == [
            (code, "plan `tp8` is a decode plan: `overlap` applies only to "
                   + ("training" if phase == "train" else "`phase = serve`"))]


def test_enums_come_from_the_spec_constants():
    plan = SC.SCHEMA["plan"]
    assert plan.field("allreduce").type.values == S.ALLREDUCE_ALGORITHMS
    assert plan.field("phase").type.values == SC.PHASE_NAMES == tuple(k.name for k in SC.PHASE_KINDS)
    assert plan.field("cross_node").type.values == S.CROSS_NODE == ("auto", "flat", "hierarchical")
    assert SC.SCHEMA["model"].field("weights").type.values == tuple(S.DTYPE_BYTES)


HARDWARE = '''
link nvlink4 { alpha = 2 us; bandwidth = 450 GB/s }
link ib_ndr { alpha = 3 us; bandwidth = 50 GB/s }
gpu h100 { memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s }
cluster hgx { gpu = h100; intra_node = nvlink4; nodes = 8; inter_node = ib_ndr }
model llama3_70b { layers = 80; hidden = 8192; heads = 64; kv_heads = 8; params = 70.6e9; experts = 8 }
stack vllm_h100 { step_overhead = 5 ms }
kernels h100_vllm { gemm_efficiency = 84 % }
traffic chat { rate = 1; input_tokens = 8; output_tokens = 8 }
plan tp8 { model = llama3_70b; cluster = hgx; phase = train; seq = 4096 }
plan tp16 extends tp8 { }
plan tp8_pp2 extends tp8 { }
'''


@pytest.mark.parametrize("kind,field", [(k.name, f.name) for k in SC.SCHEMA.values() for f in k.fields])
def test_every_field_example_checks(kind, field):
    """The examples appear in help messages ("add `hbm_bandwidth = 3.35 TB/s`"); each must be valid."""
    k = SC.SCHEMA[kind]
    f = k.field(field)
    if (kind, field) == ("model", "config"):
        pytest.skip("the example names a file; tests/test_hf.py checks it beside a real config.json")
    if (kind, field) == ("traffic", "trace"):
        pytest.skip("the example names a file; tests/test_online.py checks traces beside real files")
    if (kind, field) == ("search", "headroom"):
        pytest.skip("applies to a capacity search (an online base plan); tests/test_capacity.py checks one")
    members = {"link": "alpha = 2 us; bandwidth = 1 GB/s", "gpu": "memory = 1 GB; hbm_bandwidth = 1 TB/s; flops = 1 TFLOP/s",
               "cluster": "gpu = h100; intra_node = nvlink4; inter_node = ib_ndr", "model": "layers = 8; hidden = 64; params = 1e12",
               "plan": "model = llama3_70b; cluster = hgx; phase = train; seq = 16; batch = 64", "sweep": "base = tp8; tp = [1, 2]",
               "compare": "plans = [tp8]", "policy": ""}.get(kind)
    if members is None:  # a kind added later (search): its required fields, and a list if it varies a kind
        members = "; ".join([f"{x.name} = {x.example}" for x in k.fields if x.required]
                            + (["tp = [1, 2]"] if k.varies else []))
    # a global batch derives `batch` (global batch / (dp·ep)): the plan then writes no batch of its own
    dropped = {field} | ({"batch"} if field in ("global_batch", "global_batch_tokens") else set())
    kept = "; ".join(m for m in members.split("; ") if m and m.split(" = ")[0] not in dropped)
    body = f"{kept}; {field} = {f.example}".strip("; ")
    name = "" if not k.named else " x"
    r = check_text(HARDWARE + f"{kind}{name} {{ {body} }}\n", "t.ccost")
    assert r.errors == [], [(d.code, d.message) for d in r.errors]


def test_a_new_block_kind_is_one_table_entry(monkeypatch):
    """How the search engineer adds `search`: register a kind with its fields and a builder."""

    @dataclasses.dataclass(frozen=True)
    class Search(S.Search):
        max_gpus: int = 64

    kind = SC.BlockKind(
        "search", "Find the best layout.",
        (SC.Field("base", SC.ref("plan"), "the plan to start from", "tp8", required=True),
         SC.Field("max_gpus", SC.INT, "largest layout", "64", minimum=1)),
        "searches", Search, "search s { base = tp8 }")
    saved = dict(SC.SCHEMA)
    try:
        from ccost import check

        # the real `search` (ccost.search) has its own validator; this stand-in has none
        monkeypatch.delitem(check._VALIDATORS, "search", raising=False)
        SC.register(kind)
        r = check_text(HARDWARE + "search s { base = tp8; max_gpus = 128 }\n", "t.ccost")
        assert r.errors == []
        assert r.spec.searches["s"].max_gpus == 128 and r.spec.searches["s"].base is r.spec.plans["tp8"]
        r = check_text(HARDWARE + "search s { base = tp8; max_gpu = 0 }\n", "t.ccost")
        assert [(d.code, d.help) for d in r.diagnostics] == [("E103", "did you mean `max_gpus` (largest layout)?")]
        assert "### search" in SC.markdown()
    finally:
        SC.SCHEMA.clear()
        SC.SCHEMA.update(saved)


def test_block_kinds_of_the_parser_and_the_lexer_come_from_the_schema(monkeypatch):
    """A kind registered in the schema is a keyword of the grammar (LALR, strict), of the parser's messages
    and of the Pygments lexer, with no edit to grammar/ccost.lark or ccost/lexer.py."""
    from lark import Lark

    from ccost import lexer
    from ccost.syntax import parse as P

    assert P.BLOCK_KINDS == tuple(SC.SCHEMA) and P.KEYWORDS == SC.keywords()
    assert "@" not in P.grammar_text()  # every placeholder filled in
    monkeypatch.setitem(SC.SCHEMA, "budget", SC.SCHEMA["policy"])  # a stand-in: only the name matters here
    grammar = P.grammar_text()
    assert "BUDGET.2: /budget\\b/" in grammar
    tree = Lark(grammar, parser="lalr", lexer="contextual", strict=True).parse("budget b { budget = 1 }\n")
    block = next(tree.find_data("block"))
    assert [t.type for t in next(block.find_data("kind")).children] == ["BUDGET"]
    assert [t.type for t in next(block.find_data("field")).children] == ["BUDGET"]  # a keyword as a field
    assert "|budget)" in lexer._Kinds("({kinds})").get()


def test_check_path_does_not_import_heavy_libraries():
    # The checker (what the language server runs on every edit) and `ccost check` of a spec with errors
    # import none of them. `ccost check` of a clean spec with plans prices them once for memory (W401),
    # which imports the cost model and numpy (about 0.4 s), and nothing heavier.
    probe = ("import sys, io, contextlib\nfrom ccost.cli import main\nfrom ccost.check import check_file\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
             "    check_file('specs/a1-tp-decode.ccost')\n"
             "    main(['check', 'tests/bad/five_mistakes.ccost'])\n"
             "heavy = ('pint', 'numpy', 'jinja2', 'weasyprint', 'matplotlib', 'yaml')\n"
             "print(sorted(m for m in heavy if m in sys.modules))\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
             "    main(['check', 'specs/a1-tp-decode.ccost'])\n"
             "print(sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "['numpy']"]


def test_a_count_per_second_reads_as_per_second():
    from ccost import units

    # 32 tokens / 10.07 ms = 3,178 tokens/s; derivations print it as "3178/s", never "3178 1/s"
    assert units.format_quantity(32 / 0.01007, units.RATE) == "3178/s"


def _reads_in_sources() -> tuple[set[str], set[str]]:
    """Attribute names read anywhere in compiler/ccost but the schema (spec.py's properties count), and the
    string constants of the checker (it reads some members by name, `config` among them)."""
    import ast
    from pathlib import Path

    root = Path(SC.__file__).parent
    attrs, checker_strings = set(), set()
    for path in root.rglob("*.py"):
        if path.name == "schema.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                attrs.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and path.parent.name == "check":
                checker_strings.add(node.value)
    return attrs, checker_strings


def _unread(schema, attrs: set[str], checker_strings: set[str]) -> list[str]:
    return [f"{kind}.{f.name}" for kind, bk in schema.items() for f in bk.fields
            if not f.recorded and f.name not in attrs and f.name not in checker_strings]


def test_every_field_is_read_by_something_or_marked_recorded():
    # A field declared in the schema and the entity but read by no formula, writer or rule passes every
    # other test; here it fails, unless the schema says it only records a fact (`recorded=True`).
    attrs, checker_strings = _reads_in_sources()
    assert _unread(SC.SCHEMA, attrs, checker_strings) == []
    # the scan can fail: a field nothing reads is reported, and `recorded` excuses it
    plan = SC.SCHEMA["plan"]
    ghost = SC.Field("reserved_memory", plan.fields[0].type, "a field nobody reads", "1 GB")
    fake = {"plan": dataclasses.replace(plan, fields=plan.fields + (ghost,))}
    assert _unread(fake, attrs, checker_strings) == ["plan.reserved_memory"]
    fake["plan"] = dataclasses.replace(plan, fields=plan.fields + (dataclasses.replace(ghost, recorded=True),))
    assert _unread(fake, attrs, checker_strings) == []
    # and the recorded fields are the model's shape and the engine a stack profile describes, each truly unread
    recorded = [f"{k}.{f.name}" for k, bk in SC.SCHEMA.items() for f in bk.fields if f.recorded]
    assert all(r.startswith("model.") or r in ("stack.engine", "stack.engine_version") for r in recorded), recorded
    assert not [r for r in recorded if r.split(".")[1] in attrs], "a recorded field is read: drop `recorded`"


def test_the_search_docs_list_every_axis_a_search_varies():
    """docs/language.md once did not list `cp` among the search axes (it was typed there)."""
    from ccost.check.search import ARRAY_AXES

    doc = SC.SCHEMA["search"].doc
    assert all(f"`{a}`" in doc for a in ARRAY_AXES), [a for a in ARRAY_AXES if f"`{a}`" not in doc]
