"""The layout rules of a plan, written once: does its layout fit the cluster and divide the model evenly?
(And, at the end, the two rules of a model's own consistency that the checker and the importer share.)

``ccost.check`` warns with them (E301, W301–W304, W307, W308), ``ccost.evaluate`` refuses a plan the model cannot
price (E301, E401: ``ccost.check.plan.evaluation_errors``), the checklist judges items 7 and 8 with them
and the search applies them as constraints to whole arrays of layouts. So every predicate works on Python
numbers and on numpy arrays alike: only arithmetic and comparisons, no ``if`` on a degree, no
``and``/``or`` between results (a search combines them with ``&``/``|`` or ``numpy.logical_not``). Each
returns True where the layout keeps the rule.

``RULES`` names them; a ``ccost.axes`` record lists the ones its degree must keep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ccost import axes

Num = Any  # int | float | numpy array


def fits_cluster(gpus: Num, cluster_gpus: Num) -> Num:
    """E301: the plan's degrees need no more GPUs than the cluster has."""
    return gpus <= cluster_gpus


def in_one_domain(gpus: Num, domain: Num) -> Num:
    """The plan stays inside one NVLink domain (else the cluster needs an inter-node link: E302)."""
    return gpus <= domain


def tp_in_domain(tp: Num, domain: Num) -> Num:
    """W301, checklist item 8: the tensor-parallel group stays inside one NVLink domain."""
    return tp <= domain


def tp_divides_kv_heads(tp: Num, kv_heads: Num) -> Num:
    """W302, checklist item 7: each TP rank holds the same number of KV heads."""
    return kv_heads % tp == 0


def pp_at_most_layers(pp: Num, layers: Num) -> Num:
    """E401: every pipeline stage gets a layer."""
    return pp <= layers


def pp_divides_layers(pp: Num, layers: Num) -> Num:
    """W303: every stage gets the same number of layers."""
    return layers % pp == 0


def ep_has_experts(ep: Num, experts: Num) -> Num:
    """W304: expert parallelism needs experts to shard (``experts`` 0 for a dense model)."""
    return (ep == 1) | (experts > 0)


def ep_divides_experts(ep: Num, experts: Num) -> Num:
    """W304: each EP rank holds the same number of experts (a dense model: nothing to divide)."""
    return (experts == 0) | (experts % ep == 0)


def cp_splits_seq(cp: Num, seq: Num) -> Num:
    """W307: the sequence splits into 2·cp equal chunks, two to each context-parallel rank (the i-th and
    the (2·cp − 1 − i)-th, so that each rank has the same share of causal attention to compute: the
    load-balanced split ccost prices, and the one Megatron-Core and Transformer Engine require)."""
    return seq % (2 * cp) == 0


def microbatches_at_most_batch(microbatches: Num, batch: Num) -> Num:
    """E401: every micro-batch holds at least one sequence."""
    return microbatches <= batch


def microbatches_divide_batch(microbatches: Num, batch: Num) -> Num:
    """W308: the micro-batches hold the same number of sequences."""
    return batch % microbatches == 0


def holds_global_batch(global_batch: Num, replicas: Num, microbatch: Num = 1) -> Num:
    """E303, search global_batch: a global batch (sequences per optimizer step) splits into the same whole
    number of sequences on each of the dp·ep replicas (``batch`` is per replica), and that into whole
    micro-batches of ``microbatch`` sequences (a plan's ``microbatch_size``; 1 when it gives none)."""
    per = global_batch / (replicas * microbatch)
    return (per >= 1) & (per == per // 1)


@dataclass(frozen=True)
class Rule:
    name: str
    codes: str  # the diagnostics and checklist items that apply it
    holds: Callable[..., Num]


RULES: dict[str, Rule] = {r.name: r for r in (
    Rule("fits_cluster", "E301, search max_gpus", fits_cluster),
    Rule("in_one_domain", "E302, search inter_node_link", in_one_domain),
    Rule("tp_in_domain", "W301, checklist 8, search tp_in_domain", tp_in_domain),
    Rule("tp_divides_kv_heads", "W302, checklist 7, search tp_divides_kv_heads", tp_divides_kv_heads),
    Rule("pp_at_most_layers", "E401, search pp_at_most_layers", pp_at_most_layers),
    Rule("pp_divides_layers", "W303, search pp_divides_layers", pp_divides_layers),
    Rule("ep_has_experts", "W304", ep_has_experts),
    Rule("ep_divides_experts", "W304", ep_divides_experts),
    Rule("cp_splits_seq", "W307", cp_splits_seq),
    Rule("microbatches_at_most_batch", "E401, search microbatches_at_most_batch", microbatches_at_most_batch),
    Rule("microbatches_divide_batch", "W308", microbatches_divide_batch),
    Rule("holds_global_batch", "E303, search global_batch", holds_global_batch),
)}


# The model's own consistency: fields of one model that contradict each other. The checker says so as
# E207 (``ccost.check.plan.model_errors``) in the block's words, ``ccost import hf`` as E510 in config.json's
# keys (``ccost.hf``); the rule is this one.

def kv_heads_contradiction(heads: int | None, kv_heads: int | None) -> str | None:
    """``"more"``: more key/value heads than heads (each serves one or more query heads); ``"divide"``: they
    do not divide the heads (grouped-query attention gives each the same number of query heads); None when
    they agree or one is not given."""
    if not heads or not kv_heads:
        return None
    if kv_heads > heads:
        return "more"
    return "divide" if heads % kv_heads else None


def top_k_contradiction(experts: int | None, top_k: int | None) -> str | None:
    """``"more"``: more experts per token than experts; ``"all"``: as many (every token visits every expert,
    so no share of the parameters is routed: one expert's size, (params − active_params)/(experts − top_k),
    is undefined); None when they agree or the model has no experts."""
    if not experts:
        return None
    if top_k and top_k > experts:
        return "more"
    return "all" if experts > 1 and (top_k or 1) == experts else None


def divisors(n: int, limit: int) -> str:
    """The degrees up to ``limit`` that divide ``n``, for a help text: "1, 2, 4, 8"."""
    return ", ".join(str(k) for k in range(1, min(n, limit) + 1) if n % k == 0)


def too_many_gpus(plan: Any, cluster: Any) -> str:
    """E301's one wording (``check`` and ``lower``): the degrees, their product and the cluster's GPUs."""
    node_word = "node" if cluster.nodes == 1 else "nodes"
    return (f"plan `{plan.name}` needs {axes.label(axes.shown(plan))} = {axes.values(plan)} = {plan.gpus} GPUs, "
            f"but cluster `{cluster.name}` has {cluster.nodes} {node_word} × {cluster.gpus_per_node} = {cluster.gpus}")
