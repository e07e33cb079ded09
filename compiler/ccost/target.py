"""Training targets (issue 30): how long a run takes, how much of its time trains, and what it costs.

A training plan prices one optimizer step (``ccost.training``). A plan with a *target* (``train_tokens``,
or ``train_steps``) also asks how long the whole run takes on its fleet, with the interruptions that
dominate a large run's calendar, and what it costs. One set of formulas, written once over numbers, runs in
the three modes of ``ccost.derive``: floats (``ccost eval``, the review), numpy arrays (a search ranks
layouts by time to train or by its cost) and derivation values (``ccost explain``), like ``ccost.costs``
and ``ccost.economics``. The model, in words (docs/training-target.md works an example by hand):

* **Steps.** ``n = ⌈D / tokens_step⌉`` for D tokens to train, tokens_step = dp·ep·B·S (the global batch
  in tokens: ``global_batch`` sequences of S tokens), or the plan's ``train_steps``. Without failures
  the run takes ``T_ideal = n·T_step``.
* **Checkpoint.** The state a restart needs: the weights and the optimizer state (master weights, Adam's
  m and v), ``C = W + N_params·b_opt`` — the same inputs as the memory terms ``mem_weights`` and
  ``mem_optimizer``. The layout decides which GPUs write which bytes (ZeRO and FSDP spread the optimizer
  state over the data-parallel ranks), not how many: every byte is written once. Writing it blocks
  training for ``δ = C / BW_ckpt``, ``BW_ckpt`` the storage's write bandwidth (the cluster's
  ``checkpoint_bandwidth``; without it goodput is not modelled, W309).
* **Failures.** Interruptions arrive at ``λ`` per GPU-hour (the cluster's ``failure_rate``; by default
  the Llama 3 paper's 419 unexpected interruptions in 54 days on 16,384 H100), independently, so the job
  of N GPUs is interrupted every ``M = 1/(N·λ)`` on average (Poisson). Each costs the restart time ``R``
  (the cluster's ``restart_time``) and the work since the last checkpoint.
* **Checkpoint interval.** J. T. Daly, "A higher order estimate of the optimum checkpoint interval for
  restart dumps", Future Generation Computer Systems 22 (2006): with ξ = δ/(2M),
  ``τ = √(2δM)·(1 + √ξ/3 + ξ/9) − δ`` for δ < 2M, else ``τ = M`` (the plan's ``checkpoint_interval``
  overrides it). Young's first-order ``τ_Young = √(2δM)`` (J. W. Young, CACM 17, 1974) is shown beside
  it. Why Daly's: Young's form assumes M ≫ δ, R and ignores failures during a checkpoint or a restart; at
  16k GPUs M is about three hours, where the higher-order terms and the restart start to count (Daly's
  worked examples: M = 24 h, δ = 5 min gives τ = 117 min; M = 6 h, 57 min; M = 15 min, 9.1 min).
* **Goodput.** Daly's expected wall-clock time of T_s of useful work, checkpoints every τ, exponential
  failures (a failure during a restart or a checkpoint counts too): ``T_w = M·e^(R/M)·(e^((τ+δ)/M) − 1)·T_s/τ``,
  so the share of the run's time that trains the model is
  ``G = τ / (M·e^(R/M)·(e^((τ+δ)/M) − 1))`` (first order: 1 − δ/τ − (τ/2 + R)/M).
* **Time and money.** ``T_train = T_ideal / G``; ``GPU-days = N·T_train / 1 d``; energy
  ``E = P·T_train`` and cost ``C_train = C_rate·T_train`` with the plan's facility power P and cost rate
  (``ccost.economics``: the N GPUs are paid and powered for the whole run, restarts included);
  ``T_train / M`` interruptions are expected on the way.

What the model leaves out (the review says so): checkpoints written asynchronously (the blocking part is
then the copy to host memory: raise ``checkpoint_bandwidth`` to what blocks), failures that are not
independent, a slower pace after a restart (warm-up, data-loader state), stragglers, and planned
maintenance (the default rate counts unexpected interruptions only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ccost import derive, units
from ccost import spec as S
from ccost.derive import ceil, exp, named, sqrt, where

Num = Any

DAY_S = 86400.0
HOUR_S = 3600.0


# ---------------------------------------------------------------------------------------------------
# The formulas, one function each: they run on floats, numpy arrays and derivation values alike.

def checkpoint_bytes(W: Num, params: Num, b_opt: Num) -> Num:
    """C = W + N_params·b_opt: the weights and the optimizer state, each byte written once."""
    return named("C_ckpt", W + params * b_opt, "checkpoint: weights + optimizer state (master weights, Adam m "
                 "and v), the inputs of mem_weights and mem_optimizer, each byte once: W + N_params·b_opt")


def checkpoint_time(C: Num, BW: Num) -> Num:
    """δ = C / BW_ckpt: training waits while the checkpoint is written."""
    return named("δ", C / BW, "checkpoint write time, training blocked: C_ckpt / BW_ckpt")


def mtbf(N: Num, lam: Num) -> Num:
    """M = 1/(N·λ): the mean time between interruptions of a job on N GPUs."""
    return named("M", 1 / (N * lam), "mean time between interruptions of the job: 1/(N·λ)")


def young_interval(delta: Num, M: Num) -> Num:
    """τ_Young = √(2δM), Young (1974): the first-order optimum."""
    return named("τ_Young", sqrt(2 * delta * M), "Young's first-order checkpoint interval √(2·δ·M), for "
                 "comparison")


def daly_interval(delta: Num, M: Num) -> Num:
    """Daly (2006): τ = √(2δM)·(1 + √ξ/3 + ξ/9) − δ with ξ = δ/(2M), for δ < 2M; else M."""
    xi = named("ξ", delta / (2 * M), "Daly's ξ = δ/(2·M)")
    return named("τ_Daly", where(delta < 2 * M, sqrt(2 * delta * M) * (1 + sqrt(xi) / 3 + xi / 9) - delta, M),
                 "Daly's higher-order optimum interval: √(2·δ·M)·(1 + √ξ/3 + ξ/9) − δ when δ < 2·M, else M")


def goodput(tau: Num, delta: Num, R: Num, M: Num) -> Num:
    """G = τ / (M·e^(R/M)·(e^((τ+δ)/M) − 1)): useful time over wall-clock time (Daly 2006)."""
    return named("G", tau / (M * exp(R / M) * (exp((tau + delta) / M) - 1)),
                 "goodput, the share of the run's time that trains the model (Daly 2006): "
                 "τ / (M·e^(R/M)·(e^((τ+δ)/M) − 1))", style="percent")


# ---------------------------------------------------------------------------------------------------
# A plan's target

@dataclass(frozen=True)
class Target:
    """The time and money of a plan's training target, in the mode of its inputs. ``modelled``: goodput is
    modelled (the cluster gives ``checkpoint_bandwidth``); otherwise G = 1 and the failure terms are None.
    ``energy`` and ``cost`` are None where the plan has no power or price."""

    modelled: bool
    steps: Num
    tokens_step: Num
    T_ideal: Num
    C_ckpt: Num
    delta: Num
    lam: Num
    M: Num
    R: Num
    tau_young: Num
    tau: Num
    goodput: Num
    T_train: Num
    gpu_days: Num
    failures: Num
    checkpoints: Num
    energy: Num
    cost: Num
    deadline: Num

    @property
    def values(self) -> list:
        """Every number, for ``derive.steps`` (the derivation lists the ones that exist)."""
        return [v for v in (self.steps, self.T_ideal, self.C_ckpt, self.delta, self.M, self.tau_young, self.tau,
                            self.goodput, self.T_train, self.gpu_days, self.failures, self.checkpoints,
                            self.energy, self.cost) if v is not None]


def _leaf(derivation: bool, name: str, value, dim, desc: str, source: str | None, style=None):
    return derive.leaf(name, value, dim, desc, source, style=style) if derivation else value


def target(plan: S.Plan, *, N: Num, T_step: Num, tokens_step: Num, W: Num, params: Num, b_opt: Num,
           power: Num = None, cost_rate: Num = None, derivation: bool = False) -> Target:
    """The plan's time to train, goodput, GPU-days, energy and cost from its step: ``N`` GPUs, ``T_step``
    per step, ``tokens_step`` tokens per step, the checkpoint's inputs ``W`` (weight bytes), ``params`` and
    ``b_opt`` (optimizer bytes per parameter), and ``power`` (W) and ``cost_rate`` (USD/s) from
    ``ccost.economics`` when known. All in one mode; ``derivation`` makes the plan's and cluster's fields
    leaves with their sources."""
    D = derivation
    cluster = plan.cluster
    assert cluster is not None and plan.has_target
    where_p, where_c = f"plan {plan.name}", f"cluster {cluster.name}"
    if plan.train_steps is not None:
        steps = _leaf(D, "n_steps", float(plan.train_steps), units.DIMENSIONLESS, "optimizer steps to train",
                      f"{where_p}: train_steps")
    else:
        tokens = _leaf(D, "D", float(plan.train_tokens), units.DIMENSIONLESS, "tokens to train on",
                       f"{where_p}: train_tokens")
        steps = named("n_steps", ceil(tokens / tokens_step), "optimizer steps: ⌈D / tokens_step⌉")
    T_ideal = named("T_ideal", steps * T_step, "training time without interruptions: n_steps·T_step")
    deadline = (_leaf(D, "T_deadline", plan.deadline, units.TIME, "the time the target must be trained in",
                      f"{where_p}: deadline") if plan.deadline is not None else None)
    C = delta = M = tau_young = tau = failures = checkpoints = None
    lam = _leaf(D, "λ", cluster.failure_rate, units.RATE, "job interruptions per GPU and second",
                f"{where_c}: failure_rate" + ("" if "failure_rate" in cluster.spans else
                                              " (default: the Llama 3 paper, 419 in 54 days on 16,384 H100)"))
    R = _leaf(D, "R", cluster.restart_time, units.TIME, "from an interruption to training again",
              f"{where_c}: restart_time" + ("" if "restart_time" in cluster.spans else " (default: 10 min, an "
                                            "assumption)"))
    modelled = cluster.checkpoint_bandwidth is not None
    if modelled:
        BW = _leaf(D, "BW_ckpt", cluster.checkpoint_bandwidth, units.BANDWIDTH, "write bandwidth of the "
                   "checkpoint storage", f"{where_c}: checkpoint_bandwidth")
        C = checkpoint_bytes(W, params, b_opt)
        delta = checkpoint_time(C, BW)
        M = mtbf(N, lam)
        tau_young = young_interval(delta, M)
        if plan.checkpoint_interval is not None:
            tau = _leaf(D, "τ", plan.checkpoint_interval, units.TIME, "training time between checkpoints",
                        f"{where_p}: checkpoint_interval")
        else:
            tau = daly_interval(delta, M)
        G = goodput(tau, delta, R, M)
        T_train = named("T_train", T_ideal / G, "time to train at the goodput: T_ideal / G")
        failures = named("n_interruptions", T_train / M, "interruptions expected during the run: T_train / M")
        checkpoints = named("n_checkpoints", T_ideal / tau, "checkpoints written: T_ideal / τ")
    else:
        G = 1.0 if not D else derive.constant(1.0, "1", T_ideal)
        T_train = named("T_train", T_ideal, "time to train, interruptions not modelled (no checkpoint_bandwidth)")
    day = _leaf(D, "t_day", DAY_S, units.TIME, "one day", None)
    gpu_days = named("GPU_days", N * T_train / day, "GPU-days the run holds: N·T_train / 1 d")
    energy = (named("E_train", power * T_train, "facility energy of the run: P·T_train") if power is not None
              else None)
    cost = (named("C_train", cost_rate * T_train, "cost of the run, its GPUs paid throughout: C_rate·T_train")
            if cost_rate is not None else None)
    return Target(modelled, steps, tokens_step, T_ideal, C, delta, lam, M, R, tau_young, tau, G, T_train,
                  gpu_days, failures, checkpoints, energy, cost, deadline)


def not_modelled_help(cluster: S.Cluster) -> str:
    """How to model goodput on ``cluster``: the fix W309 and the review show."""
    return S.checkpoint_help(cluster.name)
