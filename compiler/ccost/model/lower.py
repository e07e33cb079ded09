"""Lowering: a plan → its collective program and compute terms.

``lower(static, x)`` is the one plan-evaluation function of ccost. It runs in the three modes of
``ccost.derive``: ``x``'s numbers are Python floats (``ccost eval``), numpy arrays (the search over layouts
evaluates thousands of tp/pp/dp/batch combinations at once) or derivation ``Value``s (``ccost explain`` and
the review). Therefore nothing below branches with a Python ``if`` on a number that could be an array:
structural choices that depend on a number (does the TP group leave the NVLink domain? how many pipeline
boundaries cross nodes?) are ``where``/``minimum``/``floor`` expressions, and a collective on a group of
one rank simply costs 0 (``ccost.model.costs``). What *is* decided in Python is fixed per plan and lives in
``Static``: the phase, the AllReduce algorithm, FSDP, whether the model is a mixture of experts, which
inputs the spec gave.

Every formula of the cost model lives in ``ccost.model.costs`` (collectives, roofline, bubble); this module only
says *which* collectives a plan implies, how many, how large, on which group and link.

Counts are per step **along the critical path**: every stage's collectives as if the stages ran one
after another (``ccost.model.analysis`` divides by the pipeline's overlap for the pipelined step time).

The model, per step (decode: one token for every sequence; prefill: the prompt; a training plan is
``ccost.model.training``'s, which ``ccost.model.phases`` picks), with B = batch, S = tokens per sequence per step (1 in
decode, ``seq`` otherwise), d = hidden, L = layers:

* **Rank placement** (decides which groups leave the NVLink domain): ranks are numbered TP fastest, then
  EP, then DP, then PP (Megatron's tp-ep-dp-pp order): the chattiest groups get the NVLink domain first,
  and the pipeline, one small send per stage boundary, is the axis left to cross nodes. A group of P ranks
  at stride s has g = clamp(D/s, 1, P) of its ranks in each NVLink domain of D GPUs.
* **TP**: 2 AllReduces per layer (attention output, FFN output) of B·S·d·activation bytes on the tp ranks;
* **PP**: one point-to-point send of B·S·d·activation bytes per stage boundary (pp−1 per step). A boundary crosses domains when consecutive stages sit in
  different domains: with stages tp·ep·dp ranks apart, ⌊(pp−1)·tp·ep·dp/D⌋ of the pp−1 boundaries do
  (at most pp−1). The whole batch goes as one message per boundary, as the notes price it (A3: 1 MiB);
  splitting it into M micro-batches would add (M−1)·α per boundary, which the model leaves out.
  Serving under a stack with ``pipeline = steady`` (decode, prefill): every TP, EP and PP message carries one
  micro-batch (B/M sequences) and the counts are one micro-batch's path, consistent with t_mb
  (``ccost.model.analysis._steady``: no flush).
* **EP**: 2 All-to-Alls (dispatch, combine) per MoE layer of B·S·top_k·d·activation bytes per rank on
  the ep ranks. Volume convention: “Communication Cost Analysis”'s (P−1)/P·m (the local share stays
  put); “Communication Cost Math — Distributed Inference” (§2) omits that factor.
* **DP**: serving replicas exchange nothing per step (training's gradient AllReduce and FSDP's
  collectives are ``ccost.model.training``'s).
* **CP** (context parallelism, ``cp``; training: ``ccost.model.training``): the cp ranks sit next to the tp
  ranks (Megatron's tp-cp-ep-dp-pp) and split every sequence: a prefill's tokens (activations, FLOPs and
  KV cache per rank ÷ cp), a decode step's context (KV cache and attention ÷ cp; the new token's weight
  GEMMs run on every cp rank). Weights are replicated over cp. Ring attention: per layer each rank sends
  its local KV block (its KV cache of one layer, KV_GPU·pp/L) to its ring neighbour cp − 1 times, a
  point-to-point send each, (cp − 1)·L per step; every step runs at the pace of the ring's slowest link
  (inter-node once tp·cp exceeds the NVLink domain). Decode with cp passes the whole KV cache around each
  step (engines that pass the queries instead are cheaper: not modelled).
* **Compute**, per GPU and stage: the roofline max(bytes read / HBM bandwidth, FLOPs / achieved FLOP/s).
  Bytes read: this GPU's weights (for a MoE model, every local expert: with B·top_k routed tokens most
  experts are hit; at tiny batch this overestimates) plus, in decode with ``seq``, the KV cache of B
  sequences of ``seq`` tokens. FLOPs: 2·active params·B·S / (tp·pp); attention's
  context-dependent FLOPs are not modelled. A token crosses the pp stages one after another, so the
  step's compute on the critical path is pp × the stage's time (A3: 15.11 ms for TP=8 × PP=2).
  ``compute_time`` in the plan overrides it. **Per micro-batch** (the pipelined step, ``ccost.model.analysis``:
  (M + P − 1)·t_mb + exposed/(P·(1 − bubble))): t_mb = max(bytes / HBM bandwidth, FLOPs / achieved FLOP/s)
  with the stage's *whole* weights on this GPU plus (decode with ``seq``) 1/M of its KV cache, and 1/M of
  its FLOPs: each micro-batch re-reads the weights, so splitting a memory-bound decode step into M
  micro-batches costs ~M× the weight reads (A3 option B, M = 32: 7.556 ms per micro-batch and stage, not
  15.11/2/32 ms). FLOP-bound, t_mb = T_stage/M; with ``compute_time`` given, t_mb = T_stage/M.
  The single-GPU reference T₁ (for speedup) runs the same model
  instance's work (ep·B sequences) on one GPU: all weights, the instance's KV cache, no communication.
* **The software stack** (``stack``): HBM bandwidth × ``hbm_efficiency``; peak FLOP/s ×
  ``gemm_efficiency`` (a GPU's measured ``achieved_flops`` wins); ``layer_overhead``·L/pp per stage (and per
  micro-batch); host time T_host = ``step_overhead`` + ``seq_overhead``·B once per step (the per-sequence
  part in decode and prefill only: B running sequences per replica); every collective at least
  ``collective_floor``.
  With ``roofline = operator`` (every bundled serving profile), decode and prefill price each operator
  class on its own and add them (``_operators``): the weight GEMMs (FP8 weights at ``fp8_flops``), the MoE
  experts the step's tokens hit (E·(1 − (1 − k/E)^T) per layer for T tokens routed uniformly), attention
  (KV bytes against FLOPs growing with the context, at ``attention_efficiency``). ``roofline = step``
  (``ideal``, and training always) is the whole-step roofline above. An MLA model caches its latent,
  L·(kv_lora_rank + qk_rope_head_dim)·bytes per token, on every TP rank; a KV cache without ``kv_heads``
  or a latent is an error (E104).
* **Memory** per GPU: weights and the KV cache (``seq`` tokens of B sequences; KV heads split over
  min(tp, kv_heads) ranks, replicated beyond). Activations are not modelled (training's memory, with its
  gradients, optimizer state and activations, is ``ccost.model.training``'s).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ccost import axes, derive, units
from ccost.model import costs, kernels
from ccost import spec as S
from ccost.derive import floor, maximum, minimum, named
from ccost.model.program import Collective, Compute, Program, collective, memory, on, p2p
from ccost.schema import PhaseKind, phase_kind

Num = Any  # float | np.ndarray | derive.Value

#: Adam with an FP32 master copy: master weights, first and second moments, 4 bytes each.
OPTIMIZER_BYTES_PER_PARAM = 12.0


# ---------------------------------------------------------------------------------------------------
# Inputs

@dataclass(frozen=True)
class Static:
    """The structural choices of a plan: fixed per plan, never arrays, decided in Python."""

    plan: str
    phase: str  # the phase whose step this is (ccost.schema.PHASE_KINDS; ccost.model.phases picks its cost model)
    algorithm: str  # an AllReduce algorithm of ccost.collectives.ALGORITHMS, or auto
    cross_node: str  # auto | flat | hierarchical
    fsdp: bool
    moe: bool  # the model has experts (active_params splits them from the dense part; without it every
    # parameter counts as active and dense: replicated over the EP ranks, a conservative bound)
    kv: bool  # a KV cache is held (decode or prefill with seq)
    kv_read: bool  # decode reads the KV cache every step
    kv_heads_known: bool
    heads_known: bool
    compute_given: bool  # plan.compute_time overrides the roofline
    intra: costs.LinkParams
    inter: costs.LinkParams | None
    intra_name: str
    inter_name: str | None
    one_shot_volume: str = "egress"  # egress | ring: what a one-shot AllReduce is charged (costs.volume)
    # training (ccost.model.training): schedule, recomputation, sequence parallelism, optimizer sharding, and
    # whether the plan writes `overlap` (then it overrides the derived overlap)
    schedule: str = "one_f_one_b"
    recompute: str = "selective"
    sp: bool = False
    zero: str = "none"
    overlap_given: bool = False
    tp_overlap: bool = False  # the stack overlaps TP collectives with the GEMMs (Megatron's tp-comm-overlap)
    cp: bool = False  # training with context parallelism (cp > 1)
    stack: str = "ideal"  # the software-stack profile that prices the plan
    stack_source: str | None = None
    stack_default: bool = False  # the plan named no stack: the bundled default for its phase
    overheads: bool = False  # the stack charges a fixed time per step or per layer
    steady: bool = False  # serving pipeline in steady state: collectives per micro-batch, no flush
    roofline: str = "step"  # operator: per-operator roofline (decode, prefill); step: the notes' one roofline
    mla: bool = False  # the KV cache holds an MLA latent per token (kv_lora_rank + qk_rope_head_dim)
    head_dim_given: bool = False
    floor: bool = False  # the stack's collectives have a small-message floor
    seq_host: bool = False  # decode, prefill: the stack charges host time per running sequence (seq_overhead)
    # decode, prefill under `rates = kernels` (ccost.model.kernels): the weight GEMMs (and MoE experts) priced on the
    # GPU's measured GEMM curve, attention on its decode or prefill attention curve; the kernels block's name
    kernel_gemm: bool = False
    kernel_attention: bool = False
    kernels: str | None = None
    host_overlap: bool = False  # decode, prefill: host time runs behind the GPU's step (max, not sum)
    train: bool = False  # a training step (its phase ``trains``: ccost.model.training's model)
    seq_step: bool = False  # every sequence brings its `seq` tokens to the step (prefill), not one (decode)


@dataclass(frozen=True)
class Inputs:
    """The numbers of a plan, as floats, arrays or derivation leaves (SI units)."""

    tp: Num
    pp: Num
    ep: Num
    dp: Num
    B: Num  # batch, sequences per replica (per dp·ep rank)
    S: Num  # tokens per sequence per step: 1 in decode, seq otherwise
    ctx: Num  # context length held in the KV cache (seq; 0 when absent)
    M: Num  # micro-batches
    overlap: Num
    L: Num
    d: Num
    h: Num  # attention heads (1 when unknown; unused then)
    h_kv: Num  # KV heads (= h when unknown)
    params: Num  # total parameters
    params_active: Num  # active parameters per token (= params for a dense model)
    E: Num  # experts (1 for a dense model)
    k: Num  # top_k (1 for a dense model)
    L_moe: Num  # MoE layers (0 for a dense model)
    W: Num  # total weight bytes
    b_act: Num
    b_kv: Num
    b_grad: Num
    D: Num  # GPUs per NVLink domain
    BW_hbm: Num
    R: Num  # achieved FLOP/s
    mem: Num  # HBM capacity per GPU
    max_mem: Num  # policy: usable share of memory
    T_given: Num  # plan.compute_time (0 when absent; unused then)
    c_F: Num  # FLOPs per parameter per token: 2 forward, 6 forward + backward
    b_opt: Num  # optimizer bytes per parameter (Adam: 12)
    # training (ccost.model.training); defaults keep hand-built Inputs valid
    v: Num = 1.0  # interleaved schedule: model chunks per GPU
    V: Num = 0.0  # vocabulary (0 when unknown)
    f: Num = 0.0  # FFN inner size (0 when unknown: 4·d)
    untied: Num = 0.0  # 1 when the input embedding is a separate matrix from the LM head (counted in params)
    k_node: Num = 1.0  # MoE: copies of a token the All-to-All sends: min(top_k, route_nodes)
    R_peak: Num = 1.0  # peak dense FLOP/s (MFU's denominator)
    c_fwd: Num = 2.0  # FLOPs per multiply-add
    b_master: Num = 4.0  # master-weight bytes per parameter
    BW_elem: Num = 1.0  # elementwise kernels' bandwidth: HBM × the stack's elementwise_efficiency
    cp: Num = 1.0  # training: context-parallel degree
    t_step: Num = 0.0  # stack: fixed time per step
    t_layer: Num = 0.0  # stack: time per layer per step
    t_seq: Num = 0.0  # stack: host time per running sequence per step (decode, prefill)
    T_floor: Num = 0.0  # stack: the least time of one collective
    hd: Num = 1.0  # attention head size (head_dim, else d/h)
    kv_lat: Num = 0.0  # MLA: latent elements cached per token per layer (kv_lora_rank + qk_rope_head_dim)
    d_c: Num = 0.0  # MLA: kv_lora_rank
    R_attn: Num = 1.0  # achieved FLOP/s in attention: peak flops × attention_efficiency
    # measured kernel curves (ccost.model.kernels; Static.kernel_gemm, kernel_attention), unused otherwise
    BW_peak: Num = 1.0  # the GPU's hbm_bandwidth (the curves carry their own achieved shares)
    R_gpeak: Num = 1.0  # the peak the GEMM curve is a share of: flops, or fp8_flops for FP8 weights
    R_apeak: Num = 1.0  # the peak the prefill-attention curve is a share of (BF16 flops)
    g_eta: Num = 1.0  # GEMM: η
    g_half: Num = 0.0  # GEMM: M½ (token rows)
    g_ew: Num = 1.0  # GEMM: share of HBM bandwidth streaming weights
    g_t0: Num = 0.0  # GEMM: fixed time of one kernel
    g_nh: Num = 0.0  # GEMM: N½ (the weight's output width at half the rate)
    g_kh: Num = 0.0  # GEMM: K½ (its input width)
    b_gin: Num = 2.0  # GEMM: bytes per element of its input activations (1 for FP8 weights: the FP8 kernel's input)
    a_ew: Num = 1.0  # decode attention: share of HBM bandwidth in the KV read
    a_t0: Num = 0.0  # decode attention: fixed time of one kernel
    a_c: Num = 0.0  # decode attention: time per sequence × query head
    a_half: Num = 0.0  # decode attention: (sequence × KV head) streams at half the bandwidth
    p_eta: Num = 1.0  # prefill attention: η_a
    p_half: Num = 0.0  # prefill attention: S½
    p_t0: Num = 0.0  # prefill attention: fixed time of one kernel
    e_fw: Num = 1.0  # train under kernel curves: the framework's share of the measured kernel rates


def with_arrays(x: Inputs, **arrays) -> Inputs:
    """``x`` with some inputs replaced (by numpy arrays, for a search): ``with_arrays(x, tp=tps, dp=dps)``."""
    return replace(x, **arrays)


@dataclass(frozen=True)
class Step:
    """A step of another phase that a plan runs (``ccost.model.serve``: a serve plan's decode and mixed steps are
    decode and prefill steps): its phase, and the context ``seq`` its KV cache holds (None: no KV cache).
    ``prepare`` prices it as the plan's own step of that phase; the rows it runs (``B``) and its contexts are
    then given with ``with_arrays``."""

    phase: str
    seq: int | None


def prepare(plan: S.Plan, policy: S.Policy, derivation: bool = False,
            step: Step | None = None) -> tuple[Static, Inputs]:
    """The ``Static`` choices and ``Inputs`` of a checked plan (or of one ``step`` of it): floats, or
    (``derivation=True``) named derivation leaves with units and sources. The plan is one the caller has
    checked can be evaluated (``ccost.check.plan.evaluation_errors``, which ``ccost.evaluate`` and
    ``ccost.search`` run first); its stack is the checker's (the bundled default when it names none)."""
    model, cluster, stack = plan.model, plan.cluster, plan.stack
    assert model is not None and cluster is not None and cluster.gpu is not None
    assert stack is not None, f"plan `{plan.name}` has no stack: the checker gives every plan one"
    phase, seq = (plan.phase, plan.seq) if step is None else (step.phase, step.seq)
    gpu = cluster.gpu
    moe = bool(model.is_moe and model.experts and model.experts > 1)
    params = float(model.params) if model.params else model.total_weight_bytes / S.DTYPE_BYTES[model.weights]
    active = float(model.active_params) if (moe and model.active_params) else params
    heads_known = bool(model.heads)
    kv_heads_known = bool(model.kv_heads) or heads_known
    kind = phase_kind(phase)
    kv = bool(seq) and kind.kv_cache
    roofline = "step" if kind.trains else stack.roofline
    # a training step prices its GEMMs and attention on the curves too, under a stack with rates = kernels
    kern = (kernels_for(gpu, stack) if (roofline == "operator" or kind.trains) and gpu.achieved_flops is None
            else None)
    fp8_w = fp8_weights(model, gpu)
    gemm_curve = kern.gemm(fp8_w) if kern is not None else None
    gemm_kern = kern
    if kern is not None and gemm_curve is None:
        # the engine's table has no usable GEMM curve of this dtype (docs/kernels.md): the same hardware
        # operation as the GPU's other blocks measured it, the first that has one
        gemm_kern = next((k for k in gpu.kernels if k.gemm(fp8_w) is not None), kern)
        gemm_curve = gemm_kern.gemm(fp8_w)
    # training: the framework's attention kernels, the GPU's block of the stack's attention_engine if it has one
    attn_kern = attention_kernels_for(gpu, stack, kern) if kern is not None and kind.trains else kern
    attn_curve = kern is not None and (attn_kern.prefill_attention if kind.trains else static_kv_curve(kern, kind))
    static = Static(
        plan=plan.name, phase=phase, algorithm=plan.allreduce,
        cross_node=plan.cross_node, fsdp=bool(plan.fsdp) and kind.trains,
        moe=moe, kv=kv, kv_read=kv and kind.reads_kv,
        kv_heads_known=kv_heads_known, heads_known=heads_known, compute_given=plan.compute_time is not None,
        intra=costs.LinkParams.from_link(cluster.intra_node, derivation, "intra"),
        inter=(costs.LinkParams.from_link(cluster.inter_node, derivation, "inter")
               if cluster.inter_node is not None else None),
        intra_name=cluster.intra_node.name,
        inter_name=cluster.inter_node.name if cluster.inter_node is not None else None,
        one_shot_volume=plan.one_shot_volume,
        schedule=plan.schedule, recompute=plan.recompute, sp=bool(plan.sequence_parallel) and plan.tp > 1,
        zero=plan.optimizer_sharding, overlap_given="overlap" in plan.spans,
        tp_overlap=bool(stack.tp_comm_overlap), **{a: True for a in axes.active(plan, phase)},
        stack=stack.name, stack_source=stack.source, stack_default=not plan.stack_named,
        overheads=bool(stack.step_overhead or stack.layer_overhead
                       or (stack.seq_overhead and not kind.trains)), floor=bool(stack.collective_floor),
        roofline="step" if kind.trains else stack.roofline, mla=bool(model.kv_lora_rank),
        steady=not kind.trains and stack.pipeline == "steady",
        head_dim_given=bool(model.head_dim),
        seq_host=bool(stack.seq_overhead) and not kind.trains,
        kernel_gemm=gemm_curve is not None, kernel_attention=bool(attn_curve),
        kernels=kern.name if kern is not None else None,
        host_overlap=bool(stack.host_overlap) and not kind.trains,
        train=kind.trains, seq_step="S" in kind.seq_feeds,
    )
    fp8_gemm = static.roofline == "operator" and fp8_w
    act = S.DTYPE_BYTES[model.activations]
    s_step = (seq or 1) if "S" in kind.seq_feeds else 1  # decode: one new token per sequence
    values = dict(
        **{a.name: axes.degree(plan, a.name, phase) for a in axes.AXES if not a.optional}, B=plan.batch, S=s_step, ctx=seq or 0,
        M=plan.microbatches, overlap=plan.overlap, L=model.layers, d=model.hidden,
        h=model.heads or 1, h_kv=model.kv_heads or model.heads or 1,
        params=params, params_active=active, E=model.experts or 1, k=model.top_k or 1,
        L_moe=(model.moe_layers or model.layers) if moe else 0,
        W=model.total_weight_bytes, b_act=act, b_kv=S.DTYPE_BYTES[model.kv_cache],
        b_grad=S.DTYPE_BYTES[model.grads], D=cluster.domain, BW_hbm=gpu.hbm_bandwidth * stack.hbm_efficiency,
        R=(gpu.achieved_flops if gpu.achieved_flops is not None
           else (gpu.fp8_flops if fp8_gemm else gpu.flops) * stack.gemm_efficiency),
        mem=gpu.memory, max_mem=policy.max_memory, T_given=plan.compute_time or 0.0,
        c_F=kind.c_F,
        b_opt=S.DTYPE_BYTES[plan.master_weights] + OPTIMIZER_BYTES_PER_PARAM - 4.0,
        v=plan.virtual_stages if plan.schedule == "interleaved" else 1, V=model.vocab or 0,
        f=model.ffn or 4 * model.hidden,
        b_gin=1.0 if fp8_w else act,
        untied=1.0 if (model.vocab and not model.tied_embeddings) else 0.0,
        k_node=min(model.top_k or 1, model.route_nodes or (model.top_k or 1)), R_peak=gpu.flops,
        c_fwd=2.0, b_master=S.DTYPE_BYTES[plan.master_weights],
        BW_elem=gpu.hbm_bandwidth * stack.elementwise_efficiency,
        **{a.name: axes.degree(plan, a.name, phase) for a in axes.AXES if a.optional},
        t_step=stack.step_overhead, t_layer=stack.layer_overhead, T_floor=stack.collective_floor,
        e_fw=stack.framework_efficiency,
        t_seq=stack.seq_overhead if not kind.trains else 0.0,
        hd=model.head_dim or (model.hidden / model.heads if model.heads else 1),
        kv_lat=(model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0), d_c=model.kv_lora_rank or 0,
        R_attn=gpu.flops * stack.attention_efficiency,
        **_curve_values(kern, gemm_curve, gpu, fp8_w, model.kv_cache == "fp8", gemm_kern, attn_kern),
    )
    if not derivation:
        return static, Inputs(**{k: float(v) for k, v in values.items()})
    return static, Inputs(**{k: _leaf(k, v, plan, model, cluster, policy, stack, kind,
                                       gemm_kern if k in _GEMM_KEYS else attn_kern if k in _PREFILL_KEYS
                                       else kern) for k, v in values.items()})


def fp8_weights(model: S.Model, gpu: S.Gpu) -> bool:
    """The model's weights are FP8 and the GPU runs FP8 GEMMs (its ``fp8_flops``): the FP8 curves and peak."""
    return model.weights == "fp8" and gpu.fp8_flops is not None


def kernels_for(gpu: S.Gpu, stack: S.Stack) -> S.Kernels | None:
    """The measured kernel curves a plan on ``gpu`` under ``stack`` is priced on: None unless the stack has
    ``rates = kernels`` and the GPU lists ``kernels`` blocks; then the block whose engine is the stack's (a
    stack's ``engine``, when the language has one, names it: "vllm" matches "vllm 0.24.0"), else the first."""
    if stack.rates != "kernels" or not gpu.kernels:
        return None
    engine = stack.engine
    if engine:
        for k in gpu.kernels:
            if k.engine and k.engine.split()[0].lower() == str(engine).split()[0].lower():
                return k
    return gpu.kernels[0]


def attention_kernels_for(gpu: S.Gpu, stack: S.Stack, kern: S.Kernels) -> S.Kernels:
    """The block a training step's attention is priced on: the GPU's block measured under the stack's
    ``attention_engine`` (FlashAttention-2, cuDNN: the attention kernels the framework runs), else ``kern``
    (the engine's block) when the stack names none or the GPU has no such block."""
    name = stack.attention_engine
    if name:
        for k in gpu.kernels:
            if k.engine and k.prefill_attention and k.engine.lower().startswith(str(name).lower()):
                return k
    return kern


def static_kv_curve(kern: S.Kernels, kind: PhaseKind) -> bool:
    """The kernels block has the attention curve of a step of phase ``kind``: decode's (the KV cache read
    every step) or prefill's (causal, the KV cache written); none for a step without a KV cache."""
    return kern.decode_attention if kind.reads_kv else kern.prefill_attention if kind.kv_cache else False


def _curve_values(kern: S.Kernels | None, gemm: tuple | None, gpu: S.Gpu, fp8: bool, fp8_kv: bool = False,
                  gemm_kern: S.Kernels | None = None, attn_kern: S.Kernels | None = None) -> dict:
    """The curve inputs of ``prepare`` (neutral values without curves: the Inputs defaults); the decode
    attention curve of the KV cache's dtype (``fp8_kv``: the FP8 curve where the block has one); the GEMM
    curve of ``gemm_kern`` (the block it came from, ``kern`` unless that block lacks it); the prefill-attention
    curve of ``attn_kern`` (training: the framework's attention kernels; ``kern`` when not given)."""
    if kern is None:
        return {}
    flops = kern.flops or gpu.flops
    out: dict = {"BW_peak": kern.hbm_bandwidth or gpu.hbm_bandwidth, "R_apeak": flops}
    gk = gemm_kern or kern
    if gemm is not None:
        out.update(R_gpeak=(gk.fp8_flops or gpu.fp8_flops) if fp8 else (gk.flops or gpu.flops), g_eta=gemm[0],
                   g_half=gemm[1], g_ew=gemm[2], g_t0=gemm[3], g_nh=gemm[4], g_kh=gemm[5])
    dec = kern.decode_curve(fp8_kv)
    if dec is not None:
        out.update(a_ew=dec[0], a_t0=dec[1], a_c=dec[2], a_half=dec[3])
    ak = attn_kern or kern
    if ak.prefill_attention:
        out.update(R_apeak=ak.flops or gpu.flops, p_eta=ak.prefill_attention_efficiency,
                   p_half=ak.prefill_attention_half_tokens, p_t0=ak.prefill_attention_latency)
    return out


_DTYPE_NOTE = "bytes per element"

# symbol, dimension, description — the names a reviewer reads in ``ccost explain``.
_LEAVES: dict[str, tuple[str, units.Dim, str]] = {
    **{a.name: (a.name, units.DIMENSIONLESS, a.leaf) for a in axes.AXES},
    "B": ("B", units.DIMENSIONLESS, "batch: sequences per replica"),
    "S": ("S", units.DIMENSIONLESS, "tokens per sequence per step"),
    "ctx": ("S_ctx", units.DIMENSIONLESS, "context tokens held in the KV cache (seq)"),
    "M": ("M", units.DIMENSIONLESS, "pipeline micro-batches"),
    "overlap": ("overlap", units.DIMENSIONLESS, "share of communication hidden behind compute"),
    "L": ("L", units.DIMENSIONLESS, "layers"),
    "d": ("d", units.DIMENSIONLESS, "hidden size"),
    "h": ("h", units.DIMENSIONLESS, "attention heads"),
    "h_kv": ("h_kv", units.DIMENSIONLESS, "KV heads"),
    "params": ("N_params", units.DIMENSIONLESS, "parameters"),
    "params_active": ("N_active", units.DIMENSIONLESS, "parameters active per token"),
    "E": ("E", units.DIMENSIONLESS, "experts"),
    "k": ("k", units.DIMENSIONLESS, "experts per token (top_k)"),
    "L_moe": ("L_moe", units.DIMENSIONLESS, "MoE layers"),
    "W": ("W", units.INFORMATION, "weight bytes of the whole model"),
    "b_act": ("b_act", units.INFORMATION, "activation " + _DTYPE_NOTE),
    "b_kv": ("b_kv", units.INFORMATION, "KV-cache " + _DTYPE_NOTE),
    "b_grad": ("b_grad", units.INFORMATION, "gradient " + _DTYPE_NOTE),
    "D": ("D", units.DIMENSIONLESS, "GPUs per NVLink domain"),
    "BW_hbm": ("BW_HBM", units.BANDWIDTH, "HBM bandwidth per GPU"),
    "R": ("R", units.FLOP_RATE, "achieved FLOP/s per GPU"),
    "mem": ("HBM", units.INFORMATION, "memory per GPU"),
    "max_mem": ("max_memory", units.DIMENSIONLESS, "usable share of memory (policy)"),
    "T_given": ("T_compute,given", units.TIME, "compute time given in the plan"),
    "c_F": ("c_F", units.COMPUTE, "FLOPs per parameter per token"),
    "b_opt": ("b_opt", units.INFORMATION, "optimizer bytes per parameter"),
    "v": ("v", units.DIMENSIONLESS, "virtual pipeline stages (model chunks per GPU)"),
    "V": ("V", units.DIMENSIONLESS, "vocabulary"),
    "f": ("f", units.DIMENSIONLESS, "FFN inner size"),
    "untied": ("untied", units.DIMENSIONLESS, "1 when the input embedding is not the LM head (not a GEMM)"),
    "k_node": ("k_node", units.DIMENSIONLESS, "copies of a token the expert All-to-All sends: "
               "min(top_k, route_nodes)"),
    "R_peak": ("R_peak", units.FLOP_RATE, "peak dense FLOP/s per GPU"),
    "c_fwd": ("c_fwd", units.COMPUTE, "FLOPs per multiply-add"),
    "b_master": ("b_master", units.INFORMATION, "master-weight bytes per parameter"),
    "BW_elem": ("BW_elem", units.BANDWIDTH, "HBM bandwidth the elementwise kernels achieve"),
    "t_step": ("t_step", units.TIME, "stack: fixed time per step"),
    "t_layer": ("t_layer", units.TIME, "stack: time per layer per step"),
    "t_seq": ("t_seq", units.TIME, "stack: host time per running sequence per step"),
    "T_floor": ("T_floor", units.TIME, "stack: the least time of one collective"),
    "hd": ("d_head", units.DIMENSIONLESS, "attention head size"),
    "kv_lat": ("d_latent", units.DIMENSIONLESS, "MLA latent cached per token per layer: kv_lora_rank + qk_rope_head_dim"),
    "d_c": ("d_c", units.DIMENSIONLESS, "MLA: kv_lora_rank"),
    "R_attn": ("R_attn", units.FLOP_RATE, "achieved FLOP/s in attention"),
    "BW_peak": ("BW_HBM,peak", units.BANDWIDTH, "HBM bandwidth per GPU (the kernel curves' shares are of it)"),
    "R_gpeak": ("R_peak,GEMM", units.FLOP_RATE, "peak FLOP/s of the weights' dtype (the GEMM curve's η is of it)"),
    "R_apeak": ("R_peak,attn", units.FLOP_RATE, "peak BF16 FLOP/s (the prefill-attention curve's η_attn is of it)"),
    "g_eta": ("η_GEMM", units.DIMENSIONLESS, "GEMM curve: share of the peak a large GEMM reaches"),
    "g_half": ("M½", units.DIMENSIONLESS, "GEMM curve: token rows at which half of η_GEMM is reached"),
    "g_ew": ("e_w", units.DIMENSIONLESS, "GEMM curve: share of HBM bandwidth a GEMM streaming its weights reaches"),
    "g_t0": ("t0_GEMM", units.TIME, "GEMM curve: fixed time of one GEMM kernel"),
    "g_nh": ("N½", units.DIMENSIONLESS, "GEMM curve: the weight's output width at which half of η_GEMM is reached"),
    "g_kh": ("K½", units.DIMENSIONLESS, "GEMM curve: the weight's input width at which half of η_GEMM is reached"),
    "b_gin": ("b_in,GEMM", units.INFORMATION, "GEMM input activation " + _DTYPE_NOTE),
    "a_ew": ("e_kv", units.DIMENSIONLESS, "decode attention curve: share of HBM bandwidth in the KV read"),
    "a_t0": ("t0_attn", units.TIME, "decode attention curve: fixed time of one kernel"),
    "a_c": ("c_attn", units.TIME, "decode attention curve: time per sequence × query head of one kernel"),
    "a_half": ("P½", units.DIMENSIONLESS, "decode attention curve: (sequence × KV head) streams at half of e_kv's "
               "bandwidth"),
    "p_eta": ("η_attn", units.DIMENSIONLESS, "prefill attention curve: share of peak FLOP/s a long prompt reaches"),
    "p_half": ("S½", units.DIMENSIONLESS, "prefill attention curve: prompt tokens at which half of η_attn is reached"),
    "p_t0": ("t0_attn", units.TIME, "prefill attention curve: fixed time of one kernel"),
    "e_fw": ("e_fw", units.DIMENSIONLESS, "train: the framework's share of the measured kernel rates"),
}

_CURVE_KEYS = ("g_eta", "g_half", "g_ew", "g_t0", "g_nh", "g_kh", "a_ew", "a_t0", "a_c", "a_half", "p_eta", "p_half", "p_t0")
#: the inputs read from the block the GEMM curve came from (lower.prepare: the engine's, or the GPU's first with it)
_GEMM_KEYS = ("g_eta", "g_half", "g_ew", "g_t0", "g_nh", "g_kh", "R_gpeak")
#: ... and from the block the prefill-attention curve came from (training: the stack's attention_engine's)
_PREFILL_KEYS = ("p_eta", "p_half", "p_t0", "R_apeak")


def _leaf(key: str, value: float, plan: S.Plan, model: S.Model, cluster: S.Cluster, policy: S.Policy,
          stack: S.Stack, kind: PhaseKind, kern: S.Kernels | None = None):
    sym, dim, desc = _LEAVES[key]
    gpu = cluster.gpu
    source = None
    if key in _CURVE_KEYS and kern is not None:
        source = (f"kernels {kern.name}" + (f" ({kern.engine})" if kern.engine else "")
                  + (", FP8 KV cache" if key in ("a_ew", "a_t0", "a_c", "a_half") and model.kv_cache == "fp8"
                     and kern.fp8_decode_attention_hbm_efficiency is not None else "")
                  + (f"; {kern.source}" if kern.source else ""))
    elif key in ("BW_peak", "R_gpeak", "R_apeak"):
        peak = "fp8_flops" if key == "R_gpeak" and fp8_weights(model, gpu) else (
            "hbm_bandwidth" if key == "BW_peak" else "flops")
        source = (f"kernels {kern.name}: {peak}" if kern is not None and getattr(kern, peak) is not None
                  else f"gpu {gpu.name}: {peak}")
    elif key in axes.NAMES or key in ("B", "ctx", "M", "overlap", "T_given"):
        source = f"plan {plan.name}"
    elif key == "S":
        source = f"plan {plan.name}: seq" if "S" in kind.seq_feeds else f"{kind.name}: one new token per sequence"
    elif key in ("L", "d", "h", "h_kv", "params", "params_active", "E", "k", "L_moe", "W", "hd", "kv_lat", "d_c"):
        source = f"model {model.name}"
        if key == "W" and model.weight_bytes is None:
            desc = f"weight bytes of the whole model (params × {model.weights})"
    elif key == "b_gin":
        source = f"model {model.name}: " + ("fp8 weights: an FP8 GEMM reads FP8 activations"
                                            if fp8_weights(model, gpu)
                                            else model.activations)
    elif key in ("b_act", "b_kv", "b_grad"):
        dtype = {"b_act": model.activations, "b_kv": model.kv_cache, "b_grad": model.grads}[key]
        source = f"model {model.name}: {dtype}"
    elif key == "D":
        source = f"cluster {cluster.name}"
    elif key == "R_attn":
        source = (f"gpu {gpu.name}: flops {units.format_quantity(gpu.flops, units.FLOP_RATE)} × stack {stack.name} "
                  f"attention_efficiency {units.format_percent(stack.attention_efficiency)}")
    elif key in ("BW_hbm", "R", "mem"):
        source = f"gpu {gpu.name}"
        if key == "BW_hbm" and stack.hbm_efficiency != 1.0:
            desc = "achieved HBM bandwidth per GPU"
            source += (f": hbm_bandwidth {units.format_quantity(gpu.hbm_bandwidth, units.BANDWIDTH)} × stack "
                       f"{stack.name} hbm_efficiency {units.format_percent(stack.hbm_efficiency)}")
        elif key == "R" and gpu.achieved_flops is None:
            if value != gpu.flops:
                peak = "fp8_flops" if (gpu.fp8_flops is not None and value == gpu.fp8_flops * stack.gemm_efficiency
                                       and model.weights == "fp8") else "flops"
                desc = "achieved FLOP/s per GPU in the weight GEMMs"
                source += (f": {peak} {units.format_quantity(getattr(gpu, peak), units.FLOP_RATE)} × stack {stack.name} "
                           f"gemm_efficiency {units.format_percent(stack.gemm_efficiency)}")
            else:
                source += " (peak flops: no achieved_flops given)"
        if gpu.source:
            source += f"; {gpu.source}"
    elif key in ("t_step", "t_layer", "T_floor", "t_seq", "e_fw"):
        source = f"stack {stack.name}" + ("" if plan.stack_named else " (the default for the phase)")
        if stack.source:
            source += f"; {stack.source}"
    elif key == "max_mem":
        source = "policy"
    elif key == "c_F":
        source = kind.c_F_source
    elif key == "b_opt":
        source = f"Adam: master weights ({plan.master_weights}) + m, v at 4 B each"
    elif key in ("v",):
        source = f"plan {plan.name}: schedule {plan.schedule}"
    elif key in ("V", "f", "untied", "k_node"):
        source = f"model {model.name}"
    elif key == "R_peak":
        source = f"gpu {gpu.name}: flops"
    elif key == "c_fwd":
        source = "a multiply and an add"
    elif key == "BW_elem":
        source = (f"gpu {gpu.name}: hbm_bandwidth {units.format_quantity(gpu.hbm_bandwidth, units.BANDWIDTH)} × "
                  f"stack {stack.name} elementwise_efficiency {units.format_percent(stack.elementwise_efficiency)}")
    elif key == "b_master":
        source = f"plan {plan.name}: master_weights {plan.master_weights}"
    # shares print as percentages everywhere (overlap = 50 %, as the spec writes it), never as 0.5
    return derive.leaf(sym, value, dim, desc, source,
                       style="percent" if key in ("overlap", "max_mem", "g_eta", "g_ew", "a_ew", "p_eta", "e_fw") else None)


# ---------------------------------------------------------------------------------------------------
# The collective program (its records and builders: ccost.model.program)

def lower(static: Static, x: Inputs) -> Program:
    """The collective program and compute terms of one plan (see the module docstring for the model).

    Runs on floats, arrays and derivation values alike; in array mode every input may be an array and the
    results broadcast.
    """
    # training has its own model (per micro-batch, schedules, activations): ccost.model.phases picks it
    assert not static.train, "a training plan is lowered by ccost.model.training (ccost.model.phases.lower)"
    coll: list[Collective] = []

    # --- sizes ---------------------------------------------------------------------------------------
    # Context parallelism in a prefill: each of the cp ranks holds S/cp of every sequence's tokens (a decode
    # step's one new token is not split: the cp ranks split its context, the KV cache).
    S_r = named("S_cp", x.S / x.cp, "tokens per sequence on one cp rank: S/cp") if _splits_tokens(static) else x.S
    if static.steady:
        # Serving pipeline in steady state: every collective carries one micro-batch (B/M sequences) and
        # the counts are one micro-batch's path through every stage (ccost.model.analysis._steady).
        m_act = named("m_act", x.B / x.M * S_r * x.d * x.b_act,
                      "activations of one layer for one micro-batch: (B/M)·S·d·bytes")
    else:
        m_act = named("m_act", x.B * S_r * x.d * x.b_act, "activations of one layer: B·S·d·bytes"
                      + (" (S/cp on this rank)" if _splits_tokens(static) else ""))

    # --- tensor parallelism: 2 AllReduces per layer -------------------------------------------------------
    n_tp = named("count_TP", 2 * x.L, "AllReduces per step: 2 per layer")
    coll.append(collective(static, "TP", "allreduce", "tensor-parallel attention and FFN outputs", n_tp, x.tp, 1,
                            m_act, x, static.algorithm))

    # --- expert parallelism: 2 All-to-Alls per MoE layer ---------------------------------------------------
    if static.moe:
        m_ep = named("m_EP", (x.B / x.M if static.steady else x.B) * S_r * x.k * x.d * x.b_act,
                     "tokens routed per rank" + (" per micro-batch: (B/M)" if static.steady else ": B")
                     + "·S·k·d·bytes")
        n_ep = named("count_EP", 2 * x.L_moe, "All-to-Alls per step: dispatch + combine per MoE layer")
        coll.append(collective(
            static, "EP", "alltoall", "expert-parallel dispatch and combine", n_ep, x.ep, axes.stride(x, "ep", on(static)),
            m_ep, x,
            note="volume (P−1)/P·m per rank, the convention of “Communication Cost Analysis” §2 (“Communication Cost Math — Distributed Inference” §2 omits the "
                 "factor)"))

    # --- parameters on this GPU (dense part replicated over ep, experts sharded) ---------------------------
    if static.moe:
        n_expert1, n_dense, n_experts = costs.moe_parameters(x.params, x.params_active, x.E, x.k)
        p_dense_gpu = named("N_dense,GPU", n_dense / axes.split(x, "weights", "layers"), "dense parameters on one GPU")
        p_exp_gpu = named("N_experts,GPU", n_experts / axes.split(x, "weights", "layers", "experts"),
                          "expert parameters on one GPU")
        params_gpu = named("N_GPU", p_dense_gpu + p_exp_gpu, "parameters on one GPU (before FSDP sharding)")
        b_w = named("b_w", x.W / x.params, "weight bytes per parameter")
        weights_gpu = named("W_GPU", b_w * params_gpu, "weight bytes on one GPU")
    else:
        params_gpu = named("N_GPU", x.params / axes.split(x, "weights", "layers"),
                           "parameters on one GPU (before FSDP sharding)")
        weights_gpu = named("W_GPU", x.W / axes.split(x, "weights", "layers"), "weight bytes on one GPU")
        b_w = None

    # --- pipeline parallelism: one send per stage boundary -----------------------------------------------
    # one pass, the activations forward (training's gradients backward are ccost.model.training's); the derivation
    # prints the factor (count_PP = 1·(pp − 1)), as every committed review does
    passes = 1
    boundaries = named("count_PP", passes * (x.pp - 1), "stage-boundary sends per step")
    if static.inter is not None:
        stage_stride = named("s_PP", axes.stride(x, "pp", on(static)), "ranks between consecutive stages")
        crossing = named("count_PP,x", passes * minimum(x.pp - 1, floor((x.pp - 1) * stage_stride / x.D)),
                         "stage boundaries that cross NVLink domains")
        inside = named("count_PP,in", boundaries - crossing, "stage boundaries inside one NVLink domain")
        coll.append(p2p(static, "PP", "pipeline activations to the next stage (inside a domain)", inside,
                         m_act, static.intra, static.intra_name, x))
        coll.append(p2p(static, "PPx", "pipeline activations to the next stage (across domains)", crossing,
                         m_act, static.inter, static.inter_name, x))
    else:
        coll.append(p2p(static, "PP", "pipeline activations to the next stage", boundaries, m_act,
                         static.intra, static.intra_name, x))

    comp = _compute(static, x, weights_gpu, params_gpu, b_w, p_dense_gpu if static.moe else None,
                    p_exp_gpu if static.moe else None, n_dense if static.moe else None,
                    n_expert1 if static.moe else None)
    if static.cp and static.kv:
        coll += _ring_attention(static, x, comp)
    return Program(static, x, tuple(coll), comp)


def _splits_tokens(static: Static) -> bool:
    """Context parallelism splits a prefill's tokens cp ways (a decode step's context only)."""
    return static.cp and static.seq_step


def _ring_attention(static: Static, x: Inputs, comp: Compute) -> list[Collective]:
    """Context parallelism (``cp``, decode and prefill; training: ``ccost.model.training``): ring attention. Each
    of the cp ranks holds 1/cp of every sequence's KV cache (prefill: of its tokens) and, per layer, sends
    its local KV block to its ring neighbour cp − 1 times, so every rank's queries meet the whole context.
    The block is this GPU's KV cache of one layer, KV_GPU·pp/L (per micro-batch in a steady pipeline).
    The cp ranks sit next to the tp ranks (Megatron's tp-cp-ep-dp-pp): the ring leaves the NVLink domain
    when tp·cp > D, and then every step runs at the pace of its slowest link, the inter-node one.

    Each send runs while the rank computes attention against the block it already holds, as ring
    attention implementations do (and as ``ccost.model.training`` prices it): per step, min(T_send, t_block) of
    the send is hidden, with t_block = T_attn·pp/(L·cp) the attention of one layer against one block
    (the operator roofline's attention row; under the whole-step roofline, or with ``compute_time``
    given, there is no attention time to hide behind and the sends count exposed). ``overlap`` then
    hides its share of what is left, as for every collective."""
    steady = static.steady
    kv_gpu = comp.kv_gpu
    m_kv = named("m_KV", kv_gpu * x.pp / x.L / x.M if steady else kv_gpu * x.pp / x.L,
                 "KV block a cp rank passes per layer: its KV cache of one layer, KV_GPU·pp/L"
                 + (" per micro-batch (/M)" if steady else ""))
    n_cp = named("count_CP", (x.cp - 1) * x.L, "ring steps per step: cp − 1 per layer, L layers on the critical path")
    attn = [r[3] for r in comp.operators if r[0] == "attention"]
    t_blk = None
    if attn:
        # A prefill's attention row covers the whole context (cp blocks); a decode step's only this rank's
        # block (its context is split cp ways in the operator roofline).
        blocks = x.cp if _splits_tokens(static) else 1
        t_blk = named("t_attn,block", attn[0] * x.pp / (x.L * blocks) / (x.M if steady else 1),
                      "attention of one layer against one KV block on this rank: T_attn·pp/L"
                      + ("/cp" if _splits_tokens(static) else " (decode: the row is one block's)")
                      + (" per micro-batch (/M)" if steady else ""))
    purpose = "context-parallel ring attention: KV blocks to the next cp rank"
    if static.inter is None:
        parts = [("CP", purpose, n_cp, static.intra, static.intra_name)]
    else:
        s_cp = named("s_CP", axes.stride(x, "cp", on(static)), "ranks between consecutive cp ranks")
        cross = named("x_CP", minimum(1, floor((x.cp * s_cp - 1) / x.D)),
                      "1 when the cp ring spans NVLink domains (its slowest link paces every step), else 0")
        parts = [("CP", purpose + " (inside a domain)", n_cp * (1 - cross), static.intra, static.intra_name),
                 ("CPx", purpose + " (across domains)", n_cp * cross, static.inter, static.inter_name)]
    out = []
    for key, what, count, link, link_name in parts:
        k = p2p(static, key, what, count, m_kv, link, link_name, x)
        if t_blk is not None:
            hid = named(f"T_{key},hidden", count * minimum(k.cost.time, t_blk),
                        "sends hidden behind the attention of the block held: count·min(T_send, t_attn,block)")
            k = replace(k, hidden=hid)
        out.append(k)
    return out


def _compute(static: Static, x: Inputs, weights_gpu: Num, params_gpu: Num, b_w: Num | None,
             p_dense_gpu: Num | None, p_exp_gpu: Num | None, n_dense: Num | None = None,
             n_expert1: Num | None = None) -> Compute:
    # KV cache: 2 (K and V) × layers × KV heads × head dim × bytes per token; MLA: the latent.
    if static.kv:
        if static.mla:
            kv_tok = named("kv_token", x.L * x.kv_lat * x.b_kv,
                           "KV-cache bytes per token, MLA latent: L·(kv_lora_rank + qk_rope_head_dim)·bytes")
            kv_split = named("tp_kv", derive.constant(1.0, "1", x.tp), "the MLA latent is replicated on every TP rank")
        elif static.head_dim_given:
            kv_tok = named("kv_token", 2 * x.L * x.h_kv * x.hd * x.b_kv,
                           "KV-cache bytes per token: 2·L·h_kv·d_head·bytes")
            kv_split = named("tp_kv", minimum(x.tp, x.h_kv), "ranks the KV heads are split over, min(tp, h_kv)")
        elif static.heads_known:
            kv_tok = named("kv_token", 2 * x.L * x.h_kv * (x.d / x.h) * x.b_kv,
                           "KV-cache bytes per token: 2·L·h_kv·(d/h)·bytes")
            kv_split = named("tp_kv", minimum(x.tp, x.h_kv), "ranks the KV heads are split over, min(tp, h_kv)")
        else:
            kv_tok = named("kv_token", 2 * x.L * x.d * x.b_kv, "KV-cache bytes per token: 2·L·d·bytes")
            kv_split = x.tp
        if static.cp:
            kv_gpu = named("KV_GPU", x.B * x.ctx * kv_tok / (kv_split * x.pp * x.cp),
                           "KV cache on one GPU: B·S_ctx·kv_token/(tp_kv·pp·cp), 1/cp of every sequence")
        else:
            kv_gpu = named("KV_GPU", x.B * x.ctx * kv_tok / (kv_split * x.pp),
                           "KV cache on one GPU: B·S_ctx·kv_token/(tp_kv·pp)")
        kv_one = named("KV_1", x.ep * x.B * x.ctx * kv_tok, "KV cache of the model instance's sequences")
    else:
        kv_gpu = 0.0
        kv_one = 0.0
    bytes_gpu = named("bytes_GPU", weights_gpu + kv_gpu, "bytes read per step per GPU") if static.kv_read \
        else weights_gpu
    if _splits_tokens(static):
        flops_gpu = named("F_GPU", x.c_F * x.params_active * x.B * x.S / (x.tp * x.pp * x.cp),
                          "FLOPs per step per GPU: c_F·N_active·B·S/(tp·pp·cp)")
    else:
        flops_gpu = named("F_GPU", x.c_F * x.params_active * x.B * x.S / (x.tp * x.pp),
                          "FLOPs per step per GPU: c_F·N_active·B·S/(tp·pp)")
    operators: tuple = ()
    T_host: Num = 0.0
    if static.compute_given:
        T_compute = named("T_compute", x.T_given, "compute time given in the plan")
        T_mem = T_flop = T_stage = named("T_stage", T_compute / x.pp, "compute time of one stage")
        if _splits_tokens(static):  # a prefill's tokens split cp ways: one GPU does cp times the work
            T_one = named("T_1", T_compute * x.tp * x.ep * x.cp, "the same work on one GPU: T_compute·tp·ep·cp")
        else:
            T_one = named("T_1", T_compute * x.tp * x.ep, "the same work on one GPU: T_compute·tp·ep")
        # A given time says nothing about the bound: split the stage's time evenly over the micro-batches.
        bytes_mb = flops_mb = 0.0
        T_mem_mb = T_flop_mb = t_mb = named("t_mb", T_stage / x.M, "one micro-batch on one stage: T_stage/M")
    elif static.roofline == "operator":
        stage_shape = _gemm_shape(static, x, x.tp, n_dense is not None)  # the stage's and its micro-batch's
        ops = _operators(static, x, "", 1.0, weights_gpu, _times(p_dense_gpu, b_w), _times(p_exp_gpu, b_w), b_w,
                         n_dense, n_expert1, kv_gpu, x.B, x.tp, x.pp, x.ep, cp=x.cp if static.cp else None,
                         shape=stage_shape)
        bytes_gpu, flops_gpu = ops.bytes, ops.flops
        T_mem = named("T_mem", costs.memory_time(bytes_gpu, x.BW_hbm),
                      "stage: every operator's bytes / HBM bandwidth (for the bound)")
        T_flop, T_roof = ops.T_flop, ops.T
        T_layers = named("T_layers", x.t_layer * x.L / x.pp, "stack: per-layer time of one stage, t_layer·L/pp") \
            if static.overheads else 0.0
        T_stage = named("T_stage", T_roof + T_layers if static.overheads else T_roof,
                        "one stage: Σ operators' rooflines" + (" + the stack's per-layer time" if static.overheads
                                                               else ""))
        T_host = _host(static, x, x.B)
        T_compute = named("T_compute", with_host(static, x.pp * T_stage, T_host) if static.overheads
                          else x.pp * T_stage, "compute on the critical path: a token crosses the pp stages in turn"
                          + (_HOST_NOTE[static.host_overlap] if static.overheads else ""))
        one = _operators(static, x, ",1", 1.0, x.W, None if n_dense is None else n_dense * b_w,
                         None if n_dense is None else (x.params - n_dense) * b_w, b_w, n_dense, n_expert1,
                         kv_one, x.ep * x.B, 1.0, 1.0, shape=_gemm_shape(static, x, 1.0, n_dense is not None, ",1"))
        T_one = with_host(static, one.T + x.t_layer * x.L, _host(static, x, x.ep * x.B, named_=False)) \
            if static.overheads else one.T
        T_one = named("T_1", T_one, "the same work on one GPU (the instance's ep·B sequences), no communication")
        mb = _operators(static, x, ",mb", 1 / x.M, weights_gpu, _times(p_dense_gpu, b_w), _times(p_exp_gpu, b_w),
                        b_w, n_dense, n_expert1, kv_gpu, x.B, x.tp, x.pp, x.ep, cp=x.cp if static.cp else None,
                        shape=stage_shape)
        bytes_mb, flops_mb = mb.bytes, mb.flops
        T_mem_mb = named("T_mem,mb", costs.memory_time(bytes_mb, x.BW_hbm), "micro-batch: bytes / HBM bandwidth")
        T_flop_mb = mb.T_flop
        t_mb = named("t_mb", mb.T + T_layers if static.overheads else mb.T,
                     "one micro-batch on one stage: Σ operators' rooflines"
                     + (" + the stack's per-layer time" if static.overheads else ""))
        operators = ops.rows
    else:
        T_mem = named("T_mem", costs.memory_time(bytes_gpu, x.BW_hbm), "stage: bytes read / HBM bandwidth")
        T_flop = named("T_flop", costs.flop_time(flops_gpu, x.R), "stage: FLOPs / achieved FLOP/s")
        if static.overheads:
            T_layers = named("T_layers", x.t_layer * x.L / x.pp, "stack: per-layer time of one stage, t_layer·L/pp")
            T_stage = named("T_stage", maximum(T_mem, T_flop) + T_layers,
                            "one stage: the larger roofline bound + the stack's per-layer time")
            T_host = _host(static, x, x.B)
            T_compute = named("T_compute", with_host(static, x.pp * T_stage, T_host),
                              "compute on the critical path: a token crosses the pp stages in turn"
                              + _HOST_NOTE[static.host_overlap])
        else:
            T_stage = named("T_stage", maximum(T_mem, T_flop), "roofline of one stage: the larger bound")
            T_compute = named("T_compute", x.pp * T_stage,
                              "compute on the critical path: a token crosses the pp stages in turn")
        bytes_one = named("bytes_1", x.W + kv_one, "bytes one GPU would read per step") if static.kv_read \
            else x.W
        flops_one = named("F_1", x.c_F * x.params_active * x.ep * x.B * x.S,
                          "FLOPs of the model instance's step on one GPU")
        T_one = maximum(costs.memory_time(bytes_one, x.BW_hbm), costs.flop_time(flops_one, x.R))
        if static.overheads:
            T_one = with_host(static, T_one + x.t_layer * x.L, _host(static, x, x.ep * x.B, named_=False))
        T_one = named("T_1", T_one, "the same work on one GPU, no communication")
        # Per micro-batch: the stage reads its whole weights again for every micro-batch (and 1/M of its
        # KV cache: the micro-batch's own sequences), but does only 1/M of the FLOPs. With M = 1 these are
        # the stage's own terms (x/1 is exact), so the unpipelined step keeps its bits.
        if static.kv_read:
            bytes_mb = named("bytes_mb", weights_gpu + kv_gpu / x.M,
                             "bytes read per micro-batch per GPU: W_GPU + KV_GPU/M")
        else:
            bytes_mb = named("bytes_mb", weights_gpu, "bytes read per micro-batch per GPU: the stage's weights")
        flops_mb = named("F_mb", flops_gpu / x.M, "FLOPs per micro-batch per GPU: F_GPU/M")
        T_mem_mb = named("T_mem,mb", costs.memory_time(bytes_mb, x.BW_hbm),
                         "micro-batch: bytes read / HBM bandwidth")
        T_flop_mb = named("T_flop,mb", costs.flop_time(flops_mb, x.R), "micro-batch: FLOPs / achieved FLOP/s")
        if static.overheads:
            t_mb = named("t_mb", maximum(T_mem_mb, T_flop_mb) + T_layers,
                         "one micro-batch on one stage: roofline + the stack's per-layer time")
        else:
            t_mb = named("t_mb", maximum(T_mem_mb, T_flop_mb), "roofline of one micro-batch on one stage")

    # --- memory (serving: weights and KV cache; training's gradients, optimizer state and FSDP shards are
    # ccost.model.training's) ----------------------------------------------------------------------------------------
    mem = memory(x, weights=weights_gpu, kv_cache=kv_gpu)
    tokens = named("tokens_step", x.dp * x.ep * x.B * x.S, "tokens per step, all replicas: dp·ep·B·S")
    return Compute(weights_gpu=weights_gpu, kv_gpu=kv_gpu, bytes_gpu=bytes_gpu, flops_gpu=flops_gpu, T_mem=T_mem,
                   T_flop=T_flop, T_stage=T_stage, T_compute=T_compute, T_one=T_one, params_gpu=params_gpu,
                   memory=mem, tokens_step=tokens, bytes_mb=bytes_mb, flops_mb=flops_mb, T_mem_mb=T_mem_mb,
                   T_flop_mb=T_flop_mb, t_mb=t_mb, operators=operators,
                   T_host=T_host if static.overheads and not static.compute_given else 0.0)


#: How the host time joins the GPU's: added, or (asynchronous scheduling) run behind it.
_HOST_NOTE = {False: ", plus the stack's host time T_host",
              True: "; the stack's host time T_host runs behind it (asynchronous scheduling): the larger of the two"}


def with_host(static: Static, gpu: Num, host: Num) -> Num:
    """A step's time from its GPU time and the stack's host time: their sum, or with ``host_overlap``
    (the engine prepares step n + 1 while the GPU runs step n: vLLM's asynchronous scheduling, SGLang's and
    TensorRT-LLM's overlap schedulers) the larger of the two: the GPU waits for the host only when the
    host's work for a step takes longer than the GPU's."""
    return maximum(gpu, host) if static.host_overlap else gpu + host


def _host(static: Static, x: Inputs, seqs: Num, named_: bool = True) -> Num:
    """The stack's host time per step for ``seqs`` running sequences: t_step, plus t_seq·seqs when the
    stack charges a time per sequence (decode and prefill: scheduling, sampling, detokenising and output
    processing per sequence). Without seq_overhead it is t_step itself, so existing derivations are unchanged."""
    if not static.seq_host:
        return x.t_step
    t = x.t_step + x.t_seq * seqs
    return named("T_host", t, "stack: host time per step, t_step + t_seq·B (per running sequence)") if named_ else t


def _times(a: Num | None, b: Num | None) -> Num | None:
    return None if a is None or b is None else a * b


@dataclass(frozen=True)
class Operators:
    """The per-operator roofline of one stage (or one micro-batch, or one GPU alone): ``rows`` are
    (operator, bytes, FLOPs, time, bound) per operator class; ``T`` their sum."""

    bytes: Num
    flops: Num
    T_flop: Num
    T: Num
    rows: tuple


def _gemm_shape(static: Static, x: Inputs, tp: Num, moe: bool, tag: str = "") -> tuple[tuple, Num] | None:
    """The weight GEMMs' widths on one GPU of a ``tp``-way group and their shape factor σ (``ccost.model.kernels``),
    derived once for every step priced at that tp; None without a measured GEMM curve."""
    if not static.kernel_gemm:
        return None
    widths = kernels.gemm_widths(x, tp, moe, static.heads_known, tag)
    sigma = named(f"σ_GEMM{tag}", kernels.shape_factor(widths, x.g_nh, x.g_kh),
                  "weight shapes' share of the GEMM rate: Σ N·K / Σ (N + N½)·(K + K½) over the layer's "
                  + ("attention projections" if moe else "QKV, output, up-with-gate and down")
                  + " GEMMs on this GPU", style="percent")
    return widths, sigma


def _operators(static: Static, x: Inputs, tag: str, share: Num, weights: Num, w_dense: Num | None,
               w_experts: Num | None, b_w: Num | None, n_dense: Num | None, n_expert1: Num | None, kv: Num,
               seqs: Num, tp: Num, pp: Num, route: Num = 1.0, cp: Num | None = None,
               shape: tuple[tuple, Num] | None = None) -> Operators:
    """Decode and prefill, per operator class, each bounded on its own and added:

    * **weight GEMMs** (every weight outside the routed experts): this GPU's weights / HBM bandwidth
      against c_F·N·tokens / (tp·pp) at the GEMM rate (the weights' dtype: FP8 GEMMs at ``fp8_flops``);
    * **MoE experts**: only the experts the step's tokens hit are read. With T tokens routed uniformly
      and independently to k of E experts (the assumption), a given expert is hit with probability
      1 − (1 − k/E)^T, so E·(1 − (1 − k/E)^T) distinct experts per layer; T = ep·B·S (the ep ranks' tokens
      meet at the experts). Shared experts count as dense weights (always read). FLOPs c_F·k·N_expert·tokens;
    * **attention**: this GPU's KV cache read (decode) or written (prefill) against the attention FLOPs,
      which grow with the context: per token, layer and head 4·d_head·ctx (QKᵀ and PV), MLA
      2·(2·kv_lora_rank + qk_rope_head_dim)·ctx; ctx = seq in decode, (S + 1)/2 in a causal prefill;
      at ``attention_efficiency`` of the peak.

    ``share`` scales the tokens (1/M for one micro-batch: the weights are read whole each time);
    ``seqs`` and ``tp``, ``pp`` say whose work it is (B, tp, pp for a stage; ep·B, 1, 1 for one GPU);
    ``cp``, the context-parallel degree of a stage: a prefill's tokens, a decode step's context split cp ways."""
    t = tag
    split = cp is not None and static.seq_step
    tokens = named(f"T_tok{t}", seqs * x.S * share / cp if split else seqs * x.S * share,
                   "tokens this GPU processes" + (" (one micro-batch)" if t == ",mb" else "")
                   + (": S/cp of each sequence" if split else ""))
    layers = x.L / pp
    rows = []
    if n_dense is not None:
        w_g = named(f"W_GEMM{t}", w_dense, "dense weights read (outside the routed experts)")
        f_g = named(f"F_GEMM{t}", x.c_F * n_dense * tokens / (tp * pp), "GEMM FLOPs: c_F·N_dense·tokens/(tp·pp)")
    else:
        w_g = named(f"W_GEMM{t}", weights, "weights read")
        f_g = named(f"F_GEMM{t}", x.c_F * x.params_active * tokens / (tp * pp), "GEMM FLOPs: c_F·N·tokens/(tp·pp)")
    if static.kernel_gemm:  # the GPU's measured GEMM curve at this token count (ccost.model.kernels)
        n_k = (kernels.DENSE_GEMMS_PER_MOE_LAYER if n_dense is not None else kernels.GEMMS_PER_LAYER) * layers
        assert shape is not None, "the caller derives the GEMMs' widths and σ once for its tp (_gemm_shape)"
        dense_w, sigma = shape
        a_g = named(f"A_GEMM{t}", tokens * layers * kernels.io_per_token(dense_w, x.b_gin, x.b_act),
                    "activations the weight GEMMs read and outputs they write: T_tok·L/pp·Σ (K·b_in,GEMM + N·b_act) "
                    "over the widths σ is read at")
        T_g, tg_m, tg_f, _ = kernels.gemm_time(w_g, f_g, tokens, n_k, x.BW_peak, x.g_ew, x.R_gpeak, x.g_eta,
                                               x.g_half, x.g_t0, t, sigma, a_g)
        T_g = named(f"T_GEMM{t}", T_g, "weight GEMMs on the measured curve: kernels·t0_GEMM + max((W + A)/(BW·e_w), "
                    "F/R_GEMM), kernels = GEMMs per layer × L/pp")
    else:
        tg_m, tg_f = costs.memory_time(w_g, x.BW_hbm), costs.flop_time(f_g, x.R)
        T_g = named(f"T_GEMM{t}", maximum(tg_m, tg_f), "weight GEMMs: max(bytes/BW, FLOPs/R)")
    rows.append(("weight GEMMs", w_g, f_g, T_g, tg_m, tg_f))
    total_b, total_f, T_flop, T = w_g, f_g, tg_f, T_g
    if n_dense is not None:
        routed = named(f"T_route{t}", route * tokens, "tokens routed to the experts of this GPU's group")
        hit = named(f"hit{t}", 1 - derive.power(1 - x.k / x.E, routed),
                    "share of experts hit: 1 − (1 − k/E)^T (T tokens routed uniformly, k of E each)", style="percent")
        w_e = named(f"W_experts{t}", w_experts * hit, "expert weights read: this GPU's experts × share hit")
        f_e = named(f"F_experts{t}", x.c_F * x.k * n_expert1 * tokens / (tp * pp),
                    "expert FLOPs: c_F·k·N_expert·tokens/(tp·pp)")
        if static.kernel_gemm:  # grouped GEMMs on the GEMM curve, at the tokens each expert gets
            m_e = named(f"M_expert{t}", routed * x.k / x.E, "token rows per expert: T_route·k/E")
            # no shape factor: the curve's N½ and K½ were measured on one GEMM at a time, whose narrow weight
            # leaves SMs idle; a grouped GEMM runs every hit expert's tiles in one launch (docs/kernels.md)
            T_e, te_m, te_f, _ = kernels.gemm_time(w_e, f_e, m_e, kernels.EXPERT_GEMMS_PER_MOE_LAYER * x.L_moe / pp,
                                                   x.BW_peak, x.g_ew, x.R_gpeak, x.g_eta, x.g_half, x.g_t0,
                                                   f",experts{t}")
            T_e = named(f"T_experts{t}", T_e, "MoE experts on the measured GEMM curve: kernels·t0_GEMM + "
                        "max(W/(BW·e_w), F/R_GEMM) at M_expert rows")
        else:
            te_m, te_f = costs.memory_time(w_e, x.BW_hbm), costs.flop_time(f_e, x.R)
            T_e = named(f"T_experts{t}", maximum(te_m, te_f), "MoE experts: max(bytes/BW, FLOPs/R)")
        rows.append(("MoE experts", w_e, f_e, T_e, te_m, te_f))
        total_b, total_f, T_flop, T = total_b + w_e, total_f + f_e, T_flop + te_f, T + T_e
    if static.kv:
        ctx = x.ctx if static.kv_read else (x.S + 1) / 2
        if cp is not None and static.kv_read:  # decode: this cp rank's share of the context
            ctx = ctx / cp
        # c_F = 2 FLOPs per multiply-add: QKᵀ and PV are d_head multiply-adds each per context token
        # (MLA, absorbed: kv_lora_rank + qk_rope_head_dim for the scores, kv_lora_rank for the values).
        per_head = x.c_F * (x.d_c + x.kv_lat) if static.mla else x.c_F * 2 * x.hd
        heads = x.h / minimum(tp, x.h)
        kv_b = named(f"KV_read{t}", kv * share, "KV cache read (decode) or written (prefill)")
        f_a = named(f"F_attn{t}", tokens * ctx * heads * per_head * layers,
                    "attention FLOPs: tokens·ctx·heads per GPU·" + ("c_F·(d_c + d_latent)" if static.mla
                                                                    else "c_F·2·d_head") + "·L/pp")
        if static.kernel_attention and static.kv_read:  # measured decode-attention curve (ccost.model.kernels)
            kv_heads = x.h_kv / minimum(tp, x.h_kv) if static.kv_heads_known and not static.mla else 1.0
            streams = named(f"P_KV{t}", seqs * share * kv_heads, "(sequence × KV head) streams each decode-"
                            "attention kernel reads: B·KV heads per GPU")
            T_a, ta_m = kernels.decode_attention_time(kv_b, seqs * share * heads, layers, x.BW_peak, x.a_ew, x.a_c,
                                                      x.a_t0, streams, x.a_half)
            ta_f = costs.flop_time(f_a, x.R_attn)
            T_a = named(f"T_attn{t}", T_a, "decode attention on the measured curve: L/pp·(t0_attn + c_attn·B·heads) "
                        "+ KV/(BW·e_kv·P/(P + P½))")
        elif static.kernel_attention:  # measured prefill-attention curve, at the prompt's length
            T_a, ta_f = kernels.prefill_attention_time(f_a, x.S, layers, x.R_apeak, x.p_eta, x.p_half, x.p_t0)
            ta_m = costs.memory_time(kv_b, x.BW_hbm)
            T_a = named(f"T_attn{t}", maximum(ta_m, T_a), "prefill attention on the measured curve: max(KV/BW, "
                        "L/pp·t0_attn + F/(R_peak·η_attn·S/(S + S½)))")
        else:
            ta_m, ta_f = costs.memory_time(kv_b, x.BW_hbm), costs.flop_time(f_a, x.R_attn)
            T_a = named(f"T_attn{t}", maximum(ta_m, ta_f), "attention: max(KV bytes/BW, FLOPs/R_attn)")
        rows.append(("attention", kv_b, f_a, T_a, ta_m, ta_f))
        total_b, total_f, T_flop, T = total_b + kv_b, total_f + f_a, T_flop + ta_f, T + T_a
    return Operators(named(f"bytes_ops{t}", total_b, "bytes of every operator"),
                     named(f"F_ops{t}", total_f, "FLOPs of every operator"),
                     named(f"T_flop{t}" if t else "T_flop", T_flop, "Σ operators' FLOPs at their rates"),
                     named(f"T_ops{t}", T, "Σ operators' rooflines"), tuple(rows))
