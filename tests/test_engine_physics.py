"""The physics by engine and GPU, by hand: the decode-attention curve over an FP8 KV cache and its
streams term, the per-engine kernels block and its GEMM fallback, the FP8 GEMM table the reduction leaves
out, and how the added serving rows of bench/validation turn a measured run into a plan."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ccost.model import kernels, lower
from ccost.calibrate import kernels as K
from ccost.check import check_text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import aic_silicon_rows  # noqa: E402

SPEC = '''import "std/gpus.ccost"
import "std/links.ccost"
import "std/models.ccost"
import "std/clusters.ccost"
import "std/stacks.ccost"
model m8 "Llama-3-8B, FP8 KV cache" extends llama3_8b { kv_cache = fp8 }
plan bf { model = llama3_8b; cluster = hgx_h200; phase = decode; batch = 64; seq = 4096; tp = 1; stack = vllm }
plan f8 extends bf { model = m8 }
plan trt extends bf { stack = trtllm }
'''


def _spec():
    return check_text(SPEC, "/nowhere/p.ccost").spec


def test_decode_attention_streams_term_by_hand():
    # 64 sequences × 8 KV heads = 512 streams, P½ = 78: the KV read runs at 512/590 of e_kv's bandwidth.
    # 1 GB at 4.8 TB/s × 80 % = 260.4 µs, / (512/590) = 300.1 µs; plus one kernel: 10 µs + 2 ns × 64 × 32
    t, t_mem = kernels.decode_attention_time(1e9, 64 * 32, 1, 4.8e12, 0.80, 2e-9, 10e-6, 512, 78)
    assert t_mem == pytest.approx(1e9 / (4.8e12 * 0.80) * 590 / 512, rel=1e-12)
    assert t_mem * 1e6 == pytest.approx(300.08, abs=0.01)
    assert t == pytest.approx(10e-6 + 2e-9 * 64 * 32 + t_mem, rel=1e-12)
    # no streams (a serve step's prefill alone reads no KV cache): at least one stream, no division by zero
    t0, m0 = kernels.decode_attention_time(0.0, 0.0, 1, 4.8e12, 0.80, 2e-9, 10e-6, 0.0, 78)
    assert (t0, m0) == (10e-6, 0.0)


def test_an_fp8_kv_cache_reads_on_its_own_curve():
    spec = _spec()
    kern = lower.kernels_for(spec.plans["f8"].cluster.gpu, spec.plans["f8"].stack)
    assert kern.name == "h200_vllm" and kern.fp8_decode_attention_hbm_efficiency is not None
    _, xb = lower.prepare(spec.plans["bf"], spec.policy)
    _, x8 = lower.prepare(spec.plans["f8"], spec.policy)
    assert (xb.a_ew, xb.a_half) == (kern.decode_attention_hbm_efficiency, kern.decode_attention_half_streams)
    assert (x8.a_ew, x8.a_half) == (kern.fp8_decode_attention_hbm_efficiency, kern.fp8_decode_attention_half_streams)
    # the measured FP8 path of vLLM's FlashAttention-3 reaches less of the bandwidth than its BF16 path
    assert x8.a_ew < xb.a_ew


def test_each_engine_prices_on_its_own_block_and_borrows_a_missing_gemm_curve():
    spec = _spec()
    plan = spec.plans["trt"]
    gpu = plan.cluster.gpu
    assert [k.name for k in gpu.kernels] == ["h200_vllm", "h200_trtllm", "h200_sglang", "h200_flash2", "h200_cudnn"]
    trt = lower.kernels_for(gpu, plan.stack)
    assert trt.name == "h200_trtllm"
    # TensorRT-LLM's per-tensor FP8 GEMM table was left out on H200 (slower than its own BF16 table): an FP8
    # checkpoint's GEMMs come from the GPU's first block with an FP8 curve, vLLM's; attention stays TRT-LLM's
    assert trt.gemm(True) is None and trt.gemm(False) is not None
    fp8 = replace(plan, model=replace(plan.model, weights="fp8"))
    _, x = lower.prepare(fp8, spec.policy)
    vllm = gpu.kernels[0]
    assert (x.g_eta, x.g_half, x.g_ew, x.g_t0, x.g_nh, x.g_kh) == vllm.gemm(True) and x.R_gpeak == vllm.fp8_flops
    assert x.a_ew == trt.decode_attention_hbm_efficiency


def test_an_fp8_table_slower_than_bf16_at_decode_shapes_is_left_out():
    m = np.array([1.0, 16.0, 64.0, 1024.0])
    n = k = np.full(4, 4096.0)
    bf16 = (m, n, k, np.array([10e-6, 11e-6, 12e-6, 50e-6]), "bf16 kernel")
    # FP8 rows at M <= 64 take 13-15 µs against 10-12: the median ratio is above 1 (an unfused path)
    slow = (m, n, k, np.array([13e-6, 14e-6, 15e-6, 30e-6]), "fp8 kernel")
    fast = (m, n, k, np.array([7e-6, 8e-6, 9e-6, 30e-6]), "fp8 kernel")
    assert K._slower_than_bf16(slow, bf16)
    assert not K._slower_than_bf16(fast, bf16)
    assert not K._slower_than_bf16(slow, None)


def test_an_inferencemax_run_becomes_its_mean_lengths_and_setup():
    # benchmark_serving's random lengths are uniform in [int(0.8·L), L]: mean (819 + 1,024)/2 = 921.5 → 922,
    # (6,553 + 8,192)/2 = 7,372.5 → 7,373
    imx = {"version": "2025-10", "engine": "vllm", "model": "meta-llama/Llama-3.1-70B", "prec": "fp8"}
    gap = {"version": "0.12.0", "engine": "vllm", "model": "nvidia/Llama-3.1-8B-Instruct-FP8", "prec": "fp8"}
    assert aic_silicon_rows.setup(imx) == "imx" and aic_silicon_rows.setup(gap) == "gap"
    assert aic_silicon_rows.mean_length(imx, 1024) == 922 and aic_silicon_rows.mean_length(imx, 8192) == 7373
    assert aic_silicon_rows.mean_length(gap, 8000) == 8000
    assert aic_silicon_rows.STACKS["imx", "vllm"] == "vllm"  # asynchronous scheduling was on
    assert aic_silicon_rows.STACKS["gap", "vllm"] == "vllm_v1"
    assert aic_silicon_rows._model(imx) == "llama31_70b_fp8_kv8" and aic_silicon_rows._model(gap) == "llama31_8b_fp8_kv8"


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                    reason="the silicon table ships in the optional extra kernels: pip install -e '.[kernels]' in a checkout")
def test_the_committed_serving_rows_and_plans_are_what_the_table_gives():
    sel = aic_silicon_rows.select(aic_silicon_rows._csv_path(None))
    assert len(sel) == 62
    committed = (REPO / "bench" / "validation" / "serving.ccost").read_text()
    assert aic_silicon_rows.plans_ccost(sel) in committed
    rows = (REPO / "bench" / "validation" / "rows.yaml").read_text()
    assert all(line in rows for line in aic_silicon_rows.rows_yaml(sel).splitlines())


TRAIN_SPEC = '''import "std/gpus.ccost"
import "std/links.ccost"
import "std/models.ccost"
import "std/clusters.ccost"
import "std/stacks.ccost"
plan lf { model = llama3_8b; cluster = hgx_h100; phase = train; seq = 2048; batch = 8; dp = 8; fsdp = true
          stack = llmfoundry }
plan mc extends lf { stack = megatron_core }
plan lf_a100 extends lf { cluster = dgx_a100 }
'''


def test_a_training_framework_prices_attention_on_the_kernels_it_runs():
    from ccost.model import phases

    spec = check_text(TRAIN_SPEC, "/nowhere/t.ccost").spec
    # llm-foundry links FlashAttention-2: on the H100 its published curve (std/gpus.ccost h100_flash2, the
    # FlashAttention-3 paper's FA2 series: 35.4 %, S½ 403), not the vLLM table's FlashAttention-3 (66.8 %)
    _, x = lower.prepare(spec.plans["lf"], spec.policy)
    assert (x.p_eta, x.p_half) == (pytest.approx(0.354), 403) and x.R_apeak == pytest.approx(989.4e12)
    # the GEMMs stay on the engine's (first) block: cuBLAS, as measured under vLLM
    assert (x.g_eta, x.g_half) == spec.kernels["h100_vllm"].gemm(False)[:2]
    # by hand: 989.4 × 0.354 × 2048/(2048 + 403) × 0.77 (llmfoundry's framework share) = 225.3 TFLOP/s
    prog = phases.lower_plan(spec.plans["lf"], spec.policy, derivation=True)
    r_attn = next(v for v in _values(prog) if v.name == "R_attn,train")
    assert spec.stacks["llmfoundry"].framework_efficiency == pytest.approx(0.77)
    assert float(r_attn.value) / 1e12 == pytest.approx(225.35, abs=0.01)
    # Megatron-Core with Transformer Engine: cuDNN's fused attention (56.7 %, S½ 387)
    _, xm = lower.prepare(spec.plans["mc"], spec.policy)
    assert (xm.p_eta, xm.p_half) == (pytest.approx(0.567), 387)
    # on the A100 no FlashAttention-2 block: the engine's table is FlashAttention-2's already
    _, xa = lower.prepare(spec.plans["lf_a100"], spec.policy)
    a100 = spec.kernels["a100_vllm"]
    assert (xa.p_eta, xa.p_half) == (a100.prefill_attention_efficiency, a100.prefill_attention_half_tokens)
    # serving is untouched: a decode plan's block and curves are the engine's
    dec = replace(spec.plans["lf"], phase="decode", stack=spec.stacks["vllm"], fsdp=False, dp=1)
    static, _ = lower.prepare(dec, spec.policy)
    assert static.kernels == "h100_vllm"


def _values(prog):
    """Every named derivation value reachable from a training program's terms."""
    seen, out, todo = set(), [], [prog.train.r_gemm, *prog.train.groups, prog.train.step]
    while todo:
        v = todo.pop()
        if id(v) in seen or not hasattr(v, "name"):
            continue
        seen.add(id(v))
        out.append(v)
        todo.extend(a for a in (getattr(v, "args", ()) or ()) if hasattr(a, "name"))
    return out
