"""Serving with continuous batching (``phase = serve``, ``ccost.model.serve``): a small plan
worked by hand under both rooflines, the saturated case, diagnostics, the derivation, and monotonicity."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ccost import check, cli, evaluate
from ccost.diagnostics import CcostError

SPECS = Path(__file__).resolve().parent.parent / "specs"

# A one-GPU plan (tp = 1: no collective) whose numbers are easy to follow:
#   W = params × bf16 = 1e9 × 2 B = 2e9 B; BW = 1 TB/s, so the weights take 2 ms to read.
#   KV per token = 2 (K, V) × L 10 × h_kv 10 × d_head (1000/10 = 100) × 2 B = 40,000 B.
#   R = 20 TFLOP/s (both stacks below have 100 % efficiencies and no overhead, floor or pipeline).
# Requests: C = 4, I = 300, O = 101, chunk c = 50:
#   n_c = ⌈300/50⌉ = 6 chunks, c̄ = 300/6 = 50, R = n_c + O − 1 = 6 + 100 = 106 steps,
#   C·n_c = 24 ≤ 106: not saturated; a mixed step has n_dec = C − 1 = 3 decoding requests + 50 prompt rows.
#   Mean decode context S_dec = I + O/2 = 300 + 50.5 = 350.5 tokens.
SPEC = """
link nv { alpha = 2 us; bandwidth = 450 GB/s }
gpu g { memory = 80 GB; hbm_bandwidth = 1 TB/s; flops = 20 TFLOP/s }
cluster c { gpu = g; gpus_per_node = 1; intra_node = nv }
model m { layers = 10; hidden = 1000; heads = 10; kv_heads = 10; params = 1e9 }
stack flat { roofline = step; pipeline = flush; source = "test" }
stack ops { roofline = operator; pipeline = steady; source = "test" }
plan s {
  model = m; cluster = c; phase = serve; stack = STACK
  concurrency = C_; input_tokens = 300; output_tokens = 101; chunk_tokens = 50
}
"""


def _spec(tmp_path: Path, stack: str = "flat", C: int = 4, extra: str = "") -> str:
    path = tmp_path / "serve.ccost"
    path.write_text(SPEC.replace("STACK", stack).replace("C_", str(C)) + extra, encoding="utf-8")
    return str(path)


def _serve(tmp_path: Path, **kw) -> dict:
    spec, _ = check.load_spec(_spec(tmp_path, **kw))
    return evaluate.evaluate(spec).plans["s"].doc


def test_step_roofline_worked_by_hand(tmp_path):
    doc = _serve(tmp_path, stack="flat")
    sv = doc["serve"]
    assert (sv["chunks_per_prompt"], sv["mean_chunk_tokens"], sv["decoding_in_mixed_step"]) == (6, 50, 3)
    assert not sv["prefill_saturated"]
    assert sv["mixed_step_share"] == pytest.approx(24 / 106)
    # Decode step, one roofline: bytes = W + C·S_dec·KV = 2e9 + 4 × 350.5 × 40,000 = 2.05608e9 B → 2.05608 ms;
    # FLOPs = 2·N·C = 8e9 → 0.4 ms at 20 TFLOP/s. t_dec = 2.05608 ms.
    t_dec = 2.05608e-3
    assert sv["decode_step_time_s"] == pytest.approx(t_dec, rel=1e-12)
    assert doc["step_time_s"] == pytest.approx(t_dec, rel=1e-12)
    # Mixed step: 3 + 50 = 53 rows, FLOPs = 2e9 × 53 = 1.06e11 → 5.3 ms; bytes = 2e9 + 3 × 350.5 × 40,000
    # = 2.04206e9 → 2.04206 ms. t_mix = 5.3 ms (FLOP-bound).
    t_mix = 5.3e-3
    assert sv["mixed_step_time_s"] == pytest.approx(t_mix, rel=1e-12)
    # TTFT = 6 × 5.3 = 31.8 ms; TPOT = 2.05608 + 3 × 6 × (5.3 − 2.05608)/100 = 2.05608 + 0.5839056 = 2.6399856 ms
    assert sv["ttft_s"] == pytest.approx(31.8e-3, rel=1e-12)
    assert sv["tpot_s"] == pytest.approx(2.6399856e-3, rel=1e-12)
    # E2E = 31.8 + 100 × 2.6399856 = 295.79856 ms (= R·t̄ = 24 × 5.3 + 82 × 2.05608 = 127.2 + 168.59856)
    assert sv["request_latency_s"] == pytest.approx(0.29579856, rel=1e-12)
    assert sv["mean_step_time_s"] == pytest.approx(0.29579856 / 106, rel=1e-12)
    # req/s = 4 / 0.29579856 = 13.5227...; output tok/s = × 101; total = × 401; one GPU
    assert sv["requests_per_s"] == pytest.approx(4 / 0.29579856, rel=1e-12)
    assert sv["output_tokens_per_s"] == pytest.approx(404 / 0.29579856, rel=1e-12)
    assert sv["output_tokens_per_s_per_gpu"] == pytest.approx(404 / 0.29579856, rel=1e-12)
    assert sv["input_tokens_per_s"] == pytest.approx(1200 / 0.29579856, rel=1e-12)
    assert sv["total_tokens_per_s"] == pytest.approx(1604 / 0.29579856, rel=1e-12)
    assert doc["throughput_tokens_s"] == sv["output_tokens_per_s"]
    # memory at the peak context I + O = 401: 2e9 + 4 × 401 × 40,000 = 2.06416e9 B
    assert doc["memory_bytes_per_gpu"] == pytest.approx(2.06416e9, rel=1e-12)
    assert doc["cost"]["tokens"] == "output"


def test_operator_roofline_worked_by_hand(tmp_path):
    sv = _serve(tmp_path, stack="ops")["serve"]
    # Decode step: GEMMs max(2 ms, 8e9/2e13 = 0.4 ms) = 2 ms; attention: KV 4 × 350.5 × 40,000 = 56.08 MB →
    # 56.08 µs against 4 × 350.5 × 10 heads × 2 × 2 × 100 × 10 layers = 56.08 MFLOP → 2.804 µs: 56.08 µs.
    t_dec = 2.05608e-3
    assert sv["decode_step_time_s"] == pytest.approx(t_dec, rel=1e-12)
    # Mixed step: GEMMs max(2 ms, 1.06e11/2e13 = 5.3 ms) = 5.3 ms; attention bytes: decode 3 × 350.5 × 40,000
    # = 42.06 MB + one prompt's KV (300 × 40,000 = 12 MB)/6 = 2 MB → 44.06 MB → 44.06 µs; FLOPs: decode
    # 3 × 350.5 × 40,000 = 42.06 MFLOP + prompt 300 × (301/2) × 40,000 = 1,806 MFLOP /6 = 301 MFLOP → 343.06
    # MFLOP → 17.153 µs: 44.06 µs. t_mix = 5.3 + 0.04406 = 5.34406 ms.
    t_mix = 5.34406e-3
    assert sv["mixed_step_time_s"] == pytest.approx(t_mix, rel=1e-12)
    # TTFT = 6 × 5.34406 = 32.06436 ms; TPOT = 2.05608 + 18 × (5.34406 − 2.05608)/100 = 2.6479164 ms
    assert sv["ttft_s"] == pytest.approx(32.06436e-3, rel=1e-12)
    assert sv["tpot_s"] == pytest.approx(2.6479164e-3, rel=1e-12)
    e2e = 32.06436e-3 + 100 * 2.6479164e-3  # 296.85600 ms
    assert sv["request_latency_s"] == pytest.approx(e2e, rel=1e-12)
    assert sv["requests_per_s"] == pytest.approx(4 / e2e, rel=1e-12)


def test_saturated_prefill_worked_by_hand(tmp_path):
    # C = 20: C·n_c = 120 > R = 106, one chunk per step cannot keep up. Every step is mixed, with
    # n_dec = (O − 1)/n_c = 100/6 requests decoding: rows 100/6 + 50 = 66.67, FLOPs 2e9 × 66.67 = 1.3333e11
    # → 6.6667 ms (bytes 2e9 + 16.67 × 350.5 × 40,000 = 2.2337e9 → 2.2337 ms). TPOT = t_mix = 6.6667 ms,
    # TTFT = (120 − 100) × 6.6667 = 133.33 ms, E2E = 120 × 6.6667 = 800 ms, req/s = 20/0.8 = 25.
    sv = _serve(tmp_path, stack="flat", C=20)["serve"]
    assert sv["prefill_saturated"]
    assert sv["mixed_step_share"] == 1.0
    assert sv["decoding_in_mixed_step"] == pytest.approx(100 / 6)
    t_mix = 2e9 * (100 / 6 + 50) / 2e13
    assert sv["tpot_s"] == pytest.approx(t_mix, rel=1e-12)
    assert sv["ttft_s"] == pytest.approx(20 * t_mix, rel=1e-12)
    assert sv["request_latency_s"] == pytest.approx(0.8, rel=1e-12)
    assert sv["requests_per_s"] == pytest.approx(25.0, rel=1e-12)


def test_no_chunk_means_the_whole_prompt(tmp_path):
    # without chunk_tokens: one chunk of I = 300 tokens, n_c = 1, R = 1 + 100 = 101
    path = tmp_path / "serve.ccost"
    path.write_text(SPEC.replace("STACK", "flat").replace("C_", "4").replace("; chunk_tokens = 50", ""),
                    encoding="utf-8")
    spec, _ = check.load_spec(str(path))
    sv = evaluate.evaluate(spec).plans["s"].doc["serve"]
    assert (sv["chunk_tokens"], sv["chunks_per_prompt"], sv["mean_chunk_tokens"]) == (300, 1, 300)
    # mixed: 3 + 300 rows → 2e9 × 303 / 2e13 = 30.3 ms; TTFT = 1 × 30.3 ms
    assert sv["ttft_s"] == pytest.approx(30.3e-3, rel=1e-12)


@pytest.mark.parametrize("edit, code, words", [
    (("; output_tokens = 101", ""), "E104", "output_tokens"),
    (("; input_tokens = 300", ""), "E104", "input_tokens"),
    (("concurrency = C_; ", ""), "E104", "concurrency"),
    (("chunk_tokens = 50", "chunk_tokens = 0"), "E203", "chunk_tokens"),
    (("output_tokens = 101", "output_tokens = 1"), "E203", "output_tokens"),
    (("heads = 10; kv_heads = 10; ", ""), "E104", "kv_heads"),
    # 4 running requests cannot fill 8 pipeline micro-batches
    (("chunk_tokens = 50", "chunk_tokens = 50; microbatches = 8"), "E401", "concurrency = 4 running requests"),
])
def test_bad_serve_plans_are_diagnosed(tmp_path, edit, code, words):
    text = SPEC.replace("STACK", "flat").replace(*edit).replace("C_", "4")
    path = tmp_path / "bad.ccost"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CcostError) as exc:
        spec, _ = check.load_spec(str(path))
        evaluate.evaluate(spec)
    diags = exc.value.diagnostics
    assert [d.code for d in diags] == [code], [d.message for d in diags]
    assert words in diags[0].message
    assert diags[0].span is not None or diags[0].help


def test_serve_micro_batches_up_to_the_concurrency_are_priced(tmp_path):
    # the steps the serve plan prices are decode and prefill plans of their own rows (a prompt: one
    # request); micro-batches up to the concurrency are no error in any of them
    spec, _ = check.load_spec(_spec(tmp_path, stack="ops", extra="plan t extends s { microbatches = 4 }\n"))
    sv = evaluate.evaluate(spec).plans["t"].doc["serve"]
    assert sv["tpot_s"] > 0 and sv["requests_per_s"] > 0


def test_compute_time_on_a_serve_plan_is_an_error(tmp_path):
    # `check` reports it (the rule that eval refuses the plan with)
    with pytest.raises(CcostError) as exc:
        check.load_spec(_spec(tmp_path, extra="plan t extends s { compute_time = 10 ms }\n"))
    assert [d.code for d in exc.value.diagnostics] == ["E401"]
    assert "compute_time" in exc.value.diagnostics[0].message


def test_serving_fields_that_change_nothing_warn(tmp_path):
    extra = ("plan d { model = m; cluster = c; phase = decode; batch = 4; seq = 300; concurrency = 4 }\n"
             "plan t extends s { batch = 8 }\n")
    _, warnings = check.load_spec(_spec(tmp_path, extra=extra))
    w306 = [d for d in warnings if d.code == "W306"]
    assert len(w306) == 2
    assert any("`concurrency` applies only to `phase = serve`" in d.message for d in w306)
    assert any("`batch` is not read" in d.message for d in w306)


def test_explain_derives_the_serve_figures_with_eval_values(tmp_path):
    spec, _ = check.load_spec(_spec(tmp_path, stack="ops"))
    doc = evaluate.evaluate(spec).plans["s"].doc
    sections = dict(evaluate.explain_sections(spec, "s"))
    figures = {s.name: s for s in sections["serve: TTFT, TPOT, requests/s, tokens/s"]}
    sv = doc["serve"]
    assert figures["TTFT"].value == sv["ttft_s"]
    assert figures["TPOT"].value == sv["tpot_s"]
    assert figures["req/s"].value == sv["requests_per_s"]
    assert figures["tok/s,out"].value == sv["output_tokens_per_s"]
    assert figures["TPOT"].formula == "t_dec + (C − 1)·n_c·(t_mix − t_dec)/(O − 1)"
    setup = {s.name: s.value for s in sections["serve: chunks, slots and Little's law"]}
    assert (setup["n_c"], setup["R"], setup["n_dec"]) == (6, 106, 3)


def test_monotonic_in_concurrency():
    """More requests at once: more output tokens/s, and a longer TPOT (each step carries more)."""
    spec, _ = check.load_spec(str(SPECS / "llama3-70b-serve.ccost"))
    base = spec.plans["serve_tp8"]
    rows = [evaluate.evaluate_plan(replace(base, concurrency=c), spec.policy).doc["serve"]
            for c in (1, 2, 4, 8, 16, 32, 64, 128)]
    for a, b in zip(rows, rows[1:]):
        assert b["output_tokens_per_s"] > a["output_tokens_per_s"], (a["concurrency"], b["concurrency"])
        assert b["tpot_s"] > a["tpot_s"], (a["concurrency"], b["concurrency"])
        assert b["ttft_s"] >= a["ttft_s"]


def test_example_spec_json_has_the_serve_keys(capsys):
    assert cli.main(["eval", str(SPECS / "llama3-70b-serve.ccost"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    sv = doc["plans"]["serve_tp8"]["serve"]
    for key in ("ttft_s", "tpot_s", "request_latency_s", "requests_per_s", "output_tokens_per_s",
                "output_tokens_per_s_per_gpu", "total_tokens_per_s"):
        assert sv[key] is not None and sv[key] > 0
    # Little's law: requests/s × latency = requests running (32 on one engine)
    assert sv["requests_per_s"] * sv["request_latency_s"] == pytest.approx(32)


def test_a_concurrency_sweep_carries_the_serve_figures(tmp_path):
    spec, _ = check.load_spec(_spec(tmp_path, extra="sweep k { base = s; concurrency = [4, 20] }\n"))
    results = evaluate.evaluate(spec)
    points = results.sweeps["k"]["points"]
    # the points are the plans worked by hand above: C = 4 (below saturation) and C = 20 (saturated)
    assert points[0]["tpot_s"] == pytest.approx(2.6399856e-3, rel=1e-12)
    assert points[1]["requests_per_s"] == pytest.approx(25.0, rel=1e-12)
    assert points[1]["output_tokens_per_s"] == pytest.approx(25.0 * 101, rel=1e-12)
    from ccost import output
    text = output.sweep_text("k", results.sweeps["k"])
    assert "TTFT" in text and "requests/s" in text


def test_diff_lists_the_serve_figures(tmp_path, capsys):
    old = Path(_spec(tmp_path))
    new = tmp_path / "new.ccost"
    new.write_text(old.read_text(encoding="utf-8").replace("concurrency = 4", "concurrency = 20"),
                   encoding="utf-8")
    cli.main(["diff", str(old), str(new)])
    out = capsys.readouterr().out
    # requests/s: 4/0.29579856 = 13.52 → 25 (the two plans worked by hand above)
    assert "s requests/s: 13.52 requests/s → 25 requests/s" in out
    assert "s TPOT: 2.64 ms → " in out


def test_the_decode_step_is_the_decode_plan(tmp_path):
    """A serve plan's decode step is the decode model's step, unchanged: the same plan as `phase = decode`
    with batch = concurrency and seq = the mean decode context I + O/2 (137 + 260/2 = 267: the V9 setup of
    bench/validation/inference.ccost) gives the very same step time under the bundled serving stack."""
    path = tmp_path / "v9.ccost"
    path.write_text(
        'import "std/gpus.ccost"\nimport "std/links.ccost"\nimport "std/models.ccost"\nimport "std/clusters.ccost"\n'
        "model fp8 extends llama3_70b { weights = fp8 }\n"
        "plan s { model = fp8; cluster = hgx_h100; tp = 8; phase = serve; concurrency = 8; input_tokens = 137; "
        "output_tokens = 260 }\n"
        "plan d { model = fp8; cluster = hgx_h100; tp = 8; phase = decode; batch = 8; seq = 267 }\n",
        encoding="utf-8")
    spec, _ = check.load_spec(str(path))
    plans = evaluate.evaluate(spec).plans
    assert plans["s"].doc["serve"]["decode_step_time_s"] == plans["d"].doc["step_time_s"]
    assert plans["s"].doc["collectives"] == plans["d"].doc["collectives"]
    # C·n_c = 8 ≤ R = 1 + 259: TPOT = t_dec + 7 × 1 × (t_mix − t_dec)/259, a little above t_dec
    sv = plans["s"].doc["serve"]
    t_dec, t_mix = sv["decode_step_time_s"], sv["mixed_step_time_s"]
    assert sv["tpot_s"] == pytest.approx(t_dec + 7 * (t_mix - t_dec) / 259, rel=1e-12)


def test_host_time_per_sequence_counts_requests_not_prompt_rows(tmp_path):
    """A stack's seq_overhead is host time per running *request* (sampling, detokenising): a mixed step holds
    n_dec decoding requests and one whose chunk is prefilled, not n_dec + c̄ of them. With t_seq = 100 µs the
    step-roofline plan above gains, on top of its hand-worked times (t_dec 2.05608 ms, t_mix 5.3 ms):
      decode step: C = 4 requests         -> + 4 × 0.1 = 0.4 ms -> t_dec 2.45608 ms
      mixed step:  n_dec + 1 = 3 + 1 = 4  -> + 0.4 ms            -> t_mix 5.7 ms   (not 53 rows × 0.1 = 5.3 ms)"""
    extra = 'stack hosted { roofline = step; pipeline = flush; seq_overhead = 100 us; source = "test" }\n'
    sv = _serve(tmp_path, stack="hosted", extra=extra)["serve"]
    assert sv["decode_step_time_s"] == pytest.approx(2.45608e-3, rel=1e-12)
    assert sv["mixed_step_time_s"] == pytest.approx(5.7e-3, rel=1e-12)
    # TPOT = t_dec + (C − 1)·n_c·(t_mix − t_dec)/(O − 1) = 2.45608 + 3 × 6 × 3.24392/100 = 3.0399856 ms
    assert sv["tpot_s"] == pytest.approx(3.0399856e-3, rel=1e-12)
