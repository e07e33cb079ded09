"""Layout search: every combination of tp, pp, ep, dp, batch, ... of one plan, priced at once.

A ``search`` block names a base plan, lists (or ranges) of values for some of its fields, constraints and
an objective. ``run_search`` evaluates **every** point through the same functions as a single plan
(``lower.prepare`` → ``lower.with_arrays`` → ``phases.lower`` → ``phases.analyse``), with numpy arrays
in place of the floats: there is no second implementation of the cost model, so a point of a search is
bit for bit the plan ``dataclasses.replace(base, tp=..., ...)`` evaluated on its own (a test checks it).

How it runs:

* **Axes.** The searched fields split in two. Numbers the formulas take as inputs (``tp``, ``pp``, ``ep``,
  ``dp``, ``batch``, ``microbatches``, ``seq``, ``overlap``) become arrays. Choices that change *which*
  formulas run (``allreduce``, ``fsdp``, ``cross_node``) are decided in Python (``lower.Static``): the
  search makes one pass per combination of them.
* **Chunks.** Within a pass the array axes split into *layouts* (the combinations of ``tp``, ``pp``,
  ``ep``, ``dp``: all the layout constraints read) and *columns* (the combinations of the others). The
  layout grid is enumerated in chunks of ``CHUNK`` layouts (flat indices decoded with
  ``np.unravel_index``), and the layouts that pass the layout constraints are priced in blocks of at most
  ``CHUNK`` points, layouts × columns (the layouts one vector, the columns another, across it; the
  longer side innermost): numpy broadcasting computes a quantity of the layout alone once per layout and
  one of the columns alone once per column. Memory stays bounded by the chunk whatever the size of the
  search (``_Grid``).
* **Constraints mask, never skip.** Each constraint is a boolean array over the chunk. The *layout*
  constraints (GPUs, pp ≤ layers, tp in the domain, tp | kv_heads, pp | layers) need no pricing: they are
  tested on every layout (each counting for all its columns), and only the layouts that pass them are
  priced (the chunk's arrays compressed with the mask, no Python loop), except the columns that give a
  micro-batch no sequence (microbatches > batch: not a plan, E401), which are dropped from each block
  before pricing; the *priced* constraints (memory, overhead, efficiency, finite numbers)
  are tested on those. Points that cannot be a plan at all (more GPUs than ``max_gpus`` or the cluster,
  more pipeline stages than layers, more micro-batches than sequences) are constraints too, before the
  priced ones in the list. The search counts, per
  constraint, the points it was tested on, the points that fail it and the points it removed (failing it
  and passing every constraint before it in ``CONSTRAINTS`` order, so the removed counts add up to the
  rejected points): the output says why each rejected region was rejected.
* **Reductions.** Only the running top ``top`` points (by the objective) and the running Pareto front
  (latency down, throughput per GPU up) survive a chunk.

Point order (for ties and for "the first in search order"): the static axes outermost in written order,
then the array axes in written order, the last fastest.

The search block's own rules (searchable fields, the size limit, fleet combinations: E205, E402, E404) are
``ccost.check.search``, which the checker runs too. The package is importable without numpy; the evaluation
imports numpy, ``ccost.model.lower`` and ``ccost.model.phases`` when it runs.

The package, by job (each module's docstring says more):

* ``grid`` — the grid and its constraints: ``CONSTRAINTS``, ``Settings``, a search as a picklable ``_Job`` of
  passes × layouts × columns (``_Grid``), the layout constraints, a point's number in search order;
* ``pricing`` — chunks of points through the cost model, the priced constraints and the running
  reductions (``_run_units``, ``_price_chunk``, ``_Acc``, the objectives' orders);
* ``pool`` — how searches run (``execution``, ``--jobs``): tasks of equal work and the worker processes;
* ``document`` — ``run_search`` and the ``searches:`` section of the results document it returns.

A new objective or constraint touches the job it belongs to: its name in ``OBJECTIVES`` or ``CONSTRAINTS``
(``grid``), its order and measure (``_objective_order``, ``_primary``) or its test on priced points
(``_price_chunk``, ``pricing``), and what the section says of it (``_document``, ``document``).

Every name is re-exported here: ``from ccost.search import X`` works for each of them. A test that replaces a
module's name (``monkeypatch``) replaces it in the module that looks it up (``ccost.search.pool`` for
``POOL_MIN_POINTS``, say), and ``EXECUTION`` is read from ``ccost.search.pool``, where ``execution`` sets it.
"""

from __future__ import annotations

from ccost.check.search import ARRAY_AXES, FLEET_AXES, STATIC_AXES, validate  # noqa: F401
from ccost.search.grid import (  # noqa: F401
    OBJECTIVES,
    CHUNK,
    MB_RULE,
    GB_RULE,
    V_RULE,
    DEADLINE_RULE,
    CONSTRAINTS,
    N_LAYOUT,
    _PRE_PRICING,
    Settings,
    settings,
    _fleet_of,
    _Job,
    _job,
    _global_batch,
    _whole_microbatches,
    _layout_fails,
    _coalesce,
    _proxy,
    _pickle_proxy,
    _pickling,
    LAYOUT_AXES,
    _Grid,
    _decode,
    point_plan,
)
from ccost.search.pricing import (  # noqa: F401
    _Best,
    _objective_order,
    _primary,
    pareto_mask,
    RESULT_KEYS,
    DISTINCT_NOTE,
    _first_of_each_result,
    _top_select,
    _pareto_select,
    _target_pareto_select,
    _Acc,
    _run_units,
    _prepare_pass,
    _optional_axes,
    merge,
    _M_TOP_PAD,
    _M_MMAP_THRESHOLD,
    _HEAP_PAD,
    _MMAP_THRESHOLD,
    _malloc_tuned,
    _keep_freed_memory,
    _price_chunk,
)
from ccost.search.pool import (  # noqa: F401
    Execution,
    POOL_MIN_POINTS,
    execution,
    capped_jobs,
    default_jobs,
    TASKS_PER_WORKER,
    TASK_MIN_PRICED,
    tasks,
    AUTO_COST,
    _unit_weights,
    _layout_weights,
    _unit_sums,
    balanced_tasks,
    _POOL,
    _WORKER_JOB,
    _TOKENS,
    _pool,
    pool_running,
    shutdown,
    _run_task,
    WORKER_DEPTH,
    _run_pool,
)
from ccost.search.document import (  # noqa: F401
    run_search,
    _records,
    TARGET_RECORD_KEYS,
    _document,
    _target_doc,
    search_document,
    search_documents,
)
from ccost.search import document, grid, pool, pricing  # noqa: F401  (the modules, for monkeypatch)


def __getattr__(name: str):
    """``EXECUTION``: the current way of running searches, which ``execution`` rebinds in ``ccost.search.pool``
    (a name copied here would keep its first value)."""
    if name == "EXECUTION":
        return pool.EXECUTION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
