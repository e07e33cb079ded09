"""`ccost eval` and `ccost explain` from the command line: formats, stability, errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ccost import cli, output

SPECS = Path(__file__).resolve().parent.parent / "specs"
A1 = str(SPECS / "a1-tp-decode.ccost")
A3 = str(SPECS / "a3-multi-node.ccost")

NORMATIVE_PLAN_KEYS = ["title", "gpus", "weight_bytes_per_gpu", "memory_bytes_per_gpu", "fits_memory",
                       "compute_time_s", "comm_time_s", "latency_term_s", "bandwidth_term_s", "exposed_comm_s",
                       "step_time_s", "overhead", "speedup", "efficiency", "bubble", "regime", "collectives",
                       "checklist"]
NORMATIVE_COLLECTIVE_KEYS = ["kind", "purpose", "algorithm", "count", "group_size", "link", "message_bytes",
                             "hops", "volume_bytes", "latency_s", "bandwidth_s", "time_s"]


def ccost(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def ccost_version() -> str:
    from ccost import __version__

    return __version__


def _in_order(keys: list[str], wanted: list[str]) -> bool:
    pos = [keys.index(k) for k in wanted]
    return pos == sorted(pos)


def test_json_is_the_document_with_normative_keys_in_order(capsys):
    code, out, err = ccost(capsys, "eval", A1, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert _in_order(list(doc), ["ccost", "spec", "plans"])  # docs/interface.md's order, extras between
    assert list(doc)[:5] == ["ccost", "ccost_version", "schema_version", "spec", "plans"]
    assert doc["ccost"] == doc["ccost_version"] == ccost_version() and doc["schema_version"] == 1
    p = doc["plans"]["tp8"]
    assert _in_order(list(p), NORMATIVE_PLAN_KEYS)
    assert _in_order(list(p["collectives"][0]), NORMATIVE_COLLECTIVE_KEYS)
    assert p["collectives"][0]["message_bytes"] == 524288 and isinstance(p["collectives"][0]["hops"], int)
    assert set(doc["sweeps"]["tp_scaling"]) >= {"field", "points", "time_optimal", "cost_optimal",
                                                 "continuous_optimum"}
    assert set(doc["compares"]["algorithms"]) >= {"by", "ranking", "recommendation"}


@pytest.mark.parametrize("fmt", ["json", "yaml", "text"])
def test_output_is_byte_identical_on_reruns(capsys, fmt):
    first = ccost(capsys, "eval", A3, "--format", fmt)[1]
    second = ccost(capsys, "eval", A3, "--format", fmt)[1]
    assert first == second and first


def test_yaml_and_json_carry_the_same_numbers(capsys):
    js = json.loads(ccost(capsys, "eval", A3, "--format", "json")[1])
    ym_text = ccost(capsys, "eval", A3, "--format", "yaml")[1]
    assert "&id" not in ym_text and "*id" not in ym_text  # no aliases
    assert yaml.safe_load(ym_text) == js


def test_warnings_go_to_stderr_results_to_stdout(capsys):
    code, out, err = ccost(capsys, "eval", A3, "--format", "json")
    assert code == 0
    assert "W301" in err  # TP=16 leaves the NVLink domain
    json.loads(out)  # stdout is clean JSON


def test_plan_option(capsys):
    code, out, _ = ccost(capsys, "eval", A1, "--plan", "tp8_tree", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and list(doc["plans"]) == ["tp8_tree"] and "sweeps" not in doc


def test_unknown_plan_is_a_diagnostic(capsys):
    code, out, err = ccost(capsys, "eval", A1, "--plan", "tp8_tre")
    assert code == 2 and out == ""
    assert "E101" in err and "tp8_tree" in err and "Traceback" not in err
    code, out, err = ccost(capsys, "explain", A1, "nope")
    assert code == 2 and "E101" in err


def test_text_is_a_readable_table(capsys):
    code, out, _ = ccost(capsys, "eval", A1)
    assert code == 0
    assert "plan tp8 — TP=8 decode, batch 32" in out
    assert "4.806 ms" in out and "524.3 kB" in out and "917.5 kB" in out  # 524,288 B and 917,504 B
    assert "collective" in out and "hops" in out
    assert "continuous optimum N*" in out and "45.58" in out
    assert "tp = 16: not evaluated" in out  # the sweep goes beyond the 8-GPU node


def test_explain_numbers_are_the_json_numbers(capsys):
    from ccost import check, evaluate

    doc = json.loads(ccost(capsys, "eval", A1, "--format", "json")[1])["plans"]["tp8"]
    spec, _ = check.load_spec(A1)
    steps = {s.name: s for s in evaluate.explain(spec, "tp8")}
    pairs = {"T_comm": "comm_time_s", "T_lat": "latency_term_s", "T_bw": "bandwidth_term_s",
             "T_compute": "compute_time_s", "T_step": "step_time_s", "overhead": "overhead",
             "speedup": "speedup", "efficiency": "efficiency", "W_GPU": "weight_bytes_per_gpu"}
    for step, key in pairs.items():
        assert output.stable_number(steps[step].value, key) == doc[key], step
    # and the printed derivation shows the same values, formatted
    code, text, _ = ccost(capsys, "explain", A1, "tp8")
    assert code == 0
    for step, key in pairs.items():
        assert f"= {steps[step].result}" in text
    assert "T_comm = T_TP,step = 4.806 ms" in text
    assert "m_act = B·S·d·b_act = 32 × 1 × 8,192 × 2 B = 524.3 kB" in text
    assert "hops_TP,intra = 2·(tp − 1) = 2 × (8 − 1) = 14" in text


def test_explain_shows_groups_and_checklist(capsys):
    code, text, _ = ccost(capsys, "explain", A3, "tp16")
    assert code == 0
    for heading in ("## inputs", "## TP:", "## compute", "## memory", "## totals", "## checklist"):
        assert heading in text
    assert "T_TP,split" in text and "T_TP,hier" in text  # the topology alternatives, derived
    assert "source: spec sheet" in text


def test_bad_plan_exits_2_with_a_diagnostic(capsys, tmp_path):
    spec = tmp_path / "bad.ccost"
    text, n = re.subn(r"(\n  tp\s*=\s*)8\n", r"\g<1>16\n", Path(A1).read_text(encoding="utf-8"), count=1)
    assert n == 1  # plan tp8's degree, whatever the alignment of its block
    spec.write_text(text, encoding="utf-8")
    code, out, err = ccost(capsys, "eval", str(spec), "--format", "json")
    assert code == 2 and out == ""
    assert "E301" in err and "Traceback" not in err and "internal error" not in err


def test_stable_number_formatting():
    assert output.stable_number(0.0048056321234) == 0.004805632
    assert output.stable_number(524288.0, "message_bytes") == 524288
    assert isinstance(output.stable_number(14.0, "hops"), int)
    assert output.stable_number(float("nan")) is None
    assert output.stable_number(-0.0) == 0.0 and str(output.stable_number(-0.0)) == "0.0"
    assert output.stable_number(146_800_640.0) == 146_800_640.0  # whole numbers are never rounded
    assert output.stable_number(146_800_640.0, "volume_bytes_per_step") == 146_800_640
    assert output.to_json({"a": float("inf")}) == '{\n  "a": null\n}\n'
