"""Lowering and pricing of plans the notes do not cover, checked against hand arithmetic written out here;
and plans that cannot be evaluated, which must give diagnostics (never a traceback or a NaN).

Specs are built from ``ccost.spec`` entities directly, so these tests do not depend on the parser.
"""

from __future__ import annotations

import math

import pytest

from ccost import evaluate
from ccost import spec as S
from ccost.check.plan import evaluation_errors
from ccost.diagnostics import CcostError

MS, US = 1e-3, 1e-6
HAND = dict(rel=1e-3)  # hand arithmetic below is carried to 4-5 significant digits

NVLINK = S.Link(name="nvlink", title=None, span=None, alpha=2e-6, bandwidth=450e9, source="spec sheet")
IB = S.Link(name="ib", title=None, span=None, alpha=3e-6, bandwidth=50e9, source="measured: nccl-tests")
H100 = S.Gpu(name="h100", title=None, span=None, memory=80e9, hbm_bandwidth=3.35e12, flops=989e12,
             achieved_flops=600e12)
NODE = S.Cluster(name="node", title=None, span=None, gpu=H100, nodes=1, gpus_per_node=8, intra_node=NVLINK)
TWO = S.Cluster(name="two", title=None, span=None, gpu=H100, nodes=2, gpus_per_node=8, intra_node=NVLINK,
                inter_node=IB)
LLAMA70 = S.Model(name="llama70", title=None, span=None, layers=80, hidden=8192, heads=64, kv_heads=8,
                  params=70.6e9)
POLICY = S.Policy(name="policy", title=None, span=None)
# The hand arithmetic below is the notes' model: peak rates, no stack overhead, no collective floor.
IDEAL = S.Stack(name="ideal", title=None, span=None, roofline="step", pipeline="flush")


def plan(**kw) -> S.Plan:
    base = dict(name="p", title=None, span=None, model=LLAMA70, cluster=NODE, phase="decode", batch=32,
                stack=IDEAL)
    base.update(kw)
    return S.Plan(**base)


def run(p: S.Plan) -> dict:
    return evaluate.evaluate_plan(p, POLICY).doc


def coll(doc: dict, kind: str) -> list[dict]:
    return [c for c in doc["collectives"] if c["kind"] == kind]


# ---------------------------------------------------------------------------------------------------
# MoE with expert parallelism

MIXTRAL = S.Model(name="mixtral", title=None, span=None, layers=32, hidden=4096, heads=32, kv_heads=8,
                  params=46.7e9, active_params=12.9e9, experts=8, top_k=2)


def test_moe_expert_parallel_decode():
    d = run(plan(model=MIXTRAL, ep=8, batch=32, seq=4096, allreduce="ring"))
    # Parameters split from params and active_params:
    #   one expert  = (46.7e9 − 12.9e9) / (8 − 2) = 5.6333e9
    #   dense part  = 12.9e9 − 2 × 5.6333e9      = 1.6333e9
    #   all experts = 46.7e9 − 1.6333e9          = 45.0667e9
    # weights per GPU = 2 B × (1.6333e9 + 45.0667e9 / 8) = 2 × 7.2667e9 = 14.533e9 B
    assert d["weight_bytes_per_gpu"] == pytest.approx(14.533e9, **HAND)
    # All-to-All: m = B·S·k·d·bytes = 32 × 1 × 2 × 4096 × 2 = 524,288 B; 2 per MoE layer × 32 = 64
    (a2a,) = coll(d, "alltoall")
    assert a2a["message_bytes"] == 524_288 and a2a["count"] == 64 and a2a["group_size"] == 8
    # hops 8 − 1 = 7; volume (7/8)·m = 458,752 B ("Communication Cost Analysis" §2)
    assert a2a["hops"] == 7 and a2a["volume_bytes"] == 458_752
    # time 7 × 2 µs + 458,752 / 450e9 = 14 µs + 1.0194 µs = 15.019 µs; × 64 = 0.96124 ms
    assert a2a["time_s"] == pytest.approx(15.019 * US, **HAND)
    assert d["comm_time_s"] == pytest.approx(0.96124 * MS, **HAND)
    assert not coll(d, "allreduce")  # tp = 1: no TP AllReduce in the program
    # KV per token 2·32 layers·8 heads·(4096/32)·2 B = 131,072 B; per GPU 32 seq × 4096 × 131,072 = 17.180e9
    assert d["memory"]["kv_cache_bytes"] == pytest.approx(17.180e9, **HAND)
    # decode reads weights + KV: (14.533e9 + 17.180e9) / 3.35e12 = 9.4666 ms (FLOPs: 2·12.9e9·32/600e12
    # = 1.376 ms, lower)
    assert d["compute"]["bound"] == "memory"
    assert d["compute_time_s"] == pytest.approx(9.4666 * MS, **HAND)
    # one GPU running the 8 ranks' 256 sequences: (93.4e9 + 256·4096·131,072) / 3.35e12
    #   = (93.4e9 + 137.44e9) / 3.35e12 = 68.907 ms
    assert d["single_gpu_time_s"] == pytest.approx(68.907 * MS, **HAND)
    # speedup 68.907 / (9.4666 + 0.96124) = 6.6080; efficiency / 8 = 0.8260
    assert d["speedup"] == pytest.approx(6.6080, **HAND)
    assert d["efficiency"] == pytest.approx(0.8260, **HAND)
    # throughput: 8 ranks × 32 tokens per 10.428 ms = 24,550 tokens/s
    assert d["throughput_tokens_s"] == pytest.approx(256 / 10.4278e-3, **HAND)


# ---------------------------------------------------------------------------------------------------
# FSDP training across two nodes

DENSE8B = S.Model(name="dense8b", title=None, span=None, layers=32, hidden=4096, heads=32, kv_heads=8,
                  params=8e9)


def test_fsdp_training_across_two_nodes():
    p = plan(model=DENSE8B, cluster=TWO, phase="train", batch=1, seq=4096, dp=16, fsdp=True,
             allreduce="ring")
    d = run(p)
    ag, rs = coll(d, "allgather")[0], coll(d, "reducescatter")[0]
    # one layer of parameters, gathered: 8e9 / 32 × 2 B = 500e6 B; forward and backward: 2 × 32 = 64
    assert ag["message_bytes"] == 500e6 and ag["count"] == 64 and ag["group_size"] == 16
    assert rs["message_bytes"] == 500e6 and rs["count"] == 32  # one gradient ReduceScatter per layer
    # 16 ranks, 8 per node, 2 nodes.
    # flat AllGather waiting on IB: 15 × 3 µs + (15/16 × 500e6) / 50e9 = 45 µs + 9.375 ms = 9.420 ms
    assert ag["alternatives"]["flat"]["time_s"] == pytest.approx(9.420 * MS, **HAND)
    # hierarchical: across nodes on m/8 = 62.5e6 B (2 ranks): 1 × 3 µs + (1/2 × 62.5e6)/50e9 = 0.628 ms,
    # then inside the node on m (8 ranks): 7 × 2 µs + (7/8 × 500e6)/450e9 = 0.98622 ms → 1.6142 ms
    assert ag["alternatives"]["hierarchical"]["time_s"] == pytest.approx(1.6142 * MS, **HAND)
    assert ag["cross_node"] == "hierarchical" and ag["link"] == "nvlink+ib"  # auto takes the cheaper
    # ReduceScatter: the mirror image, same bytes in BF16 gradients: 1.6142 ms
    assert rs["time_s"] == pytest.approx(1.6142 * MS, **HAND)
    # T_comm = (64 + 32) × 1.6142 ms = 154.97 ms
    assert d["comm_time_s"] == pytest.approx(154.97 * MS, **HAND)
    # compute (ccost.model.training), one micro-batch of 4,096 tokens; the ideal stack: GEMMs at the GPU's
    # achieved 600 TFLOP/s, attention at the 989 TFLOP/s peak (attention_efficiency 100 %), memory-bound
    # bytes at 3.35 TB/s:
    #   GEMMs forward 2 × 8e9 × 4096 = 65.536e12 FLOP → 109.23 ms
    #   causal attention forward 2·L·S·d × S = 2 × 32 × 4096 × 4096 × 4096 = 4.398e12 FLOP → 4.447 ms
    #   memory-bound bytes per token and layer: activations 10·d + 4·d + 4·d·h_kv/h + 4·f (f = 4·d; 8 of
    #   32 heads keep K and V: 4·d/4 = d) = 31·d = 126,976 B, GEMM operand rows (4·d + 4·d + 2·f)·2 B =
    #   131,072 B; × 4096 tokens × 32 layers, + the LM head's input row d·2 B × 4096 (no vocab given: no
    #   logits) = 33.856 GB → 10.106 ms forward
    #   forward 109.23 + 4.447 + 10.106 = 123.78 ms; backward 2 × 109.23 + 3 × 4.447 (selective
    #   recomputation re-runs the attention core) + 2 × 10.106 = 252.01 ms; together 375.79 ms
    assert d["compute"]["bound"] == "flops"
    assert d["compute_time_s"] == pytest.approx(375.79 * MS, **HAND)
    assert d["training"]["forward_time_s"] == pytest.approx(123.78 * MS, **HAND)
    # FSDP prefetch: a layer's gather (1.614 ms) hides behind the previous layer's forward (124.26/32 =
    # 3.87 ms), gather + reduce-scatter (3.23 ms) behind its backward (7.88 ms): only the first layer's
    # gather is exposed: step 375.79 + 1.614 = 377.40 ms
    assert d["exposed_comm_s"] == pytest.approx(1.6142 * MS, **HAND)
    assert d["step_time_s"] == pytest.approx(377.40 * MS, **HAND)
    # memory: shard 8e9/16 = 0.5e9 params: weights 1 GB + one gathered layer 0.5 GB, grads 1 GB,
    # Adam 12 B × 0.5e9 = 6 GB, activations 126,976 B × 4096 × 32 = 16.643 GB (one micro-batch, 32
    # layers) → 25.143 GB
    assert d["memory"]["weights_bytes"] == pytest.approx(1.5e9, **HAND)
    assert d["weight_bytes_per_gpu"] == pytest.approx(1.5e9, **HAND)  # held, not the 16 GB it streams
    assert d["compute"]["bytes_read_per_gpu"] == pytest.approx(16e9, **HAND)
    assert d["memory"]["gradient_bytes"] == pytest.approx(1e9, **HAND)
    assert d["memory"]["optimizer_bytes"] == pytest.approx(6e9, **HAND)
    assert d["memory"]["activation_bytes"] == pytest.approx(16.643e9, **HAND)
    assert d["memory_bytes_per_gpu"] == pytest.approx(25.143e9, **HAND) and d["fits_memory"]
    # no DP AllReduce with FSDP; no TP, no PP
    assert not coll(d, "allreduce") and not coll(d, "p2p")
    # speedup 16 × 375.79 / 377.40 = 15.932; efficiency 0.9957
    assert d["speedup"] == pytest.approx(15.932, **HAND)
    assert d["efficiency"] == pytest.approx(0.9957, **HAND)
    checklist = {i["id"]: i for i in d["checklist"]}
    assert checklist[3]["status"] == "warn"  # NVLink is spec-sheet (IB is measured)
    assert checklist[6]["status"] == "fail"  # T_comm / T_compute = 154.97 / 375.79 = 41.2 % > 30 %


def test_training_tp_counts_forward_and_backward():
    # TP=8 training: 2 AllReduces per layer forward + 2 backward = 4 × 32 = 128, of B·S·d·2 B =
    # 1 × 4096 × 4096 × 2 = 33,554,432 B
    d = run(plan(model=DENSE8B, phase="train", batch=1, seq=4096, tp=8, allreduce="ring"))
    (ar,) = [c for c in coll(d, "allreduce") if c["purpose"].startswith("tensor")]
    assert ar["count"] == 128 and ar["message_bytes"] == 33_554_432
    assert "backward" in ar["purpose"]


def test_ddp_gradient_allreduce_size():
    # DP=8, no FSDP, TP=1: one AllReduce per step of 8e9 params × 2 B = 16 GB of gradients
    d = run(plan(model=DENSE8B, phase="train", batch=1, seq=4096, dp=8, allreduce="ring"))
    (ar,) = coll(d, "allreduce")
    assert ar["count"] == 1 and ar["message_bytes"] == 16e9 and ar["group_size"] == 8
    # memory 8e9 × (2 + 2 + 12) = 128 GB + activations 126,976 B (31·d: 8 of 32 heads keep K and V) ×
    # 4096 tokens × 32 layers = 16.643 GB → 144.64 GB: does not fit
    assert d["memory_bytes_per_gpu"] == pytest.approx(144.64e9, **HAND) and not d["fits_memory"]


# ---------------------------------------------------------------------------------------------------
# Memory that does not fit; KV cache at long context

def test_plan_that_does_not_fit():
    d = run(plan(tp=2, batch=64, seq=8192))
    # weights 70.6e9 × 2 B / 2 = 70.6 GB
    # KV per token 2·80·8·(8192/64)·2 B = 327,680 B; 64 × 8192 × 327,680 / min(2, 8) = 85.899 GB
    # total 156.50 GB > 90 % × 80 GB = 72 GB
    assert d["memory"]["kv_cache_bytes"] == pytest.approx(85.899e9, **HAND)
    assert d["memory_bytes_per_gpu"] == pytest.approx(156.50e9, **HAND)
    assert d["fits_memory"] is False
    item = next(i for i in d["checklist"] if i["id"] == 11)
    assert item["status"] == "fail" and item["threshold"] == pytest.approx(72e9)
    # a comparison ranks it after a plan that fits, whatever its metric
    ok = run(plan(name="fits", tp=8, batch=64, seq=8192))
    from ccost.model import analysis
    order, text = analysis.rank("throughput", {"big": d, "fits": ok})
    assert order == ["fits", "big"]
    assert "do not fit" in text


def test_kv_cache_reads_at_long_context():
    short = run(plan(tp=8, batch=8))
    long = run(plan(tp=8, batch=8, seq=131_072))
    # weights per GPU 70.6e9 × 2 / 8 = 17.65 GB → 17.65e9 / 3.35e12 = 5.2687 ms without KV
    assert short["compute_time_s"] == pytest.approx(5.2687 * MS, **HAND)
    # KV per GPU: 8 seq × 131,072 tokens × 327,680 B / 8 = 42.950e9 B, read every step
    assert long["memory"]["kv_cache_bytes"] == pytest.approx(42.950e9, **HAND)
    # (17.65e9 + 42.950e9) / 3.35e12 = 18.090 ms
    assert long["compute_time_s"] == pytest.approx(18.090 * MS, **HAND)
    assert long["compute"]["bytes_read_per_gpu"] == pytest.approx(60.60e9, **HAND)


def test_kv_heads_replicated_beyond_tp():
    big = S.Cluster(name="nvl16", title=None, span=None, gpu=H100, nodes=1, gpus_per_node=16,
                    intra_node=NVLINK)
    d = run(plan(cluster=big, tp=16, batch=8, seq=131_072))
    # 8 KV heads on 16 ranks: each head on 2 GPUs, so the KV cache splits 8 ways, not 16:
    # 8 × 131,072 × 327,680 / 8 = 42.950e9 B per GPU
    assert d["memory"]["kv_cache_bytes"] == pytest.approx(42.950e9, **HAND)
    assert next(i for i in d["checklist"] if i["id"] == 7)["status"] == "warn"


def test_pipeline_stage_boundaries_crossing_nodes():
    # TP=4 × PP=4 on 2 nodes of 8: stages 4 ranks apart, so stages (0,1) share node 0, (2,3) node 1:
    # of the 3 boundaries, ⌊3 × 4 / 8⌋ = 1 crosses IB, 2 stay on NVLink
    d = run(plan(cluster=TWO, tp=4, pp=4, batch=32, model=LLAMA70))
    sends = {c["link"]: c for c in coll(d, "p2p")}
    assert sends["ib"]["count"] == 1 and sends["nvlink"]["count"] == 2
    # message B·S·d·2 = 32 × 8192 × 2 = 524,288 B; IB: 3 µs + 524,288/50e9 = 13.486 µs
    assert sends["ib"]["time_s"] == pytest.approx(13.486 * US, **HAND)


# ---------------------------------------------------------------------------------------------------
# Plans that cannot be evaluated: diagnostics, not tracebacks or NaN

def _error_codes(p: S.Plan) -> list[str]:
    with pytest.raises(CcostError) as exc:
        evaluate.evaluate_plan(p, POLICY)
    return [d.code for d in exc.value.diagnostics]


def test_tp_larger_than_cluster():
    assert "E301" in _error_codes(plan(tp=16))


def test_multi_domain_without_inter_link():
    big = S.Cluster(name="odd", title=None, span=None, gpu=H100, nodes=1, gpus_per_node=16, nvlink_domain=8,
                    intra_node=NVLINK)
    assert "E302" in _error_codes(plan(cluster=big, tp=16))


def test_more_stages_than_layers():
    assert "E401" in _error_codes(plan(pp=8, model=S.Model(name="tiny", title=None, span=None, layers=4,
                                                          hidden=1024, params=1e8)))


def test_decode_without_hbm_bandwidth():
    gpu = S.Gpu(name="nohbm", title=None, span=None, memory=80e9, flops=989e12)
    cl = S.Cluster(name="c", title=None, span=None, gpu=gpu, intra_node=NVLINK)
    codes = _error_codes(plan(cluster=cl, tp=8))
    assert codes == ["E401"]


def test_prefill_without_seq():
    assert "E104" in _error_codes(plan(phase="prefill", tp=8))


def test_compute_time_given_makes_hbm_unnecessary():
    gpu = S.Gpu(name="nohbm", title=None, span=None, memory=80e9)
    cl = S.Cluster(name="c", title=None, span=None, gpu=gpu, intra_node=NVLINK)
    d = run(plan(cluster=cl, tp=8, compute_time=5e-3))
    assert d["compute_time_s"] == 5e-3 and d["compute"]["bound"] == "given"


def test_no_nan_anywhere_in_example_like_plans():
    docs = [run(plan(cluster=TWO, tp=t, pp=pp, batch=b, seq=4096)) for t in (1, 2, 8) for pp in (1, 2) for b in (1, 64)]

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, float):
            assert math.isfinite(x)

    for d in docs:
        walk(d)


def test_single_gpu_has_no_collectives_and_unit_speedup():
    d = run(plan(tp=1, batch=1, model=DENSE8B))
    assert d["collectives"] == [] and d["comm_time_s"] == 0.0
    assert d["speedup"] == 1.0 and d["efficiency"] == 1.0
    assert d["regime"] == "no communication"


def test_the_errors_evaluate_refuses_a_plan_with_are_reported_without_raising():
    assert [d.code for d in evaluation_errors(plan(tp=16))] == ["E301"]
    assert evaluation_errors(plan(tp=8)) == []
    with pytest.raises(CcostError) as exc:  # the model takes an evaluable plan: evaluate checks it first
        evaluate.evaluate_plan(plan(tp=16), POLICY)
    assert [d.code for d in exc.value.diagnostics] == ["E301"]


def test_moe_without_active_params_is_conservative_and_still_pays_alltoall():
    model = S.Model(name="moe", title=None, span=None, layers=32, hidden=4096, heads=32, kv_heads=8,
                    params=46.7e9, experts=8, top_k=2)
    d = run(plan(model=model, ep=8, batch=32))
    # no split: all 46.7e9 parameters counted dense, so every GPU holds them all: 93.4e9 B
    assert d["weight_bytes_per_gpu"] == pytest.approx(93.4e9, rel=1e-12)
    (a2a,) = coll(d, "alltoall")
    assert a2a["count"] == 64 and a2a["message_bytes"] == 524_288  # as in the Mixtral test above
    assert next(i for i in d["checklist"] if i["id"] == 1)["status"] == "warn"


def test_moe_top_k_not_below_experts_is_an_error():
    model = S.Model(name="moe", title=None, span=None, layers=4, hidden=512, params=1e9, experts=2, top_k=2,
                    active_params=1e9)
    # a model's own contradiction (E207, ccost.check.plan.model_errors), which the checker reports too
    assert "E207" in _error_codes(plan(model=model, ep=2, batch=1))


def test_flop_bound_plan_without_achieved_flops_warns():
    gpu = S.Gpu(name="peak", title=None, span=None, memory=80e9, hbm_bandwidth=3.35e12, flops=989e12)
    cl = S.Cluster(name="c", title=None, span=None, gpu=gpu, intra_node=NVLINK)
    d = run(plan(cluster=cl, phase="prefill", batch=1, seq=2048, tp=8, allreduce="ring"))
    # 2 × 70.6e9 × 2048 / 8 = 36.147 TFLOP per GPU at the 989 TFLOP/s peak = 36.549 ms
    assert d["compute"]["bound"] == "flops"
    assert d["compute_time_s"] == pytest.approx(36.549 * MS, **HAND)
    item = next(i for i in d["checklist"] if i["id"] == 1)
    assert item["status"] == "warn" and "achieved_flops" in item["note"]
