"""Training targets (ccost.model.target): the checkpoint interval, goodput, time to train and its money,
checked against published examples and hand calculations, and the global batch the layouts must hold.

Expected values come from sources or from arithmetic written out in each test, never from the code's own
output: Daly's three worked examples (J. T. Daly, "A higher order estimate of the optimum checkpoint interval
for restart dumps", FGCS 22, 2006, Figs. 3-5), Young's formula by hand, the goodput against a brute-force
maximum of the expected-time model, and the Llama 3 paper's interruption count.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ccost import derive, units
from ccost.model import target
from ccost import spec as S

MIN = 60.0
HOUR = 3600.0
DAY = 86400.0


# --- the checkpoint interval -------------------------------------------------------------------------------

@pytest.mark.parametrize("M_min, tau_min", [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_interval_reproduces_dalys_worked_examples(M_min, tau_min):
    """Daly (2006), Figs. 3-5: δ = 5 min, R = 10 min; M = 24 h → τ_opt = 117 min, M = 6 h → 57 min,
    M = 15 min → 9.1 min (the paper rounds to the digits shown)."""
    tau = target.daly_interval(5 * MIN, M_min * MIN) / MIN
    assert round(tau, 1 if tau_min < 10 else 0) == tau_min


def test_daly_interval_by_hand():
    """M = 6 h = 360 min, δ = 5 min: √(2·5·360) = 60; ξ = 5/720 = 0.0069444; √ξ = 0.083333;
    60·(1 + 0.083333/3 + 0.0069444/9) − 5 = 60·1.0285494 − 5 = 56.712963 min."""
    assert target.daly_interval(5 * MIN, 360 * MIN) / MIN == pytest.approx(56.712963, rel=1e-7)


def test_young_interval_by_hand():
    """√(2·δ·M): δ = 5 min, M = 24 h: √(2 × 300 s × 86,400 s) = √51,840,000 = 7,200 s = 120 min."""
    assert target.young_interval(300.0, DAY) == pytest.approx(7200.0, rel=1e-15)


def test_daly_interval_is_the_mtbf_when_the_checkpoint_takes_longer_than_two_mtbf():
    """Daly: for δ ≥ 2M the optimum is τ = M (checkpoint as often as failures come)."""
    assert target.daly_interval(3 * HOUR, HOUR) == HOUR
    arr = target.daly_interval(np.array([5 * MIN, 3 * HOUR]), np.array([6 * HOUR, HOUR]))
    assert arr[1] == HOUR and arr[0] / MIN == pytest.approx(56.712963, rel=1e-7)


# --- goodput -----------------------------------------------------------------------------------------------

def test_goodput_is_maximal_at_dalys_interval():
    """Daly's τ is the optimum of the expected-time model the goodput is (T_w = M·e^(R/M)·(e^((τ+δ)/M) − 1)·
    T_s/τ): a brute-force search over τ on a fine grid finds the maximum of G within 0.01 % of it."""
    M, delta, R = 6 * HOUR, 5 * MIN, 10 * MIN
    taus = np.linspace(60.0, 6 * HOUR, 2_000_001)
    best = taus[np.argmax(target.goodput(taus, delta, R, M))]
    assert best == pytest.approx(target.daly_interval(delta, M), rel=1e-4)


def test_goodput_by_hand():
    """M = 10 h = 36,000 s, δ = 60 s, R = 600 s, τ = 3,600 s:
    R/M = 1/60, e^(1/60) = 1 + x + x²/2 + x³/6 = 1.0168063; (τ + δ)/M = 3,660/36,000 = 0.1016667,
    e^x − 1 = x + x²/2 + x³/6 + x⁴/24 = 0.1016667 + 0.0051681 + 0.0001751 + 0.0000045 = 0.1070145;
    G = 3,600 / (36,000 × 1.0168063 × 0.1070145) = 3,600 / 3,917.269 = 0.919008.
    First order (1 − δ/τ − (τ/2 + R)/M = 1 − 0.016667 − 0.066667 = 0.916667) is close: the exact form
    counts failures during checkpoints and restarts too."""
    G = target.goodput(3600.0, 60.0, 600.0, 36000.0)
    assert G == pytest.approx(0.919008, rel=1e-6)
    assert G == pytest.approx(1 - 60 / 3600 - (1800 + 600) / 36000, abs=0.003)


def test_goodput_runs_in_the_three_modes_and_agrees_to_the_bit():
    """One formula on floats, arrays and derivation values (principle: one formula for every number)."""
    args = (3600.0, 60.0, 600.0, 36000.0)
    f = target.goodput(*args)
    a = target.goodput(*(np.array([v, v]) for v in args))
    leaves = [derive.leaf(n, v, units.TIME) for n, v in zip(("τ", "δ", "R", "M"), args)]
    d = target.goodput(*leaves)
    assert a[0] == f and a[1] == f and d.value == f
    assert "exp" in derive.formula(d)


def test_llama3_default_failure_rate_is_the_papers_count():
    """The bundled default: 419 unexpected interruptions / (16,384 GPUs × 54 days × 24 h) = 1.9733e-5 per
    GPU-hour; a job of 16,384 GPUs is then interrupted every 1/(16,384 × 1.9733e-5) = 3.093 h (the paper:
    "one every three hours")."""
    per_gpu_hour = S.DEFAULT_FAILURE_RATE * HOUR
    assert per_gpu_hour == pytest.approx(419 / (16384 * 54 * 24), rel=1e-12)
    assert per_gpu_hour == pytest.approx(1.9733e-5, rel=1e-4)
    assert target.mtbf(16384, S.DEFAULT_FAILURE_RATE) / HOUR == pytest.approx(54 * 24 / 419, rel=1e-12)


def test_checkpoint_bytes_and_time_by_hand():
    """Llama-3.1-405B, BF16 weights and Adam with FP32 master weights: 405,853,388,800 × (2 + 12) B =
    5.6819 TB; at 2 TB/s (Tectonic's sustained throughput, the Llama 3 paper §3.3.1) δ = 2.841 s."""
    C = target.checkpoint_bytes(405_853_388_800 * 2.0, 405_853_388_800, 12.0)
    assert C == 405_853_388_800 * 14
    assert target.checkpoint_time(C, 2e12) == pytest.approx(2.8409737, rel=1e-7)


# --- the global batch in a search (the seven-searches case is one search) -------------------------

from ccost import evaluate, search  # noqa: E402
from ccost.check import check_text  # noqa: E402

SEVEN = '''
import "std/gpus.ccost"
import "std/links.ccost"
import "std/models.ccost"

cluster h100_64 "8 HGX H100 nodes" {
  gpu = h100; nodes = 8; gpus_per_node = 8; intra_node = nvlink4; inter_node = ib_ndr
}
plan base {
  model = llama3_70b; cluster = h100_64; phase = train; seq = 8192
  BATCH
  tp = 8; pp = 4; dp = 2; microbatch_size = 1
  sequence_parallel = true
}
search s {
  base = base
  tp = [1, 2, 4, 8]; pp = [1, 2, 4, 8]; DP
  recompute = [selective, full]
  fits_memory = false; use_policy = false
  top = 1000; distinct = false
}
'''


def _seven(batch: str, dp: str):
    res = check_text(SEVEN.replace("BATCH", batch).replace("DP", dp), "specs/t.ccost")
    assert not res.errors, [d.message for d in res.errors]
    return res.spec


def test_a_search_with_a_global_batch_lists_only_the_layouts_that_hold_it():
    """The issue's case: Llama-3-70B on 64 H100, sequence 8,192, global batch 512 sequences. One search over
    dp = 1..64 keeps exactly the layouts whose dp divides 512 (dp = 3, 5, 6, 7, ... are the global_batch
    constraint's), each with batch = 512/dp, and every record it lists holds dp·batch = 512."""
    spec = _seven("global_batch = 512", "dp = range(1, 64)")
    doc = search.run_search(spec.searches["s"], spec.policy)
    assert doc["top"], doc["constraints"]
    for rec in doc["top"] + doc["pareto"]:
        assert rec["dp"] * rec["batch"] == 512, rec
        assert rec["microbatches"] == rec["batch"]  # microbatch_size = 1
        assert rec["gpus"] <= 64
    gb = next(c for c in doc["constraints"] if c["constraint"] == "global_batch")
    assert gb["threshold"] == 512
    # dp ∈ 1..64 with tp·pp·dp ≤ 64: the dp that divide 512 and fit stay; the others all fail the constraint
    held = {r["dp"] for r in doc["top"]}
    assert held == {1, 2, 4, 8, 16, 32, 64}
    assert gb["failed"] > 0


def test_the_seven_searches_are_one_search():
    """Without a training target, holding the global batch at 512 took one search per dp, each with batch =
    512/dp. The one search with `global_batch = 512` lists the same layouts with the same numbers, bit for
    bit, as the union of those seven."""
    spec = _seven("global_batch = 512", "dp = pow2(1, 64)")
    one = search.run_search(spec.searches["s"], spec.policy)["top"]
    union = []
    for dp in (1, 2, 4, 8, 16, 32, 64):
        old = _seven(f"batch = {512 // dp}", f"dp = [{dp}]")
        union += search.run_search(old.searches["s"], old.policy)["top"]
    key = lambda r: (r["tp"], r["pp"], r["dp"], r["recompute"])  # noqa: E731
    assert len(union) == 128  # the layouts of at most 64 GPUs: tp·pp·dp ≤ 64, × 2 recompute
    mine = {key(r): r for r in one}
    theirs = {key(r): r for r in union}
    assert mine.keys() == theirs.keys()
    for k, r in theirs.items():
        for f in ("step_time_s", "latency_s", "throughput_per_gpu", "memory_bytes_per_gpu", "gpus"):
            assert mine[k][f] == r[f], (k, f)


def test_a_search_point_with_a_global_batch_is_its_plan_alone():
    """``point_plan`` gives the point its derived batch (and micro-batches): evaluated alone it is the
    record, bit for bit."""
    spec = _seven("global_batch = 512", "dp = [4]")
    se = spec.searches["s"]
    rec = search.run_search(se, spec.policy)["top"][0]
    plan = search.point_plan(se, {k: rec[k] for k in ("tp", "pp", "dp", "recompute")})
    assert (plan.batch, plan.microbatches) == (128, 128)
    alone = evaluate.evaluate_plan(plan, spec.policy).doc
    assert alone["step_time_s"] == rec["step_time_s"]


AXES_SPEC = '''
import "std/gpus.ccost"
import "std/links.ccost"
import "std/models.ccost"
import "std/clusters.ccost"

plan base {
  model = llama3_70b; cluster = hgx_h100_16node; phase = train; seq = 4096
  global_batch = 256; microbatch_size = 1
  tp = 8; pp = 4; dp = 4
}
search s {
  base = base
  pp = [2, 4]; dp = [2, 4]
  recompute = [selective, full]; sequence_parallel = [false, true]; optimizer_sharding = [none, zero1]
  schedule = [one_f_one_b, interleaved]; virtual_stages = [1, 2]
  fits_memory = false; use_policy = false
  top = 1000; distinct = false
}
'''


def test_training_choices_are_search_axes_and_each_point_is_its_plan_alone():
    """recompute, sequence_parallel, optimizer_sharding, schedule and virtual_stages vary one pass per value;
    every record is the plan with those values evaluated alone, bit for bit. Model chunks without the
    interleaved schedule repeat v = 1: the virtual_stages_interleaved constraint removes them."""
    res = check_text(AXES_SPEC, "specs/t.ccost")
    assert not res.errors, [d.message for d in res.errors]
    spec = res.spec
    se = spec.searches["s"]
    doc = search.run_search(se, spec.policy)
    recs = doc["top"]
    # 2 pp × 2 dp × 2 × 2 × 2 × (1F1B v=1, interleaved v=1, interleaved v=2) = 96 (1F1B with v = 2 removed)
    assert len(recs) == 96
    v = next(c for c in doc["constraints"] if c["constraint"] == "virtual_stages_interleaved")
    assert v["removed"] == 2 * 2 * 2 * 2 * 2
    seen = set()
    for rec in recs:
        layout = {k: rec[k] for k in ("pp", "dp", "recompute", "sequence_parallel", "optimizer_sharding",
                                      "schedule", "virtual_stages")}
        seen.add((rec["schedule"], rec["virtual_stages"]))
        alone = evaluate.evaluate_plan(search.point_plan(se, layout), spec.policy).doc
        for f in ("step_time_s", "memory_bytes_per_gpu", "throughput_per_gpu", "bubble"):
            assert alone[f] == rec[f], (layout, f)
    assert seen == {("one_f_one_b", 1), ("interleaved", 1), ("interleaved", 2)}


def test_a_training_axis_on_a_decode_search_and_batch_beside_a_global_batch_are_errors():
    text = AXES_SPEC.replace("  pp = [2, 4]; dp = [2, 4]\n", "  pp = [2, 4]; dp = [2, 4]; batch = [64, 128]\n")
    msgs = [d.message for d in check_text(text, "specs/t.ccost").errors]
    assert any("varies `batch`, but its base plan `base` fixes the global batch" in m for m in msgs), msgs
    text = AXES_SPEC.replace("phase = train; seq = 4096\n  global_batch = 256; microbatch_size = 1",
                             "phase = decode; seq = 4096; batch = 8")
    msgs = [d.message for d in check_text(text, "specs/t.ccost").errors]
    assert any("varies `recompute`, which applies to train plans only" in m for m in msgs), msgs
    text = AXES_SPEC.replace("top = 1000", "objective = time_to_train; top = 1000")
    msgs = [d.message for d in check_text(text, "specs/t.ccost").errors]
    assert any("ranks by time_to_train, but its base plan `base` states no training target" in m
               for m in msgs), msgs


# --- the 70 B target and the 405 B goodput, by hand ------------------------------------------------

import os  # noqa: E402

from ccost.check import check_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _doc(spec_name: str):
    res = check_file(os.path.join(ROOT, "specs", spec_name))
    assert not res.errors, [d.message for d in res.errors]
    return res.spec, evaluate.results_document(evaluate.evaluate(res.spec))


def test_time_to_train_gpu_days_energy_and_cost_of_the_70b_target_by_hand():
    """specs/train-target-llama70b.ccost, plan llama70b (docs/training-target.md works it the same way).
    From the spec's inputs and the plan's step time (the step model's, derived in `ccost explain`), with this
    test's own arithmetic: 15e12 tokens in steps of 2,048 × 8,192 tokens; 70,553,706,496 parameters × (2 B of
    BF16 weights + 12 B of Adam state) written at 1 TB/s; 419 interruptions per 16,384 × 54 × 24 GPU-hours on
    2,048 GPUs; a 10 min restart; Daly's interval and goodput; 700 W × 1.2 PUE and 3.78 USD per GPU-hour."""
    _, doc = _doc("train-target-llama70b.ccost")
    p = doc["plans"]["llama70b"]
    t = p["target"]
    T_step, N = p["step_time_s"], 2048
    steps = math.ceil(15e12 / (2048 * 8192))
    assert steps == 894_070 == t["train_steps"]
    T_ideal = steps * T_step
    C = 70_553_706_496 * (2 + 12)
    delta = C / 1e12
    lam = 419 / (16384 * 54 * 24 * 3600.0)
    M = 1 / (N * lam)
    assert M / HOUR == pytest.approx(24.745, abs=5e-4)
    xi = delta / (2 * M)
    tau = math.sqrt(2 * delta * M) * (1 + math.sqrt(xi) / 3 + xi / 9) - delta
    G = tau / (M * math.exp(600 / M) * (math.exp((tau + delta) / M) - 1))
    T = T_ideal / G
    rel = 1e-6  # the document's numbers are written to 7 significant digits
    assert t["checkpoint_bytes"] == C
    assert t["checkpoint_time_s"] == pytest.approx(delta, rel=rel)
    assert t["mtbf_s"] == pytest.approx(M, rel=rel)
    assert t["checkpoint_interval_s"] == pytest.approx(tau, rel=rel)
    assert t["goodput"] == pytest.approx(G, rel=rel)
    assert t["ideal_time_s"] == pytest.approx(T_ideal, rel=rel)
    assert t["time_to_train_s"] == pytest.approx(T, rel=rel)
    assert t["gpu_days"] == pytest.approx(N * T / DAY, rel=rel)
    assert t["energy_j"] == pytest.approx(N * 700 * 1.2 * T, rel=rel)
    assert t["cost_usd"] == pytest.approx(N * 3.78 * T / HOUR, rel=rel)
    # (docs/training-target.md quotes each figure through `python -m ccost.docfigures`, checked there)
    assert t["meets_deadline"] is False and T > 60 * DAY
    items = {i["id"]: i for i in p["checklist"]}
    assert items[13]["status"] == "fail" and items[14]["status"] == "pass"  # 98.9 % ≥ the policy's 90 %


def test_the_405b_on_16k_gpus_reports_goodput_between_80_and_95_percent_with_its_sources():
    """specs/llama3-405b-train.ccost: the Llama 3 paper's layout on 16,384 H100 with its interruption rate,
    Tectonic's 2 TB/s and the 10 min restart: 92.6 % expected goodput (the paper: "higher than 90 %"), and
    the document names where each input came from."""
    spec, doc = _doc("llama3-405b-train.ccost")
    t = doc["plans"]["tp8_pp16_v8"]["target"]
    assert doc["plans"]["tp8_pp16_v8"]["gpus"] == 16384
    assert 0.80 <= t["goodput"] <= 0.95
    # by hand: M = 54 × 24 h / 419 (the paper's own job MTBF: every GPU of it), δ = 5.6819 TB / 2 TB/s
    M = 54 * 24 * HOUR / 419
    delta = 405_853_388_800 * 14 / 2e12
    xi = delta / (2 * M)
    tau = math.sqrt(2 * delta * M) * (1 + math.sqrt(xi) / 3 + xi / 9) - delta
    G = tau / (M * math.exp(600 / M) * (math.exp((tau + delta) / M) - 1))
    assert t["goodput"] == pytest.approx(G, rel=1e-6) and round(G, 3) == 0.926
    src = t["sources"]
    assert "Llama 3 paper" in src["failure_rate"] and "419" in src["failure_rate"]
    assert src["checkpoint_bandwidth"] == "cluster `h100_2048n`: checkpoint_bandwidth"
    assert "assumption" in src["restart_time"]
    assert spec.clusters["h100_2048n"].checkpoint_bandwidth == 2e12


def test_explain_derives_the_target_step_by_step_with_the_numbers_of_eval():
    """`ccost explain` prints the time to train as steps, and every value is the document's (one set of
    formulas on floats and on derivation values)."""
    spec, doc = _doc("train-target-llama70b.ccost")
    sections = dict(evaluate.explain_sections(spec, "llama70b"))
    steps = {s.name: s for s in sections["time to train"]}
    t = doc["plans"]["llama70b"]["target"]
    for name, key in (("n_steps", "train_steps"), ("δ", "checkpoint_time_s"), ("MTBF", "mtbf_s"),
                      ("τ_Daly", "checkpoint_interval_s"), ("G", "goodput"), ("T_train", "time_to_train_s"),
                      ("GPU_days", "gpu_days"), ("E_train", "energy_j"), ("C_train", "cost_usd")):
        assert steps[name].value == pytest.approx(t[key], rel=1e-6), name
    assert "exp(T_restart/MTBF)" in steps["G"].formula
    inputs = {s.name: s for s in sections["inputs"]}
    assert "Llama 3 paper" in inputs["λ"].source


def test_a_sweep_over_dp_holds_the_global_batch():
    """A sweep point is the base plan with its values: with a global batch, its batch follows dp."""
    text = AXES_SPEC.replace("search s {", "sweep w { base = base; dp = [1, 2, 4] }\nsearch s {")
    res = check_text(text, "specs/t.ccost")
    assert not res.errors, [d.message for d in res.errors]
    doc = evaluate.sweep_document(res.spec.sweeps["w"], res.spec.policy)
    from ccost.model import analysis

    plans = [p for _, p in analysis.sweep_points(res.spec.sweeps["w"])]
    assert [(p.dp, p.batch, p.microbatches) for p in plans] == [(1, 256, 256), (2, 128, 128), (4, 64, 64)]
    assert all("error" not in pt for pt in doc["points"])


def test_ranking_by_the_cost_of_the_run_needs_a_price():
    """objective = train_cost on a cluster with no price is E403, like cost_per_token."""
    text = AXES_SPEC.replace("top = 1000", "objective = train_cost; top = 1000").replace(
        "global_batch = 256; microbatch_size = 1", "global_batch = 256; microbatch_size = 1; train_tokens = 1e12")
    text = text.replace('import "std/clusters.ccost"', 'import "std/clusters.ccost"\n'
                        'gpu g0 { memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s }\n'
                        'cluster c16 extends hgx_h100_16node { gpu = g0 }')
    res = check_text(text.replace("cluster = hgx_h100_16node", "cluster = c16"), "specs/t.ccost")
    assert not res.errors, [d.message for d in res.errors]
    from ccost.diagnostics import CcostError

    with pytest.raises(CcostError) as exc:
        search.run_search(res.spec.searches["s"], res.spec.policy)
    assert exc.value.diagnostics[0].code == "E403"


def test_the_policy_gate_judges_the_deadline_and_the_goodput():
    """`ccost check --policy` fails a plan that misses its target's deadline (checklist item 13) or whose
    goodput is below the policy's min_goodput (item 14), with a line that says by how much."""
    from dataclasses import replace

    from ccost import gate

    spec, _ = _doc("train-target-llama70b.ccost")
    lines = gate.policy_failures(spec, evaluate.evaluate(spec))
    assert any(ln.startswith("llama70b: checklist 13 time to train") and "> deadline 60 d" in ln for ln in lines), lines
    strict = replace(spec, policy=replace(spec.policy, min_goodput=0.995))
    lines = gate.policy_failures(strict, evaluate.evaluate(strict))
    assert any(ln.startswith("llama70b: checklist 14 goodput 98.9 % < min 99.5 %") for ln in lines), lines


def test_a_run_whose_checkpoints_outlast_the_interruptions_is_a_diagnostic_not_a_crash():
    # found by bench/fuzz.py (seed 1820543321): checkpoint_bandwidth = 1e-6 TB/s on 16,384 H100 gave a goodput
    # of about 1e-222; on the doubled plan (twice the GPUs, interruptions twice as often) e^((τ+δ)/MTBF)
    # overflowed, the goodput was 0 and T_ideal / G a ZeroDivisionError (exit 70)
    # By hand: a checkpoint of 70.55e9 parameters × 14 B = 9.88e11 B, at 1 MB/s (the least bandwidth a link
    # takes) δ = 9.88e5 s. With 1 interruption per GPU every 1,000 h, 2,048 GPUs have an MTBF of 1,000 h / 2,048
    # = 1,758 s: (τ + δ)/MTBF ≈ 563 keeps e^((τ+δ)/MTBF) finite (e^709.8 is the largest double) and G > 0;
    # twice the GPUs halve the MTBF (≈ 1,125: overflow, G = 0). At 1 per 100 h the plan itself has G = 0.
    from ccost.diagnostics import CcostError

    text = (Path(ROOT) / "specs" / "train-target-llama70b.ccost").read_text()
    for rate, doubled_only in (("1 / (1000 h)", True), ("1 / (100 h)", False)):
        slow = text.replace("checkpoint_bandwidth = 1 TB/s ", f"checkpoint_bandwidth = 1 MB/s; failure_rate = {rate} ",
                            1)
        assert slow != text
        spec = check_text(slow, "t.ccost").spec
        assert spec is not None
        if doubled_only:
            with np.errstate(over="ignore"):  # e^((τ+δ)/MTBF) of the doubled plan overflows: that is the case
                doc = evaluate.evaluate_plan(spec.plans["llama70b"], spec.policy).doc
            assert doc["target"]["goodput"] > 0
            assert "never finishes training" in doc["target"]["doubled"]["note"]
            continue
        with pytest.raises(CcostError) as exc, np.errstate(over="ignore"):
            evaluate.evaluate_plan(spec.plans["llama70b"], spec.policy)
        d = exc.value.diagnostics[0]
        assert d.code == "E401" and "never finishes training" in d.message and "checkpoint_bandwidth" in d.help
