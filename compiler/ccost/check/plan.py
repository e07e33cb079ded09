"""Rules on built entities that need no cost model: a plan's degrees against its cluster and model (E301,
W301-W306), a link's measured curve (E203), and the errors that keep a plan from being evaluated
(``evaluation_errors``: ``ccost.evaluate`` refuses such a plan with them, a search's E404 names them). The
build pass (``ccost.check.build._VALIDATORS``) runs the first two on each entity it builds; a search's own
rules are ``ccost.check.search``.

``where(field, reads)`` places a diagnostic, or is None when the block inherits everything the rule reads
from the block it extends (which reports it already); ``where.written`` is the set of fields the block
writes itself and ``where.visible()`` the names it can see.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

from ccost import axes
from ccost import layout_rules as rules
from ccost import spec as S
from ccost import units as U
from ccost.check.load import _std_dir
from ccost.diagnostics import Diagnostic, Diagnostics, Span, error, warning
from ccost.schema import PHASE_KINDS, SCHEMA, phase_kind



def _std_link_names() -> set[str]:
    import re

    folder = _std_dir()
    if folder is None:
        return set()
    try:
        with open(os.path.join(folder, "links.ccost"), encoding="utf-8") as fh:
            text = fh.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return set()
    return set(re.findall(r"^link\s+(\w+)", text, flags=re.M))


def _inter_node_example(c, visible: dict[str, str]) -> str:
    """How to give cluster ``c`` an inter-node link, in a way that checks in this spec: a link it already
    has, else the std library's (when importing it clashes with no name of the spec), else a block."""
    own = sorted(n for n, kind in visible.items() if kind == "link"
                 and (c.intra_node is None or n != c.intra_node.name))
    if own:
        return f"such as `inter_node = {own[0]}`"
    std = _std_link_names()
    if "ib_ndr" in std and not (std & set(visible)):
        return 'such as `inter_node = ib_ndr`, from `import "std/links.ccost"`'
    return ("a `link` block of your own, such as `link ib { alpha = 3 us; bandwidth = 50 GB/s }` and "
            "`inter_node = ib`")


def _too_many_gpus(p, where: Callable[..., Span | None]) -> Diagnostic:
    """E301: the plan's degrees need more GPUs than its cluster has. The caret goes on a degree the block
    writes (the last one written, usually the one just raised), and the help gives fixes that each check:
    a degree lowered to what fits, or a cluster with enough nodes (and, when it has none, an inter-node
    link: `nodes = 2` alone would only lead to the next error)."""
    c = p.cluster
    own = getattr(where, "written", frozenset())  # the fields this block writes itself
    written = sorted((where(d, (d,)).line, where(d, (d,)).column, d) for d in axes.NAMES
                     if getattr(p, d) > 1 and d in own)
    degree = written[-1][2] if written else None
    if degree:
        span = where(degree, (degree,))
    elif "cluster" in own:
        span = where("cluster", ("cluster",))
    else:
        span = where("__plan__", ("cluster", *axes.NAMES))
    lower = []
    for d in [w[2] for w in reversed(written)]:  # the degree under the caret first
        others = p.gpus // getattr(p, d)
        fits = c.gpus // others
        if fits >= 1:
            lower.append(f"`{d} = {fits}`")
    fixes = []
    if lower:
        fixes.append(" or ".join(lower) + f" fits the {c.gpus} GPUs of `{c.name}`")
    need_nodes = -(-p.gpus // c.gpus_per_node)
    if c.inter_node is None:
        fixes.append(f"give cluster `{c.name}` `nodes = {need_nodes}` and an `inter_node` link between the "
                     f"nodes ({_inter_node_example(c, getattr(where, 'visible', dict)())})")
    else:
        fixes.append(f"give cluster `{c.name}` `nodes = {need_nodes}`")
    return error("E301", rules.too_many_gpus(p, c), span, help="; or ".join(fixes))


def _check_plan(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """Checks that need no cost model: degrees fit the cluster (E301), TP inside the NVLink domain (W301),
    TP divides kv_heads (W302), PP divides layers (W303), EP divides experts (W304), CP splits the
    sequence (W307).

    ``where(field, reads)`` places a diagnostic, or is None when the plan inherits everything the check
    reads from the plan it extends (which reports it already)."""
    out: list[Diagnostic] = []
    c, m = p.cluster, p.model
    too_big = not rules.fits_cluster(p.gpus, c.gpus)
    if too_big and where("__plan__", ("cluster", *axes.NAMES)) is not None:
        out.append(_too_many_gpus(p, where))
    if not rules.tp_in_domain(p.tp, c.domain) and not too_big and c.inter_node is not None \
            and where("tp", ("tp", "cluster")) is not None:
        # (more GPUs than the cluster has is E301 above; no inter-node link at all is the cluster's E302)
        out.append(warning(
            "W301", f"the tensor-parallel group of plan `{p.name}` (tp = {p.tp}) is larger than the NVLink "
            f"domain of cluster `{c.name}` ({c.domain} GPUs): its AllReduces cross the slower inter-node link "
            f"`{c.inter_node.name}`",
            where("tp", ("tp", "cluster")),
            help=f"legitimate but costly: compare with tp = {c.domain} and pipeline or data parallelism "
                 "across nodes"))
    if m.kv_heads and p.tp > 1 and not rules.tp_divides_kv_heads(p.tp, m.kv_heads) \
            and where("tp", ("tp", "model")) is not None:
        if p.tp % m.kv_heads == 0:
            detail = f"each KV head is replicated on {p.tp // m.kv_heads} GPUs"
        else:
            detail = "the KV heads split unevenly across the group"
        out.append(warning("W302", f"tp = {p.tp} does not divide kv_heads = {m.kv_heads} of model `{m.name}`: "
                           f"{detail}", where("tp", ("tp", "model")),
                           help=f"tp values that divide {m.kv_heads}: {rules.divisors(m.kv_heads, 1 << 20)}"))
    if p.pp > 1 and rules.pp_at_most_layers(p.pp, m.layers) and not rules.pp_divides_layers(p.pp, m.layers) \
            and where("pp", ("pp", "model")) is not None:
        lo, hi = m.layers // p.pp, -(-m.layers // p.pp)
        out.append(warning("W303", f"pp = {p.pp} does not divide layers = {m.layers} of model `{m.name}`: "
                           f"stages get {lo} or {hi} layers and the largest sets the pace", where("pp", ("pp", "model")),
                           help=f"pp values that divide {m.layers}: {rules.divisors(m.layers, 64)}"))
    if p.ep > 1 and where("ep", ("ep", "model")) is not None:
        if not rules.ep_has_experts(p.ep, m.experts or 0):
            out.append(warning("W304", f"ep = {p.ep} but model `{m.name}` has no experts: expert parallelism "
                               "has nothing to shard", where("ep", ("ep", "model")),
                               help="set `experts` on the model, or use `ep = 1`"))
        elif not rules.ep_divides_experts(p.ep, m.experts):
            out.append(warning("W304", f"ep = {p.ep} does not divide experts = {m.experts} of model "
                               f"`{m.name}`: some GPUs hold more experts than others", where("ep", ("ep", "model")),
                               help=f"ep values that divide {m.experts}: {rules.divisors(m.experts, 1 << 20)}"))
    out += _check_target(p, where)
    out += _check_microbatches(p, where)
    out += _check_context(p, where)
    out += _check_training(p, where)
    out += _check_phase_fields(p, where)
    out += _check_stack_phase(p, where)
    out += evaluation_errors(p, where)  # what `eval` would refuse (E302, E401, E104)
    return out


def _check_model(m, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """A model's fields that contradict each other (E207, ``model_errors``)."""
    return model_errors(m, where)


def _check_stack_phase(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """A training plan on a stack with a host time per sequence (W305): training charges the stack's
    fixed time per step, not per running sequence (a serving engine's sampling and detokenising)."""
    st = p.stack
    if not phase_kind(p.phase).trains or st is None or not st.seq_overhead or "stack" not in p.spans:
        return []
    span = where("stack", ("stack",))
    if span is None:
        return []
    return [warning("W305", f"plan `{p.name}` trains on stack `{st.name}`, whose `seq_overhead` is not charged in "
                    "training (host time per running sequence is a serving cost)", span,
                    help="use a training stack (e.g. `training_default`), or leave `seq_overhead` out of this one")]


def fields_of_phase(phase: str) -> tuple[str, ...]:
    """The plan fields only ``phase`` reads, in field order: the schema's ``Field.phases`` (W305 for
    ``train``, W306 for ``serve``)."""
    return tuple(f.name for f in SCHEMA["plan"].fields if f.phases == (phase,))


def _check_phase_fields(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """Fields only another phase reads (its ``own_code``: W305 training's, W306 serving's), and fields the
    plan's own phase does not read (its ``unread``, W306: `batch` and `seq` of a serve plan): legal, but
    nothing reads them."""
    out: list[Diagnostic] = []
    own = phase_kind(p.phase)
    for kind in PHASE_KINDS:
        if kind is own or kind.own_code is None:
            continue
        written = [f for f in fields_of_phase(kind.name) if f in p.spans]
        if written and where(written[0], (*written, "phase")) is not None:
            out.append(warning(kind.own_code, f"plan `{p.name}` is a {p.phase} plan: "
                               + ", ".join(f"`{f}`" for f in written)
                               + (" applies" if len(written) == 1 else " apply") + f" only to {kind.own_scope}",
                               where(written[0], (*written, "phase")),
                               help=f"remove them, or set `phase = {kind.name}`"))
    written = [f for f in own.unread if f in p.spans]
    if written and where(written[0], (*written, "phase")) is not None:
        out.append(warning("W306", f"plan `{p.name}` is a {p.phase} plan: " + " and ".join(f"`{f}`" for f in written)
                           + (" is" if len(written) == 1 else " are") + f" not read ({own.unread_why})",
                           where(written[0], (*written, "phase")), help=own.unread_help))
    return out


def _check_microbatches(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """W308: a batch the micro-batches split unevenly (more micro-batches than sequences is E401)."""
    M, B = p.microbatches, p.batch
    if phase_kind(p.phase).rows != "batch" or M <= 1 or M > B or rules.microbatches_divide_batch(M, B):
        return []
    span = where("microbatches", ("microbatches", "batch"))
    if span is None:
        return []
    fitting = ", ".join(str(k) for k in range(2, min(B, 64) + 1) if B % k == 0)
    return [warning("W308", f"plan `{p.name}` splits batch = {B} into microbatches = {M}: micro-batches of "
                    f"{B // M} or {B // M + 1} sequences (ccost prices equal ones of {B / M:.4g}; the largest "
                    "sets the pace, and Megatron-LM refuses an uneven split in training)", span,
                    help=f"microbatches that divide {B}: {fitting}" if fitting else
                    f"a batch that microbatches = {M} divides, such as {M * (B // M + 1)}")]


def _check_context(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """W307: a prefill or training plan whose cp does not split ``seq`` into 2·cp equal chunks (decode
    shards the KV cache, where a token more on one rank changes nothing)."""
    # only where cp splits the sequence's tokens (seq feeds the step's tokens S: prefill, train)
    if p.cp <= 1 or "S" not in phase_kind(p.phase).seq_feeds or not p.seq or rules.cp_splits_seq(p.cp, p.seq):
        return []
    span = where("cp", ("cp", "seq"))
    if span is None:
        return []
    chunks = 2 * p.cp
    lo, hi = p.seq // chunks * chunks, -(-p.seq // chunks) * chunks
    fitting = [k for k in range(2, 65) if p.seq % (2 * k) == 0][:8]
    help_ = f"seq = {lo or hi} or {hi} splits into {chunks} chunks"
    if fitting:
        help_ += f"; or cp = {', '.join(map(str, fitting))} for seq = {p.seq}"
    return [warning("W307", f"cp = {p.cp} does not split seq = {p.seq} of plan `{p.name}` into 2·cp = {chunks} "
                    f"equal chunks (two per rank, so that each computes the same share of causal attention, "
                    f"as Megatron-Core and Transformer Engine require): ccost prices equal shares of "
                    f"{p.seq / p.cp:,.1f} tokens", span, help=help_)]


def _check_training(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """Training choices that change nothing as written (W305): they are legal, but the author meant
    something else. (Training fields on a plan of another phase: ``_check_phase_fields``.)"""
    out: list[Diagnostic] = []
    if not phase_kind(p.phase).trains:
        return out
    reads = ("schedule", "virtual_stages", "pp", "microbatches")
    if p.schedule == "interleaved" and where("schedule", reads) is not None:
        if p.pp == 1:
            out.append(warning("W305", f"plan `{p.name}` has `schedule = interleaved` but pp = 1: there is no "
                               "pipeline to interleave", where("schedule", reads), help="set pp > 1"))
        elif p.virtual_stages < 2:
            out.append(warning("W305", f"plan `{p.name}` has `schedule = interleaved` with virtual_stages = 1: "
                               "that is plain 1F1B, bubble (P−1)/(M+P−1)", where("schedule", reads),
                               help="give `virtual_stages = 2` or more (model chunks per GPU)"))
        elif p.microbatches % p.pp:
            out.append(warning("W305", f"plan `{p.name}`: the interleaved schedule runs micro-batches in groups "
                               f"of pp = {p.pp}, but microbatches = {p.microbatches} is not a multiple of it "
                               "(Megatron-LM refuses this layout)", where("microbatches", reads),
                               help=f"use microbatches = {(p.microbatches // p.pp + 1) * p.pp}"))
    elif p.virtual_stages > 1 and where("virtual_stages", reads) is not None:
        out.append(warning("W305", f"plan `{p.name}`: virtual_stages = {p.virtual_stages} only applies to "
                           f"`schedule = interleaved` (this plan runs {p.schedule})",
                           where("virtual_stages", reads), help="add `schedule = interleaved`"))
    if p.sequence_parallel and p.tp == 1 and where("sequence_parallel", ("sequence_parallel", "tp")) is not None:
        out.append(warning("W305", f"plan `{p.name}`: sequence_parallel splits over the tp ranks, but tp = 1",
                           where("sequence_parallel", ("sequence_parallel", "tp")),
                           help="remove it, or use tp > 1"))
    if p.optimizer_sharding != "none" and p.fsdp and where("optimizer_sharding", ("optimizer_sharding", "fsdp")) \
            is not None:
        out.append(warning("W305", f"plan `{p.name}`: fsdp = true already shards the optimizer state, "
                           f"gradients and parameters; optimizer_sharding = {p.optimizer_sharding} adds nothing",
                           where("optimizer_sharding", ("optimizer_sharding", "fsdp")),
                           help="remove `optimizer_sharding`"))
    return out


def _check_target(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """A training target's own warnings: goodput needs the cluster's checkpoint storage (W309), and the target
    fields that change nothing as written (W305). (Its error, a global batch the layout cannot hold, E303,
    is its phase's own (``ccost.schema.PhaseKind.errors``): eval refuses such a plan too.)"""
    if not phase_kind(p.phase).targets:
        return []
    out: list[Diagnostic] = []  # (E303, a global batch the layout cannot hold: the phase's own errors)
    if p.train_tokens is not None and p.train_steps is not None and where("train_steps", ("train_steps",
                                                                                        "train_tokens")):
        out.append(warning("W305", f"plan `{p.name}` gives train_tokens and train_steps: the steps are used, "
                           "the tokens are not read", where("train_steps", ("train_steps", "train_tokens")),
                           help="give one of them"))
    if not p.states_target:
        for f in ("deadline", "gpu_budget", "checkpoint_interval"):
            if f in p.spans and where(f, (f, "train_tokens", "train_steps")) is not None:
                out.append(warning("W305", f"plan `{p.name}`: `{f}` applies to a training target, and the plan "
                                   "states none", where(f, (f, "train_tokens", "train_steps")),
                                   help="give the target: `train_tokens = ...` (or `train_steps`)"))
                break
    elif p.cluster.checkpoint_bandwidth is None and where("train_tokens" if p.train_tokens is not None else
                                                          "train_steps", ("train_tokens", "train_steps",
                                                                          "cluster")) is not None:
        c = p.cluster
        out.append(warning("W309", f"plan `{p.name}` states a training target, but cluster `{c.name}` gives no "
                           "`checkpoint_bandwidth`: its goodput is not modelled, and the time to train assumes "
                           "no interruption", where("train_tokens" if p.train_tokens is not None else "train_steps",
                                                    ("train_tokens", "train_steps", "cluster")),
                           help=S.checkpoint_help(c.name)))
    return out


Where = Callable[..., "Span | None"]


def placed(entity: Any) -> Where:
    """``where`` for an entity outside the checker (``ccost.model.lower``, a search's fleet): a field's own span,
    else the entity's; never None, so every rule reports."""
    spans = getattr(entity, "spans", None) or {}

    def where(name: str, reads: Any = ()) -> Span | None:
        return spans.get(name, entity.span)
    where.outside_checker = True  # type: ignore[attr-defined]  # a None place is no parent's to report
    return where


def evaluation_errors(plan: Any, where: Where | None = None) -> list[Diagnostic]:
    """The errors that keep a plan from being evaluated: what the formulas cannot price (rather than divide
    by zero or return NaN). Empty when it can be.

    One list of rules for every caller: ``ccost.evaluate`` (and a search, before it prices a pass, and
    ``calibrate --steps``) refuses a plan with them, so the model, which never imports the checker, takes
    only evaluable plans; a search names them for a combination of its fleet axes that no layout could
    price (E404, ``ccost.check.search``), a sweep shows them for its points, and the checker reports them
    (``check`` passes no plan that ``eval`` refuses). The checker passes its own
    ``where`` (see the module docstring): a rule whose place is None is its parent's to report, E301 has a
    richer message of its own (``_too_many_gpus``) and the model's rules (``model_errors``) run once on the
    model block."""
    checking = where is not None
    at: Where = where if where is not None else placed(plan)
    diags = Diagnostics()
    model, cluster = plan.model, plan.cluster
    span = plan.span

    def add(code: str, message: str, name: str, reads: tuple[str, ...], help: str | None = None,
            on: Span | None = None) -> None:
        place = at(name, reads or (name,))
        if checking and place is None:  # the plan inherits all the rule reads: its parent reports it
            return
        diags.add(error(code, message, on or place, help))

    if model is None or cluster is None or cluster.gpu is None or cluster.intra_node is None:
        diags.add(error("E401", f"plan `{plan.name}` has no model or cluster to evaluate", span,
                        "give the plan `model = ...` and `cluster = ...`"))
        return diags.items
    gpu = cluster.gpu
    for name in (*axes.MANDATORY, "batch", "microbatches", *axes.OPTIONAL):
        v = getattr(plan, name)
        if not (isinstance(v, (int, float)) and v >= 1):
            add("E203", f"plan `{plan.name}`: {name} must be at least 1, got {v}", name, (name,))
    if not rules.fits_cluster(plan.gpus, cluster.gpus):
        if not checking:  # the checker's E301 (``_too_many_gpus``) says more
            add("E301", rules.too_many_gpus(plan, cluster), "tp", (),
                "lower a parallel degree, or use a cluster with more nodes")
    elif not rules.in_one_domain(plan.gpus, cluster.domain) and cluster.inter_node is None:
        add("E302", f"plan `{plan.name}` spans {plan.gpus} GPUs, more than one NVLink domain of "
            f"{cluster.domain}, but cluster `{cluster.name}` has no inter_node link", "tp", ("cluster", *axes.NAMES),
            f"give cluster `{cluster.name}` an `inter_node = ...` link")
    if model.layers < 1 or model.hidden < 1:
        add("E401", f"model `{model.name}` needs layers and hidden of at least 1", "model", ("model",),
            on=model.span)
    elif not rules.pp_at_most_layers(plan.pp, model.layers):
        add("E401", f"plan `{plan.name}`: pp = {plan.pp} stages for {model.layers} layers of model "
            f"`{model.name}` leaves stages without a layer", "pp", ("pp", "model"),
            f"use pp ≤ {model.layers} (pp values that divide {model.layers}: "
            f"{rules.divisors(model.layers, 64)})")
    kind = phase_kind(plan.phase)
    if kind.rows == "batch" and isinstance(plan.batch, int) and isinstance(plan.microbatches, int) \
            and plan.batch >= 1 and not rules.microbatches_at_most_batch(plan.microbatches, plan.batch):
        add("E401", f"plan `{plan.name}` splits batch = {plan.batch} into microbatches = "
            f"{plan.microbatches}: a micro-batch needs at least one sequence", "microbatches",
            ("microbatches", "batch"), f"use microbatches ≤ {plan.batch}, or a larger batch")
    if not (model.params or model.weight_bytes):
        add("E104", f"model `{model.name}` needs `params` or `weight_bytes`", "model", ("model",), on=model.span)
    if "seq" in kind.needs and not plan.seq:
        add("E104", f"plan `{plan.name}` is a {plan.phase} plan and needs `seq` (tokens per sequence)", "phase",
            ("phase", "seq"), "add e.g. `seq = 2048`")
    if not (0.0 <= plan.overlap <= 1.0):
        add("E203", f"plan `{plan.name}`: overlap must be between 0 % and 100 %, got {plan.overlap:g}", "overlap",
            ("overlap",))
    if plan.compute_time is None:
        if not gpu.hbm_bandwidth > 0:
            add("E401", f"plan `{plan.name}` cannot be priced: gpu `{gpu.name}` has no hbm_bandwidth (the "
                "memory-bound compute time needs it)", "cluster", ("cluster", "compute_time"),
                f"give gpu `{gpu.name}` an `hbm_bandwidth`, or the plan a `compute_time`", on=gpu.span)
        if not gpu.compute_rate > 0:
            add("E401", f"plan `{plan.name}` cannot be priced: gpu `{gpu.name}` has no flops", "cluster",
                ("cluster", "compute_time"), f"give gpu `{gpu.name}` `flops` (and `achieved_flops`)", on=gpu.span)
    elif not plan.compute_time > 0:
        add("E203", f"plan `{plan.name}`: compute_time must be positive", "compute_time", ("compute_time",))
    if not checking:
        for link in (cluster.intra_node, cluster.inter_node):
            if link is not None and not (link.bandwidth > 0 and link.efficiency > 0 and link.alpha >= 0):
                diags.add(error("E401", f"link `{link.name}` needs a positive bandwidth and efficiency and a "
                                "non-negative alpha", link.span))
        diags.extend(model_errors(model, placed(model)))
    # The KV cache's size per token (decode and prefill with a context; every serve step holds one).
    holds_kv = (kind.kv_cache and plan.seq) or kind.kv_always
    if holds_kv and not model.kv_heads and not model.kv_lora_rank and plan.compute_time is None:
        context = f"a KV cache of {plan.seq} tokens" if plan.seq else "a KV cache for every running request"
        add("E104", f"model `{model.name}` gives neither `kv_heads` nor an MLA latent (`kv_lora_rank`): plan "
            f"`{plan.name}` holds {context} and its size per token is unknown", "model",
            ("model", "seq", "phase", "compute_time"),
            "add `kv_heads = N` (multi-head attention: the number of heads), or for MLA "
            "`kv_lora_rank` and `qk_rope_head_dim`", on=model.span)
    if model.heads is not None and model.heads < 1:
        add("E203", f"model `{model.name}`: heads must be at least 1", "model", ("model",), on=model.span)
    if kind.errors is not None:  # the phase's own rules (a serve plan's: its record in ccost.schema)
        kind.errors(plan, add)
    return diags.items


def _sig(x: float) -> str:
    """A parameter count as a spec writes it, to four significant digits: 41.94e9, -23.88e9, 1200."""
    if x == 0 or abs(x) < 1e4:
        return U._sig(x, 4)
    exp = int(math.floor(math.log10(abs(x)) / 3) * 3)
    return f"{U._sig(x / 10.0 ** exp, 4)}e{exp}"


def model_errors(m: Any, where: Where) -> list[Diagnostic]:
    """E207: fields of a model that contradict each other, so that the formulas would give nonsense
    (negative weights, a division by zero) rather than fail. Each message names the
    fields and says how they disagree. The checker runs this on every model block; ``evaluation_errors``
    on the model of a plan built outside it."""
    out: list[Diagnostic] = []

    outside = getattr(where, "outside_checker", False)

    def add(message: str, name: str, reads: tuple[str, ...], help: str) -> None:
        place = where(name, reads)
        if place is not None or outside:
            out.append(error("E207", message, place, help))

    E, k = m.experts, m.top_k
    heads = rules.kv_heads_contradiction(m.heads, m.kv_heads)
    if heads:
        if heads == "more":
            add(f"model `{m.name}`: kv_heads = {m.kv_heads} is more than heads = {m.heads}: each key/value head "
                "serves one or more query heads, so there are at most as many", "kv_heads", ("kv_heads", "heads"),
                f"kv_heads values that divide heads = {m.heads}: {rules.divisors(m.heads, 1 << 20)}")
        else:
            add(f"model `{m.name}`: kv_heads = {m.kv_heads} does not divide heads = {m.heads}: grouped-query "
                "attention gives each key/value head the same number of query heads", "kv_heads",
                ("kv_heads", "heads"), f"kv_heads values that divide heads = {m.heads}: "
                f"{rules.divisors(m.heads, 1 << 20)}")
    experts = rules.top_k_contradiction(E, k)
    if experts == "more":
        add(f"model `{m.name}`: top_k = {k} is more than experts = {E}: a token cannot visit more experts than "
            "there are", "top_k", ("top_k", "experts"), f"use top_k < {E}, or check `experts`")
    elif experts == "all":
        add(f"model `{m.name}`: top_k = {k} equals experts = {E}: every token visits every expert, so no share of "
            "the parameters is routed (the size of one expert, (params − active_params)/(experts − top_k), is "
            "undefined)", "top_k", ("top_k", "experts"),
            f"use top_k < {E}, or describe it as a dense model (no `experts`)")
    if m.moe_layers is not None and m.experts and m.moe_layers > m.layers:
        add(f"model `{m.name}`: moe_layers = {m.moe_layers} is more than layers = {m.layers}", "moe_layers",
            ("moe_layers", "layers"), f"use moe_layers ≤ {m.layers}")
    if m.vocab and m.hidden and (m.params or m.weight_bytes):
        # the embedding (and, untied, the LM head) are vocab × hidden parameters each, active for every token;
        # training's GEMM FLOPs subtract them from the active parameters (ccost.model.training)
        P_all = m.params if m.params else m.total_weight_bytes / S.DTYPE_BYTES[m.weights]
        mats = 1 if m.tied_embeddings else 2
        emb = mats * m.vocab * m.hidden
        least = min(P_all, m.active_params) if (m.experts and m.active_params) else P_all
        if emb > least:
            which = "active_params" if least != P_all else ("params" if m.params else "weight_bytes")
            what = ("the embedding (tied to the LM head)" if mats == 1 else "the embedding and the LM head")
            add(f"model `{m.name}`: {what} alone {'holds' if mats == 1 else 'hold'} "
                f"{'' if mats == 1 else '2 × '}vocab × hidden = "
                f"{'' if mats == 1 else '2 × '}{m.vocab:,} × {m.hidden:,} = {_sig(emb)} parameters, more than "
                f"{which} gives ({_sig(least)})", "vocab", ("vocab", "hidden", "params", "active_params",
                                                             "weight_bytes", "tied_embeddings"),
                f"check `vocab` and `hidden`, or count the embedding{'' if mats == 1 else 's'} in `{which}`")
    P, A = m.params, m.active_params
    if A is not None and P is not None and A > P:
        add(f"model `{m.name}`: active_params = {_sig(A)} is more than params = {_sig(P)}: the parameters a "
            "token uses are a part of all of them", "active_params", ("active_params", "params"),
            f"use active_params ≤ {_sig(P)} (swapped?)")
    elif A is not None and P is not None and E and E > 1 and k and k < E and A * E < k * P:
        # the split of ccost.model.costs.moe_parameters: one expert (P − A)/(E − k), the part outside the routed
        # experts A − k·(P − A)/(E − k), which is negative exactly when A·E < k·P
        one = (P - A) / (E - k)
        add(f"model `{m.name}`: active_params = {_sig(A)} is less than the routed experts alone: with params = "
            f"{_sig(P)}, experts = {E} and top_k = {k}, one expert holds (params − active_params)/(experts − "
            f"top_k) = {_sig(one)} parameters and the part outside the routed experts, active_params − top_k × "
            f"{_sig(one)} = {_sig(A - k * one)}, would be negative", "active_params",
            ("active_params", "params", "experts", "top_k"),
            f"active_params is at least top_k/experts × params = {_sig(k * P / E)}; check `top_k` and "
            "`experts` (DeepSeek-V3: experts = 256, top_k = 8, params = 671e9, active_params = 37e9)")
    return out


def _check_traffic(t, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """A traffic's fields that contradict each other (E207): two ways requests arrive, a peak below the
    mean, two spreads of one length, a mean above its own maximum, a trace beside a length distribution.
    The simulator would take one and drop the other without a word (``ccost.model.online.demand``: clients
    before a burst before a rate; a CV before a p90 before a range)."""
    out: list[Diagnostic] = []

    def add(message: str, name: str, reads: tuple[str, ...], help: str) -> None:
        if (span := where(name, reads)) is not None:
            out.append(error("E207", f"traffic `{t.name}`: {message}", span, help))

    ways = [f for f, v in (("rate", t.rate), ("clients", t.clients), ("burst", t.burst)) if v]
    if len(ways) > 1:
        add(f"{' and '.join(f'`{f}`' for f in ways)} each say how requests arrive (a rate, a closed loop of "
            "clients, one burst)", ways[1], tuple(ways), f"keep one of {', '.join(ways)}")
    if (t.clients or t.burst) and not t.rate:
        for f in ("peak_rate", "burstiness"):
            if getattr(t, f) != (None if f == "peak_rate" else 1.0):
                add(f"`{f}` shapes arrivals at a rate, and this traffic has {'clients' if t.clients else 'a burst'}",
                    f, (f, "clients", "burst"), f"remove `{f}`, or give a `rate` instead")
    if t.rate and t.peak_rate is not None and t.peak_rate < t.rate:
        add(f"peak_rate = {t.peak_rate:g} is below rate = {t.rate:g}: the peak is the busiest time's rate, at "
            "least the mean", "peak_rate", ("peak_rate", "rate"), f"use peak_rate ≥ {t.rate:g}, or lower `rate`")
    for side in ("input", "output"):
        spreads = [f"{side}_{k}" for k in ("cv", "p90", "range") if getattr(t, f"{side}_{k}") is not None]
        if len(spreads) > 1:
            add(f"{' and '.join(f'`{f}`' for f in spreads)} each give the spread of the {side} lengths",
                spreads[1], tuple(spreads), f"keep one of {', '.join(spreads)}")
        mean, top = getattr(t, f"{side}_tokens"), getattr(t, f"{side}_max")
        if mean is not None and top is not None and top < mean:
            add(f"{side}_max = {top:,} is below the mean {side}_tokens = {mean:,}", f"{side}_max",
                (f"{side}_max", f"{side}_tokens"), f"use {side}_max ≥ {mean:,}")
        if t.trace is not None:
            given = [f for f in (f"{side}_tokens", f"{side}_cv", f"{side}_p90", f"{side}_range", f"{side}_max")
                     if getattr(t, f) is not None]
            if given:
                add(f"`trace` gives the {side} lengths, request by request, and `{given[0]}` describes them too",
                    given[0], (given[0], "trace"), f"remove `{given[0]}`, or the trace")
    return out


def _check_link(link, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """A measured curve is one piece per entry of each list, starting at 0 B and going up (E203)."""
    out: list[Diagnostic] = []
    starts = link.curve_from
    if not starts:
        return out
    reads = ("curve_from", "curve_alpha", "curve_bandwidth")
    n = len(starts)
    for name in ("curve_alpha", "curve_bandwidth"):
        vals = getattr(link, name)
        if vals and len(vals) != n and (span := where(name, reads)) is not None:
            out.append(error("E203", f"`{name}` of link `{link.name}` has {len(vals)} value"
                             f"{'s' if len(vals) != 1 else ''} but `curve_from` starts {n} piece"
                             f"{'s' if n != 1 else ''}", span,
                             help="give one value per piece, in the order of `curve_from`"))
    if (span := where("curve_from", reads)) is not None:
        if starts[0] != 0:
            out.append(error("E203", f"the first piece of link `{link.name}`'s curve starts at "
                             f"{U.format_quantity(starts[0], U.INFORMATION)}, so smaller messages have no piece",
                             span, help="start the first piece at `0 B`"))
        elif any(b <= a for a, b in zip(starts, starts[1:])):
            out.append(error("E203", f"`curve_from` of link `{link.name}` must go up: each piece starts "
                             "above the one before", span, help="list the pieces from the smallest messages"))
    return out
