"""The phase registry: one record per phase (ccost.schema.PHASE_KINDS, what every layer may know of it;
ccost.model.phases.PHASES, its functions), and no module outside it dispatching on a phase's name."""

from __future__ import annotations

import ast
import pathlib

import pytest

from ccost import check, evaluate, results, schema
from ccost.model import phases

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "compiler" / "ccost"
REPO = PACKAGE.parent.parent
NAMES = frozenset(schema.PHASE_NAMES)
#: The registry: the records (schema.py) and their functions (phases.py). Nothing else may compare a phase's
#: name; every other module reads a property of the record.
REGISTRY = {"schema.py", "phases.py"}


def _literals(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_literals(e) for e in node.elts)) if node.elts else set()
    return set()


#: Variables that hold a word spelt like a phase but meaning something else, by name, with the reason. The
#: comparisons of exactly these names are not phase tests; each must still occur (no stale entry).
NOT_A_PHASE = {
    "role": "ccost.model.simulate: a worker's role in a disaggregated fleet (serve, prefill or decode workers)",
}


def _compared_names(node: ast.Compare) -> set[str]:
    return {side.id for side in (node.left, *node.comparators) if isinstance(side, ast.Name)}


def phase_tests(source: str, exempt: frozenset[str] = frozenset()) -> list[str]:
    """The comparisons in ``source`` that test a phase's name: ``==``, ``!=``, ``in`` or ``not in`` with a
    phase name (or a tuple, list or set holding one) on either side; a comparison of a variable named in
    ``exempt`` is left out."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        if not any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            continue
        if _compared_names(node) & exempt:
            continue
        if any(_literals(side) & NAMES for side in (node.left, *node.comparators)):
            out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


def _sources():
    return [(str(p.relative_to(PACKAGE)), p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))
            if p.name not in REGISTRY or p.parent != PACKAGE]


def test_no_module_outside_the_registry_compares_a_phase_name():
    exempt = frozenset(NOT_A_PHASE)
    found = {name: hits for name, text in _sources() if (hits := phase_tests(text, exempt))}
    assert found == {}, ("a module tests a phase by its name; read the phase's record instead "
                         "(ccost.schema.phase_kind(plan.phase), ccost.model.phases.of(plan)): " + repr(found))
    # each exemption still names something the sources compare with a phase's spelling
    for name in NOT_A_PHASE:
        assert any(len(phase_tests(text)) > len(phase_tests(text, frozenset({name}))) for _, text in _sources()), \
            f"NOT_A_PHASE[{name!r}] exempts nothing any more: remove it"


@pytest.mark.parametrize("planted", [
    'if plan.phase == "serve":\n    pass\n',
    'x = 1 if p.phase != "train" else 2\n',
    'ok = phase in ("prefill", "train")\n',
    'ok = "decode" not in kinds\n',
])
def test_the_scan_finds_a_planted_phase_test(planted):
    assert len(phase_tests(planted)) == 1, planted


def test_the_scan_leaves_other_comparisons_alone():
    assert phase_tests('ok = rows == "batch" and key in ("S", "ctx") and phase == kind.name\n') == []
    # an exempt variable only: a phase compared beside it is still found
    assert phase_tests('a = role == "decode"\nb = plan.phase == "decode"\n', frozenset({"role"})) == \
        ["2: plan.phase == 'decode'"]


def test_every_phase_has_one_record_and_its_functions():
    assert tuple(phases.PHASES) == schema.PHASE_NAMES == tuple(k.name for k in schema.PHASE_KINDS)
    for name, ph in phases.PHASES.items():
        kind = schema.phase_kind(name)
        assert ph.kind is kind
        # a searchable phase prices one program per point; the others say why not
        assert kind.searchable == (ph.lower is not None and ph.analyse is not None), name
        assert kind.searchable or (kind.search_help and kind.axis_help), name
        # a phase with its own section of the document records it, with the keys its record declares
        assert (kind.section is not None) == (ph.record is not None), name
        assert set(kind.sweep_keys) <= {f.name for f in kind.section_fields}, name
        assert set(kind.diff_keys) <= {f.name for f in kind.section_fields}, name
        assert kind.rows in ("batch", "concurrency", "max_seqs") and set(kind.seq_feeds) <= {"S", "ctx"}, name
        assert kind.token_kind in ("output", "input", "training"), name


def _starter(phase: str):
    """The spec ``ccost init --phase PHASE`` writes (the phase's record's ``starter``), checked."""
    from ccost.commands import init

    models, clusters = init.bundled()
    r = check.check_text(init.starter(models["llama3_70b"], clusters["hgx_h100"], phase), str(REPO / "s.ccost"))
    assert r.errors == [], [(d.code, d.message) for d in r.errors]
    return r.spec


@pytest.mark.parametrize("phase", schema.PHASE_NAMES)
def test_every_phase_prices_records_and_explains_its_starter(phase):
    """Each phase, from its records alone: ``ccost init``'s starter checks and evaluates; a phase with its
    own section writes exactly the keys its record declares (the JSON Schema, docs/interface.md and the
    writers' labels come from that list); its sweep points carry its sweep keys; explain derives it."""
    spec = _starter(phase)
    (name,) = spec.local_plans
    kind = schema.phase_kind(phase)
    res = evaluate.evaluate(spec)
    doc = res.plans[name].doc
    assert doc["phase"] == phase and doc["cost"]["tokens"] == kind.token_kind
    assert doc["layout"]["batch"] == getattr(spec.plans[name], kind.rows) == kind.starter.batch
    if kind.section:
        assert list(doc[kind.section]) == [f.name for f in kind.section_fields]
        assert all(f"plans.<plan>.{kind.section}.{f.name}" in results.BY_PATH for f in kind.section_fields)
    (sweep,) = res.sweeps.values()
    assert all(set(kind.sweep_keys) <= set(p) for p in sweep["points"])
    groups = evaluate.explain_sections(spec, name)
    assert groups[-1][0] == "cost and power" and sum(len(steps) for _, steps in groups) > 20


def test_the_phase_field_and_init_offer_the_registrys_phases():
    from ccost.commands import init

    assert schema.SCHEMA["plan"].field("phase").type.values == schema.PHASE_NAMES
    import argparse

    parser = argparse.ArgumentParser()
    init.add_arguments(parser)
    (action,) = [a for a in parser._actions if a.dest == "phase"]
    assert tuple(action.choices) == schema.PHASE_NAMES
