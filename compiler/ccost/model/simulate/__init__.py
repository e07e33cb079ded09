"""Serving simulation: demand, continuous batching, disaggregated prefill/decode, and the analytic
screening that makes a capacity search fast (docs/simulation.md).

Pure: no file, clock, environment or network access; numpy only. Nothing here prices hardware: the time
of an engine step comes from a caller's step model (``steps``), which the integration builds from ccost's
lowered step model.

    >>> from ccost.model.simulate import Arrivals, Demand, Engine, Length, Roofline, Slo, simulate
    >>> demand = Demand(Arrivals.poisson(4.0), Length.fixed(1024), Length.fixed(256))
    >>> run = simulate(demand, Engine(max_seqs=64, max_batched_tokens=2048),
    ...                Roofline(weights=0.012, kv_read=2e-7, flop_token=2.5e-5), requests=300)
    >>> run.meets(Slo(ttft=1.0, tpot=0.05))
    True
"""

from ccost.model.simulate.demand import (
    Arrivals,
    Demand,
    DemandError,
    Length,
    Requests,
    Trace,
    parse_trace,
)
from ccost.model.simulate.engine import Engine, EngineError, EngineRun, run_engine
from ccost.model.simulate.run import (
    PERCENTILES,
    Pool,
    RateSearch,
    Run,
    Slo,
    highest_rate,
    simulate,
    simulate_disagg,
    sustainable_rate,
)
from ccost.model.simulate.screen import LengthSample, Screen, screen, screen_disagg, screen_rate, screen_rate_sections
from ccost.model.simulate.steps import FEATURES, Roofline, StepModel, Table

__all__ = [
    "Arrivals", "Demand", "DemandError", "Length", "Requests", "Trace", "parse_trace",
    "Engine", "EngineError", "EngineRun", "run_engine",
    "PERCENTILES", "Pool", "RateSearch", "Run", "Slo", "highest_rate", "simulate", "simulate_disagg",
    "sustainable_rate",
    "LengthSample", "Screen", "screen", "screen_disagg", "screen_rate", "screen_rate_sections",
    "FEATURES", "Roofline", "StepModel", "Table",
]
