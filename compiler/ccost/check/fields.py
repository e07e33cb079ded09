"""Field values: every field of every block, lazily and once (``value``), checked against the schema by
a table keyed by the field type's kind (``CHECKERS``): dimension, whole numbers, ranges, enums, references,
strings, booleans, lists.

A field's value is written in the block, inherited through ``extends``, or the schema's default (a
``SC.Same`` default is another field's value). ``NAME.FIELD`` in an expression reads another block's field
through ``value`` too, so the memo (``ctx.values``) makes each field evaluated once and ``ctx.active``
catches reference cycles (E112).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ccost import axes
from ccost import schema as SC
from ccost import units as U
from ccost.check.context import ERR, UNSET, Bad, Block, Context, unparen
from ccost.check.expressions import deref, num
from ccost.check.hints import count_help, did_you_mean, prefix_count_help
from ccost.check.scope import lookup, members
from ccost.diagnostics import Span, error
from ccost.syntax import tree as T


def value(ctx: Context, b: Block, name: str, at: Span | None) -> Any:
    """The checked value of field ``name`` of block ``b``: written, inherited or defaulted; ``ERR`` after
    an error, ``UNSET`` when neither written nor defaulted."""
    key = (id(b), name)
    if key in ctx.values:
        return ctx.values[key]
    if (b, name) in ctx.active:
        start = ctx.active.index((b, name))
        text = " → ".join(f"{x.name}.{n}" for x, n in ctx.active[start:]) + f" → {b.name}.{name}"
        ctx.add(error("E112", f"reference cycle: {text}", at,
                      help="one of these fields must be given a value of its own"))
        return ERR
    assert b.kind is not None
    f = b.kind.field(name)
    assert f is not None
    ctx.active.append((b, name))
    try:
        written = members(ctx, b)
        if name in written:
            m, owner = written[name]
            try:
                v = check_value(ctx, m.value, f, owner)
            except Bad:
                v = ERR
        elif isinstance(f.default, SC.Same):
            v = value(ctx, b, f.default.field, at)
        elif f.default is not None:
            v = f.default
        else:
            v = UNSET
    finally:
        ctx.active.pop()
    ctx.values[key] = v
    return v


def check_value(ctx: Context, expr: T.Expr, f: SC.Field, owner: Block) -> Any:
    """The value of ``expr`` written for field ``f`` in block ``owner`` (whose file is the scope of its
    names), checked by the field type's entry in ``CHECKERS``; raises ``Bad`` after reporting."""
    e = unparen(expr)
    if f.type.kind != "list" and isinstance(e, T.ListExpr):
        text = f"give one value, like `{f.name} = {f.example}`"
        if owner.kind is not None and owner.kind.name == "plan":
            text += f"; to try several, write a sweep: `sweep NAME {{ base = PLAN; {f.name} = [...] }}`"
        ctx.add(error("E205", f"`{f.name}` takes one value, not a list", expr.span, help=text))
        raise Bad
    return CHECKERS[f.type.kind](ctx, e, f.type, f, owner, expr.span)


def check_items(ctx: Context, items: Iterable[T.Expr], t: SC.FieldType, f: SC.Field, owner: Block) -> tuple:
    """The values of a list's items, each of type ``t`` (a list field's, or a swept field's)."""
    out, bad = [], False
    for item in items:
        e = unparen(item)
        if isinstance(e, T.ListExpr):
            ctx.add(error("E205", f"a list inside a list in `{f.name}`", item.span,
                          help="write one flat list of values"))
            bad = True
            continue
        try:
            out.append(CHECKERS[t.kind](ctx, e, t, f, owner, item.span))
        except Bad:
            bad = True
    if bad:
        raise Bad
    return tuple(out)


# ---------------------------------------------------------------------------------------------------
# One checker per kind of field type: (ctx, expression without parentheses, type, field, owner, span)

Checker = Callable[[Context, T.Expr, SC.FieldType, SC.Field, Block, Span], Any]


def _list(ctx: Context, e: T.Expr, t: SC.FieldType, f: SC.Field, owner: Block, span: Span) -> tuple:
    if not isinstance(e, T.ListExpr):
        ctx.add(error("E205", f"`{f.name}` takes a list, like `{f.name} = {f.example}`; got "
                      f"{_describe(e)}", span, help=f"write `{f.name} = {f.example}`"))
        raise Bad
    if not e.items:
        ctx.add(error("E203", f"`{f.name}` is an empty list", span,
                      help=f"name at least one, like `{f.name} = {f.example}`"))
        raise Bad
    assert t.item is not None
    return check_items(ctx, e.items, t.item, f, owner)


def _enum(ctx: Context, e: T.Expr, t: SC.FieldType, f: SC.Field, owner: Block, span: Span) -> str:
    if isinstance(e, T.Ref) and e.field is None:
        word = e.name
    elif isinstance(e, T.String):
        word = e.value
    elif isinstance(e, T.Ref):
        v, ft = deref(ctx, e, owner.file)
        if ft.type.kind != "enum":
            _wrong_type(ctx, f, t, f"`{e.name}.{e.field}`, {ft.type.describe()}", span)
        word = v
    else:
        _wrong_type(ctx, f, t, _describe(e), span)
    if word not in t.values:
        text = did_you_mean(word, t.values) or f"write one of: {', '.join(t.values)}"
        ctx.add(error("E204", f"`{f.name}` must be one of {', '.join(t.values)}; got `{word}`", span,
                      help=text))
        raise Bad
    return word


def _ref(ctx: Context, e: T.Expr, t: SC.FieldType, f: SC.Field, owner: Block, span: Span) -> str:
    """The name of the referenced block (the build pass turns it into the entity)."""
    if isinstance(e, T.Ref) and e.field is None:
        return lookup(ctx, e.name, owner.file, span, t.ref, f).name
    if isinstance(e, T.Ref):
        v, ft = deref(ctx, e, owner.file)
        if ft.type.kind == "ref" and ft.type.ref == t.ref:
            return v
        _wrong_type(ctx, f, t, f"`{e.name}.{e.field}`, {ft.type.describe()}", span)
    if isinstance(e, T.String):
        ctx.add(error("E205", f"`{f.name}` takes the name of a {t.ref} block, not a string", span,
                      help=f"drop the quotes: `{f.name} = {e.value}`"))
        raise Bad
    _wrong_type(ctx, f, t, _describe(e), span)
    raise AssertionError  # _wrong_type raises


def _literal(literal: type, help: Callable[[SC.Field], str]) -> Checker:
    """The check of a string or bool field: a ``literal`` node, or a reference to a field of the same kind;
    anything else is the wrong type, with ``help`` saying how to write the field."""
    def check(ctx: Context, e: T.Expr, t: SC.FieldType, f: SC.Field, owner: Block, span: Span) -> Any:
        if isinstance(e, literal):
            if isinstance(e.value, str) and len(e.value) > SC.MAX_TEXT_CHARS:
                ctx.add(error("E203", f"`{f.name}` has {len(e.value):,} characters, more than "
                              f"{SC.MAX_TEXT_CHARS:,}", span, help="keep it to a line or a reference"))
                raise Bad
            return e.value
        if isinstance(e, T.Ref) and e.field is not None:
            v, ft = deref(ctx, e, owner.file)
            if ft.type.kind == t.kind:
                return v
        _wrong_type(ctx, f, t, _describe(e), span, help=help(f))
        raise AssertionError  # _wrong_type raises
    return check


_string = _literal(T.String, lambda f: f'put it in double quotes: `{f.name} = "..."`')
_bool = _literal(T.Bool, lambda f: f"write `{f.name} = true` or `{f.name} = false`")


def _number(ctx: Context, e: T.Expr, t: SC.FieldType, f: SC.Field, owner: Block, span: Span) -> Any:
    """quantity, int, count, fraction: the expression's value in SI units, of the type's dimension, whole
    for an int, inside the field's range."""
    ctx.field_ctx = f
    v, d = num(ctx, e, owner.file)
    need = t.needs_dim
    if d != need:
        _wrong_dim(ctx, v, d, t, f, e, span)
    if t.kind == "int":
        if abs(v - round(v)) > 1e-9 * max(1.0, abs(v)):
            ctx.add(error("E203", f"`{f.name}` must be a whole number; got {U._sig(v, 6)}", span,
                          help=f"round it, like `{f.name} = {max(1, round(v))}`"))
            raise Bad
    lo, hi = f.minimum, f.maximum
    out_low = lo is not None and (v <= lo if f.min_open else v < lo)
    out_high = hi is not None and (v >= hi if f.max_open else v > hi)
    if out_low or out_high:
        if out_low:
            rng = (f"greater than {f.format_value(lo)}" if f.min_open else f"at least {f.format_value(lo)}")
        else:
            rng = (f"less than {f.format_value(hi)}" if f.max_open else f"at most {f.format_value(hi)}")
        got = f.format_value(v)
        help_text = f"a plausible `{f.name}` is {f.range_text()}, like `{f.name} = {f.example}`"
        if t.kind == "fraction":
            plain = isinstance(e, T.Number) and not e.unit
            if out_high and plain and v > 1:
                help_text = f"a fraction is at most 1: write `{U._sig(v, 6)} %` or `{U._sig(v / 100, 6)}`"
        elif f.name in axes.BY_NAME and v < 1:
            help_text = f"`{f.name} = 1` means no {axes.BY_NAME[f.name].kind} parallelism"
        elif t.kind == "quantity":
            help_text = _per_time_help(e, f, v) or help_text
        ctx.add(error("E203", f"`{f.name}` must be {rng}; got {got}", span, help=help_text))
        raise Bad
    if t.kind == "int":
        return int(round(v))
    return float(v)


#: How a value is checked, by ``SC.FieldType.kind``. A new kind of field type is one entry here (and its
#: ``describe``/``doc_type`` in the schema).
CHECKERS: dict[str, Checker] = {
    "quantity": _number,
    "int": _number,
    "count": _number,
    "fraction": _number,
    "string": _string,
    "bool": _bool,
    "enum": _enum,
    "ref": _ref,
    "list": _list,
}


# ---------------------------------------------------------------------------------------------------
# Wrong types and dimensions


def _describe(e: T.Expr) -> str:
    e = unparen(e)
    if isinstance(e, T.String):
        return "a string"
    if isinstance(e, T.Bool):
        return f"`{str(e.value).lower()}`"
    if isinstance(e, T.ListExpr):
        return "a list"
    if isinstance(e, T.Ref) and e.field is None:
        return f"the name `{e.name}`"
    return "a number"


def _wrong_type(ctx: Context, f: SC.Field, t: SC.FieldType, got: str, span: Span, help: str | None = None) -> None:
    ctx.add(error("E205", f"`{f.name}` takes {t.describe()}; got {got}", span,
                  help=help or f"write it like `{f.name} = {f.example}`"))
    raise Bad


def _wrong_dim(ctx: Context, v: float, d: U.Dim, t: SC.FieldType, f: SC.Field, e: T.Expr, span: Span) -> None:
    need = t.needs_dim
    need_name = {"quantity": t.describe(), "fraction": "a fraction (a plain number or %)"}.get(
        t.kind, "a plain number")
    got = U.dim_name(d)
    text = _source_text(ctx, span)
    msg = f"`{f.name}` needs {need_name}, like {f.example}; got {got}"
    if text and len(text) <= 40:
        msg += f": `{text}`"
    help_text = f"write it like `{f.name} = {f.example}`"
    if isinstance(e, T.Number):
        number = e.text
        if not e.unit and t.kind == "quantity":
            unit = f.example.split(" ", 1)[1] if " " in f.example else ""
            help_text = f"write the unit after the number: `{f.name} = {number} {unit}`"
        elif e.unit and t.kind == "quantity":
            unit = e.unit.strip()
            # a rate gets the time unit its name and documentation give it (`3.50 USD` for a price
            # per GPU-hour is USD/h; USD/s would price the plan 3,600 times higher)
            per = f.per_time
            amount, _, denom = unit.rpartition("/")
            if unit in ("b", "Gb", "Mb", "Tb", "Kb", "kb") and need == U.dim_div(d, U.TIME):
                help_text = f"`{unit}` is a bit unit; a rate is per time: `{f.name} = {number} {unit}it/{per}`"
            elif need == U.dim_div(d, U.TIME):  # 450 GB where GB/s is needed
                help_text = f"a rate is per time: `{f.name} = {number} {unit}/{per}`"
            elif d == U.dim_div(need, U.TIME) and amount and _is_time(denom):  # 80 GB/s where GB is needed
                help_text = f"`{f.name}` is an amount, not a rate: `{f.name} = {number} {amount.strip()}`"
        elif e.unit and t.kind == "fraction":
            help_text = f"`{f.name}` is a fraction: like `{f.name} = {f.example}` or `{f.name} = 0.4`"
        elif e.unit and t.kind != "quantity":
            help_text = (count_help(f, number, e.unit) or prefix_count_help(f, number, e.unit, v)
                         or f"`{f.name}` is a plain number, without a unit: `{f.name} = {number}`")
    ctx.add(error("E201", msg, span, help=help_text))
    raise Bad


def _per_time_help(e: T.Expr, f: SC.Field, v: float) -> str | None:
    """A rate out of range because it is per another time than the field's (``price_per_gpu_hour = 3.50
    USD/s``): the same number per the documented time, when that is in range."""
    if not isinstance(e, T.Number) or not e.unit or "/" not in e.unit:
        return None
    amount, _, denom = e.unit.strip().rpartition("/")
    per = f.per_time
    if not _is_time(denom) or denom.strip() == per:
        return None
    fixed = f"{amount.strip()}/{per}"
    try:
        factor, dim = U.parse_unit(fixed)
    except U.UnitError:
        return None
    w = e.value * factor
    if dim != f.type.dim or (f.minimum is not None and w < f.minimum) or (f.maximum is not None and w > f.maximum):
        return None
    words = {"s": "second", "h": "hour", "hr": "hour", "min": "minute", "d": "day", "day": "day", "ms": "millisecond"}
    said, meant = words.get(denom.strip(), denom.strip()), words.get(per, per)
    return f"`{e.unit.strip()}` is per {said}, but `{f.name}` is per {meant}: `{f.name} = {e.text} {fixed}`"


def _is_time(unit: str) -> bool:
    try:
        return U.parse_unit(unit.strip())[1] == U.TIME
    except U.UnitError:
        return False


def _source_text(ctx: Context, span: Span) -> str | None:
    text = ctx.sources.get(span.file)
    if text is None or span.line != span.end_line:
        return None
    lines = text.splitlines()
    if not 1 <= span.line <= len(lines):
        return None
    return lines[span.line - 1][span.column - 1:span.end_column - 1].strip() or None
