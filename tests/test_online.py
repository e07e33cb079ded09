"""Online serving (``phase = online``, ``ccost.model.online``): the sampled step model worked by
hand and against the step it samples, the queue theory has closed forms for (M/D/1, a burst), the
disaggregated KV move priced by the α-β core, the SLO verdict, determinism, and the checker's words.

The simulator itself (scheduling order, event jumping against the plain reference, Little's law) is
tests/test_simulate.py's; here the plan drives it with ccost's own step model."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ccost import check, evaluate
from ccost.model import online
from ccost.model import simulate as sim
from ccost import spec as S

SPECS = Path(__file__).resolve().parent.parent / "specs"

# One GPU (no collective) whose numbers are easy to follow, priced per operator with no kernel curves:
#   W = params × bf16 = 1e9 × 2 B = 2e9 B; HBM 1 TB/s, so the weights take 2 ms to read; 20 TFLOP/s at 100 %.
#   KV per token = 2 (K, V) × L 10 × h_kv 10 × d_head (1000/10 = 100) × 2 B = 40,000 B: 40 ns to read at 1 TB/s.
#   Attention FLOPs per (query, key) pair = heads 10 × c_F 2 × 2·d_head (QKᵀ and PV) × L 10 = 40,000 FLOP:
#   2 ns at 20 TFLOP/s. Host time: t_step 1 ms + t_seq 100 µs per sequence in the step.
# So a step of R decoding rows at C context tokens in all, P prompt tokens in N prompts with Q pairs takes
#   max(2 ms, 2·N_params·(R + P)/R_flop = 0.1 ms·(R + P))               (the weight GEMMs)
#   + max(40 ns·C, 2 ns·C)                                               (decode attention: reading the KV)
#   + max(40 ns·S_eff, 2 ns·Q), S_eff(S_eff + 1)/2 = Q                   (the prompts' causal attention)
#   + 1 ms + 0.1 ms·(R + N)                                              (host)
SPEC = """
link nv { alpha = 2 us; bandwidth = 450 GB/s }
gpu g { memory = 80 GB; hbm_bandwidth = 1 TB/s; flops = 20 TFLOP/s; price_per_hour = 2 USD/h }
cluster c { gpu = g; gpus_per_node = 8; intra_node = nv }
model m { layers = 10; hidden = 1000; heads = 10; kv_heads = 10; params = 1e9 }
stack ops {
  roofline = operator; pipeline = steady; step_overhead = 1 ms; seq_overhead = 100 us
  hbm_efficiency = 100 %; gemm_efficiency = 100 %; attention_efficiency = 100 %; source = "test"
}
traffic t { TRAFFIC }
plan p {
  model = m; cluster = c; phase = online; stack = ops; traffic = t
  PLAN
}
policy { POLICY }
"""


def _spec(tmp_path: Path, traffic: str = "rate = 2; input_tokens = 300; output_tokens = 101", plan: str = "",
          policy: str = "max_memory = 90 %") -> Path:
    path = tmp_path / "online.ccost"
    path.write_text(SPEC.replace("TRAFFIC", traffic).replace("PLAN", plan).replace("POLICY", policy),
                    encoding="utf-8")
    return path


def _load(path: Path) -> S.Spec:
    spec, diags = check.load_spec(str(path))
    assert spec is not None, [d.message for d in diags]
    return spec


def _hand(R: float, C: float, P: float, Q: float, N: float) -> float:
    S_eff = (math.sqrt(8 * Q + 1) - 1) / 2
    t = max(2e-3, 1e-4 * (R + P))
    if R:
        t += 40e-9 * C
    if Q:
        t += max(40e-9 * S_eff, 2e-9 * Q)
    return t + 1e-3 + 1e-4 * (R + N)


def test_the_sampled_step_model_worked_by_hand(tmp_path):
    spec = _load(_spec(tmp_path))
    plan, policy = spec.plans["p"], spec.policy
    model = online.sample(online.prepare(plan, policy), 8192, 4096)
    # a decode step of 10 rows at 1,000 tokens each: 2 ms of weights + 0.4 ms of KV + 1 ms + 10 × 0.1 ms of host
    assert model(10, 10_000.0, 0, 0, 0) == pytest.approx(4.4e-3, rel=1e-9)
    # with a 500-token chunk (Q = 500·501/2 = 125,250): FLOP-bound GEMMs 0.1 ms × 510 = 51 ms, the chunk's
    # attention 2 ns × 125,250 = 250.5 µs, host 1 ms + 11 × 0.1 ms: 51 + 0.4 + 0.2505 + 2.1 = 53.7505 ms
    assert model(10, 10_000.0, 500, 125_250.0, 1) == pytest.approx(53.7505e-3, rel=1e-9)
    # arrays (the simulator's stretches and the screen) give the same numbers
    got = model(np.array([10.0, 10.0]), np.array([10_000.0, 10_000.0]), np.array([0.0, 500.0]),
                np.array([0.0, 125_250.0]), np.array([0.0, 1.0]))
    assert got == pytest.approx([4.4e-3, 53.7505e-3], rel=1e-9)
    # a prefill-only step (no row decodes: no decode attention kernel runs) and random steps
    rng = np.random.default_rng(1)
    for _ in range(50):
        R, ctx, P = int(rng.integers(0, 200)), float(rng.integers(1, 3000)), int(rng.integers(0, 2000))
        s = float(rng.integers(0, 2000)) if P else 0.0
        Q = P * s + P * (P + 1) / 2
        N = 1 if P else 0
        assert model(R, R * ctx, P, Q, N) == pytest.approx(_hand(R, R * ctx, P, Q, N), rel=1e-9), (R, ctx, P, s)


H200 = """
import "std/gpus.ccost"
import "std/links.ccost"
import "std/models.ccost"
import "std/clusters.ccost"
traffic chat { rate = 4; input_tokens = 1024; output_tokens = 256 }
plan p { model = llama3_70b; cluster = hgx_h200; phase = online; traffic = chat; tp = 4 }
"""


def test_the_sampled_model_is_the_step_program_it_samples(tmp_path):
    """On Llama-3-70B on H200 (measured kernel curves: the GEMM rate bends with the token rows), the
    sampled model interpolates ``step_program``, the step derived by ``lower`` and ``analysis``: exact at
    the grid's points, within 1 % between them."""
    path = tmp_path / "h200.ccost"
    path.write_text(H200, encoding="utf-8")
    spec = _load(path)
    plan = spec.plans["p"]
    prep = online.prepare(plan, spec.policy)
    model = online.sample(prep, 8192, 8192)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(40):
        R, ctx = float(rng.integers(1, 256)), float(rng.integers(100, 4000))
        P = float(rng.integers(1, 4096))
        exact = float(online.step_program(prep, R, ctx, P, P, R + 1)[1].step)
        got = model(R, R * ctx, P, P * (P + 1) / 2, 1)
        worst = max(worst, abs(got / exact - 1))
        only = float(online.step_program(prep, R, ctx, None, None, R)[1].step)
        assert model(R, R * ctx, 0, 0, 0) == pytest.approx(only, rel=0.01)
    assert worst < 0.01
    for T in model.tokens[:20]:  # on the grid: the forward pass and the decode attention are exact
        exact = float(online.step_program(prep, T, 1000.0, None, None, T)[1].step)
        assert model(T, T * 1000.0, 0, 0, 0) == pytest.approx(exact, rel=1e-9)


def test_one_request_at_a_time_is_an_md1_queue(tmp_path):
    """max_seqs = 1 and fixed lengths: each request holds the engine for D = one prefill step + (O − 1)
    decode steps, all known by hand; with Poisson arrivals that is M/D/1, mean wait ρ/(2μ(1 − ρ))."""
    I, O = 300, 11
    t_pre = _hand(0, 0, I, I * (I + 1) / 2, 1)  # the prompt alone: its step gives the first token
    t_dec = [_hand(1, I + j, 0, 0, 0) for j in range(1, O)]  # the j-th decode step at context I + j
    D = t_pre + sum(t_dec)
    lam = 0.5 / D  # ρ = 0.5
    path = _spec(tmp_path, f"rate = {lam!r}; input_tokens = {I}; output_tokens = {O}; requests = 20000",
                 "max_seqs = 1")
    spec = _load(path)
    priced = online.price(spec.plans["p"], spec.policy)
    run = priced.terms.mean.run
    wait = 0.5 / (2 * (1 / D) * (1 - 0.5))  # = D/2
    assert float(np.mean(run.e2e)) == pytest.approx(wait + D, rel=0.03)
    assert float(np.mean(run.ttft)) == pytest.approx(wait + t_pre, rel=0.05)
    # the service itself is exact: the least latency is one request alone
    assert float(np.min(run.e2e)) == pytest.approx(D, rel=1e-9)


def test_a_burst_kth_request_waits_for_the_prefills_ahead_of_it(tmp_path):
    """Nine requests at once, one output token each (the prefill's step gives it), a step budget of one
    prompt: the k-th request's first token comes after k prefill steps."""
    I, n = 400, 9
    path = _spec(tmp_path, f"burst = {n}; input_tokens = {I}; output_tokens = 1", f"step_tokens = {I}")
    spec = _load(path)
    doc = evaluate.evaluate(spec).plans["p"].doc["online"]
    t_pre = _hand(0, 0, I, I * (I + 1) / 2, 1)
    # numpy's percentile between order statistics k·t_pre: p50 the 5th, p90 8.2, p99 8.92
    assert doc["ttft_p50_s"] == pytest.approx(5 * t_pre, rel=1e-9)
    assert doc["ttft_p90_s"] == pytest.approx(8.2 * t_pre, rel=1e-9)
    assert doc["ttft_p99_s"] == pytest.approx(8.92 * t_pre, rel=1e-9)
    assert doc["rate_per_s"] is None and doc["highest_rate_per_s"] is None and doc["arrivals"] == "burst"


def test_disaggregated_kv_move_is_the_alpha_beta_point_to_point(tmp_path):
    """One prefill and one decode worker on NVLink: the KV cache of a 300-token prompt, 300 × 40,000 B =
    12 MB, sent point to point: α + m/B = 2 µs + 12 MB / 450 GB/s = 28.667 µs. One request alone: TTFT =
    its prefill step + the move + its first decode step."""
    I, O = 300, 5
    path = _spec(tmp_path, f"burst = 1; input_tokens = {I}; output_tokens = {O}", "prefill_workers = 1")
    spec = _load(path)
    r = evaluate.evaluate(spec).plans["p"]
    doc = r.doc["online"]
    move = 2e-6 + 300 * 40_000 / 450e9
    assert doc["kv_transfer_s"] == pytest.approx(move, rel=1e-12)
    assert (doc["prefill_workers"], doc["decode_workers"], doc["prefill_tp"]) == (1, 1, 1)
    assert r.doc["gpus"] == 2 and r.metrics.gpus == 2
    ttft = _hand(0, 0, I, I * (I + 1) / 2, 1) + move + _hand(1, I + 1, 0, 0, 0)
    assert doc["ttft_p50_s"] == pytest.approx(ttft, rel=1e-9)


def test_disaggregated_gpus_count_both_pools(tmp_path):
    spec = _load(_spec(tmp_path, plan="tp = 2; prefill_workers = 2; decode_workers = 1; prefill_tp = 1",
                       traffic="rate = 1; input_tokens = 300; output_tokens = 11; requests = 200"))
    # dp·pp·ep·(W_p·tp_p + W_d·tp) = 1 × 1 × 1 × (2 × 1 + 1 × 2) = 4
    assert spec.plans["p"].gpus == 4
    assert evaluate.evaluate(spec).plans["p"].doc["gpus"] == 4


def test_slo_verdict_goodput_and_cost_per_token(tmp_path):
    traffic = "rate = 2; peak_rate = 3; input_tokens = 300; output_tokens = 101; requests = 500"
    loose = _load(_spec(tmp_path, traffic, policy="max_ttft = 10 s; max_tpot = 1 s; slo_percentile = p90"))
    doc = evaluate.evaluate(loose).plans["p"].doc
    on = doc["online"]
    assert on["meets_slo"] and on["peak_stable"] and on["slo_percentile"] == "p90"
    assert on["goodput_share"] == 1.0 and on["peak_goodput_share"] == 1.0
    assert on["peak_ttft_slo_s"] == on["peak_ttft_p90_s"] <= 10
    # the throughput the cost is per: the traffic's output tokens, λ·O = 2 × 101 per second, on one GPU at 2 USD/h
    assert doc["throughput_tokens_s"] == pytest.approx(202.0)
    assert doc["cost"]["cost_per_mtok_usd"] == pytest.approx(2 / 3600 * 1e6 / 202.0)
    tight = _load(_spec(tmp_path, traffic, policy="max_tpot = 1 ms"))  # below a step's host time alone
    on = evaluate.evaluate(tight).plans["p"].doc["online"]
    assert not on["meets_slo"] and on["goodput_share"] == 0.0 and on["peak_stable"]


def test_the_same_spec_gives_the_same_numbers(tmp_path):
    path = _spec(tmp_path, "rate = 3; input_tokens = 300; output_tokens = 101; input_cv = 50 %; requests = 400")
    a = evaluate.evaluate(_load(path)).plans["p"].doc
    b = evaluate.evaluate(_load(path)).plans["p"].doc
    assert a == b
    path = _spec(tmp_path, "rate = 3; input_tokens = 300; output_tokens = 101; input_cv = 50 %; requests = 400; "
                 "seed = 7")
    c = evaluate.evaluate(_load(path)).plans["p"].doc
    assert c["online"]["ttft_p99_s"] != a["online"]["ttft_p99_s"] and c["online"]["seed"] == 7


def test_the_plan_defaults_are_the_simulated_engines():
    assert (S.DEFAULT_MAX_SEQS, S.DEFAULT_STEP_TOKENS) == (sim.Engine().max_seqs, sim.Engine().max_batched_tokens)


def test_the_checker_names_what_an_online_plan_lacks(tmp_path):
    r = check.check_file(str(_spec(tmp_path, "rate = 2; input_tokens = 300", "batch = 8")))
    msgs = [(d.code, d.message) for d in r.diagnostics]
    assert any(c == "E104" and "needs a rate" in m for c, m in msgs), msgs
    assert any(c == "W306" and "`batch` is not read" in m for c, m in msgs), msgs
    path = tmp_path / "x.ccost"
    path.write_text(_spec(tmp_path).read_text().replace("phase = online; stack = ops; traffic = t",
                                                        "phase = decode; max_seqs = 8"), encoding="utf-8")
    msgs = [(d.code, d.message) for d in check.check_file(str(path)).diagnostics]
    assert any(c == "W306" and "`max_seqs` applies only to `phase = online`" in m for c, m in msgs), msgs
    path.write_text(_spec(tmp_path).read_text().replace("stack = ops", "stack = flat").replace(
        "traffic t", 'stack flat { roofline = step }\ntraffic t'), encoding="utf-8")
    msgs = [(d.code, d.message) for d in check.check_file(str(path)).diagnostics]
    assert any(c == "E401" and "one roofline for the whole step" in m for c, m in msgs), msgs


def test_explain_derives_the_representative_steps_and_names_the_simulation(tmp_path):
    spec = _load(_spec(tmp_path, "rate = 2; input_tokens = 300; output_tokens = 101; requests = 300"))
    steps = evaluate.explain(spec, "p")
    by = {s.name: s for s in steps}
    doc = evaluate.evaluate(spec).plans["p"].doc
    assert by["T_step"].value == pytest.approx(doc["step_time_s"], rel=1e-12)
    assert "simulated: ccost.model.simulate" in by["TTFT_p99"].source
    assert by["TTFT_p99"].value == doc["online"]["ttft_p99_s"]


def test_a_step_smaller_than_the_running_requests_is_an_error_at_check(tmp_path, capsys):
    # found by tests/test_fuzz_pipeline.py (seed 196086692): max_seqs = 128 with step_tokens = 64 passed
    # `check` and raised the simulator's EngineError (an internal error) in `eval`. Every running request
    # decodes one token a step, so a step holds at least max_seqs tokens (vLLM refuses it too).
    from ccost.cli import main

    path = _spec(tmp_path, plan="max_seqs = 128\n  step_tokens = 64")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "E401" in err and "step_tokens = 64 is below max_seqs = 128" in err and "internal error" not in err
    assert main(["eval", str(path)]) == 2
    err = capsys.readouterr().err
    assert "E401" in err and "internal error" not in err


def _synthetic_sampled(L: int = 3, seed: int = 0) -> online.Sampled:
    """A batched sampled step model of L layouts with arbitrary (positive, rising) tables."""
    rng = np.random.default_rng(seed)
    tg, qg = online.grids(8192, 16384)
    fwd = np.cumsum(rng.uniform(1e-6, 1e-5, (L, len(tg))), axis=1) + rng.uniform(5e-3, 2e-2, (L, 1))
    pro = np.cumsum(rng.uniform(1e-7, 1e-6, (L, len(qg))), axis=1)
    da = np.cumsum(rng.uniform(1e-7, 1e-6, (L, len(tg))), axis=1)
    db = rng.uniform(1e-9, 1e-8, (L, len(tg)))
    return online.Sampled(tg, fwd, qg, pro, da, db, 512.0, rng.uniform(1e-5, 1e-4, L))


def test_the_vectorised_step_is_the_scalar_step_element_by_element():
    """The screen's array path (decode rows (K, 1) beside prompt chunks (K, M), each part interpolated on
    its own shape and broadcast) gives, element by element, what the simulator's plain-float path gives
    for that layout alone: the same formula, two implementations."""
    model = _synthetic_sampled()
    rng = np.random.default_rng(1)
    K, M = 6, 5
    index = rng.integers(0, 3, K)
    R = rng.integers(0, 300, (K, 1)).astype(float)
    R[0, 0] = 0.0  # a prefill-only step
    C = R * rng.uniform(100, 4000, (K, 1))
    P = rng.integers(0, 2048, (K, M)).astype(float)
    P[1, 2] = 0.0  # a decode-only element
    Q = P * rng.uniform(1, 3000, (K, M))
    N = (P > 0) * 1.0
    got = model.take(index)(R, C, P, Q, N)
    assert got.shape == (K, M)
    for k in range(K):
        one = model.layout(int(index[k]))
        for j in range(M):
            want = one(int(R[k, 0]), float(C[k, 0]), int(P[k, j]), float(Q[k, j]), int(N[k, j]))
            assert got[k, j] == pytest.approx(want, rel=1e-12)


class _NoCut:
    """The same step model without ``take``/``index``: the screen cannot cut it to rows and prices every
    configuration at every position (the reference for its row-cutting)."""

    def __init__(self, model):
        self.model, self.batch_shape = model, model.batch_shape

    def __call__(self, *args):
        return self.model(*args)


def test_screen_cutting_rows_changes_no_figure():
    """The screen prices a prompt's chunk positions only for the configurations that still have one, and
    skips the batched-prompt positions of configurations already unstable: every figure it returns is
    what pricing all of them gives (a tiny budget makes one configuration's prompt 64 sampled positions,
    a high rate makes another overloaded)."""
    model = _synthetic_sampled()
    d = sim.Demand(sim.Arrivals.poisson(1), sim.Length.lognormal(1500, cv=0.7, max=6000), sim.Length.fixed(200))
    lengths = sim.LengthSample.of(d)
    index = np.array([0, 1, 2, 0, 1, 2])
    rates = np.array([0.5, 2.0, 4.0, 400.0, 1.0, 3.0])
    kw = dict(max_seqs=np.array([64, 128, 32, 64, 256, 128]), max_batched_tokens=np.array([64, 2048, 512, 8192, 1024,
                                                                                            8192]),
              kv_tokens=np.full(6, 2e5), prompt_per_step=300.0)
    with np.errstate(all="ignore"):
        cut = sim.screen(rates, lengths, model.take(index), **kw)
        ref = sim.screen(rates, lengths, _NoCut(model.take(index)), **kw)
    assert not cut.stable.all() and cut.stable.any()  # the case has both kinds
    np.testing.assert_array_equal(cut.stable, ref.stable)
    for f in ("busy_share", "decode_rows", "slot_wait", "prefill_load"):
        np.testing.assert_array_equal(getattr(cut, f), getattr(ref, f))
    for m in ("ttft", "tpot", "e2e"):
        for key in getattr(ref, m):
            np.testing.assert_array_equal(getattr(cut, m)[key], getattr(ref, m)[key])


def _traffic_spec(tmp_path: Path, traffic: str) -> Path:
    """specs/sla-mixtral-h100.ccost with its traffic block's body replaced and its search left out, in a
    folder of its own (a project: the trace files sit beside it)."""
    text = (SPECS / "sla-mixtral-h100.ccost").read_text()
    i = text.index("search fleet")
    text = text[:i] + text[text.index("}", i) + 1:]
    a = text.index("traffic chat")
    b = text.index("{", a) + 1
    text = text[:b] + "\n" + traffic + "\n" + text[text.index("}", b):]
    (tmp_path / ".git").mkdir(exist_ok=True)  # the project's root: the trace must stay inside it
    p = tmp_path / "t.ccost"
    p.write_text(text)
    return p


def test_a_traffic_drawn_from_a_trace_file(tmp_path, capsys):
    # two requests, 1,000/200 and 2,000/100 tokens: the simulations draw from them, so the mean input is
    # (1,000 + 2,000)/2 = 1,500 tokens and the mean output (200 + 100)/2 = 150
    (tmp_path / "requests.csv").write_text("input_tokens,output_tokens\n1000,200\n2000,100\n")
    spec = _traffic_spec(tmp_path, '  rate = 4\n  peak_rate = 6\n  trace = "requests.csv"')
    s, _ = check.load_spec(str(spec))
    doc = evaluate.evaluate(s).plans["chat_tp2"].doc["online"]
    assert (doc["mean_input_tokens"], doc["mean_output_tokens"]) == (1500, 150)
    from ccost.cli import main
    assert main(["export", str(spec)]) == 0
    assert "--random-input-len 1500 --random-output-len 150" in capsys.readouterr().out


@pytest.mark.parametrize("body,trace,words", [
    ('trace = "nope.csv"', None, "t.ccost:"),
    ('trace = "../outside.csv"', None, "leads outside"),
    ('trace = "r.csv"', "input_tokens,output_tokens\n1000,200\n2000,x\n", "r.csv:3:1"),
    ('trace = "r.csv"', "prompt,answer\n1,2\n", "no column of input tokens"),
    ('trace = "."', None, "t.ccost:"),  # a folder: said at the string, like a missing file
])
def test_a_trace_that_cannot_be_read_is_e515_where_it_is_written_or_where_it_is_wrong(tmp_path, capsys, body,
                                                                                       trace, words):
    from ccost.cli import main

    project = tmp_path / "p"
    project.mkdir()
    (tmp_path / "outside.csv").write_text("input_tokens,output_tokens\n1,1\n")  # there, but not in the project
    if trace is not None:
        (project / "r.csv").write_text(trace)
    spec = _traffic_spec(project, f"  rate = 4\n  {body}")
    assert main(["check", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "E515" in err and words in err and "Traceback" not in err, err


@pytest.mark.parametrize("body,words", [
    ("rate = 4; clients = 64; input_tokens = 1024; output_tokens = 256", "`rate` and `clients` each say how"),
    ("burst = 32; peak_rate = 8; input_tokens = 1024; output_tokens = 256", "`peak_rate` shapes arrivals at a rate"),
    ("rate = 8; peak_rate = 6; input_tokens = 1024; output_tokens = 256", "peak_rate = 6 is below rate = 8"),
    ("rate = 4; input_tokens = 1024; input_cv = 50 %; input_p90 = 2000; output_tokens = 256",
     "`input_cv` and `input_p90` each give the spread of the input lengths"),
    ("rate = 4; input_tokens = 1024; output_tokens = 256; output_max = 100",
     "output_max = 100 is below the mean output_tokens = 256"),
    ('rate = 4; trace = "r.csv"; input_tokens = 1024',
     "`trace` gives the input lengths, request by request, and `input_tokens` describes them too"),
])
def test_traffic_fields_that_contradict_each_other_are_e207(tmp_path, capsys, body, words):
    # the simulator took one of two and dropped the other without a word (clients before a rate, a CV
    # before a p90, the trace before the written lengths); a peak below the mean sized the fleet for less
    from ccost.cli import main

    (tmp_path / "r.csv").write_text("input_tokens,output_tokens\n1000,200\n")
    spec = _traffic_spec(tmp_path, "  " + body.replace("; ", "\n  "))
    assert main(["check", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "E207" in err and words in err, err


def test_diff_reads_the_trace_of_the_old_revision_from_git(tmp_path, capsys):
    # `ccost diff REV spec` evaluates the old spec with the trace file as it was in that revision (the
    # checker's reader; a numpy array in the traffic once made the comparison an internal error)
    import subprocess

    from ccost.cli import main

    (tmp_path / "r.csv").write_text("input_tokens,output_tokens\n1000,200\n2000,100\n")
    spec = _traffic_spec(tmp_path, '  rate = 4\n  trace = "r.csv"')
    (tmp_path / ".git").rmdir()
    git = ["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(git + args, check=True, capture_output=True)
    (tmp_path / "r.csv").write_text("input_tokens,output_tokens\n4000,200\n")
    assert main(["diff", "HEAD", str(spec)]) == 0
    out = capsys.readouterr().out
    assert ("traffic chat.trace_data: 2 requests, mean 1,500 in / 150 out tokens → 1 request, mean 4,000 in / "
            "200 out tokens") in out


def test_checklist_item_15_judges_the_slos_at_the_peak_and_the_gate_fails_on_it(capsys):
    # the policy's SLOs had no checklist item: `check --policy` passed chat_tp4 although its own review said
    # "meets the SLOs: no" (TPOT p99 at the peak above 30 ms)
    from ccost.cli import main

    for name, plan, ok in (("sla-llama70b-h200", "chat_tp4", False), ("sla-mixtral-h100", "chat_tp2", True)):
        spec, _ = check.load_spec(str(SPECS / f"{name}.ccost"))
        doc = evaluate.evaluate_plan(spec.plans[plan], spec.policy).doc
        item = next(i for i in doc["checklist"] if i["id"] == 15)
        sec, pol = doc["online"], spec.policy
        # the value is the worst figure at the SLO percentile over its limit, by hand from the section
        worst = max(sec["peak_ttft_slo_s"] / pol.max_ttft, sec["peak_tpot_slo_s"] / pol.max_tpot)
        assert item["value"] == pytest.approx(worst, rel=1e-12) and item["threshold"] == 1.0
        assert item["status"] == ("pass" if ok else "fail") and (worst <= 1) == ok == sec["meets_slo"]
        code = main(["check", "--policy", str(SPECS / f"{name}.ccost")])
        out, err = capsys.readouterr()
        assert code == (0 if ok else 1)
        if ok:
            assert "15 SLOs at the peak" in out
        else:
            assert f"{plan}: checklist 15 SLOs at the peak: at 8 requests/s:" in err and "TPOT p99" in err


def test_item_15_is_na_without_slos_and_fails_a_queue_that_grows(tmp_path):
    text = (SPECS / "sla-mixtral-h100.ccost").read_text()
    no_slo = text[:text.index("policy {")] + "policy { max_memory = 90 % }\n"
    spec = check.check_text(no_slo, str(tmp_path / "a.ccost")).spec
    doc = evaluate.evaluate_plan(spec.plans["chat_tp2"], spec.policy).doc
    assert next(i for i in doc["checklist"] if i["id"] == 15)["status"] == "n/a"
    flood = text.replace("peak_rate     = 10", "peak_rate     = 400")
    assert flood != text
    spec = check.check_text(flood, str(tmp_path / "b.ccost")).spec
    item = next(i for i in evaluate.evaluate_plan(spec.plans["chat_tp2"], spec.policy).doc["checklist"]
                if i["id"] == 15)
    assert item["status"] == "fail" and "grows without bound" in item["note"]


def test_a_trace_is_parsed_once_per_content_in_a_process(tmp_path, monkeypatch):
    # the language server checks on every edit; a million-row trace takes seconds to parse
    from ccost import traces

    calls = []
    real = traces.parse_trace
    monkeypatch.setattr(traces, "parse_trace", lambda *a, **k: calls.append(1) or real(*a, **k))
    (tmp_path / "r.csv").write_text("input_tokens,output_tokens\n1000,200\n2000,100\n")
    spec = _traffic_spec(tmp_path, '  rate = 4\n  trace = "r.csv"')
    one = check.check_file(str(spec)).spec.traffics["chat"].trace_data
    two = check.check_file(str(spec)).spec.traffics["chat"].trace_data
    assert len(calls) == 1 and two is one and not one.inputs.flags.writeable
    (tmp_path / "r.csv").write_text("input_tokens,output_tokens\n3000,300\n")
    assert check.check_file(str(spec)).spec.traffics["chat"].trace_data.inputs.tolist() == [3000]
    assert len(calls) == 2
