"""The engine launch settings a serving fleet assumes, and a benchmark that replays its demand.

ccost prices an online plan or a capacity search's fleet with engine limits of its own (``max_seqs``,
``step_tokens``, tensor/pipeline/expert parallel degrees, prefill and decode workers). To measure the plan
on real engines, a user starts vLLM or SGLang with the same limits and replays the traffic with vLLM's
serving benchmark; its TTFT/TPOT percentiles are then compared with ccost's, and its step times fed back
through ``ccost calibrate --steps`` (docs/capacity.md, "Close the loop").

The flag names are the engines' own, checked against their documentation:

* vLLM ``vllm serve``: ``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--data-parallel-size``,
  ``--enable-expert-parallel``,
  ``--max-num-seqs``, ``--max-num-batched-tokens``, ``--enable-chunked-prefill`` (docs.vllm.ai, "Engine
  Arguments"); disaggregated prefill with ``--kv-transfer-config`` and the NixlConnector (docs.vllm.ai,
  "NixlConnector Usage Guide"; the feature is marked experimental there).
* SGLang ``python -m sglang.launch_server``: ``--tp-size``, ``--pp-size``, ``--ep-size``, ``--dp-size``,
  ``--enable-dp-attention``, ``--max-running-requests``, ``--chunked-prefill-size``,
  ``--disaggregation-mode prefill|decode``
  (docs.sglang.io, "Server Arguments"; "PD Disaggregation").
* ``vllm bench serve``: ``--dataset-name random``, ``--random-input-len``, ``--random-output-len``,
  ``--random-range-ratio``, ``--request-rate``, ``--burstiness``, ``--num-prompts``, ``--ignore-eos``,
  ``--percentile-metrics``, ``--metric-percentiles``, ``--goodput KEY:MS`` (docs.vllm.ai, "vllm bench
  serve"; vllm/benchmarks/serve.py).

The model is written ``$MODEL``: a ccost model block describes a shape, not a checkpoint.
"""

from __future__ import annotations

from typing import Any

from ccost import spec as S

MODEL = "$MODEL"
#: What the benchmark reports: the metrics and percentiles ccost prices (docs/simulation.md).
METRICS = "ttft,tpot,itl,e2el"
PERCENTILES = "50,90,99"


def _g(x: float) -> str:
    return f"{x:g}"


def _vllm(tp: int, pp: int, ep: int, max_seqs: int, step_tokens: int, extra: str = "") -> str:
    """One vLLM engine group. ccost's ep ranks each run their own sequences (the experts spread over them):
    vLLM's data parallelism with expert parallelism (--data-parallel-size ep --enable-expert-parallel),
    --max-num-seqs per rank."""
    return (f"vllm serve {MODEL} --tensor-parallel-size {tp} --pipeline-parallel-size {pp}"
            + (f" --data-parallel-size {ep} --enable-expert-parallel" if ep > 1 else "")
            + f" --max-num-seqs {max_seqs} --max-num-batched-tokens {step_tokens} --enable-chunked-prefill" + extra)


def _sglang(tp: int, pp: int, ep: int, max_seqs: int, step_tokens: int, extra: str = "") -> str:
    """One SGLang server: with ep > 1, data-parallel attention over the ep ranks (--enable-dp-attention,
    --dp-size ep) and the experts over all tp·ep GPUs (--tp-size tp·ep, --ep-size ep)."""
    par = (f"--tp-size {tp * ep} --ep-size {ep} --dp-size {ep} --enable-dp-attention" if ep > 1
           else f"--tp-size {tp}")
    return (f"python -m sglang.launch_server --model-path {MODEL} {par} --pp-size {pp}"
            f" --max-running-requests {max_seqs} --chunked-prefill-size {step_tokens}" + extra)


def benchmark(traffic: S.Traffic, rate: float, policy: S.Policy) -> str:
    """``vllm bench serve`` replaying ``traffic`` at ``rate`` requests/s: the random dataset at the mean
    lengths (a uniform spread when the traffic gives ``*_range``, vLLM's random dataset), Poisson or gamma
    gaps (``--burstiness`` is vLLM's gamma shape, 1/CV²), as many prompts as ccost measures, every output
    to its length (``--ignore-eos``), the percentiles ccost reports and the SLOs as goodput limits. A
    traffic given by a ``trace`` is replayed at the trace's mean lengths (the random dataset has no file of
    token counts to draw from)."""
    I, O = traffic.input_tokens, traffic.output_tokens
    if traffic.trace_data is not None:
        I, O = round(traffic.trace_data.mean_input), round(traffic.trace_data.mean_output)
    parts = [f"vllm bench serve --model {MODEL} --dataset-name random",
             f"--random-input-len {I if I is not None else '?'}", f"--random-output-len {O if O is not None else '?'}"]
    ranges = {r for r in (traffic.input_range, traffic.output_range) if r is not None}
    if ranges:
        parts.append(f"--random-range-ratio {_g(max(ranges))}")
    parts += [f"--request-rate {_g(round(rate, 4))}"]
    if traffic.burstiness != 1.0:
        parts.append(f"--burstiness {_g(round(1 / traffic.burstiness ** 2, 4))}")
    parts += [f"--num-prompts {traffic.requests}", "--ignore-eos", f"--percentile-metrics {METRICS}",
              f"--metric-percentiles {PERCENTILES}"]
    goodput = [f"{k}:{_g(round(v * 1e3, 3))}" for k, v in (("ttft", policy.max_ttft), ("tpot", policy.max_tpot),
                                                            ("e2el", policy.max_e2e)) if v is not None]
    if goodput:
        parts.append("--goodput " + " ".join(goodput))
    return " ".join(parts)


def settings(fleet: dict, traffic: S.Traffic, rate: float, policy: S.Policy) -> dict[str, Any]:
    """The launch settings of ``fleet`` (a capacity search's fleet record, or ``plan_fleet``'s): per engine
    kind its role, count, parallel degrees and limits, the vLLM and SGLang command of each, and the
    benchmark at ``rate``."""
    tp, pp, ep, dp = fleet["tp"], fleet["pp"], fleet["ep"], fleet["dp"]
    ms, st = fleet["max_seqs"], fleet["step_tokens"]
    pw, dw, ptp = fleet.get("prefill_workers") or 0, fleet.get("decode_workers") or 0, fleet.get("prefill_tp") or 0
    if not pw:
        engines = [{"role": "serve", "count": dp, "tp": tp, "pp": pp, "ep": ep, "max_seqs": ms, "step_tokens": st,
                    "vllm": _vllm(tp, pp, ep, ms, st), "sglang": _sglang(tp, pp, ep, ms, st)}]
        note = ("one engine" if dp == 1 else
                f"{dp} engines behind a round-robin router (vLLM's --data-parallel-size or SGLang's --dp-size on "
                "one host does the same)")
    else:
        nixl = " --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"
        p_tp = ptp or tp
        engines = [
            {"role": "prefill", "count": dp * pw, "tp": p_tp, "pp": pp, "ep": ep, "max_seqs": ms, "step_tokens": st,
             "vllm": _vllm(p_tp, pp, ep, ms, st, nixl),
             "sglang": _sglang(p_tp, pp, ep, ms, st, " --disaggregation-mode prefill")},
            {"role": "decode", "count": dp * dw, "tp": tp, "pp": pp, "ep": ep, "max_seqs": ms, "step_tokens": st,
             "vllm": _vllm(tp, pp, ep, ms, st, nixl),
             "sglang": _sglang(tp, pp, ep, ms, st, " --disaggregation-mode decode")}]
        note = (f"{dp * pw} prefill and {dp * dw} decode engines; a proxy sends each request to a prefill engine "
                "and its KV cache to a decode engine (vLLM: the disaggregated-prefill proxy; SGLang: its router "
                "with --pd-disaggregation)")
    return {"engines": engines, "note": note, "benchmark": benchmark(traffic, rate, policy),
            "model": "set MODEL to the checkpoint (a Hugging Face id or a path) of the spec's model"}


def plan_fleet(plan: S.Plan) -> dict[str, Any]:
    """An online plan's engines as a fleet record (what ``settings`` reads)."""
    return {"tp": plan.tp, "pp": plan.pp, "ep": plan.ep, "dp": plan.dp, "max_seqs": plan.max_seqs,
            "step_tokens": plan.step_tokens, "prefill_workers": plan.prefill_workers or 0,
            "decode_workers": plan.decode_workers or 0, "prefill_tp": plan.prefill_tp or 0}


def text(title: str, s: dict[str, Any]) -> str:
    """The launch settings as ``ccost export`` prints them."""
    out = [title, f"  {s['note']}; {s['model']}"]
    for e in s["engines"]:
        out += ["", f"  {e['role']} engines: {e['count']} × (tp {e['tp']}, pp {e['pp']}, ep {e['ep']}; "
                    f"{e['max_seqs']} running requests, {e['step_tokens']:,} tokens a step)",
                f"    vLLM:   {e['vllm']}", f"    SGLang: {e['sglang']}"]
    out += ["", "  replay the demand (then compare the percentiles, and feed the engine's step times back with "
                "`ccost calibrate --steps`):", f"    {s['benchmark']}"]
    return "\n".join(out) + "\n"
