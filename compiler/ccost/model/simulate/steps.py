"""Step models: how long one engine step takes, given what is in it (docs/simulation.md, "Step model").

The simulator never prices hardware. It asks a **step model** for the time of each step it schedules,
described by five numbers, each a float or a numpy array (all broadcast together):

==================  ==========================================================================================
``decode_rows``     sequences decoding one token in the step
``decode_context``  Σ over those rows of the KV tokens each attends to (its cache, the new token included)
``prefill_tokens``  prompt tokens computed in the step (every chunk of every prompt in it)
``prefill_pairs``   Σ over the chunks of their causal-attention (query, key) pairs: a chunk of c tokens
                    after s tokens already in the cache has c·s + c·(c + 1)/2
``prefill_seqs``    prompts with a chunk in the step
==================  ==========================================================================================

A step model is any callable ``step(decode_rows, decode_context, prefill_tokens, prefill_pairs,
prefill_seqs) -> seconds`` that works on floats and on arrays; its ``batch_shape`` attribute (``()`` for
one configuration) says how many configurations it prices at once: with ``batch_shape == (K,)`` the
inputs have shape ``(K, ...)`` and row k is priced with configuration k (the analytic screening prices
thousands of fleets in one call). The engine assumes nothing of its form: not linearity, not
monotonicity (a roofline is a max; collectives switch algorithms).

Two implementations:

* ``Roofline``: a small parametric model of ccost's shape (host time + per-sequence time + collectives
  per token + max(memory, FLOPs)), for tests where theory gives answers and for the benchmark;
* ``Table``: multilinear interpolation on a grid of sampled points of an expensive model (ccost's lowered
  step model), over the features the caller chooses, with linear extrapolation past the grid.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

import numpy as np

#: what a table may interpolate over: the five inputs, and two sums of them
FEATURES = ("decode_rows", "decode_context", "prefill_tokens", "prefill_pairs", "prefill_seqs", "tokens", "seqs")


class StepModel(Protocol):
    batch_shape: tuple

    def __call__(self, decode_rows, decode_context, prefill_tokens, prefill_pairs, prefill_seqs): ...


def features(decode_rows, decode_context, prefill_tokens, prefill_pairs, prefill_seqs) -> dict:
    """The named features of a step (``FEATURES``): the five inputs, ``tokens`` = rows + prompt tokens
    (the token rows of the forward pass), ``seqs`` = rows + prompts (the sequences in the step)."""
    return {"decode_rows": decode_rows, "decode_context": decode_context, "prefill_tokens": prefill_tokens,
            "prefill_pairs": prefill_pairs, "prefill_seqs": prefill_seqs,
            "tokens": decode_rows + prefill_tokens, "seqs": decode_rows + prefill_seqs}


def _batched(param, batch_ndim: int, x):
    """``param`` (batch-shaped) made to broadcast against an input of shape batch + extra."""
    if batch_ndim == 0 or np.ndim(param) == 0:
        return param
    extra = np.ndim(x) - batch_ndim
    return np.reshape(param, np.shape(param) + (1,) * max(extra, 0))


@dataclass(frozen=True)
class Roofline:
    """``t = host + per_seq·seqs + comm_token·tokens + max(weights + kv_read·decode_context,
    flop_token·tokens + flop_pair·(decode_context + prefill_pairs))``.

    All in seconds: ``weights`` is reading the weights once (bytes/bandwidth), ``kv_read`` the time to
    read one token of KV cache, ``flop_token`` the FLOP time of one token row (2·params/achieved FLOP/s),
    ``flop_pair`` the FLOP time of one attention (query, key) pair, ``comm_token`` the collectives' time
    per token row, ``host`` per step and ``per_seq`` per sequence in the step. Each may be an array of
    shape ``(K,)``: K configurations at once.

    >>> Roofline(weights=0.01)(8, 8 * 1024, 0, 0, 0)   # memory-bound: the weights
    0.01
    """

    weights: float | np.ndarray = 0.0
    kv_read: float | np.ndarray = 0.0
    flop_token: float | np.ndarray = 0.0
    flop_pair: float | np.ndarray = 0.0
    comm_token: float | np.ndarray = 0.0
    host: float | np.ndarray = 0.0
    per_seq: float | np.ndarray = 0.0
    batch_shape: tuple = field(init=False, default=())

    def __post_init__(self) -> None:
        shapes = {np.shape(getattr(self, f)) for f in ("weights", "kv_read", "flop_token", "flop_pair",
                                                        "comm_token", "host", "per_seq")} - {()}
        if len(shapes) > 1:
            raise ValueError(f"the parameters of a batched Roofline must share one shape; got {sorted(shapes)}")
        object.__setattr__(self, "batch_shape", shapes.pop() if shapes else ())
        params = tuple(getattr(self, f) for f in ("weights", "kv_read", "flop_token", "flop_pair", "comm_token",
                                                  "host", "per_seq"))
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "_scalars", None if self.batch_shape else tuple(float(v) for v in params))

    def __call__(self, decode_rows, decode_context, prefill_tokens, prefill_pairs, prefill_seqs):
        tokens = decode_rows + prefill_tokens
        if not self.batch_shape and isinstance(tokens, (int, float)) and isinstance(decode_context, (int, float)):
            # one configuration, one step (the simulator's single steps): plain floats, no numpy call
            w, kv, ft, fp, ct, h, ps = self._scalars
            memory = w + kv * decode_context
            flops = ft * tokens + fp * (decode_context + prefill_pairs)
            return h + ps * (decode_rows + prefill_seqs) + ct * tokens + (memory if memory > flops else flops)
        nb = len(self.batch_shape)
        if nb:
            x = np.broadcast(decode_rows, decode_context, prefill_tokens, prefill_pairs, prefill_seqs)
            w, kv, ft, fp, ct, h, ps = (_batched(v, nb, x) for v in self._params)
        else:
            w, kv, ft, fp, ct, h, ps = self._scalars
        memory = w + kv * decode_context
        flops = ft * tokens + fp * (decode_context + prefill_pairs)
        return h + ps * (decode_rows + prefill_seqs) + ct * tokens + np.maximum(memory, flops)


@dataclass(frozen=True)
class Table:
    """A step model interpolated on a grid: ``values`` of shape ``batch_shape + (len(g) for g in
    axes.values())``, multilinear between the grid points and linear past its ends, plus ``linear``
    terms (feature → seconds per unit, a float or batch-shaped) added outside the table (e.g. a host
    time per sequence, which the grid then need not span).

    >>> t = Table({"tokens": np.array([1.0, 4096.0])}, np.array([0.010, 0.050]))
    >>> round(t(1, 1000, 2047, 0, 1), 6)     # 2048 tokens: halfway
    0.029995
    """

    axes: Mapping[str, np.ndarray]
    values: np.ndarray
    linear: Mapping[str, float | np.ndarray] = field(default_factory=dict)
    batch_shape: tuple = field(init=False, default=())

    def __post_init__(self) -> None:
        axes = {}
        for name, grid in self.axes.items():
            if name not in FEATURES:
                raise ValueError(f"a table axis must be one of {', '.join(FEATURES)}; got {name!r}")
            g = np.asarray(grid, dtype=float)
            if g.ndim != 1 or len(g) < 2 or not np.all(np.diff(g) > 0):
                raise ValueError(f"table axis {name!r} needs at least two strictly increasing points")
            axes[name] = g
        for name in self.linear:
            if name not in FEATURES:
                raise ValueError(f"a linear term must be one of {', '.join(FEATURES)}; got {name!r}")
        values = np.asarray(self.values, dtype=float)
        grid_shape = tuple(len(g) for g in axes.values())
        if values.shape[values.ndim - len(grid_shape):] != grid_shape or values.ndim < len(grid_shape):
            raise ValueError(f"table values of shape {values.shape} do not end in the grid's {grid_shape}")
        if not np.all(np.isfinite(values)):
            raise ValueError("table values must be finite")
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "batch_shape", values.shape[: values.ndim - len(grid_shape)])
        # the scalar path (one configuration, float inputs: the simulator's single steps) in plain Python
        object.__setattr__(self, "_lists", [g.tolist() for g in axes.values()])
        object.__setattr__(self, "_flat", values.ravel().tolist() if not self.batch_shape else None)
        strides = [int(np.prod(grid_shape[i + 1:])) for i in range(len(grid_shape))]
        object.__setattr__(self, "_strides", strides)

    @staticmethod
    def sample(fn: Callable[..., np.ndarray], axes: Mapping[str, np.ndarray], batch_shape: tuple = (),
               linear: Mapping[str, float | np.ndarray] | None = None) -> "Table":
        """Evaluate ``fn(**{feature: array})`` once on the whole grid (arrays of the grid's shape, with a
        leading ``batch_shape`` the function broadcasts its configurations over) and keep the values."""
        names = list(axes)
        mesh = np.meshgrid(*[np.asarray(axes[n], dtype=float) for n in names], indexing="ij")
        values = np.asarray(fn(**dict(zip(names, mesh))), dtype=float)
        if values.shape != tuple(batch_shape) + mesh[0].shape:
            values = np.broadcast_to(values, tuple(batch_shape) + mesh[0].shape).copy()
        return Table(dict(axes), values, dict(linear or {}))

    def __call__(self, decode_rows, decode_context, prefill_tokens, prefill_pairs, prefill_seqs):
        f = features(decode_rows, decode_context, prefill_tokens, prefill_pairs, prefill_seqs)
        if not self.batch_shape and all(isinstance(v, (int, float)) for v in f.values()):
            return self._scalar(f)
        nb = len(self.batch_shape)
        xs = np.broadcast_arrays(*[np.asarray(f[n], dtype=float) for n in self.axes])
        shape = xs[0].shape
        if nb:
            if shape[:nb] != self.batch_shape:
                raise ValueError(f"inputs of shape {shape} do not start with the table's batch {self.batch_shape}")
            kidx = np.indices(shape)[:nb]
        idx, w = [], []
        for g, x in zip(self.axes.values(), xs):
            i = np.clip(np.searchsorted(g, x, side="right") - 1, 0, len(g) - 2)
            idx.append(i)
            w.append((x - g[i]) / (g[i + 1] - g[i]))
        out = np.zeros(shape)
        for corner in itertools.product((0, 1), repeat=len(idx)):
            weight = np.ones(shape)
            pos = []
            for bit, i, wi in zip(corner, idx, w):
                weight = weight * (wi if bit else 1.0 - wi)
                pos.append(i + bit)
            out += weight * (self.values[tuple(kidx) + tuple(pos)] if nb else self.values[tuple(pos)])
        for name, coef in self.linear.items():
            out = out + _batched(coef, nb, out) * f[name]
        return out

    def _scalar(self, f: dict) -> float:
        pos, w = [], []
        for name, g in zip(self.axes, self._lists):
            x = float(f[name])
            i = min(max(bisect.bisect_right(g, x) - 1, 0), len(g) - 2)
            pos.append(i)
            w.append((x - g[i]) / (g[i + 1] - g[i]))
        total = 0.0
        flat, strides = self._flat, self._strides
        for corner in itertools.product((0, 1), repeat=len(pos)):
            weight, k = 1.0, 0
            for bit, i, wi, s in zip(corner, pos, w, strides):
                weight *= wi if bit else 1.0 - wi
                k += (i + bit) * s
            total += weight * flat[k]
        for name, coef in self.linear.items():
            total += float(coef) * f[name]
        return total
