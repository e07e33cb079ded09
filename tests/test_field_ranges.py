"""Every physical field at each end of its range is priced without an internal error or a negative or
non-finite number (`power = 0 W`, inside the allowed 0 W to 10 MW, was a
ZeroDivisionError in eval, explain, report and search).

The audit behind the ranges: each numeric field of every block kind is set to its minimum and to its
maximum (just inside an open bound) in a spec that has a plan of every phase, priced and powered, dense and
mixture-of-experts, on a stack with every overhead; whatever `check` accepts must evaluate (`eval`'s
document and `explain` of every plan) to finite, non-negative numbers or a diagnostic. What it found, now
refused by `check` with the field named: a GPU's or a node's power of 0 W (energy per token divides by it:
R_POWER_DRAW starts at 1 W), and a vocabulary whose embedding and LM head hold more parameters than the model
(training's GEMM FLOPs subtract them: E207). The property test of tests/test_finite.py draws whole specs
from the same ranges; this one walks the bounds one field at a time.
"""

from __future__ import annotations

import math

import pytest
from ccost import evaluate
from ccost import schema as SC
from ccost import units as U
from ccost.check import check_text
from ccost.commands.explain import render as explain
from ccost.diagnostics import CcostError
from plan_gen import numbers

BASE = {
    "link": {"nv": "alpha = 2 us; bandwidth = 450 GB/s", "ib": "alpha = 3 us; bandwidth = 50 GB/s"},
    "gpu": {"g": "memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s; power = 700 W; "
                 "price_per_hour = 3 USD/h; fp8_flops = 1979 TFLOP/s"},
    "cluster": {"c": "gpu = g; nodes = 2; gpus_per_node = 8; intra_node = nv; inter_node = ib; host_power = 2 kW; "
                     "pue = 1.3; electricity_price = 0.12 USD/kWh"},
    "model": {"m": "layers = 8; hidden = 1024; heads = 8; kv_heads = 8; params = 1e9; ffn = 4096; vocab = 32000",
              "moe": "layers = 8; hidden = 1024; heads = 8; kv_heads = 8; params = 8e9; experts = 8; top_k = 2; "
                     "active_params = 3e9"},
    "stack": {"st": "step_overhead = 1 ms; layer_overhead = 10 us; seq_overhead = 10 us; hbm_efficiency = 80 %; "
                    "gemm_efficiency = 60 %; collective_floor = 10 us; roofline = operator; host_power = 100 W"},
    "plan": {
        "d": "model = m; cluster = c; phase = decode; batch = 8; seq = 1024; tp = 2; pp = 2; stack = st",
        "pf": "model = m; cluster = c; phase = prefill; batch = 2; seq = 1024; tp = 2; microbatches = 2; stack = st",
        "t": "model = m; cluster = c; phase = train; batch = 16; seq = 1024; tp = 2; pp = 2; dp = 2; "
             "microbatches = 8; stack = st",
        "sv": "model = moe; cluster = c; phase = serve; concurrency = 8; input_tokens = 256; output_tokens = 16; "
              "tp = 2; ep = 2; stack = st",
        "e": "model = moe; cluster = c; phase = decode; batch = 8; seq = 512; ep = 4",
    },
}
POLICY = "policy { max_overhead = 50 %; min_efficiency = 10 %; max_memory = 95 %; max_cost_per_mtok = 100 USD }"
#: The host power a GPU's share adds: without it, the GPU's own power is all a plan's power (power = 0 W
#: then divides by zero; with 2 kW of host power it did not).
NO_HOST = {("cluster", "c"): ("host_power = 2 kW; ", ""), ("stack", "st"): ("; host_power = 100 W", "")}


def spec_with(kind: str, field: str, value: str, host: bool = True) -> str:
    out = []
    for k, blocks in BASE.items():
        for name, body in blocks.items():
            if not host and (k, name) in NO_HOST:
                body = body.replace(*NO_HOST[(k, name)])
            if k == kind:
                body = "; ".join([p for p in body.split("; ") if p.split(" = ")[0] != field] + [f"{field} = {value}"])
            out.append(f"{k} {name} {{ {body} }}")
    return "\n".join(out) + "\n" + POLICY + "\n"


def literal(f: SC.Field, v: float) -> str:
    if f.type.kind == "int":
        return str(int(v))
    if f.type.kind == "quantity":
        return f"{float(v)!r} {U.unit_of_dim(f.type.dim)}"
    return repr(float(v))


def bounds(f: SC.Field) -> list[float]:
    """The field's minimum and maximum, just inside an open end."""
    out = []
    for v, open_ in ((f.minimum, f.min_open), (f.maximum, f.max_open)):
        if v is None:
            continue
        if open_:
            v = v * (1 + 1e-9) if v > 0 else (1e-300 if v == 0 else v * (1 - 1e-9))
        out.append(v)
    return out


KINDS = ("link", "gpu", "cluster", "model", "stack", "plan")
CASES = [(k, f.name, v) for k in KINDS
         for f in SC.SCHEMA[k].fields if f.type.numeric for v in bounds(f)]


def problems_of(text: str) -> list[str]:
    """What is wrong when ``text`` checks: an internal error, a non-finite or negative number in the results
    document, ``inf``/``nan`` in an explanation. Empty when it does not check (a diagnostic is an answer)."""
    r = check_text(text, "bounds.ccost")
    if not r.ok:
        return []
    try:
        doc = evaluate.results_document(evaluate.evaluate(r.spec))
        texts = [explain(r.spec, name) for name in r.spec.local_plans]
    except CcostError:
        return []
    except Exception as exc:  # the failure this test exists to catch
        return [f"internal error {type(exc).__name__}: {exc}"]
    bad = [f"{p} = {x}" for p, x in numbers(doc) if not math.isfinite(x) or x < 0]
    bad += [f"explain: {w}" for t in texts for w in ("inf", "nan") if w in t.split()]
    return bad


def test_the_walk_covers_every_numeric_field():
    walked = {(k, name) for k, name, _ in CASES}
    numeric = {(k, f.name) for k in KINDS
               for f in SC.SCHEMA[k].fields if f.type.numeric}
    assert numeric - walked == set()  # every numeric field has a range to walk (E203 names it)


@pytest.mark.parametrize("kind,field,value", [("gpu", "power", 0.0), ("cluster", "node_power", 0.0)])
def test_zero_power_is_refused_by_check(kind, field, value):
    """The two cases of the issue, in the inner loop: `check` refuses them, naming the field."""
    r = check_text(spec_with(kind, field, "0 W", host=False), "bounds.ccost")
    assert [(d.code, d.message) for d in r.errors] == [
        ("E203", f"`{field}` must be at least 1 W; got 0 W")]


def test_a_gpu_at_its_least_power_is_priced_without_a_host_share():
    assert problems_of(spec_with("gpu", "power", "1 W", host=False)) == []


# slow (~50 s in all: 280 specs, each evaluated and explained plan by plan): the sweep of every bound, one
# test per block kind so that the workers share it; the two tests above keep the cases in the inner loop
@pytest.mark.slow
@pytest.mark.parametrize("block", KINDS)
@pytest.mark.parametrize("host", [True, False], ids=["host power", "no host power"])
def test_every_field_at_its_bounds_gives_finite_non_negative_numbers(host, block):
    found = []
    for kind, name, v in [c for c in CASES if c[0] == block]:
        f = SC.SCHEMA[kind].field(name)
        found += [f"{kind}.{name} = {literal(f, v)}: {p}" for p in problems_of(spec_with(kind, name, literal(f, v), host))]
    assert found == []
