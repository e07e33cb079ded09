"""The collective catalogue: one record per collective kind, one tuple of AllReduce algorithm names.

Everything ccost knows about a collective that is not a link's numbers lives here, once: its algorithms
with their hop and volume formulas (the α-β model of ``ccost.model.costs``: ``T = α·hops + volume/B``), the
default algorithm, how the two-level form decomposes it across nodes (``Stage``), the nccl-tests binary
that measures it and that binary's bus-bandwidth factor. ``costs``, ``calibrate`` and the front end
read these records instead of branching on the kind; adding a collective is adding a record.

The module imports nothing heavy (the checker reads ``KINDS`` and ``ALGORITHMS`` and must not import
numpy): the formulas use ``ccost.derive``'s elementwise ``ceil``/``log2``/``minimum``, bound on first use,
so that each formula runs unchanged on floats, numpy arrays and derivation ``Value``s.

Conventions as in ``ccost.model.costs``: ``p`` ranks in the group, ``m`` the message in bytes (nccl-tests'
"size"), hops are sequential latency steps, volume is bytes each GPU sends. At P = 1 every formula is 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

Num = Any  # float | np.ndarray | derive.Value


def _lazy(name: str) -> Callable:
    """A stand-in for ``ccost.derive.<name>`` that imports derive (and numpy) on its first call and then
    replaces itself in this module's globals, so later calls go straight to derive's function."""

    def stub(*args):
        from ccost import derive

        fn = getattr(derive, name)
        globals()["_" + name] = fn
        return fn(*args)

    return stub


_ceil = _lazy("ceil")
_log2 = _lazy("log2")
_minimum = _lazy("minimum")


def one_if_many(p: Num) -> Num:
    """1 for a group of two or more ranks, 0 for a single rank: min(P − 1, 1). Arithmetic rather than
    ``if`` so that arrays work and P = 1 costs exactly 0 in every mode."""
    return _minimum(p - 1, 1)


# ---------------------------------------------------------------------------------------------------
# Records

@dataclass(frozen=True)
class Algorithm:
    """One way to run a collective: its hop count and the bytes each GPU sends, as formulas of (P, m).

    ``volume`` is the charge the reference notes use. ``egress``, when set, is a second convention the
    plan may choose (``one_shot_volume``): one-shot AllReduce's (P−1)·m, the default there
    (``egress_text`` writes it).
    ``custom`` marks a custom kernel (vLLM, TensorRT-LLM) that writes into its peers' buffers: it needs
    NVLink peer access (one domain only) and each of its hops costs the link's one-shot latency.
    ``hops_text``/``volume_text`` are the formulas as the documentation writes them; ``hops_of`` writes
    the hop formula with P put in, for the sentence that explains an ``auto`` choice (None: no formula
    worth quoting, the number alone is printed).
    """

    name: str
    hops: Callable[[Num], Num]
    volume: Callable[[Num, Num], Num]
    hops_text: str
    volume_text: str
    egress: Callable[[Num, Num], Num] | None = None
    egress_text: str | None = None
    custom: bool = False
    hops_of: Callable[[str, bool], str] | None = None


@dataclass(frozen=True)
class Stage:
    """One stage of a collective's hierarchical (two-level) form on a group of p ranks spanning n = p/g
    nodes of g ranks each: ``kind`` run over ``ranks`` ("g": the ranks of one node, on the intra-node
    link; "n": one rank per node, on the inter-node link; "p": the whole group on the inter-node link,
    which is the flat collective itself) on ``size`` ("m", or "m/g": the node's share). ``algorithm``:
    the stage runs the outer collective's algorithm (the inter-node AllReduce); the others run their
    kind's default. ``label`` names the stage in derivations and reviews."""

    kind: str
    ranks: str
    size: str
    label: str
    algorithm: bool = False


@dataclass(frozen=True)
class Collective:
    """One collective kind: ``algorithms`` by name (the first is the ``default``), its hierarchical
    ``stages``, the nccl-tests ``test`` that measures it (``<test>_perf``) and ``busbw``, the scale s of
    nccl-tests' bus-bandwidth factor s·(P−1)/P (None: the factor is 1). ``calibration_note`` is what
    ``ccost calibrate`` says when a link is fitted from this kind's log (None: nothing to say)."""

    kind: str
    title: str
    algorithms: Mapping[str, Algorithm]
    stages: tuple[Stage, ...]
    test: str
    busbw: float | None
    calibration_note: str | None = None

    @property
    def default(self) -> str:
        return next(iter(self.algorithms))

    @property
    def choice(self) -> bool:
        """True when a plan chooses among several algorithms (and ``auto`` may pick one)."""
        return len(self.algorithms) > 1

    def busbw_factor(self, ranks: Num) -> float:
        """nccl-tests' bus-bandwidth factor: what it multiplies algbw by to get busbw."""
        return 1.0 if self.busbw is None else self.busbw * (ranks - 1) / ranks


def _algorithms(*algs: Algorithm) -> Mapping[str, Algorithm]:
    return MappingProxyType({a.name: a for a in algs})


def _ring_allreduce_volume(p: Num, m: Num) -> Num:
    # A reduce-scatter plus an all-gather: the least any AllReduce must move per GPU.
    return 2 * (p - 1) / p * m


def _share_volume(p: Num, m: Num) -> Num:
    return (p - 1) / p * m


def _p_minus_1(p: Num) -> Num:
    return p - 1


_RING_AR = "2(P−1)/P·m"
_SHARE = "(P−1)/P·m"
#: AllGather and ReduceScatter: a ring of P−1 steps, each rank sending the (P−1)/P of m it does not keep.
_RING_SHARE = _algorithms(Algorithm("ring", _p_minus_1, _share_volume, "P−1", _SHARE))

#: Every collective ccost prices, in the order reports and schemas list them.
CATALOGUE: Mapping[str, Collective] = MappingProxyType({c.kind: c for c in (
    Collective(
        "allreduce", "AllReduce",
        _algorithms(
            Algorithm("ring", lambda p: 2 * (p - 1), _ring_allreduce_volume, "2(P−1)", _RING_AR,
                      hops_of=lambda ps, pow2: f"2·({ps} − 1)"),
            Algorithm("tree", lambda p: 2 * _ceil(_log2(p)), _ring_allreduce_volume, "2·⌈log₂P⌉", _RING_AR,
                      hops_of=lambda ps, pow2: f"2·log₂{ps}" if pow2 else f"2·⌈log₂{ps}⌉"),
            Algorithm("one_shot", one_if_many, _ring_allreduce_volume, "1", _RING_AR,
                      egress=lambda p, m: (p - 1) * m, egress_text="(P−1)·m", custom=True),
            # reduce-scatter + all-gather, each one direct exchange
            Algorithm("two_shot", lambda p: 2 * one_if_many(p), _ring_allreduce_volume, "2", _RING_AR,
                      custom=True),
        ),
        (Stage("reducescatter", "g", "m", "RS intra"), Stage("allreduce", "n", "m/g", "AR inter", True),
         Stage("allgather", "g", "m", "AG intra")),
        "all_reduce", 2.0),
    Collective(
        "allgather", "AllGather",
        _RING_SHARE,
        (Stage("allgather", "n", "m/g", "AG inter"), Stage("allgather", "g", "m", "AG intra")),
        "all_gather", 1.0),
    Collective(
        "reducescatter", "ReduceScatter",
        _RING_SHARE,
        (Stage("reducescatter", "g", "m", "RS intra"), Stage("reducescatter", "n", "m/g", "RS inter")),
        "reduce_scatter", 1.0),
    Collective(
        # the share a rank keeps for itself never leaves it (“Communication Cost Analysis”)
        "alltoall", "All-to-All",
        _algorithms(Algorithm("pairwise", _p_minus_1, _share_volume, "P−1", _SHARE)),
        (Stage("alltoall", "g", "m", "A2A intra"), Stage("alltoall", "n", "m", "A2A inter")),
        "alltoall", 1.0),
    Collective(
        "broadcast", "Broadcast",
        _algorithms(Algorithm("tree", lambda p: _ceil(_log2(p)), lambda p, m: _log2(p) * m, "⌈log₂P⌉",
                              "log₂P·m")),
        (Stage("broadcast", "n", "m", "BC inter"), Stage("broadcast", "g", "m", "BC intra")),
        "broadcast", None,
        "ccost prices a broadcast as a binomial tree (log2 P hops, log2 P x m per GPU) while NCCL "
        "pipelines a ring (m per GPU): the bandwidth from this log prices broadcasts on this many ranks "
        "right, but other collectives log2 P times too fast; calibrate those from their own logs"),
    Collective(
        "p2p", "point-to-point",
        _algorithms(Algorithm("direct", one_if_many, lambda p, m: one_if_many(p) * m, "1", "m")),
        (Stage("p2p", "p", "m", "P2P inter"),),
        "sendrecv", None),
)})

#: The collective kinds, in catalogue order.
KINDS: tuple[str, ...] = tuple(CATALOGUE)
#: The AllReduce algorithms the model prices; ``AUTO`` picks the cheapest of them per message.
ALGORITHMS: tuple[str, ...] = tuple(CATALOGUE["allreduce"].algorithms)
AUTO = "auto"
#: The custom-kernel AllReduce algorithms (NVLink peer access: one domain only; hops at one-shot latency).
CUSTOM_ALGORITHMS: tuple[str, ...] = tuple(
    a.name for a in CATALOGUE["allreduce"].algorithms.values() if a.custom)
#: The one algorithm modelled for each kind without a choice, and the default of the others.
DEFAULT_ALGORITHM: Mapping[str, str] = MappingProxyType({k: c.default for k, c in CATALOGUE.items()})
#: Every algorithm name of every kind (what a measured link's ``source`` may name).
ALGORITHM_NAMES: tuple[str, ...] = tuple(dict.fromkeys(a for c in CATALOGUE.values() for a in c.algorithms))
#: How a one-shot AllReduce's volume is charged: its egress (P−1)·m, or the ring volume (the notes).
ONE_SHOT_VOLUMES = ("egress", "ring")
#: The AllReduce algorithm those two conventions price: the one whose record has an ``egress`` (one-shot).
ONE_SHOT: Algorithm = next(a for a in CATALOGUE["allreduce"].algorithms.values() if a.egress is not None)


def other_one_shot_volume(charged: str) -> str:
    """The convention of ``ONE_SHOT_VOLUMES`` a plan charging ``charged`` does not (the review shows both)."""
    return next(v for v in ONE_SHOT_VOLUMES if v != charged)


def collective(kind: str) -> Collective:
    """The record of ``kind``; an unknown kind is a programming error (the checker validated the spec)."""
    c = CATALOGUE.get(kind)
    if c is None:
        raise ValueError(f"unknown collective kind {kind!r}; expected one of {', '.join(KINDS)}")
    return c


def algorithm(kind: str, name: str | None = None) -> Algorithm:
    """The algorithm that prices ``kind``: ``name`` (None: the default) for a kind with a choice; a kind
    with one model ignores ``name`` (a caller may pass the plan's AllReduce algorithm along). A wrong pair
    raises ValueError."""
    try:
        hit = _RESOLVED.get((kind, name))  # the pricing path's pairs, resolved once
    except TypeError:  # an unhashable name: the slow path says what is wrong with it
        hit = None
    if hit is not None:
        return hit
    c = collective(kind)
    if not c.choice:
        return next(iter(c.algorithms.values()))
    alg = c.algorithms.get(name or c.default)
    if alg is None:
        raise ValueError(f"unknown {c.title} algorithm {name!r}; expected one of "
                         f"{', '.join(c.algorithms)} (use auto_allreduce for '{AUTO}')")
    return alg


# (kind, name) -> Algorithm for every pair the cost core meets: each kind's own names and None, and the
# AllReduce names a plan passes along to the kinds with one model. Anything else takes the slow path.
_RESOLVED = {(c.kind, n): c.algorithms.get(n) or c.algorithms[c.default]
             for c in CATALOGUE.values() for n in (None, *c.algorithms, *ALGORITHMS)
             if n in c.algorithms or n is None or not c.choice}


def by_test(test: str) -> Collective | None:
    """The collective an nccl-tests binary measures (``all_reduce`` or ``all_reduce_perf``), or None."""
    stem = test[:-5] if test.endswith("_perf") else test
    for c in CATALOGUE.values():
        if c.test == stem:
            return c
    return None
