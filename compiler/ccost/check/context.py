"""The state one check shares between its passes: what was read, the names, the memos, the diagnostics.

Every pass is a function of a ``Context`` (``ccost.check.PASSES``); the field values and entities are
computed on demand by the later passes and memoised here, so each is computed once whatever order the
blocks reference each other in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ccost import schema as SC
from ccost.diagnostics import Diagnostic, Diagnostics, Span
from ccost.spec import Spec
from ccost.syntax import tree as T

Reader = Callable[[str], str]


@dataclass(eq=False)
class File:
    display: str  # the name in diagnostics and ``sources``
    real: str  # a path that opens the file (``Spec.files``)
    key: str  # identity: the real path with symlinks resolved (a symlinked self-import is a cycle)
    area: str = ""  # the folder its relative imports must stay in: the project root, or std/
    tree: T.File | None = None
    imports: list[str] = field(default_factory=list)  # keys


@dataclass(eq=False)
class Block:
    node: T.Block
    kind: SC.BlockKind | None
    file: File
    name: str | None

    @property
    def where(self) -> Span:
        return self.node.name_span or self.node.kind_span or self.node.span

    @property
    def label(self) -> str:
        return f"{self.node.kind} `{self.name}`" if self.name else self.node.kind


class Bad(Exception):
    """An expression failed; its diagnostic is already in the bag."""


ERR = object()  # a field whose value failed to check
UNSET = object()  # a field neither written nor defaulted


def unparen(e: T.Expr) -> T.Expr:
    while isinstance(e, T.Paren):
        e = e.inner
    return e


@dataclass(eq=False)
class Context:
    """One check of one spec. Passes fill it in order; ``spec`` is the last pass's answer."""

    read: Reader  # path -> text; raises FileNotFoundError, or CcostError (E002)
    path: str  # the spec, as the user named it
    text: str | None  # its text when given (``check_text``), else read through ``read``
    hint_budget: int  # did-you-mean comparisons left (``ccost.check.HINT_BUDGET``)
    # the field evaluator (``fields.value``), bound by the pipeline: expressions read other blocks'
    # fields through it (`NAME.FIELD`) without importing the pass that imports them
    field_value: Callable[[Block, str, Span | None], Any] = None  # type: ignore[assignment]
    diags: Diagnostics = field(default_factory=Diagnostics)
    sources: dict[str, str] = field(default_factory=dict)  # display name -> text, for rendering
    # load
    project: str = ""  # the folder the spec's imports stay inside
    root: File | None = None
    files: dict[str, File] = field(default_factory=dict)  # key -> file, in load order (imports first)
    loading: list[File] = field(default_factory=list)  # the import chain being loaded
    read_bytes: int = 0  # the spec's and its imports' text so far (``MAX_TOTAL_BYTES``)
    # scope
    blocks: list[Block] = field(default_factory=list)
    names: dict[str, Block] = field(default_factory=dict)
    own_names: dict[str, list[str]] = field(default_factory=dict)  # file key -> the names its blocks define
    visible: dict[str, frozenset[str]] = field(default_factory=dict)  # file key -> names in scope
    kind_names: dict[tuple[str, str | None], list[str]] = field(default_factory=dict)  # memo
    bad_blocks: set[int] = field(default_factory=set)  # id(Block) whose extends chain is broken
    members_memo: dict[int, dict[str, tuple[T.Member, Block]]] = field(default_factory=dict)
    misspelled: set[tuple[int, str]] = field(default_factory=set)  # (block, field) an unknown field probably meant
    guessed: dict[tuple[int, str], T.Member] = field(default_factory=dict)  # (block, field) -> that unknown member
    # fields and expressions
    values: dict[tuple[int, str], Any] = field(default_factory=dict)
    active: list[tuple[Block, str]] = field(default_factory=list)  # fields being evaluated (cycles)
    field_ctx: SC.Field | None = None  # the field being evaluated, for hints deep in expressions
    # build
    entities: dict[int, Any] = field(default_factory=dict)
    building: set[int] = field(default_factory=set)
    spec: Spec | None = None

    def add(self, d: Diagnostic) -> None:
        self.diags.add(d)
