"""Ranking that means what it says: a serving plan's sweep picks its optimum by the
objective a user names — the cheapest per million tokens by default — among the points that fit memory and
meet the policy, never by efficiency against one GPU; `compare ... by = cost_per_token` ranks by money; a
serve plan as a search's base, or an unpriced plan in a cost comparison, is refused by `ccost check`."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccost import check, evaluate
from ccost.model import economics

HEAD = """
import "std/gpus.ccost"
import "std/links.ccost"
import "std/models.ccost"
import "std/clusters.ccost"
plan serve_tp8 "TP=8 serving, 1,024 in / 256 out" {
  model = llama3_70b; cluster = hgx_h100; phase = serve
  concurrency = 32; input_tokens = 1024; output_tokens = 256; chunk_tokens = 512
  tp = 8
}
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "r.ccost"
    path.write_text(HEAD + text, encoding="utf-8")
    return path


def _usd_per_mtok(plan_doc: dict) -> float:
    """By hand from the plan's own numbers: N GPUs × the price of a GPU-hour over the output tokens of an hour."""
    price = plan_doc["cost"]["price_per_gpu_hour_usd"]
    return plan_doc["gpus"] * price / (plan_doc["throughput_tokens_s"] * 3600) * 1e6


def test_a_concurrency_sweep_of_a_serve_plan_picks_the_cheapest_point_per_million_tokens(tmp_path):
    """The sweep users wrote by hand before: a concurrency sweep of a TP=8 serve plan. Efficiency against one GPU falls as
    the concurrency grows (the old 'cost-optimal' pick was concurrency 8, the most expensive per token);
    the optimum is now the cheapest per million output tokens among the points that fit and meet the policy."""
    path = _load(tmp_path, """
sweep conc "Concurrency on TP=8" {
  base = serve_tp8
  tp = [8]
  concurrency = [8, 32, 128]
}
policy { max_overhead = 30 %; min_efficiency = 70 %; max_memory = 90 % }
""")
    spec, _ = check.load_spec(str(path))
    doc = evaluate.evaluate(spec).sweeps["conc"]
    assert doc["objective"] == "cost_per_token" and doc["time_optimal"] is None and doc["cost_optimal"] == {}
    # each point priced as a plan of its own, its cost worked from its GPUs, price and throughput
    costs = {}
    for c in (8, 32, 128):
        plan = spec.plans["serve_tp8"]
        from ccost import spec as S

        r = evaluate.evaluate_plan(S.vary(plan, concurrency=c), spec.policy).doc
        costs[c] = _usd_per_mtok(r)
        assert r["cost"]["cost_per_mtok_usd"] == pytest.approx(costs[c], rel=1e-12)
        # efficiency against one GPU is shown, not judged: the policy's 70 % fails none of them
        item9 = next(i for i in r["checklist"] if i["id"] == 9)
        assert item9["status"] == "n/a" and item9["value"] < 0.7
    assert costs[8] > 3 * costs[128]  # the figures: ~13.7 against ~3.3 USD per million tokens
    assert doc["optimum"] == {"tp": 8, "concurrency": 128}
    assert doc["optimum_value"] == pytest.approx(costs[128], rel=1e-12)


def test_the_optimum_is_chosen_among_the_points_that_meet_the_policy(tmp_path):
    """A TP=4/TP=8 sweep under an overhead ceiling: the cheapest point overall (TP=4 at concurrency 128)
    is chosen when it meets the policy; a ceiling it breaks leaves it out, and the next cheapest that meets
    the policy is chosen."""
    sweep = """
sweep s "TP and concurrency" {
  base = serve_tp8
  tp = [4, 8]
  concurrency = [8, 32, 128]
  OBJ
}
policy { max_overhead = OVH; max_memory = 90 % }
"""
    spec, _ = check.load_spec(str(_load(tmp_path, sweep.replace("OBJ", "").replace("OVH", "30 %"))))
    doc = evaluate.evaluate(spec).sweeps["s"]
    pts = {(p["tp"], p["concurrency"]): p for p in doc["points"]}
    ok = {k: p for k, p in pts.items() if p["fits_memory"] and p["meets_policy"]}
    cheapest = min(ok, key=lambda k: ok[k]["cost_per_mtok_usd"])
    assert doc["optimum"] == {"tp": cheapest[0], "concurrency": cheapest[1]}
    over = pts[cheapest]["overhead"]
    # a ceiling just under that point's overhead: it breaks the policy and is not chosen
    tight = f"{over * 100 * 0.999:.4f} %"
    spec, _ = check.load_spec(str(_load(tmp_path, sweep.replace("OBJ", "").replace("OVH", tight))))
    doc2 = evaluate.evaluate(spec).sweeps["s"]
    pts2 = {(p["tp"], p["concurrency"]): p for p in doc2["points"]}
    assert not pts2[cheapest]["meets_policy"]
    ok2 = {k: p for k, p in pts2.items() if p["fits_memory"] and p["meets_policy"]}
    assert doc2["optimum"] == ({"tp": min(ok2, key=lambda k: ok2[k]["cost_per_mtok_usd"])[0],
                                "concurrency": min(ok2, key=lambda k: ok2[k]["cost_per_mtok_usd"])[1]}
                               if ok2 else None)
    # another objective: the lowest TPOT, which the smallest batch on the most GPUs gives
    spec, _ = check.load_spec(str(_load(tmp_path, sweep.replace("OBJ", "objective = tpot").replace("OVH", "30 %"))))
    doc3 = evaluate.evaluate(spec).sweeps["s"]
    ok3 = {(p["tp"], p["concurrency"]): p for p in doc3["points"] if p["fits_memory"] and p["meets_policy"]}
    best = min(ok3, key=lambda k: ok3[k]["tpot_s"])
    assert doc3["optimum"] == {"tp": best[0], "concurrency": best[1]} and doc3["objective"] == "tpot"


def test_compare_by_cost_per_token_ranks_by_money(tmp_path):
    path = _load(tmp_path, """
plan c8 extends serve_tp8 { concurrency = 8 }
plan c128 extends serve_tp8 { concurrency = 128 }
compare money "Which costs less per token?" {
  plans = [c8, c128]
  by    = cost_per_token
}
""")
    spec, _ = check.load_spec(str(path))
    res = evaluate.evaluate(spec)
    cmp = res.compares["money"]
    assert cmp["ranking"] == ["c128", "c8"]
    assert cmp["values"]["c128"] == pytest.approx(_usd_per_mtok(res.plans["c128"].doc), rel=1e-12)
    assert "cost per million tokens" in cmp["recommendation"]


def test_check_refuses_a_serve_base_and_an_unpriced_cost_comparison(tmp_path):
    path = _load(tmp_path, """
search s { base = serve_tp8; tp = [4, 8] }
gpu free { memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s }
cluster unpriced { gpu = free; intra_node = nvlink4 }
plan p2 extends serve_tp8 { cluster = unpriced }
compare m { plans = [serve_tp8, p2]; by = cost_per_token }
""")
    msgs = [(d.code, d.message) for d in check.check_file(str(path)).diagnostics if d.is_error]
    assert any(c == "E401" and "is a serve plan, which the layout search does not price" in m for c, m in msgs), msgs
    assert any(c == "E403" and "plan `p2` is not priced" in m for c, m in msgs), msgs
    # the std H100 has a list price: the cluster the other plans use is priced (spec and economics agree)
    cluster = check.load_spec(str(_load(tmp_path, "")))[0].plans["serve_tp8"].cluster
    assert cluster.priced and economics.pricing(cluster).priced
