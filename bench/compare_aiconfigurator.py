"""ccost against AIConfigurator's own estimates, on the same configurations (an independent reference).

    python bench/compare_aiconfigurator.py [--quick]

Needs the optional extra (pip install 'ccost[kernels]' aiconfigurator==0.12.0); runs offline. For each
configuration (model, GPU, TP, batch, context) it asks AIConfigurator's `cli_estimate` for a static decode
step (`static_gen`: TPOT at a batch of B sequences, ISL prompt tokens, OSL output tokens) or a static prefill
(`static_ctx`: TTFT of B prompts of ISL tokens), both under its vLLM tables, and prices the same plan with
ccost under the bundled `serving_default` stack (decode at the mean context ISL + OSL/2; prefill of ISL
tokens). It prints, per row, AIConfigurator's time, ccost's whole step and ccost's GPU work (the step without
the stack's host time T_host, which AIConfigurator's static estimates do not model the same way), and the
median and worst factor of each. AIConfigurator's estimates come from the same kernel tables ccost's curves
are reduced from, composed by its own op-level model: agreement checks the composition, not the data.
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import sys
import tempfile
from pathlib import Path

# (label, AIConfigurator model, its system, ccost model, ccost cluster, tp) and the batches to run
MODELS = [
    ("8B H100", "meta-llama/Meta-Llama-3.1-8B", "h100_sxm", "llama3_8b", "hgx_h100", 1),
    ("70B H100 TP8", "meta-llama/Meta-Llama-3.1-70B", "h100_sxm", "llama3_70b", "hgx_h100", 8),
    ("8B A100", "meta-llama/Meta-Llama-3.1-8B", "a100_sxm", "llama3_8b", "dgx_a100", 1),
    ("70B A100 TP8", "meta-llama/Meta-Llama-3.1-70B", "a100_sxm", "llama3_70b", "dgx_a100", 8),
    ("8B H200", "meta-llama/Meta-Llama-3.1-8B", "h200_sxm", "llama3_8b", "hgx_h200", 1),
]
DECODE_BATCHES = (1, 16, 64, 256)
PREFILL_ISL = (128, 2048)
ISL, OSL = 1024, 128


def ccost_times(model: str, cluster: str, tp: int, phase: str, batch: int, seq: int) -> tuple[float, float]:
    """(step, GPU work = step − host time) of one plan under the bundled default stack."""
    from ccost import check, evaluate

    text = (f'import "std/clusters.ccost"\nimport "std/models.ccost"\nimport "std/stacks.ccost"\n'
            "stack gpu_only extends serving_default { step_overhead = 0 s; layer_overhead = 0 s; seq_overhead = 0 s }\n"
            f"plan p {{ model = {model}; cluster = {cluster}; phase = {phase}; batch = {batch}; seq = {seq}; "
            f"tp = {tp} }}\nplan g extends p {{ stack = gpu_only }}\n")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.ccost"
        path.write_text(text)
        spec, _ = check.load_spec(str(path))
        res = evaluate.evaluate(spec)
    key = "latency_s" if phase == "prefill" else "step_time_s"
    return res.plans["p"].doc[key], res.plans["g"].doc[key]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two models only")
    args = ap.parse_args()
    try:
        logging.disable(logging.WARNING)
        from aiconfigurator.cli.api import cli_estimate
    except ImportError:
        print("needs AIConfigurator: pip install 'ccost[kernels]' aiconfigurator==0.12.0", file=sys.stderr)
        return 2
    models = MODELS[:2] if args.quick else MODELS
    rows = []
    print(f"{'configuration':34} {'AIC':>10} {'ccost step':>11} {'ratio':>6} {'ccost GPU':>10} {'ratio':>6}")
    for label, hf, system, model, cluster, tp in models:
        cases = [("decode", b, ISL) for b in DECODE_BATCHES] + [("prefill", 1, s) for s in PREFILL_ISL]
        for phase, batch, isl in cases:
            mode = "static_gen" if phase == "decode" else "static_ctx"
            r = cli_estimate(hf, system, mode=mode, backend_name="vllm", isl=isl, osl=OSL if phase == "decode" else 2,
                             batch_size=batch, tp_size=tp)
            aic = (r.tpot if phase == "decode" else r.ttft) / 1e3
            seq = isl + OSL // 2 if phase == "decode" else isl
            step, gpu = ccost_times(model, cluster, tp, phase, batch, seq)
            name = f"{label} {phase} B={batch} S={seq}"
            rows.append((name, phase, aic, step, gpu))
            print(f"{name:34} {aic * 1e3:8.3f}ms {step * 1e3:9.3f}ms {step / aic:6.2f} {gpu * 1e3:8.3f}ms {gpu / aic:6.2f}")
    for phase in ("decode", "prefill"):
        sel = [r for r in rows if r[1] == phase]
        for what, k in (("whole step", 3), ("GPU work", 4)):
            f = [math.exp(abs(math.log(r[k] / r[2]))) for r in sel]
            worst = max(sel, key=lambda r: abs(math.log(r[k] / r[2])))
            ratio = statistics.median(r[k] / r[2] for r in sel)
            print(f"{phase:8} {what:10} {len(sel)} rows: median factor {statistics.median(f):.2f}x, worst "
                  f"{max(f):.2f}x ({worst[0]}), median ratio ccost/AIC {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
