"""Lower and analyse a plan of any phase: the one place that picks the cost model by phase.

Decode, prefill and serve steps are ``ccost.lower.lower`` then ``ccost.analysis.analyse``; a training
step (``phase = train``) has its own model, ``ccost.training``, built on both (per micro-batch, schedules,
activations). This module sits above all three, so ``lower`` and ``analysis`` never import ``training``:
every caller that may hold a training plan (evaluate, search, calibrate) goes through here. Like the
functions they pick, these run unchanged on floats, numpy arrays (a search) and derivation values.
"""

from __future__ import annotations

from ccost import analysis, training
from ccost import lower as LW
from ccost import spec as S


def lower(static: LW.Static, x: LW.Inputs) -> LW.Program:
    """The collective program and compute terms of one plan: ``training.lower_train`` for a training
    plan, else ``lower.lower``."""
    return training.lower_train(static, x) if static.train else LW.lower(static, x)


def lower_plan(plan: S.Plan, policy: S.Policy, derivation: bool = False) -> LW.Program:
    """``lower.prepare`` + ``lower`` for one checked plan."""
    static, x = LW.prepare(plan, policy, derivation)
    return lower(static, x)


def analyse(program: LW.Program) -> analysis.Metrics:
    """The metrics of a lowered plan: ``training.analyse_train`` for a training step, else
    ``analysis.analyse``."""
    return training.analyse_train(program) if program.train is not None else analysis.analyse(program)
