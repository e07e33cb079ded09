"""Measured kernel curves (docs/kernels.md): the reduction, the bundled blocks, and their use in the model."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ccost import check, evaluate
from ccost.model import kernels, lower
from ccost.calibrate import kernels as K
from ccost.cli import main

REPO = Path(__file__).resolve().parents[1]
EXCERPT = REPO / "tests" / "data" / "aic_h100_vllm_gemm_excerpt.csv"
H100_PEAK, H100_BW = 989.4e12, 3.35e12  # std gpu h100 [KH100]


def _std():
    spec, _ = check.load_spec(str(REPO / "specs" / "std" / "clusters.ccost"))
    return spec


def _excerpt():
    rows = [ln.split(",") for ln in EXCERPT.read_text().splitlines() if ln and ln[0].isdigit()]
    return np.array(rows, dtype=float).T


def test_the_fit_recovers_a_curve_made_with_known_parameters():
    """Times made by the GEMM form itself (η 80 %, M½ 100, e_w 85 %, t₀ 5 µs, N½ 1,500, K½ 200) come back to
    0.1 %: the weights' widths (N and K from 1,024 to 16,384 each) separate N½ from K½ and both from η."""
    grid = [(m, n, k) for m in (1, 8, 64, 128, 256, 1024, 4096, 16384) for n in (1024, 4096, 16384)
            for k in (1024, 4096, 16384)]
    m, n, k = (np.array(v, dtype=float) for v in zip(*grid))
    want = (0.80, 100.0, 0.85, 5e-6, 1500.0, 200.0)
    t = K.gemm_predict(want, m, n, k, 2.0, H100_PEAK, H100_BW)
    c = K.fit_gemm(m, n, k, t, 2.0, H100_PEAK, H100_BW)
    assert (c.eta, c.half, c.e_w, c.t0, c.n_half, c.k_half) == pytest.approx(want, rel=1e-3)
    assert c.quality.median < 1e-6
    # the comments' ratios by N and by K at M >= 1,024: the widths present, each 1 for times the form made
    assert [v for v, _ in c.by_n] == [v for v, _ in c.by_k] == [1024, 4096, 16384]
    assert [r for _, r in c.by_n + c.by_k] == pytest.approx([1.0] * 6, abs=1e-4)
    # by hand, one compute-bound row: M = N = K = 4,096 takes t₀ + 2·(4096 + 100)·(4096 + 1500)·(4096 + 200)
    # / (989.4 T × 0.80) = 5 µs + 254.9 µs; the M-only form (N½ = K½ = 0) would say 5 µs + 177.9 µs
    row = (m == 4096) & (n == 4096) & (k == 4096)
    assert t[row][0] == pytest.approx(5e-6 + 2 * 4196 * 5596 * 4296 / (H100_PEAK * 0.80), rel=1e-12)
    assert t[row][0] * 1e6 == pytest.approx(259.9, abs=0.1)


def test_shape_factor_is_the_flop_weighted_harmonic_mean_of_the_gemms_rates():
    """σ of a layer is what makes F/(R·σ) the sum of its GEMMs' own FLOP times: two GEMMs, one at half the
    rate (N = N½) with 1 of 4 FLOPs, one at 3/4 (N = 3·N½) with 3 of 4: σ = 4/(1/½ + 3/¾) = 2/3."""
    from ccost.model import kernels as MK

    widths = ((1024.0, 1024.0), (3072.0, 1024.0))
    sigma = MK.shape_factor(widths, 1024.0, 0.0)
    flops = [n * k for n, k in widths]
    rates = [n / (n + 1024.0) for n, _ in widths]
    assert sigma == pytest.approx(sum(flops) / sum(f / r for f, r in zip(flops, rates)), rel=1e-12)
    assert sigma == pytest.approx(4 / (1 / 0.5 + 3 / 0.75), rel=1e-12)  # = 2/3
    assert MK.shape_factor(widths, 0.0, 0.0) == 1.0  # a curve without N½, K½: every shape at η


def _attention_table(groups, kernel="k"):
    """A decode-attention table: for each (query heads, KV heads) in ``groups``, batches 1..64 at contexts
    1k..8k, timed by the decode form with known parameters (e_kv 80 %, t₀ 10 µs, c 2 ns, P½ 2) for the
    grouped rows and at twice that for every other row (another kernel's regime)."""
    b, ctx, h, hk = (np.array(v, dtype=float) for v in zip(*[
        (bb, cc, hh, kk) for hh, kk in groups for bb in (1, 4, 16, 64) for cc in (1024, 4096, 8192)]))
    kv = 2 * b * ctx * hk * K.HEAD_DIM * 1.0
    t = K.decode_attention_predict((0.80, 10e-6, 2e-9, 2.0), kv, b * h, H100_BW, b * hk)
    grouped = (h / hk >= K.GQA_GROUPS[0]) & (h / hk <= K.GQA_GROUPS[1])
    t = np.where(grouped, t, 2 * t)
    n = len(b)
    cols = {"batch_size": b, "step": ctx - 1, "num_heads": h, "num_key_value_heads": hk,
            "head_dim": np.full(n, K.HEAD_DIM), "kv_cache_dtype": np.array(["fp8"] * n, dtype=object),
            "window_size": np.zeros(n), "beam_width": np.ones(n), "kernel_source": np.array([kernel] * n, dtype=object),
            "latency": t * 1e3}
    return K.Table(cols, "h100_sxm", "attention", "test", "0", "generation_attention_perf.parquet")


def test_decode_attention_is_fitted_on_grouped_query_rows_and_reports_the_multi_head_ones():
    """Rows of 1 (multi-head) and 64 query heads per KV head run at twice the grouped rows' time: the fit
    on the domain (2 to 16 per KV head) gives the grouped curve back, and the left-out multi-head rows are
    priced at half their time (their median ratio 0.5, by construction)."""
    t = _attention_table([(32, 32), (32, 8), (64, 8), (128, 8), (64, 1)])
    c, kernel = K.attention_rows(t, "fp8", K.GQA_GROUPS)
    assert sorted(set(c["num_heads"] / c["num_key_value_heads"])) == [4.0, 8.0, 16.0]
    curve = K.fit_decode_attention(*K.decode_columns(c), H100_BW, kv_bytes=1.0)
    assert (curve.e_kv, curve.t0, curve.c, curve.half) == pytest.approx((0.80, 10e-6, 2e-9, 2.0), rel=1e-3)
    n, ratio = K._mha_ratio(t, "fp8", kernel, curve, H100_BW, 1.0)
    assert n == 12 and ratio == pytest.approx(0.5, rel=1e-3)
    line = K._mha_line(replace(curve, mha=(n, ratio)))
    assert line == ["#     left out: its 12 multi-head rows (1 query head per KV head), which this curve prices "
                    "at a median 0.50× their time"]
    # multi-head rows timed only under another kernel are not this curve's to judge: no comment line
    other = _attention_table([(32, 32)], kernel="other")
    mixed = replace(t, columns={k: np.concatenate([v[(t.columns["num_heads"] != t.columns["num_key_value_heads"])],
                                                   other.columns[k]]) for k, v in t.columns.items()})
    assert K._mha_ratio(mixed, "fp8", kernel, curve, H100_BW, 1.0) is None
    # ... and where both kernels time them, this curve is judged on its own kernel's rows, even when the other
    # kernel has more of them
    more = _attention_table([(32, 32), (64, 64)], kernel="other")
    both = replace(t, columns={k: np.concatenate([v, more.columns[k]]) for k, v in t.columns.items()})
    assert K._mha_ratio(both, "fp8", kernel, curve, H100_BW, 1.0) == (12, pytest.approx(0.5, rel=1e-3))
    # without the domain, the slow rows drag the bandwidth share down
    c_all, _ = K.attention_rows(t, "fp8")
    every = K.fit_decode_attention(*K.decode_columns(c_all), H100_BW, kv_bytes=1.0)
    assert every.e_kv < 0.7


def test_the_reduction_reruns_on_the_committed_excerpt():
    """The reduction itself, on 60 rows of the H100 vLLM BF16 GEMM table (tests/data, with its attribution):
    it fits them within a median 7 %, and the bundled h100_vllm curve (fitted on the whole table's 18,870
    rows) predicts the same rows within a median 10 % — the committed block agrees with the data it came from.
    Hand check of one row: 7168 × 8192 at M = 1 is memory-bound, W = 7168 × 8192 × 2 B = 117.4 MB."""
    m, n, k, t = _excerpt()
    assert len(t) == 60
    c = K.fit_gemm(m, n, k, t, 2.0, H100_PEAK, H100_BW)
    assert c.quality.median < 0.07
    assert 0.7 < c.eta < 0.95 and 0.75 < c.e_w < 0.95
    std = _std().kernels["h100_vllm"]
    p = (std.gemm_efficiency, std.gemm_half_tokens, std.gemm_hbm_efficiency, std.gemm_latency, std.gemm_half_n,
         std.gemm_half_k)
    pred = K.gemm_predict(p, m, n, k, 2.0, std.flops, std.hbm_bandwidth)
    assert np.median(np.abs(pred / t - 1)) < 0.10
    row = (m == 1) & (n == 7168) & (k == 8192)
    # the weight, one token row's activation (8,192 elements) and its output (7,168), all BF16
    by_hand = std.gemm_latency + (7168 * 8192 + 8192 + 7168) * 2 / (3.35e12 * std.gemm_hbm_efficiency)
    assert pred[row][0] == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(t[row][0], rel=0.15)  # the table: 49.7 µs


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None
                    or importlib.util.find_spec("pyarrow") is None,
                    reason="the kernels extra is not installed (pip install -e '.[kernels]' in a checkout)")
def test_the_bundled_kernels_regenerate_from_the_tables(tmp_path):
    """`ccost calibrate --kernels` on the installed tables writes std/kernels.ccost byte for byte (the
    command is the one in the file's header)."""
    out = tmp_path / "kernels.ccost"
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["calibrate", "--kernels", "h100_sxm,h200_sxm,b200_sxm,a100_sxm", "--engine", "vllm,trtllm,sglang",
                     "-o", str(out)]) == 0
    committed = (REPO / "specs" / "std" / "kernels.ccost").read_text()
    assert out.read_text().replace(str(out), "specs/std/kernels.ccost") == committed


def test_without_the_extra_the_command_says_what_to_install(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "aiconfigurator_core" else real(name, *a))
    assert main(["calibrate", "--kernels", "h100_sxm"]) != 0
    err = capsys.readouterr().err
    # ccost is not on the package index: the hint names the commands that add the extra to this installation
    from ccost.extras import install_command

    assert "aiconfigurator-core" in err and all(c in err for c in install_command("kernels"))
    assert "aiconfigurator-core==" in err and "pip install 'ccost[" not in err


@pytest.mark.parametrize("args,why", [(["--kernels", "h100"], "is not a system"),
                                      (["--kernels", "h100_sxm", "--engine", "tgi"], "is not an engine")])
def test_bad_kernels_options_are_clear_errors(capsys, args, why):
    assert main(["calibrate", *args]) != 0
    assert why in capsys.readouterr().err


def test_the_bundled_library_has_h100_and_a100_curves_with_provenance():
    spec = _std()
    for gpu, name in (("h100", "h100_vllm"), ("a100", "a100_vllm"), ("h200", "h200_vllm"), ("b200", "b200_vllm")):
        k = spec.gpus[gpu].kernels[0]
        assert k.name == name and k.engine.startswith("vllm ")
        assert "aiconfigurator-core 0.12.0" in k.source and "gemm_perf.parquet" in k.source
        assert k.gemm(False) is not None and k.decode_attention and k.prefill_attention
        assert k.flops == spec.gpus[gpu].flops  # the shares are of the std GPU's own peak
    assert spec.gpus["a100"].kernels[0].gemm(True) is None  # no FP8 on Ampere
    assert spec.gpus["h100_fp8"].kernels == spec.gpus["h100"].kernels  # inherited: the block carries its peaks


def test_gemm_time_by_hand():
    """8192 × 8192 weights, 128 token rows, one kernel, H100 curve-like constants: rate 989.4 TFLOP/s × 84.8 %
    × 128/(128 + 132.2) = 412.8 TFLOP/s; FLOPs 2 × 128 × 8192² = 17.18 GFLOP → 41.62 µs; weights 134.2 MB /
    (3.35 TB/s × 86.3 %) = 46.43 µs, the larger; + t₀ 4.03 µs = 50.46 µs."""
    t, t_mem, t_flop, r = kernels.gemm_time(2 * 8192**2, 2 * 128 * 8192**2, 128, 1, 3.35e12, 0.863, 989.4e12,
                                            0.848, 132.2, 4.03e-6)
    assert r == pytest.approx(989.4e12 * 0.848 * 128 / 260.2, rel=1e-12)
    assert t_flop * 1e6 == pytest.approx(41.62, abs=0.01) and t_mem * 1e6 == pytest.approx(46.43, abs=0.01)
    assert t * 1e6 == pytest.approx(50.46, abs=0.01)
    # at no token rows a GEMM is priced as one row: no division by zero, no FLOP added
    t0, _, f0, _ = kernels.gemm_time(2 * 8192**2, 0.0, 0.0, 1, 3.35e12, 0.863, 989.4e12, 0.848, 132.2, 4.03e-6)
    assert f0 == 0.0 and t0 == pytest.approx(4.03e-6 + 2 * 8192**2 / (3.35e12 * 0.863))


SPEC = """import "std/clusters.ccost"
import "std/models.ccost"
import "std/stacks.ccost"
plan p { model = llama3_70b; cluster = hgx_h100; phase = prefill; batch = 1; seq = 128; tp = 8 }
plan d { model = llama3_70b; cluster = hgx_h100; phase = decode; batch = 32; seq = 2048; tp = 8 }
plan i extends p { stack = ideal }
"""


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("k") / "k.ccost"
    path.write_text(SPEC)
    s, _ = check.load_spec(str(path))
    return s


def test_a_prefill_plan_prices_its_gemms_on_the_curve_by_hand(spec):
    """Llama-3-70B, TP 8, a 128-token prompt, the default stack (rates = kernels) on H100: the weight GEMMs
    are 4 kernels × 80 layers of t₀ plus max((W + A)/(BW·e_w), F/(R(128)·σ)), F = 2 × N_active × 128 / 8;
    A, the activations read and outputs written, is 128 tokens × 80 layers × Σ (K + N) × 2 B over the four
    GEMMs on one GPU (QKV 1,280 × 8,192, output 8,192 × 1,024, up 7,168 × 8,192, down 8,192 × 3,584):
    (20,992 + 24,832) × 2 = 91,648 B a token and layer, 938.5 MB in all."""
    static, x = lower.prepare(spec.plans["p"], spec.policy)
    assert static.kernel_gemm and static.kernel_attention and static.kernels == "h100_vllm"
    k = spec.kernels["h100_vllm"]
    prog = lower.lower(static, x)
    gemm = next(r for r in prog.compute.operators if r[0] == "weight GEMMs")
    params = float(spec.models["llama3_70b"].params)
    w = spec.models["llama3_70b"].total_weight_bytes / 8
    f = 2 * params * 128 / 8
    widths = [(1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584)]
    sigma = (sum(n * kk for n, kk in widths)
             / sum((n + k.gemm_half_n) * (kk + k.gemm_half_k) for n, kk in widths))
    rate = k.flops * k.gemm_efficiency * 128 / (128 + k.gemm_half_tokens) * sigma
    a = 128 * 80 * 91648
    assert a == pytest.approx(938.5e6, rel=1e-4)
    want = 4 * 80 * k.gemm_latency + max((w + a) / (k.hbm_bandwidth * k.gemm_hbm_efficiency), f / rate)
    assert gemm[3] == pytest.approx(want, rel=1e-12)
    # the ideal stack keeps the notes' peak rates: no curve
    si, _ = lower.prepare(spec.plans["i"], spec.policy)
    assert not si.kernel_gemm and si.kernels is None


def test_explain_shows_the_rate_its_shape_point_and_where_it_came_from(spec):
    """Llama-3-70B at TP 8 (h 64, h_kv 8, d_head 128, d 8,192, f 28,672): on one GPU the QKV projection is
    1,280 × 8,192, the output projection 8,192 × 1,024, up with gate 7,168 × 8,192 and down 8,192 × 3,584;
    σ, by hand from those widths and the curve's N½, K½, scales the rate at the prompt's 128 token rows."""
    steps = {s.name: s for s in evaluate.explain(spec, "p")}
    k = spec.kernels["h100_vllm"]
    widths = [(1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584)]
    assert [(steps[a].value, steps[b].value) for a, b in (("N_QKV", "d"), ("d", "K_O"), ("N_up", "d"),
                                                          ("d", "K_down"))] == widths
    sigma = (sum(n * kk for n, kk in widths)
             / sum((n + k.gemm_half_n) * (kk + k.gemm_half_k) for n, kk in widths))
    assert steps["σ_GEMM"].value == pytest.approx(sigma, rel=1e-12)
    assert 0.9 < sigma < 1.0  # BF16 on H100: N½ and K½ of tens of elements, a few % at these widths
    r = steps["R_GEMM"]
    assert r.value == pytest.approx(989.4e12 * k.gemm_efficiency * 128 / (128 + k.gemm_half_tokens) * sigma)
    assert r.formula == "R_peak,GEMM·η_GEMM·M_GEMM/(M_GEMM + M½)·σ_GEMM"
    assert r.substituted == (f"989.4 TFLOP/s × {100 * k.gemm_efficiency:.1f} % × 128 / (128 + "
                             f"{k.gemm_half_tokens:g}) × {100 * sigma:.1f} %")  # the shape point: 128 rows
    assert "kernels h100_vllm (vllm 0.24.0)" in steps["η_GEMM"].source
    assert "aiconfigurator-core 0.12.0" in steps["M½"].source and "aiconfigurator-core 0.12.0" in steps["N½"].source


def test_array_mode_prices_the_curves_as_float_mode(spec):
    """A search prices layouts as arrays: batch 1..256 in one array gives each float plan's step."""
    static, x = lower.prepare(spec.plans["d"], spec.policy)
    batches = np.array([1.0, 8.0, 32.0, 256.0])
    arr = lower.lower(static, lower.with_arrays(x, B=batches)).compute.T_compute
    for i, b in enumerate(batches):
        one = lower.lower(static, replace(x, B=b)).compute.T_compute
        assert arr[i] == pytest.approx(one, rel=1e-12)


def test_moe_experts_are_priced_without_the_shape_factor():
    """DeepSeek-V3 decode at TP 8 (specs/deepseek-v3-decode.ccost): its experts' weights are 512 and 256 wide on
    one GPU, far below the widths the curves were fitted on, and they run as one grouped GEMM per layer; the
    shape factor is left out there (σ_experts would be about 19 % on the FP8 curve and make the experts
    FLOP-bound at four times their weight read), and σ_GEMM covers the attention projections only."""
    from ccost import check as C

    spec, _ = C.load_spec(str(REPO / "specs" / "deepseek-v3-decode.ccost"))
    steps = {s.name: s for s in evaluate.explain(spec, "tp8")}
    assert "σ_experts" not in steps and "N_up" not in steps
    assert "N_QKV" in steps and "K_O" in steps
    w = [(steps["N_QKV"].value, steps["d"].value), (steps["d"].value, steps["K_O"].value)]
    nh, kh = steps["N½"].value, steps["K½"].value
    assert steps["σ_GEMM"].value == pytest.approx(sum(n * k for n, k in w)
                                                  / sum((n + nh) * (k + kh) for n, k in w), rel=1e-12)
    # the experts' rate by hand: R_peak·η·M/(M + M½), no σ
    r = steps["R_GEMM,experts"]
    m = steps["M_GEMM,experts"].value
    assert r.value == pytest.approx(steps["R_peak,GEMM"].value * steps["η_GEMM"].value * m
                                    / (m + steps["M½"].value), rel=1e-12)
    t_mem, t_flop = steps["T_GEMM,mem,experts"].value, steps["T_GEMM,flop,experts"].value
    assert t_mem > t_flop  # a decode step's experts: their weight read
