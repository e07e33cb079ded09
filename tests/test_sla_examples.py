"""The three capacity examples (specs/sla-*.ccost, docs/capacity.md): each capacity search answers with the
aggregated and the disaggregated best fleet, the fleet it chose meets the SLOs at the peak (p50 ≤ p99 ≤
the limit, simulated), its cost is its GPUs at the list price for a month, and its replica count is
plausible against a hand calculation from the step model's parts (below). Their speed (≤ 2 s each on one
core) is measured by bench/simulate.py (d), not here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ccost import check, evaluate

ROOT = Path(__file__).resolve().parent.parent
SPECS = {  # spec → (its search, the largest fleet it may buy, the peak rate, TTFT and TPOT limits at p99)
    "sla-llama70b-h200.ccost": ("fleet", 16, 8.0, 1.0, 0.030),
    "sla-llama8b-h100.ccost": ("fleet", 8, 20.0, 0.5, 0.020),
    "sla-mixtral-h100.ccost": ("fleet", 8, 10.0, 0.5, 0.030),
}

# The hand calculation's constants, each with its source:
HBM_SHARE = 0.82  # share of HBM bandwidth a weight-streaming GEMM reaches: the measured kernel curves' e_w
#                   (82.7 % on H200; `ccost explain` lists them), rounded down: the hand model is a bound
MFU = 0.82  # share of peak FLOP/s a large GEMM reaches (the kernel curves' η_GEMM, 82.3 % on H200)
# The host's time per step, per layer and per running request are the plan's stack profile's (an input of
# the spec: std's serving_default), read from the checked plan, each 0 when the stack runs it behind the GPU.


@pytest.fixture(scope="module")
def answers():
    out = {}
    for name, (search, *_rest) in SPECS.items():
        spec, _ = check.load_spec(str(ROOT / "specs" / name))
        out[name] = (spec, evaluate.evaluate(spec).searches[search])
    return out


@pytest.mark.parametrize("name", SPECS)
def test_the_answer_meets_the_slos_and_costs_its_gpus(answers, name):
    spec, doc = answers[name]
    _, most, peak, ttft, tpot = SPECS[name]
    assert doc["kind"] == "capacity" and doc["peak_rate_per_s"] == peak
    assert doc["max_ttft_s"] == ttft and doc["max_tpot_s"] == tpot and doc["slo_percentile"] == "p99"
    for mode in ("aggregated", "disaggregated"):  # both answers, each confirmed by simulation
        f = doc[mode]
        assert f is not None and f["mode"] == mode, f"{name}: no {mode} fleet"
        sim = f["simulated"]
        assert sim["meets"] and sim["stable"]
        assert sim["ttft_p50_s"] <= sim["ttft_p99_s"] <= ttft
        assert sim["tpot_p50_s"] <= sim["tpot_p99_s"] <= tpot
        assert 1 <= f["gpus"] <= most
    chosen = doc["chosen"]
    assert chosen in (doc["aggregated"], doc["disaggregated"])
    assert chosen["cost_per_month_usd"] <= min(doc["aggregated"]["cost_per_month_usd"],
                                               doc["disaggregated"]["cost_per_month_usd"])
    # the cost by hand: GPUs × the GPU's list price (held in USD per second) × 730 h, a month (docs/cost.md)
    plan = spec.searches[SPECS[name][0]].base
    price = plan.cluster.price_per_gpu_hour or plan.cluster.gpu.price_per_hour
    assert chosen["cost_per_month_usd"] == pytest.approx(chosen["gpus"] * price * 730 * 3600, rel=1e-9)


def _host(stack) -> tuple[float, float, float]:
    """(per step, per layer, per running request) host seconds on the critical path."""
    if stack.host_overlap:  # asynchronous scheduling: the host works behind the GPU's step
        return 0.0, stack.layer_overhead, 0.0
    return stack.step_overhead, stack.layer_overhead, stack.seq_overhead


def _mean_tpot(model, gpu, stack, g: int, lam: float, I: int, O: int) -> float:
    """Mean TPOT of one aggregated replica of g GPUs at λ requests/s, by hand: a decode step streams the
    weights (W/g at HBM_SHARE of the bandwidth) and each running request's KV cache, plus the stack's host
    time (per step, per layer, per running request); prompts take λ·T_pf of the engine's time (2·N_active·I FLOP over g GPUs at
    MFU), which the decode steps wait for. With R = λ·O·TPOT requests decoding (Little):
    TPOT = (t_w + t_host + R·(t_seq + t_kv)) / (1 − λ·T_pf), solved for TPOT. Communication and attention
    FLOPs are left out, so it is optimistic: a lower bound. Returns inf when the replica cannot keep up."""
    bw = gpu.hbm_bandwidth * HBM_SHARE
    t_w = model.total_weight_bytes / g / bw
    kv_token = 2 * model.layers * model.kv_heads * (model.hidden // model.heads) * 2  # K and V, bf16
    t_kv = kv_token * (I + O / 2) / g / bw
    active = model.active_params or model.params
    t_pf = 2 * active * I / (g * gpu.flops * MFU)
    t_step, t_layer, t_seq = _host(stack)
    free = 1 - lam * t_pf - lam * O * (t_seq + t_kv)
    return (t_w + t_step + t_layer * model.layers) / free if free > 0 else math.inf


@pytest.mark.parametrize("name", SPECS)
def test_the_aggregated_replica_count_is_plausible_by_hand(answers, name):
    """The aggregated answer's replicas against the hand model (``_mean_tpot``): at least the fewest with
    which the mean TPOT (optimistic) is within the limit — no fewer can do it — and at most twice that plus
    one, the room the p99, the prefill queue and what the hand model leaves out may take."""
    spec, doc = answers[name]
    _, _, peak, _, tpot = SPECS[name]
    f = doc["aggregated"]
    base = spec.searches[SPECS[name][0]].base
    model, gpu, t = base.model, base.cluster.gpu, base.traffic
    g = f["tp"] * f["pp"] * f["ep"]
    n = f["dp"]
    fewest = next(k for k in range(1, 64)
                  if _mean_tpot(model, gpu, base.stack, g, peak / k, t.input_tokens, t.output_tokens) <= tpot)
    assert fewest <= n <= 2 * fewest + 1, (name, g, n, fewest)
