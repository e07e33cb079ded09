"""Searches on a Dask cluster: ``ccost eval --scheduler ADDRESS`` (or ``CCOST_SCHEDULER``).

The search is cut into the same chunks as a local run (``search._Job.units``), grouped into tasks (numpy
arrays of (pass, first layout, end layout) rows); the search itself is shipped once to every worker
(``Client.scatter(..., broadcast=True)``) and each task runs ``search._run_units`` there: the very code a
local run runs. A task returns its reductions (counts, and the kept points as numpy column arrays), and
they are merged in search order by ``search.merge``, as ``--jobs`` merges its processes' — so the
document is the local one, bit for bit (tests/test_search_parallel.py checks it on a ``LocalCluster``).

Dask is optional (the ``distributed`` extra, ``ccost.extras``); without it ``--scheduler`` is error E512. An
address of a form that cannot work, a scheduler that cannot be reached or does not answer as one within
``TIMEOUT`` (a web server, a port that accepts and stays silent), one with no workers, or one that loses a
worker mid-search is error E513, never a hang or a traceback. The workers need ccost installed (the same
version) and numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ccost.diagnostics import CcostError, error
from ccost.extras import install_hint

#: Seconds to wait for the scheduler to answer (its handshake, all told), and for a first worker to join it.
TIMEOUT = 10.0


_CLIENTS: dict = {}


def _import():
    try:
        import distributed
    except ImportError:
        raise CcostError(error("E512", "`--scheduler` runs searches on Dask, and Dask's `distributed` is not "
                               "installed", None, f"install it with {install_hint('distributed')}, or run without `--scheduler` "
                               "(`--jobs N` uses this machine's cores)")) from None
    return distributed


#: The address forms ``--scheduler`` takes (Dask's schemes that reach a scheduler in another process).
FORMS = "tcp://HOST:PORT (or HOST:PORT), tls://HOST:PORT, ws://, wss:// or ucx://HOST:PORT"
_HELP = ("give the address `dask scheduler` prints, like `tcp://10.0.0.5:8786`, and check that the scheduler "
         "is running and reachable from here")


def _fail(message: str, help: str = _HELP) -> CcostError:
    return CcostError(error("E513", message, None, help))


def _checked(address: str):
    """(address with its scheme, Dask security settings) for ``address``, or E513 saying what is wrong with
    its form before anything is connected: an unknown scheme, ``inproc://`` (a scheduler inside one Python
    process, never ccost's), ``ucx://`` without UCX support, ``tls://`` without certificates, no port."""
    distributed = _import()
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, loc = parse_address(address.strip(), strict=False)  # no scheme: tcp
    except ValueError:
        raise _fail(f"`{address}` is not a Dask scheduler address", f"write it as {FORMS}") from None
    if scheme == "inproc":
        from distributed.comm.inproc import global_manager

        try:
            here = global_manager.get_listener_for(loc) is not None
        except (ValueError, AssertionError):
            here = False
        if here:  # a LocalCluster(processes=False) of this very process (a notebook, the tests)
            return address.strip(), None
        raise _fail(f"`{address}` names a scheduler inside one Python process (inproc://), which ccost, a "
                    "process of its own, cannot reach", f"give the scheduler's network address: {FORMS}")
    if scheme not in ("tcp", "tls", "ws", "wss", "ucx"):
        raise _fail(f"`{address}`: Dask has no address scheme `{scheme}://`", f"write it as {FORMS}")
    try:
        host, port = parse_host_port(loc)
    except (ValueError, TypeError) as exc:
        raise _fail(f"`{address}` is not a scheduler address: {exc}", f"write it as {FORMS}") from None
    if not isinstance(port, int) or not 0 < port < 65536:
        raise _fail(f"`{address}`: port {port} is not a TCP port (1 to 65535)", f"write it as {FORMS}")
    if scheme == "ucx":
        from importlib.util import find_spec

        if find_spec("distributed_ucxx") is None and find_spec("ucp") is None:
            raise _fail(f"`{address}`: ucx:// needs UCX support for Dask on this machine "
                        "(`pip install distributed-ucxx`), which is not installed",
                        "install it, or give the scheduler's tcp:// address")
    security = distributed.Security()  # the TLS settings of Dask's configuration, if any
    if scheme in ("tls", "wss") and not (security.tls_ca_file and security.tls_client_cert):
        raise _fail(f"`{address}`: {scheme}:// needs the cluster's certificates, and Dask's configuration "
                    "names none", "set distributed.comm.tls.ca-file, .client.cert and .client.key (Dask's "
                    "configuration or DASK_DISTRIBUTED__COMM__TLS__* variables), or use a tcp:// address")
    if scheme != "ucx":  # a plain connection first: "refused" and "no such host" at once, in those words
        import socket

        try:
            socket.create_connection((host.strip("[]"), port), timeout=TIMEOUT).close()
        except socket.gaierror as exc:
            raise _fail(f"cannot reach the Dask scheduler at `{address}`: no host `{host}` "
                        f"({exc.strerror or exc})") from None
        except ConnectionRefusedError:
            raise _fail(f"cannot reach the Dask scheduler at `{address}`: nothing listens on port {port} of "
                        f"`{host}` (connection refused)") from None
        except (OSError, ValueError) as exc:  # timeout, unreachable network, port out of range
            raise _fail(f"cannot reach the Dask scheduler at `{address}`: {_first_line(exc) or 'timed out'}") \
                from None
    return f"{scheme}://{loc}", security


def _probe(address: str, security) -> None:
    """Connect and exchange Dask's handshake, within ``TIMEOUT`` all told; E513 saying what answered
    otherwise. Dask's own ``connect`` waits for the handshake without end (a listener that accepts and
    never answers hung ccost for 11 minutes), so the whole exchange runs under one deadline, in a thread
    of its own (a caller may have an event loop running), and no ``Client`` is made for an address that
    fails it (a failed ``Client`` takes 20 s to close and prints a traceback as it goes)."""
    import asyncio
    import threading

    from distributed.comm import connect

    async def handshake():
        comm = await connect(address, timeout=TIMEOUT, **security.get_connection_args("client"))
        await comm.close()

    outcome: list[BaseException | None] = []

    def attempt():
        try:
            asyncio.run(asyncio.wait_for(handshake(), TIMEOUT))
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - every failure becomes E513 below
            outcome.append(exc)

    thread = threading.Thread(target=attempt, name="ccost-dask-probe", daemon=True)
    thread.start()
    thread.join(TIMEOUT + 5)
    exc = outcome[0] if outcome else TimeoutError()
    if exc is None:
        return
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        raise _fail(f"`{address}` did not answer as a Dask scheduler within {TIMEOUT:g} s (a service that is not "
                    "Dask, such as a web server, or a firewall that drops the connection)")
    if isinstance(exc, OSError):
        raise _fail(f"cannot reach the Dask scheduler at `{address}`: {_first_line(exc)}")
    raise _fail(f"`{address}` did not answer as a Dask scheduler ({type(exc).__name__}: {_first_line(exc)})")


def _first_line(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - some exceptions cannot print themselves
        text = ""
    return (text.splitlines() or [type(exc).__name__])[0][:200]


def client(address: str):
    """A Dask client connected to the scheduler at ``address`` (kept for the next search). Every address
    form is checked first and every failure is E513 within ``TIMEOUT`` (``_checked``, ``_probe``)."""
    distributed = _import()
    if address in _CLIENTS and _CLIENTS[address].status == "running":
        return _CLIENTS[address]
    full, security = _checked(address)
    if security is not None:  # None: a scheduler in this process, nothing to probe
        _probe(full, security)
    try:
        c = distributed.Client(full, timeout=TIMEOUT, set_as_default=False, security=security)
    except Exception as exc:  # noqa: BLE001 - it answered the probe, then failed: still a diagnostic
        raise _fail(f"cannot connect to the Dask scheduler at `{address}`: {type(exc).__name__}: "
                    f"{_first_line(exc)}") from None
    try:
        c.wait_for_workers(1, timeout=TIMEOUT)
    except (OSError, TimeoutError) as exc:
        c.close()
        raise CcostError(error("E513", f"the Dask scheduler at `{address}` has no workers "
                               f"({type(exc).__name__} after {TIMEOUT:g} s)", None,
                               f"start workers with `dask worker {address}` (ccost installed with its `distributed` extra)")) \
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
                               "install ccost, the same version, on every worker, with its `distributed` extra")) from None
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
