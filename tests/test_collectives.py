"""The collective catalogue: the one place that knows each collective's formulas and names.

The expected formulas are written out by hand here from the α-β model of the reference notes
(“Communication Cost Analysis” §2, “Communication Cost Math — Distributed Inference” §1), not read back from
the code: ring AllReduce 2(P−1) hops and 2(P−1)/P·m, tree 2·⌈log₂P⌉ hops, AllGather / ReduceScatter /
All-to-All P−1 hops and (P−1)/P·m, the binomial-tree Broadcast ⌈log₂P⌉ hops and log₂P·m, a point-to-point send
one hop and m; a group of one rank costs nothing.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from ccost import collectives
from ccost.model import costs
from ccost.calibrate import logs

M = 3.0 * 2**20  # bytes: any size; the formulas are linear in it


def hand(kind: str, alg: str, p: int, m: float, egress: bool = False) -> tuple[float, float]:
    """(hops, bytes per GPU) of one collective, as the notes write them."""
    if p == 1:
        return 0.0, 0.0
    lg = math.log2(p)
    ring = 2 * (p - 1) / p * m
    table = {
        ("allreduce", "ring"): (2 * (p - 1), ring),
        ("allreduce", "tree"): (2 * math.ceil(lg), ring),
        ("allreduce", "one_shot"): (1, (p - 1) * m if egress else ring),
        ("allreduce", "two_shot"): (2, ring),
        ("allgather", "ring"): (p - 1, (p - 1) / p * m),
        ("reducescatter", "ring"): (p - 1, (p - 1) / p * m),
        ("alltoall", "pairwise"): (p - 1, (p - 1) / p * m),
        ("broadcast", "tree"): (math.ceil(lg), lg * m),
        ("p2p", "direct"): (1, m),
    }
    return table[(kind, alg)]


PAIRS = [(c.kind, a) for c in collectives.CATALOGUE.values() for a in c.algorithms]


def test_the_catalogue_holds_every_collective_and_algorithm_the_notes_price():
    assert collectives.KINDS == ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "p2p")
    assert collectives.ALGORITHMS == ("ring", "tree", "one_shot", "two_shot")
    assert collectives.CUSTOM_ALGORITHMS == ("one_shot", "two_shot")
    assert dict(collectives.DEFAULT_ALGORITHM) == {
        "allreduce": "ring", "allgather": "ring", "reducescatter": "ring", "alltoall": "pairwise",
        "broadcast": "tree", "p2p": "direct"}
    assert len(PAIRS) == 9


@pytest.mark.parametrize("kind,alg", PAIRS)
def test_hops_and_volume_follow_the_notes_for_1_to_16_ranks(kind, alg):
    for p in range(1, 17):
        h, v = hand(kind, alg, p, M)
        assert costs.hops(kind, alg, p) == h, (kind, alg, p)
        assert costs.volume(kind, alg, p, M, one_shot_volume="ring") == pytest.approx(v, rel=1e-15, abs=0), p
        he, ve = hand(kind, alg, p, M, egress=True)
        assert costs.volume(kind, alg, p, M) == pytest.approx(ve, rel=1e-15, abs=0), p  # the default: egress


@pytest.mark.parametrize("kind,alg", PAIRS)
def test_the_formulas_are_array_safe(kind, alg):
    """The search prices whole grids: a rank array gives, element by element, the scalar results."""
    ps = np.arange(1, 17, dtype=float)
    h = np.asarray(costs.hops(kind, alg, ps))
    v = np.asarray(costs.volume(kind, alg, ps, M))
    assert h.shape == v.shape == (16,)
    assert list(h) == [costs.hops(kind, alg, float(p)) for p in ps]
    assert list(v) == [costs.volume(kind, alg, float(p), M) for p in ps]


def test_one_collective_costs_alpha_hops_plus_volume_over_bandwidth():
    alpha, bw, one = 2e-6, 450e9, 8e-6
    for kind, alg in PAIRS:
        h, v = hand(kind, alg, 8, M, egress=True)
        hop = one if alg in ("one_shot", "two_shot") else alpha  # a custom kernel's shot: its own latency
        c = costs.collective_cost(kind, alg, 8, M, alpha, bw, one_shot_latency=one)
        assert (c.kind, c.algorithm) == (kind, alg)
        assert c.time == pytest.approx(hop * h + v / bw, rel=1e-14)


def test_the_kinds_with_one_model_ignore_the_plans_allreduce_algorithm():
    for kind in ("allgather", "reducescatter", "alltoall", "broadcast", "p2p"):
        assert collectives.algorithm(kind, "tree").name == collectives.DEFAULT_ALGORITHM[kind]
    with pytest.raises(ValueError, match="unknown AllReduce algorithm 'auto'"):
        collectives.algorithm("allreduce", "auto")
    with pytest.raises(ValueError, match="unknown collective kind 'allscatter'"):
        collectives.collective("allscatter")


# The two-level form of each kind on p = 32 ranks, g = 8 a node, n = 4 nodes: the stages by hand.
HIER = {
    "allreduce": [("reducescatter", "ring", 8, M, "intra"), ("allreduce", "tree", 4, M / 8, "inter"),
                  ("allgather", "ring", 8, M, "intra")],
    "allgather": [("allgather", "ring", 4, M / 8, "inter"), ("allgather", "ring", 8, M, "intra")],
    "reducescatter": [("reducescatter", "ring", 8, M, "intra"), ("reducescatter", "ring", 4, M / 8, "inter")],
    "alltoall": [("alltoall", "pairwise", 8, M, "intra"), ("alltoall", "pairwise", 4, M, "inter")],
    "broadcast": [("broadcast", "tree", 4, M, "inter"), ("broadcast", "tree", 8, M, "intra")],
    "p2p": [("p2p", "direct", 32, M, "inter")],
}


@pytest.mark.parametrize("kind", collectives.KINDS)
def test_the_hierarchical_form_is_its_stages_each_on_its_own_link(kind):
    links = {"intra": (2e-6, 450e9), "inter": (5e-6, 50e9)}
    intra, inter = costs.LinkParams(*links["intra"]), costs.LinkParams(*links["inter"])
    g = costs.group_cost(kind, "tree", 32, M, 8, intra, inter, cross_node="hierarchical")
    want = 0.0
    for k, alg, p, m, link in HIER[kind]:
        h, v = hand(k, alg, p, m, egress=True)
        a, b = links[link]
        want += a * h + v / b
    assert g.used == "hierarchical"
    assert g.chosen.time == pytest.approx(want, rel=1e-14)
    assert [label.split()[1] for label, _ in g.hierarchical.stages] == [s[4] for s in HIER[kind]]


def test_each_collective_names_its_nccl_test_and_busbw_factor():
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw × 2(n−1)/n (AllReduce), (n−1)/n (AllGather,
    # ReduceScatter, AlltoAll), 1 (Broadcast, SendRecv).
    tests = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
             "alltoall": "alltoall", "broadcast": "broadcast", "p2p": "sendrecv"}
    for kind, test in tests.items():
        assert collectives.collective(kind).test == test
        assert collectives.by_test(test + "_perf").kind == kind
        assert logs.TEST_KINDS[test] == kind
    for n in (2, 3, 8, 16):
        assert logs.busbw_factor("allreduce", n) == pytest.approx(2 * (n - 1) / n)
        for kind in ("allgather", "reducescatter", "alltoall", "gather", "scatter"):
            assert logs.busbw_factor(kind, n) == pytest.approx((n - 1) / n)
        for kind in ("broadcast", "p2p", "reduce"):
            assert logs.busbw_factor(kind, n) == 1.0


COMPILER = Path(__file__).resolve().parent.parent / "compiler" / "ccost"


def _spelling(name: str) -> str:
    """``name`` in any spelling: any case, its letters optionally split by ``-``, ``_`` or a space."""
    return r"[-_ ]?".join(re.escape(ch) for ch in name.lower() if ch.isalnum())


def _lists(names: dict[str, str]):
    """A finder of written lists of ``names`` (spelling → canonical name): two or more items, quoted or
    not, joined by commas, "or", "and", "/" or "|" (a tuple, prose, a comment); yields each list's canonical
    names."""
    item = r"[\"'`]?(?:%s)[\"'`]?" % "|".join(sorted(names, key=len, reverse=True))
    sep = r"\s*(?:,\s*(?:(?:or|and)\b\s*)?|\bor\b\s*|\band\b\s*|/\s*|\|\s*)"
    run = re.compile(rf"(?<![\w-]){item}(?:{sep}{item})+(?![\w-])", re.I)
    one = [(re.compile(rf"^[\"'`]?{s}[\"'`]?$", re.I), n) for s, n in names.items()]

    def find(text: str):
        for m in run.finditer(text):
            parts = re.split(sep, m.group(0), flags=re.I)
            yield {next(n for pat, n in one if pat.match(p)) for p in parts if p}
    return find


#: Every kind under its catalogue name, title and nccl-tests name (``all_reduce``, ``All-to-All``, ...).
_KIND_LISTS = _lists({_spelling(n): c.kind for c in collectives.CATALOGUE.values()
                      for n in (c.kind, c.title, c.test)})
_ALGORITHM_LISTS = _lists({_spelling(a): a for a in collectives.ALGORITHMS})


def _spells_the_catalogue(text: str) -> bool:
    """Whether ``text`` lists the collective kinds by hand (every kind, or all but one: a list gone stale when
    the last kind was added) or every AllReduce algorithm. A list of a few kinds that share a property
    (nccl-tests' "reduce_scatter, all_gather and alltoall print the per-rank count") is prose, not a copy."""
    return (any(len(found) >= len(collectives.KINDS) - 1 for found in _KIND_LISTS(text))
            or any(len(found) == len(collectives.ALGORITHMS) for found in _ALGORITHM_LISTS(text)))


def test_the_catalogue_is_the_only_place_that_spells_the_algorithms_or_the_kinds():
    """No module writes the kinds or the AllReduce algorithms again, as a tuple or in prose: they import the
    tuples (``results.py`` writes the meaning of ``collectives[].kind`` from ``KINDS``)."""
    # what it looks for, in the spellings it has been written in
    assert _spells_the_catalogue('ALGORITHMS = ("ring", "tree", "one_shot", "two_shot")')
    assert _spells_the_catalogue('algorithm: str  # ring | tree | one_shot | two_shot | auto')
    assert _spells_the_catalogue('KINDS = ("allreduce", "allgather",\n  "reducescatter", "alltoall", "broadcast", "p2p")')
    assert _spells_the_catalogue('"allreduce, allgather, reducescatter, alltoall, broadcast or p2p"')
    assert _spells_the_catalogue("AllReduce, AllGather, ReduceScatter, All-to-All and Broadcast")
    assert _spells_the_catalogue("all_reduce / all_gather / reduce_scatter / alltoall / sendrecv")
    assert _spells_the_catalogue("`allreduce`, `allgather`, `reducescatter`, `alltoall`, `p2p`")  # one missing
    # and what it leaves alone: a few kinds or algorithms named for a property they share
    assert not _spells_the_catalogue("reduce_scatter, all_gather and alltoall print the per-rank count")
    assert not _spells_the_catalogue("Ring, tree and two-shot AllReduce are charged the ring volume")
    assert not _spells_the_catalogue("allreduce allgather reducescatter alltoall broadcast p2p")  # not a list
    files = list(COMPILER.rglob("*.py"))
    assert len(files) > 50
    found = sorted(str(f.relative_to(COMPILER)) for f in files
                   if _spells_the_catalogue(f.read_text(encoding="utf-8")))
    assert found == []  # collectives.py builds both tuples from its records


def test_the_checker_can_read_the_catalogue_without_numpy():
    import subprocess
    import sys

    probe = "import sys, ccost.collectives, ccost.spec\nprint('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_one_shot_conventions_come_from_the_one_shot_record():
    """Lower prices, and evaluate words, both volume conventions of the one algorithm whose record has an
    egress: one-shot, (P−1)·m against the notes' 2(P−1)/P·m."""
    from ccost.evaluate import ONE_SHOT_TEXT

    assert collectives.ONE_SHOT.name == "one_shot"
    assert collectives.ONE_SHOT.egress(8, M) == 7 * M
    assert set(ONE_SHOT_TEXT) == set(collectives.ONE_SHOT_VOLUMES) == {"egress", "ring"}
    assert collectives.other_one_shot_volume("egress") == "ring"
    assert collectives.other_one_shot_volume("ring") == "egress"
    assert "egress (P−1)·m" in ONE_SHOT_TEXT["egress"] and "ring volume 2(P−1)/P·m" in ONE_SHOT_TEXT["ring"]
