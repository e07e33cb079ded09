"""Passes 2-4, scope: one table of names for the spec and its imports, which names each file sees, and
every ``extends`` chain; then, on demand, a block's members through its chain and the lookup of a name.

Reported here: unknown block kinds (E001), duplicates (E102), keywords used as names (E110), unknown fields
with a did-you-mean (E103), more than one policy per file (E109), ``extends`` of another kind or in a cycle
(E107), unknown names (E101) and references to a block of the wrong kind (E108).
"""

from __future__ import annotations

import os

from ccost import schema as SC
from ccost.check.context import Bad, Block, Context, File, unparen
from ccost.check.hints import as_unit, did_you_mean, field_guess, hint
from ccost.check.load import _default_reader, std_file
from ccost.diagnostics import CcostError, Diagnostic, Span, error
from ccost.syntax import tree as T
from ccost.userfiles import project_root

# ---------------------------------------------------------------------------------------------------
# The passes


def declare(ctx: Context) -> None:
    """Every block of every file into ``ctx.blocks``, and its name into ``ctx.names``; members checked
    against the schema's field names."""
    keywords = SC.keywords()
    for f in ctx.files.values():
        if f.tree is None:
            continue
        policies: list[Block] = []
        for node in f.tree.blocks:
            kind = SC.SCHEMA.get(node.kind)
            b = Block(node, kind, f, node.name)
            if kind is None:
                ctx.add(error("E001", f"unknown block kind `{node.kind}`", node.kind_span,
                              help=did_you_mean(node.kind, SC.SCHEMA) or
                              "the kinds are " + ", ".join(SC.SCHEMA)))
                continue
            ctx.blocks.append(b)
            if not kind.named:
                policies.append(b)
                if len(policies) > 1:
                    first = policies[0].node.kind_span
                    ctx.add(error("E109", f"a second `{node.kind}` block in this file", node.kind_span,
                                  help=f"merge it into the first one, at {first}",
                                  notes=[f"the first is at {first}"]))
            elif node.name is None:
                ctx.add(error("E001", f"a {node.kind} block needs a name", node.kind_span,
                              help=f"write `{node.kind} NAME {{ ... }}`"))
            elif node.name in keywords:
                ctx.add(error("E110", f"`{node.name}` is a keyword and cannot name a block",
                              node.name_span or node.kind_span,
                              help=f"pick another name, like `my_{node.name}`"))
            elif node.name in ctx.names:
                first = ctx.names[node.name]
                ctx.add(error("E102", f"`{node.name}` is defined twice", b.where,
                              help="rename one of them",
                              notes=[f"first defined as {first.node.kind} `{node.name}` at {first.where}"]))
            else:
                ctx.names[node.name] = b
            if node.name is not None and node.name in ctx.names:  # not a keyword
                ctx.own_names.setdefault(f.key, []).append(node.name)
            if node.title is not None and len(node.title) > SC.MAX_TEXT_CHARS:
                ctx.add(error("E203", f"the title of {b.label} has {len(node.title):,} characters, more than "
                              f"{SC.MAX_TEXT_CHARS:,}", node.name_span or node.kind_span,
                              help="keep the title to a line; say the rest in a comment"))
            _check_member_names(ctx, b)


def _check_member_names(ctx: Context, b: Block) -> None:
    kind = b.kind
    assert kind is not None
    varies = SC.SCHEMA[kind.varies] if kind.varies else None
    seen: dict[str, T.Member] = {}
    for m in b.node.members:
        if m.name in seen:
            ctx.add(error("E102", f"`{m.name}` is set twice in {b.label}", m.name_span,
                          help="keep one of them", notes=[f"first set at {seen[m.name].name_span}"]))
            continue
        seen[m.name] = m
        if kind.field(m.name) is None and not (varies and varies.field(m.name)):
            names = list(kind.field_names) + (list(varies.field_names) if varies else [])
            guess = field_guess(kind.name, m.name, names)
            gf = (kind.field(guess) or (varies.field(guess) if varies else None)) if guess else None
            text = (f"did you mean `{guess}` ({gf.doc.split(';')[0]})?" if gf is not None else
                    f"did you mean `{guess}`?" if guess else None)
            if guess:  # `bandwith` → `bandwidth`: don't also report `bandwidth` as missing
                ctx.misspelled.add((id(b), guess))
                ctx.guessed.setdefault((id(b), guess), m)
            known = ", ".join(f"`{n}`" for n in names)
            ctx.add(error("E103", f"{kind.name} has no field `{m.name}`", m.name_span,
                          help=text or f"the fields of a {kind.name} are {known}"))


def compute_visibility(ctx: Context) -> None:
    """``ctx.visible``: the names each file sees, its own and those of the files it imports (transitively)."""
    for f in ctx.files.values():
        _visible(ctx, f.key, set())


def _visible(ctx: Context, key: str, stack: set[str]) -> frozenset[str]:
    if key in ctx.visible:
        return ctx.visible[key]
    f = ctx.files[key]
    names = set(ctx.own_names.get(key, ()))
    stack = stack | {key}
    for k in f.imports:
        if k not in stack and k in ctx.files:
            names |= _visible(ctx, k, stack)
    ctx.visible[key] = frozenset(names)
    return ctx.visible[key]


def resolve_extends(ctx: Context) -> None:
    """Every ``extends`` chain, each block visited once (time linear in the number of blocks): walk up
    from a block until a block whose chain is already known, a block that extends nothing, a broken
    link (unknown parent, another kind) or a block already on this walk (a cycle); then every block of
    the walk gets that answer. A block reports only its own broken ``extends``; its descendants are
    broken silently. Every block of a cycle reports the cycle once, at its own ``extends``."""
    state: dict[int, bool] = {}  # id(block) -> chain sound
    for start in ctx.blocks:
        if id(start) in state:
            continue
        path: list[Block] = []
        on_path: dict[int, int] = {}
        cur = start
        sound = True
        while True:
            if id(cur) in state:
                sound = state[id(cur)]
                break
            on_path[id(cur)] = len(path)
            path.append(cur)
            if cur.node.extends is None:
                break
            span = cur.node.extends_span or cur.where
            parent = ctx.names.get(cur.node.extends)
            if parent is None or cur.node.extends not in ctx.visible.get(cur.file.key, frozenset()):
                unknown_name(ctx, cur.node.extends, cur.file, span, cur.node.kind)
                sound = False
                break
            if parent.node.kind != cur.node.kind:
                ctx.add(error("E107", f"{cur.label} cannot extend {parent.label}: a block extends "
                              "another of its own kind", span,
                              help=_did_you_mean_kind(ctx, cur.node.extends, cur)
                              or f"extend a {cur.node.kind}, or drop `extends {cur.node.extends}`"))
                sound = False
                break
            if id(parent) in on_path:
                cycle = path[on_path[id(parent)]:]
                for i, x in enumerate(cycle):
                    text = " → ".join(y.name or "?" for y in cycle[i:] + cycle[:i] + [x])
                    ctx.add(error("E107", f"extends cycle: {text}", x.node.extends_span or x.where,
                                  help="one of these blocks must stand on its own"))
                sound = False
                break
            cur = parent
        for x in path:
            state[id(x)] = sound
            if not sound:
                ctx.bad_blocks.add(id(x))


# ---------------------------------------------------------------------------------------------------
# Names in scope


def _did_you_mean_kind(ctx: Context, name: str, b: Block) -> str | None:
    same = [n for n in names_of_kind(ctx, b.file.key, b.node.kind) if ctx.names[n] is not b]
    return hint(ctx, name, same)


def names_of_kind(ctx: Context, key: str, kind: str | None) -> list[str]:
    """The names visible in a file, of one kind (all kinds for None), sorted; computed once each."""
    memo = ctx.kind_names.get((key, kind))
    if memo is None:
        scope = ctx.visible.get(key, frozenset())
        memo = sorted(n for n in scope if kind is None or ctx.names[n].node.kind == kind)
        ctx.kind_names[(key, kind)] = memo
    return memo


def in_scope(ctx: Context, name: str, scope: File) -> bool:
    """Whether ``name`` is a block the file ``scope`` sees."""
    return name in ctx.names and name in ctx.visible.get(scope.key, frozenset())


def unknown_name(ctx: Context, name: str, f: File, span: Span, want: str | None) -> None:
    """E101 with the best hint: a near name in scope, or the file that defines it."""
    scope = ctx.visible.get(f.key, frozenset())
    if name in ctx.names and name not in scope:
        where = ctx.names[name].file.display
        ctx.add(error("E101", f"`{name}` is defined in {where}, which {f.display} does not import",
                      span, help=f'add `import "{os.path.relpath(where, os.path.dirname(f.display) or ".")}"`'))
        return
    same_kind = names_of_kind(ctx, f.key, want) if want else []
    text = hint(ctx, name, same_kind) or hint(ctx, name, names_of_kind(ctx, f.key, None))
    notes = []
    if want and same_kind:
        notes.append(f"{want} blocks in scope: " + ", ".join(same_kind[:12])
                     + (f" and {len(same_kind) - 12:,} more" if len(same_kind) > 12 else ""))
    what = f"no {want} named `{name}`" if want else f"unknown name `{name}`"
    if not text and want and std_file(want):
        text = f'define it, or import the bundled library: `import "{std_file(want)}"`'
    ctx.add(error("E101", what, span, help=text, notes=notes))


def lookup(ctx: Context, name: str, scope: File, span: Span, want: str | None, f: SC.Field | None) -> Block:
    """The block ``name`` as seen from file ``scope``, of kind ``want`` (any for None); raises ``Bad``
    after reporting an unknown name (E101), a bare unit (E201) or a block of another kind (E108)."""
    b = ctx.names.get(name)
    if b is None or name not in ctx.visible.get(scope.key, frozenset()):
        if want is None and b is None and as_unit(name) is not None:
            ctx.add(error("E201", f"`{name}` is a unit without a number", span,
                          help="write a number before the unit"))
            raise Bad
        unknown_name(ctx, name, scope, span, want)
        raise Bad
    if want is not None and b.node.kind != want:
        same = names_of_kind(ctx, scope.key, want)
        fname = f"`{f.name}`" if f else "this reference"
        ctx.add(error("E108", f"{fname} must name a {want}; `{name}` is a {b.node.kind}", span,
                      help=hint(ctx, name, same) or
                      (f"{want} blocks in scope: " + ", ".join(same[:12]) if same
                       else f"define a {want} block")))
        raise Bad
    return b


# ---------------------------------------------------------------------------------------------------
# Members through the extends chain


def members(ctx: Context, b: Block) -> dict[str, tuple[T.Member, Block]]:
    """The block's members, through its extends chain (the parent first, the child overriding).

    Iterative and memoised: a chain of any length is walked once, without recursion."""
    memo = ctx.members_memo.get(id(b))
    if memo is not None:
        return memo
    chain: list[Block] = []
    seen: set[int] = set()
    cur: Block | None = b
    while cur is not None and id(cur) not in ctx.members_memo and id(cur) not in seen:
        seen.add(id(cur))
        chain.append(cur)
        parent = None
        if cur.node.extends is not None and id(cur) not in ctx.bad_blocks:
            parent = ctx.names.get(cur.node.extends)
        cur = parent
    base = ctx.members_memo.get(id(cur), {}) if cur is not None else {}
    for x in reversed(chain):
        merged = dict(base)
        own: dict[str, tuple[T.Member, Block]] = {}
        for m in x.node.members:
            own.setdefault(m.name, (m, x))
        if x.kind is not None and x.kind.name == "model" and "config" in own:
            merged.update(_config_members(ctx, x, own["config"][0]))  # written fields override the config
        merged.update(own)
        ctx.members_memo[id(x)] = merged
        base = merged
    return ctx.members_memo[id(b)]


def _config_members(ctx: Context, b: Block, m: T.Member) -> dict[str, tuple[T.Member, Block]]:
    """``config = "hf/config.json"`` in a model: the fields the Hugging Face config gives (``ccost.hf``),
    as members placed at the string, so a wrong value points there. Read like an import: relative to
    the file, inside its project, a bounded regular file; E510 when it cannot be read or understood."""
    from ccost import hf

    e = unparen(m.value)
    if not isinstance(e, T.String):
        return {}  # the field's own check reports the wrong type
    # If the config fails, its error is the one to fix: no "missing `layers`" on top of it.
    assert b.kind is not None
    ctx.misspelled.update((id(b), f.name) for f in b.kind.fields)
    shown = os.path.normpath(os.path.join(os.path.dirname(b.file.display), e.value))
    real = os.path.normpath(os.path.join(os.path.dirname(b.file.real), e.value))
    try:
        if ctx.read is _default_reader:
            cfg = hf.load_config(real, project_root(b.file.key), shown)
        else:  # `ccost diff` reads the config from the same git revision as the spec, confined alike
            hf.confined(shown, project_root(b.file.key), real)
            cfg = hf.parse_json(ctx.read(real), shown)
        got = hf.imported(cfg)
    except hf.HfError as exc:
        ctx.add(error("E510", f"model `{b.name}`: {exc.message}", e.span, help=exc.help))
        return {}
    except FileNotFoundError:
        ctx.add(error("E510", f"model `{b.name}`: {shown}: no such file", e.span,
                      help="the path is relative to the spec"))
        return {}
    except CcostError as exc:
        ctx.diags.extend(Diagnostic(d.code, d.severity, d.message, d.span or e.span, d.help, d.notes)
                         for d in exc.diagnostics)
        return {}
    ctx.misspelled.difference_update((id(b), f.name) for f in b.kind.fields)
    values = dict(got.fields, source=f"config.json: {shown}")
    out: dict[str, tuple[T.Member, Block]] = {}
    for name, v in values.items():
        if isinstance(v, bool):
            expr: T.Expr = T.Bool(v, e.span)
        elif isinstance(v, str):
            expr = T.String(v, e.span) if name == "source" else T.Ref(v, None, e.span)
        else:
            expr = T.Number(value=float(v), text=str(v), unit=None, span=e.span)
        out[name] = (T.Member(name, expr, e.span, m.name_span), b)
    return out
