"""Operator rates by shape: the measured kernel curves of a GPU under an engine (docs/kernels.md).

A ``kernels`` block holds what ``ccost calibrate --kernels`` reduced from a table of measured kernel times
(AIConfigurator's silicon database: GEMM and attention latencies per GPU, engine and version) to a few
physical parameters per operator. This module evaluates those curves. Like ``ccost.model.costs`` it is pure and
written once over plain numbers: the same functions run on floats, numpy arrays and ``derive`` Values, so a
search prices them on arrays and ``ccost explain`` prints each rate with the shape point it was read at.

The forms (each parameter is a fitted constant with a physical meaning):

* **weight GEMM** of M token rows against an N×K weight (bytes W = N·K·b, FLOPs F = 2·M·N·K; activations
  A = M·K·b_in read and M·N·b_out written)::

      t = t₀ + max((W + A) / (BW_HBM·e_w), F / R),   R = R_peak·η · M/(M + M½) · N/(N + N½) · K/(K + K½)

  t₀ the kernel's fixed time (prologue, epilogue, tail of the last wave), e_w the share of the HBM bandwidth
  a weight-streaming GEMM reaches, η the share of the tensor-core peak a large GEMM reaches, M½ the token
  count at which half of it is reached (a 64- or 128-row tile is mostly padding below it). Small M:
  memory-bound (the weight read, then the activations' traffic as M grows); large M: FLOP-bound. Multiplied
  out, F / R = 2·(M + M½)·(N + N½)·(K + K½) / (R_peak·η): besides the padding of the token rows, a time per
  output element that does not shrink with K (N½ and K½: the epilogue of each output tile and the activation
  tile read again for every column of tiles, worth K½ and N½ elements of the inner loop). The BF16 tables
  measure N½ and K½ of 300 elements at most (a few % at the widths of an LLM's weights); the FP8 scaled-mm
  kernels an N½ of 1,100–2,600 (N of 1,024: about half the rate of N of 65,536). The rate saturates in every
  dimension; the time never falls below the memory floor.
* **decode attention** (one new token per sequence against a KV cache of KV bytes, B sequences, h query
  heads and h_kv KV heads on this GPU)::

      t = t₀ + c·B·h + KV / (BW_HBM·e_kv·P/(P + P½)),   P = B·h_kv

  the KV read at e_kv of the HBM bandwidth once enough streams run, plus a fixed time per (sequence × head)
  of the kernel's split and reduction work (what makes a 2,048-sequence step slow even at a 2-token
  context). P is the number of (sequence × KV head) streams the kernel reads in parallel: each is read by
  a few thread blocks, so a step of few sequences and KV heads reaches only part of the bandwidth (half of
  it at P½ streams) however long their context.
* **prefill attention** (causal, S prompt tokens, attention FLOPs F)::

      t = t₀ + F / (R_peak·η_a·S / (S + S½))

The reduction (``ccost.calibrate.kernels``) fits each form by least squares on log(predicted / measured)
over the table's rows and writes the fit's error beside the block.
"""

from __future__ import annotations

from typing import Any

from ccost.derive import maximum, minimum, named

Num = Any  # float | np.ndarray | derive.Value

#: Weight-GEMM kernels of one transformer layer: the QKV projection, the attention output projection, the
#: FFN's up (with its gate, fused) and down projections. Each pays the GEMM curve's fixed time t₀ once per
#: layer and step. A modelling choice, not a measurement: engines that fuse more (or less) differ.
GEMMS_PER_LAYER = 4.0
#: An MoE layer: QKV and output projections outside the experts; the grouped expert GEMMs are two kernels
#: (up with gate, down).
DENSE_GEMMS_PER_MOE_LAYER = 2.0
EXPERT_GEMMS_PER_MOE_LAYER = 2.0


def saturation(x: Num, half: Num) -> Num:
    """x / (x + x½): the share of a kernel's peak rate reached at size x (0 at 0, ½ at x½, → 1)."""
    return x / (x + half)


def gemm_rate(peak: Num, eta: Num, half: Num, m: Num, shape: Num = 1.0) -> Num:
    """The FLOP rate of a GEMM of ``m`` token rows: R_peak·η·M/(M + M½)·σ, σ the weights' shape factor
    (``shape_factor``; 1 when the curve has no N½, K½)."""
    return peak * eta * saturation(m, half) * shape


def shape_factor(widths: tuple, n_half: Num, k_half: Num) -> Num:
    """σ of a group of GEMMs run one after another, each ``(n, k)`` a weight of N output and K input elements
    on this GPU: the share of the rate their shapes allow, Σ N·K / Σ N·K·(1 + N½/N)·(1 + K½/K) — the
    FLOP-weighted harmonic mean of N/(N + N½)·K/(K + K½), so that F/(R·σ) is the sum of the GEMMs' own FLOP
    times at one token count.

    >>> round(shape_factor(((1024, 4096),), 1024, 0), 3)
    0.5
    >>> round(shape_factor(((1024, 1024), (3072, 1024)), 1024, 0), 3)  # 1·1/2 + 3·3/4 over 4
    0.667
    """
    total = 0.0
    slow = 0.0
    for n, k in widths:
        total = total + n * k
        slow = slow + (n + n_half) * (k + k_half)
    return total / slow


def gemm_widths(x: Any, tp: Num, moe: bool, heads_known: bool = True, tag: str = "") -> tuple:
    """The (N, K) of the weight GEMMs of one layer on one GPU of a ``tp``-way tensor-parallel group, outside the
    routed experts: the QKV projection (N = (h/tp + 2·h_kv/tp)·d_head, a KV head replicated where tp exceeds
    the KV heads; K = d), the output projection (N = d, K = h/tp·d_head), the FFN's up projection with its gate
    (N = 2·f/tp, K = d) and down projection (N = d, K = f/tp); an MoE layer (``moe``): the attention
    projections (its experts run as grouped GEMMs, which one GEMM's N½ and K½ do not describe). A modelling
    choice: every FFN is gated (SwiGLU, the models ccost ships; a plain GELU FFN is half as wide in its up
    projection, which at the widths of an LLM moves σ by under 2 %). A model without ``heads``: multi-head
    attention, N = 3·d/tp and K = d/tp."""
    if heads_known:
        heads = x.h / minimum(tp, x.h)
        n_qkv = named(f"N_QKV{tag}", (heads + 2 * x.h_kv / minimum(tp, x.h_kv)) * x.hd,
                      "QKV projection's output width on one GPU: (h/min(tp, h) + 2·h_kv/min(tp, h_kv))·d_head")
        k_o = named(f"K_O{tag}", heads * x.hd, "output projection's input width on one GPU: h/min(tp, h)·d_head")
    else:
        n_qkv = named(f"N_QKV{tag}", 3 * x.d / tp, "QKV projection's output width on one GPU: 3·d/tp")
        k_o = named(f"K_O{tag}", x.d / tp, "output projection's input width on one GPU: d/tp")
    attn = ((n_qkv, x.d), (x.d, k_o))
    if moe:
        return attn
    n_up = named(f"N_up{tag}", 2 * x.f / tp, "FFN up-with-gate output width on one GPU: 2·f/tp")
    k_down = named(f"K_down{tag}", x.f / tp, "FFN down-projection input width on one GPU: f/tp")
    return attn + ((n_up, x.d), (x.d, k_down))


def io_per_token(widths: tuple, b_in: Num, b_out: Num) -> Num:
    """Bytes one token row moves through a group of GEMMs besides their weights: its activation read (K elements
    of ``b_in`` bytes) and its output written (N of ``b_out``), Σ K·b_in + N·b_out over ``widths``."""
    total = 0.0
    for n, k in widths:
        total = total + k * b_in + n * b_out
    return total


def gemm_time(weight_bytes: Num, flops: Num, m: Num, kernels: Num, bw: Num, e_w: Num, peak: Num, eta: Num,
              half: Num, t0: Num, tag: str = "", shape: Num = 1.0,
              io_bytes: Num | None = None) -> tuple[Num, Num, Num, Num]:
    """(time, memory time, FLOP time, rate) of ``kernels`` GEMM launches reading ``weight_bytes`` (and
    ``io_bytes`` of activations read and outputs written; None: the weights alone, as MoE experts are priced)
    and doing ``flops`` over ``m`` token rows of weights whose shape factor is ``shape`` (``shape_factor``):
    kernels·t₀ + max((W + A)/(BW·e_w), F/R).

    >>> t, t_mem, t_flop, r = gemm_time(2 * 8192 * 8192, 2 * 128 * 8192 * 8192, 128, 1, 3.35e12, 0.857,
    ...                                 989e12, 0.842, 116.1, 4.03e-6)
    >>> round(t * 1e6, 1), round(r / 1e12, 1)
    (50.8, 436.8)
    """
    # A GEMM runs whole rows: fewer than one token row (an empty decode part of a serve step, a micro-batch of
    # half a sequence) is priced as one; F is the caller's, so no FLOP is added.
    rows = named(f"M_GEMM{tag}", maximum(m, 1.0), "token rows of the GEMM (at least one)")
    rate = named(f"R_GEMM{tag}", gemm_rate(peak, eta, half, rows, shape),
                 "GEMM rate at this token count and these weight shapes: R_peak·η_GEMM·M/(M + M½)·σ (measured "
                 "curve)")
    if io_bytes is None:
        t_mem = named(f"T_GEMM,mem{tag}", weight_bytes / (bw * e_w), "weight read at the curve's HBM share: "
                      "W/(BW·e_w)")
    else:
        t_mem = named(f"T_GEMM,mem{tag}", (weight_bytes + io_bytes) / (bw * e_w), "weights and activations read, "
                      "outputs written, at the curve's HBM share: (W + A)/(BW·e_w)")
    t_flop = named(f"T_GEMM,flop{tag}", flops / rate, "GEMM FLOPs at the curve's rate: F/R_GEMM")
    t = kernels * t0 + maximum(t_mem, t_flop)
    return t, t_mem, t_flop, rate


def decode_attention_time(kv_bytes: Num, seqs_heads: Num, calls: Num, bw: Num, e_kv: Num, c: Num,
                          t0: Num, streams: Num = 1.0, half: Num = 0.0) -> tuple[Num, Num]:
    """(time, memory time) of ``calls`` decode-attention kernels reading ``kv_bytes`` in all for
    ``seqs_heads`` (sequence × query head) pairs and ``streams`` (sequence × KV head) pairs per call:
    calls·(t₀ + c·B·h) + KV/(BW·e_kv·P/(P + P½))."""
    # a kernel reads at least one stream: an empty decode part (a serve step's prefill alone) reads no bytes
    t_mem = kv_bytes / (bw * e_kv * saturation(maximum(streams, 1.0), half))
    return calls * (t0 + c * seqs_heads) + t_mem, t_mem


def prefill_attention_time(flops: Num, s: Num, calls: Num, peak: Num, eta: Num, half: Num,
                           t0: Num) -> tuple[Num, Num]:
    """(time, FLOP time) of ``calls`` causal-attention kernels doing ``flops`` in all over prompts of ``s``
    tokens: calls·t₀ + F/(R_peak·η_a·S/(S + S½))."""
    t_flop = flops / gemm_rate(peak, eta, half, s)
    return calls * t0 + t_flop, t_flop
