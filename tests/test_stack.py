"""The software-stack profile (`stack` blocks): what it adds to a plan's numbers, checked against
hand arithmetic written out here; the bundled profiles; and the worked examples staying exact under
`ideal` (tests/test_conformance.py holds those numbers).
"""

from __future__ import annotations

import pytest

from ccost import check, evaluate
from ccost import spec as S

MS, US = 1e-3, 1e-6
HAND = dict(rel=1e-6)

HW = """
link nvl { alpha = 1 us; bandwidth = 1000 GB/s }
gpu g { memory = 400 GB; hbm_bandwidth = 2 TB/s; flops = 1000 TFLOP/s }
cluster node { gpu = g; intra_node = nvl }
model m { layers = 10; hidden = 1024; heads = 8; kv_heads = 8; params = 50e9; weight_bytes = 100 GB }
"""


def doc(text: str, plan: str | None) -> dict:
    """The document of ``plan`` (None: the whole results document)."""
    r = check.check_text(HW + text, "t.ccost")
    assert r.errors == [], [(d.code, d.message) for d in r.errors]
    res = evaluate.evaluate(r.spec)
    return evaluate.results_document(res) if plan is None else res.plans[plan].doc


def test_overheads_and_hbm_efficiency_add_as_stated():
    d = doc("""
stack s { step_overhead = 1 ms; layer_overhead = 10 us; hbm_efficiency = 50 % }
plan p { model = m; cluster = node; phase = decode; batch = 1; stack = s }
""", "p")
    # weights 100 GB / (2 TB/s × 50 %) = 100 ms; + 10 layers × 10 µs = 0.1 ms; + 1 ms per step = 101.1 ms
    assert d["compute_time_s"] == pytest.approx(101.1 * MS, **HAND)
    assert d["step_time_s"] == pytest.approx(101.1 * MS, **HAND)


def test_seq_overhead_adds_per_running_sequence_in_serving_only():
    stack = "stack s { step_overhead = 1 ms; seq_overhead = 100 us }\n"
    one = doc(stack + "plan p { model = m; cluster = node; phase = decode; batch = 1; stack = s }", "p")
    many = doc(stack + "plan p { model = m; cluster = node; phase = decode; batch = 16; stack = s }", "p")
    # weights 100 GB / 2 TB/s = 50 ms (GEMM FLOPs 2 × 50e9 × 16 = 1.6e12 / 1e15 = 1.6 ms: memory-bound);
    # + 1 ms per step + 100 µs per sequence: batch 1 → 51.1 ms, batch 16 → 52.6 ms
    assert one["step_time_s"] == pytest.approx(51.1 * MS, **HAND)
    assert many["step_time_s"] == pytest.approx(52.6 * MS, **HAND)
    # prefill charges it per sequence too: 4 prompts of 10 tokens: 40 tokens × 2 × 50e9 = 4e12 FLOPs = 4 ms
    # < 50 ms of weights; attention and KV writes are µs; + 1 ms + 4 × 0.1 ms
    pre = doc(stack + "plan p { model = m; cluster = node; phase = prefill; batch = 4; seq = 10; stack = s }", "p")
    assert pre["compute_time_s"] == pytest.approx(51.4 * MS, rel=1e-3)
    # a training step has no running sequences: seq_overhead changes nothing there
    train = "plan p { model = m; cluster = node; phase = train; batch = 4; seq = 128; stack = %s }"
    assert doc(stack + train % "s", "p")["step_time_s"] == doc(
        "stack s { step_overhead = 1 ms }\n" + train % "s", "p")["step_time_s"]


def test_seq_overhead_on_a_training_plan_is_said_to_do_nothing():
    stack = "stack s { step_overhead = 1 ms; seq_overhead = 100 us }\n"
    train = "plan p { model = m; cluster = node; phase = train; batch = 4; seq = 128; stack = s }\n"
    r = check.check_text(HW + stack + train + "plan q extends p { batch = 8 }\n", "t.ccost")
    w = [d for d in r.warnings if d.code == "W305"]
    # once, at the `stack = s` of `p` (q inherits it: p already says so)
    assert len(w) == 1 and "`seq_overhead` is not charged in training" in w[0].message, w
    assert (HW + stack + train).splitlines()[w[0].span.line - 1][w[0].span.column - 1:].startswith("s }")
    # a decode plan on the same stack is charged it: no warning
    r = check.check_text(HW + stack + train.replace("phase = train", "phase = decode"), "t.ccost")
    assert not [d for d in r.warnings if d.code == "W305"]


def test_seq_overhead_is_named_in_the_derivation():
    r = check.check_text(HW + "stack s { seq_overhead = 100 us }\n"
                         "plan p { model = m; cluster = node; phase = decode; batch = 8; stack = s }", "t.ccost")
    steps = {s.name: s for s in evaluate.explain(r.spec, "p")}
    # T_host = t_step + t_seq·B = 0 + 100 µs × 8 = 0.8 ms, its input named with the stack as its source
    assert steps["T_host"].value == pytest.approx(0.8 * MS, **HAND)
    assert steps["t_seq"].kind == "input" and "stack s" in steps["t_seq"].source


def test_collective_floor_holds_small_collectives():
    d = doc("""
stack s { collective_floor = 50 us }
plan p { model = m; cluster = node; phase = decode; batch = 1; tp = 2; allreduce = ring; stack = s }
""", "p")
    # ring on 2 ranks: 2 hops × 1 µs + 2·(1/2)·2 KiB / 1000 GB/s ≈ 2.002 µs < 50 µs: each AllReduce 50 µs;
    # 2 per layer × 10 layers = 20 → 1 ms
    assert d["comm_time_s"] == pytest.approx(1.0 * MS, **HAND)
    # and the latency and bandwidth terms still add up to the time
    assert d["latency_term_s"] + d["bandwidth_term_s"] == pytest.approx(d["comm_time_s"], **HAND)


def test_gemm_efficiency_scales_peak_flops_but_not_a_measured_rate():
    pre = """
stack s { gemm_efficiency = 50 % }
plan p { model = m; cluster = node; phase = prefill; batch = 1; seq = 10000; stack = s }
"""
    # GEMMs: FLOPs 2 × 50e9 × 10,000 = 1e15 at 1000 TFLOP/s × 50 % = 2 s (memory: 100 GB / 2 TB/s = 50 ms)
    # attention (causal prefill, mean context (10,000 + 1)/2 = 5,000.5): 10,000 × 5,000.5 × 8 heads ×
    #   2·2·128 × 10 layers = 2.0482e12 FLOPs at 1000 TFLOP/s (attention_efficiency 100 %) = 2.0482 ms
    #   (KV written: 10,000 × 2·10·8·128·2 B = 409.6 MB / 2 TB/s = 0.2048 ms, less); the two add
    assert doc(pre, "p")["compute_time_s"] == pytest.approx(2.0 + 2.0482e-3, **HAND)
    measured = pre.replace("stack s {", "gpu g2 extends g { achieved_flops = 800 TFLOP/s }\n"
                           "cluster node2 { gpu = g2; intra_node = nvl }\nstack s {").replace(
                               "cluster = node;", "cluster = node2;")
    # the GPU's measured achieved_flops wins for the GEMMs: 1e15 / 800e12 = 1.25 s (+ attention as above)
    assert doc(measured, "p")["compute_time_s"] == pytest.approx(1.25 + 2.0482e-3, **HAND)


def test_ideal_and_an_empty_stack_are_the_notes_model():
    ideal = doc('import "std/stacks.ccost"\nplan p { model = m; cluster = node; phase = decode; batch = 1; '
                'tp = 2; stack = ideal }', "p")
    # 100 GB / 2 / 2 TB/s = 25 ms, no overhead
    assert ideal["compute_time_s"] == pytest.approx(25 * MS, **HAND)
    empty = doc("stack e { }\nplan p { model = m; cluster = node; phase = decode; batch = 1; tp = 2; stack = e }",
                "p")
    assert empty["step_time_s"] == ideal["step_time_s"]


def test_a_plan_without_a_stack_gets_the_bundled_default_for_its_phase():
    defaults = check.default_stacks()  # what the checker gives a plan that names none
    serving = defaults["decode"]
    assert serving.name == "serving_default" and defaults["prefill"] is serving and defaults["serve"] is serving
    # current vLLM (bench/fit_stack.py): host time that runs behind the GPU (asynchronous scheduling; vLLM
    # V1's fitted terms, 0 where its rows cannot resolve one), the GPU's work on vLLM's kernel curves; the
    # floor is 0 (the engines run custom one-shot AllReduces inside NVLink; a measured link carries NCCL's)
    assert serving.engine == "vllm" and serving.host_overlap and serving.rates == "kernels"
    assert serving.step_overhead >= 0 and 0 < serving.hbm_efficiency < 1
    assert serving.collective_floor >= 0
    assert "bench/fit_stack.py" in serving.source
    assert defaults["train"].name == "training_default"
    d = doc("plan p { model = m; cluster = node; phase = decode; batch = 1 }", "p")
    # the default's own numbers, applied as in test_overheads_and_hbm_efficiency_add_as_stated; the host's
    # step_overhead + seq_overhead (one running sequence) runs behind the GPU's 100 GB read: the larger counts
    want = max(100e9 / (2e12 * serving.hbm_efficiency) + 10 * serving.layer_overhead,
               serving.step_overhead + 1 * serving.seq_overhead)
    assert d["compute_time_s"] == pytest.approx(want, **HAND)


def test_the_checker_resolves_every_plans_stack():
    """A checked plan always has its stack: the one it names (or inherits), else its phase's bundled
    default, with the defaults of every phase kept for a sweep or search that varies the phase."""
    r = check.check_text(HW + 'import "std/stacks.ccost"\n'
                         "plan d { model = m; cluster = node; phase = decode; batch = 1 }\n"
                         "plan t { model = m; cluster = node; phase = train; batch = 1; seq = 128 }\n"
                         "plan i { model = m; cluster = node; phase = decode; batch = 1; stack = ideal }\n"
                         "plan j extends i { batch = 2 }\n", "t.ccost")
    assert r.errors == []
    plans, defaults = r.spec.plans, check.default_stacks()
    assert plans["d"].stack is defaults["decode"] and not plans["d"].stack_named
    assert plans["t"].stack is defaults["train"] and plans["t"].stack.name == "training_default"
    assert plans["i"].stack.name == "ideal" and plans["i"].stack_named and plans["j"].stack.name == "ideal"


def test_varying_the_phase_takes_the_new_phases_default_unless_a_stack_is_named():
    r = check.check_text(HW + 'import "std/stacks.ccost"\n'
                         "plan d { model = m; cluster = node; phase = decode; batch = 1; seq = 128 }\n"
                         "plan i extends d { stack = ideal }\n", "t.ccost")
    d, i, ideal = r.spec.plans["d"], r.spec.plans["i"], r.spec.stacks["ideal"]
    assert S.vary(d, phase="train").stack.name == "training_default"
    assert S.vary(i, phase="train").stack is ideal  # named: kept
    given = S.vary(d, stack=ideal)
    assert given.stack_named and S.vary(given, phase="train").stack is ideal
    # a sweep over the phase prices each point under its own phase's default (as a plan written so would)
    sw = doc('sweep s { base = d; phase = [decode, train] }\n'
             "plan d { model = m; cluster = node; phase = decode; batch = 1; seq = 128 }\n"
             "plan t { model = m; cluster = node; phase = train; batch = 1; seq = 128 }\n", None)
    assert sw["sweeps"]["s"]["points"][1]["step_time_s"] == sw["plans"]["t"]["step_time_s"]


def test_a_plan_built_without_the_checker_needs_a_stack():
    """The model reads no file: a plan built by hand (not checked) must carry its stack."""
    from ccost.model import lower

    gpu = S.Gpu("g", None, None, memory=80e9, hbm_bandwidth=2e12, flops=1e15)
    cluster = S.Cluster("c", None, None, gpu=gpu, intra_node=S.Link("l", None, None, alpha=1e-6, bandwidth=1e11))
    model = S.Model("m", None, None, layers=2, hidden=64, heads=2, kv_heads=2, params=1e6)
    plan = S.Plan("p", None, None, model=model, cluster=cluster)
    with pytest.raises(AssertionError, match="the checker gives every plan one"):
        lower.prepare(plan, S.Policy("policy", None, None))


def test_an_unknown_stack_is_a_diagnostic():
    r = check.check_text(HW + "plan p { model = m; cluster = node; phase = decode; stack = vllm }", "t.ccost")
    assert [d.code for d in r.errors] == ["E101"]
    assert "vllm" in r.errors[0].message


def test_stack_ranges_are_checked():
    r = check.check_text(HW + "stack s { hbm_efficiency = 150 % }", "t.ccost")
    assert [d.code for d in r.errors] == ["E203"]
    assert "hbm_efficiency" in r.errors[0].message


def test_bundled_ideal_profile_is_ideal():
    spec, _ = check.load_spec(str(check._std_dir()) + "/stacks.ccost")
    assert spec.stacks["ideal"].is_ideal
    assert not spec.stacks["serving_default"].is_ideal
    # the training default carries megatron_core's fitted rates, without its TP comm overlap
    td, mc = spec.stacks["training_default"], spec.stacks["megatron_core"]
    assert not td.is_ideal and not td.tp_comm_overlap and mc.tp_comm_overlap
    assert (td.gemm_efficiency, td.attention_efficiency, td.elementwise_efficiency) == \
        (mc.gemm_efficiency, mc.attention_efficiency, mc.elementwise_efficiency)
    assert isinstance(spec.stacks["ideal"], S.Stack)


def test_per_operator_roofline_adds_gemm_and_attention_in_decode():
    d = doc("""
stack s { attention_efficiency = 50 % }
plan p { model = m; cluster = node; phase = decode; batch = 64; seq = 100000; stack = s }
""", "p")
    # GEMMs: 100 GB / 2 TB/s = 50 ms against 2 × 50e9 × 64 / 1e15 = 6.4 ms: 50 ms.
    # attention: KV 64 × 100,000 × 2·10·8·128·2 B = 64 × 100,000 × 40,960 B = 262.144 GB / 2 TB/s = 131.072 ms
    #   against 64 × 100,000 × 8 × 512 × 10 = 2.62144e11 FLOPs / 500 TFLOP/s = 0.524 ms: 131.072 ms.
    # The notes' whole-step roofline would give the same here (both memory-bound): 181.072 ms.
    assert d["compute_time_s"] == pytest.approx(181.072 * MS, **HAND)
    step = doc("""
stack s { roofline = step }
plan p { model = m; cluster = node; phase = prefill; batch = 1; seq = 10000; stack = s }
""", "p")
    # whole step: max(100 GB / 2 TB/s, 1e15 / 1e15) = 1 s, no attention term
    assert step["compute_time_s"] == pytest.approx(1.0, **HAND)


MOE = """
model moe { layers = 10; hidden = 1024; heads = 8; kv_heads = 8; params = 100e9; weight_bytes = 100 GB
            experts = 64; top_k = 2; active_params = 10e9 }
"""


def test_moe_decode_reads_only_the_experts_its_tokens_hit():
    d = doc(MOE + "plan p { model = moe; cluster = node; phase = decode; batch = 4; stack = ideal2 }\n"
            "stack ideal2 { }", "p")
    # one expert (all layers): (100e9 − 10e9)/(64 − 2) = 1.4516e9; dense: 10e9 − 2 × 1.4516e9 = 7.0968e9;
    # experts 92.903e9. 4 tokens, top-2 of 64: hit share 1 − (62/64)^4 = 1 − 0.880738 = 0.119262.
    # bytes: dense 7.0968 GB + experts 92.903 GB × 0.119262 = 11.0798 GB → 18.1766 GB
    # / 2 TB/s = 9.0883 ms (FLOPs 2·10e9·4/1e15 = 0.08 ms: memory-bound). Reading every expert: 50 ms.
    assert d["compute_time_s"] == pytest.approx(9.0883 * MS, rel=1e-4)


def test_mla_latent_sizes_the_kv_cache():
    d = doc("""
model mla { layers = 61; hidden = 7168; heads = 128; kv_lora_rank = 512; qk_rope_head_dim = 64; params = 1e9 }
plan p { model = mla; cluster = node; phase = decode; batch = 1; seq = 1000; tp = 2 }
""", "p")
    # (512 + 64) × 61 layers × 2 B = 70,272 B per token, replicated on both TP ranks: 1,000 tokens = 70.272 MB
    assert d["memory"]["kv_cache_bytes"] == pytest.approx(70.272e6, **HAND)


def test_a_kv_cache_without_kv_heads_or_latent_is_an_error():
    from ccost.diagnostics import CcostError

    r = check.check_text(HW + """
model nokv { layers = 10; hidden = 1024; heads = 8; params = 1e9 }
plan p { model = nokv; cluster = node; phase = decode; batch = 1; seq = 100 }
""", "t.ccost")
    # `check` reports it, with the rule eval refuses the plan with
    (d,) = r.errors
    assert d.code == "E104" and "kv_heads" in d.message and "kv_lora_rank" in d.message
    # and eval refuses the plan, built past the checker (the same model without kv_heads)
    from dataclasses import replace

    ok = check.check_text(HW + """
model kv { layers = 10; hidden = 1024; heads = 8; kv_heads = 8; params = 1e9 }
plan p { model = kv; cluster = node; phase = decode; batch = 1; seq = 100 }
""", "t.ccost").spec
    plan = ok.plans["p"]
    with pytest.raises(CcostError) as e:
        evaluate.evaluate_plan(replace(plan, model=replace(plan.model, kv_heads=None, heads=None)), ok.policy)
    assert "E104" in str(e.value) and "kv_heads" in str(e.value) and "kv_lora_rank" in str(e.value)


def test_serving_pipeline_in_steady_state_has_no_flush():
    text = """
stack s { pipeline = steady }
stack f { pipeline = flush }
plan p { model = m; cluster = node; phase = decode; batch = 8; pp = 2; microbatches = 2; stack = s }
plan q extends p { stack = f }
"""
    d = doc(text, "p")
    # each stage: 50 GB / 2 TB/s = 25 ms per micro-batch (FLOPs 2·50e9·4/1e15 = 0.4 ms, less)
    # one send per micro-batch: (8/2)·1·1024·2 B = 8,192 B: 1 µs + 8,192 / 1000 GB/s = 1.008192 µs
    (pp,) = [c for c in d["collectives"] if c["kind"] == "p2p" and c["count"]]
    assert pp["message_bytes"] == 8192
    assert d["comm_time_s"] == pytest.approx(1.008192 * US, **HAND)
    # slot 25 ms + 1.008192 µs / 2; step max(M, P) = 2 slots: 50 ms + 1.008192 µs; 8 tokens per step
    assert d["step_time_s"] == pytest.approx(50 * MS + 1.008192 * US, **HAND)
    assert d["latency_s"] == pytest.approx(50 * MS + 1.008192 * US, **HAND)
    assert d["throughput_tokens_s"] == pytest.approx(8 / (50 * MS + 1.008192 * US), **HAND)
    # the flush schedule: (M + P − 1) × 25 ms = 75 ms + the whole batch's send (16,384 B: 1.016384 µs)
    # spread over P·M/(M + P − 1) = 4/3 busy stages
    q = doc(text, "q")
    assert q["step_time_s"] == pytest.approx(75 * MS + 1.016384 * US * 3 / 4, **HAND)
