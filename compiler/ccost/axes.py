"""The parallel axes of a plan, one record each: every list of degrees in ccost derives from ``AXES``.

A plan splits its work over the product of its degrees (tp·pp·ep·dp, and cp when it is used). Each axis
says here what it is (``doc``, the schema's field description), how the explanation names it
(``symbol``, ``leaf``), where its ranks sit in the rank layout (``place``), what it shards (``shards``),
in which phases it means something, whether the search can vary it as an array, and which layout rules
it must satisfy (``rules``, the names of the predicates of ``ccost.layout_rules``).

Adding an axis is adding a record here, then its collective and its share of the work in ``ccost.model.lower``
(the group it communicates on, what it divides): the schema field, the spec's GPU count, the
derivation leaf, the search array, the layout written to JSON and the text, the E301 message and the
rank strides follow from the record.

The functions below work on anything with the degrees as attributes (a ``spec.Plan``, ``lower.Inputs``
of floats, arrays or derivation values): they never branch on a number that could be an array, and
they multiply in the order of ``AXES``, so a derivation prints ``tp·pp·ep·dp`` exactly as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: What a degree splits: ``weights`` (each rank holds 1/n of every layer), ``layers`` (stages),
#: ``experts``, ``batch`` (replicas, each its own sequences), ``sequence`` (each rank 1/n of every
#: sequence's tokens).
SHARDS = ("weights", "layers", "experts", "batch", "sequence")


@dataclass(frozen=True)
class Axis:
    name: str  # the plan field, the lower.Inputs attribute and the search array
    kind: str  # "tensor": `tp = 1` means no tensor parallelism
    doc: str  # the schema's field description
    example: str  # the schema's example value
    leaf: str  # the derivation leaf's description (``ccost explain``)
    result_doc: str  # the JSON layout key's description (docs/interface.md)
    place: int  # position in the rank layout: 0 varies fastest (shares the NVLink domain first)
    shards: str  # one of SHARDS
    rules: tuple[str, ...] = ()  # the ccost.layout_rules predicates the degree must satisfy
    #: Phases in which the degree is priced; None: every phase. The plan field carries it (``schema.Field
    #: .phases``), so `check` warns (W305 for training only) when another phase writes it.
    phases: tuple[str, ...] | None = None
    #: Shown (text, JSON layout, E301, the GPU product of a derivation) only when it is above 1, so a
    #: plan that does not use the axis reads exactly as before it existed.
    optional: bool = False
    searchable: bool = True  # a search can vary it as an array (ccost.search.ARRAY_AXES)

    def applies(self, phase: str) -> bool:
        return self.phases is None or phase in self.phases


AXES: tuple[Axis, ...] = (
    Axis("tp", "tensor", "tensor-parallel degree", "8", "tensor-parallel degree", "tensor-parallel degree",
         place=0, shards="weights", rules=("tp_in_domain", "tp_divides_kv_heads")),
    Axis("pp", "pipeline", "pipeline-parallel degree (stages)", "2", "pipeline stages", "pipeline stages",
         place=4, shards="layers", rules=("pp_at_most_layers", "pp_divides_layers")),
    Axis("ep", "expert", "expert-parallel degree", "8", "expert-parallel degree", "expert-parallel degree",
         place=2, shards="experts", rules=("ep_has_experts", "ep_divides_experts")),
    Axis("dp", "data", "data-parallel degree (replicas)", "4", "data-parallel replicas", "data-parallel replicas",
         place=3, shards="batch"),
    Axis("cp", "context",
         "context-parallel degree; each sequence is split over cp ranks (its tokens in prefill and training, "
         "its KV cache in decode) and ring attention passes K and V between them (the plan uses tp·cp·pp·ep·dp "
         "GPUs)", "2", "context-parallel degree",
         "context-parallel degree: each sequence split over cp ranks (only when above 1)",
         place=1, shards="sequence", optional=True, rules=("cp_splits_seq",)),
)

BY_NAME: dict[str, Axis] = {a.name: a for a in AXES}
#: The degrees' names in field order (tp, pp, ep, dp, cp): the order every product and label uses.
NAMES: tuple[str, ...] = tuple(a.name for a in AXES)
#: The axes in rank order, fastest first (Megatron's tp-cp-ep-dp-pp): the chattiest groups get the
#: NVLink domain first; the pipeline, one small send per stage boundary, crosses nodes.
PLACEMENT: tuple[Axis, ...] = tuple(sorted(AXES, key=lambda a: a.place))
#: The axes every plan shows, and the ones shown only above 1.
MANDATORY: tuple[str, ...] = tuple(a.name for a in AXES if not a.optional)
OPTIONAL: tuple[str, ...] = tuple(a.name for a in AXES if a.optional)


def degree(obj: Any, name: str, phase: str | None = None) -> Any:
    """``obj``'s degree ``name``; 1 in a phase where the axis is not priced."""
    if phase is not None and not BY_NAME[name].applies(phase):
        return 1
    return getattr(obj, name)


def used(plan: Any) -> tuple[Axis, ...]:
    """The axes a plan shows: every axis, and an optional one only when its degree is above 1."""
    return tuple(a for a in AXES if not a.optional or getattr(plan, a.name) > 1)


def active(plan: Any, phase: str | None = None) -> frozenset[str]:
    """The optional axes a plan prices (degree above 1, in a phase where the axis applies; ``phase``: the
    plan's own unless one of its steps is another phase's)."""
    phase = plan.phase if phase is None else phase
    return frozenset(a.name for a in AXES if a.optional and a.applies(phase) and getattr(plan, a.name) > 1)


def _names(on: Iterable[str] | None) -> tuple[str, ...]:
    """The axes in field order: the mandatory ones and the optional ones named in ``on``."""
    on = frozenset(on or ())
    return tuple(a.name for a in AXES if not a.optional or a.name in on)


def product(x: Any, on: Iterable[str] | None = None, only: Iterable[str] | None = None) -> Any:
    """The product of ``x``'s degrees in field order (tp·pp·ep·dp, then the optional axes named in ``on``);
    ``only``: just these axes. Works on ints, floats, arrays and derivation values alike."""
    names = _names(on)
    if only is not None:
        keep = frozenset(only)
        names = tuple(n for n in names if n in keep)
    out = getattr(x, names[0])
    for n in names[1:]:
        out = out * getattr(x, n)
    return out


def gpus(plan: Any) -> int:
    """The GPUs a plan uses: the product of all its degrees (an unused axis has degree 1)."""
    return product(plan, on=NAMES)


def label(on: Iterable[str] | None = None, sep: str = "·") -> str:
    """"tp·pp·ep·dp" (and "·cp" when ``on`` names it)."""
    return sep.join(_names(on))


def shown(plan: Any) -> frozenset[str]:
    """The optional axes a plan writes above 1 (shown in its labels)."""
    return frozenset(a.name for a in used(plan) if a.optional)


def values(plan: Any, on: Iterable[str] | None = None, sep: str = "·") -> str:
    """"8·1·1·4" (the degrees in the order of ``label``)."""
    return sep.join(str(getattr(plan, n)) for n in _names(shown(plan) if on is None else on))


def stride(x: Any, name: str, on: Iterable[str] | None = None) -> Any:
    """Ranks between consecutive members of axis ``name``'s group: the product of the degrees placed
    before it (1 for the fastest axis). Optional axes count only when named in ``on``."""
    keep = frozenset(_names(on))
    before = [a.name for a in PLACEMENT if a.place < BY_NAME[name].place and a.name in keep]
    if not before:
        return 1
    out = getattr(x, before[0])
    for n in before[1:]:
        out = out * getattr(x, n)
    return out


def split(x: Any, *shards: str, on: Iterable[str] | None = None) -> Any:
    """The product of the degrees that split ``shards`` (``split(x, "weights", "layers")`` = tp·pp: the ranks
    one copy of the dense weights is spread over), in field order."""
    return product(x, on, only=[a.name for a in AXES if a.shards in shards])
