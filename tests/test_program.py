"""The program of one step (ccost.model.program): memory as named parts, declared once in results.MEMORY_PARTS,
and the builders lower and training share, with the rank strides of ccost.axes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccost import check, derive, evaluate, results, units
from ccost.model import program
from ccost import spec as S

REPO = Path(__file__).resolve().parents[1]
POLICY = S.Policy(name="policy", title=None, span=None)


class _X:
    """The two inputs ``program.memory`` reads for the limit (``lower.Inputs``' max_mem and mem)."""

    max_mem, mem = 0.9, 80e9


def test_memory_total_is_the_sum_of_the_parts_it_holds():
    m = program.memory(_X(), weights=35e9, kv_cache=10e9)
    assert m.total == 45e9  # 35 GB + 10 GB
    assert m.limit == 72e9  # 90 % of 80 GB
    assert m["gradients"] == 0.0  # a part this cost model does not hold reads as zero
    assert m.held == [35e9, 10e9]  # in the table's order, whatever order the keywords came in
    assert program.memory(_X(), kv_cache=10e9, weights=35e9).held == [35e9, 10e9]


def test_a_part_not_in_the_table_is_refused():
    with pytest.raises(TypeError, match="declare it in results.MEMORY_PARTS"):
        program.memory(_X(), weights=1.0, buffers=2.0)
    with pytest.raises(KeyError, match="no memory part named 'buffers'"):
        program.memory(_X(), weights=1.0)["buffers"]


def test_the_parts_are_the_document_keys_explain_lines_and_checklist_words():
    """One table: the memory section of a training plan's document has one key per part (and the limit),
    each a documented result key; explain's memory group lists the parts the training model holds, and
    checklist item 11 names them with the table's words."""
    spec, _ = check.load_spec(str(REPO / "specs" / "llama3-405b-train.ccost"))
    name = next(iter(spec.local_plans))
    doc = evaluate.evaluate_plan(spec.plans[name], spec.policy).doc
    keys = [p.key for p in results.MEMORY_PARTS]
    assert list(doc["memory"]) == keys + ["limit_bytes"]
    documented = {k.path for k in results.KEYS}
    assert all(f"plans.<plan>.memory.{k}" in documented for k in keys)
    # training holds weights, gradients, optimizer state and activations: a total of exactly those four
    mem = doc["memory"]
    assert mem["kv_cache_bytes"] == 0.0
    parts = mem["weights_bytes"] + mem["gradient_bytes"] + mem["optimizer_bytes"] + mem["activation_bytes"]
    assert doc["memory_bytes_per_gpu"] == pytest.approx(parts, rel=1e-15)
    item = next(i for i in doc["checklist"] if i["id"] == 11)
    for word in ("weights", "gradients", "optimizer", "activations"):
        assert f"{word} " in item["note"]
    assert "KV cache" not in item["note"]
    group = dict(evaluate.explain_sections(spec, name))["memory"]
    assert [s.name for s in group][-2:] == ["mem_GPU", "mem_limit"]


def test_training_strides_come_from_the_rank_layout():
    """The training model's group strides are ``axes.stride``'s: with tp = cp = ep = dp = pp = 2 the ranks
    are numbered tp fastest, then cp, ep, dp and pp, so consecutive pipeline stages are tp·cp·ep·dp = 16
    ranks apart, and the EP group's members tp·cp = 4 (hand count of the Megatron tp-cp-ep-dp-pp order)."""
    link = S.Link(name="nv", title=None, span=None, alpha=2e-6, bandwidth=450e9)
    ib = S.Link(name="ib", title=None, span=None, alpha=3e-6, bandwidth=50e9)
    gpu = S.Gpu(name="g", title=None, span=None, memory=80e9, hbm_bandwidth=3.35e12, flops=989e12)
    cluster = S.Cluster(name="c", title=None, span=None, gpu=gpu, nodes=8, gpus_per_node=4, intra_node=link,
                        inter_node=ib)
    moe = S.Model(name="m", title=None, span=None, layers=8, hidden=1024, heads=8, kv_heads=8, params=8e9,
                  active_params=2e9, experts=8, top_k=2)
    ideal = S.Stack(name="ideal", title=None, span=None, roofline="step", pipeline="flush")
    plan = S.Plan(name="p", title=None, span=None, model=moe, cluster=cluster, phase="train", batch=4, seq=1024,
                  tp=2, cp=2, ep=2, dp=2, pp=2, microbatches=2, stack=ideal)
    spec = S.Spec("<t>", {}, {}, {}, {}, {"p": plan}, {}, {}, POLICY)
    steps = {s.name: s for s in evaluate.explain(spec, "p")}
    assert derive.value_of(steps["s_PP"].value) == 16
    # NVLink domains of 4 GPUs: the two EP ranks, 4 apart, sit in different domains, min(max(4/4, 1), 2) = 1
    assert derive.value_of(steps["g_EP"].value) == 1
    assert steps["s_PP"].dim == units.DIMENSIONLESS
