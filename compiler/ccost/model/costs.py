"""The α-β core: what a collective costs, and the roofline and analysis formulas around it.

Every function here is written once over plain numbers and runs in the three modes of ``ccost.derive``
(Python floats, numpy arrays elementwise, derivation ``Value``s) with bit-identical results; that is why
there is no ``if`` on a quantity below (``where``/``minimum`` instead), except in ``group_cost``'s scalar
path, which takes the same branch that the array path selects.

Conventions (SI floats):

* ``p`` — ranks in the group; ``m`` — message in bytes, *per rank input size* as nccl-tests' "size"
  (AllReduce: the buffer every rank reduces; AllGather: the gathered output, each rank contributing m/P;
  ReduceScatter: the input, each rank keeping m/P; All-to-All: what each rank holds and redistributes;
  Broadcast / point-to-point: the payload);
* ``alpha`` — latency per hop, seconds; ``bandwidth`` — bytes/s per GPU per direction (callers pass
  bandwidth × efficiency);
* ``volume`` — bytes each GPU sends; ``T = α·hops + volume/B``.

At P = 1 every collective costs exactly 0 (no hop, no byte), in every mode.

Hops and volume per kind and algorithm (the notes “Communication Cost Analysis” and
“Communication Cost Math — Distributed Inference”). The formulas, default algorithms and two-level stages
are the records of ``ccost.collectives``, which the functions below look up instead of branching on the kind:

=============  ==========  ====================  =========================================================
kind           algorithm   hops                  volume per GPU
=============  ==========  ====================  =========================================================
allreduce      ring        2(P−1)                2(P−1)/P·m
allreduce      tree        2·⌈log₂P⌉             2(P−1)/P·m (the notes charge the ring volume)
allreduce      one_shot    1 (at one_shot_lat.)  (P−1)·m egress, or 2(P−1)/P·m (``one_shot_volume``)
allreduce      two_shot    2                     2(P−1)/P·m
allgather      ring        P−1                   (P−1)/P·m
reducescatter  ring        P−1                   (P−1)/P·m
alltoall       pairwise    P−1                   (P−1)/P·m (Analysis note: the local share stays put)
broadcast      tree        ⌈log₂P⌉               log₂P·m (binomial tree: log₂P·(α + m/B))
p2p            direct      1                     m
=============  ==========  ====================  =========================================================
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ccost import collectives, derive, units
from ccost.collectives import ONE_SHOT_VOLUMES, one_if_many
from ccost.derive import choose, maximum, named

# The kinds, algorithms and their formulas are the records of ``ccost.collectives``; these names stay
# here for the callers that read them off the cost core.
KINDS = collectives.KINDS
#: The AllReduce algorithms the model prices; "auto" (``auto_allreduce``) picks the cheapest of them.
ALLREDUCE_ALGORITHMS = collectives.ALGORITHMS
#: The one algorithm modelled for each other kind (its name is what reports print).
DEFAULT_ALGORITHM = collectives.DEFAULT_ALGORITHM
#: How a group was priced, in the order of the index arrays that ``group_cost`` returns in array mode.
GROUP_MODES = ("intra", "flat", "hierarchical")
#: AllReduce algorithms of custom kernels (vLLM, TensorRT-LLM) that need NVLink peer access: one domain only.
CUSTOM_ALLREDUCE = collectives.CUSTOM_ALGORITHMS
CROSS_NODE = ("auto", "flat", "hierarchical")

Num = Any  # float | np.ndarray | derive.Value: every formula below accepts all three


def _tag(name: str, tag: str | None) -> str:
    return f"{name}_{tag}" if tag else name


def _algorithm(kind: str, algorithm: str | None) -> str:
    """Validate (kind, algorithm) and name the algorithm that prices it (the kind's default when it has
    one model); a wrong pair is a programming error (the checker validated the spec)."""
    return collectives.algorithm(kind, algorithm).name


# ---------------------------------------------------------------------------------------------------
# Hops and volume

def hops(kind: str, algorithm: str | None, p: Num) -> Num:
    """Sequential latency steps (hops) of one collective on ``p`` ranks.

    >>> hops("allreduce", "ring", 8), hops("allreduce", "tree", 8)
    (14, 6.0)

    Tree and broadcast use ⌈log₂P⌉ (a binary tree over P ranks has that depth), so hops stay whole
    numbers when P is not a power of two; for powers of two this is the notes' 2·log₂P.
    """
    return collectives.algorithm(kind, algorithm).hops(p)


def volume(kind: str, algorithm: str | None, p: Num, m: Num, one_shot_volume: str = "egress") -> Num:
    """Bytes each GPU sends in one collective (see the module table).

    >>> volume("allreduce", "ring", 8, 524288)
    917504.0

    Ring, tree and two-shot AllReduce are charged the ring volume 2(P−1)/P·m: a reduce-scatter plus an
    all-gather is the least any AllReduce must move per GPU. A one-shot kernel pushes each GPU's whole
    buffer to every peer, (P−1)·m (``one_shot_volume="egress"``, the default: A1 2.585 ms); the notes charge
    it the ring volume instead (``"ring"``: A1 1.606 ms, A3 3.04 ms). The egress default is what keeps
    ``auto`` from picking one-shot for large messages, where it really is the worst choice.
    All-to-All follows “Communication Cost Analysis”, (P−1)/P·m: the share a rank keeps for itself never
    leaves it (“Communication Cost Math — Distributed Inference” omits that factor).
    """
    return _volume(collectives.algorithm(kind, algorithm), p, m, one_shot_volume)


def _volume(alg: collectives.Algorithm, p: Num, m: Num, one_shot_volume: str) -> Num:
    """``alg``'s volume under the plan's convention: its egress when it has one and the plan charges it."""
    if alg.egress is not None:
        if one_shot_volume not in ONE_SHOT_VOLUMES:
            raise ValueError(f"one_shot_volume must be one of {ONE_SHOT_VOLUMES}, not {one_shot_volume!r}")
        if one_shot_volume == "egress":
            return alg.egress(p, m)
    return alg.volume(p, m)


# ---------------------------------------------------------------------------------------------------
# One collective on one link

@dataclass(frozen=True)
class Cost:
    """The price of one collective: ``time = latency + bandwidth_time``, ``latency = α·hops``,
    ``bandwidth_time = volume/B``. Fields are floats, arrays or Values, as the inputs were.
    ``stages`` lists the parts of a hierarchical cost as (label, Cost)."""

    kind: str
    algorithm: str
    hops: Num
    volume: Num
    latency: Num
    bandwidth_time: Num
    time: Num
    stages: tuple = field(default=(), compare=False)


def collective_cost(kind: str, algorithm: str | None, p: Num, m: Num, alpha: Num, bandwidth: Num,
                    one_shot_latency: Num | None = None, tag: str | None = None,
                    one_shot_volume: str = "egress", curve: "Curve | None" = None,
                    floor: Num | None = None) -> Cost:
    """Price one collective: ``T = α·hops + volume/B``.

    ``one_shot_latency`` is the latency of the one-shot kernel's single hop (None: ``alpha``). ``tag``
    suffixes the derivation's step names (``hops_TP``, ``T_TP``) so that several collectives of a plan
    can be explained side by side; it changes nothing in float and array modes.

    On a measured link ``curve`` replaces ``alpha`` and ``bandwidth`` by those of the piece the
    message falls in (``Curve.at``), and the time is raised to the link's floors (``Curve.floor_time``,
    ``floor``): no collective is priced below what the log measured. The raise goes to the latency term,
    so ``time = latency + bandwidth_time`` still holds.

    >>> round(collective_cost("allreduce", "ring", 8, 14e9, 5e-6, 450e9).time * 1e3, 2)
    54.51
    """
    rec = collectives.algorithm(kind, algorithm)
    alg = rec.name
    # Step names and descriptions only matter to derivations; float mode skips building them (it is
    # the hot path of evaluation), the arithmetic is the same either way.
    V = derive.Value
    if curve is not None:
        alpha, bandwidth = curve.at(m, tag)
    deriving = (isinstance(p, V) or isinstance(m, V) or isinstance(alpha, V) or isinstance(bandwidth, V)
                or isinstance(one_shot_latency, V))
    h = rec.hops(p)
    v = _volume(rec, p, m, one_shot_volume)
    if deriving:
        h = named(_tag("hops", tag), h, f"{kind} {alg} hops on {_pname(p)} ranks")
        v = named(_tag("volume", tag), v, f"{kind} {alg} bytes sent per GPU")
    hop_latency = alpha
    if rec.custom and one_shot_latency is not None:
        # A two-shot AllReduce is two phases of the same custom kernel (reduce-scatter, all-gather by
        # direct peer writes), each ending in the cross-GPU barrier that a one-shot pays once: each shot
        # costs the one-shot latency, not a ring hop's α (with 2α, two-shot would beat one-shot at every
        # size, the reverse of practice for small messages).
        hop_latency = one_shot_latency
    # latency and bandwidth_time stay anonymous, so the step reads T = α·hops + volume/B.
    lat = hop_latency * h
    bw_time = v / bandwidth
    t = lat + bw_time
    if curve is not None or floor is not None:
        t, lat = _floored(kind, p, m, t, lat, bw_time, curve, floor, tag)
    if deriving:
        t = named(_tag("T", tag), t, f"time of one {kind} ({alg})")
    return Cost(kind, alg, h, v, lat, bw_time, t)


def _floored(kind: str, p: Num, m: Num, t: Num, lat: Num, bw_time: Num, curve: "Curve | None",
             floor: Num | None, tag: str | None) -> tuple[Num, Num]:
    """``t`` raised to the measured floors, and the latency term that makes ``lat + bw_time`` that time.

    The floors: the link's ``floor_latency`` for any group of two or more ranks (0 for one rank, which
    costs nothing in every mode), and on the collective and rank count the curve was measured on, the
    curve's own time at this size (what nccl-tests measured, whichever algorithm NCCL ran)."""
    lo = None
    if floor is not None:
        lo = floor * one_if_many(p)
        if derive.is_value(lo):
            lo = named(_tag("T_floor", tag), lo, "the link's floor: the smallest time the log measured")
    if curve is not None and curve.kind == kind and curve.ranks is not None:
        same = derive.value_of(p) == curve.ranks
        if isinstance(same, np.ndarray) and not same.any():
            pass  # no group of the curve's rank count here: nothing to hold to it (and nothing to compute)
        else:
            meas = curve.floor_time(m, tag)
            if isinstance(same, np.ndarray) or isinstance(meas, np.ndarray):
                meas = np.where(same, meas, 0.0)
                lo = meas if lo is None else maximum(lo, meas)
            elif bool(same):
                lo = meas if lo is None else maximum(lo, meas)
    if lo is None:
        return t, lat
    raised = maximum(t, lo)
    if isinstance(raised, np.ndarray) or isinstance(t, np.ndarray):
        return raised, np.where(np.asarray(raised) > np.asarray(t), raised - bw_time, lat)
    if derive.value_of(raised) > derive.value_of(t):
        return raised, raised - bw_time
    return raised, lat


def floored(cost: Cost, floor: Num, p: Num, tag: str | None = None) -> Cost:
    """``cost`` held to a software stack's small-message floor: a collective on two or more ranks takes at
    least ``floor`` (kernel launch and synchronisation: NCCL measures 15–30 µs for tiny AllReduces). The
    latency term absorbs the difference, so latency + bandwidth time is still the time; a group of one
    rank still costs 0. The cheapest algorithm is unchanged by a floor (max(·, f) keeps the order)."""
    f = floor * one_if_many(p)
    lat = maximum(cost.latency, f - cost.bandwidth_time)
    t = lat + cost.bandwidth_time
    if any(isinstance(v, derive.Value) for v in (cost.time, floor, p)):
        t = named(_tag("T_floored", tag), t, f"time of one {cost.kind}, at least the stack's floor T_floor")
    return Cost(cost.kind, cost.algorithm, cost.hops, cost.volume, lat, cost.bandwidth_time, t, cost.stages)


def _pname(p: Num) -> str:
    return "P" if not isinstance(p, derive.Value) or not p.name else p.name


def ring_allreduce(p: Num, m: Num, alpha: Num, bandwidth: Num, tag: str | None = None) -> Cost:
    """Ring AllReduce: 2(P−1) hops, 2(P−1)/P·m per GPU."""
    return collective_cost("allreduce", "ring", p, m, alpha, bandwidth, tag=tag)


def tree_allreduce(p: Num, m: Num, alpha: Num, bandwidth: Num, tag: str | None = None) -> Cost:
    """Tree AllReduce: 2·⌈log₂P⌉ hops, ring volume."""
    return collective_cost("allreduce", "tree", p, m, alpha, bandwidth, tag=tag)


def one_shot_allreduce(p: Num, m: Num, one_shot_latency: Num, bandwidth: Num, tag: str | None = None,
                       one_shot_volume: str = "egress") -> Cost:
    """One-shot AllReduce (vLLM / TRT-LLM custom kernel): one hop at ``one_shot_latency``; volume (P−1)·m
    egress, or the ring volume with ``one_shot_volume="ring"`` (the notes' convention)."""
    return collective_cost("allreduce", "one_shot", p, m, one_shot_latency, bandwidth, one_shot_latency, tag,
                           one_shot_volume)


def two_shot_allreduce(p: Num, m: Num, alpha: Num, bandwidth: Num, tag: str | None = None) -> Cost:
    """Two-shot AllReduce: 2 hops (reduce-scatter, all-gather), ring volume."""
    return collective_cost("allreduce", "two_shot", p, m, alpha, bandwidth, tag=tag)


def allgather(p: Num, m: Num, alpha: Num, bandwidth: Num, tag: str | None = None) -> Cost:
    """AllGather of an m-byte output: P−1 hops, (P−1)/P·m."""
    return collective_cost("allgather", None, p, m, alpha, bandwidth, tag=tag)


def reducescatter(p: Num, m: Num, alpha: Num, bandwidth: Num, tag: str | None = None) -> Cost:
    """ReduceScatter of an m-byte input: P−1 hops, (P−1)/P·m."""
    return collective_cost("reducescatter", None, p, m, alpha, bandwidth, tag=tag)


def alltoall(p: Num, m: Num, alpha: Num, bandwidth: Num, tag: str | None = None) -> Cost:
    """All-to-All of m bytes per rank: P−1 hops, (P−1)/P·m (“Communication Cost Analysis”'s convention)."""
    return collective_cost("alltoall", None, p, m, alpha, bandwidth, tag=tag)


def broadcast(p: Num, m: Num, alpha: Num, bandwidth: Num, tag: str | None = None) -> Cost:
    """Binomial-tree Broadcast: ⌈log₂P⌉ hops, log₂P·m."""
    return collective_cost("broadcast", None, p, m, alpha, bandwidth, tag=tag)


def p2p(p: Num, m: Num, alpha: Num, bandwidth: Num, tag: str | None = None) -> Cost:
    """Point-to-point send of m bytes: 1 hop (0 when ``p`` = 1, a send to oneself)."""
    return collective_cost("p2p", None, p, m, alpha, bandwidth, tag=tag)


def scaled(cost: Cost, count: Num, tag: str | None = None) -> Cost:
    """``count`` repetitions of a collective (160 AllReduces per token): every field times ``count``.
    In derive mode the total time is a named step ``T_total_<tag>`` = count·T; the other fields stay
    anonymous products (``160·α·hops``) so the caller can name the ones the review prints."""
    return Cost(cost.kind, cost.algorithm, count * cost.hops, count * cost.volume, count * cost.latency,
                count * cost.bandwidth_time,
                named(_tag("T_total", tag), count * cost.time, f"{cost.kind} × count"), cost.stages)


# ---------------------------------------------------------------------------------------------------
# auto: the cheapest AllReduce algorithm

@dataclass(frozen=True)
class AutoChoice:
    """The result of ``auto_allreduce``: ``algorithm`` (a label; an int array of indices into
    ``candidates`` in array mode), its ``cost``, a one-sentence ``reason`` (None in array mode) and the
    ``costs`` of every candidate, for the review's comparison table."""

    algorithm: Any
    cost: Cost
    reason: str | None
    costs: dict
    candidates: tuple


def auto_allreduce(p: Num, m: Num, alpha: Num, bandwidth: Num, one_shot_latency: Num | None = None,
                   candidates: tuple = ALLREDUCE_ALGORITHMS, tag: str | None = None,
                   one_shot_volume: str = "egress") -> AutoChoice:
    """The cheapest AllReduce algorithm of ``candidates`` for this message, and why.

    Ties go to the earlier candidate (ring before tree). ``one_shot_latency`` None prices one-shot's hop
    at ``alpha``. Note what the notes' model implies: every algorithm moves the ring volume, so tree
    (2·⌈log₂P⌉ ≤ 2(P−1) hops) is never slower than ring here; NCCL's real ring/tree crossover comes from
    tree's lower achieved bandwidth, which the model does not see. Callers that want only NCCL's
    algorithms pass ``candidates=("ring", "tree")``.
    """
    for c in candidates:
        _algorithm("allreduce", c)
    costs = {c: collective_cost("allreduce", c, p, m, alpha, bandwidth, one_shot_latency,
                                tag=f"{tag},{c}" if tag else c, one_shot_volume=one_shot_volume)
             for c in candidates}
    choice, best_time = choose({c: costs[c].time for c in candidates})
    if isinstance(choice, str) and _is_arrayish(p, m, alpha, bandwidth, one_shot_latency):
        choice = np.asarray(list(candidates).index(choice))  # 0-d array inputs: stay in array mode
        best_time = np.asarray(best_time)
    if isinstance(choice, np.ndarray):
        pick = [costs[c] for c in candidates]
        cost = Cost("allreduce", "auto",
                    *(np.choose(choice, [np.broadcast_to(getattr(k, f), choice.shape) for k in pick])
                      for f in ("hops", "volume", "latency", "bandwidth_time")), best_time)
        return AutoChoice(choice, cost, None, costs, tuple(candidates))
    win = costs[choice]
    t = named(_tag("T", tag), best_time, f"time of one AllReduce, cheapest algorithm ({choice})")
    cost = Cost("allreduce", choice, win.hops, win.volume, win.latency, win.bandwidth_time, t)
    return AutoChoice(choice, cost, _auto_reason(choice, costs, p, m, alpha, bandwidth), costs,
                      tuple(candidates))


def _hops_text(alg: str, p: Num, h: Num) -> str:
    """``2·log₂8 = 6`` for the reason sentence (the hop formula with P put in, unless it is a constant
    or ``p`` is None)."""
    if p is None:
        return _fmt_hops(h)
    pv = float(derive.value_of(p))
    ps = units.format_quantity(pv, units.DIMENSIONLESS)
    pow2 = pv >= 1 and pv == int(pv) and (int(pv) & (int(pv) - 1)) == 0
    write = collectives.algorithm("allreduce", alg).hops_of
    text = write(ps, pow2) if write else None
    return f"{text} = {_fmt_hops(h)}" if text else _fmt_hops(h)


def _auto_reason(choice: str, costs: dict, p: Num, m: Num, alpha: Num, bandwidth: Num) -> str:
    """One sentence: the winner, the runner-up it beat, and on which side of the crossover α·B we are."""
    f = derive.value_of
    others = [c for c in costs if c != choice]
    x = f(crossover(alpha, bandwidth))
    side = (f"latency-bound below the crossover α·B = {units.format_quantity(x, units.INFORMATION)}"
            if f(m) < x else
            f"bandwidth-bound above the crossover α·B = {units.format_quantity(x, units.INFORMATION)}")
    msg = units.format_quantity(f(m), units.INFORMATION)
    w = costs[choice]
    if not others:
        return f"{choice}: the only candidate, {_fmt_hops(w.hops)} hops at a {msg} message; {side}"
    runner = min(others, key=lambda c: f(costs[c].time))
    r = costs[runner]
    t_w = units.format_quantity(f(w.time), units.TIME)
    t_r = units.format_quantity(f(r.time), units.TIME)
    if f(w.time) == f(r.time):
        why = f"ties with {runner} at a {msg} message ({t_w}; the earlier candidate wins)"
    elif f(w.hops) < f(r.hops):
        one = float(derive.value_of(w.hops)) == 1
        why = (f"{_hops_text(choice, p, w.hops)} {'hop beats' if one else 'hops beat'} {runner}'s "
               f"{_fmt_hops(r.hops)} at a {msg} message ({t_w} vs {t_r})")
    else:
        why = f"{t_w} beats {runner}'s {t_r} at a {msg} message"
    return f"{choice}: {why}; {side}"


def _fmt_hops(h: Num) -> str:
    return units.format_quantity(float(derive.value_of(h)), units.DIMENSIONLESS)


# ---------------------------------------------------------------------------------------------------
# Topology: groups inside one NVLink domain, or spanning nodes

@dataclass(frozen=True)
class Curve:
    """A measured link's curve: piece i prices messages m ≥ ``starts[i]`` with its own α per
    hop and bandwidth (already × efficiency), as ``ccost calibrate`` fitted them. ``kind`` and ``ranks``
    say what the curve was measured on; on that collective and rank count, no algorithm is priced below
    the curve itself (``floor_time``). ``alphas``/``bandwidths`` hold floats, or derivation leaves."""

    starts: tuple[float, ...]
    alphas: tuple
    bandwidths: tuple
    kind: str | None = None
    ranks: float | None = None
    label: str | None = None

    def index(self, m: Num):
        """The piece of each message: an int (float and derive modes) or an int array (array mode)."""
        mv = derive.value_of(m)
        if isinstance(mv, np.ndarray):
            return np.searchsorted(self._arrays[0], mv, side="right") - 1
        i = 0
        for k, start in enumerate(self.starts):
            if float(mv) >= start:
                i = k
        return i

    def at(self, m: Num, tag: str | None = None) -> tuple[Num, Num]:
        """(α, bandwidth) of the piece that prices an ``m``-byte message. In derive mode they are named
        steps that say which piece it was."""
        i = self.index(m)
        if isinstance(i, np.ndarray):
            _, alphas, bws = self._arrays
            return alphas.take(i), bws.take(i)
        a, b = self.alphas[i], self.bandwidths[i]
        if derive.is_value(m) or derive.is_value(a):
            label = self.label or "link"
            where = self.piece_text(i)
            a = named(_tag(f"α_{label}", tag), a, f"latency per hop of {where}, which holds m = "
                      f"{units.format_quantity(float(derive.value_of(m)), units.INFORMATION)}")
            b = named(_tag(f"B_{label}", tag), b, f"bandwidth of {where}")
        return a, b

    @functools.cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """starts, α and bandwidths as float arrays, built once (array mode looks them up per collective)."""
        return tuple(np.asarray([derive.value_of(x) for x in xs], dtype=float)
                     for xs in (self.starts, self.alphas, self.bandwidths))  # type: ignore[return-value]

    def piece_text(self, i: int) -> str:
        """``piece 2 of 3 (3 MiB to 512 MiB)`` — which piece, in words, for derivations and tables."""
        lo = units.format_quantity(self.starts[i], units.INFORMATION)
        hi = (f"to {units.format_quantity(self.starts[i + 1], units.INFORMATION)}" if i + 1 < len(self.starts)
              else "and up")
        return f"piece {i + 1} of {len(self.starts)} of the measured curve ({lo} {hi})"

    def floor_time(self, m: Num, tag: str | None = None) -> Num:
        """The curve's own time at ``m`` on the collective and ranks it was measured on: a + b·m of the
        piece, i.e. what nccl-tests measured (the fit of it)."""
        kind = self.kind or "allreduce"
        alg = DEFAULT_ALGORITHM[kind]
        a, b = self.at(m, tag)
        t = a * hops(kind, alg, self.ranks) + volume(kind, alg, self.ranks, m) / b
        if derive.is_value(t):
            t = named(_tag("T_measured", tag), t, f"the measured curve's {kind} on {self.ranks:g} ranks at "
                      "this size")
        return t


@dataclass(frozen=True)
class LinkParams:
    """The α-β parameters of one link, as the core uses them: ``bandwidth`` already × efficiency.
    Fields are floats, arrays or Values (leaves named after the link, for derivations). A measured link
    may carry a ``curve`` (its pieces replace ``alpha`` and ``bandwidth``) and a ``floor`` (s)."""

    alpha: Num
    bandwidth: Num
    one_shot_latency: Num | None = None
    label: str | None = None
    curve: Curve | None = None
    floor: Num | None = None

    def cost(self, kind: str, algorithm: str | None, p: Num, m: Num, tag: str | None = None,
             one_shot_volume: str = "egress") -> Cost:
        """``collective_cost`` on this link (its curve and floor included)."""
        return collective_cost(kind, algorithm, p, m, self.alpha, self.bandwidth, self.one_shot_latency, tag,
                               one_shot_volume, self.curve, self.floor)

    @classmethod
    def from_link(cls, link, derivation: bool = False, label: str | None = None) -> "LinkParams":
        """From a checked ``spec.Link``. With ``derivation=True`` the fields are ``derive`` leaves named
        ``α_<label>``, ``B_<label>`` (bandwidth × efficiency as a named step when efficiency ≠ 1) and
        ``α1_<label>`` for the one-shot latency, carrying the link's ``source``."""
        label = label or link.name
        if not derivation:
            return cls(link.alpha, link.effective_bandwidth, link.one_shot_latency, label,
                       _curve(link, False, label), link.floor_latency or None)
        src = link.source or "spec sheet"
        alpha = derive.leaf(f"α_{label}", link.alpha, units.TIME, f"{link.label}: latency per hop", src)
        if link.efficiency == 1.0:
            bw = derive.leaf(f"B_{label}", link.bandwidth, units.BANDWIDTH,
                             f"{link.label}: bandwidth per GPU per direction", src)
        else:
            peak = derive.leaf(f"B_{label},peak", link.bandwidth, units.BANDWIDTH,
                               f"{link.label}: bandwidth per GPU per direction", src)
            eff = derive.leaf(f"e_{label}", link.efficiency, units.DIMENSIONLESS,
                              f"{link.label}: achieved share of bandwidth", src)
            bw = derive.named(f"B_{label}", peak * eff, f"{link.label}: achieved bandwidth")
        one = None
        if link.one_shot_latency is not None:
            one = derive.leaf(f"α1_{label}", link.one_shot_latency, units.TIME,
                              f"{link.label}: one-shot AllReduce latency", src)
        floor = None
        if link.floor_latency:
            floor = derive.leaf(f"T_floor,{label}", link.floor_latency, units.TIME,
                                f"{link.label}: no collective is priced below it", src)
        return cls(alpha, bw, one, label, _curve(link, True, label), floor)


def _curve(link, derivation: bool, label: str) -> Curve | None:
    """The ``Curve`` of a checked link with ``curve_*`` fields (None without), bandwidths × efficiency."""
    if not link.has_curve:
        return None
    eff = link.efficiency
    pieces = link.curve_pieces
    starts = tuple(float(x[0]) for x in pieces)
    alphas, bws = tuple(x[1] for x in pieces), tuple(x[2] * eff for x in pieces)
    if derivation:
        src = link.source or "spec sheet"
        alphas = tuple(derive.leaf(f"α_{label},{i + 1}", a, units.TIME,
                                   f"{link.label}: latency per hop, curve piece {i + 1}", src)
                       for i, a in enumerate(alphas))
        bws = tuple(derive.leaf(f"B_{label},{i + 1}", b, units.BANDWIDTH,
                                f"{link.label}: bandwidth, curve piece {i + 1}"
                                + (f" (× efficiency {units.format_percent(eff)})" if eff != 1 else ""), src)
                    for i, b in enumerate(bws))
    return Curve(starts, alphas, bws, link.curve_collective,
                 float(link.curve_ranks) if link.curve_ranks else None, label)


@dataclass(frozen=True)
class GroupCost:
    """A collective priced on a cluster's topology.

    ``chosen`` is the Cost used; ``used`` says which model (``"intra"``, ``"flat"``, ``"hierarchical"``;
    in array mode an int array of indices into ``GROUP_MODES``). ``flat``, ``hierarchical`` and ``split``
    are the alternatives for a group that spans nodes (None inside one domain); ``split`` is the notes'
    A3 estimate, kept for comparison only and never chosen.
    """

    chosen: Cost
    flat: Cost | None
    hierarchical: Cost | None
    split: Cost | None
    used: Any
    #: The AllReduce algorithm priced: the one asked for, or for ``algorithm="auto"`` the cheapest
    #: candidate (an int array of indices into ``candidates`` in array mode).
    algorithm: Any = None
    #: Why ``auto`` chose that algorithm (None unless auto, and in array mode).
    reason: str | None = None
    #: For ``auto``: the GroupCost of every candidate, for the review's comparison table.
    alternatives: dict = field(default_factory=dict, compare=False, repr=False)
    candidates: tuple = ()


def _is_arrayish(*xs) -> bool:
    return any(isinstance(x, np.ndarray) for x in xs)


def group_cost(kind: str, algorithm: str | None, p: Num, m: Num, per_node: Num, intra: LinkParams,
               inter: LinkParams | None, cross_node: str = "auto", tag: str | None = None,
               candidates: tuple = ALLREDUCE_ALGORITHMS, one_shot_volume: str = "egress") -> GroupCost:
    """Price a collective on ``p`` ranks of which ``per_node`` share a node (one NVLink domain).

    * ``p ≤ per_node``: the intra-node link only.
    * otherwise, with g = ``per_node`` ranks per node and n = p/g nodes:

      - **flat**: one ring (or tree, ...) over all p ranks that waits on its slowest link at every step:
        the inter-node α for every hop and the inter-node bandwidth for the whole volume (A3: 32.59 ms);
      - **hierarchical**: the natural two-level algorithm, each stage on its own link —
        allreduce: reduce-scatter inside the node (g ranks, m), AllReduce across nodes on m/g (n ranks,
        with ``algorithm``), all-gather inside the node (g ranks, m);
        allgather: all-gather across nodes of the m/g the node's ranks hold between them (n ranks), then
        inside the node (g ranks, m); reducescatter: the reverse (inside on m, then across on m/g);
        alltoall: inside the node each rank hands its peers the data bound for their "column" (g ranks,
        m), then across nodes among ranks of the same local index (n ranks, m; the (n−1)/n·m that must
        leave the node crosses it once); broadcast: across the n nodes, then inside each (m both);
        p2p: a send between nodes is one inter-node hop, the same as flat;
      - **split** (all kinds, for the notes' comparison only): the share (n−1)/n of the flat collective's
        hops and volume priced on the inter-node link and the rest ignored, as the notes' A3 does
        ("half the ring hops cross InfiniBand"; 16.29 ms for 252 AllReduces of 1 MiB on 16 ranks).

    ``algorithm="auto"`` (AllReduce only) prices every algorithm of ``candidates`` on the topology and
    keeps the cheapest (ties: the earlier candidate), with ``reason`` saying why, as ``auto_allreduce``
    does for one link. ``cross_node``: ``"auto"`` takes the cheaper of flat and hierarchical (ties:
    flat), or force one. n = p/g is used as it comes: when g does not divide p the two-level formulas
    are evaluated with a fractional n (the checker keeps real plans' groups aligned to nodes).
    Works elementwise when ``p``, ``per_node``, ``m`` or link parameters are arrays (``used`` is then an
    index array into ``GROUP_MODES``). A group that spans nodes without an ``inter`` link is a
    programming error (the checker rejects such a spec) and raises ValueError.
    """
    if cross_node not in CROSS_NODE:
        raise ValueError(f"cross_node must be one of {', '.join(CROSS_NODE)}, not {cross_node!r}")
    if algorithm == collectives.AUTO and collectives.collective(kind).choice:
        return _group_cost_auto(p, m, per_node, intra, inter, cross_node, tag, candidates, one_shot_volume)
    return _group(kind, _algorithm(kind, algorithm), p, m, per_node, intra, inter, cross_node, tag, tag,
                  one_shot_volume)


def _group(kind: str, alg: str, p: Num, m: Num, per_node: Num, intra: LinkParams, inter: LinkParams | None,
           cross_node: str, tag: str | None, base_tag: str | None, osv: str = "egress") -> GroupCost:
    """``group_cost`` for one algorithm. ``base_tag`` names the steps that do not depend on the
    algorithm (nodes spanned, the intra-node stages), so that ``auto``'s candidates share them."""
    vector = _is_arrayish(p, m, per_node, intra.alpha, intra.bandwidth, intra.one_shot_latency,
                          *((inter.alpha, inter.bandwidth, inter.one_shot_latency) if inter else ()))
    inside = intra.cost(kind, alg, p, m, _tag_join(tag, intra.label), osv)
    if vector:
        return _group_cost_array(kind, alg, p, m, per_node, intra, inter, cross_node, tag, base_tag, inside,
                                 osv)
    if p <= per_node:
        return GroupCost(inside, None, None, None, "intra", alg)
    if inter is None:
        raise ValueError(f"a {kind} group of {derive.value_of(p):g} ranks spans nodes of "
                         f"{derive.value_of(per_node):g}, but no inter-node link was given")
    flat, hier, split = _spanning(kind, alg, p, m, per_node, intra, inter, tag, base_tag, osv)
    if cross_node == "flat":
        return GroupCost(flat, flat, hier, split, "flat", alg)
    if cross_node == "hierarchical":
        return GroupCost(hier, flat, hier, split, "hierarchical", alg)
    which, t = choose({"flat": flat.time, "hierarchical": hier.time})
    base = flat if which == "flat" else hier
    t = named(_tag("T", _tag_join(tag, "cross-node")), t,
              f"{kind} across nodes: the cheaper of flat and hierarchical")
    chosen = Cost(base.kind, base.algorithm, base.hops, base.volume, base.latency, base.bandwidth_time, t,
                  base.stages)
    return GroupCost(chosen, flat, hier, split, which, alg)


def _tag_join(*parts: str | None) -> str | None:
    parts2 = [x for x in parts if x]
    return ",".join(parts2) if parts2 else None


def _spanning(kind: str, alg: str, p: Num, m: Num, g: Num, intra: LinkParams, inter: LinkParams,
              tag: str | None, base_tag: str | None, osv: str = "egress") -> tuple[Cost, Cost, Cost]:
    """flat, hierarchical and split costs of a group spanning n = p/g nodes (same code in every mode)."""
    flat = inter.cost(kind, alg, p, m, _tag_join(tag, "flat"), osv)
    n = named(_tag("n", base_tag), p / g, "nodes the group spans, p/g")

    stages = []
    for s in collectives.collective(kind).stages:  # the kind's two-level form, stage by stage
        if s.ranks == "p":  # the whole group on the inter-node link: the flat collective itself
            stages.append((s.label, flat))
            continue
        ranks, link = (g, intra) if s.ranks == "g" else (n, inter)
        size = m / g if s.size == "m/g" else m
        # Only the stage that runs the algorithm is named after it; the others share the base tag.
        t = _tag_join(tag if s.algorithm else base_tag, s.label.replace(" ", "-"))
        stages.append((s.label, link.cost(s.kind, alg if s.algorithm else None, ranks, size, t, osv)))
    cs = [c for _, c in stages]
    hier = Cost(kind, alg,
                _sum(c.hops for c in cs), _sum(c.volume for c in cs), _sum(c.latency for c in cs),
                _sum(c.bandwidth_time for c in cs),
                named(_tag("T", _tag_join(tag, "hier")), _sum(c.time for c in cs),
                      f"hierarchical {kind}: {' + '.join(label for label, _ in stages)}"),
                tuple(stages))
    share = named(_tag("s", tag), (n - 1) / n,
                  "share of the ring's hops and bytes that cross nodes, (n−1)/n")
    h = share * flat.hops
    v = share * flat.volume
    hop_latency = inter.alpha
    if collectives.algorithm(kind, alg).custom and inter.one_shot_latency is not None:
        hop_latency = inter.one_shot_latency
    lat = hop_latency * h
    bwt = v / inter.bandwidth
    split = Cost(kind, alg, h, v, lat, bwt,
                 named(_tag("T", _tag_join(tag, "split")), lat + bwt,
                       "the notes' A3 estimate: only the inter-node share, on the inter-node link"))
    return flat, hier, split


def _sum(xs) -> Num:
    it = iter(xs)
    total = next(it)
    for x in it:
        total = total + x
    return total


def _group_cost_array(kind, alg, p, m, per_node, intra, inter, cross_node, tag, base_tag, inside,
                      osv="egress") -> GroupCost:
    spans = np.asarray(p > per_node)
    fields = ("hops", "volume", "latency", "bandwidth_time", "time")
    shape = np.broadcast(*[np.asarray(getattr(inside, f)) for f in fields], spans).shape
    if inter is None:
        if spans.any():
            raise ValueError(f"a {kind} group spans nodes, but no inter-node link was given")
        return GroupCost(inside, None, None, None, np.zeros(shape, dtype=int), alg)
    with np.errstate(divide="ignore", invalid="ignore"):
        flat, hier, split = _spanning(kind, alg, p, m, per_node, intra, inter, tag, base_tag, osv)
    if cross_node == "flat":
        mode = np.ones(shape, dtype=int)
    elif cross_node == "hierarchical":
        mode = np.full(shape, 2, dtype=int)
    else:
        idx, _ = choose({"flat": flat.time, "hierarchical": hier.time})
        if isinstance(idx, str):  # 0-d array inputs give numpy scalars, which choose() sees as floats
            idx = np.asarray(("flat", "hierarchical").index(idx))
        mode = np.broadcast_to(idx + 1, shape)
    used = np.where(np.broadcast_to(spans, shape), mode, 0)
    # np.choose(used, [inside, flat, hier]) field by field, as selections that broadcast: a field computed
    # on a sub-grid is never copied out to the full shape for it.
    if cross_node == "auto":
        hier_won = np.asarray(idx) == 1

    def pick(f: str):
        a, b, c = (np.asarray(getattr(x, f), dtype=float) for x in (inside, flat, hier))
        across = b if cross_node == "flat" else c if cross_node == "hierarchical" else _select(hier_won, c, b)
        return _select(spans, across, a, shape)

    return GroupCost(Cost(kind, alg, *(pick(f) for f in fields)), flat, hier, split, used, alg)


def _select(cond, a, b, shape=None):
    """``np.where(cond, a, b)``, skipping the copy when ``cond`` is all true or all false (then one operand,
    broadcast to ``shape`` when given)."""
    if not cond.any():
        out = b
    elif cond.all():
        out = a
    else:
        out = np.where(cond, a, b)
    return out if shape is None or out.shape == shape else np.broadcast_to(out, shape)


def _group_cost_auto(p, m, per_node, intra, inter, cross_node, tag, candidates, osv="egress") -> GroupCost:
    """``group_cost`` for ``allreduce`` / ``auto``: every candidate on the topology, the cheapest kept."""
    for c in candidates:
        _algorithm("allreduce", c)
    alts = {c: _group("allreduce", c, p, m, per_node, intra, inter, cross_node, _tag_join(tag, c), tag, osv)
            for c in candidates}
    # One-shot and two-shot write straight into the peers' buffers: they need NVLink peer access, so only a
    # group inside one NVLink domain can run them; across nodes a real stack runs NCCL's ring or tree
    # (flat or hierarchical). A custom algorithm is never chosen for a group that spans domains.
    custom = [c for c in candidates if c in CUSTOM_ALLREDUCE]
    excluded = False
    if custom and len(custom) < len(candidates):
        if _is_arrayish(p, per_node, m):
            spans = np.asarray(p > per_node)
            times = {c: (np.where(spans, np.inf, alts[c].chosen.time) if c in CUSTOM_ALLREDUCE
                         else alts[c].chosen.time) for c in candidates}
            choice, t = choose(times)
            if not isinstance(choice, str):
                choice = np.asarray(choice)
        else:
            if derive.value_of(p) > derive.value_of(per_node):
                candidates = tuple(c for c in candidates if c not in CUSTOM_ALLREDUCE)
                alts = {c: alts[c] for c in candidates}
                excluded = True
            choice, t = choose({c: alts[c].chosen.time for c in candidates})
    else:
        choice, t = choose({c: alts[c].chosen.time for c in candidates})
    fields = ("hops", "volume", "latency", "bandwidth_time", "time")
    if isinstance(choice, str) and isinstance(alts[choice].used, np.ndarray):
        choice = np.asarray(list(candidates).index(choice))  # 0-d array inputs: stay in array mode
    if isinstance(choice, np.ndarray):
        won = [choice == i for i in range(len(candidates))]

        def pick(get):
            parts = [get(alts[c]) for c in candidates]
            if any(x is None for x in parts):
                return None

            def field(f):  # np.choose(choice, parts' f), one copy per candidate that wins somewhere
                out = np.array(np.broadcast_to(np.asarray(getattr(parts[0], f), dtype=float), choice.shape))
                for w, x in zip(won[1:], parts[1:]):
                    np.copyto(out, np.asarray(getattr(x, f), dtype=float), where=w)
                return out
            return Cost("allreduce", "auto", *(field(f) for f in fields))
        used = np.choose(choice, [np.broadcast_to(alts[c].used, choice.shape) for c in candidates])
        return GroupCost(pick(lambda g: g.chosen), pick(lambda g: g.flat), pick(lambda g: g.hierarchical),
                         pick(lambda g: g.split), used, choice, None, alts, tuple(candidates))
    w = alts[choice]
    t = named(_tag("T", tag), t, f"time of one AllReduce, cheapest algorithm ({choice})")
    c = w.chosen
    chosen = Cost("allreduce", choice, c.hops, c.volume, c.latency, c.bandwidth_time, t, c.stages)
    link = intra if w.used == "intra" else inter
    # Hierarchical hops add up three stages; no single hop formula to quote then.
    ranks = p if w.used != "hierarchical" else None
    reason = _auto_reason(choice, {k: g.chosen for k, g in alts.items()}, ranks, m, link.alpha, link.bandwidth)
    if w.used != "intra":
        reason += f" (priced {w.used} across nodes)"
    if excluded:
        reason += "; one-shot and two-shot need NVLink peer access, so not across nodes"
    return GroupCost(chosen, w.flat, w.hierarchical, w.split, w.used, choice, reason, alts, tuple(candidates))


# ---------------------------------------------------------------------------------------------------
# Regime

def crossover(alpha: Num, bandwidth: Num) -> Num:
    """The message size α·B at which one hop's latency equals its transfer time (“Communication Cost Analysis” §1: 5 µs ×
    450 GB/s = 2.25 MB). Below it a collective is latency-bound, above it bandwidth-bound."""
    return alpha * bandwidth


def regime(latency: Num, bandwidth_time: Num):
    """``"latency-bound"`` when the latency term is the larger, else ``"bandwidth-bound"`` (a string
    array in array mode)."""
    lat, bw = derive.value_of(latency), derive.value_of(bandwidth_time)
    if isinstance(lat, np.ndarray) or isinstance(bw, np.ndarray):
        return np.where(np.asarray(lat) > np.asarray(bw), "latency-bound", "bandwidth-bound")
    return "latency-bound" if lat > bw else "bandwidth-bound"


# ---------------------------------------------------------------------------------------------------
# Compute roofline and analysis

def moe_parameters(params: Num, params_active: Num, experts: Num, top_k: Num) -> tuple[Num, Num, Num]:
    """A mixture of experts' parameters, split: one expert, the dense part (outside the routed experts) and
    all routed experts, from the total and the active count (k of E experts active a token)."""
    n_expert1 = named("N_expert", (params - params_active) / (experts - top_k),
                      "parameters of one expert: (N_params − N_active)/(E − k)")
    n_dense = named("N_dense", params_active - top_k * n_expert1,
                    "parameters outside the routed experts: N_active − k·N_expert")
    n_experts = named("N_experts", params - n_dense, "parameters of all routed experts")
    return n_expert1, n_dense, n_experts


def memory_time(nbytes: Num, hbm_bandwidth: Num) -> Num:
    """Time to read ``nbytes`` from HBM: bytes / HBM bandwidth (decode is memory-bound)."""
    return nbytes / hbm_bandwidth


def flop_time(flops: Num, rate: Num) -> Num:
    """Time to do ``flops`` at the achieved FLOP/s ``rate`` (prefill and training are FLOP-bound)."""
    return flops / rate


def compute_time(nbytes: Num, hbm_bandwidth: Num, flops: Num, rate: Num, tag: str | None = None) -> Num:
    """The roofline: the larger of the memory time and the FLOP time."""
    t_mem = named(_tag("T_mem", tag), memory_time(nbytes, hbm_bandwidth), "weights (and KV) read from HBM")
    t_flop = named(_tag("T_flop", tag), flop_time(flops, rate), "FLOPs at the achieved rate")
    return named(_tag("T_compute", tag), maximum(t_mem, t_flop), "roofline: the larger bound")


def pipeline_bubble(p: Num, microbatches: Num) -> Num:
    """Idle share of a pipeline of ``p`` stages fed ``microbatches`` micro-batches: (P−1)/(M+P−1)."""
    return (p - 1) / (microbatches + p - 1)


def pipeline_time(t_microbatch: Num, p: Num, microbatches: Num) -> Num:
    """Compute time of a pipelined step under the flush (GPipe / 1F1B) schedule: (M + P − 1)·t_mb.

    ``t_microbatch`` is one stage's time for one micro-batch. The last micro-batch leaves the last stage
    after P − 1 fill slots plus M slots of the slowest stage. Why per micro-batch and not T_stage/M: a
    memory-bound stage re-reads its whole weights for every micro-batch, so t_mb is not T_stage/M (decode:
    M micro-batches cost ~M× the weight reads); when FLOP-bound, t_mb = T_stage/M and this is Megatron's
    T_stage·(M + P − 1)/M. P = M = 1 gives t_mb."""
    return (microbatches + p - 1) * t_microbatch


def exposed_comm(comm: Num, overlap: Num) -> Num:
    """Communication time not hidden behind compute: T_comm·(1 − overlap)."""
    return comm * (1 - overlap)


def efficiency_eta(compute: Num, comm: Num, overlap: Num) -> Num:
    """Scaling efficiency η = T_c / (T_c + T_comm·(1 − overlap)) (“Communication Cost Analysis” §6)."""
    return compute / (compute + exposed_comm(comm, overlap))


def overhead(comm: Num, compute: Num) -> Num:
    """Communication overhead T_comm / T_compute (the notes: above 30%, reconsider the layout)."""
    return comm / compute


def speedup(time_one: Num, time_n: Num) -> Num:
    """Speedup against one GPU: T(1) / T(N)."""
    return time_one / time_n


def scaling_efficiency(time_one: Num, time_n: Num, n: Num) -> Num:
    """Speedup per GPU: T(1) / (N·T(N))... written as speedup/N, the notes' definition."""
    return speedup(time_one, time_n) / n


def tp_continuous_optimum(weight_bytes: Num, hbm_bandwidth: Num, alpha: Num, c: Num, layers: Num) -> Num:
    """Time-optimal TP degree N* = W·ln2 / (2·α·c·L·BW) of total(N) = W/(N·BW) + α·c·L·2·log₂N
    (“Communication Cost Math — Distributed Inference” §6, worked example 4: 45.58), treating N as continuous."""
    ln2 = derive.constant(math.log(2), "ln 2", weight_bytes, hbm_bandwidth, alpha, c, layers)
    return weight_bytes * ln2 / (2 * alpha * c * layers * hbm_bandwidth)
