"""Searches on a Dask cluster: ``ccost eval --scheduler ADDRESS`` (or ``CCOST_SCHEDULER``).

The search is cut into the same chunks as a local run (``search._Job.units``), grouped into tasks (numpy
arrays of (pass, first layout, end layout) rows); the search itself is shipped once to every worker
(``Client.scatter(..., broadcast=True)``) and each task runs ``search._run_units`` there: the very code a
local run runs. A task returns its reductions (counts, and the kept points as numpy column arrays), and
they are merged in search order by ``search.merge``, as ``--jobs`` merges its processes' — so the
document is the local one, bit for bit (tests/test_search_parallel.py checks it on a ``LocalCluster``).

Dask is optional (``pip install 'ccost[distributed]'``); without it ``--scheduler`` is error E512. A
scheduler that cannot be reached, has no workers, or loses a worker mid-search is error E513, never a
traceback. The workers need ccost installed (the same version) and numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ccost.diagnostics import CcostError, error

#: Seconds to wait for the scheduler to answer, and for a first worker to join it.
TIMEOUT = 10.0

INSTALL = "pip install 'ccost[distributed]'"

_CLIENTS: dict = {}


def _import():
    try:
        import distributed
    except ImportError:
        raise CcostError(error("E512", "`--scheduler` runs searches on Dask, and Dask's `distributed` is not "
                               "installed", None, f"install it with `{INSTALL}`, or run without `--scheduler` "
                               "(`--jobs N` uses this machine's cores)")) from None
    return distributed


def client(address: str):
    """A Dask client connected to the scheduler at ``address`` (kept for the next search)."""
    distributed = _import()
    if address in _CLIENTS and _CLIENTS[address].status == "running":
        return _CLIENTS[address]
    try:
        c = distributed.Client(address, timeout=TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CcostError(error("E513", f"cannot reach the Dask scheduler at `{address}`: "
                               f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", None,
                               "check the address (like `tcp://10.0.0.5:8786`, what `dask scheduler` prints) "
                               "and that the scheduler is running and reachable from here")) from None
    try:
        c.wait_for_workers(1, timeout=TIMEOUT)
    except (OSError, TimeoutError) as exc:
        c.close()
        raise CcostError(error("E513", f"the Dask scheduler at `{address}` has no workers "
                               f"({type(exc).__name__} after {TIMEOUT:g} s)", None,
                               f"start workers with `dask worker {address}` (ccost installed, `{INSTALL}`)")) \
            from None
    _CLIENTS[address] = c
    return c


def run(job, units: list, address: str, progress: Callable[[int, int], None] | None = None, *,
        tasks: Callable[[list, int], list], work: Callable[[Any, Any], Any]) -> list:
    """``work(job, task)`` for each of ``tasks(units, workers)`` on the Dask cluster at ``address``: the
    reductions, in task order, for the caller to merge (``ccost.search`` passes its own functions, so this
    module knows nothing of a search but its ``name``, ``size`` and ``span``)."""
    distributed = _import()
    c = client(address)
    name = job.search.name
    futures: list = []
    shipped = None
    try:
        workers = max(1, len(c.scheduler_info().get("workers", {})))
        parts = tasks(units, workers)
        # a key of its own each time (hash=False): the same search shipped again (`ccost diff` of two
        # revisions, a review after an eval) must not reuse a key whose release from the last run is pending
        [shipped] = c.scatter([job], broadcast=True, hash=False)
        futures = [c.submit(work, shipped, part, pure=False) for part in parts]
        index = {f.key: i for i, f in enumerate(futures)}
        results: list = [None] * len(parts)
        done = 0
        for fut in distributed.as_completed(futures, loop=c.loop):
            results[index[fut.key]] = acc = fut.result()
            done += acc.done
            if progress is not None:
                progress(done, job.search.size)
    except CcostError:
        _cancel(c, futures)
        raise
    except distributed.KilledWorker as exc:
        _cancel(c, futures)
        raise CcostError(error("E513", f"search `{name}`: a Dask worker died while pricing it "
                               f"({_describe(exc)})",
                               job.search.span, "look at the workers' logs (memory limits kill workers: give them "
                               "more memory, or more workers); then run again")) from None
    except (ModuleNotFoundError, ImportError) as exc:
        _cancel(c, futures)
        raise CcostError(error("E513", f"search `{name}`: a Dask worker cannot run ccost ({_describe(exc)})",
                               job.search.span,
                               f"install ccost, the same version, on every worker (`{INSTALL}`)")) from None
    except (OSError, TimeoutError, distributed.comm.CommClosedError) as exc:
        _cancel(c, futures)
        _CLIENTS.pop(address, None)
        raise CcostError(error("E513", f"search `{name}`: lost the Dask scheduler at `{address}` "
                               f"({_describe(exc)})", job.search.span,
                               "check that the scheduler is still running, then run again")) from None
    finally:
        if shipped is not None:
            _cancel(c, [shipped])  # the scattered search: no longer needed on the workers
    return results


def close(address: str) -> None:
    """Disconnect from the scheduler at ``address`` (kept open between searches until then)."""
    c = _CLIENTS.pop(address, None)
    if c is not None:
        c.close()


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - some Dask exceptions cannot print themselves
        return type(exc).__name__


def _cancel(c, futures) -> None:
    try:
        c.cancel(futures)
    except Exception:  # noqa: BLE001 - the client may be gone already; the error being raised says why
        pass
