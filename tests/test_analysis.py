"""Analysis: the three evaluation modes agree to the last bit on every example spec; sweeps, optima,
comparisons and the checklist behave as the notes define them."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from ccost import check, derive, evaluate
from ccost.model import analysis, lower, phases
from ccost import spec as S

SPECS = Path(__file__).resolve().parent.parent / "specs"
EXAMPLES = sorted(p.name for p in SPECS.glob("*.ccost"))


def _load(name: str):
    spec, _ = check.load_spec(str(SPECS / name))
    return spec


def _plans(spec):
    return [n for n in (spec.local_plans or spec.plans)]


def _metric_values(program, metrics) -> dict[str, object]:
    out = {f.name: getattr(metrics, f.name) for f in fields(metrics)}
    c = program.compute
    out.update({f"compute.{f.name}": getattr(c, f.name) for f in fields(c) if f.name not in ("operators", "memory")})
    out.update({f"memory.{n}": v for n, v in c.memory.parts.items()})
    out.update({"memory.total": c.memory.total, "memory.limit": c.memory.limit})
    for i, row in enumerate(c.operators):  # (name, bytes, FLOPs, time, memory time, FLOP time)
        out.update({f"compute.operators{i}.{j}": v for j, v in enumerate(row[1:])})
    for i, k in enumerate(program.collectives):
        out[f"coll{i}.time"] = k.cost.time
        out[f"coll{i}.total"] = k.total
        out[f"coll{i}.hops"] = k.cost.hops
        out[f"coll{i}.volume"] = k.cost.volume
    return out


@pytest.mark.parametrize("name", EXAMPLES)
def test_float_and_derivation_modes_are_bit_identical(name):
    spec = _load(name)
    for pname in _plans(spec):
        plan = spec.plans[pname]
        phase = phases.of(plan)  # a serve plan: its decode step, with the plan's throughput
        pf, pd = phase.price(plan, spec.policy, False), phase.price(plan, spec.policy, True)
        vf = _metric_values(pf.program, pf.metrics)
        vd = _metric_values(pd.program, pd.metrics)
        assert vf.keys() == vd.keys()
        for key in vf:
            a, b = derive.value_of(vf[key]), derive.value_of(vd[key])
            assert float(a) == float(b), (pname, key, a, b)  # exact, not approx
        # the derivation mode really is a derivation
        assert isinstance(vd["step"], derive.Value)


@pytest.mark.parametrize("name", EXAMPLES)
def test_explain_values_equal_eval(name):
    spec = _load(name)
    results = evaluate.evaluate(spec)
    for pname, r in results.plans.items():
        steps = {s.name: s.value for s in evaluate.explain(spec, pname)}
        assert steps["T_comm"] == r.doc["comm_time_s"]
        assert steps["T_compute"] == r.doc["compute_time_s"]
        assert steps["T_step"] == r.doc["step_time_s"]
        assert steps["T_latency"] == r.doc["latency_s"]
        assert steps["efficiency"] == r.doc["efficiency"]


def test_array_mode_matches_float_mode_elementwise():
    spec = _load("a3-multi-node.ccost")
    base = spec.plans["tp8_pp2_tree"]
    layouts = [(tp, pp, dp, b) for tp in (1, 2, 4, 8, 16) for pp in (1, 2) for dp in (1, 2)
               for b in (32, 256) if tp * pp * dp <= 16]  # batches of at least its 32 micro-batches
    static, x = lower.prepare(base, spec.policy)
    def arr(i):
        return np.array([float(lay[i]) for lay in layouts])

    xa = lower.with_arrays(x, tp=arr(0), pp=arr(1), dp=arr(2), B=arr(3))
    ma = phases.analyse(phases.lower(static, xa))
    for i, (tp, pp, dp, b) in enumerate(layouts):
        r = evaluate.evaluate_plan(replace(base, tp=tp, pp=pp, dp=dp, batch=b), spec.policy)
        assert ma.step[i] == r.metrics.step, (tp, pp, dp, b)
        assert ma.T_comm[i] == r.metrics.T_comm
        assert ma.efficiency[i] == r.metrics.efficiency


def test_array_mode_microbatches_with_kv_and_given_compute():
    """t_mb (KV/M, F/M) and T_pipe agree bit for bit between array and float mode, KV cache or not."""
    spec = _load("a3-multi-node.ccost")
    layouts = [(pp, m) for pp in (1, 2) for m in (1, 3, 32)]
    for base in (replace(spec.plans["tp8_pp2"], seq=4096), replace(spec.plans["tp8_pp2"], compute_time=0.02),
                 replace(spec.plans["tp8_pp2"], phase="train", seq=4096, batch=64)):
        static, x = lower.prepare(base, spec.policy)
        xa = lower.with_arrays(x, pp=np.array([float(p) for p, _ in layouts]),
                               M=np.array([float(m) for _, m in layouts]))
        pa = phases.lower(static, xa)
        ma = phases.analyse(pa)
        for i, (pp, m) in enumerate(layouts):
            r = evaluate.evaluate_plan(replace(base, pp=pp, microbatches=m), spec.policy)
            assert pa.compute.t_mb[i] == r.program.compute.t_mb, (pp, m)
            assert ma.step[i] == r.metrics.step, (pp, m)
            assert ma.latency[i] == r.metrics.latency


def test_array_mode_auto_allreduce_and_moe():
    spec = _load("mixtral-ep.ccost")
    base = spec.plans["tp2_ep4"]
    layouts = [(1, 8), (2, 4), (4, 2), (8, 1)]
    static, x = lower.prepare(base, spec.policy)
    xa = lower.with_arrays(x, tp=np.array([float(t) for t, _ in layouts]),
                           ep=np.array([float(e) for _, e in layouts]))
    ma = phases.analyse(phases.lower(static, xa))
    for i, (tp, ep) in enumerate(layouts):
        r = evaluate.evaluate_plan(replace(base, tp=tp, ep=ep), spec.policy)
        assert ma.step[i] == r.metrics.step
        assert ma.throughput[i] == r.metrics.throughput


def test_group_of_one_costs_nothing_in_array_mode():
    spec = _load("a1-tp-decode.ccost")
    static, x = lower.prepare(spec.plans["tp8"], spec.policy)
    m = phases.analyse(phases.lower(static, lower.with_arrays(x, tp=np.array([1.0, 8.0]))))
    assert m.T_comm[0] == 0.0 and m.T_comm[1] > 0


# ---------------------------------------------------------------------------------------------------
# sweeps, optima, comparisons

def _pt(n, t, eff, fits=True):
    return {"tp": n, "gpus": n, "step_time_s": t, "efficiency": eff, "fits_memory": fits}


def test_optima_cost_optimal_is_largest_n_above_threshold():
    pol = S.Policy(name="policy", title=None, span=None, min_efficiency=0.6)
    pts = [_pt(1, 10.0, 1.0), _pt(2, 5.5, 0.91), _pt(4, 3.2, 0.78), _pt(8, 2.5, 0.5), _pt(16, 2.6, 0.24)]
    t_opt, c_opt = analysis.optima(pts, ["tp"], pol)
    assert t_opt == {"tp": 8}  # the shortest step, 2.5
    # 0.8 → 2 (0.91 ≥ 0.8, 0.78 < 0.8); 0.7 → 4; 0.6 (policy) → 4; 0.5 → 8 (0.5 ≥ 0.5)
    assert c_opt == {"0.8": {"tp": 2}, "0.7": {"tp": 4}, "0.6": {"tp": 4}, "0.5": {"tp": 8}}


def test_optima_skip_points_that_do_not_fit_or_failed():
    pol = S.Policy(name="policy", title=None, span=None)
    pts = [_pt(1, 10.0, 1.0, fits=False), _pt(2, 5.5, 0.91), {"tp": 4, "error": "too many GPUs"}]
    t_opt, c_opt = analysis.optima(pts, ["tp"], pol)
    assert t_opt == {"tp": 2} and c_opt["0.8"] == {"tp": 2}


def test_sweep_point_beyond_cluster_is_reported_not_raised():
    spec = _load("a1-tp-decode.ccost")  # one 8-GPU node, tp up to 64
    s = evaluate.sweep_document(spec.sweeps["tp_scaling"], spec.policy)
    bad = [p for p in s["points"] if "error" in p]
    assert [p["tp"] for p in bad] == [16, 32, 64]
    assert "16 GPUs" in bad[0]["error"] and "has 1 node × 8 = 8" in bad[0]["error"]  # E301, one wording


def test_continuous_optimum_only_where_the_notes_model_applies():
    spec = _load("a1-tp-decode.ccost")
    sw = spec.sweeps["tp_scaling"]
    assert evaluate.continuous_optimum(sw) == pytest.approx(45.58, rel=0.005)
    ring = replace(sw, base=spec.plans["tp8"])  # ring, not tree: the closed form does not hold
    assert evaluate.continuous_optimum(ring) is None


def _doc(step, thr, ovh, eff, fits=True):
    return {"step_time_s": step, "latency_s": step, "throughput_tokens_s": thr, "overhead": ovh, "efficiency": eff,
            "fits_memory": fits, "regime": "latency-bound", "title": None, "memory_bytes_per_gpu": 1e9,
            "checklist": []}


def test_rank_by_each_metric_with_margin():
    plans = {"a": _doc(0.020, 100.0, 0.5, 0.6), "b": _doc(0.010, 300.0, 0.2, 0.9),
             "c": _doc(0.015, 200.0, 0.3, 0.7)}
    assert analysis.rank("latency", plans)[0] == ["b", "c", "a"]
    assert analysis.rank("throughput", plans)[0] == ["b", "c", "a"]
    assert analysis.rank("overhead", plans)[0] == ["b", "c", "a"]
    assert analysis.rank("efficiency", plans)[0] == ["b", "c", "a"]
    _, text = analysis.rank("latency", plans)
    # 10 ms against 15 ms: 33.3 % less
    assert "`b`" in text and "33.3 % less than `c`" in text
    _, text = analysis.rank("overhead", plans)
    assert "10 percentage points below `c`" in text  # 20 % against 30 %


def test_checklist_threshold_items_follow_the_policy():
    spec = _load("a1-tp-decode.ccost")
    plan = spec.plans["tp8_one_shot"]  # overhead 30.5 %
    strict = evaluate.evaluate_plan(plan, spec.policy).checklist
    lax = evaluate.evaluate_plan(plan, replace(spec.policy, max_overhead=0.35)).checklist
    assert {i["id"]: i for i in strict}[6]["status"] == "fail"
    assert {i["id"]: i for i in lax}[6]["status"] == "pass"


def test_measured_links_pass_item_3(tmp_path):
    spec = _load("a1-tp-decode.ccost")
    plan = spec.plans["tp8"]
    link = replace(plan.cluster.intra_node, source="measured: nccl-tests all_reduce_perf, 2026-11-30")
    plan = replace(plan, cluster=replace(plan.cluster, intra_node=link))
    # the plan's stack profile must be measured too (a1 names the notes' `ideal`)
    items = {i["id"]: i for i in evaluate.evaluate_plan(plan, spec.policy).checklist}
    assert items[3]["status"] == "warn" and "stack profile" in items[3]["note"]
    stack = replace(plan.stack, source="measured: ccost calibrate --steps s.csv")
    items = {i["id"]: i for i in evaluate.evaluate_plan(replace(plan, stack=stack), spec.policy).checklist}
    assert items[3]["status"] == "pass"


def test_bubble_warns_with_too_few_microbatches():
    spec = _load("a3-multi-node.ccost")
    plan = replace(spec.plans["tp8_pp2"], microbatches=4)  # (2−1)/(4+2−1) = 20 %
    r = evaluate.evaluate_plan(plan, spec.policy)
    item = {i["id"]: i for i in r.checklist}[10]
    assert item["status"] == "warn" and item["value"] == pytest.approx(0.2, rel=1e-12)


def test_pipelining_enters_throughput_not_latency():
    spec = _load("a3-multi-node.ccost")
    m1 = evaluate.evaluate_plan(replace(spec.plans["tp8_pp2"], microbatches=1), spec.policy).doc
    m32 = evaluate.evaluate_plan(spec.plans["tp8_pp2"], spec.policy).doc
    assert m1["latency_s"] == m32["latency_s"]  # one token still crosses both stages in turn
    # M = 1: (1 + 2 − 1)·T_stage + exposed/(2·(1 − 1/2)) = T_compute + exposed = the latency
    assert m1["step_time_s"] == m1["latency_s"]


# A3 option B by hand: 405e9 parameters × 1 B (FP8) / (tp 8 × pp 2) = 25.3125 GB of weights per GPU,
# read from HBM at 3.35 TB/s = 7.5560 ms. In decode every micro-batch re-reads them.
A3_T_MB = 405e9 / 16 / 3.35e12
MS = 1e-3


def test_a3_decode_pipeline_rereads_the_weights_per_microbatch():
    spec = _load("a3-multi-node.ccost")
    assert A3_T_MB == pytest.approx(7.556 * MS, rel=1e-4)
    for name in ("tp8_pp2", "tp8_pp2_tree", "tp8_pp2_one_shot"):
        plan = spec.plans[name]
        prog = phases.lower_plan(plan, spec.policy)
        assert prog.compute.bytes_mb == pytest.approx(25.3125e9, rel=1e-12)
        assert prog.compute.t_mb == pytest.approx(A3_T_MB, rel=1e-12)
        d = evaluate.evaluate_plan(plan, spec.policy).doc
        # M = 32, P = 2: 33 slots of 7.556 ms, the exposed communication over 2·32/33 busy stages
        assert d["step_time_s"] == pytest.approx(33 * A3_T_MB + d["exposed_comm_s"] * 33 / 64, rel=1e-12)
        assert d["latency_s"] == pytest.approx(2 * A3_T_MB + d["exposed_comm_s"], rel=1e-12)  # unchanged
        # 32 micro-batches of one sequence each: a step of 32 tokens costs ~250 ms, not the 9.4 ms of
        # the even split (latency × 33/64) the old formula charged
        assert d["step_time_s"] > 20 * d["latency_s"] * 33 / 64
        assert d["throughput_tokens_s"] == pytest.approx(32 / d["step_time_s"], rel=1e-12)
    # one-shot with the notes' convention: exposed = 3.044 ms (TP) + 0.02397 ms (PP send) = 3.068 ms
    one = evaluate.evaluate_plan(spec.plans["tp8_pp2_one_shot"], spec.policy).doc
    # 33 × 7.5560 ms = 249.347 ms; 3.068 ms × 33/64 = 1.582 ms; 250.929 ms in all
    assert one["step_time_s"] == pytest.approx(249.347 * MS + 3.068 * MS * 33 / 64, rel=1e-5)


def test_decode_microbatch_reads_its_share_of_the_kv_cache():
    spec = _load("a3-multi-node.ccost")
    plan = replace(spec.plans["tp8_pp2"], seq=4096, microbatches=4)
    c = phases.lower_plan(plan, spec.policy).compute
    # KV per token 2 (K, V) × 126 layers × 8 KV heads × 128 head dim (16384/128) × 2 B = 516,096 B;
    # 32 sequences × 4096 tokens, split over min(tp 8, 8 KV heads) × pp 2 = 16 GPUs: 4,227,858,432 B
    kv_gpu = 32 * 4096 * 516_096 / 16
    assert c.kv_gpu == pytest.approx(kv_gpu, rel=1e-12)
    assert c.bytes_mb == pytest.approx(25.3125e9 + kv_gpu / 4, rel=1e-12)
    assert c.t_mb == pytest.approx((25.3125e9 + kv_gpu / 4) / 3.35e12, rel=1e-12)


def test_single_stage_microbatches_reread_the_weights():
    spec = _load("a3-multi-node.ccost")
    p1 = evaluate.evaluate_plan(spec.plans["tp16_hier"], spec.policy).doc
    p4 = evaluate.evaluate_plan(replace(spec.plans["tp16_hier"], microbatches=4), spec.policy).doc
    # P = 1, M = 1: exactly T_compute + exposed, as before
    assert p1["step_time_s"] == p1["latency_s"] == p1["compute_time_s"] + p1["exposed_comm_s"]
    # P = 1, M = 4: no bubble, but 4 reads of the 25.3125 GB (tp 16) of weights: 4 × 7.556 ms + exposed
    assert p4["bubble"] == 0.0
    assert p4["step_time_s"] == pytest.approx(4 * A3_T_MB + p4["exposed_comm_s"], rel=1e-12)


def test_training_pipeline_schedule_and_flops():
    spec = _load("a3-multi-node.ccost")
    # training, 64 sequences of 4096 tokens in 16 micro-batches on TP8 x PP2. The a3 model gives no vocab,
    # so the GEMM FLOPs are 2 × 405e9 per token forward; causal attention 2·L·S·d = 2 × 126 × 4096 × 16384
    # = 1.6911e10 forward. Hardware FLOPs per GPU: 64 × 4096 / 16 × (3 × (8.1e11 + 1.6911e10) + 1.6911e10)
    # (selective recomputation re-runs the attention core) = 16384 × 2.4977e12 = 4.0922e16
    plan = replace(spec.plans["tp8_pp2"], phase="train", batch=64, seq=4096, microbatches=16)
    prog = phases.lower_plan(plan, spec.policy)
    c, tt = prog.compute, prog.train
    attn = 2 * 126 * 4096 * 16384
    assert c.flops_gpu == pytest.approx(64 * 4096 / 16 * (3 * (8.1e11 + attn) + attn), rel=1e-12)
    assert tt.flops_model_token == pytest.approx(3 * (8.1e11 + attn), rel=1e-12)
    m = phases.analyse(prog)
    # 1F1B, P = 2, M = 16: 16 + 1 slots; bubble 1/17; step = 17·(t_mb + c_mb) + T_once
    assert m.bubble == pytest.approx(1 / 17, rel=1e-12)
    assert m.step == pytest.approx(17 * (c.t_mb + tt.c_mb) + tt.once, rel=1e-12)
    assert tt.in_flight_mb == 2  # 1F1B keeps min(M, P) micro-batches on the first stage
    # interleaved with v = 2: (P−1)/v = 0.5 bubble slots: 0.5/16.5; first stage holds 2·(1 + 1/4) = 2.5
    inter = phases.lower_plan(replace(plan, schedule="interleaved", virtual_stages=2), spec.policy)
    mi = phases.analyse(inter)
    assert mi.bubble == pytest.approx(0.5 / 16.5, rel=1e-12)
    assert inter.train.in_flight_mb == pytest.approx(2.5, rel=1e-12)
    # GPipe: same bubble as 1F1B, all 16 micro-batches' activations held (8× the 1F1B layers' share)
    gp = phases.lower_plan(replace(plan, schedule="gpipe"), spec.policy)
    assert phases.analyse(gp).bubble == pytest.approx(1 / 17, rel=1e-12)
    assert gp.train.in_flight_mb == 16
    assert gp.compute.memory["activations"] > 7 * c.memory["activations"]


def test_given_compute_time_is_split_over_the_microbatches():
    spec = _load("a3-multi-node.ccost")
    plan = replace(spec.plans["tp8_pp2"], compute_time=0.020, microbatches=8)
    prog = phases.lower_plan(plan, spec.policy)
    m = phases.analyse(prog)
    # T_stage = 20 ms / 2 = 10 ms, t_mb = 10/8 = 1.25 ms; (8 + 2 − 1) × 1.25 ms = 11.25 ms + exposed·9/16
    assert prog.compute.t_mb == pytest.approx(1.25 * MS, rel=1e-12)
    assert m.step == pytest.approx(11.25 * MS + m.exposed * 9 / 16, rel=1e-12)


# ---------------------------------------------------------------------------------------------------
# Properties of whole plans

from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_A3 = None


def _a3():
    global _A3
    if _A3 is None:
        _A3 = _load("a3-multi-node.ccost")
    return _A3


def _faster_links(plan, bw_factor: float, alpha_factor: float):
    cl = plan.cluster
    intra = replace(cl.intra_node, bandwidth=cl.intra_node.bandwidth * bw_factor,
                    alpha=cl.intra_node.alpha * alpha_factor,
                    one_shot_latency=None if cl.intra_node.one_shot_latency is None
                    else cl.intra_node.one_shot_latency * alpha_factor)
    inter = replace(cl.inter_node, bandwidth=cl.inter_node.bandwidth * bw_factor,
                    alpha=cl.inter_node.alpha * alpha_factor)
    return replace(plan, cluster=replace(cl, intra_node=intra, inter_node=inter))


@settings(max_examples=25, deadline=None)
@given(plan=st.sampled_from(["tp16", "tp16_hier", "tp8_pp2", "tp8_pp2_tree", "tp8_pp2_one_shot"]),
       bw=st.floats(1.0, 20.0), alpha=st.floats(0.01, 1.0),
       batch=st.sampled_from([1, 8, 32, 256]), algorithm=st.sampled_from(["ring", "tree", "auto"]))
def test_more_bandwidth_or_less_latency_never_slows_a_plan(plan, bw, alpha, batch, algorithm):
    spec = _a3()
    p = replace(spec.plans[plan], batch=batch, allreduce=algorithm)
    p = replace(p, microbatches=min(p.microbatches, batch))  # a micro-batch needs a sequence (E401)
    slow = evaluate.evaluate_plan(p, spec.policy).doc
    fast = evaluate.evaluate_plan(_faster_links(p, bw, alpha), spec.policy).doc
    assert fast["comm_time_s"] <= slow["comm_time_s"]
    assert fast["step_time_s"] <= slow["step_time_s"]
    assert fast["efficiency"] >= slow["efficiency"]


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2]), dp=st.sampled_from([1, 2]),
       batch=st.integers(1, 512), microbatches=st.integers(1, 64), overlap=st.floats(0.0, 1.0))
def test_plan_invariants(tp, pp, dp, batch, microbatches, overlap):
    assume(tp * pp * dp <= 16 and microbatches <= batch)  # more micro-batches than sequences is E401
    spec = _a3()
    p = replace(spec.plans["tp8_pp2"], tp=tp, pp=pp, dp=dp, batch=batch, microbatches=microbatches,
                overlap=overlap)
    d = evaluate.evaluate_plan(p, spec.policy).doc
    assert d["gpus"] == tp * pp * dp
    assert d["exposed_comm_s"] <= d["comm_time_s"] + 1e-18
    assert d["latency_s"] == pytest.approx(d["compute_time_s"] + d["exposed_comm_s"], rel=1e-12)
    # each micro-batch costs at least its even share of a stage (it re-reads the weights), so the step is
    # never below the even-split bound latency/(P·(1 − bubble)); and never above M + P − 1 whole stages
    in_flight = pp * microbatches / (microbatches + pp - 1)
    assert d["step_time_s"] >= d["latency_s"] / in_flight * (1 - 1e-12)
    stage = d["compute_time_s"] / pp
    assert d["step_time_s"] <= ((microbatches + pp - 1) * stage + d["exposed_comm_s"] / in_flight) * (1 + 1e-12)
    assert 0.0 <= d["bubble"] < 1.0
    assert d["comm_time_s"] == pytest.approx(d["latency_term_s"] + d["bandwidth_term_s"], rel=1e-9)
    for c in d["collectives"]:
        assert float(c["hops"]).is_integer() and c["hops"] >= 1
        assert c["time_s"] == pytest.approx(c["latency_s"] + c["bandwidth_s"], rel=1e-12)


def test_rank_puts_plans_that_break_the_policy_after_those_that_meet_it():
    def doc(latency, fits=True, fails=()):
        return {"latency_s": latency, "fits_memory": fits, "overhead": 0.1, "efficiency": 0.5,
                "regime": "latency-bound", "memory_bytes_per_gpu": 1e9,
                "checklist": [{"id": i, "status": "fail" if i in fails else "pass"} for i in (6, 9, 11)]}

    plans = {"fast_but_over": doc(0.010, fails=(6,)), "meets": doc(0.012), "slower_over": doc(0.020, fails=(9,)),
             "unfit": doc(0.001, fits=False)}
    order, text = analysis.rank("latency", plans)
    # fit memory and meet the policy, then break a threshold (by latency among them), then do not fit memory
    assert order == ["meets", "fast_but_over", "slower_over", "unfit"]
    assert text.startswith("Choose `meets`") and "`fast_but_over` is better by per-step latency (10 ms) but fails " \
        "checklist item 6" in text and "slower_over` is better" not in text
    # no margin against a runner-up that is faster but ranked below for the policy
    assert "less than `fast_but_over`" not in text
    # when every plan breaks the policy, the metric alone ranks them and the choice carries a caution
    order, text = analysis.rank("latency", {"a": doc(0.02, fails=(6,)), "b": doc(0.01, fails=(9,))})
    assert order == ["b", "a"] and "Caution: checklist item 9 fails for it." in text


def test_compare_text_says_why_a_faster_plan_is_ranked_below():
    from ccost.output import compare_text

    def doc(latency, fails=(), fits=True):
        return {"latency_s": latency, "fits_memory": fits, "overhead": 0.1, "efficiency": 0.9, "regime": "x",
                "checklist": [{"id": i, "status": "fail" if i in fails else "pass"} for i in range(1, 12)]}

    plans = {"slow_ok": doc(2.0), "fast_bad": doc(1.0, fails=(6, 9)), "huge": doc(0.5, fits=False)}
    order, text = analysis.rank("latency", plans)
    assert order == ["slow_ok", "fast_bad", "huge"]
    c = {"title": "t", "by": "latency", "ranking": order, "recommendation": text,
         "values": {n: plans[n]["latency_s"] for n in order}}
    lines = compare_text("c", c, plans).splitlines()
    assert lines[1] == "  1. slow_ok   2 s"
    assert lines[2] == "  2. fast_bad  1 s  (breaks the policy: checklist 6, 9 failed)"
    assert lines[3] == "  3. huge      500 ms  (does not fit memory)"
