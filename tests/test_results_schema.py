"""The results document is described completely: every key that `ccost eval`
emits for the example specs is in docs/interface.md's key table, the table there is the one
ccost.results generates, and every example's JSON and YAML output validates against the JSON Schema that
`ccost schema --results` prints (additionalProperties false: an undocumented key fails).
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from pathlib import Path

import jsonschema
import pytest
import yaml

from ccost import results
from ccost.cli import main

REPO = Path(__file__).resolve().parents[1]
SPECS = sorted((REPO / "specs").glob("*.ccost"))
INTERFACE = REPO / "docs" / "interface.md"


@lru_cache(maxsize=None)
def output(spec: str, fmt: str) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        assert main(["eval", spec, "--format", fmt]) == 0
    return buf.getvalue()


def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(results.json_schema())


# ---------------------------------------------------------------------------------------------------
# The docs

def documented_paths() -> list[str]:
    """The key paths of docs/interface.md's table, read from the page (not from ccost.results)."""
    table = INTERFACE.read_text(encoding="utf-8").split(results.BEGIN)[1].split(results.END)[0]
    return re.findall(r"^\| `([^`]+)`", table, flags=re.M)


def test_interface_table_is_generated():
    """`python -m ccost.results docs/interface.md` brings the table back in step."""
    table = INTERFACE.read_text(encoding="utf-8").split(results.BEGIN)[1].split(results.END)[0]
    assert table == results.markdown()


def test_every_documented_key_has_a_type_unit_and_meaning():
    rows = [r for r in INTERFACE.read_text(encoding="utf-8").split(results.BEGIN)[1].split(results.END)[0]
            .splitlines() if r.startswith("| `")]
    assert len(rows) == len(results.KEYS) > 150
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 4 and all(cells), row


def _tree(paths: list[str]) -> dict:
    tree: dict = {}
    for path in paths:
        node = tree
        for seg in re.sub(r"\[\]", ".[]", path).split("."):
            node = node.setdefault(seg, {})
    return tree


def _undocumented(value, node: dict, where: str, out: list[str]) -> None:
    if isinstance(value, dict):
        for key, v in value.items():
            if key in node:
                child = node[key]
            else:
                free = [n for s, n in node.items() if s.startswith("<")]
                if not free:
                    out.append(f"{where}.{key}".lstrip("."))
                    continue
                child = free[0]
            _undocumented(v, child, f"{where}.{key}", out)
    elif isinstance(value, list):
        if value and "[]" not in node:
            out.append(f"{where}[]")
            return
        for v in value:
            _undocumented(v, node.get("[]", {}), f"{where}[]", out)


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_every_emitted_key_is_documented(spec: Path):
    doc = json.loads(output(str(spec), "json"))
    missing: list[str] = []
    _undocumented(doc, _tree(documented_paths()), "", missing)
    assert missing == [], f"keys ccost emits that docs/interface.md does not list: {sorted(set(missing))}"


def test_the_key_walk_can_fail():
    doc = {"ccost": "x", "plans": {"p": {"gpus": 1, "novel_key": 2, "collectives": [{"kind": "a", "odd": 1}]}}}
    missing: list[str] = []
    _undocumented(doc, _tree(documented_paths()), "", missing)
    assert missing == [".plans.p.novel_key".lstrip("."), "plans.p.collectives[].odd"]


# ---------------------------------------------------------------------------------------------------
# The JSON Schema

def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(results.json_schema())


def test_cli_prints_the_schema(capsys):
    assert main(["schema", "--results"]) == 0
    assert json.loads(capsys.readouterr().out) == results.json_schema()
    assert main(["schema", "--results", "--format", "markdown"]) == 0
    assert capsys.readouterr().out == results.markdown()
    assert main(["schema", "--format", "json"]) == 2  # the language reference is markdown only
    assert "--results" in capsys.readouterr().err


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_example_output_validates(spec: Path):
    v = validator()
    for fmt, load in (("json", json.loads), ("yaml", yaml.safe_load)):
        doc = load(output(str(spec), fmt))
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]
        assert errors == [], f"{fmt}: {errors[:5]}"
        assert doc["ccost_version"] == doc["ccost"] and doc["schema_version"] == results.SCHEMA_VERSION


def test_schema_rejects_what_it_should():
    v = validator()
    doc = json.loads(output(str(REPO / "specs" / "a1-tp-decode.ccost"), "json"))
    assert v.is_valid(doc)
    for mutate in (lambda d: d["plans"]["tp8"].__setitem__("undocumented", 1),
                   lambda d: d["plans"]["tp8"]["collectives"][0].__setitem__("extra", True),
                   lambda d: d["plans"]["tp8"].pop("step_time_s"),
                   lambda d: d["plans"]["tp8"].__setitem__("gpus", "8"),
                   lambda d: d.__setitem__("schema_version", "1"),
                   lambda d: d["sweeps"]["tp_scaling"]["points"][0].__setitem__("speedup", "fast")):
        bad = copy.deepcopy(doc)
        mutate(bad)
        assert not v.is_valid(bad)
