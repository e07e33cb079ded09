"""Fleet axes of a search: `model`, `cluster`, `phase` and `stack` as axes. Every point agrees
bit for bit with its plan evaluated alone; the fleet search is the union of one search per combination
(counts add up, the top and the Pareto front are those of the union); bad axes get diagnostics."""

from __future__ import annotations

import dataclasses

import pytest
from ccost import evaluate, search
from ccost.check import check_text

from test_search import HEADER, _assert_same

# 2 models × 2 clusters (one node of 8 H100 / 8 B200) × 2 phases × 2 stacks × 4 tp × 2 pp × 3 batch.
FLEET = HEADER + '''
plan base { model = llama3_8b; cluster = hgx_h100; phase = decode; batch = 8; seq = 4096; tp = 1 }
search fleet {
  base = base
  model = [llama3_8b, llama3_70b]
  cluster = [hgx_h100, dgx_b200]
  phase = [decode, prefill]
  stack = [serving_default, ideal]
  tp = pow2(1, 8); pp = [1, 2]; batch = [1, 8, 64]
  objective = OBJECTIVE
  top = 25
}
'''


def _spec(text: str):
    res = check_text(text, "specs/test-fleet.ccost")
    assert not res.errors, [d.message for d in res.errors]
    return res.spec


def _strip(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in search.FLEET_AXES}


@pytest.mark.parametrize("objective", ["latency", "throughput_per_gpu"])
def test_fleet_points_agree_bit_for_bit_with_plans_alone(objective):
    spec = _spec(FLEET.replace("OBJECTIVE", objective))
    s = spec.searches["fleet"]
    doc = search.run_search(s, spec.policy, chunk=5)
    assert doc["points"] == 2 * 2 * 2 * 2 * 4 * 2 * 3 == 384
    assert doc["axes"]["model"] == ["llama3_8b", "llama3_70b"]  # names, not entities
    assert doc["axes"]["cluster"] == ["hgx_h100", "dgx_b200"]
    seen = {(r["model"], r["cluster"], r["phase"], r["stack"]) for r in doc["top"] + doc["pareto"]}
    assert len({c for _, c, _, _ in seen}) == 2  # both GPU types reach the top or the front
    for rec in doc["top"] + doc["pareto"]:
        layout = {f: rec[f] for f, _ in s.axes}
        plan = search.point_plan(s, layout)
        assert plan.model.name == rec["model"] and plan.cluster.name == rec["cluster"]
        _assert_same(rec, evaluate.evaluate_plan(plan, spec.policy).doc)


def test_fleet_is_the_union_of_one_search_per_combination():
    spec = _spec(FLEET.replace("OBJECTIVE", "latency").replace("top = 25", "top = 1000"))
    s = spec.searches["fleet"]
    doc = search.run_search(s, spec.policy)
    axes = dict(s.axes)
    layout_axes = tuple((f, v) for f, v in s.axes if f not in search.FLEET_AXES)
    points = feasible = 0
    union = []
    for m in axes["model"]:
        for c in axes["cluster"]:
            for ph in axes["phase"]:
                for st in axes["stack"]:
                    base = dataclasses.replace(s.base, model=m, cluster=c, phase=ph, stack=st)
                    sub = search.run_search(dataclasses.replace(s, base=base, axes=layout_axes), spec.policy)
                    points += sub["points"]
                    feasible += sub["feasible"]
                    union += [{**r, "model": m.name, "cluster": c.name, "phase": ph, "stack": st.name}
                              for r in sub["top"]]
    assert points == doc["points"] and feasible == doc["feasible"]
    # top = 1000 keeps every feasible point: the fleet's top is the union sorted by latency (search
    # order breaks ties: the fleet axes outermost, so a sort that is stable over the union in that order)
    assert len(doc["top"]) == feasible
    expected = sorted(union, key=lambda r: (r["latency_s"], -r["throughput_per_gpu"], r["gpus"]))
    assert [(r["model"], r["cluster"], r["phase"], r["stack"], r["tp"], r["pp"], r["batch"]) for r in doc["top"]] \
        == [(r["model"], r["cluster"], r["phase"], r["stack"], r["tp"], r["pp"], r["batch"]) for r in expected]
    # the Pareto front by brute force: no other feasible point is at least as fast and as productive
    front = {(r["model"], r["cluster"], r["phase"], r["stack"], r["tp"], r["pp"], r["batch"]) for r in doc["pareto"]}
    brute = set()
    for a in union:
        if not any((b["latency_s"] <= a["latency_s"] and b["throughput_per_gpu"] >= a["throughput_per_gpu"])
                   and (b["latency_s"] < a["latency_s"] or b["throughput_per_gpu"] > a["throughput_per_gpu"])
                   for b in union):
            brute.add((a["model"], a["cluster"], a["phase"], a["stack"], a["tp"], a["pp"], a["batch"]))
    assert front == brute


def test_fleet_max_gpus_is_each_clusters_own():
    # hgx_h100 has 8 GPUs, hgx_h100_16node 128: tp·pp = 16 fits only the second; max_gpus defaults to
    # each combination's cluster (8, then 128), so exactly the 16-GPU points on the one-node cluster fail.
    text = HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100; phase = decode; batch = 8; seq = 4096; tp = 8 }
search s { base = base; cluster = [hgx_h100, hgx_h100_16node]; tp = [8, 16]; fits_memory = false }
'''
    spec = _spec(text)
    doc = search.run_search(spec.searches["s"], spec.policy)
    c = {x["constraint"]: x for x in doc["constraints"]}
    assert c["max_gpus"]["failed"] == 1 and c["max_gpus"]["threshold"] == 128
    assert doc["feasible"] == 3


def _errors(text: str):
    res = check_text(HEADER + text, "specs/test-fleet.ccost")
    return [(d.code, d.message, d.help, d.span.line if d.span else None) for d in res.errors]


BASE = 'plan base { model = llama3_8b; cluster = hgx_h100; phase = decode; batch = 8; tp = 1 }\n'


def test_fleet_unknown_name_wrong_kind_and_bad_phase():
    errs = _errors(BASE + 'search s { base = base\n model = [llama3_8b, llama9_8b]\n tp = [1, 2] }\n')
    assert any(code == "E101" and "llama9_8b" in msg for code, msg, _, _ in errs), errs
    errs = _errors(BASE + 'search s { base = base\n cluster = [hgx_h100, llama3_70b]\n tp = [1, 2] }\n')
    assert any(code == "E108" and "`llama3_70b` is a model" in msg for code, msg, _, _ in errs), errs
    errs = _errors(BASE + 'search s { base = base\n phase = [decode, servr]\n tp = [1, 2] }\n')
    assert any(code == "E204" and "servr" in msg for code, msg, _, _ in errs), errs
    # `serve` is a phase, but not one a layout search prices (it would be priced as decode, silently)
    errs = _errors(BASE + 'search s { base = base\n phase = [decode, serve]\n tp = [1, 2] }\n')
    assert [(code, "`serve` cannot be" in msg) for code, msg, _, _ in errs] == [("E404", True)], errs


def test_fleet_combination_that_cannot_be_a_plan():
    # the base plan has no `seq`: a decode step needs none, a prefill does (E104 of a plan, E404 here)
    errs = _errors(BASE + 'search s { base = base\n phase = [decode, prefill]\n tp = [1, 2] }\n')
    (e,) = errs
    assert e[0] == "E404" and "phase=prefill" in e[1] and "needs `seq`" in e[1], errs
    assert "seq = " in e[2] and e[3] == 9  # on the `phase` axis: HEADER is 6 lines, then plan (7), search (8)
