"""Capacity search (a search whose base is an online plan, ``ccost.capacity``): the chosen
fleet is the simulator's, not only the screen's; no cheaper fleet the screen puts near the limits is left
unsimulated; N+1 holds with one replica down; the Pareto front is non-dominated; the document does not
depend on how the screening is cut (what Dask relies on); and the checker's words for a capacity search."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ccost import capacity, check
from ccost.model import online
from ccost import search as SE
from ccost import spec as S

# The one-GPU model of tests/test_online.py (its step times are worked there by hand), on a node of 8, priced
SPEC = """
link nv { alpha = 2 us; bandwidth = 450 GB/s }
gpu g { memory = 80 GB; hbm_bandwidth = 1 TB/s; flops = 20 TFLOP/s; price_per_hour = 2 USD/h }
cluster c { gpu = g; gpus_per_node = 8; intra_node = nv }
model m { layers = 10; hidden = 1000; heads = 10; kv_heads = 10; params = 1e9 }
stack ops {
  roofline = operator; pipeline = steady; step_overhead = 1 ms; seq_overhead = 100 us
  hbm_efficiency = 100 %; gemm_efficiency = 100 %; attention_efficiency = 100 %; source = "test"
}
traffic t { rate = 30; peak_rate = 40; input_tokens = 300; output_tokens = 51; requests = 600 }
plan p { model = m; cluster = c; phase = online; stack = ops; traffic = t }
search s {
  base = p
  tp = [1, 2]
  max_seqs = [8, 32]
  step_tokens = [512, 2048]
  prefill_workers = [0, 1, 2]
  decode_workers = [1, 2]
  max_gpus = 8
  SEARCH
}
policy { max_ttft = 200 ms; max_tpot = 12 ms; slo_percentile = p99 }
"""


def _spec(tmp_path: Path, extra: str = "") -> S.Spec:
    path = tmp_path / "cap.ccost"
    path.write_text(SPEC.replace("SEARCH", extra), encoding="utf-8")
    spec, diags = check.load_spec(str(path))
    return spec


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    spec = _spec(tmp_path_factory.mktemp("cap"))
    return spec, SE.run_search(spec.searches["s"], spec.policy)


def test_the_chosen_fleet_is_the_one_the_simulator_confirmed(searched):
    spec, doc = searched
    assert doc["kind"] == "capacity" and doc["sized_rate_per_s"] == 40 and doc["objective"] == "cost_per_month"
    ch = doc["chosen"]
    sim_ = ch["simulated"]
    assert sim_["meets"] and sim_["ttft_p99_s"] <= 0.2 and sim_["tpot_p99_s"] <= 0.012
    # the same fleet as an online plan at the sized rate gives the same figures (one path to the simulator)
    plan = S.vary(spec.plans["p"], tp=ch["tp"], dp=ch["dp"], max_seqs=ch["max_seqs"], step_tokens=ch["step_tokens"],
                  prefill_workers=ch["prefill_workers"], decode_workers=max(1, ch["decode_workers"]),
                  prefill_tp=ch["prefill_tp"] or None)
    plan = replace(plan, traffic=replace(plan.traffic, rate=40.0, peak_rate=40.0))
    on = online.price(plan, spec.policy).terms.mean.run
    assert sim_["ttft_p99_s"] == pytest.approx(on.percentile("ttft", 99), rel=1e-12)
    assert sim_["tpot_p50_s"] == pytest.approx(on.percentile("tpot", 50), rel=1e-12)
    # GPUs and money: one price per GPU-hour, a month of 730 h
    assert ch["cost_per_month_usd"] == pytest.approx(ch["gpus"] * 2 * 730)
    best = [doc[m] for m in ("aggregated", "disaggregated") if doc[m]]
    # the better of the two by the objective; ties: fewer GPUs, then the lower (screened) p99 request latency
    assert ch == min(best, key=lambda r: (r["cost_per_month_usd"], r["gpus"], r["screened"]["e2e_p99_s"]))


def test_no_cheaper_fleet_near_the_limits_is_left_unsimulated(searched):
    spec, doc = searched
    ch = doc["chosen"]
    simulated = {tuple(r[k] for k in capacity.COLUMNS) for r in doc["confirmations"]}
    for r in doc["fleets"]:  # the screen's fleets within the SLOs, by the objective
        if r["cost_per_month_usd"] < ch["cost_per_month_usd"]:
            assert tuple(r[k] for k in capacity.COLUMNS) in simulated, r
    for r in doc["confirmations"]:  # every simulated fleet cheaper than the chosen one failed the simulator
        if r["cost_per_month_usd"] < ch["cost_per_month_usd"]:
            assert not r["simulated"]["meets"], r


def test_n_plus_1_meets_the_slos_with_one_replica_down(searched):
    _, doc = searched
    n1 = doc["n_plus_1"]
    assert n1 is not None and n1["one_down"]["simulated"]["meets"]
    assert n1["dp"] == n1["one_down"]["dp"] + 1
    assert {k: v for k, v in n1.items() if k not in ("dp", "gpus", "cost_per_month_usd", "cost_per_mtok_usd",
                                                     "screened", "one_down")} == \
        {k: v for k, v in n1["one_down"].items() if k not in ("dp", "gpus", "cost_per_month_usd", "cost_per_mtok_usd",
                                                              "screened", "simulated")}


def test_the_pareto_front_is_not_dominated(searched):
    _, doc = searched
    front = [(r["cost_per_month_usd"], r["screened"]["e2e_p99_s"]) for r in doc["pareto"]]
    assert front and front == sorted(front)
    for a in front:
        assert not any(b[0] <= a[0] and b[1] <= a[1] and b != a for b in front)
    assert all(b[1] < a[1] for a, b in zip(front, front[1:]))


def test_each_layout_reports_the_highest_rate_of_one_replica(searched):
    _, doc = searched
    agg = [r for r in doc["layouts"] if r["mode"] == "aggregated"]
    assert {r["tp"] for r in agg} == {1, 2}
    for r in doc["layouts"]:
        assert r["highest_rate_per_s"] > 0
        assert r["replicas_for_rate"] == -(-40 // r["highest_rate_per_s"]) or r["replicas_for_rate"] * r[
            "highest_rate_per_s"] >= 40


def test_the_screening_does_not_depend_on_how_it_is_cut(tmp_path, monkeypatch):
    """Dask screens the candidates in tasks and joins the arrays: any cut gives the same document."""
    spec = _spec(tmp_path)
    whole = SE.run_search(spec.searches["s"], spec.policy)
    monkeypatch.setattr(capacity, "CHUNK", 7)
    cut = SE.run_search(spec.searches["s"], spec.policy)
    assert cut == whole


def test_every_fleet_fits_the_cap_and_the_layout_rules(searched):
    _, doc = searched
    for r in doc["fleets"] + doc["pareto"] + doc["confirmations"]:
        assert r["gpus"] <= 8
        per = r["pp"] * r["ep"] * (r["prefill_workers"] * r["prefill_tp"] + r["decode_workers"] * r["tp"]) \
            if r["prefill_workers"] else r["tp"] * r["pp"] * r["ep"]
        assert r["gpus"] == r["dp"] * per
        assert r["step_tokens"] >= r["max_seqs"]


def test_the_checker_words_for_a_capacity_search(tmp_path):
    path = tmp_path / "x.ccost"
    path.write_text(SPEC.replace("SEARCH", "batch = [1, 2]"), encoding="utf-8")
    msgs = [(d.code, d.message) for d in check.check_file(str(path)).diagnostics]
    assert any(c == "E205" and "is a capacity search" in m and "`batch`" in m for c, m in msgs), msgs
    layout = SPEC.replace("phase = online; stack = ops; traffic = t", "phase = decode; batch = 8").replace(
        "  max_seqs = [8, 32]\n  step_tokens = [512, 2048]\n  prefill_workers = [0, 1, 2]\n  decode_workers = [1, 2]\n",
        "").replace("SEARCH", "headroom = 20 %")
    path.write_text(layout, encoding="utf-8")
    msgs = [(d.code, d.message) for d in check.check_file(str(path)).diagnostics]
    assert any(c == "E203" and "`headroom` applies to a capacity search" in m for c, m in msgs), msgs


def test_headroom_sizes_above_the_peak(tmp_path):
    path = tmp_path / "cap.ccost"
    path.write_text(SPEC.replace("SEARCH", "headroom = 25 %").replace("prefill_workers = [0, 1, 2]",
                                                                       "prefill_workers = [0]"), encoding="utf-8")
    spec, _ = check.load_spec(str(path))
    doc = SE.run_search(spec.searches["s"], spec.policy)
    assert doc["sized_rate_per_s"] == pytest.approx(50.0)
    assert doc["headroom"] == 0.25 and doc["disaggregated"] is None
    assert np.isfinite(doc["chosen"]["simulated"]["ttft_p99_s"])


# slow (~2 s: starts a Dask cluster); test_the_screening_does_not_depend_on_how_it_is_cut is its sibling
@pytest.mark.slow
def test_on_a_dask_cluster_the_document_is_the_local_one(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    from ccost import remote

    spec = _spec(tmp_path)
    monkeypatch.setattr(capacity, "CHUNK", 11)  # several tasks
    local = SE.run_search(spec.searches["s"], spec.policy)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        seen = []
        try:
            far = SE.run_search(spec.searches["s"], spec.policy, scheduler=c.scheduler_address,
                                progress=lambda d, t: seen.append((d, t)))
        finally:
            remote.close(c.scheduler_address)
    assert far == local
    assert seen[-1] == (spec.searches["s"].size, spec.searches["s"].size)
