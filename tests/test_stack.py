"""The software-stack profile (`stack` blocks, issue 13): what it adds to a plan's numbers, checked against
hand arithmetic written out here; the bundled profiles; and the worked examples staying exact under
`ideal` (tests/test_conformance.py holds those numbers).
"""

from __future__ import annotations

import pytest

from ccost import check, evaluate, lower
from ccost import spec as S

MS, US = 1e-3, 1e-6
HAND = dict(rel=1e-6)

HW = """
link nvl { alpha = 1 us; bandwidth = 1000 GB/s }
gpu g { memory = 400 GB; hbm_bandwidth = 2 TB/s; flops = 1000 TFLOP/s }
cluster node { gpu = g; intra_node = nvl }
model m { layers = 10; hidden = 1024; heads = 8; kv_heads = 8; params = 50e9; weight_bytes = 100 GB }
"""


def doc(text: str, plan: str) -> dict:
    r = check.check_text(HW + text, "t.ccost")
    assert r.errors == [], [(d.code, d.message) for d in r.errors]
    return evaluate.evaluate(r.spec).plans[plan].doc


def test_overheads_and_hbm_efficiency_add_as_stated():
    d = doc("""
stack s { step_overhead = 1 ms; layer_overhead = 10 us; hbm_efficiency = 50 % }
plan p { model = m; cluster = node; phase = decode; batch = 1; stack = s }
""", "p")
    # weights 100 GB / (2 TB/s × 50 %) = 100 ms; + 10 layers × 10 µs = 0.1 ms; + 1 ms per step = 101.1 ms
    assert d["compute_time_s"] == pytest.approx(101.1 * MS, **HAND)
    assert d["step_time_s"] == pytest.approx(101.1 * MS, **HAND)


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
    # FLOPs 2 × 50e9 × 10,000 = 1e15 at 1000 TFLOP/s × 50 % = 2 s (memory: 100 GB / 2 TB/s = 50 ms)
    assert doc(pre, "p")["compute_time_s"] == pytest.approx(2.0, **HAND)
    measured = pre.replace("stack s {", "gpu g2 extends g { achieved_flops = 800 TFLOP/s }\n"
                           "cluster node2 { gpu = g2; intra_node = nvl }\nstack s {").replace(
                               "cluster = node;", "cluster = node2;")
    # the GPU's measured achieved_flops wins: 1e15 / 800e12 = 1.25 s
    assert doc(measured, "p")["compute_time_s"] == pytest.approx(1.25, **HAND)


def test_ideal_and_an_empty_stack_are_the_notes_model():
    ideal = doc('import "std/stacks.ccost"\nplan p { model = m; cluster = node; phase = decode; batch = 1; '
                'tp = 2; stack = ideal }', "p")
    # 100 GB / 2 / 2 TB/s = 25 ms, no overhead
    assert ideal["compute_time_s"] == pytest.approx(25 * MS, **HAND)
    empty = doc("stack e { }\nplan p { model = m; cluster = node; phase = decode; batch = 1; tp = 2; stack = e }",
                "p")
    assert empty["step_time_s"] == ideal["step_time_s"]


def test_a_plan_without_a_stack_gets_the_bundled_default_for_its_phase():
    serving = lower.default_stack("decode")
    assert serving.name == "serving_default" and lower.default_stack("prefill") is serving
    assert serving.step_overhead > 0 and 0 < serving.hbm_efficiency < 1 and serving.collective_floor > 0
    assert serving.source
    assert lower.default_stack("train").name == "training_default"
    d = doc("plan p { model = m; cluster = node; phase = decode; batch = 1 }", "p")
    # the default's own numbers, applied as in test_overheads_and_hbm_efficiency_add_as_stated
    want = 100e9 / (2e12 * serving.hbm_efficiency) + 10 * serving.layer_overhead + serving.step_overhead
    assert d["compute_time_s"] == pytest.approx(want, **HAND)


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
    assert spec.stacks["ideal"].is_ideal and spec.stacks["training_default"].is_ideal
    assert not spec.stacks["serving_default"].is_ideal
    assert isinstance(spec.stacks["ideal"], S.Stack)
