"""Pass 5, build: a frozen entity for every block from its checked field values (the builders live in
``ccost.schema``), the rules that need no cost model on it (``_VALIDATORS``), then the
``Spec``. Missing required fields (E104, or the field's own code), a sweep that varies nothing (E104) or
has too many points (E402) are reported here.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Callable, Iterable

from ccost import schema as SC
from ccost import units as U
from ccost.check.context import ERR, Bad, Block, Context, File, unparen
from ccost.check.expressions import num
from ccost.check.fields import check_items, check_value, value
from ccost.check.load import std_file
from ccost.check.plan import _check_link, _check_model, _check_plan, _check_traffic
from ccost.check.scope import members as members_of
from ccost.check.scope import names_of_kind
from ccost.check.search import validate as _check_search
from ccost.check.search import validate_compare as _check_compare
from ccost.diagnostics import CcostError, Diagnostic, Diagnostics, Span, error
from ccost.spec import Plan, Policy, Spec
from ccost.syntax import tree as T

# A sweep is evaluated point by point; beyond this many points it is a typo, not a study (principle: specs are
# untrusted input).
MAX_SWEEP_POINTS = 100_000

#: The rules that need no cost model, by block kind (``ccost.check.plan``, ``ccost.check.search``): each
#: gets the built entity and ``where``, which places a diagnostic (see ``entity``).
_VALIDATORS: dict[str, Callable[[Any, Callable[..., Span | None]], list[Diagnostic]]] = {
    "link": _check_link,
    "model": _check_model,
    "traffic": _check_traffic,
    "plan": _check_plan,
    "search": _check_search,
    "compare": _check_compare,
}


def build_spec(ctx: Context) -> None:
    """``ctx.spec``: every block's entity, collected by the schema's ``spec_attr``; None after any error."""
    root = ctx.root
    if root is None:  # the spec itself could not be read
        return
    by_attr: dict[str, dict[str, Any]] = {}
    for kind in SC.SCHEMA.values():
        if kind.spec_attr != "policy":
            by_attr.setdefault(kind.spec_attr, {})
    policy: Policy | None = None
    local_plans: list[str] = []
    for b in ctx.blocks:
        ent = entity(ctx, b)
        if ent is None or b.kind is None:
            continue
        if b.kind.spec_attr == "policy":
            if b.file is root and policy is None:
                policy = ent
            continue
        if b.name is None or ctx.names.get(b.name) is not b:
            continue  # a duplicate: already reported
        by_attr[b.kind.spec_attr][b.name] = ent
        if b.kind.name == "plan" and b.file is root:
            local_plans.append(b.name)
    if ctx.diags.has_errors():
        return
    frozen = {k: MappingProxyType(v) for k, v in by_attr.items()}
    ctx.spec = Spec(path=root.display, policy=policy or Policy("policy", None, None), **frozen,
                    files=tuple(f.real for f in [root] + [g for g in ctx.files.values() if g is not root]),
                    local_plans=tuple(local_plans))


def entity(ctx: Context, b: Block) -> Any:
    """The frozen entity of a block, or None when it (or something it needs) has an error."""
    if id(b) in ctx.entities:
        return ctx.entities[id(b)]
    if id(b) in ctx.building:  # a reference loop between blocks; kinds cannot form one today
        return None
    ctx.building.add(id(b))
    try:
        ent = _build(ctx, b)
    finally:
        ctx.building.discard(id(b))
    ctx.entities[id(b)] = ent
    return ent


def _build(ctx: Context, b: Block) -> Any:
    kind = b.kind
    assert kind is not None
    if id(b) in ctx.bad_blocks:
        # still evaluate the members, so their own mistakes are reported
        for m in b.node.members:
            if kind.field(m.name):
                value(ctx, b, m.name, m.span)
        return None
    members = members_of(ctx, b)
    values: dict[str, Any] = {}
    spans: dict[str, Span] = {}
    written: set[str] = set()
    bad = False
    for f in kind.fields:
        if f.name in members:
            v = value(ctx, b, f.name, members[f.name][0].span)
            written.add(f.name)
            spans[f.name] = members[f.name][0].value.span
            if v is ERR:
                bad = True
            else:
                values[f.name] = v
        elif f.default is not None and not isinstance(f.default, SC.Same):
            values[f.name] = f.default
    for f in kind.fields:
        if f.name in written:
            continue
        if f.required or (f.required_if is not None and not bad and f.required_if(values)):
            if _parent_lacks(ctx, b, f.name):
                bad = True
                continue
            if _misspelled(ctx, b, f.name):
                # E103 said which field the unknown one probably meant; check the rest of the block with that
                # value, so its other errors come in the same run
                guessed = _guessed_value(ctx, b, f)
                if guessed is None:
                    bad = True
                else:
                    values[f.name], spans[f.name] = guessed
                continue
            cond = "" if f.required else f", {f.required_doc}"
            ctx.add(error(f.missing_code, f"{b.label} is missing `{f.name}`{cond}: {f.doc}", b.where,
                          help=_add_help(ctx, b, f)))
            bad = True
    varied = _varied(ctx, b, members) if kind.varies else ()
    if varied is None:
        bad = True
    # references to entities
    for f in kind.fields:
        if f.name not in values:
            continue
        if f.type.kind == "ref":
            ent = entity(ctx, ctx.names[values[f.name]])
            if ent is None:
                bad = True
            values[f.name] = ent
        elif f.type.kind == "list" and f.type.item is not None and f.type.item.kind == "ref":
            ents = tuple(entity(ctx, ctx.names[n]) for n in values[f.name])
            if any(x is None for x in ents):
                bad = True
            values[f.name] = ents
    if bad:
        return None
    bctx = SC.BuildContext(b.name or kind.name, b.node.title, b.where, MappingProxyType(spans),
                           MappingProxyType(values), varied or ())
    ent = kind.build(bctx)
    if isinstance(ent, Plan) and ent.stack is None:  # the bundled default of its phase (std/stacks.ccost)
        from ccost.check import default_stacks

        defaults = default_stacks()
        ent = replace(ent, stack=defaults[ent.phase], stack_defaults=defaults)
    if kind.name == "traffic" and ent.trace is not None:
        trace = _read_trace(ctx, b, ent.trace, spans["trace"])
        if trace is None:
            return None
        ent = replace(ent, trace_data=trace)
    validate = _VALIDATORS.get(kind.name)
    if validate is not None:
        own_members = {m.name: m for m in b.node.members}

        def where(name: str, reads: Iterable[str] = ()) -> Span | None:
            """Where a check about ``name`` points: the member if this block writes it, else the block's
            name; None for a block that extends another and writes none of the fields the check
            ``reads`` (its parent already reports the same thing)."""
            own = own_members.get(name)
            if own is not None:
                return own.value.span
            if b.node.extends is not None and not (set(own_members) & set(reads)):
                return None
            return b.where
        where.written = frozenset(own_members)  # type: ignore[attr-defined]
        # the names this block can see, for help that must not lead into a name clash: computed only
        # when such help is written (building it for every block made checking quadratic)
        visible_keys = ctx.visible.get(b.file.key, frozenset())
        where.visible = lambda: {n: ctx.names[n].node.kind  # type: ignore[attr-defined]
                                 for n in visible_keys if n in ctx.names}
        for d in validate(ent, where):
            ctx.add(d)
    return ent


#: Traces parsed in this process, by name and content (a million rows take seconds to parse): the last few.
_TRACES: dict[tuple[str, bytes], Any] = {}
_TRACES_KEPT = 4


def _read_trace(ctx: Context, b: Block, written: str, at: Span) -> Any:
    """A traffic's ``trace = "..."``: the file read like a model's config (relative to the spec, inside its
    project, a bounded regular file; from the same git revision under ``ccost diff REV``) and parsed
    (``ccost.traces.parse_trace``); None after E515 at the string, or at the file's line."""
    from ccost.check.load import _default_reader
    from ccost.traces import MAX_TRACE_BYTES, parse_trace
    from ccost.userfiles import Outside, confine, project_root, read_user_bytes

    shown = os.path.normpath(os.path.join(os.path.dirname(b.file.display), written))
    real = os.path.normpath(os.path.join(os.path.dirname(b.file.real), written))
    label = f"traffic `{b.name}`"
    try:
        path = confine(real, project_root(b.file.key), shown)
        if ctx.read is _default_reader:
            data = read_user_bytes(path, limit=MAX_TRACE_BYTES, code="E515", what="trace", display=shown,
                                   help="name a CSV or JSON-lines file of token counts")
        else:  # `ccost diff REV`: the file as it was in that revision
            data = ctx.read(path)
            data = data.encode("utf-8") if isinstance(data, str) else data
    except Outside as exc:
        ctx.add(error("E515", f"{label}: {exc}", at, help="keep the trace inside the project, beside the spec"))
        return None
    except FileNotFoundError:
        ctx.add(error("E515", f"{label}: {shown}: no such file", at, help="the path is relative to the spec"))
        return None
    except CcostError as exc:  # not a regular file, too large, unreadable: said at the string
        ctx.diags.extend(Diagnostic(d.code, d.severity, f"{label}: {d.message}", at, d.help, d.notes)
                         for d in exc.diagnostics)
        return None
    key = (shown, hashlib.sha256(data).digest())
    if key in _TRACES:  # the same bytes parsed before in this process (the language server checks on each edit)
        return _TRACES[key]
    try:
        trace = parse_trace(data, shown, code="E515")
        while len(_TRACES) >= _TRACES_KEPT:
            del _TRACES[next(iter(_TRACES))]
        _TRACES[key] = trace
        return trace
    except CcostError as exc:  # what is wrong in the file: said at its line, with where the spec names it
        ctx.diags.extend(Diagnostic(d.code, d.severity, f"{label}: {d.message}", d.span or at, d.help,
                                    d.notes + (f"the trace is named at {at.file}:{at.line}",))
                         for d in exc.diagnostics)
        return None


def _has_unknown_fields(b: Block) -> bool:
    kind = b.kind
    assert kind is not None
    varies = SC.SCHEMA[kind.varies] if kind.varies else None
    return any(kind.field(m.name) is None and not (varies and varies.field(m.name)) for m in b.node.members)


def _misspelled(ctx: Context, b: Block, name: str) -> bool:
    """Whether an unknown field of ``b`` (or of a block it extends) was probably ``name``."""
    cur: Block | None = b
    for _ in range(64):
        if cur is None:
            return False
        if (id(cur), name) in ctx.misspelled:
            return True
        cur = ctx.names.get(cur.node.extends) if cur.node.extends else None
    return False


def _guessed_value(ctx: Context, b: Block, f: SC.Field) -> tuple[Any, Span] | None:
    """The value of the unknown member of ``b`` (or of a block it extends) that was probably field ``f``
    (``concurency = 32`` for ``concurrency``), checked as ``f``; None when there is none or it does not
    check. An attempt that fails leaves no trace: its diagnostics and the values it memoised are dropped
    (the user sees the E103 and fixes the name first)."""
    cur: Block | None = b
    for _ in range(64):
        if cur is None:
            return None
        m = ctx.guessed.get((id(cur), f.name))
        if m is not None:
            break
        cur = ctx.names.get(cur.node.extends) if cur.node.extends else None
    else:
        return None
    if m is None or cur is None:
        return None
    saved, memo = ctx.diags, set(ctx.values)
    ctx.diags = Diagnostics()
    try:
        v = check_value(ctx, m.value, f, cur)
    except Bad:
        v = ERR
    failed = v is ERR or ctx.diags.has_errors()
    ctx.diags = saved
    if failed:
        for key in set(ctx.values) - memo:
            del ctx.values[key]
        return None
    return v, m.value.span


def _parent_lacks(ctx: Context, b: Block, name: str) -> bool:
    """A missing field inherited from a parent that lacks it too is reported once, on the parent."""
    if b.node.extends is None:
        return False
    parent = ctx.names.get(b.node.extends)
    return parent is not None and name not in members_of(ctx, parent)


# ---------------------------------------------------------------------------------------------------
# Kinds that vary another kind's fields (sweep, search)


def _varied(ctx: Context, b: Block, members: dict[str, tuple[T.Member, Block]]) -> tuple | None:
    kind = b.kind
    assert kind is not None and kind.varies is not None
    target = SC.SCHEMA[kind.varies]
    out: list[tuple[str, tuple]] = []
    bad = False
    for name, (m, owner) in members.items():
        if kind.field(name) is not None:
            continue
        f = target.field(name)
        if f is None:
            continue  # reported as an unknown field
        e = unparen(m.value)
        items = e.items if isinstance(e, T.ListExpr) else (m.value,)
        if isinstance(e, T.Call) and e.func in SC.LIST_FUNCTIONS:  # pow2(1, 64), range(1, 16)
            items = _range_items(ctx, e, owner.file)
            if items is None:
                bad = True
                continue
        if isinstance(e, T.ListExpr) and not items:
            ctx.add(error("E203", f"`{name}` is an empty list: a {kind.name} needs at least one value",
                          m.value.span, help=f"like `{name} = [1, 2, 4, 8]`" if f.type.kind == "int"
                          else f"like `{name} = [{f.example}]`"))
            bad = True
            continue
        if f.type.kind == "list":
            ctx.add(error("E205", f"`{name}` cannot be swept", m.name_span,
                          help="sweep the plans' fields instead, like `tp = [1, 2, 4, 8]`"))
            bad = True
            continue
        try:
            vals = check_items(ctx, items, f.type, f, owner)
        except Bad:
            bad = True
            continue
        if f.type.kind == "ref":
            ents = tuple(entity(ctx, ctx.names[n]) for n in vals)
            if any(x is None for x in ents):
                bad = True
                continue
            vals = ents
        out.append((name, vals))
    if bad:
        return None
    if not out:
        if any(id(b) == blk for blk, _ in ctx.misspelled) or _has_unknown_fields(b):
            return None  # its unknown field (reported) was probably meant to vary
        ctx.add(error("E104", f"{b.label} varies nothing", b.where,
                      help=f"add a {kind.varies} field with a list of values, like `tp = [1, 2, 4, 8]`"))
        return None
    points = math.prod(len(v) for _, v in out)
    if points > MAX_SWEEP_POINTS and kind.name != "search":  # a search checks its own `limit`
        ctx.add(error("E402", f"{b.label} has {points:,} points (more than {MAX_SWEEP_POINTS:,})", b.where,
                      help="sweep fewer values, or split it into several sweeps"))
        return None
    return tuple(out)


def _range_items(ctx: Context, e: T.Call, scope: File) -> tuple | None:
    """The values of ``pow2(lo, hi)`` / ``range(lo, hi[, step])`` as number nodes at the call's span
    (checked like any list item afterwards), or None after reporting an error."""
    from ccost.schema import range_values

    args = []
    try:
        for a in e.args:
            v, d = num(ctx, a, scope)
            if d != U.DIMENSIONLESS:
                ctx.add(error("E206", f"`{e.func}` takes plain numbers; got {U.dim_name(d)}", a.span,
                              help=f"write it like `{SC.FUNCTIONS[e.func][0]}`"))
                return None
            args.append(v)
    except Bad:
        return None
    vals = range_values(e.func, args)
    if isinstance(vals, str):
        too_many = "more than" in vals
        ctx.add(error("E402" if too_many else "E203", vals, e.span,
                      help="take a step, like `range(1, 1024, 8)`, or powers of two, like `pow2(1, 1024)`"
                      if too_many else f"write it like `{SC.FUNCTIONS[e.func][0]}`"))
        return None
    return tuple(T.Number(value=float(v), text=str(v), unit=None, span=e.span) for v in vals)


def _add_help(ctx: Context, b: Block, f: SC.Field) -> str:
    """How to add a missing field: its schema example, or for a reference a block of that kind the file
    sees (the schema's example name may not exist here), listing the others when there are a few."""
    if f.type.kind != "ref":
        return f"add `{f.name} = {f.example}`"
    seen = names_of_kind(ctx, b.file.key, f.type.ref)
    if not seen:
        bundled = std_file(f.type.ref)
        where = f"import \"{bundled}\" for the bundled ones, or declare one" if bundled else "declare one"
        return f"add `{f.name} = NAME` naming a {f.type.ref} block: {where}"
    others = f" (or {', '.join(seen[1:6])}{', …' if len(seen) > 6 else ''})" if len(seen) > 1 else ""
    return f"add `{f.name} = {seen[0]}`{others}"
