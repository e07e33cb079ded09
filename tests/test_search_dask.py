"""Searches on a Dask cluster (`ccost eval --scheduler ADDRESS`): on a `distributed.LocalCluster`
the document equals the local run's bit for bit, for decode, training and fleet searches and for the
fleet example from the command line; a missing Dask, an unreachable scheduler and a dead worker are
diagnostics (E512, E513), not tracebacks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ccost import search
from ccost.diagnostics import CcostError

from test_search import _spec
from test_search_parallel import CASES, FLEET_SPEC, _dump, _eval

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as c:
        yield c
        from ccost import remote

        remote.close(c.scheduler_address)


@pytest.mark.parametrize("case", sorted(CASES))
def test_local_cluster_gives_the_local_document(cluster, case):
    spec = _spec(CASES[case])
    s = next(iter(spec.searches.values()))
    local = search.run_search(s, spec.policy, chunk=37, jobs=1)
    seen = []
    remote = search.run_search(s, spec.policy, chunk=37, scheduler=cluster.scheduler_address,
                               progress=lambda d, t: seen.append(d))
    assert _dump(remote) == _dump(local)
    assert seen[-1] == s.size


def test_the_same_search_twice_ships_it_under_a_new_key(cluster, monkeypatch):
    # `ccost diff` of two revisions, or a review after an eval, ships the same search again while the last
    # run's copy is being released. Under the content-hash key a scatter gives by default, the second run
    # reused the key being released and failed with "lost dependencies" (seen from a script on a
    # LocalCluster with worker processes; the timing does not reproduce reliably under pytest, so what is
    # checked is that every run ships the search under a key of its own, and that each run is right).
    keys = []
    scatter = distributed.Client.scatter

    def spy(self, data, *a, **kw):
        out = scatter(self, data, *a, **kw)
        keys.extend(f.key for f in out)
        return out

    monkeypatch.setattr(distributed.Client, "scatter", spy)
    spec = _spec(CASES["decode"])
    s = next(iter(spec.searches.values()))
    local = search.run_search(s, spec.policy, chunk=37, jobs=1)
    for _ in range(3):
        assert _dump(search.run_search(s, spec.policy, chunk=37, scheduler=cluster.scheduler_address)) == \
            _dump(local)
    assert len(keys) == 3 and len(set(keys)) == 3, keys


def test_local_cluster_fleet_spec_from_the_cli(cluster, capsys):
    code1, local, _ = _eval(capsys, FLEET_SPEC, "--format", "json", "--jobs", "1")
    code2, remote, err = _eval(capsys, FLEET_SPEC, "--format", "json", "--scheduler", cluster.scheduler_address)
    assert code1 == code2 == 0 and remote == local, err


def test_scheduler_from_the_environment(cluster, capsys, monkeypatch):
    monkeypatch.setenv("CCOST_SCHEDULER", cluster.scheduler_address)
    calls = []
    from ccost import remote

    real = remote.run
    monkeypatch.setattr(remote, "run", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    code, out, _ = _eval(capsys, FLEET_SPEC, "--format", "json")
    assert code == 0 and calls == [cluster.scheduler_address]


# slow (~1 s waiting for a connection that cannot come): run by CI
@pytest.mark.slow
def test_unreachable_scheduler_is_a_diagnostic(capsys, monkeypatch):
    from ccost import remote

    monkeypatch.setattr(remote, "TIMEOUT", 1.0)
    code, out, err = _eval(capsys, FLEET_SPEC, "--scheduler", "tcp://127.0.0.1:9")  # the discard port
    assert code != 0 and "E513" in err and "tcp://127.0.0.1:9" in err and "Traceback" not in err


def test_without_dask_the_error_names_the_pip_command(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` raises ImportError
    code, out, err = _eval(capsys, FLEET_SPEC, "--scheduler", "tcp://127.0.0.1:8786")
    assert code != 0 and "E512" in err and "Traceback" not in err
    # ccost is not on the package index: the hint names the commands that add the extra to this installation
    # (its requirement from pyproject.toml, by this Python's pip), never `pip install 'ccost[distributed]'`
    from ccost.extras import install_command

    assert install_command("distributed") and all(c in err for c in install_command("distributed"))
    assert "distributed>=" in err and "pip install 'ccost[" not in err


def test_a_failing_worker_is_a_diagnostic(cluster, monkeypatch):
    # what the scheduler reports when the workers running a task died (here raised by the task itself:
    # a real worker's death cannot be staged in this process)
    spec = _spec(CASES["decode"])
    s = spec.searches["s"]

    def dead(job, part):
        from types import SimpleNamespace

        raise distributed.KilledWorker("_run_units-1", SimpleNamespace(address="tcp://10.0.0.9:40000"), 0)

    monkeypatch.setattr(search.pricing, "_run_units", dead)
    with pytest.raises(CcostError) as exc:
        search.run_search(s, spec.policy, chunk=400, scheduler=cluster.scheduler_address)
    (d,) = exc.value.diagnostics
    assert d.code == "E513" and "worker died" in d.message


def test_progress_bar_on_a_local_cluster(cluster):
    from test_progress import _bar_of_a_run

    line = _bar_of_a_run(scheduler=cluster.scheduler_address)
    assert "100 %  1,600 / 1,600 points" in line and "points/s  ETA 0:00" in line, line


# --------------------------------------------------------------------------------------------------
# Every address form: a diagnostic within the timeout, never a hang, an internal error or a Dask
# traceback

@pytest.mark.parametrize("address,words", [
    ("ucx://127.0.0.1:8786", "needs UCX support"),  # before: internal TypeError
    ("tls://127.0.0.1:8786", "needs the cluster's certificates"),  # before: internal TypeError
    ("wss://127.0.0.1:8786", "needs the cluster's certificates"),
    ("inproc://192.0.2.1/1/1", "inside one Python process"),  # before: a 20 s close and a traceback
    ("foo://x:1", "no address scheme `foo://`"),
    ("tcp://[::1", "not a scheduler address"),
    ("10.0.0.5", "missing port"),
    ("tcp://127.0.0.1:99999", "not a TCP port"),
])
def test_an_address_of_a_form_that_cannot_work_is_e513_at_once(capsys, address, words):
    code, out, err = _eval(capsys, FLEET_SPEC, "--scheduler", address)
    assert code == 2 and "E513" in err and words in err, err
    assert "Traceback" not in err and "Exception ignored" not in err and "internal error" not in err


class _Server:
    """A TCP service on 127.0.0.1 in a thread: ``silent`` accepts and never answers; ``http`` answers a
    request line like a web server (400 and a body), which Dask's handshake read as a frame of 3 EiB."""

    def __init__(self, kind: str):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.kind, self.conns = kind, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.kind == "http":
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nBad Request")
                except OSError:
                    pass

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


# slow: waits out the (shortened) timeout
@pytest.mark.slow
@pytest.mark.parametrize("kind,words", [("silent", "did not answer as a Dask scheduler within 1 s"),
                                        ("http", "did not answer as a Dask scheduler")])
def test_a_service_that_is_not_a_scheduler_is_e513_within_the_timeout(capsys, monkeypatch, kind, words):
    """A port that accepts and never answers hung for 11 minutes; a web server was `internal error:
    MemoryError: Unable to allocate 3.07 EiB`."""
    import time

    from ccost import remote

    monkeypatch.setattr(remote, "TIMEOUT", 1.0)
    server = _Server(kind)
    try:
        start = time.perf_counter()
        code, out, err = _eval(capsys, FLEET_SPEC, "--scheduler", f"tcp://127.0.0.1:{server.port}")
        took = time.perf_counter() - start
    finally:
        server.close()
    assert code == 2 and "E513" in err and words in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert took < 30  # the timeout of 1 s, and the evaluation; not minutes


# slow: a socket that refuses, and a name the resolver must fail on
@pytest.mark.slow
@pytest.mark.parametrize("address,words", [("tcp://127.0.0.1:9", "connection refused"),
                                           ("nonexistent.invalid:8786", "no host `nonexistent.invalid`")])
def test_a_scheduler_that_cannot_be_reached_says_why(capsys, monkeypatch, address, words):
    from ccost import remote

    monkeypatch.setattr(remote, "TIMEOUT", 1.0)
    code, out, err = _eval(capsys, FLEET_SPEC, "--scheduler", address)
    assert code == 2 and "E513" in err and words in err and "Traceback" not in err, err


def test_a_scheduler_on_tcp_passes_the_probe(monkeypatch):
    """The probe (a handshake under one deadline, in a thread of its own) lets a real scheduler through."""
    from ccost import remote

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=None) as c:
        try:
            assert remote.client(c.scheduler_address).status == "running"
        finally:
            remote.close(c.scheduler_address)


def test_a_capacity_search_on_a_local_cluster_gives_the_local_document(cluster, monkeypatch, capsys):
    # the capacity search screens its candidates in tasks on the cluster (ccost.capacity, CHUNK candidates a
    # task: cut small here so that several tasks run), then simulates its picks locally
    from ccost import capacity, remote as R

    monkeypatch.setattr(capacity, "CHUNK", 50)
    shipped = []
    real_run = R.run
    monkeypatch.setattr(R, "run", lambda job, units, *a, **k: shipped.append(len(units)) or real_run(job, units, *a,
                                                                                                       **k))
    spec = str(Path(__file__).resolve().parent.parent / "specs" / "sla-mixtral-h100.ccost")
    code1, local, _ = _eval(capsys, spec, "--format", "json")
    assert shipped == []
    code2, remote, err = _eval(capsys, spec, "--format", "json", "--scheduler", cluster.scheduler_address)
    assert code1 == code2 == 0 and remote == local, err
    assert shipped and shipped[0] > 1  # the screening went to the cluster, in several tasks
    assert json.loads(remote)["searches"]["fleet"]["candidates"] > 50
