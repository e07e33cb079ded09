"""Training: one optimizer step of a ``phase = train`` plan, per micro-batch and per GPU.

``lower_train(static, x)`` is ``ccost.model.lower.lower`` for training plans and ``analyse_train(program)`` is
``ccost.model.analysis.analyse`` for them (``ccost.model.phases`` picks by phase); like those, they run unchanged on floats, numpy arrays (a search) and
derivation values (``ccost explain``), so nothing here branches on a number — only on the plan's
structural choices in ``Static`` (schedule, recomputation, sequence parallelism, optimizer sharding, FSDP,
whether the plan writes ``overlap``).

Notation: B sequences of S tokens per replica per step, split into M micro-batches of b_mb = B·S/M tokens;
L layers of hidden size d and FFN size f on P pipeline stages (L_s = L/P per stage), tp, ep, dp ranks.

**FLOPs the field counts** (per token, forward; backward = 2× forward):

* GEMMs: 2·(N_active − untied·V·d): every weight a token meets is a multiply-add, the LM head included
  (the logits); an untied input embedding is a lookup, not a GEMM.
* Attention, causal: 2·L·S·d — QKᵀ and A·V each take S/2 keys on average, d multiply-adds per key.
* Model FLOPs per token = 3·(GEMM + attention); MFU = model FLOPs/s per GPU ÷ peak FLOP/s. Recomputation
  adds FLOPs the hardware runs but the model does not count: ``selective`` re-runs the attention core
  (the FlashAttention backward does), ``full`` the layer's whole forward (Korthikanti et al. 2022).

**Compute time of one micro-batch on one GPU**, with the plan's software-stack profile (``stack``):
GEMM FLOPs / R_GEMM + attention FLOPs / R_attn + memory-bound bytes / (HBM bandwidth·elementwise_efficiency),
plus the stack's layer_overhead per layer (forward once, backward twice) and its step_overhead once per
step. Under a stack with ``rates = kernels`` on a GPU with measured curves (``ccost.model.kernels``; every bundled
training profile): R_GEMM = R_peak·η·b_mb/(b_mb + M½)·framework_efficiency, the GEMM curve at the
micro-batch's b_mb token rows, and R_attn = R_peak·η_a·S/(S + S½)·framework_efficiency, the
prefill-attention curve at the sequence length, of the attention kernels the framework runs (the stack's
``attention_engine``: FlashAttention-2 or cuDNN on Hopper, ``lower.attention_kernels_for``); otherwise R_GEMM = peak·gemm_efficiency (or the GPU's
achieved_flops) and R_attn = peak·attention_efficiency. Memory-bound bytes: the activations a layer stores
(below) are written once in the forward pass and read once, with their gradient written, in the backward
pass (forward 1×, backward 2× the stored bytes per token and layer, selective layout), the logits likewise.
Without kernel curves each GEMM also reads its input rows and writes its output rows at the elementwise
bandwidth, (4·d + (4·d + 2·f)/tp)·b_act per token and layer (QKV, projection, FC1, FC2) and (d + V/tp)·b_act
for the LM head, again 1× forward and 2× backward: what makes a small model's GEMMs run at a lower share of
peak than a large one's; on the curves those bytes are inside the measured GEMM times.

**The optimizer step**, under a stack on kernel curves (every bundled framework profile): once per step each
parameter of this GPU's optimizer state (its shard under ZeRO or FSDP) reads its gradient, reads and writes
Adam's state (master weights, m, v: b_opt bytes) and writes its weight, N_opt·(b_grad + 2·b_opt + b_w) bytes
at the elementwise bandwidth; it adds to the step and to its compute. What makes a step of few tokens per
GPU (a 13B model at 4,096 tokens per GPU on FSDP) slower than its FLOPs say.

**Activations per token per layer** (Korthikanti et al., “Reducing Activation Recomputation in Large
Transformer Models”, 2022, eq. 1–6, generalised from f = 4d to any f; bytes for 16-bit activations, scaled
by b_act/2): 10·d replicated on the tp ranks (two norms' inputs, the QKV and FC1 inputs, two dropout masks)
+ (4·d + 4·d·h_kv/h + 4·f) split over tp (Q and the projection input; K and V, which grouped-query attention
keeps for h_kv of the h heads; the FFN's activations) + 5·h·S for the attention
scores (split over tp; not stored under selective or FlashAttention). Sequence parallelism splits the 10·d
too. Full recomputation keeps only each layer's input (2·d, ÷tp under SP) plus one layer's working set.
The first stage holds these for the micro-batches in flight: M (GPipe), min(M, P) (1F1B),
min(M, P)·(1 + (P−1)/(P·v)) (interleaved); the logits of one micro-batch (b_mb·V/tp, BF16 plus an FP32 copy
for the loss) are added.

**Communication per micro-batch** (counts per step on one GPU):

* TP: 4 AllReduces per layer of the micro-batch's b_mb·d activations (2 forward, 2 backward; full
  recomputation 2 more); under SP each becomes a ReduceScatter + AllGather pair (4 of each per layer).
* PP: each micro-batch's activations forward and its gradient back, b_mb·d·bytes (÷tp with SP), 2·v per
  micro-batch (interleaved: v model chunks), on NVLink or the scale-out link as the stage boundary lies.
* EP: dispatch + combine per MoE layer, forward and backward (4), of b_mb·k·d·bytes (÷tp with SP); with
  node-limited routing (``route_nodes``) a token crosses to a node once however many of its experts live
  there, so a group that spans nodes sends min(k, route_nodes) copies.
* DP: the stage's gradients once per step, bucketed: an AllReduce, or with ``zero1``/``zero2`` a
  ReduceScatter of the gradients plus an AllGather of the updated parameters. FSDP: per layer and
  micro-batch an AllGather forward and backward and a ReduceScatter of the gradients.

* CP (context parallelism, ``cp``): each GPU holds b_mb/cp tokens; K and V of the sequence on one TP rank,
  b_mb·2·d·(h_kv/h)·b_act/tp, are gathered around the ring forward and backward and their gradients
  reduce-scattered, per layer and micro-batch; gradients are reduced over dp·cp ranks.

**What is hidden** (the ``overlap`` field, when written, overrides all of this: every collective is then
exposed by the share 1 − overlap, as the reference notes assume):

* The CP ring runs behind the attention of the chunk already held: exposed per layer
  max(T_CP − t_attn, 0) forward and max(T_CP + T_CPrs − 2·t_attn, 0) backward.
* TP, EP and PP sit between dependent kernels: exposed; with a stack that has ``tp_comm_overlap`` (Megatron's
  --tp-comm-overlap), TP collectives are pipelined with the adjacent GEMMs and only max(T_TP − t_GEMM, 0)
  per micro-batch is exposed.
* The DP reduction starts bucket by bucket while the last micro-batch's backward runs: exposed =
  max(T_DP − t_bwd·(L_s−1)/L_s, T_DP/L_s) — what the remaining backward cannot cover, and at least the
  last layer's bucket, which has nothing left to hide behind. The ZeRO parameter AllGather is hidden the
  same way behind the next step's first forward.
* FSDP prefetches each layer's gather behind the previous layer's compute: per micro-batch, the first
  layer's gather plus Σ max(0, T_AG − t_layer,fwd) + max(0, T_AG + T_RS − t_layer,bwd).

**Schedule**: the step is (M + (P−1)/v)·(t_mb + c_mb) + exposed once-per-step communication, where c_mb is
the exposed communication of a micro-batch; the bubble is ((P−1)/v)/(M + (P−1)/v) of the step, i.e.
(P−1)/(v·M) of the ideal time (Narayanan et al. 2021). GPipe and 1F1B share the bubble; they differ in
the activations held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ccost.model import analysis as A
from ccost import axes, derive, units
from ccost.model import costs, kernels
from ccost.derive import floor, maximum, minimum, named
from ccost.model.program import Compute, Priced, Program, collective, memory, on, p2p, total

Num = Any


@dataclass(frozen=True)
class TrainTerms:
    """The schedule's numbers of a training step (per GPU), for analysis, explain and the review."""

    slots: Num  # M + (P−1)/v
    bubble: Num  # ((P−1)/v) / slots
    t_fwd: Num  # one micro-batch forward on one GPU
    t_bwd: Num  # ... backward (with recomputation)
    c_mb: Num  # exposed communication of one micro-batch
    once: Num  # exposed once-per-step communication (DP, ZeRO gathers, FSDP's first gather)
    exposed: Num  # what communication adds to the step
    step: Num
    flops_model_token: Num  # model FLOPs per token (fwd + bwd, no recomputation)
    flops_model_gpu: Num  # model FLOPs per step per GPU
    in_flight_mb: Num  # micro-batches whose activations the first stage holds
    act_token_layer: Num  # activation bytes stored per token per layer
    groups: tuple = ()  # extra derivation values for explain
    r_gemm: Num = None  # the FLOP/s the GEMMs ran at (the checklist's item 1 quotes it)


def _zero(dim, *like):
    return derive.zero(dim, *like)


def lower_train(static, x):
    coll: list = []
    P, M, t = x.pp, x.M, x.tp
    Ls = named("L_s", x.L / P, "layers per stage")
    tok_mb = named("b_mb", x.B * x.S / M, "tokens per micro-batch: B·S/M")
    if static.cp:  # context parallelism: each GPU holds 1/cp of every sequence
        tok = named("b_mb,GPU", tok_mb / x.cp, "tokens of a micro-batch on one GPU: b_mb/cp")
        dpc = named("dp·cp", x.dp * x.cp, "ranks holding the same weights: data × context parallel")
    else:
        tok, dpc = tok_mb, x.dp

    # --- parameters on this GPU (dense part replicated over ep, experts sharded), as ccost.model.lower ----------
    b_w = named("b_w", x.W / x.params, "weight bytes per parameter")
    if static.moe:
        n_expert1, n_dense, n_experts = costs.moe_parameters(x.params, x.params_active, x.E, x.k)
        p_dense = named("N_dense,GPU", n_dense / axes.split(x, "weights", "layers"), "dense parameters on one GPU")
        p_exp = named("N_experts,GPU", n_experts / axes.split(x, "weights", "layers", "experts"),
                      "expert parameters on one GPU")
        params_gpu = named("N_GPU", p_dense + p_exp, "parameters on one GPU (before sharding)")
        weights_gpu = named("W_GPU", b_w * params_gpu, "weight bytes on one GPU")
        n_shard = named("N_shard", p_dense / (dpc * x.ep) + p_exp / dpc,
                        "parameters on one GPU sharded over the data-parallel ranks")
        dp_groups = [("", p_dense, dpc * x.ep, t, "dense parameters"),
                     ("e", p_exp, dpc, t * x.ep, "expert parameters")]
    else:
        params_gpu = named("N_GPU", x.params / axes.split(x, "weights", "layers"),
                           "parameters on one GPU (before sharding)")
        weights_gpu = named("W_GPU", x.W / axes.split(x, "weights", "layers"), "weight bytes on one GPU")
        n_shard = named("N_shard", params_gpu / (dpc * x.ep),
                        "parameters on one GPU sharded over the data-parallel ranks")
        dp_groups = [("", params_gpu, dpc * x.ep, t, "parameters")]

    # --- activations per token per layer (Korthikanti et al. 2022, generalised to f) -------------------
    half = x.b_act / 2
    rep = named("A_rep", 10 * x.d * half, "activation bytes per token and layer outside the tp split: 10·d")
    split = named("A_split", (4 * x.d + 4 * x.d * x.h_kv / x.h + 4 * x.f) * half,
                  "activation bytes per token and layer split over tp: 4·d (Q, the projection input) + "
                  "4·d·h_kv/h (K and V: grouped-query attention keeps h_kv of the h heads) + 4·f")
    scores = named("A_scores", 5 * x.h * x.S * half, "attention scores per token and layer: 5·h·S")
    if static.sp:
        a_sel = named("A_sel", (rep + split) / t, "stored per token and layer, selective, SP: (A_rep + A_split)/tp")
    else:
        a_sel = named("A_sel", rep + split / t, "stored per token and layer, selective: A_rep + A_split/tp")
    if static.recompute == "none":
        a_store = named("A_layer", a_sel + scores / t, "stored per token and layer, no recomputation: "
                        "A_sel + A_scores/tp")
    elif static.recompute == "full":
        a_store = named("A_layer", 2 * x.d * half / t if static.sp else 2 * x.d * half, "stored per token and layer, full recomputation: "
                        "the layer's input")
    else:
        a_store = a_sel

    # --- FLOPs ---------------------------------------------------------------------------------------------
    f_gemm = named("F_gemm,tok", x.c_fwd * (x.params_active - x.untied * x.V * x.d),
                   "GEMM FLOPs per token, forward: 2·(N_active − untied·V·d), logits included")
    f_attn = named("F_attn,tok", x.c_fwd * x.L * x.S * x.d,
                   "causal attention FLOPs per token, forward: 2·L·S·d (S/2 keys, QKᵀ and A·V)")
    f_model = named("F_model,tok", 3 * (f_gemm + f_attn), "model FLOPs per token: 3·(GEMM + attention)")
    per_gpu = t * P
    g_fwd = named("F_gemm,mb", f_gemm * tok / per_gpu, "GEMM FLOPs of one micro-batch forward on one GPU")
    a_fwd = named("F_attn,mb", f_attn * tok / per_gpu, "attention FLOPs of one micro-batch forward on one GPU")
    logits = named("A_logits", 3 * x.V / t * x.b_act, "logits stored per token: V/tp in BF16 plus an FP32 copy for "
                   "the loss, 3·V·b_act/tp")
    gemm_io = named("G_io", (4 * x.d + (4 * x.d + 2 * x.f) / t) * x.b_act,
                    "GEMM operand bytes per token and layer: each of QKV, projection, FC1, FC2 reads its input "
                    "row and writes its output row, (4·d + (4·d + 2·f)/tp)·b_act")
    gemm_io_logits = named("G_io,logits", (x.d + x.V / t) * x.b_act, "the LM head's: (d + V/tp)·b_act")
    if static.kernel_gemm:
        # the GEMMs run on the GPU's measured curve, whose times include reading and writing their operand
        # rows: only the stored activations and the loss's logits are elementwise traffic
        e_fwd = named("E_mb", a_sel * tok * Ls + logits * tok / P,
                      "memory-bound bytes of one micro-batch forward: A_sel·b_mb·L_s + the loss's A_logits·b_mb/P "
                      "(the GEMMs' operand rows are in their measured times)")
    else:
        e_fwd = named("E_mb", (a_sel + gemm_io) * tok * Ls + (logits + gemm_io_logits) * tok / P,
                      "memory-bound bytes of one micro-batch forward: (A_sel + G_io)·b_mb·L_s + the loss's and LM "
                      "head's (A_logits + G_io,logits)·b_mb/P")
    if static.recompute == "full":
        rc_g = named("F_gemm,rc", (f_gemm - x.c_fwd * x.V * x.d) * tok / per_gpu,
                     "recomputed GEMM FLOPs (the layers' forward, not the logits)")
        rc_a, rc_e = a_fwd, e_fwd
    elif static.recompute == "selective":
        rc_g, rc_a, rc_e = 0.0, a_fwd, 0.0
    else:
        rc_g, rc_a, rc_e = 0.0, 0.0, 0.0
    R_g, R_a, BW_e = x.R, x.R_attn, x.BW_elem
    if static.kernel_gemm:  # the GPU's measured GEMM curve at the micro-batch's token rows (ccost.model.kernels)
        # an MoE layer: the attention projections' shapes (its experts run as grouped GEMMs, which the
        # single-GEMM N½ and K½ do not describe: docs/kernels.md)
        dense_w = kernels.gemm_widths(x, x.tp, static.moe, static.heads_known, ",train")
        sigma = named("σ_GEMM,train", kernels.shape_factor(dense_w, x.g_nh, x.g_kh),
                      "weight shapes' share of the GEMM rate: Σ N·K / Σ (N + N½)·(K + K½) over a layer's GEMMs "
                      "on this GPU" + (" outside the experts" if static.moe else ""), style="percent")
        R_g = named("R_GEMM,train", kernels.gemm_rate(x.R_gpeak, x.g_eta, x.g_half, tok, sigma) * x.e_fw,
                    "training GEMM rate: the measured curve at the micro-batch's b_mb token rows and the weights' "
                    "shapes × the framework's share, R_peak·η_GEMM·b_mb/(b_mb + M½)·σ_GEMM·e_fw")
    if static.kernel_attention:  # the measured (FlashAttention) prefill-attention curve at the sequence length
        R_a = named("R_attn,train", kernels.gemm_rate(x.R_apeak, x.p_eta, x.p_half, x.S) * x.e_fw,
                    "training attention rate: the measured prefill-attention curve at S tokens × the "
                    "framework's share, R_peak·η_attn·S/(S + S½)·e_fw")
    flops_mb = named("F_mb", 3 * (g_fwd + a_fwd) + rc_g + rc_a,
                     "FLOPs of one micro-batch on one GPU, recomputation included")
    if static.compute_given:
        T_given_mb = named("t_mb", x.T_given / (P * M), "one micro-batch on one GPU: T_compute/(P·M)")
        t_fwd = named("t_fwd", T_given_mb / 3, "forward: a third of it")
        t_bwd = named("t_bwd", T_given_mb - t_fwd, "backward: two thirds")
        t_mb = T_given_mb
        T_flop_mb = T_mem_mb = t_mb
    else:
        t_fwd = named("t_fwd", costs.flop_time(g_fwd, R_g) + costs.flop_time(a_fwd, R_a)
                      + costs.memory_time(e_fwd, BW_e),
                      "forward of one micro-batch: GEMM/R + attention/R + elementwise bytes/HBM")
        t_bwd = named("t_bwd", costs.flop_time(2 * g_fwd + rc_g, R_g) + costs.flop_time(2 * a_fwd + rc_a, R_a)
                      + costs.memory_time(2 * e_fwd + rc_e, BW_e),
                      "backward of one micro-batch: 2× the forward, plus what is recomputed")
        if static.overheads:  # the stack's kernel launches: per layer, forward once, backward twice
            t_fwd = named("t_fwd+", t_fwd + x.t_layer * Ls, "forward + the stack's t_layer·L_s")
            t_bwd = named("t_bwd+", t_bwd + 2 * x.t_layer * Ls, "backward + the stack's 2·t_layer·L_s")
        t_mb = named("t_mb", t_fwd + t_bwd, "one micro-batch on one GPU, forward + backward")
        T_flop_mb = named("T_flop,mb", costs.flop_time(flops_mb, R_g), "micro-batch: FLOPs / achieved FLOP/s")
        T_mem_mb = named("T_mem,mb", costs.memory_time(3 * e_fwd + rc_e, BW_e),
                         "micro-batch: elementwise bytes / HBM bandwidth")

    # --- tensor parallelism ----------------------------------------------------------------------------------
    m_act = named("m_act", tok * x.d * x.b_act, "activations of one micro-batch: b_mb·d·bytes")
    per_layer = 6 if static.recompute == "full" else 4
    n_tp = named("count_TP", per_layer * Ls * M, f"per layer and micro-batch: {per_layer // 2} forward + 2 "
                 "backward" + (" (+ 2 recomputed)" if per_layer == 6 else "") + ", × L_s × M")
    tp_list = []
    if static.sp:
        for kind, key in (("reducescatter", "TPrs"), ("allgather", "TPag")):
            tp_list.append(collective(static, key, kind, "tensor-parallel activations, sequence parallel "
                                          f"({'ReduceScatter' if kind == 'reducescatter' else 'AllGather'})",
                                          n_tp, t, 1, m_act, x))
    else:
        tp_list.append(collective(static, "TP", "allreduce", "tensor-parallel attention and FFN outputs, "
                                      "forward and backward, per micro-batch", n_tp, t, 1, m_act, x, static.algorithm))
    coll += tp_list

    # --- expert parallelism ----------------------------------------------------------------------------------
    ep_list = []
    if static.moe:
        spans = named("spans_EP", minimum(1, floor((x.ep * t - 1) / x.D)),
                      "1 when the EP group spans NVLink domains, else 0")
        k_eff = named("k_eff", x.k - spans * (x.k - x.k_node),
                      "copies of a token sent: min(top_k, route_nodes) across domains, top_k inside one")
        m_ep = named("m_EP", tok * k_eff * x.d * x.b_act / t if static.sp else tok * k_eff * x.d * x.b_act,
                     "tokens routed per rank and micro-batch: b_mb·k_eff·d·bytes" + ("/tp (SP)" if static.sp else ""))
        n_ep = named("count_EP", 4 * x.L_moe / P * M, "dispatch + combine per MoE layer, forward and backward, "
                     "× MoE layers per stage × M")
        ep_list.append(collective(
            static, "EP", "alltoall", "expert-parallel dispatch and combine", n_ep, x.ep, axes.stride(x, "ep", on(static)),
            m_ep, x,
            note="volume (P−1)/P·m per rank, the convention of “Communication Cost Analysis” §2"))
    coll += ep_list

    # --- pipeline ---------------------------------------------------------------------------------------------
    m_pp = named("m_PP", tok * x.d * x.b_act / t if static.sp else tok * x.d * x.b_act, "one micro-batch's activations at a stage boundary"
                 + (" (÷tp under SP)" if static.sp else ""))
    sends = named("count_PP", 2 * x.v * M * minimum(P - 1, 1), "sends per step: activations forward and "
                  "gradients back, per micro-batch and model chunk")
    pp_list = []
    if static.inter is not None:
        stride = named("s_PP", axes.stride(x, "pp", on(static)), "ranks between consecutive stages")
        share = named("x_PP", minimum(P - 1, floor((P - 1) * stride / x.D)) / maximum(P - 1, 1),
                      "share of the stage boundaries that cross NVLink domains")
        pp_list.append(p2p(static, "PP", "pipeline sends inside a domain", sends * (1 - share), m_pp,
                               static.intra, static.intra_name, x))
        pp_list.append(p2p(static, "PPx", "pipeline sends across domains", sends * share, m_pp,
                               static.inter, static.inter_name, x))
    else:
        pp_list.append(p2p(static, "PP", "pipeline sends", sends, m_pp, static.intra, static.intra_name, x))
    coll += pp_list

    # --- context parallelism: ring attention passes K and V around the cp ranks ------------------------
    cp_list = []
    if static.cp:
        m_kv = named("m_KV", tok_mb * 2 * x.d * x.h_kv / x.h * x.b_act / t,
                     "K and V of a micro-batch's sequences on one TP rank: b_mb·2·d·(h_kv/h)·b_act/tp")
        cp_ag = collective(static, "CP", "allgather", "context-parallel K and V passed around the ring, "
                               "forward and backward", named("count_CP", 2 * Ls * M, "per layer and micro-batch, "
                                                             "forward and backward"), x.cp, t, m_kv, x)
        cp_rs = collective(static, "CPrs", "reducescatter", "context-parallel gradients of K and V",
                               named("count_CPrs", Ls * M, "per layer and micro-batch"), x.cp, t, m_kv, x)
        cp_list = [cp_ag, cp_rs]
        coll += cp_list

    # --- data parallelism / FSDP -------------------------------------------------------------------------
    dp_once, fsdp_list = [], []  # (collective, hidden behind: "bwd" | "fwd")
    for suffix, p_gpu, size, stride, label in dp_groups:
        if static.fsdp:
            m_ag = named(f"m_AG{suffix}", p_gpu / Ls * b_w, f"one layer of this GPU's {label}, gathered")
            m_rs = named(f"m_RS{suffix}", p_gpu / Ls * x.b_grad, f"one layer of this GPU's {label} gradients")
            ag = collective(static, f"AG{suffix}", "allgather", f"FSDP parameter gather, forward and "
                                f"backward ({label})", named(f"count_AG{suffix}", 2 * Ls * M,
                                                             "per layer and micro-batch, forward and backward"),
                                size, stride, m_ag, x)
            rs = collective(static, f"RS{suffix}", "reducescatter", f"FSDP gradient reduce-scatter ({label})",
                                named(f"count_RS{suffix}", Ls * M, "per layer and micro-batch"), size, stride,
                                m_rs, x)
            fsdp_list.append((ag, rs))
            coll += [ag, rs]
        elif static.zero == "none":
            m_dp = named(f"m_DP{suffix}", p_gpu * x.b_grad, f"gradients of this GPU's {label}")
            k = collective(static, f"DP{suffix}", "allreduce", f"data-parallel gradients ({label}), once "
                               "per step, bucketed", 1.0, size, stride, m_dp, x, static.algorithm)
            dp_once.append((k, "bwd"))
            coll.append(k)
        else:
            m_rs = named(f"m_DP{suffix}", p_gpu * x.b_grad, f"gradients of this GPU's {label}")
            m_ag = named(f"m_DPag{suffix}", p_gpu * b_w, f"updated {label} of this GPU")
            rs = collective(static, f"DP{suffix}", "reducescatter", f"data-parallel gradients ({label}), "
                                f"{static.zero}: reduce-scattered once per step", 1.0, size, stride, m_rs, x)
            ag = collective(static, f"DPag{suffix}", "allgather", f"updated parameters ({label}), "
                                f"{static.zero}: gathered once per step", 1.0, size, stride, m_ag, x)
            dp_once += [(rs, "bwd"), (ag, "fwd")]
            coll += [rs, ag]

    # --- what is exposed ---------------------------------------------------------------------------------------
    tz = _zero(units.TIME, t_mb)
    per_mb = [k for k in tp_list + ep_list + pp_list]
    c_raw = tz
    for k in ep_list + pp_list:
        c_raw = c_raw + k.total / M
    T_tp = tz
    for k in tp_list:
        T_tp = T_tp + k.total / M
    if tp_list and static.tp_overlap and not static.overlap_given:
        # the stack pipelines each TP collective with the GEMM next to it (Megatron's tp-comm-overlap):
        # only what the micro-batch's GEMMs cannot cover is exposed
        t_gemm = named("t_GEMM,mb", costs.flop_time(3 * g_fwd + rc_g, R_g), "GEMM time of one micro-batch")
        T_tp = named("T_TP,exposed", maximum(T_tp - t_gemm, tz), "TP communication the GEMMs cannot cover: "
                     "max(T_TP/M − t_GEMM, 0)")
    c_raw = c_raw + T_tp
    if static.overlap_given:
        keep = 1 - x.overlap
        c_mb = named("c_mb", c_raw * keep, "exposed communication per micro-batch: (TP + EP + PP)/M·(1 − overlap)")
        once = tz
        for k, _ in dp_once:
            once = once + k.total * keep
        for ag, rs in fsdp_list:
            c_mb = c_mb + (ag.total + rs.total) / M * keep
        for k in cp_list:
            c_mb = c_mb + k.total / M * keep
        once = named("T_once", once, "exposed once-per-step communication: T_DP·(1 − overlap)")
    else:
        c_mb = named("c_mb", c_raw, "exposed communication per micro-batch: TP + EP + PP sit between "
                     "dependent kernels") if per_mb else tz
        once = tz
        for k, phase in dp_once:
            cover = t_bwd if phase == "bwd" else t_fwd
            once = once + maximum(k.total - cover * (Ls - 1) / Ls, k.total / Ls)
        for ag, rs in fsdp_list:
            t_ag, t_rs = ag.cost.time, rs.cost.time
            hid = Ls * (maximum(t_ag - t_fwd / Ls, tz) + maximum(t_ag + t_rs - t_bwd / Ls, tz))
            c_mb = c_mb + hid
            once = once + t_ag
        if cp_list:  # each ring step's transfer runs behind the attention of the chunk already held
            t_at_f = named("t_attn,layer", costs.flop_time(a_fwd, R_a) / Ls, "attention forward of one layer")
            c_mb = named("c_mb,CP", c_mb + Ls * (maximum(cp_list[0].cost.time - t_at_f, tz)
                                                 + maximum(cp_list[0].cost.time + cp_list[1].cost.time
                                                           - 2 * t_at_f, tz)),
                         "exposed per micro-batch, with the K/V ring not hidden behind attention: "
                         "L_s·(max(T_CP − t_attn, 0) + max(T_CP + T_CPrs − 2·t_attn, 0))")
        if dp_once or fsdp_list:
            once = named("T_once", once, "exposed once per step: what the last micro-batch's compute cannot cover "
                         "(DP: max(T − t_bwd·(L_s−1)/L_s, T/L_s); FSDP: the first layer's gather)")
        if fsdp_list:
            c_mb = named("c_mb,FSDP", c_mb, "exposed per micro-batch, with FSDP gathers not hidden behind the "
                         "previous layer")

    if static.overheads:
        once = named("T_once+", once + x.t_step, "exposed once per step + the stack's fixed time per step "
                     "(optimizer step, host work)")

    # --- schedule ------------------------------------------------------------------------------------------
    slots = named("slots", M + (P - 1) / x.v, "micro-batch slots of the step: M + (P−1)/v")
    bubble = named("bubble", (P - 1) / x.v / slots, "pipeline bubble ((P−1)/v)/(M + (P−1)/v)", style="percent")
    opt_sharded = static.fsdp or static.zero != "none"
    if static.kernel_gemm and not static.compute_given:
        # the optimizer step streams this GPU's share of the parameters once per step: an elementwise kernel
        n_opt = n_shard if opt_sharded else params_gpu
        B_opt = named("B_opt", n_opt * (x.b_grad + 2 * x.b_opt + b_w),
                      "optimizer step's memory traffic: each parameter of this GPU's optimizer state reads its "
                      "gradient, reads and writes Adam's state (master weights, m, v) and writes its weight: "
                      "N_opt·(b_grad + 2·b_opt + b_w)")
        T_opt = named("T_opt", costs.memory_time(B_opt, BW_e), "optimizer step: B_opt / (HBM bandwidth × "
                      "elementwise_efficiency)")
    else:
        T_opt = tz
    step = named("T_step", slots * (t_mb + c_mb) + once + T_opt,
                 "training step: (M + (P−1)/v)·(t_mb + c_mb) + T_once + T_opt")
    exposed = named("T_exposed", slots * c_mb + once, "communication the step waits for: slots·c_mb + T_once")

    # --- memory --------------------------------------------------------------------------------------------
    if static.schedule == "gpipe":
        inflight = named("n_flight", M, "micro-batches held (GPipe: all M)")
    elif static.schedule == "interleaved":
        inflight = named("n_flight", minimum(M, P) * (1 + (P - 1) / (P * x.v)),
                         "micro-batches held (interleaved: min(M, P)·(1 + (P−1)/(P·v)))")
    else:
        inflight = named("n_flight", minimum(M, P), "micro-batches held (1F1B: min(M, P))")
    mem_act = a_store * tok * Ls * inflight + logits * tok
    if static.recompute == "full":
        mem_act = mem_act + a_sel * tok
    mem_act = named("mem_activations", mem_act, "activations held: A_layer·b_mb·L_s·n_flight + logits "
                    "b_mb·V/tp·3·b_act" + (" + one layer recomputed" if static.recompute == "full" else ""))
    if static.fsdp:
        mem_weights = named("mem_weights", n_shard * b_w + weights_gpu / Ls,
                            "weight bytes held: the FSDP shard + one gathered layer")
    else:
        mem_weights = weights_gpu
    grads_sharded = static.fsdp or static.zero == "zero2"
    mem_grads = named("mem_grads", (n_shard if grads_sharded else params_gpu) * x.b_grad,
                      "gradient bytes held" + (" (sharded)" if grads_sharded else ""))
    mem_opt = named("mem_optimizer", (n_shard if opt_sharded else params_gpu) * x.b_opt,
                    "Adam state: master weights + m + v" + (" (sharded)" if opt_sharded else ""))
    mem = memory(x, weights=mem_weights, gradients=mem_grads, optimizer=mem_opt, activations=mem_act)
    tokens = named("tokens_step", x.dp * x.ep * x.B * x.S, "tokens per step, all replicas: dp·ep·B·S")

    # --- step-level compute terms ------------------------------------------------------------------------------
    T_compute = named("T_compute", M * t_mb + T_opt, "compute per step on one GPU: M·t_mb + T_opt")
    flops_gpu = named("F_GPU", M * flops_mb, "FLOPs per step per GPU, recomputation included")
    flops_model_gpu = named("F_model,GPU", f_model * x.B * x.S / (per_gpu * x.cp) if static.cp
                            else f_model * x.B * x.S / per_gpu,
                            "model FLOPs per step per GPU: F_model,tok·B·S/(tp·pp)")
    T_one = named("T_1", T_compute * t * P * x.ep * x.cp if static.cp else T_compute * t * P * x.ep,
                  "the same work on one GPU: T_compute·tp·pp·ep" + ("·cp" if static.cp else ""))
    T_flop = named("T_flop", M * T_flop_mb, "step: FLOPs / achieved FLOP/s")
    T_mem = named("T_mem", M * T_mem_mb, "step: elementwise bytes / HBM bandwidth")
    comp = Compute(weights_gpu=weights_gpu, kv_gpu=0.0, bytes_gpu=weights_gpu, flops_gpu=flops_gpu, T_mem=T_mem,
                   T_flop=T_flop, T_stage=T_compute, T_compute=T_compute, T_one=T_one, params_gpu=params_gpu,
                   memory=mem, tokens_step=tokens, bytes_mb=e_fwd, flops_mb=flops_mb, T_mem_mb=T_mem_mb,
                   T_flop_mb=T_flop_mb, t_mb=t_mb)
    terms = TrainTerms(slots, bubble, t_fwd, t_bwd, c_mb, once, exposed, step, f_model, flops_model_gpu,
                       inflight, a_store, groups=(f_gemm, f_attn, f_model, a_sel, a_store, t_fwd, t_bwd, c_mb,
                                                  once, inflight, mem_act), r_gemm=R_g)
    return Program(static, x, tuple(coll), comp, terms)


def analyse_train(program):
    """``ccost.model.analysis.Metrics`` of a training step (see the module docstring)."""
    x, c, tt = program.inputs, program.compute, program.train
    coll = [k for k in program.collectives if not A.costs_nothing(k)]
    t0, b0, n0 = (derive.zero(d, c.T_compute) for d in (units.TIME, units.INFORMATION, units.DIMENSIONLESS))
    T_comm = named("T_comm", total((k.total for k in coll), t0), "communication per step on one GPU: "
                   "Σ count × time")
    T_lat = named("T_lat", total((k.count * k.cost.latency for k in coll), t0), "latency term: Σ count·α·hops")
    T_bw = named("T_bw", total((k.count * k.cost.bandwidth_time for k in coll), t0),
                 "bandwidth term: Σ count·volume/B")
    volume = named("V_step", total((k.count * k.cost.volume for k in coll), b0), "bytes each GPU sends per step")
    hops = named("hops_step", total((k.count * k.cost.hops for k in coll), n0), "latency steps per step")
    latency = named("T_latency", c.T_compute + tt.exposed, "compute + exposed communication, no bubble")
    ovh = named("overhead", costs.overhead(T_comm, c.T_compute), "T_comm / T_compute", style="percent")
    in_flight = named("in_flight", x.pp * (1 - tt.bubble), "stages busy at once: P·(1 − bubble)")
    gpus = A.gpus_used(program)
    speedup = named("speedup", x.dp * costs.speedup(c.T_one, tt.step), "against one GPU: dp·T_1/T_step")
    eff = named("efficiency", speedup / gpus, "speedup / N", style="percent")
    thr = named("throughput", c.tokens_step / tt.step, "tokens/s: tokens_step/T_step")
    thr_gpu = named("throughput_GPU", thr / gpus, "tokens/s per GPU")
    eta = named("η", c.T_compute / (c.T_compute + tt.exposed),
                "scaling efficiency T_compute/(T_compute + T_exposed), “Communication Cost Analysis” §6",
                style="percent")
    return A.Metrics(T_comm, T_lat, T_bw, tt.exposed, c.T_compute, latency, tt.step, ovh, tt.bubble, in_flight,
                     gpus, speedup, eff, thr, thr_gpu, volume, hops, eta)


def record(plan, priced: Priced) -> dict:
    """The ``training`` section of a training plan's document (float mode)."""
    program, m = priced.program, priced.metrics
    tt, f = program.train, A.finite
    rate, mfu = model_rates(program, m)
    return {
        "schedule": plan.schedule,
        "virtual_stages": int(f(program.inputs.v) or 1),
        "recompute": plan.recompute,
        "sequence_parallel": program.static.sp,
        "optimizer_sharding": "fsdp" if program.static.fsdp else plan.optimizer_sharding,
        "model_flops_per_token": f(tt.flops_model_token),
        "model_flops_per_gpu_s": f(rate),
        "mfu": f(mfu),
        "forward_time_s": f(tt.t_fwd),
        "backward_time_s": f(tt.t_bwd),
        "exposed_per_microbatch_s": f(tt.c_mb),
        "exposed_once_s": f(tt.once),
        "microbatches_in_flight": f(tt.in_flight_mb),
        "activation_bytes_per_token_layer": f(tt.act_token_layer),
    }


def explain_groups(plan, priced: Priced) -> list[tuple[str, list]]:
    """The derivation of a training step, grouped for reading: the step's groups with the schedule's
    (FLOPs, activations, overlap) before memory, and model FLOP/s and MFU among the totals."""
    program, m = priced.program, priced.metrics
    rate, mfu = model_rates(program, m)
    return A.step_groups(program, m, [("training: FLOPs, activations, overlap", list(program.train.groups))],
                         [rate, mfu])


def model_rates(program, m) -> tuple[Num, Num]:
    """(model FLOP/s per GPU, MFU) of a training step."""
    tt = program.train
    rate = named("R_model", tt.flops_model_gpu / m.step, "model FLOP/s per GPU: F_model,GPU/T_step")
    mfu = named("MFU", rate / program.inputs.R_peak, "model FLOP/s per GPU / peak", style="percent")
    return rate, mfu
