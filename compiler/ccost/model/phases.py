"""The phases of a plan, one record each: how a phase is priced, recorded and explained.

``PHASES`` pairs each phase's static record (``ccost.schema.PHASE_KINDS``: its name, what it requires and
reads, its default stack, token kind, document section, search support and ``ccost init`` defaults, which
the checker and the schema read too) with the functions of its cost model: decode and prefill are
``ccost.model.lower`` then ``ccost.model.analysis``; a training step is ``ccost.model.training``'s (per micro-batch,
schedules, activations); serve is ``ccost.model.serve``'s, several of ``lower``'s steps combined; online is
``ccost.model.online``'s, an engine simulated with ``lower``'s steps sampled. This module
sits above all of them, so none imports another's phase: evaluate, search, calibrate, economics and the
writers look a phase up here (or, below this layer, in the schema) instead of testing its name.

Like the functions they pick, ``lower`` and ``analyse`` run unchanged on floats, numpy arrays (a search)
and derivation values. A new phase or serving mode is a record in ``ccost.schema.PHASE_KINDS``, a module
with its cost model, and a ``Phase`` here (docs/architecture.md, recipe f).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ccost.model import analysis, online, serve, training
from ccost.model import lower as LW
from ccost import spec as S
from ccost.model.program import Priced, Program
from ccost.schema import PHASES as KINDS
from ccost.schema import PhaseKind


@dataclass(frozen=True)
class Phase:
    """One phase's functions. ``price(plan, policy, derivation)`` → ``program.Priced`` (of a plan that can be
    priced: its record's rules, ``errors``, run with the checker's, ``check.plan.evaluation_errors``);
    ``record(plan, priced)`` → its section of the plan's document (``kind.section``; float mode);
    ``explain(plan, priced)`` → its derivation groups, before cost and power (derivation mode);
    ``lower``/``analyse`` price one program on arrays, what a layout search runs (None: not searchable,
    ``kind.search_refusal`` says why); ``note(section)`` → the review's sentence on its section, and
    ``not_modelled`` the review's paragraph on what its model leaves out; ``checklist(plan, policy, section)``
    its own checklist items (an online plan's SLOs, item 15)."""

    kind: PhaseKind
    price: Callable[[S.Plan, S.Policy, bool], Priced]
    explain: Callable[[S.Plan, Priced], list[tuple[str, list]]]
    lower: Callable[[LW.Static, LW.Inputs], Program] | None = None
    analyse: Callable[[Program], analysis.Metrics] | None = None
    record: Callable[[S.Plan, Priced], dict] | None = None
    note: Callable[[dict], str] | None = None
    not_modelled: tuple[str, str] | None = None
    #: ``checklist(plan, policy, section)`` → the phase's own checklist items, judged on its section
    checklist: Callable[[S.Plan, S.Policy, dict], list[dict]] | None = None

    @property
    def name(self) -> str:
        return self.kind.name


def _one_step(name: str, lower_fn, analyse_fn, explain=None, record=None) -> Phase:
    """A phase whose plan is one step: ``lower.prepare``, its cost model's ``lower`` and ``analyse``; its
    derivation is the step's groups (``analysis.step_groups``) unless ``explain`` says more."""
    def price(plan: S.Plan, policy: S.Policy, derivation: bool = False) -> Priced:
        static, x = LW.prepare(plan, policy, derivation)
        program = lower_fn(static, x)
        return Priced(program, analyse_fn(program))

    def step_groups(plan: S.Plan, priced: Priced) -> list[tuple[str, list]]:
        return analysis.step_groups(priced.program, priced.metrics)

    return Phase(KINDS[name], price, explain or step_groups, lower_fn, analyse_fn, record=record)


#: Every phase's functions, in the order of ``ccost.schema.PHASE_KINDS``.
PHASES: dict[str, Phase] = {p.name: p for p in (
    _one_step("decode", LW.lower, analysis.analyse),
    _one_step("prefill", LW.lower, analysis.analyse),
    _one_step("train", training.lower_train, training.analyse_train, training.explain_groups, training.record),
    Phase(KINDS["serve"], serve.price, serve.explain_groups, record=serve.record, note=serve.review_note,
          not_modelled=serve.NOT_MODELLED),
    Phase(KINDS["online"], online.price, online.explain_groups, record=online.record, note=online.review_note,
          not_modelled=online.NOT_MODELLED, checklist=online.checklist_items),
)}
assert tuple(PHASES) == tuple(KINDS), "every phase of ccost.schema.PHASE_KINDS has its functions here"


def of(plan: S.Plan) -> Phase:
    """The phase of ``plan``."""
    return PHASES[plan.phase]


def lower(static: LW.Static, x: LW.Inputs) -> Program:
    """The collective program and compute terms of one step, by its phase's cost model (``training``'s for
    a training plan, else ``lower``'s)."""
    fn = PHASES[static.phase].lower
    assert fn is not None, f"a {static.phase} plan is not one program (ccost.model.phases.price)"
    return fn(static, x)


def lower_plan(plan: S.Plan, policy: S.Policy, derivation: bool = False) -> Program:
    """``lower.prepare`` + ``lower`` for one checked plan of a one-step phase."""
    static, x = LW.prepare(plan, policy, derivation)
    return lower(static, x)


def analyse(program: Program) -> analysis.Metrics:
    """The metrics of a lowered step, by its phase's cost model (``training.analyse_train`` for a training
    step, else ``analysis.analyse``)."""
    fn = PHASES[program.static.phase].analyse
    assert fn is not None, f"a {program.static.phase} plan is not one program (ccost.model.phases.price)"
    return fn(program)
