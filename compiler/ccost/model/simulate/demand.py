"""Demand: when requests arrive and how long they are (docs/simulation.md, "Demand").

* ``Arrivals``: a Poisson process at a mean rate, a renewal process with gamma inter-arrival times of a
  given coefficient of variation (CV = 1 is Poisson; above 1 is burstier), N requests all at t = 0
  (``burst``), or N clients in a closed loop that all start at t = 0 and each send their next request
  when the previous one ends (``closed``: vLLM's serving benchmark with ``--max-concurrency N``).
* ``Length``: a distribution of token counts: ``fixed``; ``uniform`` over [mean·(1 − r), mean·(1 + r)]
  (vLLM's random dataset, ``--random-range-ratio r``); ``lognormal`` fitted to a mean and a p90 or a
  CV, rounded and clipped to [1, max].
* ``Trace``: rows of (input tokens, output tokens), from ``parse_trace`` (CSV, JSONL or JSON).
* ``Demand``: arrivals + lengths (or a trace) + a prefix-cache hit share; ``requests(n, seed)`` draws
  the requests of a run.

Everything is seeded: one ``numpy.random.SeedSequence(seed)`` spawns one stream for arrival times and
one for lengths, so a run at another rate (or with other lengths) keeps the other stream's draws, and
arrival times at rate r are the unit-rate times divided by r (common random numbers: a search over the
rate compares like with like).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from ccost.traces import (  # noqa: F401  (re-exported: the simulator's names for them)
    ARRAY_KEYS,
    INPUT_NAMES,
    MAX_TOKENS,
    MAX_TRACE_BYTES,
    MAX_TRACE_ROWS,
    OUTPUT_NAMES,
    Trace,
    parse_trace,
)

ARRIVAL_KINDS = ("poisson", "gamma", "burst", "closed")
LENGTH_KINDS = ("fixed", "uniform", "lognormal")
ROUTINGS = ("round_robin", "random")

#: Φ⁻¹(0.9): the p90 of a standard normal
Z90 = NormalDist().inv_cdf(0.9)


class DemandError(ValueError):
    """A demand that cannot be simulated; the message names the value and the fix."""


# ---------------------------------------------------------------------------------------------------
# Arrivals


@dataclass(frozen=True)
class Arrivals:
    """When requests arrive. Build with ``poisson``, ``gamma``, ``burst`` or ``closed``.

    >>> Arrivals.poisson(8.0).mean_rate
    8.0
    """

    kind: str
    rate: float | None = None  # requests/s (poisson, gamma)
    cv: float = 1.0  # gamma: coefficient of variation of the inter-arrival times
    clients: int | None = None  # burst: requests at t = 0; closed: clients in the loop

    def __post_init__(self) -> None:
        if self.kind not in ARRIVAL_KINDS:
            raise DemandError(f"arrival process {self.kind!r} is not one of {', '.join(ARRIVAL_KINDS)}")
        if self.kind in ("poisson", "gamma"):
            if self.rate is None or not (self.rate > 0 and math.isfinite(self.rate)):
                raise DemandError(f"an arrival rate must be a positive number of requests/s; got {self.rate!r}")
            if not (self.cv > 0 and math.isfinite(self.cv)):
                raise DemandError(f"the CV of inter-arrival times must be positive; got {self.cv!r}")
        else:
            if self.clients is None or int(self.clients) != self.clients or self.clients < 1:
                raise DemandError(f"{self.kind}: the number of clients must be a whole number ≥ 1; got "
                                  f"{self.clients!r}")

    @staticmethod
    def poisson(rate: float) -> "Arrivals":
        """Poisson arrivals: exponential inter-arrival times of mean 1/rate."""
        return Arrivals("poisson", float(rate), 1.0)

    @staticmethod
    def gamma(rate: float, cv: float) -> "Arrivals":
        """A renewal process with gamma inter-arrival times of mean 1/rate and coefficient of variation
        ``cv`` (shape 1/cv²): cv = 1 is Poisson, cv > 1 bursty, cv < 1 smoother than Poisson."""
        return Arrivals("poisson" if cv == 1 else "gamma", float(rate), float(cv))

    @staticmethod
    def burst(n: int) -> "Arrivals":
        """``n`` requests, all at t = 0, and no others (the requests after the n-th never arrive)."""
        return Arrivals("burst", clients=int(n))

    @staticmethod
    def closed(clients: int) -> "Arrivals":
        """``clients`` clients that all send a request at t = 0 and each send the next one the moment the
        previous one ends (no think time): a closed loop at a fixed concurrency."""
        return Arrivals("closed", clients=int(clients))

    @property
    def open(self) -> bool:
        """Arrival times known in advance (everything but the closed loop)."""
        return self.kind != "closed"

    @property
    def mean_rate(self) -> float | None:
        """Requests/s of an open process with a rate; None for a burst or a closed loop."""
        return self.rate if self.kind in ("poisson", "gamma") else None

    @property
    def scv(self) -> float:
        """Squared coefficient of variation of the inter-arrival times (1 for Poisson)."""
        return self.cv ** 2 if self.kind in ("poisson", "gamma") else 0.0

    def at_rate(self, rate: float) -> "Arrivals":
        """The same process at another mean rate (the CV kept)."""
        if self.kind not in ("poisson", "gamma"):
            raise DemandError(f"a {self.kind} has no rate to change")
        return replace(self, rate=float(rate))

    def split(self, n: int, routing: str = "round_robin") -> "Arrivals":
        """The arrivals one of ``n`` replicas sees when a router spreads these over them.

        Round robin sends every n-th request to a replica: with gamma inter-arrival times of shape k the
        replica's are sums of n of them, gamma of shape n·k: the same family at rate/n with CV/√n (exact).
        Random routing thins the process: Poisson stays Poisson at rate/n (exact); a gamma process becomes
        a renewal process with squared CV 1 + (cv² − 1)/n (the thinning formula), taken here as gamma
        (an approximation). A burst or a closed loop of N is split into ⌈N/n⌉ (the busiest replica).
        """
        if routing not in ROUTINGS:
            raise DemandError(f"routing {routing!r} is not one of {', '.join(ROUTINGS)}")
        if int(n) != n or n < 1:
            raise DemandError(f"replicas must be a whole number ≥ 1; got {n!r}")
        if n == 1:
            return self
        if self.kind in ("burst", "closed"):
            return replace(self, clients=-(-self.clients // n))
        if routing == "round_robin":
            return Arrivals.gamma(self.rate / n, self.cv / math.sqrt(n))
        return Arrivals.gamma(self.rate / n, math.sqrt(1 + (self.cv ** 2 - 1) / n))

    def unit_gaps(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` inter-arrival times of the process at rate 1 (mean 1)."""
        k = 1.0 / self.scv
        return rng.standard_gamma(k, n) / k

    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Arrival times of ``n`` requests (open processes): cumulative gaps / rate; a burst's are 0."""
        if self.kind == "burst":
            return np.zeros(n)
        if self.kind == "closed":
            raise DemandError("a closed loop's arrival times come from the run, not in advance")
        return np.cumsum(self.unit_gaps(n, rng)) / self.rate


# ---------------------------------------------------------------------------------------------------
# Lengths


@dataclass(frozen=True)
class Length:
    """A distribution of token counts (whole numbers ≥ 1). Build with ``fixed``, ``uniform`` or
    ``lognormal``.

    >>> Length.fixed(1024).mean
    1024.0
    """

    kind: str
    value: float  # fixed: the count; uniform and lognormal: the mean asked for
    range_ratio: float = 0.0  # uniform
    sigma: float = 0.0  # lognormal: σ of ln(tokens)
    max: int = MAX_TOKENS  # lognormal and uniform: draws are clipped to [1, max]

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise DemandError(f"length distribution {self.kind!r} is not one of {', '.join(LENGTH_KINDS)}")
        if not (1 <= self.value <= MAX_TOKENS):
            raise DemandError(f"a token count must be between 1 and {MAX_TOKENS:,}; got {self.value!r}")
        if not (1 <= self.max <= MAX_TOKENS):
            raise DemandError(f"the largest token count must be between 1 and {MAX_TOKENS:,}; got {self.max!r}")

    @staticmethod
    def fixed(n: int) -> "Length":
        if int(n) != n:
            raise DemandError(f"a fixed token count must be a whole number; got {n!r}")
        return Length("fixed", float(n), max=int(n))

    @staticmethod
    def uniform(mean: float, range_ratio: float, max: int | None = None) -> "Length":
        """Whole numbers uniform on [⌊mean·(1 − r)⌋, ⌈mean·(1 + r)⌉] (at least 1): vLLM's random dataset
        with ``--random-input-len mean --random-range-ratio r``."""
        if not (0 <= range_ratio < 1):
            raise DemandError(f"range_ratio must be in [0, 1) (vLLM's --random-range-ratio); got {range_ratio!r}")
        return Length("uniform", float(mean), range_ratio=float(range_ratio), max=int(max or MAX_TOKENS))

    @staticmethod
    def lognormal(mean: float, *, p90: float | None = None, cv: float | None = None,
                  max: int | None = None) -> "Length":
        """A lognormal of the given mean and either p90 or CV (σ/mean), rounded to whole tokens and
        clipped to [1, max] (the clipping moves the mean a little; it is not re-fitted).

        From the CV: σ² = ln(1 + cv²). From the p90 q with mean m: ln q − ln m = z·σ − σ²/2 with
        z = Φ⁻¹(0.9), whose smaller root σ = z − √(z² − 2·ln(q/m)) is taken (the less skewed of the two
        lognormals with that mean and p90); a root exists only for m < q ≤ m·e^{z²/2} ≈ 2.27·m.
        """
        if (p90 is None) == (cv is None):
            raise DemandError("a lognormal length needs its spread: give p90 or cv (one of them)")
        if not (mean >= 1 and math.isfinite(mean)):
            raise DemandError(f"a mean token count must be at least 1; got {mean!r}")
        if cv is not None:
            if not (cv > 0 and math.isfinite(cv)):
                raise DemandError(f"the CV of a length must be positive; got {cv!r}")
            sigma = math.sqrt(math.log1p(cv * cv))
        else:
            ratio = p90 / mean
            top = math.exp(Z90 * Z90 / 2)
            if not (1 < ratio <= top):
                raise DemandError(f"no lognormal has mean {mean:g} and p90 {p90:g}: the p90 must be above the "
                                  f"mean and at most {top:.2f}× it (give a cv for a wider spread)")
            sigma = Z90 - math.sqrt(Z90 * Z90 - 2 * math.log(ratio))
        return Length("lognormal", float(mean), sigma=sigma, max=int(max or MAX_TOKENS))

    @property
    def mean(self) -> float:
        """The mean asked for (before rounding and clipping)."""
        return self.value

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` token counts (int64)."""
        if self.kind == "fixed":
            return np.full(n, int(self.value), dtype=np.int64)
        if self.kind == "uniform":
            lo = max(1, math.floor(self.value * (1 - self.range_ratio)))
            hi = max(lo, math.ceil(self.value * (1 + self.range_ratio)))
            return np.minimum(rng.integers(lo, hi + 1, n), self.max).astype(np.int64)
        mu = math.log(self.value) - self.sigma ** 2 / 2
        x = np.rint(np.exp(mu + self.sigma * rng.standard_normal(n)))
        return np.clip(x, 1, self.max).astype(np.int64)


# ---------------------------------------------------------------------------------------------------
# Traces

@dataclass(frozen=True)
class Requests:
    """The requests of one run, in arrival order (for a closed loop, in the order clients send them).

    ``arrival`` is NaN for the requests of a closed loop that are sent when an earlier one ends.
    ``cached`` is the prompt's prefix-cache hit: tokens whose KV cache needs no prefill.
    """

    arrival: np.ndarray  # s
    input: np.ndarray  # prompt tokens (int64)
    output: np.ndarray  # output tokens (int64, ≥ 1)
    cached: np.ndarray  # prompt tokens found in the prefix cache (int64, < input)
    clients: int | None = None  # closed loop: the number of clients

    def __len__(self) -> int:
        return len(self.input)


@dataclass(frozen=True)
class Demand:
    """What the service must carry: arrivals, request lengths (two distributions or a trace) and the
    share of each prompt found in the prefix cache.

    >>> d = Demand(Arrivals.poisson(4.0), Length.fixed(1024), Length.fixed(256))
    >>> r = d.requests(3, seed=1); (r.input.tolist(), r.output.tolist())
    ([1024, 1024, 1024], [256, 256, 256])
    """

    arrivals: Arrivals
    input: Length | None = None
    output: Length | None = None
    trace: Trace | None = None
    prefix_hit: float = 0.0  # share of each prompt needing no prefill (⌊h·I⌋ tokens; at least 1 is computed)
    peak_rate: float | None = None  # requests/s at the peak (informational: at_rate(peak_rate) simulates it)

    def __post_init__(self) -> None:
        if self.trace is None and (self.input is None or self.output is None):
            raise DemandError("a demand needs request lengths: input and output distributions, or a trace")
        if self.trace is not None and (self.input is not None or self.output is not None):
            raise DemandError("a demand takes its lengths from a trace or from two distributions, not both")
        if not (0 <= self.prefix_hit < 1):
            raise DemandError(f"the prefix-cache hit share must be in [0, 1); got {self.prefix_hit!r}")
        if self.peak_rate is not None and not (self.peak_rate > 0 and math.isfinite(self.peak_rate)):
            raise DemandError(f"a peak rate must be a positive number of requests/s; got {self.peak_rate!r}")

    def at_rate(self, rate: float) -> "Demand":
        """The same demand at another mean arrival rate."""
        return replace(self, arrivals=self.arrivals.at_rate(rate))

    def per_replica(self, replicas: int, routing: str = "round_robin") -> "Demand":
        """The demand one of ``replicas`` replicas serves (``Arrivals.split``)."""
        return replace(self, arrivals=self.arrivals.split(replicas, routing))

    def lengths(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` (input, output) pairs: drawn from the distributions, or the trace's rows in a random
        order (each row once per pass through the trace, passes repeated as needed)."""
        if self.trace is not None:
            m = len(self.trace)
            idx = np.concatenate([rng.permutation(m) for _ in range(-(-n // m))])[:n]
            return self.trace.inputs[idx], self.trace.outputs[idx]
        return self.input.sample(n, rng), self.output.sample(n, rng)

    def cached(self, inputs: np.ndarray) -> np.ndarray:
        """Prefix-cache hits: ⌊h·I⌋ tokens, at most I − 1 (an engine always computes the last prompt token)."""
        if self.prefix_hit == 0:
            return np.zeros_like(inputs)
        return np.minimum(np.floor(self.prefix_hit * inputs).astype(np.int64), inputs - 1)

    def requests(self, n: int, seed: int = 0) -> Requests:
        """The ``n`` requests of a run (seeded; see the module docstring)."""
        if int(n) != n or n < 1:
            raise DemandError(f"a run needs at least one request; got {n!r}")
        s_arr, s_len = np.random.SeedSequence(seed).spawn(2)
        ins, outs = self.lengths(n, np.random.default_rng(s_len))
        a = self.arrivals
        if a.kind == "closed":
            arrival = np.full(n, np.nan)
            arrival[: a.clients] = 0.0
        elif a.kind == "burst":
            arrival = np.full(n, np.nan)
            arrival[: a.clients] = 0.0
        else:
            arrival = a.times(n, np.random.default_rng(s_arr))
        return Requests(arrival, ins.astype(np.int64), outs.astype(np.int64), self.cached(ins),
                        a.clients if a.kind == "closed" else None)

    def length_points(self, m: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``m`` (input, output) pairs standing for the length distribution in the analytic screening:
        the pairs themselves when lengths are fixed (one pair); else ``m`` draws from the same stream as
        ``requests`` (a trace's rows, or the distributions)."""
        if self.trace is None and self.input.kind == "fixed" and self.output.kind == "fixed":
            return (np.array([int(self.input.value)], np.int64), np.array([int(self.output.value)], np.int64))
        _, s_len = np.random.SeedSequence(seed).spawn(2)
        return self.lengths(m, np.random.default_rng(s_len))
