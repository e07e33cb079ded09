"""The parallel-axis registry (ccost.axes): every list of degrees derives from it."""

from __future__ import annotations

from types import SimpleNamespace

from ccost import axes, evaluate, results, schema, search
from ccost.model import lower
from ccost import spec as S


def test_registry_holds_the_degrees_in_field_and_rank_order():
    assert axes.NAMES[:4] == ("tp", "pp", "ep", "dp")
    assert set(axes.NAMES) == {"tp", "pp", "ep", "dp", "cp"}
    # Megatron's default rank order: tp fastest, then cp, ep, dp; the pipeline crosses nodes
    assert [a.name for a in axes.PLACEMENT] == ["tp", "cp", "ep", "dp", "pp"]
    assert {a.shards for a in axes.AXES} <= set(axes.SHARDS)
    assert len({a.place for a in axes.AXES}) == len(axes.AXES)


def test_every_consumer_lists_the_registry():
    # written out by hand: each consumer must hold exactly the five degrees, whatever builds its list
    degrees = {"tp", "pp", "ep", "dp", "cp"}
    assert set(axes.NAMES) == degrees
    assert degrees <= {f.name for f in schema.SCHEMA["plan"].fields}
    assert degrees <= set(lower._LEAVES)
    assert lower._LEAVES["cp"][2] == "context-parallel degree"
    assert set(search.LAYOUT_AXES) == degrees and degrees <= set(search.ARRAY_AXES)
    assert evaluate.GPU_AXES == frozenset(degrees)
    keys = {k.path for k in results.KEYS}
    assert {f"plans.<plan>.layout.{n}" for n in degrees} <= keys


def test_product_stride_and_labels():
    x = SimpleNamespace(tp=8, pp=4, ep=2, dp=3, cp=5)
    assert axes.product(x) == 8 * 4 * 2 * 3  # an optional axis only when asked for
    assert axes.product(x, on={"cp"}) == 8 * 4 * 2 * 3 * 5
    assert axes.gpus(x) == 8 * 4 * 2 * 3 * 5
    # ranks between consecutive pipeline stages: every axis placed before pp
    assert axes.stride(x, "pp") == 8 * 2 * 3
    assert axes.stride(x, "pp", on={"cp"}) == 8 * 5 * 2 * 3
    assert axes.stride(x, "ep", on={"cp"}) == 8 * 5
    assert axes.stride(x, "tp") == 1
    assert axes.split(x, "weights", "layers") == 8 * 4
    assert axes.label() == "tp·pp·ep·dp" and axes.label({"cp"}) == "tp·pp·ep·dp·cp"


def test_optional_axis_is_shown_only_above_one():
    one = SimpleNamespace(tp=8, pp=1, ep=1, dp=2, cp=1, phase="train")
    two = SimpleNamespace(tp=8, pp=1, ep=1, dp=2, cp=2, phase="train")
    assert axes.values(one) == "8·1·1·2" and axes.values(two) == "8·1·1·2·2"
    assert [a.name for a in axes.used(one)] == ["tp", "pp", "ep", "dp"]
    assert axes.active(one) == frozenset() and axes.active(two) == {"cp"}


def test_plan_gpus_is_the_product_of_every_degree():
    p = S.Plan(name="p", title=None, span=None, tp=2, pp=3, ep=5, dp=7, cp=11)
    assert p.gpus == 2 * 3 * 5 * 7 * 11


BASE = ('link nv { alpha = 2 us; bandwidth = 450 GB/s }\n'
        'gpu g { memory = 80 GB; hbm_bandwidth = 3 TB/s; flops = 1 PFLOP/s }\n'
        'cluster c { gpu = g; nodes = 2; gpus_per_node = 8; intra_node = nv; inter_node = nv }\n'
        'model m { layers = 8; hidden = 1024; heads = 8; kv_heads = 8; params = 1e8 }\n')


def test_a_used_optional_degree_reaches_json_and_explain():
    from ccost.check import check_text
    from ccost.commands import explain

    r = check_text(BASE + "plan p { model = m; cluster = c; phase = train; seq = 4096; tp = 4; cp = 2 }\n"
                   "plan q { model = m; cluster = c; phase = train; seq = 4096; tp = 4 }", "t")
    assert not r.errors
    res = evaluate.evaluate(r.spec)
    assert res.plans["p"].doc["layout"]["cp"] == 2 and res.plans["p"].doc["gpus"] == 8
    assert "cp" not in res.plans["q"].doc["layout"]  # cp = 1: the layout reads as before the axis existed
    assert "tp=4 pp=1 ep=1 dp=1 cp=2," in explain.render(r.spec, "p")
    assert "tp=4 pp=1 ep=1 dp=1," in explain.render(r.spec, "q")
    assert "N = tp·pp·ep·dp·cp = 4 × 1 × 1 × 1 × 2 = 8" in explain.render(r.spec, "p")
