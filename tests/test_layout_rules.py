"""The layout rules (ccost.layout_rules): one array-safe predicate per rule, used by check, lower, the
checklist and the search; E301 in one wording; checklist items as records."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ccost import axes, layout_rules as rules
from ccost.model import analysis
from ccost.check import check_text
from ccost.check.plan import evaluation_errors


def test_every_axis_rule_is_a_rule():
    for a in axes.AXES:
        assert set(a.rules) <= set(rules.RULES), a.name


def test_rules_give_the_same_answer_on_scalars_and_arrays():
    tps = np.array([1.0, 2.0, 3.0, 4.0, 8.0, 16.0])
    # 8 KV heads: 1, 2, 4, 8 divide them; 3 and 16 do not
    assert rules.tp_divides_kv_heads(tps, 8).tolist() == [True, True, False, True, True, False]
    assert [bool(rules.tp_divides_kv_heads(int(t), 8)) for t in tps] == [True, True, False, True, True, False]
    assert rules.tp_in_domain(tps, 8).tolist() == [True] * 5 + [False]
    assert rules.pp_divides_layers(np.array([1, 3, 5, 80, 81]), 80).tolist() == [True, False, True, True, False]
    assert rules.pp_at_most_layers(np.array([80, 81]), 80).tolist() == [True, False]
    assert rules.ep_divides_experts(np.array([1, 3, 8]), 8).tolist() == [True, False, True]
    assert rules.ep_has_experts(np.array([1, 2]), 0).tolist() == [True, False]
    assert rules.divisors(12, 64) == "1, 2, 3, 4, 6, 12"


BASE = ('link nv { alpha = 2 us; bandwidth = 450 GB/s }\n'
        'gpu g { memory = 80 GB; hbm_bandwidth = 3 TB/s; flops = 1 PFLOP/s }\n'
        'cluster c { gpu = g; nodes = 1; gpus_per_node = 8; intra_node = nv }\n'
        'model m { layers = 8; hidden = 1024; heads = 8; kv_heads = 8; params = 1e8 }\n')


def test_e301_has_one_wording_in_check_and_lower():
    r = check_text(BASE + "plan p { model = m; cluster = c; phase = decode; tp = 8; dp = 2 }", "t")
    (e,) = [d for d in r.errors if d.code == "E301"]
    assert e.message == "plan `p` needs tp·pp·ep·dp = 8·1·1·2 = 16 GPUs, but cluster `c` has 1 node × 8 = 8"
    ok = check_text(BASE + "plan p { model = m; cluster = c; phase = decode; tp = 8 }", "t").spec.plans["p"]
    (le,) = [d for d in evaluation_errors(replace(ok, dp=2)) if d.code == "E301"]
    assert le.message == e.message


def test_checklist_items_are_records_with_a_judge():
    # 13, 14: a training target's (ccost.model.target); 15: an online plan's SLOs (ccost.model.online)
    assert [i.id for i in analysis.ITEMS] == list(range(1, 16))
    assert all(i.judge is not None for i in analysis.ITEMS if i.id <= 11)
    assert analysis.TITLES[7] == "TP degree divides the KV heads"
    r = check_text(BASE + "plan p { model = m; cluster = c; phase = decode; tp = 3; batch = 1 }", "t")
    from ccost import evaluate

    doc = evaluate.evaluate(r.spec).plans["p"].doc
    by_id = {i["id"]: i for i in doc["checklist"]}
    assert [i["id"] for i in doc["checklist"]][:11] == list(range(1, 12))
    assert by_id[7]["status"] == "warn"  # 3 does not divide 8 KV heads
    assert by_id[8]["status"] == "pass"  # 3 ≤ 8 GPUs of the domain
