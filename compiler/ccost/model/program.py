"""The program of one step: the records every cost model builds, and the builders they share.

A cost model (``ccost.model.lower`` for decode and prefill, ``ccost.model.training`` for a training step; ``ccost.model.serve``
combines ``lower``'s steps) turns a plan's ``lower.Static`` choices and ``lower.Inputs`` numbers into a
``Program``: its ``Collective``s, each priced as it is built (``collective``, ``p2p``), and its ``Compute``
terms, whose memory is a ``Memory`` of named parts. Like the models, everything here runs unchanged on
floats, numpy arrays and derivation values (``ccost.derive``): nothing branches on a number.

The parts of the memory per GPU are declared once, in ``results.MEMORY_PARTS`` (name, document key, label,
the checklist's word); a cost model gives the values of the parts it holds (``memory(x, weights=...,
kv_cache=...)``) and everything that shows memory (the results document, ``ccost explain``, checklist item
11, the review's memory table) iterates over that table.

The rank layout (which group leaves the NVLink domain) comes from ``ccost.axes``: a group's stride is
``axes.stride``, the ranks one copy of the weights is spread over ``axes.split``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ccost import axes, collectives
from ccost.model import costs
from ccost.derive import maximum, minimum, named
from ccost.results import MEMORY_PARTS

Num = Any  # float | np.ndarray | derive.Value

#: The parts' names, in the table's order (the order of every listing and of the total's sum).
MEMORY_NAMES: tuple[str, ...] = tuple(p.name for p in MEMORY_PARTS)


@dataclass(frozen=True)
class Collective:
    """One line of a plan's collective program: ``count`` collectives per step, each costing ``cost``.

    ``algorithm`` is the algorithm used (for ``auto``, the winner; an index array into ``candidates``
    in array mode). ``group`` holds the topology alternatives (flat / hierarchical / split) when the group
    can span NVLink domains. ``total`` = count × time.
    """

    key: str  # TP, PP, PPx, EP, DP, DPe, AG, RS, ...
    kind: str
    purpose: str
    algorithm: Any
    count: Num
    group_size: Num
    per_domain: Num
    message: Num
    cost: costs.Cost
    total: Num
    link: Any  # name (str), or for a spanning group the `used` mode to map to names
    group: costs.GroupCost | None = None
    reason: str | None = None
    candidates: tuple = ()
    candidate_costs: dict = field(default_factory=dict)
    note: str | None = None
    #: A one-shot AllReduce priced under the other volume convention (``Static.one_shot_volume`` says
    #: which one was charged), so the review can show both; None for every other algorithm.
    one_shot_other: costs.GroupCost | None = None
    one_shot_volume: str | None = None  # the convention charged, when one_shot_other is set
    #: The part of ``total`` that runs behind compute by construction (ring attention's sends behind the
    #: attention of the block already held); None for a collective nothing hides but ``overlap``.
    hidden: Num | None = None


@dataclass(frozen=True)
class Memory:
    """The memory one GPU holds in a step, as named parts (``results.MEMORY_PARTS``). ``parts`` holds the
    parts the cost model has (a part it lacks reads as 0); ``total`` is their sum in the table's order and
    ``limit`` the policy's usable share of the GPU's memory."""

    parts: Mapping[str, Num]
    total: Num
    limit: Num

    def __getitem__(self, name: str) -> Num:
        """The part ``name`` (0.0 when the cost model has no such part)."""
        if name not in MEMORY_NAMES:
            raise KeyError(f"no memory part named {name!r}: results.MEMORY_PARTS has {', '.join(MEMORY_NAMES)}")
        return self.parts.get(name, 0.0)

    @property
    def held(self) -> list:
        """The parts the cost model has, in the table's order (what ``ccost explain`` lists)."""
        return [self.parts[n] for n in MEMORY_NAMES if n in self.parts]


def memory(x: Any, **parts: Num) -> Memory:
    """The ``Memory`` of the parts a cost model holds (``memory(x, weights=W, kv_cache=KV)``): the total,
    their sum in the table's order, and the usable limit max_memory·HBM of ``x`` (``lower.Inputs``)."""
    unknown = [n for n in parts if n not in MEMORY_NAMES]
    if unknown:
        raise TypeError(f"no memory part named {', '.join(unknown)}: declare it in results.MEMORY_PARTS")
    held = [parts[n] for n in MEMORY_NAMES if n in parts]
    total = held[0]
    for v in held[1:]:
        total = total + v
    return Memory(MappingProxyType({n: parts[n] for n in MEMORY_NAMES if n in parts}),
                  named("mem_GPU", total, "memory per GPU"),
                  named("mem_limit", x.max_mem * x.mem, "usable memory: max_memory·HBM"))


@dataclass(frozen=True)
class Compute:
    """Compute and memory terms of one step (per GPU unless the name says otherwise)."""

    weights_gpu: Num  # bytes of weights this GPU holds unsharded (what it reads each step)
    kv_gpu: Num  # KV-cache bytes on this GPU (what the step reads or writes of it)
    bytes_gpu: Num  # bytes read per step per GPU
    flops_gpu: Num
    T_mem: Num  # stage, memory bound
    T_flop: Num  # stage, FLOP bound
    T_stage: Num
    T_compute: Num  # the step's compute on the critical path (pp stages)
    T_one: Num  # the same work (one model instance) on one GPU
    params_gpu: Num
    memory: Memory  # what one GPU holds, by part
    tokens_step: Num  # tokens per step in the whole plan (all replicas)
    # One stage, one micro-batch (the pipelined step is (M + P − 1)·t_mb + ...; ccost.model.analysis):
    bytes_mb: Num = 0.0  # bytes read: the stage's whole weights + 1/M of its KV cache
    flops_mb: Num = 0.0  # 1/M of the stage's FLOPs
    T_mem_mb: Num = 0.0
    T_flop_mb: Num = 0.0
    t_mb: Num = 0.0  # roofline of one micro-batch on one stage (T_stage/M when compute_time is given)
    #: The per-operator roofline of one stage: (operator, bytes, FLOPs, time, memory time, FLOP time) rows;
    #: empty under the notes' whole-step roofline.
    operators: tuple = ()
    #: The stack's host time per step, once per step (not per stage or micro-batch): t_step, plus
    #: t_seq·B in decode and prefill under a stack with seq_overhead; 0 without overheads.
    T_host: Num = 0.0


@dataclass(frozen=True)
class Program:
    static: Any  # lower.Static: the plan's structural choices
    inputs: Any  # lower.Inputs: its numbers (floats, arrays or derivation values)
    collectives: tuple[Collective, ...]
    compute: Compute
    train: Any = None  # training: the schedule's terms (ccost.model.training.TrainTerms)


@dataclass(frozen=True)
class Priced:
    """A plan priced by its phase (``ccost.model.phases``), in one mode: the program its document, checklist and
    collectives show, its metrics (``analysis.Metrics``, with the plan's throughput: what its cost is per),
    and the phase's own terms (serve: ``serve.ServeTerms``; None for a one-step phase)."""

    program: Program
    metrics: Any
    terms: Any = None


# ---------------------------------------------------------------------------------------------------
# Builders: a collective on its group and link, priced as it is built

def on(static: Any) -> frozenset[str]:
    """The optional axes (``axes.OPTIONAL``) the plan prices: each has a flag of its name in ``Static``."""
    return frozenset(n for n in axes.OPTIONAL if getattr(static, n))


def group_per_domain(p: Num, stride: Num, D: Num) -> Num:
    """Ranks of a group of ``p`` at ``stride`` that share one NVLink domain: clamp(D/stride, 1, p)."""
    return minimum(maximum(D / stride, 1), p)


def link_name(static: Any, used) -> Any:
    """The link a priced group used: intra, inter (flat), or both (hierarchical)."""
    both = f"{static.intra_name}+{static.inter_name}"
    names = {"intra": static.intra_name, "flat": static.inter_name, "hierarchical": both}
    if isinstance(used, np.ndarray):
        return np.array([names[m] for m in costs.GROUP_MODES], dtype=object)[used]
    return names[used]


def priced(static: Any, kind: str, algorithm: str | None, p: Num, m: Num, g: Num, tag: str):
    """(GroupCost, chosen algorithm, reason, candidate costs) of one collective on its topology.

    For an AllReduce with ``auto``, ``costs.group_cost`` prices every algorithm on the topology and keeps
    the cheapest, with the reason (array mode: index arrays instead of labels)."""
    gc = costs.group_cost(kind, algorithm if kind == "allreduce" else None, p, m, g, static.intra,
                          static.inter, static.cross_node, tag=tag, one_shot_volume=static.one_shot_volume)
    cand = {a: alt.chosen for a, alt in (gc.alternatives or {}).items()}
    alg = gc.algorithm if gc.algorithm is not None else gc.chosen.algorithm
    return gc, alg, gc.reason, cand


def collective(static: Any, key: str, kind: str, purpose: str, count: Num, p: Num, stride: Num,
               m: Num, x: Any, algorithm: str | None = None, note: str | None = None) -> Collective:
    """``count`` collectives ``kind`` per step on a group of ``p`` ranks at ``stride`` (``axes.stride``),
    each of message ``m``, on the plan's links (``static``; ``x``: its inputs), held to the stack's floor.
    ``key`` names it in the derivation (``g_KEY``, ``T_KEY,step``)."""
    g = named(f"g_{key}", group_per_domain(p, stride, x.D), f"{key} ranks per NVLink domain")
    gc, alg, reason, cand = priced(static, kind, algorithm, p, m, g, key)
    chosen = floored(static, gc.chosen, p, x, key)
    total = named(f"T_{key},step", count * chosen.time, f"{purpose}: {key} collectives per step × time")
    other = None
    # an algorithm with a second volume convention (one-shot's egress) is priced under the other one too
    if isinstance(alg, str) and collectives.algorithm(kind, alg).egress is not None:
        convention = collectives.other_one_shot_volume(static.one_shot_volume)
        other = costs.group_cost(kind, alg, p, m, g, static.intra, static.inter, static.cross_node,
                                 tag=f"{key},{convention}", one_shot_volume=convention)
    return Collective(key, kind, purpose, alg, count, p, g, m, chosen, total, link_name(static, gc.used),
                      gc, reason, tuple(cand), cand, note, other,
                      static.one_shot_volume if other is not None else None)


def floored(static: Any, c: costs.Cost, p: Num, x: Any, key: str) -> costs.Cost:
    """The collective ``c`` held to the stack's small-message floor (unchanged when the stack has none)."""
    if not static.floor:
        return c
    return costs.floored(c, x.T_floor, p, tag=key)


def p2p(static: Any, key: str, purpose: str, count: Num, m: Num, link: costs.LinkParams,
        link_name: str | None, x: Any, note: str | None = None) -> Collective:
    """``count`` point-to-point sends per step of message ``m`` on ``link`` (named ``link_name``)."""
    c = floored(static, link.cost("p2p", None, 2, m, key), 2, x, key)
    total = named(f"T_{key},step", count * c.time, f"{purpose}: sends per step × time")
    return Collective(key, "p2p", purpose, "direct", count, 2, 2, m, c, total, link_name, None, None, (), {}, note)


def total(xs, empty=0.0):
    """The sum of ``xs`` in order (``empty`` when there is none: a zero of the right dimension in
    derivation mode, ``derive.zero``)."""
    out = None
    for x in xs:
        out = x if out is None else out + x
    return empty if out is None else out
