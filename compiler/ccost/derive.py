"""Derivation values: numbers that remember how they were computed.

DESIGN principle 1: every formula of ccost is written once, as a plain Python function over numbers, and
runs unchanged in three modes:

* **float** — Python floats (and ints): ``ccost eval``;
* **array** — numpy arrays, elementwise: sweeps and searches over thousands of layouts at once;
* **derive** — ``Value`` objects that record the symbolic formula, the substituted inputs with units and
  the result: ``ccost explain`` and the design review.

The three modes agree to the last bit: a ``Value`` computes its ``.value`` with the very same Python float
operation, in the same order, as float mode, and the few non-arithmetic functions (``log2``, ``sqrt``, ...)
go through one implementation (numpy's) in every mode, converted back to a Python float.

Example::

    >>> from ccost import derive, units
    >>> p = derive.leaf("P", 8, units.DIMENSIONLESS, "ranks in the group")
    >>> hops = derive.named("hops", 2 * (p - 1), "ring AllReduce hops")
    >>> print(derive.to_text(derive.steps(hops)))
    P = 8  — ranks in the group
    hops = 2·(P − 1) = 2 × (8 − 1) = 14  — ring AllReduce hops

A formula function never asks which mode it runs in. The helpers below (``log2``, ``maximum``, ``where``,
``choose``, ...) dispatch on their arguments: Python numbers give Python floats, arrays give arrays, Values
give Values that record the operation (``max(T_mem, T_flop)``) and the branch that was taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ccost import units
from ccost.units import DIMENSIONLESS, Dim

__all__ = [
    "Value", "Cond", "Step", "DimensionError", "leaf", "named", "constant", "steps", "to_text",
    "log2", "exp", "maximum", "minimum", "where", "ceil", "floor", "sqrt", "choose", "ops", "zero",
    "is_value", "is_array", "value_of", "fmt",
]


class DimensionError(TypeError):
    """Two quantities of different dimensions were added, compared or maxed: a bug in a formula, not a
    user error (the checker has already verified every input's unit)."""


# Operator precedence for printing: higher binds tighter.
_PREC_ADD, _PREC_MUL, _PREC_NEG, _PREC_ATOM = 1, 2, 3, 4


class Value:
    """A float with a dimension and the expression that produced it.

    ``value`` is a Python float (SI units), ``dim`` a ``units.Dim``, ``name`` the symbol under which the
    value appears in other formulas (a leaf such as ``α``, or a named step such as ``hops``); ``None``
    for an anonymous intermediate, which is printed inline in the formula of the step that uses it.

    Arithmetic ``+ - * /`` and unary minus work with Values, ints and floats (a plain number is a
    dimensionless constant). Adding or comparing different dimensions raises ``DimensionError``, except
    that adding the literal ``0`` is allowed so that ``sum(values)`` works. Comparisons compare ``.value``
    and return a ``Cond`` (a truthy object that also remembers the comparison for the derivation); in
    comparisons and in ``maximum``/``minimum``/``choose`` a plain number beside a Value is read as an SI
    quantity of the Value's dimension, as float mode reads it (``T > 1e-3``).
    """

    __slots__ = ("value", "dim", "name", "op", "args", "description", "source", "extra", "style")
    # numpy must not try to make an object array out of a Value: mixing the array and derive modes
    # in one expression is a programming error, so let numpy raise TypeError.
    __array_ufunc__ = None

    def __init__(self, value: float, dim: Dim, op: str, args: tuple = (), name: str | None = None,
                 description: str | None = None, source: str | None = None, extra: Any = None,
                 style: str | None = None):
        self.value = float(value)
        self.dim = dim
        self.op = op  # "leaf", "const", "named", "+", "-", "*", "/", "neg", "call", "where", "choose"
        self.args = args
        self.name = name
        self.description = description
        self.source = source
        self.extra = extra
        self.style = style  # "percent": print a fraction as 42.7 % rather than 0.427

    # -- arithmetic (the same Python float operation as float mode, so the bits agree) -----------------
    def __add__(self, other):
        return self if _is_literal_zero(other) else _plus(self, _as_value(other))

    def __radd__(self, other):
        return self if _is_literal_zero(other) else _plus(_as_value(other), self)

    def __sub__(self, other):
        return _minus(self, _as_value(other))

    def __rsub__(self, other):
        return _minus(_as_value(other), self)

    def __mul__(self, other):
        return _times(self, _as_value(other))

    def __rmul__(self, other):
        return _times(_as_value(other), self)

    def __truediv__(self, other):
        return _over(self, _as_value(other))

    def __rtruediv__(self, other):
        return _over(_as_value(other), self)

    def __neg__(self):
        return Value(-self.value, self.dim, "neg", (self,))

    def __pos__(self):
        return self

    def __abs__(self):
        return Value(abs(self.value), self.dim, "call", (self,), extra="abs")

    def __bool__(self) -> bool:
        # Like a float: zero is false. (Without this every Value would be truthy.)
        return self.value != 0

    # -- comparisons: on .value, remembered for the derivation ----------------------------------------
    def _cmp(self, other, sym: str, result: bool) -> "Cond":
        # A plain number is compared as a quantity in SI units (``T > 1e-3`` works as in float mode);
        # only two Values of different dimensions are refused.
        if isinstance(other, Value):
            _same_dim(self, other, sym)
            return Cond(result, self, sym, other)
        o = _as_value(other)
        return Cond(result, self, sym, Value(o.value, self.dim, "const", (), extra=o.extra))

    def __lt__(self, other):
        return self._cmp(other, "<", self.value < value_of(other))

    def __le__(self, other):
        return self._cmp(other, "≤", self.value <= value_of(other))

    def __gt__(self, other):
        return self._cmp(other, ">", self.value > value_of(other))

    def __ge__(self, other):
        return self._cmp(other, "≥", self.value >= value_of(other))

    def __eq__(self, other):  # type: ignore[override]
        if not isinstance(other, (Value, int, float, np.floating, np.integer)):
            return NotImplemented
        return self._cmp(other, "=", self.value == value_of(other))

    def __ne__(self, other):  # type: ignore[override]
        if not isinstance(other, (Value, int, float, np.floating, np.integer)):
            return NotImplemented
        return self._cmp(other, "≠", self.value != value_of(other))

    __hash__ = object.__hash__  # identity: derivations de-duplicate by object, not by value

    def __float__(self) -> float:
        return self.value

    def __repr__(self) -> str:
        label = self.name or formula(self)
        return f"Value({label} = {fmt(self)})"

    def __str__(self) -> str:
        return fmt(self)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec) if spec else fmt(self)

    @property
    def formatted(self) -> str:
        """The value with its unit, as the review prints it (``4.48 ms``)."""
        return fmt(self)


class Cond:
    """The result of comparing Values: truthy like a bool, and printable as ``P ≤ g`` / ``16 ≤ 8``."""

    __slots__ = ("result", "left", "sym", "right")

    def __init__(self, result: bool, left: Value, sym: str, right: Value):
        self.result = bool(result)
        self.left, self.sym, self.right = left, sym, right

    def __bool__(self) -> bool:
        return self.result

    def __repr__(self) -> str:
        return f"Cond({self.formula} → {self.result})"

    @property
    def formula(self) -> str:
        return f"{_render(self.left, False)[0]} {self.sym} {_render(self.right, False)[0]}"

    @property
    def substituted(self) -> str:
        return f"{_render(self.left, True)[0]} {self.sym} {_render(self.right, True)[0]}"


# ---------------------------------------------------------------------------------------------------
# Building values

def leaf(name: str, value: float, dim: Dim = DIMENSIONLESS, description: str | None = None,
         source: str | None = None, style: str | None = None) -> Value:
    """A named input of a derivation: ``leaf("α", 2e-6, units.TIME, "NVLink latency per hop", "spec sheet")``.

    ``value`` is an SI float (seconds, bytes, FLOP, ...). ``source`` says where the number comes from
    (spec sheet, measured, a spec line) and is shown next to the input in the review. ``style="percent"``
    prints a dimensionless fraction as a percentage (overlap 90 %).

    Two leaves with the same name, value, dimension and source are one input in a derivation, so callers
    may build the leaves of a link once per collective without listing them twice.
    """
    if isinstance(value, Value):
        value = value.value
    return Value(float(value), dim, "leaf", (), name=name, description=description, source=source,
                 style=style)


def named(name: str, x, description: str | None = None, style: str | None = None):
    """Name an intermediate result so that it becomes one step of the derivation.

    For floats and arrays this returns ``x`` unchanged (zero cost in the fast modes). For a Value it
    returns a new Value called ``name`` whose formula is ``x``'s expression; formulas that use it print
    ``name`` instead of the whole expression: ``hops = 2·(P − 1) = 2 × (8 − 1) = 14``.
    ``style="percent"`` prints the (dimensionless) result as a percentage: ``overhead = ... = 42.7 %``.
    """
    if not isinstance(x, Value):
        return x
    return Value(x.value, x.dim, "named", (x,), name=name, description=description, style=style)


def constant(value: float, symbol: str, *like):
    """A mathematical constant with a printed symbol (``ln 2``): a plain float unless one of ``like`` (the
    formula's inputs) is a Value — then a leaf named ``symbol`` — so float and array modes pay nothing."""
    if any(isinstance(x, Value) for x in like):
        return Value(float(value), DIMENSIONLESS, "leaf", (), name=symbol, extra="constant")
    return value


def zero(dim: Dim, *like):
    """Zero of dimension ``dim``: a plain ``0.0`` unless one of ``like`` is a Value, then a constant Value
    (printed ``0``) of that dimension. The sum of no terms (a plan with no collective: one GPU) must still
    be a time in derive mode, where ``T_compute + 0.0`` would mix a time and a plain number; float and
    array modes get the very ``0.0`` they always had."""
    if any(isinstance(x, Value) for x in like):
        return Value(0.0, dim, "const", (), extra=0)
    return 0.0


def is_value(x) -> bool:
    return isinstance(x, Value)


def is_array(x) -> bool:
    return isinstance(x, np.ndarray)


def value_of(x):
    """The number inside: ``Value.value``, or ``x`` itself for floats and arrays."""
    return x.value if isinstance(x, Value) else x


def fmt(x, dim: Dim | None = None) -> str:
    """Format a Value (or a float with ``dim``) through ``units.format_quantity``."""
    if isinstance(x, Value):
        if x.style == "percent" and x.dim == DIMENSIONLESS:
            return units.format_percent(x.value)
        return units.format_quantity(x.value, x.dim)
    return units.format_quantity(float(x), dim if dim is not None else DIMENSIONLESS)


def _is_plain(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _is_literal_zero(x) -> bool:
    return _is_plain(x) and x == 0


def _as_value(x) -> Value:
    if isinstance(x, Value):
        return x
    if isinstance(x, bool) or not _is_plain(x):
        raise TypeError(f"cannot combine a derivation Value with {type(x).__name__} {x!r}")
    return Value(float(x), DIMENSIONLESS, "const", (), extra=x)


def _same_dim(a: Value, b: Value, sym: str) -> None:
    if a.dim != b.dim:
        raise DimensionError(
            f"{_render(a, False)[0]} {sym} {_render(b, False)[0]}: "
            f"{units.dim_name(a.dim)} and {units.dim_name(b.dim)} do not mix")


# The four operations on two Values, a on the left: each operator and its reflected form (``2 * v``) call
# one of them, so the Python float operation is the same as float mode's and the bits agree.
def _plus(a: Value, b: Value) -> Value:
    _same_dim(a, b, "+")
    return Value(a.value + b.value, a.dim, "+", (a, b))


def _minus(a: Value, b: Value) -> Value:
    _same_dim(a, b, "−")
    return Value(a.value - b.value, a.dim, "-", (a, b))


def _times(a: Value, b: Value) -> Value:
    return Value(a.value * b.value, units.dim_mul(a.dim, b.dim), "*", (a, b))


def _over(a: Value, b: Value) -> Value:
    return Value(a.value / b.value, units.dim_div(a.dim, b.dim), "/", (a, b))


# ---------------------------------------------------------------------------------------------------
# Operations that dispatch on float / ndarray / Value

def _np_scalar(fn, x: float) -> float:
    # One implementation for floats and arrays (numpy's), converted back to a Python float, so that the
    # float and array modes agree bit for bit.
    return float(fn(np.float64(x)))


def _call(fname: str, npfn, x, dim_rule=None):
    if isinstance(x, Value):
        dim = dim_rule(x.dim) if dim_rule else x.dim
        return Value(_np_scalar(npfn, x.value), dim, "call", (x,), extra=fname)
    if isinstance(x, np.ndarray):
        with np.errstate(divide="ignore", invalid="ignore"):
            return npfn(x)
    return _np_scalar(npfn, x)


def _dimensionless(name: str):
    def rule(d: Dim) -> Dim:
        if d != DIMENSIONLESS:
            raise DimensionError(f"{name} of {units.dim_name(d)}: the argument must be a plain number")
        return d
    return rule


def log2(x):
    """log₂x (numpy's log2 in every mode; exact for powers of two)."""
    return _call("log₂", np.log2, x, _dimensionless("log₂"))


def exp(x):
    """eˣ of a plain number (numpy's exp in every mode, so float and array modes agree)."""
    return _call("exp", np.exp, x, _dimensionless("exp"))


def ceil(x):
    """⌈x⌉ as a float (``math.ceil`` would give an int and break the float/array agreement)."""
    return _call("ceil", np.ceil, x)


def floor(x):
    """⌊x⌋ as a float."""
    return _call("floor", np.floor, x)


def power(a, b):
    """aᵇ of two plain numbers (numpy's power in every mode, so float and array modes agree)."""
    if isinstance(a, Value) or isinstance(b, Value):
        av, bv = _as_value(a), _as_value(b)
        for v in (av, bv):
            if v.dim != DIMENSIONLESS:
                raise DimensionError(f"power of {units.dim_name(v.dim)}: both must be plain numbers")
        return Value(float(np.power(np.float64(av.value), np.float64(bv.value))), DIMENSIONLESS, "call",
                     (av, bv), extra="^")
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.power(a, b)
    return float(np.power(np.float64(a), np.float64(b)))


def _sqrt_dim(d: Dim) -> Dim:
    if any(e % 2 for _, e in d):
        raise DimensionError(f"√ of {units.dim_name(d)}")
    return tuple((k, e // 2) for k, e in d)


def sqrt(x):
    """√x (correctly rounded in both numpy and Python, so every mode agrees)."""
    return _call("√", np.sqrt, x, _sqrt_dim)


def _extreme(fname: str, npfn, pick_first, a, b):
    if isinstance(a, Value) or isinstance(b, Value):
        va, vb = _as_value(a), _as_value(b)
        # A plain number takes the other operand's dimension (max(T, 0) as in float mode).
        if not isinstance(a, Value):
            va = Value(va.value, vb.dim, "const", (), extra=va.extra)
        if not isinstance(b, Value):
            vb = Value(vb.value, va.dim, "const", (), extra=vb.extra)
        _same_dim(va, vb, fname)
        dim = va.dim
        first = pick_first(va.value, vb.value)
        # Same float as float mode: the chosen operand, untouched.
        chosen = va.value if first else vb.value
        return Value(chosen, dim, "call", (va, vb), extra=(fname, 0 if first else 1))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return npfn(a, b)
    # Python numbers: numpy's rule (a if a >= b for max), as a Python float.
    return float(a if pick_first(a, b) else b)


def maximum(a, b):
    """The larger of two quantities, elementwise on arrays. For Values the step records which one won
    (``max(T_mem, T_flop)``, chosen: T_mem). Ties go to the first argument."""
    return _extreme("max", np.maximum, lambda x, y: x >= y, a, b)


def minimum(a, b):
    """The smaller of two quantities; ties go to the first argument."""
    return _extreme("min", np.minimum, lambda x, y: x <= y, a, b)


def where(cond, a, b):
    """``a`` where ``cond`` holds, else ``b``: elementwise on arrays (``np.where``); for floats and
    Values the chosen operand itself. A Value result records the condition (``P ≤ g``) when ``cond``
    came from comparing Values, so the derivation can say why that branch was taken."""
    if isinstance(cond, np.ndarray) or isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.where(cond, a, b)
    chosen = a if cond else b
    if isinstance(chosen, Value) and isinstance(cond, Cond):
        return Value(chosen.value, chosen.dim, "where", (chosen,), extra=cond)
    if isinstance(chosen, Value) or isinstance(a, Value) or isinstance(b, Value):
        return chosen
    return float(chosen)


def _choose_arrays(arrs: list):
    """``choose`` on arrays: ``np.argmin`` over the options and the winning values, without stacking
    them at the full shape (options computed on a sub-grid stay broadcast). Same answer as argmin: the
    first strictly smaller option wins, and a NaN (argmin's minimum) wins over any number."""
    shape = np.broadcast_shapes(*(a.shape for a in arrs))
    best = arrs[0]
    idx = np.zeros(shape, dtype=np.intp)
    for i, a in enumerate(arrs[1:], 1):
        better = a < best
        nan = np.isnan(a)
        if nan.any():
            better = better | (nan & ~np.isnan(best))
        np.copyto(idx, i, where=better)
        best = np.where(better, a, best)
    return idx, np.broadcast_to(best, shape)


def choose(options: Mapping[str, Any]):
    """The cheapest of several options: returns ``(choice, value)``.

    ``options`` maps a label to a quantity (all floats, all arrays of one shape, or all Values). For
    floats and Values ``choice`` is the winning label; for arrays it is an int array of indices into
    ``list(options)``, per element. Ties go to the earliest option. A Value result records the
    comparison (``min(T_ring, T_tree) → T_tree``).
    """
    labels = list(options)
    if not labels:
        raise ValueError("choose() needs at least one option")
    vals = [options[k] for k in labels]
    if any(isinstance(v, np.ndarray) for v in vals):
        return _choose_arrays([np.asarray(v, dtype=float) for v in vals])
    best = 0
    for i in range(1, len(vals)):
        if value_of(vals[i]) < value_of(vals[best]):
            best = i
    if any(isinstance(v, Value) for v in vals):
        dim = next(v.dim for v in vals if isinstance(v, Value))
        vs = tuple(v if isinstance(v, Value) else Value(float(v), dim, "const", (), extra=v) for v in vals)
        for v in vs[1:]:
            _same_dim(vs[0], v, "min")
        return labels[best], Value(vs[best].value, vs[best].dim, "choose", vs, extra=(tuple(labels), best))
    return labels[best], float(vals[best])


#: The operations as one namespace, for ``from ccost.derive import ops``.
ops = SimpleNamespace(log2=log2, exp=exp, maximum=maximum, minimum=minimum, where=where, ceil=ceil, floor=floor,
                      sqrt=sqrt, choose=choose, constant=constant, named=named)


# ---------------------------------------------------------------------------------------------------
# Printing

_SUB_DIGITS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _const_text(v: Value) -> str:
    x = v.extra if v.extra is not None and v.extra != "constant" else v.value
    if isinstance(x, (int, np.integer)) or float(x) == int(float(x)):
        return f"{int(x)}" if abs(float(x)) < 1e6 else units.format_quantity(float(x), DIMENSIONLESS)
    return units.format_quantity(float(x), DIMENSIONLESS)


# While ``steps`` prints a derivation: the name each Value is shown under (two different Values that
# share a name get primes: hops, hops′). Outside ``steps`` names print as they are.
_DISPLAY: dict[int, str] = {}


def _label(v: Value) -> str:
    return _DISPLAY.get(id(v)) or v.name or "?"


def _render(v: Value, subst: bool, top: bool = False) -> tuple[str, int]:
    """(text, precedence) of ``v``: names (or their values, when ``subst``) for leaves and named steps;
    the expression for anonymous intermediates."""
    if v.op == "leaf":
        if subst and v.extra != "constant":
            return fmt(v), _PREC_ATOM if " " not in fmt(v) else _PREC_MUL
        return _label(v), _PREC_ATOM
    if v.op == "named" and not top:
        return (fmt(v), _PREC_ATOM if " " not in fmt(v) else _PREC_MUL) if subst else (_label(v), _PREC_ATOM)
    if v.op == "named":
        return _render(v.args[0], subst, False)
    if v.op == "const":
        text = _const_text(v)
        return text, _PREC_ATOM if not text.startswith("-") else _PREC_NEG
    if v.op == "where":
        return _render(v.args[0], subst, False)
    if v.op == "neg":
        inner, p = _render(v.args[0], subst)
        return "−" + (f"({inner})" if p < _PREC_ATOM and p != _PREC_NEG else inner), _PREC_NEG
    if v.op in ("+", "-"):
        left, lp = _render(v.args[0], subst)
        right, rp = _render(v.args[1], subst)
        if v.op == "-" and rp <= _PREC_ADD:
            right = f"({right})"
        sym = " + " if v.op == "+" else " − "
        return left + sym + right, _PREC_ADD
    if v.op in ("*", "/"):
        left, lp = _render(v.args[0], subst)
        right, rp = _render(v.args[1], subst)
        if lp < _PREC_MUL:
            left = f"({left})"
        if rp < _PREC_MUL or (v.op == "/" and rp == _PREC_MUL and not _is_unit_atom(v.args[1], subst)):
            right = f"({right})"
        if v.op == "*":
            sym = " × " if subst else "·"
        else:
            sym = " / " if subst else "/"
        return left + sym + right, _PREC_MUL
    if v.op == "call":
        fname = v.extra[0] if isinstance(v.extra, tuple) else v.extra
        args = [_render(a, subst)[0] for a in v.args]
        if fname == "log₂" and len(args) == 1 and _render(v.args[0], subst)[1] == _PREC_ATOM:
            return "log₂" + args[0], _PREC_ATOM
        if fname == "abs":
            return "|" + args[0] + "|", _PREC_ATOM
        if fname == "ceil":
            return "⌈" + args[0] + "⌉", _PREC_ATOM
        if fname == "floor":
            return "⌊" + args[0] + "⌋", _PREC_ATOM
        if fname == "^":
            base, bp = _render(v.args[0], subst)
            exp, ep = _render(v.args[1], subst)
            return ((base if bp == _PREC_ATOM else f"({base})") + "^"
                    + (exp if ep == _PREC_ATOM else f"({exp})")), _PREC_ATOM
        if fname == "√":
            inner, p = _render(v.args[0], subst)
            return ("√" + inner if p == _PREC_ATOM else f"√({inner})"), _PREC_ATOM
        return f"{fname}({', '.join(args)})", _PREC_ATOM
    if v.op == "choose":
        args = [_render(a, subst)[0] for a in v.args]
        return f"min({', '.join(args)})", _PREC_ATOM
    raise AssertionError(f"unknown Value op {v.op!r}")


def _is_unit_atom(v: Value, subst: bool) -> bool:
    # "896 KiB / 450 GB/s" needs no parentheses around a single quantity with its unit.
    return subst and (v.op in ("leaf", "named") or (v.op == "where" and v.args[0].op in ("leaf", "named")))


def formula(v: Value) -> str:
    """The symbolic formula of ``v`` (names of leaves and named steps; anonymous parts inline)."""
    return _render(v, False, top=True)[0]


def substituted(v: Value) -> str:
    """``formula(v)`` with every name replaced by its formatted value and unit."""
    return _render(v, True, top=True)[0]


def _notes(v: Value, top: bool = True) -> list[str]:
    """Why-notes of the anonymous part of ``v``'s expression: which branch a max/min/where/choose took."""
    out: list[str] = []
    if v.op in ("leaf", "const") or (v.op == "named" and not top):
        return out
    if v.op == "call" and isinstance(v.extra, tuple):
        fname, i = v.extra
        winner = v.args[i]
        if winner.op != "const":  # "min(P − 1, 1) is 1" says nothing the substituted line doesn't
            label = _label(winner) if winner.name else _render(winner, False)[0]
            out.append(f"{fname} is {label} ({fmt(winner)})")
    elif v.op == "where" and isinstance(v.extra, Cond):
        out.append(f"{v.extra.formula}: {v.extra.substituted}" if v.extra.result
                   else f"not {v.extra.formula}: {v.extra.substituted} is false")
    elif v.op == "choose":
        labels, i = v.extra
        out.append(f"cheapest: {labels[i]} ({fmt(v.args[i])})")
    for a in v.args:
        out.extend(_notes(a, False))
    return out


@dataclass(frozen=True)
class Step:
    """One line of a derivation: ``name = formula = substituted = result``.

    ``kind`` is ``"input"`` for leaves (formula and substituted are then the value itself) and ``"step"``
    for named intermediates; ``note`` says which branch a max/min/where/choose took; ``source`` is where
    an input came from.
    """

    name: str
    description: str | None
    formula: str
    substituted: str
    value: float
    dim: Dim
    result: str
    kind: str = "step"
    note: str | None = None
    source: str | None = None

    def line(self) -> str:
        """The step as one line of text (what ``ccost explain`` prints)."""
        if self.kind == "input":
            text = f"{self.name} = {self.result}"
        else:
            parts = [self.name, self.formula]
            if self.substituted != self.formula:
                parts.append(self.substituted)
            if self.result != parts[-1]:
                parts.append(self.result)
            text = " = ".join(parts)
        extra = [x for x in (self.description, self.source and f"source: {self.source}", self.note) if x]
        return text + ("  — " + "; ".join(extra) if extra else "")


def _step_of(v: Value) -> Step:
    name = _label(v) if v.name else "result"
    if v.op == "leaf":
        return Step(name, v.description, name, fmt(v), v.value, v.dim, fmt(v), kind="input", source=v.source)
    notes = _notes(v)
    return Step(name, v.description, formula(v), substituted(v), v.value, v.dim, fmt(v),
                kind="step", note="; ".join(notes) or None)


def _order(values) -> list[Value]:
    """Leaves, named steps and the top-level values, dependencies first, each once (post-order, by
    identity). Iterative, so a long chain of sums cannot exhaust Python's recursion limit."""
    out: list[Value] = []
    emitted: set[int] = set()
    expanded: set[int] = set()
    tops = [v for x in values for v in _flatten(x)]
    stack: list[tuple[Value, bool, bool]] = [(v, True, False) for v in reversed(tops)]
    while stack:
        v, top, done = stack.pop()
        if done:
            if (v.op == "named" or top) and id(v) not in emitted:
                emitted.add(id(v))
                out.append(v)
            continue
        if v.op == "const":
            continue
        if v.op == "leaf":
            if id(v) not in emitted and v.extra != "constant":
                emitted.add(id(v))
                out.append(v)
            continue
        if id(v) in expanded:
            if top and id(v) not in emitted:
                emitted.add(id(v))
                out.append(v)
            continue
        expanded.add(id(v))
        stack.append((v, top, True))
        for a in reversed(v.args):
            stack.append((a, False, False))
    return out


_PRIMES = ["", "′", "″", "‴"]


def steps(*values) -> list[Step]:
    """The ordered, de-duplicated derivation of ``values``: every input and named step they depend on,
    dependencies first, each once (by identity), then the values themselves. Non-Value arguments are
    skipped, so callers can pass a result of any mode (lists, tuples and dataclasses such as
    ``costs.Cost`` are searched for Values). Constants such as ``ln 2`` are not listed.

    Two inputs with the same name, value, dimension and source are listed once. Two *different* steps or
    inputs that share a name are told apart with primes (``hops``, ``hops′``) in every formula that uses
    them, so a derivation never shows one name with two values.
    """
    global _DISPLAY
    order = _order(values)
    display: dict[int, str] = {}
    by_name: dict[str, list[tuple[Value, str]]] = {}
    out: list[Step] = []
    saved, _DISPLAY = _DISPLAY, display
    try:
        for v in order:
            if not v.name:
                out.append(_step_of(v))
                continue
            same = by_name.setdefault(v.name, [])
            alias = next((label for w, label in same if _equivalent(v, w)), None)
            if alias is not None:
                display[id(v)] = alias
                continue
            k = len(same)
            label = v.name + (_PRIMES[k] if k < len(_PRIMES) else f"_{k + 1}")
            display[id(v)] = label
            same.append((v, label))
            out.append(_step_of(v))
    finally:
        _DISPLAY = saved
    return out


def _equivalent(v: Value, w: Value) -> bool:
    """Same input (leaf: name, value, dim, source) or the same step (same formula with the same values)."""
    if v.op != w.op or v.value != w.value or v.dim != w.dim:
        return False
    if v.op == "leaf":
        return v.source == w.source and v.extra == w.extra
    return formula(v) == formula(w) and substituted(v) == substituted(w)


def _flatten(x) -> Iterable[Value]:
    if isinstance(x, Value):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    elif hasattr(x, "__dataclass_fields__"):
        for f in x.__dataclass_fields__:
            yield from _flatten(getattr(x, f))


def to_text(step_list: Sequence[Step], inputs: bool = True) -> str:
    """The derivation as plain text, one step per line (``ccost explain``). ``inputs=False`` leaves out
    the input lines."""
    lines = [s.line() for s in step_list if inputs or s.kind != "input"]
    return "\n".join(lines)
