"""The checked spec: immutable, typed entities with SI floats. The output of ``ccost.check``.

This is the contract between the front end (parse → resolve → check) and everything after it (lower,
costs, analysis, report, search). Units are gone: times in seconds, sizes in bytes, rates in bytes/s and
FLOP/s, fractions as numbers (0.3), counts as ints (degrees, layers) or floats (params).

References are resolved: a ``Cluster`` holds its ``Gpu`` and ``Link`` objects, a ``Plan`` its ``Model``
and ``Cluster``. ``spans`` maps a field name to where it was written (for diagnostics raised later, by
lowering or analysis), ``sources`` keeps ``source = "..."`` strings for the review's inputs table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from ccost import axes
from ccost import collectives as C
from ccost.diagnostics import Span

DTYPE_BYTES: Mapping[str, float] = MappingProxyType(
    {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
)
ROOFLINES = ("operator", "step")
PIPELINES = ("steady", "flush")
#: Where a stack's operator rates come from (decode, prefill): its own efficiencies × the GPU's peaks, or
#: the GPU's measured kernel curves (a ``kernels`` block, ``ccost.model.kernels``) where it has them.
RATES = ("profile", "kernels")
ALLREDUCE_ALGORITHMS = C.ALGORITHMS + (C.AUTO,)
# How a collective group that spans nodes is priced: a flat ring waiting on its slowest link, hierarchical
# (intra-node reduce-scatter, inter-node allreduce on 1/g of the data, intra-node all-gather), or the cheaper.
CROSS_NODE = ("auto", "flat", "hierarchical")
#: Training: pipeline schedules, activation recomputation, optimizer-state sharding (ccost.model.training).
SCHEDULES = ("gpipe", "one_f_one_b", "interleaved")
RECOMPUTE = ("none", "selective", "full")
OPTIMIZER_SHARDING = ("none", "zero1", "zero2")
ONE_SHOT_VOLUMES = C.ONE_SHOT_VOLUMES

#: An online plan's engine limits when it does not say (vLLM's `max_num_seqs` and `max_num_batched_tokens`
#: for online serving, which ccost.model.simulate.Engine defaults to as well; tests/test_online.py holds them equal).
DEFAULT_MAX_SEQS = 256
DEFAULT_STEP_TOKENS = 8192

_EMPTY: Mapping[str, Span] = MappingProxyType({})
_NO_STACKS: Mapping[str, "Stack"] = MappingProxyType({})

#: Job interruptions per GPU-second, the bundled default of a cluster's ``failure_rate``: the Llama 3 paper
#: (Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4) counts 419 unexpected interruptions in a
#: 54-day snapshot of pre-training on 16,384 H100 (466 with the 47 planned ones): 419 / (16,384 × 54 × 24 h)
#: = 1.97e-5 per GPU-hour, one interruption every 3.1 h for the whole job (docs/training-target.md).
LLAMA3_INTERRUPTIONS, LLAMA3_DAYS, LLAMA3_GPUS = 419, 54, 16_384
DEFAULT_FAILURE_RATE = LLAMA3_INTERRUPTIONS / (LLAMA3_GPUS * LLAMA3_DAYS * 86_400.0)
#: Seconds from an interruption to training again (detect, replace the node, relaunch, load the checkpoint),
#: the default of a cluster's ``restart_time``: 10 min, an ASSUMPTION the review lists. It is the restart
#: time of Daly's worked examples (2006), and consistent with the Llama 3 paper's figures: more than 90 %
#: effective training time over 466 interruptions in 54 days leaves at most 54 d × 10 % / 466 = 16.7 min lost
#: per interruption, restart and re-done work together.
DEFAULT_RESTART_TIME = 600.0


def checkpoint_help(cluster: str) -> str:
    """How to model a training target's goodput on cluster ``cluster`` (W309, the review): give it the write
    bandwidth of its checkpoint storage."""
    return (f"give cluster `{cluster}` a `checkpoint_bandwidth` (the write bandwidth of the storage checkpoints "
            "go to, e.g. `checkpoint_bandwidth = 100 GB/s`)")


@dataclass(frozen=True)
class Entity:
    """What every checked block has: its name, title, where it was written."""

    name: str
    title: str | None
    span: Span | None
    # default_factory: a mappingproxy is unhashable, and dataclasses reject unhashable defaults.
    spans: Mapping[str, Span] = field(default_factory=lambda: _EMPTY, compare=False, repr=False)

    @property
    def label(self) -> str:
        return self.title or self.name


@dataclass(frozen=True)
class Link(Entity):
    alpha: float = 0.0  # s per hop
    bandwidth: float = 0.0  # B/s per GPU per direction
    one_shot_latency: float | None = None  # s; None means alpha
    efficiency: float = 1.0  # achieved share of bandwidth
    source: str | None = None  # "spec sheet", "measured: ...", ...
    # A measured curve: piece i prices messages m >= curve_from[i] with its own α and bandwidth.
    curve_from: tuple[float, ...] | None = None  # bytes, ascending, the first 0
    curve_alpha: tuple[float, ...] | None = None  # s per hop, one per piece
    curve_bandwidth: tuple[float, ...] | None = None  # B/s per GPU per direction, one per piece
    curve_collective: str | None = None  # the collective the curve was measured on (allreduce, ...)
    curve_ranks: int | None = None  # on how many ranks
    floor_latency: float = 0.0  # s: no collective on this link is priced below it

    @property
    def has_curve(self) -> bool:
        return bool(self.curve_from)

    @property
    def curve_pieces(self) -> tuple[tuple[float, float, float], ...]:
        """(start, α, bandwidth before efficiency) per piece; a list not given is `alpha` / `bandwidth`."""
        if not self.curve_from:
            return ()
        n = len(self.curve_from)
        alphas = self.curve_alpha or (self.alpha,) * n
        bws = self.curve_bandwidth or (self.bandwidth,) * n
        return tuple(zip(self.curve_from, alphas, bws))

    @property
    def effective_bandwidth(self) -> float:
        return self.bandwidth * self.efficiency

    @property
    def one_shot(self) -> float:
        return self.alpha if self.one_shot_latency is None else self.one_shot_latency

    @property
    def measured(self) -> bool:
        return bool(self.source) and self.source.strip().lower().startswith("measured")


@dataclass(frozen=True)
class Kernels(Entity):
    """Operator rates measured on one GPU under one engine, reduced to curves by ``ccost calibrate --kernels``
    (the forms: ``ccost.model.kernels``; docs/kernels.md). None: the curve was not measured (the profile prices
    that operator)."""

    engine: str | None = None  # the engine and version the kernels ran under ("vllm 0.24.0")
    source: str | None = None  # provenance: package, version, system, tables, date of the data
    # the peaks the curves' shares are of (the GPU's when absent): FLOP/s, FP8 FLOP/s, B/s
    flops: float | None = None
    fp8_flops: float | None = None
    hbm_bandwidth: float | None = None
    gemm_efficiency: float | None = None  # η: share of the peak `flops` a large BF16/FP16 GEMM reaches
    gemm_half_tokens: float | None = None  # M½: token rows at which half of it is reached
    gemm_half_n: float = 0.0  # N½: the weight's output width (elements per GPU) at which half of it is reached
    gemm_half_k: float = 0.0  # K½: the same of its input width
    gemm_hbm_efficiency: float | None = None  # e_w: share of `hbm_bandwidth` a weight-streaming GEMM reaches
    gemm_latency: float = 0.0  # t₀, s: fixed time of one GEMM kernel
    fp8_gemm_efficiency: float | None = None  # the same for FP8 weights, of the peak `fp8_flops`
    fp8_gemm_half_tokens: float | None = None
    fp8_gemm_half_n: float = 0.0
    fp8_gemm_half_k: float = 0.0
    fp8_gemm_hbm_efficiency: float | None = None
    fp8_gemm_latency: float = 0.0
    decode_attention_hbm_efficiency: float | None = None  # e_kv: share of `hbm_bandwidth` in the KV read
    decode_attention_latency: float = 0.0  # t₀, s per kernel (one per layer)
    decode_attention_head_time: float = 0.0  # c, s per (sequence × query head) per kernel
    decode_attention_half_streams: float = 0.0  # P½: (sequence × KV head) streams at half of e_kv's bandwidth
    # the same with an FP8 KV cache (its own kernels: FA3's FP8 path, TensorRT-LLM's XQA), where measured
    fp8_decode_attention_hbm_efficiency: float | None = None
    fp8_decode_attention_latency: float = 0.0
    fp8_decode_attention_head_time: float = 0.0
    fp8_decode_attention_half_streams: float = 0.0
    prefill_attention_efficiency: float | None = None  # η_a: share of the peak `flops` a long prompt reaches
    prefill_attention_half_tokens: float | None = None  # S½: prompt tokens at which half of it is reached
    prefill_attention_latency: float = 0.0  # t₀, s per kernel (one per layer)

    def gemm(self, fp8: bool) -> tuple[float, float, float, float, float, float] | None:
        """(η, M½, e_w, t₀, N½, K½) of the weights' dtype, or None when that curve was not measured."""
        if fp8:
            p = (self.fp8_gemm_efficiency, self.fp8_gemm_half_tokens, self.fp8_gemm_hbm_efficiency,
                 self.fp8_gemm_latency, self.fp8_gemm_half_n, self.fp8_gemm_half_k)
        else:
            p = (self.gemm_efficiency, self.gemm_half_tokens, self.gemm_hbm_efficiency, self.gemm_latency,
                 self.gemm_half_n, self.gemm_half_k)
        return None if any(x is None for x in p) else p  # type: ignore[return-value]

    @property
    def decode_attention(self) -> bool:
        return self.decode_attention_hbm_efficiency is not None

    def decode_curve(self, fp8_kv: bool) -> tuple[float, float, float, float] | None:
        """(e_kv, t₀, c, P½) of the decode-attention curve for the KV cache's dtype: the FP8 curve for an FP8
        cache where it was measured, else the BF16 one (None: no decode curve)."""
        if fp8_kv and self.fp8_decode_attention_hbm_efficiency is not None:
            return (self.fp8_decode_attention_hbm_efficiency, self.fp8_decode_attention_latency,
                    self.fp8_decode_attention_head_time, self.fp8_decode_attention_half_streams)
        if self.decode_attention_hbm_efficiency is None:
            return None
        return (self.decode_attention_hbm_efficiency, self.decode_attention_latency, self.decode_attention_head_time,
                self.decode_attention_half_streams)

    @property
    def prefill_attention(self) -> bool:
        return self.prefill_attention_efficiency is not None and self.prefill_attention_half_tokens is not None


@dataclass(frozen=True)
class Gpu(Entity):
    memory: float = 0.0  # bytes
    hbm_bandwidth: float = 0.0  # B/s
    flops: float = 0.0  # FLOP/s, dense peak
    achieved_flops: float | None = None  # FLOP/s; None: use flops (and the checklist warns)
    source: str | None = None
    price_per_hour: float | None = None  # USD/s per GPU; None: not priced
    power: float | None = None  # W under load (TDP)
    fp8_flops: float | None = None  # FLOP/s, dense FP8 peak: GEMMs of FP8 weights use it (per-operator roofline)
    kernels: tuple[Kernels, ...] = ()  # measured kernel curves, one block per engine; the first is the default

    @property
    def compute_rate(self) -> float:
        return self.flops if self.achieved_flops is None else self.achieved_flops


@dataclass(frozen=True)
class Cluster(Entity):
    gpu: Gpu | None = None
    nodes: int = 1
    gpus_per_node: int = 8
    intra_node: Link | None = None
    inter_node: Link | None = None
    nvlink_domain: int | None = None  # None means gpus_per_node
    price_per_gpu_hour: float | None = None  # USD/s per GPU; overrides gpu.price_per_hour
    price_per_node_hour: float | None = None  # USD/s per node
    host_power: float = 0.0  # W per node besides the GPUs
    node_power: float | None = None  # W per node, whole; overrides GPUs + host
    pue: float = 1.0  # facility power / IT power
    electricity_price: float = 0.0  # USD/J
    # goodput at scale (ccost.model.target): job interruptions per GPU-second, the time from one to
    # training again, and the write bandwidth of the storage checkpoints go to (None: goodput not modelled)
    failure_rate: float = DEFAULT_FAILURE_RATE
    restart_time: float = DEFAULT_RESTART_TIME
    checkpoint_bandwidth: float | None = None

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def priced(self) -> bool:
        """A price per GPU-hour comes from somewhere: the cluster's per GPU or per node, or its GPU's."""
        return (self.price_per_gpu_hour is not None or self.price_per_node_hour is not None
                or (self.gpu is not None and self.gpu.price_per_hour is not None))

    @property
    def domain(self) -> int:
        return self.gpus_per_node if self.nvlink_domain is None else self.nvlink_domain


@dataclass(frozen=True)
class Model(Entity):
    layers: int = 0
    hidden: int = 0
    heads: int | None = None
    kv_heads: int | None = None
    ffn: int | None = None
    vocab: int | None = None
    params: float | None = None  # count
    weight_bytes: float | None = None  # bytes; overrides params x weights dtype
    experts: int | None = None
    top_k: int | None = None
    moe_layers: int | None = None  # defaults to layers when experts is set
    active_params: float | None = None
    weights: str = "bf16"
    activations: str = "bf16"
    kv_cache: str = "bf16"
    grads: str = "bf16"
    source: str | None = None
    # From a Hugging Face config.json (ccost.hf); the schema marks those the cost model does not read (`recorded`).
    config: str | None = None
    head_dim: int | None = None
    qkv_bias: bool = False
    tied_embeddings: bool = False
    expert_ffn: int | None = None
    shared_experts: int | None = None
    dense_layers: int | None = None
    q_lora_rank: int | None = None  # MLA
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    mtp_layers: int | None = None
    route_nodes: int | None = None  # MoE: node-limited routing (DeepSeek-V3: a token's experts on ≤ 4 nodes)

    @property
    def is_moe(self) -> bool:
        return bool(self.experts)

    @property
    def total_weight_bytes(self) -> float:
        if self.weight_bytes is not None:
            return self.weight_bytes
        return float(self.params or 0.0) * DTYPE_BYTES[self.weights]


@dataclass(frozen=True)
class Stack(Entity):
    """A software-stack profile: what a serving or training stack achieves on the hardware.

    Fixed time per step and per layer per step (scheduling, sampling, kernel launches), the achieved share
    of HBM bandwidth and of peak FLOP/s, and the small-message floor of its collectives. ``ideal`` (peak
    rates, no overhead, no floor) reproduces the reference notes' worked examples exactly."""

    step_overhead: float = 0.0  # s per step
    layer_overhead: float = 0.0  # s per layer per step
    seq_overhead: float = 0.0  # s per running sequence per step (decode, prefill): host work that grows with the batch
    hbm_efficiency: float = 1.0
    gemm_efficiency: float = 1.0  # of the GPU's peak `flops` (its `achieved_flops`, when given, wins)
    attention_efficiency: float = 1.0
    collective_floor: float = 0.0  # s: no collective of this stack takes less
    elementwise_efficiency: float = 1.0  # train: achieved share of HBM bandwidth in elementwise kernels
    tp_comm_overlap: bool = False  # train: TP collectives pipelined with the adjacent GEMMs
    framework_efficiency: float = 1.0  # train, rates = kernels: share of the measured kernel rates reached
    source: str | None = None
    pipeline: str = "steady"  # serving pipelines: steady (no flush) | flush (the notes; training always)
    roofline: str = "operator"  # operator: each operator class bounded on its own and added; step: one
    # roofline for the whole step, max(bytes/BW, FLOPs/R), the reference notes' model
    host_power: float = 0.0  # W per GPU of the stack's host work; the cluster's host_power wins
    rates: str = "profile"  # decode, prefill: profile (the efficiencies above) | kernels (the GPU's curves)
    host_overlap: bool = False  # serving: host work of step n + 1 runs behind the GPU's step n (async scheduling)
    engine: str | None = None  # the engine or framework the profile describes (recorded)
    engine_version: str | None = None  # its versions (recorded)
    attention_engine: str | None = None  # train, rates = kernels: the engine of the kernels block whose
    # prefill-attention curve prices the framework's attention (the kernels it runs), else `engine`'s block

    @property
    def is_ideal(self) -> bool:
        return (self.step_overhead == 0 and self.layer_overhead == 0 and self.seq_overhead == 0 and self.hbm_efficiency == 1
                and self.gemm_efficiency == 1 and self.attention_efficiency == 1 and self.collective_floor == 0
                and self.elementwise_efficiency == 1 and not self.tp_comm_overlap
                and self.roofline == "step" and self.pipeline == "flush" and self.rates == "profile")


@dataclass(frozen=True)
class Plan(Entity):
    model: Model | None = None
    cluster: Cluster | None = None
    phase: str = "decode"  # one of ccost.schema.PHASE_NAMES
    batch: int = 1
    seq: int | None = None
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    fsdp: bool = False
    microbatches: int = 1
    allreduce: str = "auto"
    cross_node: str = "auto"  # auto | flat | hierarchical (see CROSS_NODE)
    one_shot_volume: str = "egress"  # egress (P−1)·m | ring 2(P−1)/P·m (the notes' convention)
    overlap: float = 0.0
    compute_time: float | None = None
    load: float = 1.0  # share of the month the plan runs at its throughput
    #: The software-stack profile that prices the plan. The checker resolves it: the one the plan names, else
    #: the bundled default for its phase (its record's ``default_stack``, from std/stacks.ccost), so a
    #: checked plan always has one; None only in a plan built by hand, which the model refuses.
    stack: Stack | None = None
    # training (ccost.model.training)
    schedule: str = "one_f_one_b"  # gpipe | one_f_one_b | interleaved
    virtual_stages: int = 1  # interleaved: model chunks per GPU, v
    recompute: str = "selective"  # none | selective | full
    sequence_parallel: bool = False
    optimizer_sharding: str = "none"  # none | zero1 (Megatron's distributed optimizer) | zero2
    master_weights: str = "fp32"
    cp: int = 1  # train: context-parallel degree (each sequence split over cp ranks)
    # a training target (ccost.model.target): how much to train, the global batch, by when, on how many
    train_tokens: float | None = None  # tokens to train on
    train_steps: int | None = None  # or optimizer steps
    global_batch: int | None = None  # sequences per optimizer step, all replicas: batch = global_batch/(dp·ep)
    global_batch_tokens: int | None = None  # or tokens per step: global_batch = global_batch_tokens/seq
    microbatch_size: int | None = None  # sequences per micro-batch: microbatches = batch / microbatch_size
    deadline: float | None = None  # s: the time the target must be trained in
    gpu_budget: int | None = None  # the most GPUs the target may use
    checkpoint_interval: float | None = None  # s of training between checkpoints; None: the optimum (Daly)
    # serve (ccost.model.serve): continuous batching, a closed loop of `concurrency` requests per replica
    concurrency: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    chunk_tokens: int | None = None  # None: input_tokens (the whole prompt in one step)
    # online (ccost.model.online): an open loop at a traffic's arrival rate, continuous batching up to `max_seqs`
    traffic: "Traffic | None" = None
    max_seqs: int = DEFAULT_MAX_SEQS  # running requests per engine at most
    step_tokens: int = DEFAULT_STEP_TOKENS  # tokens one step computes at most (chunked prefill)
    prefill_workers: int = 0  # disaggregated: prefill workers per replica (0: aggregated serving)
    decode_workers: int = 1  # disaggregated: decode workers per replica
    prefill_tp: int | None = None  # disaggregated: the prefill workers' tp (None: the plan's tp)
    #: A plan that names no stack: the bundled default of every phase (the checker fills it in, and
    #: ``stack`` with the one of the plan's phase), so that a sweep or a search that varies the phase
    #: (``vary``) prices each point under its own phase's default. Empty when the plan names its stack.
    stack_defaults: Mapping[str, Stack] = field(default_factory=lambda: _NO_STACKS, compare=False, repr=False)

    @property
    def stack_named(self) -> bool:
        """The plan (or a block it extends) names its stack; else it has its phase's bundled default."""
        return not self.stack_defaults

    @property
    def states_target(self) -> bool:
        """The plan states what to train (``train_tokens`` or ``train_steps``); ccost.model.target prices it when
        its phase takes a target (``ccost.schema.targeted``)."""
        return self.train_tokens is not None or self.train_steps is not None

    @property
    def global_sequences(self) -> float | None:
        """The global batch in sequences (``global_batch``, or ``global_batch_tokens`` / ``seq``), or None."""
        if self.global_batch is not None:
            return float(self.global_batch)
        if self.global_batch_tokens is not None and self.seq:
            return self.global_batch_tokens / self.seq
        return None

    def rebatched(self, keep: frozenset[str] | set[str] = frozenset()) -> "Plan":
        """This plan with ``batch`` = the global batch / (dp·ep) when it states a global batch its layout
        splits into whole sequences per replica (``layout_rules.holds_global_batch``), and ``microbatches`` =
        batch / ``microbatch_size`` when it gives a whole number; else itself. A plan copied with other
        degrees (a search point, a sweep point, the doubled fleet) calls it through ``ccost.schema.rebatched``
        (for a phase that takes a training target); the checker's builder keeps the fields the block writes
        (``keep``), so that a contradiction is reported (E303), not overwritten."""
        batch, micro = self.batch, self.microbatches
        g = self.global_sequences
        if g is not None and "batch" not in keep:
            per = g / (self.dp * self.ep)
            if per >= 1 and per == int(per):
                batch = int(per)
        if self.microbatch_size is not None and "microbatches" not in keep:
            m = batch / self.microbatch_size
            if m >= 1 and m == int(m):
                micro = int(m)
        if (batch, micro) == (self.batch, self.microbatches):
            return self
        from dataclasses import replace

        return replace(self, batch=batch, microbatches=micro)

    @property
    def gpus(self) -> int:
        """tp·pp·ep·dp (·cp), the product of every degree of ``ccost.axes``: EP is its own axis here (each of
        the ep ranks holds 1/ep of the experts and runs attention on its own share of the tokens); ``batch``
        is per replica (per dp·ep rank group). A disaggregated online plan (``prefill_workers`` > 0) uses,
        per replica, its prefill workers' GPUs (prefill_tp·pp·ep each) and its decode workers' (tp·pp·ep
        each)."""
        if self.prefill_workers:
            per = self.pp * self.ep * self.cp
            return self.dp * per * (self.prefill_workers * (self.prefill_tp or self.tp) + self.decode_workers * self.tp)
        return axes.gpus(self)


def vary(plan: Plan, **values) -> Plan:
    """``plan`` with some fields replaced, as a sweep or a search varies them: a plan that names no stack
    takes the default of its new phase (``stack_defaults``), and one given a stack keeps it from then on."""
    if "stack" in values:
        values.setdefault("stack_defaults", _NO_STACKS)
    elif "phase" in values and plan.stack_defaults:
        values["stack"] = plan.stack_defaults.get(values["phase"], plan.stack)
    return replace(plan, **values)


@dataclass(frozen=True)
class Sweep(Entity):
    base: Plan | None = None
    fields: tuple[tuple[str, tuple], ...] = ()  # ((field, (v1, v2, ...)), ...) in written order
    # serving plans: what picks the optimum (None: cost_per_token when the cluster is priced, else
    # throughput_per_gpu)
    objective: str | None = None


@dataclass(frozen=True)
class Compare(Entity):
    plans: tuple[Plan, ...] = ()
    by: str = "latency"  # latency | throughput | overhead | efficiency | cost_per_token | throughput_per_gpu


#: The percentiles an SLO may be written at (``slo_percentile``).
SLO_PERCENTILES = ("p50", "p90", "p95", "p99")


@dataclass(frozen=True)
class Policy(Entity):
    max_overhead: float = 0.30
    min_efficiency: float = 0.70
    max_memory: float = 0.90
    max_cost_per_mtok: float | None = None  # USD per million tokens at the plan's load
    min_goodput: float | None = None  # training targets: the least expected goodput (ccost.model.target)
    # latency promises (SLOs) of online plans (ccost.model.online), each at `slo_percentile`
    max_ttft: float | None = None  # s: time to first token
    max_tpot: float | None = None  # s: time per output token (inter-token latency)
    max_e2e: float | None = None  # s: request latency, arrival to last token
    slo_percentile: str = "p99"
    min_slo_goodput: float | None = None  # share of requests that meet every limit

    @property
    def slo_set(self) -> bool:
        """The policy writes a latency promise (an SLO limit or a goodput share)."""
        return any(v is not None for v in (self.max_ttft, self.max_tpot, self.max_e2e, self.min_slo_goodput))


#: What an online plan's traffic draws when it does not say (``Traffic``): the requests each simulation
#: measures and its seed. 2,000 measured requests put the p99 between its 20th and 21st largest value.
DEFAULT_REQUESTS = 2000
DEFAULT_SEED = 0
TRAFFIC_ARRIVALS = ("poisson", "clients", "burst")


@dataclass(frozen=True)
class Traffic(Entity):
    """What a service must carry (``ccost.model.online``): arrivals, request lengths, prefix-cache hits.

    Arrivals: ``rate`` requests/s on average and ``peak_rate`` at the busiest time, the gaps Poisson
    (``burstiness``, their coefficient of variation, 1) or gamma (another CV); or ``clients`` that all start
    at once and each send the next request when the last one ends (a closed loop, as a benchmark runs);
    or a ``burst`` of that many requests at once. Lengths: ``input_tokens`` / ``output_tokens`` fixed, or
    the mean of a distribution with a spread (``*_cv``: lognormal of that coefficient of variation;
    ``*_p90``: lognormal with that p90; ``*_range``: uniform over mean·(1 ± range), vLLM's random dataset)
    clipped to ``*_max``."""

    rate: float | None = None  # requests/s, mean
    peak_rate: float | None = None  # requests/s at the peak; None: rate
    burstiness: float = 1.0  # CV of the gaps between arrivals
    clients: int | None = None  # closed loop: clients that start together
    burst: int | None = None  # requests that arrive at once, and no others
    input_tokens: int | None = None
    output_tokens: int | None = None
    input_cv: float | None = None
    input_p90: float | None = None
    input_range: float | None = None
    input_max: int | None = None
    output_cv: float | None = None
    output_p90: float | None = None
    output_range: float | None = None
    output_max: int | None = None
    prefix_hit: float = 0.0  # share of each prompt found in the prefix cache
    seed: int = DEFAULT_SEED
    requests: int = DEFAULT_REQUESTS  # measured requests per simulation
    trace: str | None = None  # a file of input/output token counts (read by the checker)
    # its rows, once the checker has read it (a ccost.model.simulate.Trace; the spec imports no numpy)
    trace_data: Any = field(default=None, compare=False, repr=False)

    @property
    def arrivals(self) -> str:
        """How requests arrive: ``poisson`` (at a rate; gamma gaps when ``burstiness`` ≠ 1), ``clients`` or
        ``burst``."""
        return "clients" if self.clients else "burst" if self.burst else "poisson"

    @property
    def peak(self) -> float | None:
        """The rate capacity is sized for: ``peak_rate``, else ``rate``."""
        return self.peak_rate if self.peak_rate is not None else self.rate


#: The most points a search may have unless its ``limit`` says otherwise (E402).
DEFAULT_LIMIT = 10_000_000


@dataclass(frozen=True)
class Search(Entity):
    """A checked ``search`` block. ``axes`` holds ``(field, (v1, v2, ...))`` in written order.

    ``max_gpus`` None means the cluster's GPUs; ``max_overhead``/``min_efficiency`` None mean "off"
    unless ``use_policy`` brings them from the file's policy; ``use_policy`` None means "when the file has
    a policy block"."""

    base: Plan | None = None
    axes: tuple[tuple[str, tuple], ...] = ()
    objective: str = "latency"
    top: int = 10
    limit: int = DEFAULT_LIMIT
    max_gpus: int | None = None
    fits_memory: bool = True
    tp_in_domain: bool = False
    tp_divides_kv_heads: bool = False
    pp_divides_layers: bool = False
    max_overhead: float | None = None
    min_efficiency: float | None = None
    use_policy: bool | None = None
    distinct: bool = True
    headroom: float = 0.0  # capacity searches: the SLOs must hold at the peak rate × (1 + headroom)

    @property
    def size(self) -> int:
        """Points in the search: the product of the axis lengths."""
        return math.prod(len(v) for _, v in self.axes)


@dataclass(frozen=True)
class Spec:
    """A checked file: its entities by kind and name, in the order written (imports first)."""

    path: str
    links: Mapping[str, Link]
    gpus: Mapping[str, Gpu]
    clusters: Mapping[str, Cluster]
    models: Mapping[str, Model]
    plans: Mapping[str, Plan]
    sweeps: Mapping[str, Sweep]
    compares: Mapping[str, Compare]
    policy: Policy
    searches: Mapping[str, Search] = field(default_factory=dict)
    stacks: Mapping[str, Stack] = field(default_factory=dict)
    traffics: Mapping[str, Traffic] = field(default_factory=dict)
    kernels: Mapping[str, Kernels] = field(default_factory=dict)
    files: tuple[str, ...] = ()  # the spec and every file it imports, for provenance hashes
    local_plans: tuple[str, ...] = ()  # plans written in this file (not imported), in order
