"""Expressions on ``(SI float, Dim)`` pairs: numbers with units, + - * /, the functions, and ``NAME.FIELD``
references to other blocks' fields. Unit algebra on floats, never Pint arithmetic (STYLE.md).

Each function reports its own mistake (E111, E201-E206) and raises ``Bad``; both sides of an operator are
evaluated even when one fails, so every mistake in one expression is reported. ``ctx.field_ctx`` is the
field being evaluated, so a mistake deep in an expression still gets a help written for that field.
"""

from __future__ import annotations

import math
from typing import Any

from ccost import schema as SC
from ccost import units as U
from ccost.check.context import ERR, UNSET, Bad, Context, File, unparen
from ccost.check.hints import as_unit, count_help, did_you_mean, field_guess
from ccost.check.scope import in_scope, lookup, unknown_name
from ccost.diagnostics import Span, error
from ccost.syntax import tree as T


def num(ctx: Context, e: T.Expr, scope: File) -> tuple[float, U.Dim]:
    """The value of a numeric expression, in SI units, and its dimension."""
    if isinstance(e, T.Number):
        v = float(e.value)
        d: U.Dim = U.DIMENSIONLESS
        if e.unit:
            try:
                factor, d = U.parse_unit(e.unit)
            except U.UnitError as exc:
                _unknown_unit(ctx, e, exc)
            v *= factor
        return finite(ctx, v, d, e.span, "this number")
    if isinstance(e, T.Paren):
        return num(ctx, e.inner, scope)
    if isinstance(e, T.Neg):
        v, d = num(ctx, e.operand, scope)
        return -v, d
    if isinstance(e, T.BinOp):
        return _binop(ctx, e, scope)
    if isinstance(e, T.Call):
        return _call(ctx, e, scope)
    if isinstance(e, T.Ref):
        if e.field is not None:
            v, ft = deref(ctx, e, scope)
            if not ft.type.numeric:
                ctx.add(error("E205", f"`{e.name}.{e.field}` is {ft.type.describe()}, not a number",
                              e.span, help="only numeric fields can be used in arithmetic"))
                raise Bad
            return float(v), ft.type.needs_dim
        _bare_name(ctx, e, scope)
    if isinstance(e, T.String):
        f = ctx.field_ctx
        if f is not None:
            ctx.add(error("E205", f"`{f.name}` takes {f.type.describe()}; got a string", e.span,
                          help=f"drop the quotes: `{f.name} = {f.example}`"))
        else:
            ctx.add(error("E205", "a string where a number is needed", e.span, help="drop the quotes"))
        raise Bad
    if isinstance(e, T.Bool):
        ctx.add(error("E205", f"`{str(e.value).lower()}` where a number is needed", e.span))
        raise Bad
    if isinstance(e, T.ListExpr):
        ctx.add(error("E205", "a list where one number is needed", e.span,
                      help="lists go in `sweep` fields and `compare.plans`"))
        raise Bad
    ctx.add(error("E205", "this expression is not a number", e.span))
    raise Bad


def deref(ctx: Context, e: T.Ref, scope: File) -> tuple[Any, SC.Field]:
    """``NAME.FIELD``: the value of a field of another block and the field's schema entry."""
    b = lookup(ctx, e.name, scope, e.span, None, None)
    assert b.kind is not None and e.field is not None
    f = b.kind.field(e.field)
    if f is None:
        guess = field_guess(b.kind.name, e.field, b.kind.field_names)
        text = (f"did you mean `{guess}`?" if guess else None) or \
            "its fields are " + ", ".join(f"`{n}`" for n in b.kind.field_names)
        ctx.add(error("E103", f"{b.node.kind} `{e.name}` has no field `{e.field}`", e.span, help=text))
        raise Bad
    saved = ctx.field_ctx
    try:
        v = ctx.field_value(b, e.field, e.span)
    finally:
        ctx.field_ctx = saved
    if v is ERR:
        raise Bad
    if v is UNSET:
        ctx.add(error("E104", f"`{e.name}.{e.field}` is not set and has no default", e.span,
                      help=f"set `{e.field}` in {b.label}, or write the value here"))
        raise Bad
    return v, f


def finite(ctx: Context, v: float, d: U.Dim, span: Span, what: str) -> tuple[float, U.Dim]:
    if not math.isfinite(v):
        f = ctx.field_ctx
        why = "overflow" if not math.isnan(v) else "NaN"
        if f is not None and f.range_text():
            ctx.add(error("E203", f"`{f.name}`: {what} is not a finite number ({why})", span,
                          help=f"a plausible `{f.name}` is {f.range_text()}, like `{f.name} = {f.example}`"))
        else:
            ctx.add(error("E203", f"{what} is not a finite number ({why})", span,
                          help="use a value between about 1e-300 and 1e300"))
        raise Bad
    return v, d


# ---------------------------------------------------------------------------------------------------
# Numbers and units


def _unknown_unit(ctx: Context, e: T.Number, exc: U.UnitError) -> None:
    f = ctx.field_ctx
    span = e.unit_span or e.span
    counted = count_help(f, e.text, e.unit) if f is not None and f.type.kind in ("int", "count") \
        else None
    ft = f.type.item if f is not None and f.type.kind == "list" and f.type.item is not None else (
        f.type if f is not None else None)
    suggestion = exc.suggestion
    if ft is not None and ft.kind == "quantity":  # only a unit this field can take: `usec` is no bandwidth
        suggestion = U.suggest_unit(e.unit or "", ft.needs_dim)
    if counted:
        help_text = counted
    elif suggestion:
        help_text = f"did you mean `{suggestion}`? write `{e.text} {suggestion}`"
        bits = U.bit_reading(e.unit or "", suggestion)
        if bits:
            help_text += f" (or `{e.text} {bits}` if you meant bits)"
    elif f is not None and ft is not None and ft.kind == "quantity":
        help_text = f"`{f.name}` needs {ft.describe()}, written like `{f.name} = {f.example}`"
    elif f is not None and f.type.kind in ("int", "count"):
        help_text = f"`{f.name}` is a count: write a plain number, like `{f.name} = {e.text}`"
    else:
        help_text = "units are like `us`, `GB`, `GiB`, `GB/s`, `Gbit/s`, `TFLOP/s`, `%`"
    if f is not None and f.type.kind in ("int", "count") and exc.suggestion and not counted:
        help_text += f" (but `{f.name}` is a count: a plain number, like `{f.name} = {e.text}`)"
    ctx.add(error("E202", f"unknown unit `{e.unit}`", span, help=help_text))
    raise Bad


def _bare_name(ctx: Context, e: T.Ref, scope: File) -> None:
    f = ctx.field_ctx
    fname = f.name if f is not None else "this field"
    if in_scope(ctx, e.name, scope):
        b = ctx.names[e.name]
        first = b.kind.fields[0].name if b.kind and b.kind.fields else "field"
        ctx.add(error("E205", f"`{e.name}` is a {b.node.kind} block, not a number", e.span,
                      help=f"name one of its fields, like `{e.name}.{first}`"))
        raise Bad
    unit = as_unit(e.name)
    if unit is not None:
        example = f.example if f is not None else "2"
        number = example.split(" ")[0]
        ctx.add(error("E201", f"`{e.name}` is a unit without a number", e.span,
                      help=f"write a number before the unit: `{fname} = {number} {unit}`"))
        raise Bad
    owners = sorted({g.name for k in SC.SCHEMA.values() for g in k.fields
                     if g.type.kind == "enum" and e.name in g.type.values})
    if owners:  # `tp = ring`: a word of an enumerated field where a number belongs
        ctx.add(error("E205", f"`{e.name}` is a value of `{owners[0]}`, not a number", e.span,
                      help=f"write it like `{fname} = {f.example}`" if f is not None else None))
        raise Bad
    unknown_name(ctx, e.name, scope, e.span, None)
    raise Bad


def _split_unit(ctx: Context, e: T.BinOp, scope: File) -> bool:
    """``450 GB / s``: a unit written with spaces around its ``/`` parses as a number divided by a bare
    unit. Say so (E201 on the bare unit), with the whole quantity written as one unit."""
    right = unparen(e.right)
    left = unparen(e.left)
    if e.op not in "*/" or not isinstance(right, T.Ref) or right.field is not None:
        return False
    if in_scope(ctx, right.name, scope):
        return False  # a block of that name: not a unit
    unit = as_unit(right.name)
    if unit is None or not isinstance(left, T.Number):
        return False
    f = ctx.field_ctx
    joined = f"{left.unit}{e.op}{unit}" if left.unit else unit
    if e.op == "*" and left.unit:
        joined = f"{left.unit}·{unit}"
    fix = f"{left.text} {joined}"
    where = f"`{f.name} = {fix}`" if f is not None else f"`{fix}`"
    ctx.add(error("E201", f"`{right.name}` after `{e.op}` is a unit, not a number", right.span,
                  help=f"write the unit in one piece, without spaces around `{e.op}`: {where}"))
    return True


# ---------------------------------------------------------------------------------------------------
# Operators and functions


def _binop(ctx: Context, e: T.BinOp, scope: File) -> tuple[float, U.Dim]:
    if _split_unit(ctx, e, scope):
        raise Bad
    # Evaluate both sides even when the left fails, so every mistake in one expression is reported.
    lv = rv = None
    try:
        lv = num(ctx, e.left, scope)
    except Bad:
        pass
    try:
        rv = num(ctx, e.right, scope)
    except Bad:
        pass
    if lv is None or rv is None:
        raise Bad
    (a, da), (b, db) = lv, rv
    if e.op in "+-":
        if da != db:
            ctx.add(error("E206", f"cannot {'add' if e.op == '+' else 'subtract'} "
                          f"{U.dim_name(db)} {'to' if e.op == '+' else 'from'} {U.dim_name(da)}", e.span,
                          help="both sides of + and - need the same dimension"))
            raise Bad
        return finite(ctx, a + b if e.op == "+" else a - b, da, e.span, "the result")
    if e.op == "*":
        return finite(ctx, a * b, U.dim_mul(da, db), e.span, "the product")
    if b == 0:
        ctx.add(error("E203", "division by zero", e.right.span,
                      help="the divisor must not be zero"))
        raise Bad
    return finite(ctx, a / b, U.dim_div(da, db), e.span, "the quotient")


def _call(ctx: Context, e: T.Call, scope: File) -> tuple[float, U.Dim]:
    if e.func not in SC.FUNCTIONS:
        ctx.add(error("E111", f"unknown function `{e.func}`", e.span,
                      help=did_you_mean(e.func, SC.FUNCTIONS) or
                      "the functions are " + ", ".join(SC.FUNCTIONS)))
        raise Bad
    sig = SC.FUNCTIONS[e.func][0]
    if e.func in SC.LIST_FUNCTIONS:
        ctx.add(error("E205", f"`{sig}` gives a list of values, not one number", e.span,
                      help="use it for a field of a `sweep` or `search`, like `tp = pow2(1, 64)`"))
        raise Bad
    args, bad = [], False
    for a in e.args:
        try:
            args.append(num(ctx, a, scope))
        except Bad:
            bad = True
    if bad:
        raise Bad
    if e.func in ("min", "max"):
        if not args:
            ctx.add(error("E111", f"`{e.func}` needs at least one argument", e.span, help=f"write {sig}"))
            raise Bad
        dims = {d for _, d in args}
        if len(dims) > 1:
            ctx.add(error("E206", f"`{e.func}` of values of different dimensions "
                          f"({', '.join(U.dim_name(d) for d in sorted(dims))})", e.span,
                          help="compare like with like"))
            raise Bad
        pick = min if e.func == "min" else max
        return pick(v for v, _ in args), args[0][1]
    if len(args) != 1:
        ctx.add(error("E111", f"`{e.func}` takes one argument; got {len(args)}", e.span, help=f"write {sig}"))
        raise Bad
    v, d = args[0]
    if e.func == "sqrt":
        if any(x % 2 for _, x in d):
            ctx.add(error("E206", f"the square root of {U.dim_name(d)} has no unit", e.span,
                          help="take the square root of a plain number, then multiply by a unit: "
                               "`sqrt(4) * 1 us`"))
            raise Bad
        if v < 0:
            ctx.add(error("E203", "the square root of a negative number", e.span))
            raise Bad
        return math.sqrt(v), tuple((k, x // 2) for k, x in d)
    if d != U.DIMENSIONLESS:
        ctx.add(error("E206", f"`{e.func}` takes a plain number; got {U.dim_name(d)}", e.span,
                      help=f"divide by a unit first, like `{e.func}(x / 1 GB)`"))
        raise Bad
    if e.func == "log2":
        if v <= 0:
            ctx.add(error("E203", f"log2 of {U.format_quantity(v, d)}: the argument must be positive",
                          e.span))
            raise Bad
        return math.log2(v), d
    return float(math.ceil(v) if e.func == "ceil" else math.floor(v)), d
