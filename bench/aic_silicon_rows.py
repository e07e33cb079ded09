"""Published serving rows from AIConfigurator's silicon table, for bench/validation.

    python bench/aic_silicon_rows.py [--csv PATH] [--check]

NVIDIA's AIConfigurator ships, in the PyPI package ``aiconfigurator-core`` (Apache-2.0), a table of
end-to-end serving runs on real GPUs: ``aiconfigurator_core/systems/silicon_sample.csv`` (version 0.12.0
read here), one row per run: engine and version, model, GPU, precision, input and output length (isl, osl),
concurrency, TP, and the TTFT and TPOT in ms. They are measurements, not AIConfigurator's estimates: the
columns are named ``silicon_*``, the project's accuracy-regression tools (``tools/accuracy_regression_testing``
in github.com/ai-dynamo/aiconfigurator) compare the estimator's predictions against them ("closer to
silicon"), and the pipeline that collects them fills them from a benchmark's ``mean_ttft`` and ``mean_tpot``.
The table does not say which client measured each run; its ``silicon_data_source`` column names where the run
came from. Two kinds are used here (SELECTION's ``setup``):

* ``imx``: the Llama-3.1-70B FP8 runs dated 2025-10-29 (source file ``2026-04-06.csv``, no engine version).
  Their model, lengths (1,024 in / 8,192 out), concurrencies (4-128) and date match SemiAnalysis's
  InferenceMAX sweep of that month, whose scripts (github.com/SemiAnalysisAI/InferenceX,
  benchmarks/70b_fp8_h100_slurm.sh, 70b_fp8_h200_slurm.sh, 70b_fp8_h200_trt_slurm.sh) start vLLM with
  ``async-scheduling: true`` and ``kv-cache-dtype: fp8`` and TensorRT-LLM with an FP8 KV cache, and measure
  with ``benchmark_serving.py --dataset-name random --random-range-ratio 0.8 --max-concurrency C
  --num-prompts 10·C --ignore-eos`` (mean TPOT), whose random lengths are uniform in [0.8·L, L] (kimbochen/
  bench_serving, ``sample_random_requests``): a mean of 0.9·L. The plans take that setup: the vLLM runs on the
  asynchronous vLLM profile (``vllm``), an FP8 KV cache, and the mean lengths 0.9·isl and 0.9·osl.
* ``gap``: runs of vLLM 0.12.0, SGLang 0.5.x and TensorRT-LLM 1.0.0rc3 whose source is a file of NVIDIA's
  AIConfigurator gap analysis (``aic-auto-gap-analysis/data/<gpu>/<engine>/<version>/<model>.csv``); the
  client and its settings are not published. The plans take each engine's defaults at that version (vLLM
  0.12: synchronous scheduling, ``vllm_v1``; SGLang and TensorRT-LLM: their overlap schedulers), a BF16 KV
  cache (but see KV8_CHECKPOINTS) and the nominal lengths.

Only agg runs (one engine, continuous batching) are used. This script picks a fixed set of runs (SELECTION
below: dense models, decode-dominated workloads, a spread of engines, GPUs, sizes, TP degrees and
concurrencies) and prints them as rows of ``bench/validation/rows.yaml`` (metric ``serve_tpot``: ccost's
serve-plan TPOT against the measured TPOT) and as plans of ``bench/validation/serving.ccost``. The rows and
plans are committed; ``--check`` rereads the table and fails when a committed figure differs from it. The
table is not needed to run ``bench/validate.py``: it is only where the figures come from.

How a run becomes a plan: a ``phase = serve`` plan with concurrency = the run's concurrency, input_tokens and
output_tokens as above, tp = the run's TP, one engine per plan (``dp`` 1), the whole prompt in one step (no
chunk_tokens: every engine's default token budget, 8,192 or more, holds these prompts). Precision ``fp8``
means FP8 weights (the GEMMs at the GPU's FP8 rate); runs with no precision are the BF16 checkpoints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = HERE / "validation" / "rows.yaml"

#: (engine, version label, model, system, precision, isl, osl, [(tp, concurrency), ...])
SELECTION = [
    ("vllm", "2025-10", "meta-llama/Llama-3.1-70B", "h100_sxm", "fp8", 1024, 8192,
     [(2, 4), (2, 16), (4, 4), (4, 16), (4, 64), (8, 4), (8, 16), (8, 64)]),
    ("vllm", "2025-10", "meta-llama/Llama-3.1-70B", "h200_sxm", "fp8", 1024, 8192,
     [(1, 4), (1, 16), (1, 64), (2, 4), (2, 32), (4, 4), (4, 32), (8, 4), (8, 16), (8, 64)]),
    ("vllm", "0.12.0", "nvidia/Llama-3.1-8B-Instruct-FP8", "h200_sxm", "fp8", 4000, 1000, [(1, 128)]),
    ("vllm", "0.12.0", "nvidia/Llama-3.1-8B-Instruct-FP8", "h200_sxm", "fp8", 4000, 2000, [(1, 128)]),
    ("vllm", "0.12.0", "nvidia/Llama-3.1-8B-Instruct-FP8", "h200_sxm", "fp8", 8000, 2000, [(1, 80)]),
    ("vllm", "0.12.0", "nvidia/Llama-3.1-8B-Instruct-FP8", "h200_sxm", "fp8", 8000, 1000, [(1, 64), (2, 112)]),
    ("trtllm", "2025-10", "meta-llama/Llama-3.1-70B", "h200_sxm", "fp8", 1024, 8192,
     [(1, 4), (1, 16), (1, 64), (2, 4), (2, 32), (2, 128), (4, 4), (4, 16), (4, 128), (8, 4), (8, 16),
      (8, 128)]),
    ("trtllm", "1.0.0rc3", "meta-llama/Llama-3.1-8B-Instruct", "h100_sxm", "bf16", 1024, 512,
     [(1, 8), (1, 32), (1, 128), (2, 8), (2, 64), (4, 8), (4, 64), (8, 8), (8, 32), (8, 128)]),
    ("trtllm", "1.0.0rc3", "Qwen/Qwen3-32B", "h100_sxm", "fp8", 1024, 512, [(1, 8), (1, 32), (1, 128)]),
    ("sglang", "0.5.1.post1", "Qwen/Qwen3-32B", "h100_sxm", "bf16", 1024, 512,
     [(2, 16), (2, 64), (2, 128), (4, 16), (4, 64), (4, 128), (8, 16), (8, 64), (8, 128)]),
    ("sglang", "0.5.6.post2", "meta-llama/Llama-3.1-8B-Instruct", "h200_sxm", "fp8", 1000, 2000,
     [(1, 256), (2, 512)]),
    ("sglang", "0.5.6.post2", "meta-llama/Llama-3.1-8B-Instruct", "h200_sxm", "fp8", 1000, 1000, [(1, 352)]),
    ("sglang", "0.5.6.post2", "meta-llama/Llama-3.1-8B-Instruct", "h200_sxm", "fp8", 4000, 2000, [(1, 128)]),
    ("sglang", "0.5.6.post2", "meta-llama/Llama-3.1-8B-Instruct", "h200_sxm", "fp8", 8000, 2000, [(1, 80)]),
]

MODELS = {  # the table's model -> (ccost model in serving.ccost, weights fp8?)
    "meta-llama/Llama-3.1-70B": "llama31_70b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama31_8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama31_8b",
    "Qwen/Qwen3-32B": "qwen3_32b",
}
CLUSTERS = {"h100_sxm": "hgx_h100", "h200_sxm": "hgx_h200"}
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
#: the std stack profile of each engine as the run's setup ran it (the module docstring): the InferenceMAX
#: vLLM runs had asynchronous scheduling switched on; vLLM 0.12 (the gap-analysis runs) schedules synchronously
#: by default; SGLang and TensorRT-LLM run their overlap schedulers by default
STACKS = {("imx", "vllm"): "vllm", ("gap", "vllm"): "vllm_v1", ("imx", "trtllm"): "trtllm",
          ("gap", "trtllm"): "trtllm", ("gap", "sglang"): "sglang"}
#: benchmark_serving's --random-range-ratio in the InferenceMAX scripts: lengths uniform in [int(0.8·L), L]
RANGE_RATIO = 0.8


#: checkpoints that declare an FP8 KV cache (ModelOpt's hf_quant_config.json: "kv_cache_quant_algo": "FP8"),
#: which vLLM's `--kv-cache-dtype auto` resolves to FP8 (vllm/utils/torch_utils.py,
#: resolve_kv_cache_dtype_string). The table's own figures agree: on one H200 at 8,000 in / 2,000 out and 80
#: requests, vLLM 0.12 on this checkpoint took 23.8 ms a token, SGLang 0.5.6 on Meta's checkpoint quantised
#: online (BF16 KV) 33.5 ms; the KV read, most of these steps, is half as large in FP8.
KV8_CHECKPOINTS = {"nvidia/Llama-3.1-8B-Instruct-FP8"}


def setup(r: dict) -> str:
    """imx: a run dated but without an engine version (the InferenceMAX sweep); gap: the gap-analysis runs."""
    return "imx" if r["version"].startswith("20") else "gap"


def mean_length(r: dict, n: int) -> int:
    """The mean request length of the run's client: the InferenceMAX runs draw lengths uniformly from
    [int(0.8·n), n] (mean rounded to a whole token); the gap-analysis runs' client is not published (n)."""
    return int((int(n * RANGE_RATIO) + n) / 2 + 0.5) if setup(r) == "imx" else n


def _csv_path(given: str | None) -> Path:
    if given:
        return Path(given)
    try:
        import aiconfigurator_core  # noqa: F401 (optional: pip install aiconfigurator-core)
    except ImportError:
        raise SystemExit("aiconfigurator-core is not installed: pip install aiconfigurator-core==0.12.0, "
                         "or pass --csv PATH of systems/silicon_sample.csv") from None
    return Path(aiconfigurator_core.__file__).parent / "systems" / "silicon_sample.csv"


def _version_matches(row: dict, label: str) -> bool:
    v = (row.get("backend_version") or "").strip()
    if label.startswith("20"):  # runs the table dates but gives no version: measured= in the source
        return not v and f"measured={label}" in row.get("silicon_data_source", "")
    return v == label


def _precision(row: dict) -> str:
    return (row.get("precision") or "").strip() or "bf16"


def select(csv_path: Path) -> list[dict]:
    import csv

    with csv_path.open(newline="", encoding="utf-8") as fh:
        table = [r for r in csv.DictReader(fh) if r["mode"] == "agg"]
    out = []
    for engine, version, model, system, prec, isl, osl, points in SELECTION:
        for tp, conc in points:
            hits = [r for r in table if r["backend"] == engine and _version_matches(r, version)
                    and r["model_path"] == model and r["system"] == system and _precision(r) == prec
                    and int(float(r["isl"])) == isl and int(float(r["osl"])) == osl
                    and int(float(r["tp_size"])) == tp and int(float(r["batch_size"])) == conc
                    and int(float(r["pp_size"] or 1)) == 1]
            if len(hits) != 1:
                raise SystemExit(f"{engine} {version} {model} {system} {prec} {isl}/{osl} tp{tp} c{conc}: "
                                 f"{len(hits)} runs in the table, expected 1")
            out.append(dict(engine=engine, version=version, model=model, system=system, prec=prec, isl=isl,
                            osl=osl, tp=tp, conc=conc, id=hits[0]["id"], tpot_ms=float(hits[0]["silicon_tpot_ms"])))
    return out


def _plan_name(r: dict) -> str:
    size = {"llama31_70b": "70b", "llama31_8b": "8b", "qwen3_32b": "q32b"}[MODELS[r["model"]]]
    gpu = r["system"].split("_")[0]
    return f"aic_{r['engine']}_{size}_{r['prec']}_{gpu}_{r['isl']}x{r['osl']}_tp{r['tp']}_c{r['conc']}"


def _model(r: dict) -> str:
    base = MODELS[r["model"]]
    base = f"{base}_fp8" if r["prec"] == "fp8" else base
    return f"{base}_kv8" if setup(r) == "imx" or r["model"] in KV8_CHECKPOINTS else base


def rows_yaml(sel: list[dict]) -> str:
    lines = []
    for r in sel:
        name = _plan_name(r)
        lines.append(f"  - {{id: {_row_id(r)}, stack: {r['engine']}, version: \"{r['version']}\", set: added, "
                     f"source: {'AIC-IMX' if setup(r) == 'imx' else 'AIC-GAP'}, "
                     f"spec: serving.ccost, plan: {name}, metric: serve_tpot, measured: {r['tpot_ms'] / 1e3:.6g}, "
                     f"as_published: \"TPOT {r['tpot_ms']:.3f} ms ({r['id']})\"}}")
    return "\n".join(lines)


def _row_id(r: dict) -> str:
    return "AIC-" + _plan_name(r)[4:].replace("_", "-")


def plans_ccost(sel: list[dict]) -> str:
    out = []
    for r in sel:
        name = _plan_name(r)
        out.append(f'plan {name} "{ENGINE_NAMES[r["engine"]]} {r["version"]} {r["model"]} {r["prec"]} '
                   f'{r["system"]} TP{r["tp"]}, {r["conc"]} requests of {r["isl"]}/{r["osl"]}" {{\n'
                   f"  model = {_model(r)}; cluster = {CLUSTERS[r['system']]}; "
                   f"stack = {STACKS[setup(r), r['engine']]}\n"
                   f"  phase = serve; concurrency = {r['conc']}; input_tokens = {mean_length(r, r['isl'])}; "
                   f"output_tokens = {mean_length(r, r['osl'])}; tp = {r['tp']}\n}}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", help="systems/silicon_sample.csv of aiconfigurator-core (default: the installed one)")
    ap.add_argument("--check", action="store_true", help="compare the committed rows with the table")
    args = ap.parse_args(argv)
    sel = select(_csv_path(args.csv))
    if not args.check:
        print(f"# {len(sel)} rows\n{rows_yaml(sel)}\n\n{plans_ccost(sel)}")
        return 0
    import yaml

    committed = {r["id"]: r for r in yaml.safe_load(ROWS.read_text(encoding="utf-8"))["rows"]}
    bad = 0
    for r in sel:
        c = committed.get(_row_id(r))
        want = float(f"{r['tpot_ms'] / 1e3:.6g}")
        if c is None or abs(float(c["measured"]) - want) > 1e-12:
            print(f"{_row_id(r)}: committed {None if c is None else c['measured']}, table {want}")
            bad += 1
    print(f"{len(sel) - bad} of {len(sel)} rows agree with the table")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
