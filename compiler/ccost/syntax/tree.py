"""The syntax tree of a .ccost file: frozen dataclasses, every node with a ``Span``.

Built from Lark's parse tree by the transformer in ``ccost.syntax.parse``; nothing here knows Lark. The tree
keeps what the formatter needs to reproduce the file: the raw spelling of numbers and units, titles,
and the comments (kept apart, by position, in ``File.comments``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ccost.diagnostics import Span


@dataclass(frozen=True, slots=True)
class Comment:
    text: str  # including the leading '#'
    span: Span


# --- expressions -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Number:
    """A number with an optional unit: ``450 GB/s``. ``text`` and ``unit`` are spelled as written."""

    value: float
    text: str
    unit: str | None
    span: Span
    unit_span: Span | None = None


@dataclass(frozen=True, slots=True)
class String:
    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class Bool:
    value: bool
    span: Span


@dataclass(frozen=True, slots=True)
class Ref:
    """``NAME`` or ``NAME.FIELD``."""

    name: str
    field: str | None
    span: Span


@dataclass(frozen=True, slots=True)
class Call:
    func: str
    args: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ListExpr:
    items: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str  # one of + - * /
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class Neg:
    operand: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class Paren:
    """Kept so the formatter can write the parentheses the user wrote."""

    inner: "Expr"
    span: Span


Expr = Union[Number, String, Bool, Ref, Call, ListExpr, BinOp, Neg, Paren]


# --- declarations ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Member:
    name: str
    value: Expr
    span: Span
    name_span: Span


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # link, gpu, cluster, model, plan, sweep, compare, policy, search
    name: str | None  # None only for `policy`
    title: str | None
    extends: str | None
    members: tuple[Member, ...]
    span: Span
    kind_span: Span
    name_span: Span | None = None
    extends_span: Span | None = None


@dataclass(frozen=True, slots=True)
class Import:
    path: str
    span: Span
    path_span: Span


Item = Union[Block, Import]


@dataclass(frozen=True, slots=True)
class File:
    path: str
    items: tuple[Item, ...]
    comments: tuple[Comment, ...] = field(default=())
    span: Span | None = None

    @property
    def blocks(self) -> tuple[Block, ...]:
        return tuple(i for i in self.items if isinstance(i, Block))

    @property
    def imports(self) -> tuple[Import, ...]:
        return tuple(i for i in self.items if isinstance(i, Import))
