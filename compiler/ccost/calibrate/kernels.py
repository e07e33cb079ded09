"""``ccost calibrate --kernels SYSTEM``: reduce a table of measured kernel times to a ``kernels`` block.

The tables are AIConfigurator's silicon database (the ``aiconfigurator-core`` package, Apache-2.0: GEMM and
attention latencies measured per GPU, engine and engine version, shipped as Parquet files inside the
package). Reading them needs the optional extra ``ccost[kernels]`` (the package and pyarrow); the fits
below need numpy only, so a test can rerun them on a small excerpt of a table without the extra.

Each curve (the forms: ``ccost.model.kernels``; docs/kernels.md) is fitted by bounded Levenberg–Marquardt on
r = log(predicted / measured) over the rows of its domain, and its error over those rows — the median and
90th percentile of |predicted/measured − 1|, the worst row, the median ratio by token count — is written
beside the block, so a reader sees how much the reduction loses.

Domains (choices, stated where they are used): GEMMs with N and K from 1,024 to 65,536 (the weight shapes
of the models ccost prices; a few-hundred-wide GEMM is not a weight GEMM of an LLM), every M the table has;
attention rows with a BF16 KV cache, head size 128 and no sliding window, and for decode attention grouped-query
heads (``GQA_GROUPS``); one kernel per table (for GEMMs the one the engine runs for BF16 and for per-tensor FP8
checkpoints; for attention the kernel with the most rows).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace

import numpy as np

from ccost.diagnostics import CcostError, error
from ccost.extras import install_hint
from ccost.model import kernels as MK

#: The package whose tables are read, and the extra that installs it.
PACKAGE = "aiconfigurator_core"
DISTRIBUTION = "aiconfigurator-core"

#: AIConfigurator's system names → the bundled GPU whose peaks the curves are shares of (std/gpus.ccost).
SYSTEMS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200", "a100_sxm": "a100"}
ENGINES = ("vllm", "sglang", "trtllm")

#: The GEMM kernel each engine's table uses, in order of preference: BF16 weights, per-tensor FP8 weights
#: (vLLM's CUTLASS scaled-mm, SGLang's sgl-kernel scaled-mm, TensorRT-LLM's PyTorch flow, whose `fp8` rows are
#: per-tensor: its block-scaled rows are `fp8_block`).
GEMM_KERNELS = {
    "bf16": ("torch.nn.functional.linear", "vllm_default", "sglang_torch_linear", "torch_flow"),
    "fp8": ("CutlassFP8ScaledMMLinearKernel", "sglang_sgl_kernel_fp8_scaled_mm", "torch_flow"),
}
GEMM_DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}
#: The GEMM domain: weight shapes N, K (elements).
GEMM_NK = (1024, 65536)
HEAD_DIM = 128
#: The decode-attention domain: query heads per KV head from 2 to 16, the grouped-query attention of the models
#: ccost ships (Llama-3 8B and Mixtral 4, Llama-3 70B and Qwen2.5-72B 8, Llama-3.1-405B 16). The tables also
#: time multi-head attention (1 query head per KV head), which TensorRT-LLM runs through another kernel than
#: its grouped one (with an FP8 cache at under half the bandwidth), and 24 to 128 query heads on one KV head,
#: where the kernel is bound by its arithmetic, not by the KV read the form prices: fitted together, those
#: rows pulled the grouped curves' bandwidth share down by up to a quarter (TensorRT-LLM on H200 with an FP8
#: cache: 63 % instead of 78 %; its grouped rows 1.2–1.4× too slow at 32–128 sequences). The comments beside
#: each block give the curve's error on the multi-head rows it leaves out.
GQA_GROUPS = (2, 16)


# --------------------------------------------------------------------------------------------------
# Fitting (numpy only)

def lm_fit(resid, x0, lo, hi, iterations: int = 200) -> np.ndarray:
    """Bounded Levenberg–Marquardt: the parameters in [lo, hi] that minimise Σ resid(x)², from ``x0``.
    Forward-difference Jacobian; deterministic (no randomness), so a refit gives the same block."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    x = np.clip(np.asarray(x0, float), lo, hi)
    r = resid(x)
    cost = float(r @ r)
    lam = 1e-3
    for _ in range(iterations):
        J = np.empty((r.size, x.size))
        for k in range(x.size):
            h = 1e-6 * max(abs(x[k]), 1e-3)
            xk = x.copy()
            xk[k] = xk[k] + h if xk[k] + h <= hi[k] else xk[k] - h
            J[:, k] = (resid(xk) - r) / (xk[k] - x[k])
        g = J.T @ r
        A = J.T @ J
        improved = False
        for _ in range(20):
            step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-12), -g)
            xn = np.clip(x + step, lo, hi)
            rn = resid(xn)
            cn = float(rn @ rn)
            if np.isfinite(cn) and cn < cost:
                rel = (cost - cn) / max(cost, 1e-300)
                x, r, cost, improved = xn, rn, cn, True
                lam = max(lam / 3, 1e-12)
                break
            lam *= 4
        if not improved or rel < 1e-12:
            break
    return x


@dataclass(frozen=True)
class Quality:
    """How well a curve reproduces its table: over ``rows`` rows, |predicted/measured − 1| at the median,
    the 90th percentile and the worst row; ``by`` the median predicted/measured per value of one column."""

    rows: int
    median: float
    p90: float
    worst: float
    by_name: str = ""
    by: tuple = ()

    def text(self) -> str:
        return (f"{self.rows:,} rows: median error {100 * self.median:.1f} %, 90th percentile "
                f"{100 * self.p90:.1f} %, worst {100 * self.worst:.0f} %")


def quality(pred: np.ndarray, meas: np.ndarray, by_name: str = "", by_values: np.ndarray | None = None,
            at: tuple = ()) -> Quality:
    ratio = pred / meas
    err = np.abs(ratio - 1)
    by = tuple((v, float(np.median(ratio[by_values == v]))) for v in at
               if by_values is not None and (by_values == v).any())
    return Quality(int(err.size), float(np.median(err)), float(np.quantile(err, 0.9)), float(err.max()),
                   by_name, by)


@dataclass(frozen=True)
class GemmCurve:
    eta: float
    half: float
    e_w: float
    t0: float
    n_half: float
    k_half: float
    quality: Quality
    #: the median predicted/measured by the weight's N and by its K, over the rows of at least LARGE_M token rows
    #: (where the curve is compute-bound): how well N½ and K½ carry a GEMM's shape
    by_n: tuple = ()
    by_k: tuple = ()


#: Bytes per element of a GEMM's output (BF16, what the engines' linear layers write, FP8 weights included).
OUT_BYTES = 2.0


def gemm_predict(p, m, n, k, b, peak, bw) -> np.ndarray:
    """The GEMM form on table columns, one kernel a row, by the function that prices it
    (``ccost.model.kernels.gemm_time``): t₀ + max((W + A)/(BW·e_w), 2·(M + M½)·(N + N½)·(K + K½)/(R_peak·η)),
    W = N·K·b the weight, A = M·K·b + M·N·2 the activation read (in the weight's dtype) and the BF16 output
    written."""
    eta, half, e_w, t0, n_half, k_half = p
    shape = MK.shape_factor(((n, k),), n_half, k_half)
    io = m * MK.io_per_token(((n, k),), b, OUT_BYTES)
    return MK.gemm_time(n * k * b, 2 * m * n * k, m, 1.0, bw, e_w, peak, eta, half, t0, shape=shape, io_bytes=io)[0]


def fit_gemm(m, n, k, t, b: float, peak: float, bw: float) -> GemmCurve:
    """Fit (η, M½, e_w, t₀, N½, K½) of the GEMM form to rows of M, N, K and measured seconds ``t``. η is
    bounded by 1 (a share of the peak: with N½ and K½ it is the rate of an infinitely wide GEMM, which a fit
    on an A100 table otherwise puts a hair above the peak)."""
    m, n, k, t = (np.asarray(a, float) for a in (m, n, k, t))
    scale = np.array([1.0, 100.0, 1.0, 1e-6, 1000.0, 1000.0])  # parameters near 1 for the solver
    resid = lambda q: np.log(gemm_predict(q * scale, m, n, k, b, peak, bw) / t)  # noqa: E731
    q = lm_fit(resid, [0.7, 1.0, 0.8, 5.0, 0.1, 0.1], [0.01, 0.0, 0.01, 0.0, 0.0, 0.0],
               [1.0, 100.0, 1.5, 1e5, 100.0, 100.0])
    p = q * scale
    pred = gemm_predict(p, m, n, k, b, peak, bw)
    large = m >= LARGE_M
    by_n = quality(pred[large], t[large], "N", n[large], BY_N).by if large.any() else ()
    by_k = quality(pred[large], t[large], "K", k[large], BY_N).by if large.any() else ()
    return GemmCurve(*(float(x) for x in p), quality(pred, t, "M", m,
                                                      (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192)),
                     by_n, by_k)


#: Token rows from which a GEMM's shape is read against the curve (prefill and large batches), and the
#: weight widths N and K the comments list.
LARGE_M = 1024
BY_N = (1024, 2048, 4096, 8192, 16384, 65536)


@dataclass(frozen=True)
class DecodeAttentionCurve:
    e_kv: float
    t0: float
    c: float
    half: float  # P½: (sequence × KV head) streams at half of e_kv's bandwidth
    quality: Quality
    #: (rows, median predicted/measured) of the table's multi-head rows, outside the domain (GQA_GROUPS)
    mha: tuple[int, float] | None = None


def decode_attention_predict(p, kv, seqs_heads, bw, streams=None) -> np.ndarray:
    """The decode-attention form on table columns, one kernel a row (``ccost.model.kernels.decode_attention_time``)."""
    e_kv, t0, c, half = p
    streams = np.ones_like(kv) if streams is None else streams
    return MK.decode_attention_time(kv, seqs_heads, 1.0, bw, e_kv, c, t0, streams, half)[0]


def _mha_ratio(gen: "Table", kv_dtype: str, kernel: str, curve: DecodeAttentionCurve, bw: float,
               kv_bytes: float) -> tuple[int, float] | None:
    """How the grouped-query curve prices the same kernel's multi-head rows (one query head per KV head)."""
    c, picked = attention_rows(gen, kv_dtype, (1, 1), prefer=(kernel,))
    if not len(c["latency"]) or picked != kernel:
        return None
    b, ctx, h, hk, t = decode_columns(c)
    kv = 2 * b * ctx * hk * HEAD_DIM * kv_bytes
    pred = decode_attention_predict((curve.e_kv, curve.t0, curve.c, curve.half), kv, b * h, bw, b * hk)
    return int(len(pred)), float(np.median(pred / t))


def decode_columns(c: dict) -> tuple[np.ndarray, ...]:
    """(batch, context, query heads, KV heads, seconds) of a generation-attention table's rows: the context is
    the step's tokens and the one being decoded (a table without steps gives it as ``isl``)."""
    ctx = c["step"].astype(float) + 1 if "step" in c else c["isl"].astype(float)
    return (c["batch_size"].astype(float), ctx, c["num_heads"].astype(float),
            c["num_key_value_heads"].astype(float), c["latency"].astype(float) * 1e-3)


def fit_decode_attention(batch, ctx, heads, kv_heads, t, bw: float, head_dim: int = HEAD_DIM,
                         kv_bytes: float = 2.0) -> DecodeAttentionCurve:
    """Fit (e_kv, t₀, c, P½) to decode-attention rows: ``batch`` sequences at ``ctx`` tokens of context,
    ``heads`` query heads and ``kv_heads`` KV heads of ``head_dim``; KV read 2·B·ctx·h_kv·d_head·bytes in
    B·h_kv streams."""
    batch, ctx, heads, kv_heads, t = (np.asarray(a, float) for a in (batch, ctx, heads, kv_heads, t))
    kv = 2 * batch * ctx * kv_heads * head_dim * kv_bytes
    sh = batch * heads
    streams = batch * kv_heads
    scale = np.array([1.0, 1e-6, 1e-9, 10.0])
    resid = lambda q: np.log(decode_attention_predict(q * scale, kv, sh, bw, streams) / t)  # noqa: E731
    p = lm_fit(resid, [0.8, 10.0, 2.0, 1.0], [0.01, 0.0, 0.0, 0.0], [1.5, 1e4, 1e4, 1e4]) * scale
    return DecodeAttentionCurve(*(float(x) for x in p), quality(decode_attention_predict(p, kv, sh, bw, streams), t,
                                                                 "B", batch, (1, 8, 32, 128, 512)))


@dataclass(frozen=True)
class PrefillAttentionCurve:
    eta: float
    half: float
    t0: float
    quality: Quality


def prefill_attention_predict(p, flops, s, peak) -> np.ndarray:
    """The prefill-attention form on table columns, one kernel a row (``ccost.model.kernels.prefill_attention_time``)."""
    eta, half, t0 = p
    return MK.prefill_attention_time(flops, s, 1.0, peak, eta, half, t0)[0]


def fit_prefill_attention(batch, s, heads, t, peak: float, head_dim: int = HEAD_DIM) -> PrefillAttentionCurve:
    """Fit (η_a, S½, t₀) to causal prefill-attention rows: ``batch`` prompts of ``s`` tokens, ``heads``
    query heads; FLOPs 4·B·S·(S + 1)/2·h·d_head (QKᵀ and PV over the causal half, as ``ccost.model.lower``)."""
    batch, s, heads, t = (np.asarray(a, float) for a in (batch, s, heads, t))
    flops = 4 * batch * s * (s + 1) / 2 * heads * head_dim
    scale = np.array([1.0, 1000.0, 1e-6])
    resid = lambda q: np.log(prefill_attention_predict(q * scale, flops, s, peak) / t)  # noqa: E731
    p = lm_fit(resid, [0.6, 1.0, 10.0], [0.01, 0.0, 0.0], [1.5, 1e3, 1e4]) * scale
    return PrefillAttentionCurve(*(float(x) for x in p),
                                 quality(prefill_attention_predict(p, flops, s, peak), t, "S", s,
                                         (128, 512, 2048, 8192)))


# --------------------------------------------------------------------------------------------------
# Reading the tables (the extra)

def _missing(what: str) -> CcostError:
    return CcostError(error("E501", f"--kernels needs {what}, which is not installed", None, "install the optional `kernels` extra (aiconfigurator-core and pyarrow): "
                            + install_hint("kernels")))


def package_root() -> tuple[str, str]:
    """(folder of aiconfigurator-core's systems data, its version), without importing the package."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise _missing("the aiconfigurator-core package")
    root = os.path.join(list(spec.submodule_search_locations)[0], "systems")
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - installed without metadata
        version = "unknown"
    return root, version


def _version_key(v: str) -> tuple:
    parts = []
    for tok in v.replace("rc", ".-1.").replace("post", ".").split("."):
        parts.append(int(tok) if tok.lstrip("-").isdigit() else -2)
    return tuple(parts)


@dataclass(frozen=True)
class Table:
    """One measured table: its columns as numpy arrays, and where it came from."""

    columns: dict
    system: str
    op: str
    engine: str
    version: str
    file: str
    collected: str | None = None

    def provenance(self) -> str:
        date = f", collected {self.collected}" if self.collected else ""
        return f"{self.op}/{self.engine} {self.version}/{self.file}{date}"


def has_tables(system: str, engine: str) -> bool:
    """The package measured GEMMs of ``engine`` on ``system`` (what a kernels block needs first)."""
    root, _ = package_root()
    folder = os.path.join(root, "data", system, "gemm", engine)
    return os.path.isdir(folder) and any(os.path.isfile(os.path.join(folder, v, "gemm_perf.parquet"))
                                         for v in os.listdir(folder))


def read_table(root: str, system: str, op: str, engine: str, file: str, version: str | None = None) -> Table:
    """The newest (or ``version``) table ``file`` of ``op`` for ``engine`` on ``system``."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise _missing("pyarrow") from None
    folder = os.path.join(root, "data", system, op, engine)
    if not os.path.isdir(folder):
        raise CcostError(error("E501", f"aiconfigurator-core has no {op} tables for {engine} on {system}", None,
                               "see docs/kernels.md for the systems and engines it measured"))
    versions = sorted((v for v in os.listdir(folder) if os.path.isfile(os.path.join(folder, v, file))),
                      key=_version_key)
    if version is not None:
        versions = [v for v in versions if v == version]
    if not versions:
        raise CcostError(error("E501", f"aiconfigurator-core has no {file} for {engine}"
                               + (f" {version}" if version else "") + f" on {system}", None,
                               "try another --engine or leave the version out"))
    v = versions[-1]
    cols = {k: np.asarray(a.to_numpy(zero_copy_only=False)) for k, a in
            zip(pq.read_table(os.path.join(folder, v, file)).column_names,
                pq.read_table(os.path.join(folder, v, file)).columns)}
    collected = None
    meta = os.path.join(folder, v, "collection_meta.yaml")
    if os.path.isfile(meta):
        import yaml

        with open(meta, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh) or {}
        stamps = sorted(str(e.get("collected_at")) for e in _events(doc) if e.get("collected_at"))
        collected = stamps[-1] if stamps else None
    return Table(cols, system, op, engine, v, file, collected)


def _events(doc) -> list:
    """Every mapping in a collection_meta document (its events carry ``collected_at``)."""
    out = []
    if isinstance(doc, dict):
        out.append(doc)
        for v in doc.values():
            out += _events(v)
    elif isinstance(doc, list):
        for v in doc:
            out += _events(v)
    return out


def _pick_kernel(cols: dict, mask: np.ndarray, prefer: tuple = ()) -> np.ndarray:
    """``mask`` narrowed to one kernel source: the first of ``prefer`` present, else the one with most rows."""
    if "kernel_source" not in cols:
        return mask
    ks = cols["kernel_source"]
    present = {str(x) for x in np.unique(ks[mask])}
    for name in prefer:
        if name in present:
            return mask & (ks == name)
    if not present:
        return mask
    best = max(sorted(present), key=lambda s: int((mask & (ks == s)).sum()))
    return mask & (ks == best)


#: Token rows of a decode step's GEMMs (the sanity check of an FP8 curve against the BF16 one)
DECODE_M = 64


def _slower_than_bf16(fp8_rows: tuple, bf16_rows: tuple | None) -> bool:
    """An FP8 GEMM reads half the weight bytes of a BF16 one, so at decode shapes (memory-bound) it is faster
    when it runs a fused kernel. A table whose FP8 rows take longer than its BF16 rows at the same (M, N, K)
    for M <= DECODE_M (median over the shared shapes) measured a path with a separate quantisation step."""
    if bf16_rows is None:
        return False
    m8, n8, k8, t8, _ = fp8_rows
    m2, n2, k2, t2, _ = bf16_rows
    bf16 = {(a, b, c): t for a, b, c, t in zip(m2, n2, k2, t2) if a <= DECODE_M}
    ratios = [t / bf16[(a, b, c)] for a, b, c, t in zip(m8, n8, k8, t8) if a <= DECODE_M and (a, b, c) in bf16]
    return bool(ratios) and float(np.median(ratios)) > 1.0


def gemm_rows(t: Table, dtype: str) -> tuple[np.ndarray, ...] | None:
    """(M, N, K, seconds, kernel) of the GEMM table's rows in the domain, or None without rows of ``dtype``."""
    c = t.columns
    mask = c["gemm_dtype"] == GEMM_DTYPES[dtype]
    lo, hi = GEMM_NK
    mask &= (c["n"] >= lo) & (c["n"] <= hi) & (c["k"] >= lo) & (c["k"] <= hi)
    if not mask.any():
        return None
    mask = _pick_kernel(c, mask, GEMM_KERNELS[dtype])
    kernel = str(c["kernel_source"][mask][0]) if "kernel_source" in c else ""
    if dtype == "fp8" and kernel not in GEMM_KERNELS["fp8"]:
        return None  # only block-scaled FP8 kernels measured: not what a per-tensor FP8 checkpoint runs
    return (c["m"][mask].astype(float), c["n"][mask].astype(float), c["k"][mask].astype(float),
            c["latency"][mask].astype(float) * 1e-3, kernel)


def attention_rows(t: Table, kv_dtype: str = "bfloat16", groups: tuple[int, int] | None = None,
                   prefer: tuple = ()) -> tuple[dict, str]:
    """The attention table's rows in the domain (a ``kv_dtype`` KV cache, BF16 by default; head size 128, no
    window; with ``groups``, query heads per KV head in that closed range), one kernel (the first of ``prefer``
    present, else the one with most rows)."""
    c = t.columns
    mask = (c["kv_cache_dtype"] == kv_dtype) & (c["head_dim"] == HEAD_DIM)
    if groups is not None:
        g = c["num_heads"].astype(float) / c["num_key_value_heads"].astype(float)
        mask &= (g >= groups[0]) & (g <= groups[1])
    if "window_size" in c:
        mask &= c["window_size"] == 0
    if "beam_width" in c:
        mask &= c["beam_width"] == 1
    mask = _pick_kernel(c, mask, prefer)
    kernel = str(c["kernel_source"][mask][0]) if "kernel_source" in c and mask.any() else ""
    return {k: v[mask] for k, v in c.items()}, kernel


# --------------------------------------------------------------------------------------------------
# The block

@dataclass
class Reduction:
    """Everything ``kernels_block`` writes: the curves, their tables and kernels, the peaks used."""

    system: str
    gpu: str
    engine: str
    package_version: str
    peaks: dict
    gemm: dict = field(default_factory=dict)  # dtype -> (GemmCurve, Table, kernel)
    decode: tuple | None = None  # (DecodeAttentionCurve, Table, kernel)
    decode_fp8: tuple | None = None  # the same over an FP8 KV cache
    rejected: list = field(default_factory=list)  # curves the reduction left out, and why (comments)
    prefill: tuple | None = None  # (PrefillAttentionCurve, Table, kernel)


def reduce_system(system: str, engine: str, gpu_peaks: dict, gpu_name: str) -> Reduction:
    """Read ``system``'s tables for ``engine`` and fit every curve (``gpu_peaks``: flops, fp8_flops,
    hbm_bandwidth of the bundled GPU the curves are shares of)."""
    root, version = package_root()
    red = Reduction(system, gpu_name, engine, version, gpu_peaks)
    bw = gpu_peaks["hbm_bandwidth"]
    g = read_table(root, system, "gemm", engine, "gemm_perf.parquet")
    for dtype, b, peak in (("bf16", 2.0, gpu_peaks["flops"]), ("fp8", 1.0, gpu_peaks.get("fp8_flops"))):
        if peak is None:
            continue
        rows = gemm_rows(g, dtype)
        if rows is None:
            continue
        m, n, k, t, kernel = rows
        if dtype == "fp8" and "bf16" in red.gemm and _slower_than_bf16(rows, gemm_rows(g, "bf16")):
            red.rejected.append(f"FP8 GEMM ({kernel}): slower than the table's BF16 GEMM at decode shapes "
                                f"(M <= {DECODE_M}), so not the engine's fused FP8 path; its FP8 weights are "
                                "priced on the GPU's first block with an FP8 curve")
            continue
        red.gemm[dtype] = (fit_gemm(m, n, k, t, b, peak, bw), g, kernel)
    try:
        gen = read_table(root, system, "attention", engine, "generation_attention_perf.parquet")
    except CcostError:
        gen = None
    if gen is not None:
        for kv_dtype, kv_bytes in (("bfloat16", 2.0), ("fp8", 1.0)):
            c, kernel = attention_rows(gen, kv_dtype, GQA_GROUPS)
            if len(c["latency"]):
                curve = fit_decode_attention(*decode_columns(c), bw, kv_bytes=kv_bytes)
                curve = replace(curve, mha=_mha_ratio(gen, kv_dtype, kernel, curve, bw, kv_bytes))
                if kv_dtype == "fp8":
                    red.decode_fp8 = (curve, gen, kernel)
                else:
                    red.decode = (curve, gen, kernel)
    try:
        ctxt = read_table(root, system, "attention", engine, "context_attention_perf.parquet")
    except CcostError:
        ctxt = None
    if ctxt is not None:
        c, kernel = attention_rows(ctxt)
        if len(c["latency"]):
            curve = fit_prefill_attention(c["batch_size"], c["isl"], c["num_heads"],
                                          c["latency"].astype(float) * 1e-3, gpu_peaks["flops"])
            red.prefill = (curve, ctxt, kernel)
    return red


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _us(x: float) -> str:
    return f"{x * 1e6:.3g} us" if x * 1e6 >= 0.01 else f"{x * 1e9:.3g} ns"


def _sig(x: float) -> str:
    return f"{x:.4g}"


def _ns(x: float) -> str:
    return f"{x * 1e9:.3g} ns"


def kernels_block(red: Reduction, name: str, command: str) -> str:
    """The ``kernels`` block of a reduction, with the reduction's error in comments above it."""
    lines = [f"# Reduced by `ccost calibrate --kernels` from aiconfigurator-core {red.package_version} "
             f"(Apache-2.0), system {red.system}, engine {red.engine}; the curves are shares of std gpu "
             f"`{red.gpu}`'s peaks.",
             f"# Regenerate: {command}"]
    fields: list[tuple[str, str]] = [("engine", f'"{red.engine} ' + _engine_version(red) + '"'),
                                     ("flops", f"{red.peaks['flops'] / 1e12:.6g} TFLOP/s")]
    if red.gemm.get("fp8") is not None:
        fields.append(("fp8_flops", f"{red.peaks['fp8_flops'] / 1e12:.6g} TFLOP/s"))
    fields.append(("hbm_bandwidth", f"{red.peaks['hbm_bandwidth'] / 1e9:.6g} GB/s"))
    tables = []
    for why in red.rejected:
        lines.append(f"#   left out: {why}")
    for dtype, (c, t, kernel) in red.gemm.items():
        pre = "" if dtype == "bf16" else "fp8_"
        lines.append(f"#   {dtype.upper()} GEMM ({kernel}, N and K in [{GEMM_NK[0]:,}, {GEMM_NK[1]:,}]): "
                     f"{c.quality.text()}")
        lines.append("#     median predicted/measured by M: " + ", ".join(f"{int(v)}: {r:.2f}" for v, r in
                                                                       c.quality.by))
        if c.by_n:
            lines.append(f"#     at M >= {LARGE_M:,}, by the weight's N: " + ", ".join(
                f"{int(v):,}: {r:.2f}" for v, r in c.by_n))
        if c.by_k:
            lines.append(f"#     at M >= {LARGE_M:,}, by the weight's K: " + ", ".join(
                f"{int(v):,}: {r:.2f}" for v, r in c.by_k))
        fields += [(f"{pre}gemm_efficiency", _pct(c.eta)), (f"{pre}gemm_half_tokens", _sig(c.half)),
                   (f"{pre}gemm_half_n", _sig(c.n_half)), (f"{pre}gemm_half_k", _sig(c.k_half)),
                   (f"{pre}gemm_hbm_efficiency", _pct(c.e_w)), (f"{pre}gemm_latency", _us(c.t0))]
        tables.append(f"{t.provenance()} ({kernel}, {GEMM_DTYPES[dtype]})")
    if red.decode is not None:
        c, t, kernel = red.decode
        lines.append(f"#   decode attention ({kernel}, BF16 KV, head 128, {GQA_GROUPS[0]} to {GQA_GROUPS[1]} query heads per KV "
                     f"head): {c.quality.text()}")
        lines.append("#     median predicted/measured by batch: " + ", ".join(f"{int(v)}: {r:.2f}" for v, r in
                                                                           c.quality.by))
        lines += _mha_line(c)
        fields += [("decode_attention_hbm_efficiency", _pct(c.e_kv)), ("decode_attention_latency", _us(c.t0)),
                   ("decode_attention_head_time", _ns(c.c)), ("decode_attention_half_streams", _sig(c.half))]
        tables.append(f"{t.provenance()} ({kernel})")
    if red.decode_fp8 is not None:
        c, t, kernel = red.decode_fp8
        lines.append(f"#   decode attention ({kernel}, FP8 KV, head 128, {GQA_GROUPS[0]} to {GQA_GROUPS[1]} query heads per KV "
                     f"head): {c.quality.text()}")
        lines.append("#     median predicted/measured by batch: " + ", ".join(f"{int(v)}: {r:.2f}" for v, r in
                                                                           c.quality.by))
        lines += _mha_line(c)
        fields += [("fp8_decode_attention_hbm_efficiency", _pct(c.e_kv)),
                   ("fp8_decode_attention_latency", _us(c.t0)), ("fp8_decode_attention_head_time", _ns(c.c)),
                   ("fp8_decode_attention_half_streams", _sig(c.half))]
    if red.prefill is not None:
        c, t, kernel = red.prefill
        lines.append(f"#   prefill attention ({kernel}, BF16, head 128, causal): {c.quality.text()}")
        lines.append("#     median predicted/measured by prompt length: " + ", ".join(
            f"{int(v)}: {r:.2f}" for v, r in c.quality.by))
        fields += [("prefill_attention_efficiency", _pct(c.eta)), ("prefill_attention_half_tokens", _sig(c.half)),
                   ("prefill_attention_latency", _us(c.t0))]
        tables.append(f"{t.provenance()} ({kernel})")
    source = (f"measured kernels: aiconfigurator-core {red.package_version}, systems/data/{red.system}: "
              + "; ".join(tables) + "; date of the data: " + _dates(red))
    fields.append(("source", '"' + source.replace("\\", "/").replace('"', "'") + '"'))
    width = max(len(k) for k, _ in fields)
    title = f"{red.gpu.upper()} under {red.engine} {_engine_version(red)}, measured kernels"
    body = "\n".join(f"  {k.ljust(width)} = {v}" for k, v in fields)
    return "\n".join(lines) + f'\nkernels {name} "{title}" {{\n{body}\n}}\n'


def _mha_line(c: DecodeAttentionCurve) -> list[str]:
    if c.mha is None:
        return []
    n, r = c.mha
    return [f"#     left out: its {n:,} multi-head rows (1 query head per KV head), which this curve prices at a "
            f"median {r:.2f}× their time"]


def _engine_version(red: Reduction) -> str:
    """The engine version of the GEMM table (the attention tables may be of another version: each is in
    the source)."""
    for _, t, _ in red.gemm.values():
        return t.version
    for part in (red.decode, red.prefill):
        if part is not None:
            return part[1].version
    return ""


def _dates(red: Reduction) -> str:
    stamps = sorted({t.collected for _, t, _ in red.gemm.values() if t.collected}
                    | {p[1].collected for p in (red.decode, red.prefill) if p is not None and p[1].collected})
    if stamps:
        return ", ".join(stamps)
    return "not recorded in the tables (their collection_meta says provenance: legacy)"


def finite(x: float) -> bool:
    return math.isfinite(x)
