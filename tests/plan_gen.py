"""Specs drawn from the schema's own ranges: for the property test (tests/test_finite.py) and
the fuzz run (bench/fuzz.py).

Every numeric field gets a value from ``[minimum, maximum]`` of its schema entry: one of the bounds
themselves, or a log-uniform value between them, so the extremes (1 MB/s links, 1 PB/s links, 1e15
parameters, 1 ns compute steps) are drawn as often as ordinary values. Values are written in SI base
units (``1e-06 s``, ``1000000.0 B/s``) so the spec carries exactly the drawn float.

The generator takes a ``draw(kind, *args)`` callable so that Hypothesis (``st.data().draw``) and a plain
``random.Random`` (the fuzz benchmark) can both drive it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from ccost import schema as SC
from ccost import spec as S
from ccost import units as U

_UNIT = {U.TIME: "s", U.INFORMATION: "B", U.BANDWIDTH: "B/s", U.FLOP_RATE: "FLOP/s", U.COMPUTE: "FLOP"}

Draw = Callable[..., Any]


def random_draw(rng: random.Random) -> Draw:
    """A ``draw`` backed by ``random.Random``: ``draw("float", lo, hi)``, ``draw("int", lo, hi)``,
    ``draw("choice", seq)``, ``draw("bool")``."""
    def draw(kind: str, *args):
        if kind == "float":
            return rng.random() * (args[1] - args[0]) + args[0]
        if kind == "int":
            return rng.randint(args[0], args[1])
        if kind == "choice":
            return rng.choice(list(args[0]))
        if kind == "bool":
            return rng.random() < 0.5
        raise ValueError(kind)
    return draw


def hypothesis_draw(data) -> Draw:
    """A ``draw`` backed by Hypothesis' ``st.data()``, so failing examples shrink."""
    from hypothesis import strategies as st

    def draw(kind: str, *args):
        if kind == "float":
            return data.draw(st.floats(args[0], args[1], allow_nan=False, allow_infinity=False))
        if kind == "int":
            return data.draw(st.integers(args[0], args[1]))
        if kind == "choice":
            return data.draw(st.sampled_from(list(args[0])))
        if kind == "bool":
            return data.draw(st.booleans())
        raise ValueError(kind)
    return draw


def value(draw: Draw, f: SC.Field, lo: float | None = None, hi: float | None = None) -> float | int:
    """A value of field ``f`` inside its range (narrowed to [lo, hi] when given)."""
    lo = f.minimum if lo is None else max(lo, f.minimum if f.minimum is not None else lo)
    hi = f.maximum if hi is None else min(hi, f.maximum if f.maximum is not None else hi)
    assert lo is not None and hi is not None, f"{f.name} has no range"
    how = draw("int", 0, 5)
    if how == 0:
        v = lo
    elif how == 1:
        v = hi
    elif lo > 0:  # log-uniform: every order of magnitude as likely
        v = math.exp(draw("float", math.log(lo), math.log(hi)))
    else:
        v = draw("float", lo, hi) if how < 4 else 0.0 if lo == 0 else lo
    v = min(max(v, lo), hi)
    if f.min_open and v <= lo:
        v = max(lo, hi)
    if f.type.kind == "int":
        return int(min(max(round(v), math.ceil(lo)), math.floor(hi)))
    return v


def lit(f: SC.Field, v) -> str:
    """The spec text for value ``v`` of field ``f``: exact, in SI units."""
    if f.type.kind == "int":
        return str(int(v))
    if f.type.kind == "quantity":
        return f"{float(v)!r} {_UNIT[f.type.dim]}"
    return repr(float(v))


def _field(kind: str, name: str) -> SC.Field:
    f = SC.SCHEMA[kind].field(name)
    assert f is not None
    return f


def _members(draw: Draw, kind: str, names, **narrow) -> list[str]:
    out = []
    for name in names:
        f = _field(kind, name)
        lo, hi = narrow.get(name, (None, None))
        out.append(f"{name} = {lit(f, value(draw, f, lo, hi))}")
    return out


def spec_text(draw: Draw, extras: bool = True, max_gpus: int = 1 << 16) -> str:
    """One spec: two links, a GPU, a cluster, a model, a plan with drawn degrees (the cluster made large
    enough for them), and with ``extras`` a sweep, a comparison, a small search and a policy."""
    out = []
    for name in ("intra", "inter"):
        m = _members(draw, "link", ["alpha", "bandwidth"])
        if draw("bool"):
            m += _members(draw, "link", ["one_shot_latency"])
        if draw("bool"):
            m += _members(draw, "link", ["efficiency"])
        out.append(f"link {name} {{ " + "; ".join(m) + " }")
    g = _members(draw, "gpu", ["memory", "hbm_bandwidth", "flops"])
    if draw("bool"):
        g += _members(draw, "gpu", ["achieved_flops"])
    out.append("gpu g { " + "; ".join(g) + " }")

    # Degrees first, so the cluster can be sized to hold them (otherwise E301: a diagnostic, not a result);
    # pp at most the layers (E401 otherwise).
    layers = value(draw, _field("model", "layers"))
    small = (1, 64)
    tp, ep, dp = (value(draw, _field("plan", k), *small) for k in ("tp", "ep", "dp"))
    pp = value(draw, _field("plan", "pp"), 1, min(64, layers))
    while tp * pp * ep * dp > max_gpus:
        tp, pp, ep, dp = max(1, tp // 2), max(1, pp // 2), max(1, ep // 2), max(1, dp // 2)
    gpus = tp * pp * ep * dp
    per_node = value(draw, _field("cluster", "gpus_per_node"), 1, 1024)
    nodes = -(-gpus // per_node)
    c = [f"gpu = g; intra_node = intra; inter_node = inter; gpus_per_node = {per_node}; nodes = {nodes}"]
    if draw("bool"):
        c += _members(draw, "cluster", ["nvlink_domain"])
    out.append("cluster c { " + "; ".join(c) + " }")

    # Model: shape within the ranges; a transformer's shape fields kept to what a plan can split.
    hidden = value(draw, _field("model", "hidden"))
    mm = [f"layers = {layers}", f"hidden = {hidden}"]
    heads = vocab = None
    if draw("bool"):
        heads = value(draw, _field("model", "heads"))
        mm.append(f"heads = {heads}")
    if draw("bool"):
        mm += _members(draw, "model", ["ffn"])
    if draw("bool"):
        vocab = value(draw, _field("model", "vocab"))
        mm.append(f"vocab = {vocab}")
    # The KV cache per token needs kv_heads or an MLA latent (E104 otherwise); kv_heads divides
    # heads (E207 otherwise): a divisor of it, drawn from the smallest and the largest ones
    if draw("bool"):
        if heads is None:
            mm += _members(draw, "model", ["kv_heads"])
        else:
            small = [k for k in range(1, min(heads, 4096) + 1) if heads % k == 0]
            mm.append(f"kv_heads = {draw('choice', small + [heads])}")
    else:
        mm += _members(draw, "model", ["kv_lora_rank", "qk_rope_head_dim"])
    # the embedding and the LM head are vocab × hidden parameters each, part of params (E207 otherwise)
    embedding = 2.0 * vocab * hidden if vocab else 1.0
    params = value(draw, _field("model", "params"), embedding, None)
    mm.append(f"params = {lit(_field('model', 'params'), params)}")
    if draw("bool"):
        mm += _members(draw, "model", ["weight_bytes"])
    if draw("bool"):  # mixture of experts: top_k < experts, top_k/experts·params ≤ active_params ≤ params (E207)
        experts = value(draw, _field("model", "experts"), 2, None)
        top_k = value(draw, _field("model", "top_k"), 1, experts - 1)
        active = value(draw, _field("model", "active_params"),
                       max(params * top_k / experts * (1 + 1e-12), embedding), params)
        mm += [f"experts = {experts}", f"top_k = {top_k}",
               f"active_params = {lit(_field('model', 'active_params'), active)}"]
        if draw("bool"):
            mm += [f"moe_layers = {value(draw, _field('model', 'moe_layers'), 1, layers)}"]
    for dt in ("weights", "activations", "kv_cache", "grads"):
        mm.append(f"{dt} = {draw('choice', S.DTYPE_BYTES)}")
    out.append("model m { " + "; ".join(mm) + " }")
    # A software-stack profile drawn from its ranges, or the bundled default for the phase.
    st = _members(draw, "stack", ["step_overhead", "layer_overhead", "hbm_efficiency", "gemm_efficiency",
                                  "attention_efficiency", "collective_floor"])
    st.append(f"roofline = {draw('choice', S.ROOFLINES)}")
    out.append("stack st { " + "; ".join(st) + " }")

    # an online plan needs a traffic block and a simulation per evaluation: its own drawn cases live in
    # tests/test_online.py and tests/test_capacity.py (hypothesis over arrivals and lengths)
    phase = draw("choice", tuple(n for n in SC.PHASE_NAMES if n != "online"))
    p = [f"model = m; cluster = c; phase = {phase}; tp = {tp}; pp = {pp}; ep = {ep}; dp = {dp}"]
    batch = value(draw, _field("plan", "batch"))
    p += [f"batch = {batch}"]
    if phase == "serve":  # continuous batching (ccost.model.serve): its own fields; no seq, no compute_time (E401)
        batch = value(draw, _field("plan", "concurrency"))  # what the micro-batches split in serving
        p += [f"concurrency = {batch}"] + _members(draw, "plan", ["input_tokens", "output_tokens"])
    # at most one micro-batch per sequence (E401 otherwise)
    p += [f"microbatches = {value(draw, _field('plan', 'microbatches'), 1, batch)}"]
    p += _members(draw, "plan", ["overlap"])
    if phase == "serve":
        if draw("bool"):
            p += _members(draw, "plan", ["chunk_tokens"])
    elif phase != "decode" or draw("bool"):
        p += _members(draw, "plan", ["seq"])
    if phase != "serve" and draw("bool"):
        p += _members(draw, "plan", ["compute_time"])
    p.append(f"allreduce = {draw('choice', S.ALLREDUCE_ALGORITHMS)}")
    p.append(f"cross_node = {draw('choice', S.CROSS_NODE)}")
    p.append(f"one_shot_volume = {draw('choice', S.ONE_SHOT_VOLUMES)}")
    if draw("bool"):
        p.append("stack = st")
    if phase == "train" and draw("bool"):
        p.append("fsdp = true")
    out.append("plan p { " + "; ".join(p) + " }")
    out.append("plan one extends p { tp = 1; pp = 1; ep = 1; dp = 1 }")  # the one-GPU baseline
    if extras:
        out.append("sweep s { base = p; tp = [1, 2, 4] }")
        # cost_per_token ranks priced plans only (E403 otherwise, tests/test_ranking.py); these clusters have no price
        out.append("compare k { plans = [p, one]; by = "
                   + draw("choice", tuple(b for b in SC.COMPARE_BY if b != "cost_per_token")) + " }")
        if phase != "serve":  # the layout search does not take a serve plan (E401)
            out.append("search q { base = p; tp = [1, 2]; batch = [1, 8] }")
        pol = _members(draw, "policy", ["max_overhead", "min_efficiency", "max_memory"])
        out.append("policy { " + "; ".join(pol) + " }")
    return "\n".join(out) + "\n"


def numbers(doc, path: str = ""):
    """Every (path, number) in a results document, depth first."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from numbers(v, f"{path}.{k}")
    elif isinstance(doc, (list, tuple)):
        for i, v in enumerate(doc):
            yield from numbers(v, f"{path}[{i}]")
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield path, doc
    elif doc is not None and not isinstance(doc, (str, bool)):
        try:
            yield path, float(doc)  # numpy scalars
        except (TypeError, ValueError):
            pass
