"""Layout search: every point agrees bit for bit with its plan evaluated alone; the Pareto front,
the top list and the constraint counts agree with brute force; the size limit; range functions."""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from ccost import evaluate, output, schema, search
from ccost.spec import Search
from ccost.check import check_text
from ccost.diagnostics import CcostError

HEADER = '''
import "std/gpus.ccost"
import "std/links.ccost"
import "std/models.ccost"
import "std/clusters.ccost"
import "std/stacks.ccost"
'''

# Llama-3-70B decode with an 8k context on 16 HGX H100 nodes (KV cache read every step, so memory and
# batch matter); 5 tp × 4 pp × 4 dp × 4 batch × 5 algorithms = 1,600 points, every algorithm.
DECODE = HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100_16node; phase = decode; batch = 16; seq = 8192; tp = 8 }
search s {
  base = base
  tp = pow2(1, 16); pp = [1, 2, 5, 8]; dp = [1, 2, 4, 8]; batch = [1, 16, 64, 256]
  allreduce = [ring, tree, one_shot, two_shot, auto]
  max_gpus = 64
  fits_memory = false; use_policy = false
  objective = OBJECTIVE
  top = 1000; distinct = false  # every layout, repeats included: the tests sample each variant
}
'''

# Mixtral training with expert parallelism, FSDP on and off, micro-batches and a partial overlap.
TRAIN = HEADER + '''
plan base {
  model = mixtral_8x7b; cluster = hgx_h100_16node; phase = train; batch = 8; seq = 4096
  ep = 8; pp = 2; dp = 2; microbatches = 8; overlap = 30 %; allreduce = ring
}
search s {
  base = base
  ep = [1, 2, 4, 8]; tp = [1, 2, 4]; pp = [1, 2, 4]; dp = [1, 2, 8]
  microbatches = [1, 8]; fsdp = [false, true]; overlap = [0 %, 50 %]; allreduce = [ring, auto]
  fits_memory = false; use_policy = false
  top = 1000; distinct = false  # every layout, repeats included: the tests sample each variant
}
'''

FIELDS = ("gpus", "latency_s", "step_time_s", "throughput_per_gpu", "throughput_tokens_s", "efficiency", "overhead",
          "speedup", "compute_time_s", "comm_time_s", "bubble", "memory_bytes_per_gpu", "fits_memory")


def _spec(text: str):
    res = check_text(text, "specs/test-search.ccost")
    assert not res.errors, [d.message for d in res.errors]
    return res.spec


def _alone(s: Search, spec, rec: dict) -> dict:
    """The point's plan (base with the point's values, via dataclasses.replace) evaluated on its own."""
    layout = {f: rec[f] for f, _ in s.axes}
    plan = dataclasses.replace(s.base, **layout)
    return evaluate.evaluate_plan(plan, spec.policy).doc


def _doc_value(doc: dict, key: str):
    return {"throughput_per_gpu": doc["throughput_per_gpu"]}.get(key, doc.get(key))


def _algorithm(doc: dict, purpose: tuple[str, ...]) -> str | None:
    """The algorithm of the plan's AllReduce whose purpose starts with one of ``purpose`` (None: none)."""
    found = [c["algorithm"] for c in doc["collectives"]
             if c["kind"] == "allreduce" and c["purpose"].startswith(purpose)]
    assert len(found) <= 1
    return found[0] if found else None


def _assert_same(rec: dict, doc: dict) -> None:
    assert rec["tp_algorithm"] == _algorithm(doc, ("tensor-parallel",)), (rec, doc["collectives"])
    if "dp_algorithm" in rec:
        assert rec["dp_algorithm"] == _algorithm(
            doc, ("data-parallel gradients (parameters)", "data-parallel gradients (dense parameters)"))
    for key in FIELDS:
        a, b = rec[key], _doc_value(doc, key)
        if isinstance(b, float):
            # bit for bit: the same IEEE double, not merely close
            assert float(a).hex() == b.hex(), (key, rec, a, b)
        else:
            assert a == b, (key, rec, a, b)


@pytest.mark.parametrize("objective", ["latency", "throughput_per_gpu", "gpus"])
def test_decode_points_agree_bit_for_bit_with_plans_alone(objective):
    spec = _spec(DECODE.replace("OBJECTIVE", objective))
    s = spec.searches["s"]
    doc = search.run_search(s, spec.policy, chunk=97)  # an odd chunk: points straddle chunk borders
    assert doc["points"] == 5 * 4 * 4 * 4 * 5
    assert len(doc["top"]) == 1000 or len(doc["top"]) == doc["feasible"]
    sample = doc["top"][:40] + doc["top"][::17] + doc["pareto"]
    picked = {r["tp_algorithm"] for r in doc["top"] if r["allreduce"] == "auto"}
    assert {"ring", "tree", "one_shot"} <= picked  # auto picks per point (checked against plans below)
    # one-shot and two-shot need NVLink peer access: never picked for a TP group that spans nodes
    assert not {r["tp_algorithm"] for r in doc["top"] if r["allreduce"] == "auto" and r["tp"] > 8} \
        & {"one_shot", "two_shot"}
    sample += [r for r in doc["top"] if r["allreduce"] == "auto"][::5]
    for rec in sample:
        _assert_same(rec, _alone(s, spec, rec))


def test_training_moe_fsdp_points_agree_bit_for_bit():
    spec = _spec(TRAIN)
    s = spec.searches["s"]
    doc = search.run_search(s, spec.policy, chunk=50)
    assert doc["points"] == 4 * 3 * 3 * 3 * 2 * 2 * 2 * 2
    assert {r["fsdp"] for r in doc["top"]} == {False, True}
    assert {r["dp_algorithm"] for r in doc["top"]} >= {"ring", None}
    for rec in doc["top"][::7] + doc["top"][:20] + doc["pareto"]:
        _assert_same(rec, _alone(s, spec, rec))


# --- brute force: constraints, top list and Pareto front ------------------------------------------------

CONSTRAINED = HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100_16node; phase = decode; batch = 16; seq = 8192; tp = 8
            stack = ideal }
search s {
  base = base
  tp = [1, 2, 3, 4, 8, 16]; pp = [1, 2, 3, 4, 80, 96]; dp = [1, 2, 4]; batch = [1, 64, 512]; microbatches = [1, 8]
  allreduce = [tree, auto]
  max_gpus = 96
  tp_in_domain = true; tp_divides_kv_heads = true; pp_divides_layers = true
  max_overhead = 15 %; min_efficiency = 60 %
  objective = latency
  top = 7
}
policy { max_memory = 90 % }
'''


def _brute(spec, s):
    """Every point evaluated alone, in search order (static axes outermost), with the constraint it fails
    first, written out from the rules (not from ccost.search)."""
    axes = dict(s.axes)
    static = [f for f, _ in s.axes if f in search.STATIC_AXES]
    arrays = [f for f, _ in s.axes if f not in search.STATIC_AXES]
    model = s.base.model
    out = []
    for scombo in itertools.product(*(axes[f] for f in static)):
        for acombo in itertools.product(*(axes[f] for f in arrays)):
            layout = dict(zip(static, scombo)) | dict(zip(arrays, acombo))
            p = {k: layout.get(k, getattr(s.base, k)) for k in ("tp", "pp", "ep", "dp")}
            gpus = p["tp"] * p["pp"] * p["ep"] * p["dp"]
            rules = [
                ("max_gpus", gpus <= 96),
                ("pp_at_most_layers", p["pp"] <= model.layers),  # 80 layers: pp = 96 is not a plan
                ("tp_in_domain", p["tp"] <= 8),
                ("tp_divides_kv_heads", 8 % p["tp"] == 0),
                ("pp_divides_layers", 80 % p["pp"] == 0),
            ]
            doc = None
            if all(ok for _, ok in rules):
                mb = layout.get("microbatches", s.base.microbatches) <= layout.get("batch", s.base.batch)
                rules += [("microbatches_at_most_batch", mb)]  # else not a plan: E401 alone
                if mb:
                    doc = _alone(s, spec, dict(layout))
                    rules += [("fits_memory", doc["fits_memory"]), ("max_overhead", doc["overhead"] <= 0.15),
                              ("min_efficiency", doc["efficiency"] >= 0.60)]
            failing = [k for k, ok in rules if not ok]
            out.append((layout, doc, failing))
    return out


# The same space with the axes written in another order: the layout axes (tp, pp, dp) between the others,
# so a point's index in search order interleaves them (the search prices layouts × the other axes).
SHUFFLED = CONSTRAINED.replace(
    "tp = [1, 2, 3, 4, 8, 16]; pp = [1, 2, 3, 4, 80, 96]; dp = [1, 2, 4]; batch = [1, 64, 512]; microbatches = [1, 8]",
    "batch = [1, 64, 512]; tp = [1, 2, 3, 4, 8, 16]; microbatches = [1, 8]; dp = [1, 2, 4]; pp = [1, 2, 3, 4, 80, 96]")


@pytest.mark.parametrize("text,chunk", [(CONSTRAINED, 64), (SHUFFLED, 5), (SHUFFLED, 1 << 15)])
def test_constraints_top_and_front_match_brute_force(text, chunk):
    # chunk = 5: fewer than the 3 × 2 batch × micro-batch values, so a layout's points span blocks
    assert SHUFFLED != CONSTRAINED
    spec = _spec(text)
    s = spec.searches["s"]
    doc = search.run_search(s, spec.policy, chunk=chunk)
    pts = _brute(spec, s)
    assert doc["points"] == len(pts) == 6 * 6 * 3 * 3 * 2 * 2

    got = {c["constraint"]: c for c in doc["constraints"]}
    # every enabled constraint is listed, in order; inter_node_link and finite never fire here
    assert list(got) == ["max_gpus", "pp_at_most_layers", "tp_in_domain", "tp_divides_kv_heads",
                         "pp_divides_layers", "microbatches_at_most_batch", "fits_memory", "max_overhead",
                         "min_efficiency"]
    for k, c in got.items():
        assert c["removed"] == sum(1 for _, _, f in pts if f and f[0] == k), k
        assert c["failed"] == sum(1 for _, _, f in pts if k in f), k
    # layout constraints are tested on every point, priced ones on the points that are plans
    priced = sum(1 for _, d, _ in pts if d is not None)
    assert doc["priced"] == priced and got["fits_memory"]["tested"] == priced
    assert got["max_gpus"]["tested"] == len(pts)
    assert sum(c["removed"] for c in got.values()) == doc["rejected"]
    feasible = [(lay, d) for lay, d, f in pts if not f]
    assert doc["feasible"] == len(feasible) > 10
    # each constraint removed something in this hand-built space (so each count is a real test)
    assert all(c["removed"] > 0 for c in got.values()), got

    # top 7 by latency: lowest step time, then higher throughput per GPU, fewer GPUs, search order; each
    # answer (latency, throughput per GPU; no price here) once, at its first point in that order
    order = sorted(range(len(feasible)), key=lambda i: (feasible[i][1]["latency_s"],
                                                        -feasible[i][1]["throughput_per_gpu"],
                                                        feasible[i][1]["gpus"], i))
    answers, distinct = set(), []
    for i in order:
        answer = (feasible[i][1]["latency_s"], feasible[i][1]["throughput_per_gpu"])
        if answer not in answers:
            answers.add(answer)
            distinct.append(i)
    assert [{f: r[f] for f, _ in s.axes} for r in doc["top"]] == [feasible[i][0] for i in distinct[:7]]
    assert len(distinct) < len(order)  # repeats were there to leave out (dp replicas, tree = auto's pick)
    # distinct = false: every layout in that order
    every = search.run_search(_spec(text.replace("top = 7", "top = 7; distinct = false")).searches["s"],
                              spec.policy, chunk=chunk)
    assert [{f: r[f] for f, _ in s.axes} for r in every["top"]] == [feasible[i][0] for i in order[:7]]

    # Pareto front by definition: no other point at least as good on both and better on one
    def dominated(i):
        li, ti = feasible[i][1]["latency_s"], feasible[i][1]["throughput_per_gpu"]
        for j, (_, d) in enumerate(feasible):
            lj, tj = d["latency_s"], d["throughput_per_gpu"]
            if (lj <= li and tj >= ti and (lj < li or tj > ti)) or (lj == li and tj == ti and j < i):
                return True
        return False

    # what each priced constraint cost: the best point (by latency, as ranked above) it removed
    for k in ("fits_memory", "max_overhead", "min_efficiency"):
        gone = [(i, lay, d) for i, (lay, d, f) in enumerate(pts) if f and f[0] == k]
        _, lay, d = min(gone, key=lambda g: (g[2]["latency_s"], -g[2]["throughput_per_gpu"], g[2]["gpus"], g[0]))
        best = got[k]["best_removed"]
        assert {f: best[f] for f, _ in s.axes} == lay, k
        _assert_same(best, d)
    # 90 % of the H100's 80 GB (std/gpus.ccost), the policy's max_memory
    assert got["fits_memory"]["limit_bytes"] == pytest.approx(0.9 * 80e9, rel=1e-12)
    assert "fits_memory cost: the best layout it removed" in output.search_text("s", doc)

    front = sorted((i for i in range(len(feasible)) if not dominated(i)),
                   key=lambda i: feasible[i][1]["latency_s"])
    assert [{f: r[f] for f, _ in s.axes} for r in doc["pareto"]] == [feasible[i][0] for i in front]
    assert len(front) >= 2


def test_pareto_front_hand_built():
    # (latency, throughput/GPU): a (1, 1); b (2, 3); c (2, 2) loses to b; d (3, 3) loses to b (slower, same
    # throughput); e (4, 5); f (1, 1) is a's twin, later in search order; g (5, 4) loses to e; h (0.5, 0.5).
    lat = np.array([1.0, 2.0, 2.0, 3.0, 4.0, 1.0, 5.0, 0.5])
    thr = np.array([1.0, 3.0, 2.0, 3.0, 5.0, 1.0, 4.0, 0.5])
    idx = np.arange(8)
    front = search.pareto_mask(lat, thr, idx)
    assert list(front) == [7, 0, 1, 4]  # h, a, b, e: fastest first


def test_pareto_front_is_the_same_whatever_the_chunking():
    spec = _spec(CONSTRAINED)
    s = spec.searches["s"]
    a = search.run_search(s, spec.policy, chunk=7)
    b = search.run_search(s, spec.policy, chunk=1 << 15)
    assert a == b


# --- size limit ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("objective", ["latency", "throughput_per_gpu", "gpus"])
@pytest.mark.parametrize("nan", [False, True])
def test_a_running_table_merged_chunk_by_chunk_keeps_what_merging_every_column_keeps(objective, nan):
    """`_Best.merge_rows`, what a search runs on each chunk (it gathers only the columns the selection reads,
    and for a top list without `distinct`, the best-removed points among them, only the chunk's points whose
    objective is at most its `top`-th best), keeps the same points in the same order as `_Best.merge` given
    every column of every point of the chunk; and without NaN, the `top` first by the objective's order
    (sorted here by Python tuples), ties broken by the next measures and search order. Few distinct values,
    so ties are everywhere; `nan`: half the points have no latency, half no throughput (then a chunk can
    have more than `top` points and fewer than `top` numbers: every point of it goes to the selection)."""
    rng = np.random.default_rng(11)
    n = 600
    cols = {"index": np.arange(n, dtype=np.int64), "gpus": rng.integers(1, 4, n).astype(float),
            "latency_s": rng.integers(1, 6, n) / 4, "throughput_per_gpu": rng.integers(1, 6, n) / 8,
            "cost_per_mtok_usd": np.full(n, np.nan), "time_to_train_s": np.full(n, np.nan),
            "train_cost_usd": np.full(n, np.nan), "gpu_days": np.full(n, np.nan),
            "target_cost": np.full(n, np.nan), "memory_bytes_per_gpu": rng.random(n)}
    if nan:
        cols["latency_s"][rng.random(n) < 0.5] = np.nan
        cols["throughput_per_gpu"][rng.random(n) < 0.5] = np.nan
    lat, thr, gpus = cols["latency_s"], cols["throughput_per_gpu"], cols["gpus"]
    key = {"latency": lambda i: (lat[i], -thr[i], gpus[i], i),
           "throughput_per_gpu": lambda i: (-thr[i], lat[i], gpus[i], i),
           "gpus": lambda i: (gpus[i], lat[i], -thr[i], i)}[objective]
    bounds = np.cumsum(rng.integers(1, 30, 60))  # chunks of 1 to 29 points
    chunks = [c for c in np.split(np.arange(n), bounds[bounds < n]) if c.size]
    for top, distinct in ((1, False), (7, False), (7, True)):
        select = search._top_select(objective, top, distinct)
        fast, plain = search._Best(), search._Best()
        kept = []
        for rows in chunks:
            rows = rows[rng.random(rows.size) < 0.8]  # the chunk's points that a constraint removed, say
            kept += rows.tolist()
            fast.merge_rows(cols, rows, lambda r: {k: v[r] for k, v in cols.items()}, select)
            plain.merge({k: v[rows] for k, v in cols.items()}, select)
            assert fast.cols.keys() == plain.cols.keys()
            for k in plain.cols:
                assert np.array_equal(fast.cols[k], plain.cols[k], equal_nan=True), (top, distinct, k)
        if not nan and not distinct:
            assert list(fast.cols["index"]) == sorted(kept, key=key)[:top]


def test_search_over_its_limit_is_refused_with_its_size():
    text = HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100_16node; phase = decode; tp = 8 }
search big { base = base; tp = range(1, 1000); pp = range(1, 1000); dp = range(1, 20) }
search small { base = base; tp = pow2(1, 8); batch = [1, 2, 4]; limit = 10 }
'''
    res = check_text(text, "specs/test-search.ccost")
    e402 = [d for d in res.errors if d.code == "E402"]
    assert len(e402) == 2
    # 1,000 × 1,000 × 20 = 20,000,000 > 10,000,000 (the default); 4 × 3 = 12 > 10
    assert "20,000,000 points (1,000 tp × 1,000 pp × 20 dp)" in e402[0].message
    assert "limit of 10,000,000" in e402[0].message
    assert "12 points (4 tp × 3 batch)" in e402[1].message and "limit of 10" in e402[1].message
    assert "limit =" in (e402[0].help or "")


def test_run_search_refuses_too_large_search_too():
    spec = _spec(CONSTRAINED)
    s = dataclasses.replace(spec.searches["s"], limit=100)
    with pytest.raises(CcostError) as exc:
        search.run_search(s, spec.policy)
    assert exc.value.diagnostics[0].code == "E402"
    assert "1,296 points" in exc.value.diagnostics[0].message


def test_unsearchable_field_and_max_gpus_beyond_cluster():
    text = HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100_16node; phase = decode; tp = 8 }
search s { base = base; tp = [1, 2]; master_weights = [fp32, bf16]; max_gpus = 256 }
'''
    res = check_text(text, "specs/test-search.ccost")
    msgs = [d.message for d in res.errors]
    assert any("cannot vary `master_weights`" in m for m in msgs), msgs
    assert any("max_gpus = 256 is more than cluster `hgx_h100_16node` has (128)" in m for m in msgs), msgs


# --- range functions -----------------------------------------------------------------------------------

def test_range_values():
    assert schema.range_values("pow2", [1, 64]) == [1, 2, 4, 8, 16, 32, 64]
    assert schema.range_values("pow2", [3, 40]) == [4, 8, 16, 32]
    assert schema.range_values("range", [1, 4]) == [1, 2, 3, 4]
    assert schema.range_values("range", [2, 10, 4]) == [2, 6, 10]
    assert isinstance(schema.range_values("range", [1, 10**7]), str)
    assert isinstance(schema.range_values("pow2", [0, 8]), str)
    assert isinstance(schema.range_values("range", [1.5, 4]), str)


def test_range_functions_in_sweeps_and_searches_not_in_plans():
    text = HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100; phase = decode; tp = 8 }
sweep sw { base = base; tp = pow2(1, 8) }
search se { base = base; tp = range(1, 8, 3); batch = pow2(4, 16) }
plan bad extends base { tp = pow2(1, 8) }
'''
    res = check_text(text, "specs/test-search.ccost")
    assert [d.code for d in res.errors] == ["E205"]
    assert "gives a list" in res.errors[0].message
    ok = check_text(text.replace("plan bad extends base { tp = pow2(1, 8) }", ""), "specs/t.ccost")
    assert not ok.errors
    assert dict(ok.spec.sweeps["sw"].fields)["tp"] == (1, 2, 4, 8)
    assert dict(ok.spec.searches["se"].axes) == {"tp": (1, 4, 7), "batch": (4, 8, 16)}


# --- policy thresholds ------------------------------------------------------------------------------------

def test_policy_thresholds_default_from_the_files_policy():
    base = HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100; phase = decode; tp = 8 }
search s { base = base; tp = [1, 2, 4, 8] USE }
'''
    with_policy = base + "policy { max_overhead = 25 %; min_efficiency = 55 % }\n"
    spec = _spec(with_policy.replace("USE", ""))
    st = search.settings(spec.searches["s"], spec.policy)
    assert (st.max_overhead, st.min_efficiency) == (0.25, 0.55)
    spec = _spec(with_policy.replace("USE", "; use_policy = false"))
    st = search.settings(spec.searches["s"], spec.policy)
    assert (st.max_overhead, st.min_efficiency) == (None, None)
    spec = _spec(base.replace("USE", "; min_efficiency = 80 %"))  # no policy block: off unless written
    st = search.settings(spec.searches["s"], spec.policy)
    assert (st.max_overhead, st.min_efficiency) == (None, 0.80)
    assert st.max_gpus == 8  # the cluster's GPUs


# --- eval and the progress bar --------------------------------------------------------------------------

def test_eval_document_and_text_show_searches(tmp_path):
    from ccost import output

    path = tmp_path / "s.ccost"
    path.write_text(CONSTRAINED.replace('import "std/', 'import "std/'))
    spec = _spec(CONSTRAINED.replace("top = 7", "top = 7; distinct = false"))
    doc = evaluate.results_document(evaluate.evaluate(spec))
    sec = doc["searches"]["s"]
    assert sec["points"] == 1296 and sec["objective"] == "latency" and len(sec["top"]) == 7
    assert sec["distinct"] is False and "each answer once" not in output.to_text(doc)
    once = evaluate.results_document(evaluate.evaluate(_spec(CONSTRAINED)))
    assert once["searches"]["s"]["distinct"] is True and "each answer once" in output.to_text(once)
    data = json.loads(output.to_json(doc))
    assert data["searches"]["s"]["constraints"][0]["constraint"] == "max_gpus"
    text = output.to_text(doc)
    assert "search s" in text and "Pareto front" in text and "top 7 by latency" in text


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal_after_a_second():
    from ccost.progress import Bar

    t = [0.0]
    pipe = io.StringIO()
    with Bar(pipe, clock=lambda: t[0]) as bar:
        for i in range(5):
            t[0] = i * 0.5
            bar("s", i, 4)
    assert pipe.getvalue() == ""

    tty = _FakeTTY()
    t[0] = 0.0
    with Bar(tty, clock=lambda: t[0]) as bar:
        bar("s", 0, 4)
        t[0] = 0.5
        bar("s", 1, 4)
        assert tty.getvalue() == ""  # under a second: nothing drawn
        t[0] = 1.5
        bar("s", 3, 4)
        assert "75 %" in tty.getvalue() and "3 / 4 points" in tty.getvalue()
    assert tty.getvalue().endswith("\r\x1b[K")  # erased at the end


# --- the other searchable fields: seq, overlap, cross_node ------------------------------------------------

PREFILL = HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100_16node; phase = prefill; batch = 4; seq = 2048; tp = 8 }
search s {
  base = base
  tp = [4, 8, 16, 32]; dp = [1, 2]; seq = [512, 4096]; overlap = [0 %, 25 %]
  cross_node = [auto, flat, hierarchical]; allreduce = [ring, one_shot, auto]; one_shot_volume = [egress, ring]
  fits_memory = false; use_policy = false
  top = 1000; distinct = false  # every layout, repeats included: the tests sample each variant
}
'''


@pytest.mark.parametrize("text", [PREFILL, PREFILL.replace("phase = prefill", "phase = decode")])
def test_seq_overlap_and_cross_node_points_agree_bit_for_bit(text):
    spec = _spec(text)
    s = spec.searches["s"]
    doc = search.run_search(s, spec.policy, chunk=5)
    assert doc["points"] == doc["feasible"] == 4 * 2 * 2 * 2 * 3 * 3 * 2  # every point is a plan here
    assert {r["cross_node"] for r in doc["top"]} == {"auto", "flat", "hierarchical"}
    assert {r["one_shot_volume"] for r in doc["top"]} == {"egress", "ring"}
    for rec in doc["top"]:
        _assert_same(rec, _alone(s, spec, rec))


def test_text_thins_a_long_front_and_the_review_draws_it():
    spec = _spec(DECODE.replace("OBJECTIVE", "latency"))
    doc = search.run_search(spec.searches["s"], spec.policy)
    front = doc["pareto"]
    long = dict(doc, pareto=front * 20)  # 20× as many rows as the text lists
    text = output.search_text("s", long)
    assert f"Pareto front, {len(front) * 20:,} layouts" in text and f"{output.TEXT_FRONT} of them" in text
    from ccost.report import build

    fig = build.search_figure("s", doc)
    assert fig is not None and fig.svg.startswith("<svg") and "Pareto front of search s" in fig.caption
    assert build.search_figure("s", dict(doc, pareto=[])) is None


def test_ccost_eval_prints_the_example_search(capsys):
    from pathlib import Path

    from ccost import cli

    spec = str(Path(__file__).resolve().parent.parent / "specs" / "search-llama70b-serving.ccost")
    assert cli.main(["eval", spec, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    sec = json.loads(out)["searches"]["serving"]
    # 4 tp × 5 pp × 8 dp × 6 batch × 3 algorithms, as the spec's header says
    assert sec["points"] == 2880 and sec["objective"] == "throughput_per_gpu"
    assert sec["top"] and all(p["gpus"] <= 64 and 8 % p["tp"] == 0 for p in sec["top"])
    assert "search" not in err  # no progress bar off a terminal
    assert cli.main(["eval", spec, "--plan", "tp8", "--format", "json"]) == 0
    assert "searches" not in json.loads(capsys.readouterr()[0])


# --- memory bounded by the chunk -------------------------------------------------------------------------

MEMORY = HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100_16node; phase = decode; batch = 16; seq = 8192; tp = 8 }
search s {
  base = base
  tp = pow2(1, 16); pp = [1, 2, 4, 8]; dp = DP; batch = range(1, 128); microbatches = [1, 2]
  max_gpus = 128
  limit = 1_000_000
}
'''


def test_memory_is_bounded_by_the_chunk_not_the_search():
    """A search 10× larger (dp = 1..40 instead of 1..4: 5·4·40·128·2 = 204,800 points against 20,480)
    peaks at the same traced memory with the same chunk: the blocks hold at most `chunk` points, and the
    running tables hold the top 10 and the front. One array of the larger search's points
    (204,800 × 8 B = 1.6 MiB) would break the 20 % bound over the smaller one's ~3 MiB peak."""
    import tracemalloc

    peaks = []
    for dp in ("range(1, 4)", "range(1, 40)"):
        spec = _spec(MEMORY.replace("DP", dp))
        s = spec.searches["s"]
        search.run_search(s, spec.policy, chunk=2048)  # imports and caches outside the measurement
        tracemalloc.start()
        try:
            doc = search.run_search(s, spec.policy, chunk=2048)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert doc["points"] == s.size == 5 * 4 * len(dict(s.axes)["dp"]) * 128 * 2
    assert peaks[1] <= 1.2 * peaks[0], peaks


# --- more micro-batches than sequences: not a plan -------------------------------------------------------

def test_more_microbatches_than_sequences_is_refused_and_never_priced_by_a_search(tmp_path, capsys):
    from ccost import cli

    # a plan: E401 at evaluation, on the microbatches field, with the fix
    path = tmp_path / "mb.ccost"
    path.write_text(HEADER + "plan p { model = llama3_70b; cluster = hgx_h100; phase = decode; tp = 8; pp = 1\n"
                    "  batch = 1; microbatches = 2 }\n", encoding="utf-8")
    assert cli.main(["eval", str(path)]) == 2
    err = capsys.readouterr().err
    assert "error[E401]" in err and "splits batch = 1 into microbatches = 2" in err and "microbatches ≤ 1" in err
    assert "Traceback" not in err
    # a search: batch [1, 4] × microbatches [1, 2, 8] has three such columns of six, (1, 2), (1, 8), (4, 8);
    # tp [1, 2, 4, 8] on one node are four layouts: 12 points removed before pricing, 12 priced
    spec = _spec(HEADER + '''
plan base { model = llama3_70b; cluster = hgx_h100; phase = decode; tp = 8 }
search s { base = base; tp = [1, 2, 4, 8]; batch = [1, 4]; microbatches = [1, 2, 8]; fits_memory = false
           distinct = false; top = 100 }
''')
    doc = search.run_search(spec.searches["s"], spec.policy, chunk=5)
    row = next(c for c in doc["constraints"] if c["constraint"] == "microbatches_at_most_batch")
    assert (row["tested"], row["failed"], row["removed"]) == (24, 12, 12)
    assert doc["priced"] == 12 and "best_removed" not in row
    assert all(p["microbatches"] <= p["batch"] for p in doc["top"] + doc["pareto"])
    assert len(doc["top"]) == doc["feasible"] == 12
    # a search that keeps the rule everywhere lists no such row
    assert not any(c["constraint"] == "microbatches_at_most_batch"
                   for c in search.run_search(_spec(CONSTRAINED.replace("batch = [1, 64, 512]", "batch = [64, 512]"))
                                              .searches["s"], spec.policy)["constraints"])


# --------------------------------------------------------------------------------------------------
# Search tables say which time is which; an imported file's searches are not re-run

ROOT = Path(__file__).resolve().parents[1]


def test_the_search_tables_explain_latency_beside_the_pipelined_step():
    from ccost import output, results
    from ccost.check import load_spec
    from ccost.evaluate import evaluate, results_document
    from ccost.report.build import search_section

    spec, _ = load_spec(str(ROOT / "specs" / "search-fleet.ccost"))
    doc = results_document(evaluate(spec))
    text = output.to_text(doc)
    note = output.search_columns_note()
    assert note.startswith("latency = one pass of the batch through every stage") and "pipelined step = " in note
    assert results.record("latency_s").meaning.split(";")[0] in note  # the results' own definitions
    header = next(line for line in text.splitlines() if "tokens/s/GPU" in line and "latency" in line)
    assert header.index("latency") < header.index("pipelined step")  # side by side, with the note below
    assert f"  {note}" in text
    section = search_section("fleet", doc["searches"]["fleet"])
    assert note in section.top.caption and note in section.pareto.caption


def test_a_spec_importing_a_file_with_a_search_does_not_run_that_search(tmp_path, monkeypatch):
    import shutil

    from ccost import search as SR
    from ccost.check import load_spec
    from ccost.evaluate import evaluate, own_searches

    shutil.copy(ROOT / "specs" / "search-fleet.ccost", tmp_path / "lib.ccost")
    (tmp_path / "top.ccost").write_text('import "lib.ccost"\nplan mine extends tp8 { batch = 16 }\n')
    (tmp_path / "overlay.ccost").write_text('import "lib.ccost"\npolicy { max_overhead = 20 % }\n')
    ran = []
    real = SR.search_documents
    monkeypatch.setattr(SR, "search_documents", lambda spec, *a: ran.append(sorted(spec.searches)) or real(spec, *a))
    top, _ = load_spec(str(tmp_path / "top.ccost"))
    assert "fleet" in top.searches and own_searches(top) == {}
    assert evaluate(top).searches == {} and ran == []  # before: the 665,280-point search ran again
    overlay, _ = load_spec(str(tmp_path / "overlay.ccost"))  # writes nothing to evaluate: runs what it imports
    assert list(evaluate(overlay).searches) == ["fleet"] and ran == [["fleet"]]
    lib, _ = load_spec(str(tmp_path / "lib.ccost"))
    assert list(own_searches(lib)) == ["fleet"]
