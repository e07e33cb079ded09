"""A search's document: ``run_search`` (the grid, priced here, in a pool or on Dask) and the ``searches:``
section of the results document it returns (``_document``: counts per constraint, the top, the fronts)."""

from __future__ import annotations

import math
from collections.abc import Callable

from ccost import axes as PA
from ccost import spec as S
from ccost.collectives import ALGORITHMS
from ccost.check.search import value_name as _name
from ccost.diagnostics import CcostError
from ccost.results import RECORD_METRICS
from ccost.schema import phase_kind, targeted
from ccost.search import pool, pricing
from ccost.search.grid import (
    CHUNK,
    CONSTRAINTS,
    DEADLINE_RULE,
    GB_RULE,
    MB_RULE,
    V_RULE,
    Settings,
    _decode,
    _job,
    _pickling,
)


def run_search(search: S.Search, policy: S.Policy, progress: Callable[[int, int], None] | None = None,
               chunk: int = CHUNK, jobs: int | None = None, scheduler: str | None = None) -> dict:
    """Evaluate every point of ``search`` and return its document section (see ``search_document``).

    ``progress(done, total)`` is called as chunks finish (the CLI draws a bar from it). ``jobs`` processes
    (default: ``EXECUTION``'s, 1 unless the CLI's ``--jobs``) or the Dask ``scheduler`` at an address
    (``ccost.remote``) share the chunks; the partial reductions merge into the same document as a
    run in this process. Raises ``CcostError`` E402 for a search larger than its limit, E401 when the base
    plan cannot be evaluated, E404 for a fleet combination that cannot be evaluated.
    """
    if search.base is not None and phase_kind(search.base.phase).capacity:  # a fleet for a traffic
        from ccost import capacity
        from ccost.check.search import validate

        diags = [d for d in validate(search, lambda *a: None) if d.is_error]
        if diags:
            raise CcostError(diags)
        _pickling()  # entities travel to Dask workers
        return capacity.run(search, policy, progress, pool.EXECUTION.scheduler if scheduler is None else scheduler)
    job = _job(search, policy, chunk)
    units = job.units()
    jobs = pool.EXECUTION.jobs if jobs is None else jobs
    scheduler = pool.EXECUTION.scheduler if scheduler is None else scheduler
    if scheduler:
        from ccost import remote

        _pickling()
        acc = pricing.merge(job, remote.run(job, units, scheduler, progress, work=pricing._run_units,
                                            tasks=lambda us, workers: pool.balanced_tasks(job, us, workers)))
    elif jobs > 1 and len(units) > 1 and not (pool.EXECUTION.auto and search.size < pool.POOL_MIN_POINTS):
        acc = pool._run_pool(job, units, jobs, progress)
    else:
        acc = pricing._run_units(job, units, progress)
    return job.document(acc)


def _records(search, cols, order, decode) -> list[dict]:
    out = []
    for i in order:
        layout = decode(cols["index"][i])
        train = phase_kind(layout.get("phase", search.base.phase)).trains if search.base is not None else False
        rec = {f: _name(v) for f, v in layout.items()}  # a model, cluster or stack by its name
        for k in RECORD_METRICS:  # what a search records for each point it keeps
            v = cols[k][i]
            rec[k] = bool(v) if k == "fits_memory" else (int(v) if k == "gpus" else float(v))
        # the algorithm the TP (training: and DP) AllReduce used; None when the group is one GPU
        for k in ("tp_algorithm", "dp_algorithm") if train else ("tp_algorithm",):
            code = int(cols[k][i])
            rec[k] = ALGORITHMS[code] if code >= 0 else None
        if "cost_per_mtok_usd" in cols and math.isfinite(float(cols["cost_per_mtok_usd"][i])):
            rec["cost_per_mtok_usd"] = float(cols["cost_per_mtok_usd"][i])  # priced clusters only
        for k in ("batch", "microbatches"):  # what a fixed global batch or micro-batch size gives the layout
            if k in cols and k not in rec:
                rec[k] = int(cols[k][i])
        # a training target's (ccost.model.target): present when the base plan states one, and finite
        for k in TARGET_RECORD_KEYS:
            if k in cols and math.isfinite(float(cols[k][i])):
                rec[k] = float(cols[k][i])
        out.append(rec)
    return out


#: What a record of a search whose base plan states a training target adds (ccost.model.target; results.py).
TARGET_RECORD_KEYS = ("time_to_train_s", "goodput", "checkpoint_interval_s", "gpu_days", "train_energy_j",
                      "train_cost_usd")


def _document(search, st, total, priced, feasible, tested, failed, removed, top_cols, front_cols, static_names,
              array_names, shape, per_pass, best_removed, mem_limit, tfront_cols=None, fleet_cols=None) -> dict:
    """The ``searches:`` section: ``title``, ``base``, ``axes`` (field → values), ``objective``, ``points``,
    ``priced`` (passed the layout constraints), ``feasible``, ``rejected``, ``constraints`` (in order:
    ``constraint``, ``rule``, ``tested``, ``failed``, ``removed``, ``threshold`` or ``limit_bytes``, and for
    the priced ones ``best_removed``), ``top`` (best first) and ``pareto`` (fastest first). A point is its
    layout (the searched fields) + ``RECORD_METRICS`` + ``tp_algorithm`` (training: ``dp_algorithm``)."""
    def decode(i):
        return _decode(search, i, static_names, array_names, shape, per_pass)

    top = _records(search, top_cols, range(len(top_cols["index"])), decode) if top_cols else []
    front = _records(search, front_cols, range(len(front_cols["index"])), decode) if front_cols else []
    limits = {"max_gpus": st.max_gpus, "tp_in_domain": st.tp_in_domain,
              "tp_divides_kv_heads": st.tp_divides_kv_heads, "pp_divides_layers": st.pp_divides_layers,
              "fits_memory": st.fits_memory, "max_overhead": st.max_overhead,
              "min_efficiency": st.min_efficiency}
    rules = dict(CONSTRAINTS)
    # the GPU product names the optional degrees (cp) this search prices: varied, or above 1 in its base
    used = {f for f, v in search.axes if f in PA.OPTIONAL and any(d > 1 for d in v)}
    used |= {a for a in PA.OPTIONAL if search.base is not None and getattr(search.base, a) > 1}
    rules["max_gpus"] = rules["max_gpus"].replace(PA.label(), PA.label(used), 1)
    constraints = []
    for k, _ in CONSTRAINTS:
        if k in ("tp_in_domain", "tp_divides_kv_heads", "pp_divides_layers", "fits_memory") and not limits[k]:
            continue
        if k in ("max_overhead", "min_efficiency") and limits[k] is None:
            continue
        if k in ("inter_node_link", MB_RULE, V_RULE, "finite") and failed[k] == 0:
            continue
        if (k == GB_RULE and not tested[k]) or (k == DEADLINE_RULE and st.deadline is None):
            continue
        entry = {"constraint": k, "rule": rules[k], "tested": tested[k], "failed": failed[k],
                 "removed": removed[k]}
        if k in ("max_gpus", "max_overhead", "min_efficiency"):
            entry["threshold"] = limits[k]
        if k == DEADLINE_RULE:
            entry["threshold"] = st.deadline
        if k == GB_RULE:
            entry["threshold"] = search.base.global_sequences
        if k == "fits_memory" and mem_limit is not None:
            entry["limit_bytes"] = mem_limit
        if k in best_removed:
            # what the constraint cost: the best layout (by the objective) that it alone removed
            entry["best_removed"] = _records(search, best_removed[k], [0], decode)[0]
        constraints.append(entry)
    assert search.base is not None
    return {
        "title": search.title or search.name,
        "base": search.base.name,
        "axes": {f: [_name(x) for x in v] for f, v in search.axes},
        "objective": search.objective,
        "distinct": search.distinct,
        "points": total,
        "priced": priced,
        "feasible": feasible,
        "rejected": total - feasible,
        "constraints": constraints,
        "top": top,
        "pareto": front,
        **({"target": _target_doc(search, st, tfront_cols, decode, fleet_cols)} if targeted(search.base) else {}),
    }


def _target_doc(search: S.Search, st: Settings, tfront_cols, decode, fleet_cols=None) -> dict:
    """A training search's ``target``: what it trains for (tokens or steps, the global batch, the deadline,
    the GPU budget) and the Pareto front of time to train against the run's cost (``by``: the cost, or the
    GPU-days when a searched cluster is not priced), soonest first."""
    base = search.base
    assert base is not None
    front = []
    if tfront_cols:
        order = sorted(range(len(tfront_cols["index"])), key=lambda i: (float(tfront_cols["time_to_train_s"][i]),
                                                                        int(tfront_cols["index"][i])))
        front = _records(search, tfront_cols, order, decode)
    return {
        "train_tokens": base.train_tokens,
        "train_steps": base.train_steps,
        "global_batch": base.global_sequences,
        "deadline_s": st.deadline,
        "gpu_budget": base.gpu_budget,
        "pareto_by": st.target_by,
        "pareto": front,
        # a fleet search's answer per model, cluster, phase and stack: its best layout by the objective
        **({"best_per_fleet": [_records(search, fleet_cols[k], [0], decode)[0] for k in
                               sorted(fleet_cols, key=lambda k: int(fleet_cols[k]["index"][0]))]}
           if fleet_cols else {}),
    }


def search_document(search: S.Search, policy: S.Policy, progress=None) -> dict:
    """The ``searches:`` section of the results document for one search (``ccost eval``, the review)."""
    return run_search(search, policy, progress)


def search_documents(spec: S.Spec, progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Every search of a spec: ``{name: section}`` (``ccost.evaluate`` calls this). Collects the
    diagnostics of every search that cannot run into one ``CcostError``. ``progress(name, done, total)``
    is told as chunks finish."""
    from ccost.diagnostics import Diagnostics

    diags = Diagnostics()
    out = {}
    for name, se in spec.searches.items():
        try:
            out[name] = run_search(se, spec.policy, (lambda d, t, n=name: progress(n, d, t)) if progress else None)
        except CcostError as exc:
            diags.extend(exc.diagnostics)
    diags.raise_if_errors()
    return out
