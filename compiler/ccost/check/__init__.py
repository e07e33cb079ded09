"""Resolve and check a .ccost spec: syntax trees in, an immutable ``ccost.spec.Spec`` out.

The check is a list of passes (``PASSES``), each a function of one shared ``Context`` (``context.py``):

1. **load** (``load.py``) — parse the spec and, depth first, every file it imports (relative to the
   importing file, or ``std/...`` from the bundled library); imports stay inside the project; cycles and
   missing files are reported with the chain.
2. **declare**, **visibility**, **extends** (``scope.py``) — one table of names for the spec and its
   imports: duplicates (E102), keywords used as names (E110), unknown fields with a did-you-mean (E103),
   more than one policy per file (E109); which names each file sees; every ``extends`` chain (E107).
3. **build** (``build.py``) — a frozen entity for every block, then the ``Spec``. It asks for each
   field's value, which is computed on demand and once (``fields.py``): expressions are evaluated on
   ``(SI float, Dim)`` pairs (``expressions.py``), ``NAME.FIELD`` reads another block's field (written,
   inherited or defaulted), and the value is checked against the schema by the checker of its field
   type: dimension, whole numbers, ranges, enums, references. The rules that need no cost model
   (``plan.py``: degrees against the cluster, the training and serving fields, a link's curve) run on
   each entity. Did-you-mean hints come from ``hints.py``.

Every problem of the spec and its imports is collected; the caller gets them all at once (``CheckResult``,
or one ``CcostError`` from ``load_spec``). The schema (``ccost.schema``) drives the passes, so a new block
kind needs no change here.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable

from ccost.check import build, fields, load, scope
from ccost.check.build import MAX_SWEEP_POINTS
from ccost.check.context import Context, Reader
from ccost.check.hints import FIELD_ALIASES
from ccost.check.load import MAX_IMPORT_DEPTH, _default_reader, project_root

# kept importable from here: tests replace a rule, and find the bundled library
from ccost.check.build import _VALIDATORS as _VALIDATORS
from ccost.check.load import _std_dir as _std_dir
from ccost.diagnostics import CcostError, Diagnostic, Span, error
from ccost.spec import Spec, Stack

__all__ = ["FIELD_ALIASES", "HINT_BUDGET", "MAX_IMPORT_DEPTH", "MAX_SWEEP_POINTS", "PASSES", "CheckResult",
           "Reader", "check_file", "check_text", "default_stacks", "load_spec", "project_root"]

#: Did-you-mean searches compare a misspelt name with every candidate; the checker stops offering them
#: after this many comparisons in one run, so 20,000 unknown names cost time linear in their number.
HINT_BUDGET = 200_000

#: The passes, in order. Each takes the context the previous ones filled in; fields, expressions and
#: entities are computed on demand by ``build_spec`` and memoised on the context.
PASSES: tuple[Callable[[Context], None], ...] = (
    load.load,                 # the spec and its imports, parsed     -> ctx.files, ctx.sources
    scope.declare,             # one table of names; fields by name   -> ctx.blocks, ctx.names
    scope.compute_visibility,  # the names each file sees             -> ctx.visible
    scope.resolve_extends,     # every extends chain, once            -> ctx.bad_blocks
    build.build_spec,          # values, entities, rules (plan.py)    -> ctx.spec
)


@dataclass(frozen=True)
class CheckResult:
    """What ``check_file``/``check_text`` return: the spec (None when there are errors), every diagnostic
    (errors and warnings, sorted by place) and the text of every file read, for rendering."""

    spec: Spec | None
    diagnostics: list[Diagnostic]
    sources: dict[str, str]

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.is_error]

    @property
    def ok(self) -> bool:
        return self.spec is not None and not self.errors


@contextmanager
def _no_gc_pauses():
    """Python's cyclic GC rescans every live object each time enough new ones pile up; a 20,000-block spec
    builds hundreds of thousands of small acyclic ones (tokens, nodes, spans), so the scans made checking
    grow faster than the spec. Paused while one spec is checked (its few cycles are freed afterwards)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def check_file(path: str, reader: Reader | None = None) -> CheckResult:
    """Check the spec at ``path`` and everything it imports.

    ``reader(path) -> str`` reads a file (default: the working tree); it raises ``FileNotFoundError`` for a
    missing file and ``CcostError`` (E002) for one that cannot be read. ``ccost diff`` passes a reader
    that answers from a git revision.
    """
    with _no_gc_pauses():
        return _run(path, None, reader)


def check_text(text: str, path: str = "<text>", reader: Reader | None = None) -> CheckResult:
    """Check spec text as if it were the file ``path`` (imports are resolved relative to it)."""
    with _no_gc_pauses():
        return _run(path, text, reader)


def load_spec(path: str, reader: Reader | None = None) -> tuple[Spec, list[Diagnostic]]:
    """The checked spec and its warnings; raises ``CcostError`` with every error (``.sources`` set, so the
    CLI can show the source lines).

    >>> spec, warnings = load_spec("specs/llama3-70b-decode.ccost")   # doctest: +SKIP
    >>> spec.plans["tp8"].gpus                                         # doctest: +SKIP
    8
    """
    result = check_file(path, reader)
    if result.spec is None or result.errors:
        exc = CcostError(result.diagnostics)
        exc.sources = result.sources  # type: ignore[attr-defined]
        raise exc
    return result.spec, result.warnings


@functools.cache
def default_stacks() -> Mapping[str, Stack]:
    """The bundled stack profile of every phase (its record's ``default_stack``, ``ccost.schema``), from
    ``std/stacks.ccost``, read and checked once per process: the checker gives it to a plan that names no
    stack (``Plan.stack``, ``Plan.stack_defaults``), so the model never reads a file. Without the bundled
    library (an installation error), the ideal profile under the default's name."""
    import os

    from ccost.schema import PHASE_KINDS

    found: Mapping[str, Stack] = {}
    folder = _std_dir()
    if folder is not None:
        found = load_spec(os.path.join(folder, "stacks.ccost"))[0].stacks
    missing = "built-in ideal profile (std/stacks.ccost not found)"
    by_name = {k.default_stack: found.get(k.default_stack) or Stack(k.default_stack, None, None, source=missing)
               for k in PHASE_KINDS}
    return MappingProxyType({k.name: by_name[k.default_stack] for k in PHASE_KINDS})


def _run(path: str, text: str | None, reader: Reader | None) -> CheckResult:
    ctx = Context(read=reader or _default_reader, path=path, text=text, hint_budget=HINT_BUDGET)
    ctx.field_value = functools.partial(fields.value, ctx)
    try:
        for run_pass in PASSES:
            run_pass(ctx)
    except RecursionError:  # the parser bounds nesting; this is the last line of defence
        ctx.add(error("E006", "an expression or a chain of references is nested too deeply",
                      Span.point(path, 1, 1), help="split it into smaller parts"))
        ctx.spec = None
    diags = ctx.diags.sorted()
    spec = None if any(d.is_error for d in diags) else ctx.spec
    return CheckResult(spec, diags, dict(ctx.sources))
