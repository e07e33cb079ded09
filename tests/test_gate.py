"""The policy gate: ``ccost.gate.policy_failures`` and the exit codes of ``ccost check --policy``.

Worked example A1 (Llama-3-70B decode, TP=8, batch 32, ring AllReduce on NVLink α = 2 µs, 450 GB/s):
T_comm = 2240 · 2 µs + 146,800,640 B / 450 GB/s = 4.806 ms, compute = 141 GB / 8 / 3.35 TB/s = 5.261 ms,
so overhead = 91.35 % (notes' table: ring, > 30 % → reconsider). Efficiency = speedup / 8 with
speedup = 42.09 ms / (5.261 + 4.806) ms = 4.181, i.e. 52.3 % (< 70 %).
"""

from __future__ import annotations

import pytest

from ccost.cli import main
from ccost.gate import failure_line, gated_plans, policy_failures

SPEC = """\
link nvl { alpha = 2 us; bandwidth = 450 GB/s }
gpu h100 { memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s }
cluster hgx { gpu = h100; intra_node = nvl }
model llama { layers = 80; hidden = 8192; kv_heads = 8; params = 70.6e9; weight_bytes = 141 GB }
stack notes { }
plan tp8 { model = llama; cluster = hgx; stack = notes; phase = decode; batch = 32; tp = 8; allreduce = ring }
"""


def _failures(text: str, tmp_path) -> list[str]:
    from ccost.check import load_spec
    from ccost.evaluate import evaluate

    p = tmp_path / "spec.ccost"
    p.write_text(text)
    spec, _ = load_spec(str(p))
    return policy_failures(spec, evaluate(spec))


def test_failing_plan_names_plan_item_value_threshold(tmp_path):
    assert _failures(SPEC + "policy { max_overhead = 30 %; min_efficiency = 70 % }\n", tmp_path) == [
        "tp8: checklist 6 overhead 91.4 % > max 30 %",
        "tp8: checklist 9 efficiency 52.3 % < min 70 %",
    ]


def test_default_policy_is_30_and_70_percent(tmp_path):
    # no policy block: LANGUAGE.md defaults (30 % overhead, 70 % efficiency, 90 % memory)
    assert len(_failures(SPEC, tmp_path)) == 2


def test_passing_plan(tmp_path):
    # 91.35 % ≤ 95 % and 52.3 % ≥ 50 %; weights 17.6 GB ≤ 90 % of 80 GB
    assert _failures(SPEC + "policy { max_overhead = 95 %; min_efficiency = 50 % }\n", tmp_path) == []


def test_memory_failure(tmp_path):
    # TP=1: all 141 GB of weights on one 80 GB GPU, over the 72 GB limit (90 % of 80 GB)
    text = SPEC.replace("tp = 8;", "tp = 1;") + "policy { max_overhead = 100 %; min_efficiency = 0 % }\n"
    assert _failures(text, tmp_path) == ["tp8: checklist 11 memory per GPU 141 GB > limit 72 GB"]


def test_failure_line_wording():
    item = {"id": 6, "title": "overhead above the policy", "status": "fail", "value": 4.31, "threshold": 0.3}
    assert failure_line("tp16", item) == "tp16: checklist 6 overhead 431 % > max 30 %"
    item = {"id": 9, "title": "efficiency", "status": "fail", "value": 0.188, "threshold": 0.7}
    assert failure_line("tp16", item) == "tp16: checklist 9 efficiency 18.8 % < min 70 %"
    # an item the gate has no wording for still says which, and why
    item = {"id": 12, "title": "future check", "status": "fail", "value": None, "threshold": None,
            "note": "explained here"}
    assert failure_line("p", item) == "p: checklist 12 future check failed: explained here"


class _Spec:
    def __init__(self, local):
        self.local_plans = local


def test_gated_plans_are_the_files_own():
    # an imported plan named by a comparison is judged by its own file, not this one
    assert gated_plans(_Spec(("a", "b")), ["a", "b", "imported"]) == ["a", "b"]
    # a file that only imports plans and sets a policy (a CI overlay) judges all of them
    assert gated_plans(_Spec(()), ["x", "y"]) == ["x", "y"]


# ---------------------------------------------------------------------------------------------------
# ccost check --policy: exit codes

@pytest.mark.parametrize("policy, code", [
    ("policy { max_overhead = 95 %; min_efficiency = 50 % }\n", 0),
    ("policy { max_overhead = 30 %; min_efficiency = 70 % }\n", 1),
])
def test_check_policy_exit_codes(tmp_path, capsys, policy, code):
    p = tmp_path / "spec.ccost"
    p.write_text(SPEC + policy)
    assert main(["check", "--policy", str(p)]) == code
    out, err = capsys.readouterr()
    if code:
        assert "tp8: checklist 6 overhead 91.4 % > max 30 %" in err
    else:
        assert "policy ok" in out
    # without --policy the same spec is clean: exit 0 either way
    assert main(["check", str(p)]) == 0


def test_check_policy_spec_with_errors_exits_2(tmp_path):
    p = tmp_path / "spec.ccost"
    p.write_text(SPEC.replace("alpha = 2 us", "alpha = 2 GB"))
    assert main(["check", "--policy", str(p)]) == 2


def test_check_policy_any_failing_file_fails(tmp_path, capsys):
    good, bad = tmp_path / "good.ccost", tmp_path / "bad.ccost"
    good.write_text(SPEC + "policy { max_overhead = 95 %; min_efficiency = 50 % }\n")
    bad.write_text(SPEC)
    assert main(["check", "--policy", str(good), str(bad)]) == 1


# --------------------------------------------------------------------------------------------------
# Issue 26 item 10: a file with nothing to judge says so; the ok line names every item judged, cost too

PRICED = """import "std/gpus.ccost"
import "std/links.ccost"
import "std/clusters.ccost"
import "std/models.ccost"
plan b { model = llama3_70b; cluster = hgx_h100; phase = decode; batch = 32; seq = 4096; tp = 8 }
"""


def test_a_file_with_no_plans_is_not_called_policy_ok(tmp_path, capsys):
    p = tmp_path / "lib.ccost"
    p.write_text("link l { alpha = 2 us; bandwidth = 450 GB/s }\npolicy { max_overhead = 10 % }\n")
    assert main(["check", "--policy", str(p)]) == 0  # a library in specs/ does not fail the gate
    out = capsys.readouterr().out
    assert "policy ok" not in out and "no plans to judge against the policy" in out


@pytest.mark.parametrize("cost,items", [
    ("", "6 overhead, 9 efficiency, 11 memory per GPU"),
    ("; max_cost_per_mtok = 100 USD", "6 overhead, 9 efficiency, 11 memory per GPU, 12 cost per million tokens"),
])
def test_the_ok_line_names_every_item_judged(tmp_path, capsys, cost, items):
    p = tmp_path / "p.ccost"
    p.write_text(PRICED + f"policy {{ max_overhead = 50 %; min_efficiency = 10 %{cost} }}\n")
    assert main(["check", "--policy", str(p)]) == 0
    out = capsys.readouterr().out
    assert f"{p}: policy ok: 1 plan judged on checklist items {items}\n" in out, out
    if cost:
        assert "cost per million tokens" in out.splitlines()[1] and "≤ max 100.00 USD" in out.splitlines()[1]


def test_a_plan_over_the_cost_limit_fails_the_gate_with_its_figures(tmp_path, capsys):
    p = tmp_path / "p.ccost"
    p.write_text(PRICED + "policy { max_overhead = 50 %; min_efficiency = 10 %; max_cost_per_mtok = 0.01 USD }\n")
    assert main(["check", "--policy", str(p)]) == 1
    err = capsys.readouterr().err
    assert "b: checklist 12 cost per million tokens" in err and "> max 0.01 USD" in err, err


def test_git_workflow_lists_every_item_the_gate_fails_on():
    """docs/git-workflow.md names the items the gate fails on: every one with a wording in ccost.gate."""
    from pathlib import Path

    from ccost.gate import _ITEMS

    doc = (Path(__file__).resolve().parents[1] / "docs" / "git-workflow.md").read_text()
    section = doc[doc.index("## `ccost check --policy SPEC...`"):doc.index("## In CI")]
    for ident in _ITEMS:
        assert f"item {ident} (" in section, ident
    assert "max_cost_per_mtok" in section
