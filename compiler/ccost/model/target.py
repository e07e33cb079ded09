"""Training targets: how long a run takes, how much of its time trains, and what it costs.

A training plan prices one optimizer step (``ccost.model.training``). A plan with a *target* (``train_tokens``,
or ``train_steps``) also asks how long the whole run takes on its fleet, with the interruptions that
dominate a large run's calendar, and what it costs. One set of formulas, written once over numbers, runs in
the three modes of ``ccost.derive``: floats (``ccost eval``, the review), numpy arrays (a search ranks
layouts by time to train or by its cost) and derivation values (``ccost explain``), like ``ccost.model.costs``
and ``ccost.model.economics``. The model, in words (docs/training-target.md works an example by hand):

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
  (``ccost.model.economics``: the N GPUs are paid and powered for the whole run, restarts included);
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
from ccost.diagnostics import CcostError, error

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
    return named("MTBF", 1 / (N * lam), "mean time between interruptions of the job: 1/(N·λ)")


def young_interval(delta: Num, M: Num) -> Num:
    """τ_Young = √(2δM), Young (1974): the first-order optimum."""
    return named("τ_Young", sqrt(2 * delta * M), "Young's first-order checkpoint interval √(2·δ·MTBF), for "
                 "comparison")


def daly_interval(delta: Num, M: Num) -> Num:
    """Daly (2006): τ = √(2δM)·(1 + √ξ/3 + ξ/9) − δ with ξ = δ/(2M), for δ < 2M; else M."""
    xi = named("ξ", delta / (2 * M), "Daly's ξ = δ/(2·MTBF)")
    return named("τ_Daly", where(delta < 2 * M, sqrt(2 * delta * M) * (1 + sqrt(xi) / 3 + xi / 9) - delta, M),
                 "Daly's higher-order optimum interval: √(2·δ·MTBF)·(1 + √ξ/3 + ξ/9) − δ when δ < 2·MTBF, "
                 "else MTBF")


def goodput(tau: Num, delta: Num, R: Num, M: Num) -> Num:
    """G = τ / (M·e^(R/M)·(e^((τ+δ)/M) − 1)): useful time over wall-clock time (Daly 2006)."""
    return named("G", tau / (M * exp(R / M) * (exp((tau + delta) / M) - 1)),
                 "goodput, the share of the run's time that trains the model (Daly 2006): "
                 "τ / (MTBF·e^(T_restart/MTBF)·(e^((τ+δ)/MTBF) − 1))", style="percent")


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
    T_checkpoints: Num = None  # the run's time writing checkpoints
    T_restarts: Num = None  # ... restarting
    T_lost: Num = None  # ... re-doing work lost since the last checkpoint: the rest of T_train − T_ideal

    @property
    def values(self) -> list:
        """Every number, for ``derive.steps`` (the derivation lists the ones that exist)."""
        return [v for v in (self.steps, self.T_ideal, self.C_ckpt, self.delta, self.M, self.tau_young, self.tau,
                            self.goodput, self.T_train, self.gpu_days, self.failures, self.checkpoints,
                            self.T_checkpoints, self.T_restarts, self.T_lost, self.energy, self.cost)
                if v is not None]


def _leaf(derivation: bool, name: str, value, dim, desc: str, source: str | None, style=None):
    return derive.leaf(name, value, dim, desc, source, style=style) if derivation else value


def target(plan: S.Plan, *, N: Num, T_step: Num, tokens_step: Num, W: Num, params: Num, b_opt: Num,
           power: Num = None, cost_rate: Num = None, derivation: bool = False) -> Target:
    """The plan's time to train, goodput, GPU-days, energy and cost from its step: ``N`` GPUs, ``T_step``
    per step, ``tokens_step`` tokens per step, the checkpoint's inputs ``W`` (weight bytes), ``params`` and
    ``b_opt`` (optimizer bytes per parameter), and ``power`` (W) and ``cost_rate`` (USD/s) from
    ``ccost.model.economics`` when known. All in one mode; ``derivation`` makes the plan's and cluster's fields
    leaves with their sources."""
    D = derivation
    cluster = plan.cluster
    assert cluster is not None and plan.states_target
    where_p, where_c = f"plan {plan.name}", f"cluster {cluster.name}"
    if plan.train_steps is not None:
        steps = _leaf(D, "n_steps", float(plan.train_steps), units.DIMENSIONLESS, "optimizer steps to train",
                      f"{where_p}: train_steps")
    else:
        tokens = _leaf(D, "D_train", float(plan.train_tokens), units.DIMENSIONLESS, "tokens to train on",
                       f"{where_p}: train_tokens")
        steps = named("n_steps", ceil(tokens / tokens_step), "optimizer steps: ⌈D_train / tokens_step⌉")
    T_ideal = named("T_ideal", steps * T_step, "training time without interruptions: n_steps·T_step")
    deadline = (_leaf(D, "T_deadline", plan.deadline, units.TIME, "the time the target must be trained in",
                      f"{where_p}: deadline") if plan.deadline is not None else None)
    C = delta = M = tau_young = tau = failures = checkpoints = T_ck = T_rs = T_lost = None
    lam = _leaf(D, "λ", cluster.failure_rate, units.RATE, "job interruptions per GPU-hour of the run",
                f"{where_c}: failure_rate" + ("" if "failure_rate" in cluster.spans else
                                              " (default: the Llama 3 paper, 419 in 54 days on 16,384 H100)"))
    R = _leaf(D, "T_restart", cluster.restart_time, units.TIME, "from an interruption to training again",
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
        g = derive.value_of(G)
        if isinstance(g, float) and not g > 0:  # one plan (a search's arrays give inf where this is refused)
            raise CcostError(error(
                "E401", f"plan `{plan.name}` never finishes training: writing a checkpoint takes "
                f"{units.format_quantity(float(derive.value_of(delta)), units.TIME)}, against "
                f"{units.format_quantity(float(derive.value_of(M)), units.TIME)} between interruptions on "
                f"{float(derive.value_of(N)):,.0f} GPUs, so the goodput is 0", plan.span,
                f"raise cluster `{cluster.name}`'s checkpoint_bandwidth, or checkpoint less (checkpoint_interval)"))
        T_train = named("T_train", T_ideal / G, "time to train at the goodput: T_ideal / G")
        failures = named("n_interruptions", T_train / M, "interruptions expected during the run: T_train / MTBF")
        checkpoints = named("n_checkpoints", T_ideal / tau, "checkpoints written: T_ideal / τ")
        T_ck = named("T_checkpoints", checkpoints * delta, "time writing checkpoints: n_checkpoints·δ")
        T_rs = named("T_restarts", failures * R, "time restarting: n_interruptions·T_restart")
        T_lost = named("T_lost", T_train - T_ideal - T_ck - T_rs, "work re-done after interruptions (and "
                       "checkpoints they cut short): T_train − T_ideal − T_checkpoints − T_restarts")
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
                  gpu_days, failures, checkpoints, energy, cost, deadline,
                  *((T_ck, T_rs, T_lost) if modelled else ()))


def not_modelled_help(cluster: S.Cluster) -> str:
    """How to model goodput on ``cluster``: the fix W309 and the review show."""
    return S.checkpoint_help(cluster.name)


def of_plan(plan: S.Plan, program: Any, m: Any, econ: Any, derivation: bool = False) -> Target:
    """``target`` of a priced training plan: its program (``lower.Program``: the checkpoint's inputs and the
    tokens per step), metrics (GPUs, step time) and economics (power, cost rate), all in one mode."""
    x, c = program.inputs, program.compute
    return target(plan, N=m.gpus, T_step=m.step, tokens_step=c.tokens_step, W=x.W, params=x.params,
                  b_opt=x.b_opt, power=econ.power, cost_rate=econ.cost_rate, derivation=derivation)


def _f(x) -> float | None:
    if x is None:
        return None
    v = float(derive.value_of(x))
    return v if v == v and abs(v) != float("inf") else None


def sources(plan: S.Plan) -> dict[str, str]:
    """Where each input of the goodput came from, for the review and the document (the Llama 3 paper for the
    default failure rate, an assumption for the default restart time, the spec's line otherwise)."""
    c = plan.cluster
    assert c is not None
    written = c.spans

    def src(field: str, default: str) -> str:
        return f"cluster `{c.name}`: {field}" if field in written else default

    return {
        "failure_rate": src("failure_rate", "default: the Llama 3 paper (Dubey et al. 2024, §3.3.4): 419 unexpected "
                            "interruptions in a 54-day snapshot on 16,384 H100"),
        "restart_time": src("restart_time", "default: 10 min, an assumption (Daly 2006's worked examples; the "
                            "Llama 3 paper's figures allow at most 16.7 min lost per interruption)"),
        "checkpoint_bandwidth": src("checkpoint_bandwidth", "not given: goodput not modelled"),
        "checkpoint_interval": (f"plan `{plan.name}`: checkpoint_interval" if plan.checkpoint_interval is not None
                                else "Daly's higher-order optimum"),
    }


def document(plan: S.Plan, t: Target) -> dict:
    """The plan's ``target`` section (float mode; docs/interface.md): the target, the checkpoint and failure
    model with its sources, the goodput, and the time and money to train."""
    deadline = plan.deadline
    T = _f(t.T_train)
    return {
        "train_tokens": plan.train_tokens,
        "train_steps": _f(t.steps),
        "global_batch": plan.global_sequences,
        "tokens_per_step": _f(t.tokens_step),
        "ideal_time_s": _f(t.T_ideal),
        "goodput_modelled": t.modelled,
        "checkpoint_bytes": _f(t.C_ckpt),
        "checkpoint_time_s": _f(t.delta),
        "failure_rate_per_gpu_hour": _f(t.lam) * HOUR_S,
        "mtbf_s": _f(t.M),
        "restart_time_s": _f(t.R),
        "checkpoint_interval_s": _f(t.tau),
        "young_interval_s": _f(t.tau_young),
        "goodput": _f(t.goodput),
        "time_to_train_s": T,
        "gpu_days": _f(t.gpu_days),
        "energy_j": _f(t.energy),
        "cost_usd": _f(t.cost),
        "interruptions": _f(t.failures),
        "checkpoints": _f(t.checkpoints),
        "checkpoint_writing_s": _f(t.T_checkpoints),
        "restarting_s": _f(t.T_restarts),
        "lost_work_s": _f(t.T_lost),
        "deadline_s": deadline,
        "meets_deadline": None if deadline is None or T is None else T <= deadline,
        "gpu_budget": plan.gpu_budget,
        "sources": sources(plan),
    }


#: The checklist's items of a training target (ccost.model.analysis.TITLES holds their titles).
DEADLINE_ITEM, GOODPUT_ITEM = 13, 14


def checklist_items(plan: S.Plan, policy: S.Policy, doc: dict, gpus: int, titles: dict) -> list[dict]:
    """Items 13 (the time to train within the target's deadline, the GPUs within its budget) and 14 (the
    goodput against the policy's ``min_goodput``) of a plan with a training target, from its ``target``
    section."""
    from ccost import units as U

    T, deadline, budget = doc["time_to_train_s"], doc["deadline_s"], doc["gpu_budget"]
    days = U.format_quantity(T, U.TIME) if T is not None else "—"
    text = f"{days} to train on {gpus:,} GPUs"
    over_budget = budget is not None and gpus > budget
    if deadline is None and budget is None:
        status, note = "pass", text + "; the target sets no deadline and no GPU budget."
    else:
        late = deadline is not None and not doc["meets_deadline"]
        status = "fail" if late or over_budget else "pass"
        parts = []
        if deadline is not None:
            parts.append(f"{'misses' if late else 'meets'} the deadline of {U.format_quantity(deadline, U.TIME)}")
        if budget is not None:
            parts.append(f"{'exceeds' if over_budget else 'is within'} the budget of {budget:,} GPUs")
        note = text + " " + " and ".join(parts) + "." + (
            " More GPUs with the global batch held (the review's doubling), a faster layout (a search with "
            "`objective = time_to_train`), or a later deadline." if late else "")
    items = [{"id": DEADLINE_ITEM, "title": titles[DEADLINE_ITEM], "status": status, "value": T,
              "threshold": deadline, "note": note}]
    G, limit = doc["goodput"], policy.min_goodput
    if not doc["goodput_modelled"]:
        items.append({"id": GOODPUT_ITEM, "title": titles[GOODPUT_ITEM], "status": "n/a", "value": None,
                      "threshold": limit, "note": "Goodput not modelled: " + not_modelled_help(plan.cluster) + "."})
        return items
    text = (f"Expected goodput {U.format_percent(G)}: an interruption every "
            f"{U.format_quantity(doc['mtbf_s'], U.TIME)}, a checkpoint every "
            f"{U.format_quantity(doc['checkpoint_interval_s'], U.TIME)} taking "
            f"{U.format_quantity(doc['checkpoint_time_s'], U.TIME)}, {U.format_quantity(doc['restart_time_s'], U.TIME)} "
            "to restart")
    if limit is None:
        items.append({"id": GOODPUT_ITEM, "title": titles[GOODPUT_ITEM], "status": "pass", "value": G,
                      "threshold": None, "note": text + "; the policy sets no min_goodput."})
    else:
        ok = G is not None and G >= limit
        items.append({"id": GOODPUT_ITEM, "title": titles[GOODPUT_ITEM], "status": "pass" if ok else "fail",
                      "value": G, "threshold": limit,
                      "note": text + (f", at least the policy's {U.format_percent(limit)}." if ok else
                                      f", below the policy's {U.format_percent(limit)}: faster checkpoints "
                                      "(checkpoint_bandwidth, asynchronous saves), a faster restart, or fewer GPUs.")})
    return items


def doubled(plan: S.Plan) -> tuple[S.Plan | None, str]:
    """The plan on twice the GPUs with the global batch held: dp doubled, each replica's batch halved (and
    its micro-batches, keeping their size), on the cluster with twice the nodes when it has too few. Returns
    (the plan, what changed) or (None, why it cannot be doubled)."""
    from dataclasses import replace

    B, M, dp = plan.batch, plan.microbatches, plan.dp
    if B % 2:
        return None, (f"doubling dp to {2 * dp} would leave {B / 2:g} sequences per replica: the global batch of "
                      f"{B * dp * plan.ep:,} sequences does not split over {2 * dp * plan.ep} replicas")
    if plan.microbatch_size is not None:
        M2 = (B // 2) // plan.microbatch_size if (B // 2) % plan.microbatch_size == 0 else None
    else:
        M2 = M // 2 if M % 2 == 0 else (M if M <= B // 2 else None)
    if not M2:
        return None, (f"doubling dp to {2 * dp} leaves {B // 2} sequences per replica, too few for its "
                      f"micro-batches")
    cluster = plan.cluster
    assert cluster is not None
    note = f"dp {dp} → {2 * dp}, batch {B} → {B // 2} per replica" + (f", microbatches {M} → {M2}" if M2 != M else "")
    if plan.gpus * 2 > cluster.gpus:
        nodes = -(-plan.gpus * 2 // cluster.gpus_per_node)
        if cluster.inter_node is None:
            return None, (f"twice the GPUs ({plan.gpus * 2:,}) leave cluster `{cluster.name}`'s one node, and it "
                          "has no inter_node link")
        cluster = replace(cluster, nodes=nodes, name=cluster.name)
        note += f", on {nodes:,} nodes of cluster `{plan.cluster.name}`'s kind"
    return replace(plan, dp=2 * dp, batch=B // 2, microbatches=M2, cluster=cluster,
                   name=f"{plan.name} (2×)"), note
