"""The design review (issue 4): view models, rendering, safety, determinism, atomic writes, the CLI.

Most tests run on a hand-made results document shaped exactly like INTERFACE.md's example, with the A1
numbers of the reference notes (docs/examples.md) worked out by hand below, so they test the report and not the
engine. Tests at the end run the real pipeline (check -> evaluate -> explain -> report) on specs/.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from ccost import check
from ccost import spec as S

REPO = Path(__file__).resolve().parents[1]
EPOCH = "1767225600"  # 2026-01-01T00:00:00Z

# ---------------------------------------------------------------------------------------------------
# A hand-made A1 spec and results document (worked examples A1 and A4 of docs/examples.md), arithmetic written out.

ALPHA, NVLINK_BW, HBM = 2e-6, 450e9, 3.35e12
W = 141e9  # the notes' 141 GB of BF16 weights
M = 32 * 1 * 8192 * 2  # B·S·d·bytes = 524,288 B
N_AR = 2 * 80  # two AllReduces per layer
RING_HOPS, TREE_HOPS = 2 * (8 - 1), 2 * 3  # 14, 2·log2(8)
RING_VOL = 2 * (8 - 1) / 8 * M  # 917,504 B
COMPUTE = W / 8 / HBM  # 5.261 ms


def _plan_doc(title: str, algorithm: str, hops: int) -> dict:
    lat_each = ALPHA * hops
    bw_each = RING_VOL / NVLINK_BW
    latency, bandwidth = N_AR * lat_each, N_AR * bw_each
    comm = latency + bandwidth
    items = [
        (1, "per-GPU weight bytes and compute time", "pass", W / 8, None, "17.6 GB per GPU"),
        (2, "communication volume and hops per token", "pass", N_AR * hops, None, ""),
        (3, "α and β measured or spec-sheet", "warn", "spec sheet", "measured", "measure with nccl-tests"),
        (4, "T_comm = α·hops + β·volume", "pass", comm, None, ""),
        (5, "overhead T_comm / T_compute", "fail", comm / COMPUTE, 0.3, "> 30 %: reconsider"),
        (6, "reconsider the strategy if overhead > 30 %", "fail", comm / COMPUTE, 0.3, ""),
        (7, "TP divides n_kv_heads", "pass", 8, 8, "8 KV heads / TP 8"),
        (8, "TP group inside one NVLink domain", "pass", 8, 8, ""),
        (9, "efficiency = speedup / N", "pass", 0.73, 0.7, ""),
        (10, "pipeline bubble", "n/a", 0.0, None, "no pipeline parallelism"),
    ]
    return {
        "title": title, "gpus": 8, "weight_bytes_per_gpu": W / 8, "memory_bytes_per_gpu": W / 8 + 1e9,
        "fits_memory": True, "compute_time_s": COMPUTE, "comm_time_s": comm, "latency_term_s": latency,
        "bandwidth_term_s": bandwidth, "exposed_comm_s": comm, "step_time_s": COMPUTE + comm,
        "overhead": comm / COMPUTE, "speedup": 42.09e-3 / (COMPUTE + comm),
        "efficiency": 42.09e-3 / (COMPUTE + comm) / 8, "bubble": 0.0, "regime": "latency-bound",
        "collectives": [{
            "kind": "allreduce", "purpose": "tensor-parallel attention and FFN outputs",
            "algorithm": algorithm, "count": N_AR, "group_size": 8, "link": "nvlink4", "message_bytes": M,
            "hops": hops, "volume_bytes": RING_VOL, "latency_s": lat_each, "bandwidth_s": bw_each,
            "time_s": lat_each + bw_each}],
        "checklist": [{"id": i, "title": t, "status": s, "value": v, "threshold": th, "note": n}
                      for i, t, s, v, th, n in items],
    }


def _a4_points() -> list[dict]:
    # A4: total(N) = W/(N·BW) + α·c·L·2·log2 N, c = 2, L = 80, tree; bandwidth term taken as 0 here.
    t1 = W / HBM
    pts = []
    for n in (1, 2, 4, 8, 16, 32, 64):
        compute, latency = W / (n * HBM), ALPHA * 2 * 80 * 2 * math.log2(n)
        total = compute + latency
        pts.append({"tp": n, "step_time_s": total, "compute_time_s": compute, "comm_time_s": latency,
                    "latency_term_s": latency, "bandwidth_term_s": 0.0, "speedup": t1 / total,
                    "efficiency": t1 / total / n, "overhead": latency / compute})
    return pts


def a1_document() -> dict:
    return {
        "ccost": "0.1.0",
        "spec": "specs/a1-fixture.ccost",
        "plans": {"tp8": _plan_doc("TP=8 decode, batch 32", "ring", RING_HOPS),
                  "tp8_tree": _plan_doc("TP=8 decode, tree AllReduce", "tree", TREE_HOPS)},
        "sweeps": {"tp_scaling": {
            "title": "When does TP stop helping?", "base": "tp8_tree", "field": ["tp"],
            "points": _a4_points(), "time_optimal": {"tp": 64},
            "cost_optimal": {"0.8": {"tp": 4}, "0.7": {"tp": 8}, "0.5": {"tp": 16}},
            "continuous_optimum": W * math.log(2) / (2 * ALPHA * 2 * 80 * HBM)}},
        "compares": {"algorithms": {
            "title": "Ring or tree?", "by": "latency", "ranking": ["tp8_tree", "tp8"],
            "recommendation": "tp8_tree: its step time is 2.56 ms shorter than tp8's."}},
    }


def a1_steps(plan: str) -> list:
    hops = RING_HOPS if plan == "tp8" else TREE_HOPS
    def mk(name, desc, f, sub, result, kind="step"):
        return SimpleNamespace(name=name, description=desc, formula=f, substituted=sub, value=0.0, dim=(),
                               result=result, kind=kind, note=None, source=None)

    return [
        mk("α", "NVLink latency per hop", "α", "2 µs", "2 µs", "input"),
        mk("m", "message per AllReduce", "B·S·d·bytes", "32 × 1 × 8192 × 2 B", "524.3 kB"),
        mk("hops", f"{plan} hops per AllReduce", "2·(P − 1)" if plan == "tp8" else "2·log2(P)",
           "2 × (8 − 1)" if plan == "tp8" else "2 × log2(8)", str(hops)),
        mk("T_lat", "latency term", "n_AR·α·hops", f"160 × 2 µs × {hops}",
           "4.48 ms" if plan == "tp8" else "1.92 ms"),
    ]


def a1_spec(title: str = "NVLink 4 through NVSwitch", source: str = "spec sheet") -> S.Spec:
    link = S.Link("nvlink4", title, None, alpha=ALPHA, bandwidth=NVLINK_BW, source=source)
    gpu = S.Gpu("h100", "H100 SXM 80GB", None, memory=80e9, hbm_bandwidth=HBM, flops=989e12,
                achieved_flops=600e12)
    cluster = S.Cluster("hgx", None, None, gpu=gpu, nodes=1, gpus_per_node=8, intra_node=link)
    model = S.Model("llama3_70b", "Llama-3-70B", None, layers=80, hidden=8192, heads=64, kv_heads=8,
                    params=70.6e9, weight_bytes=W)
    # no stack named: the checker would give each plan the bundled default of its phase
    defaults = check.default_stacks()
    tp8 = S.Plan("tp8", "TP=8 decode, batch 32", None, model=model, cluster=cluster, phase="decode",
                 batch=32, tp=8, allreduce="ring", stack=defaults["decode"], stack_defaults=defaults)
    tree = S.Plan("tp8_tree", "TP=8 decode, tree AllReduce", None, model=model, cluster=cluster,
                  phase="decode", batch=32, tp=8, allreduce="tree", stack=defaults["decode"],
                  stack_defaults=defaults)
    return S.Spec(path="specs/a1-fixture.ccost", links={"nvlink4": link}, gpus={"h100": gpu},
                  clusters={"hgx": cluster}, models={"llama3_70b": model},
                  plans={"tp8": tp8, "tp8_tree": tree}, sweeps={}, compares={},
                  policy=S.Policy(None, None, None))


SPEC_TEXT = '''# A1 fixture
link nvlink4 "NVLink 4 through NVSwitch" { alpha = 2 us; bandwidth = 450 GB/s; source = "spec sheet" }
plan tp8 "TP=8 decode, batch 32" { model = llama3_70b; cluster = hgx; phase = decode; batch = 32; tp = 8 }
'''


@pytest.fixture
def a1_review(tmp_path):
    """A Review of the hand-made A1 document, with the spec text written to tmp_path."""
    from ccost.report import review_from

    def make(spec=None, doc=None, text=SPEC_TEXT, charts=True):
        path = tmp_path / "specs" / "a1-fixture.ccost"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        spec = spec or a1_spec()
        doc = doc or a1_document()
        return review_from(spec, doc, {p: a1_steps(p) for p in doc["plans"]}, spec_path=path,
                           include_git=False, environ={"SOURCE_DATE_EPOCH": EPOCH}, cwd=tmp_path,
                           charts=charts)
    return make


def render(rev, variant="screen") -> str:
    from ccost.report.render import render_html

    return render_html(rev.view, variant)


def section(html: str, ident: str) -> str:
    """The text of one <section id=...> of the review."""
    start = html.index(f'id="{ident}"')
    end = html.find("<section", start)
    return html[start:end if end != -1 else None]


# ---------------------------------------------------------------------------------------------------
# Content

def test_html_shows_each_plan_derivation_and_a1_numbers(a1_review):
    html = render(a1_review(charts=False))
    ring, tree = section(html, "plan-tp8"), section(html, "plan-tp8_tree")
    # worked example A1 (docs/examples.md), exact column: ring T_comm 4.806 ms, latency 4.480 ms, compute 5.261 ms,
    # tree T_comm 2.246 ms
    assert "4.806 ms" in ring and "4.48 ms" in ring and "5.261 ms" in ring
    assert "2.246 ms" in tree and "1.92 ms" in tree
    assert "524.3 kB" in ring and "917.5 kB" in ring  # message and per-GPU volume of one AllReduce
    # the derivation steps, formula -> substituted -> result
    assert "2·(P − 1)" in ring and "2 × (8 − 1)" in ring and "160 × 2 µs × 14" in ring
    assert "2·log2(P)" in tree and "160 × 2 µs × 6" in tree
    # overhead as a percentage of the document's fraction: 4.806 / 5.261 = 91.35 %, tree 42.7 %
    assert "91.4 %" in ring and "42.7 %" in tree


def test_checklist_has_ten_rows_per_plan(a1_review):
    html = render(a1_review(charts=False))
    checklist = section(html, "checklist")
    tables = checklist.split('<table class="data checklist">')[1:]
    assert len(tables) == 2
    for t in tables:
        assert t.count('<tr class="st-') == 10
    assert checklist.count("st-fail") == 4 and checklist.count("st-na") == 2


def test_summary_has_recommendation_key_numbers_and_verdict_counts(a1_review):
    html = render(a1_review(charts=False))
    summary = section(html, "summary")
    assert "tp8_tree: its step time is 2.56 ms shorter than tp8&#39;s." in summary
    assert "10.07 ms" in summary and "7.507 ms" in summary  # 5.261 + 4.806, 5.261 + 2.246
    # verdicts: 6 pass, 1 warn, 2 fail, 1 n/a per plan (counted from the fixture's list above)
    assert summary.count("<td class=\"num\">6</td><td class=\"num\">1</td><td class=\"num\">2</td>"
                         "<td class=\"num\">1</td>") == 2


def test_inputs_name_units_and_spec_sheet_vs_measured(a1_review):
    html = render(a1_review(spec=a1_spec(source="measured: nccl-tests all_reduce_perf, log.txt"),
                            charts=False))
    inputs = section(html, "inputs")
    assert "450 GB/s" in inputs and "2 µs" in inputs and "3.35 TB/s" in inputs and "600 TFLOP/s" in inputs
    assert "measured: nccl-tests all_reduce_perf, log.txt" in inputs
    html2 = render(a1_review(charts=False))
    assert "spec sheet" in section(html2, "inputs")


def test_assumptions_say_what_the_model_leaves_out(a1_review):
    text = section(render(a1_review(charts=False)), "assumptions")
    for topic in ("Congestion", "NCCL protocols", "Serving engine", "MoE routing", "One-shot volume",
                  "All-to-All volume"):
        assert topic in text
    # launch overheads are no longer left out: the stack profile that priced each plan charges them
    assert "Launch overhead" not in text and "stack profile " in text and "Priced under stack profile" in text
    assert "ring on nvlink4" in text and "tree on nvlink4" in text  # the algorithm each plan uses
    assert "Overlap assumed: 0 %" in text


def test_sweep_and_compare_sections_with_charts(a1_review):
    html = render(a1_review())
    sweeps = section(html, "sweeps")
    assert sweeps.count("<svg") == 2  # step-time split and efficiency
    assert "N* = W·ln2 / (2·α·c·L·BW) = 45.58" in sweeps  # worked example A4: exact 45.58
    assert "cost-optimal ≥ 70 %" in sweeps
    compares = section(html, "compares")
    assert compares.count("<svg") == 1 and "1. tp8_tree" in compares


def test_appendix_is_highlighted_and_line_numbered(a1_review):
    appendix = section(render(a1_review(charts=False)), "appendix")
    assert "specs/a1-fixture.ccost" in appendix
    assert "style=" in appendix  # Pygments inline styles, no stylesheet file
    assert re.search(r">\s*3\s*</span>", appendix)  # line number 3 of the three-line spec


def test_cover_provenance_stamp(a1_review, tmp_path):
    import hashlib

    html = render(a1_review(charts=False))
    cover = section(html, "cover")
    digest = hashlib.sha256(SPEC_TEXT.encode("utf-8")).hexdigest()
    assert digest in cover and "specs/a1-fixture.ccost" in cover
    assert "2026-01-01" in cover  # SOURCE_DATE_EPOCH 1767225600
    assert "not recorded" in cover and "0.1.0" in cover


def test_provenance_git_state(tmp_path):
    from ccost.report.provenance import git_state

    spec = tmp_path / "x.ccost"
    spec.write_text("# x\n")
    assert git_state([spec]) == "not in git"
    def run(*a):
        return subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    run("init", "-q")
    run("-c", "user.email=t@t", "-c", "user.name=t", "add", "x.ccost")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x")
    assert git_state([spec]).endswith("(clean)")
    spec.write_text("# changed\n")
    assert git_state([spec]).endswith("(spec files modified)")


def test_build_date_from_source_date_epoch():
    from ccost.report.provenance import build_date

    assert build_date({"SOURCE_DATE_EPOCH": "0"}) == "1970-01-01"
    assert build_date({"SOURCE_DATE_EPOCH": "1767225599"}) == "2025-12-31"
    with pytest.raises(ValueError, match="SOURCE_DATE_EPOCH"):
        build_date({"SOURCE_DATE_EPOCH": "yesterday"})
    from ccost.report.provenance import build_epoch

    assert build_epoch({"SOURCE_DATE_EPOCH": " 1767225600 "}) == 1767225600
    assert build_epoch({}) % 86400 == 0  # unset: the start of today (UTC), so a day's renders agree


# ---------------------------------------------------------------------------------------------------
# Safety

EVIL = '<script>alert(1)</script></table><img src="http://example.invalid/x.png"> file:///etc/passwd'


def _evil_review(a1_review, charts=False):
    doc = a1_document()
    doc["plans"]["tp8"]["title"] = EVIL
    doc["compares"]["algorithms"]["recommendation"] = EVIL
    return a1_review(spec=a1_spec(title=EVIL, source=EVIL), doc=doc,
                     text=SPEC_TEXT.replace("NVLink 4 through NVSwitch", EVIL.replace('"', "'")),
                     charts=charts)


@pytest.mark.parametrize("variant", ["screen", "print"])
def test_spec_strings_are_escaped(a1_review, variant):
    html = render(_evil_review(a1_review), variant)
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;/table&gt;" in html
    # every </table> closes a table the template opened
    assert html.count("</table>") == html.count("<table")


@pytest.mark.slow
def test_pdf_of_hostile_spec_fetches_nothing(a1_review):
    from ccost.report.fetcher import DataOnlyFetcher
    from ccost.report.render import render_pdf

    spy = DataOnlyFetcher()  # the renderer's own fetcher; it records every URL WeasyPrint asks for
    # with charts: their internal references (clip paths, markers) must not reach the fetcher either
    pdf = render_pdf(render(_evil_review(a1_review, charts=True), "print"), fetcher=spy)
    assert pdf.startswith(b"%PDF")
    assert spy.requested == []  # not a single URL, not even a data: one


def test_fetcher_refuses_everything_but_data_uris():
    from ccost.report.fetcher import BlockedFetch, DataOnlyFetcher

    f = DataOnlyFetcher()
    for url in ("http://example.invalid/x.png", "https://example.invalid/", "file:///etc/passwd",
                "ftp://example.invalid/x"):
        with pytest.raises(BlockedFetch):
            f.fetch(url)
    assert f.fetch("data:text/plain;base64,aGk=").read() == b"hi"
    assert f.requested[-1].startswith("data:")


@pytest.mark.slow
def test_pdf_renderer_uses_the_fetcher_and_stops_on_a_blocked_url():
    # If a template ever referenced an outside resource, the render must fail, not silently fetch it.
    from ccost.report.fetcher import BlockedFetch, DataOnlyFetcher
    from ccost.report.render import render_pdf

    spy = DataOnlyFetcher()
    with pytest.raises(BlockedFetch):
        render_pdf('<html><body><img src="file:///etc/passwd"><p>x</p></body></html>', fetcher=spy)
    assert spy.requested == ["file:///etc/passwd"]


# ---------------------------------------------------------------------------------------------------
# Determinism and atomic writes

def test_html_and_yaml_are_byte_identical_across_builds(a1_review, tmp_path):
    from ccost.report import write_review

    a, b = a1_review(), a1_review()
    assert render(a) == render(b) and render(a, "print") == render(b, "print")
    pa = write_review(a, {"html": tmp_path / "a.html", "yaml": tmp_path / "a.yaml"})
    pb = write_review(b, {"html": tmp_path / "b.html", "yaml": tmp_path / "b.yaml"})
    for x, y in zip(pa, pb):
        assert x.read_bytes() == y.read_bytes()


@pytest.mark.slow
def test_pdf_is_byte_identical_under_source_date_epoch(a1_review, tmp_path, monkeypatch):
    from ccost.report import write_review

    # fontTools stamps font subsets with the clock unless SOURCE_DATE_EPOCH is set; write_review sets it
    # from the provenance, whatever the environment says.
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    one = write_review(a1_review(), {"pdf": tmp_path / "1.pdf"})[0].read_bytes()
    two = write_review(a1_review(), {"pdf": tmp_path / "2.pdf"})[0].read_bytes()
    assert one == two


def test_failed_render_leaves_the_previous_review_in_place(a1_review, tmp_path, monkeypatch):
    from ccost.report import render as R
    from ccost.report import write_review

    out = tmp_path / "out"
    out.mkdir()
    paths = {"html": out / "r.html", "pdf": out / "r.pdf", "yaml": out / "r.yaml"}
    for p in paths.values():
        p.write_bytes(b"previous " + p.suffix.encode())

    def broken(*_a, **_k):
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(R, "render_pdf", broken)
    with pytest.raises(RuntimeError):
        write_review(a1_review(charts=False), paths)
    for p in paths.values():
        assert p.read_bytes() == b"previous " + p.suffix.encode()  # html was rendered, yet not replaced
    assert sorted(x.name for x in out.iterdir()) == ["r.html", "r.pdf", "r.yaml"]  # no temp left


def test_output_paths(tmp_path):
    from ccost.report import output_paths

    d = output_paths("specs/a1-tp-decode.ccost", None, cwd=tmp_path)
    assert d == {k: tmp_path / "reports" / f"a1-tp-decode.{k}" for k in ("html", "pdf", "yaml")}
    d = output_paths("specs/a1.ccost", "out/review.pdf", "pdf", cwd=tmp_path)
    assert d == {"pdf": tmp_path / "out/review.pdf", "yaml": tmp_path / "out/review.yaml"}
    d = output_paths("specs/a1.ccost", "out/", "html", cwd=tmp_path)
    assert d == {"html": tmp_path / "out/a1.html", "yaml": tmp_path / "out/a1.yaml"}


# ---------------------------------------------------------------------------------------------------
# The PDF, read back

@pytest.mark.slow
def test_pdf_pages_text_and_running_header(a1_review, tmp_path):
    import pypdf
    from ccost.report import write_review

    pdf = write_review(a1_review(), {"pdf": tmp_path / "r.pdf"})[0]
    reader = pypdf.PdfReader(str(pdf))
    pages = [p.extract_text() for p in reader.pages]
    assert reader.metadata["/CreationDate"].startswith("D:20260101")  # the provenance date, not the clock
    assert reader.metadata["/Title"] == "Design review: a1-fixture"
    # Every chapter starts a page, and in this small review each fits on one: cover, summary, inputs,
    # plan tp8, plan tp8_tree, checklist, sweeps, comparisons, assumptions, appendix = 10 pages.
    assert len(pages) == 10
    starts = ["ccost design review", "Summary", "Inputs", "Plan tp8", "Plan tp8_tree",
              "The estimation checklist", "Sweeps", "Comparisons",
              "Assumptions and what the model leaves out", "Appendix: the spec"]
    for i, (text, title) in enumerate(zip(pages, starts), 1):
        assert f"page {i} of 10" in text
        assert title in text, (i, title)
        if i > 1:
            assert "a1-fixture" in text  # running header: the spec name
    assert "SHA-256" in pages[0] and "2026-01-01" in pages[0]
    assert "4.806 ms" in pages[3] and "2.246 ms" in pages[4]
    assert pages[5].count("PASS") == 12  # 6 pass rows per plan


def test_html_ids_are_unique_with_several_charts(a1_review):
    # matplotlib numbers ids per figure (axes_1, ...); three charts in one page must not clash.
    html = render(a1_review())
    ids = re.findall(r' id="([^"]+)"', html)
    assert html.count("<svg") == 3 and len(ids) == len(set(ids))
    for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', html):
        assert ref in ids, ref


# ---------------------------------------------------------------------------------------------------
# The real pipeline on the example specs: check -> evaluate -> explain -> review

A1_SPEC = REPO / "specs" / "a1-tp-decode.ccost"


@pytest.fixture(scope="module")
def a1_real():
    """The review of specs/a1-tp-decode.ccost (HTML, screen variant) and `ccost eval --format json`."""
    import json

    from ccost.cli import main
    from ccost.report import review

    old = Path.cwd()
    os.chdir(REPO)
    try:
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["eval", "specs/a1-tp-decode.ccost", "--format", "json"]) == 0
        rev = review(Path("specs/a1-tp-decode.ccost"), include_git=False,
                     environ={"SOURCE_DATE_EPOCH": EPOCH}, cwd=REPO)
    finally:
        os.chdir(old)
    return render(rev), json.loads(buf.getvalue()), rev


def test_real_review_shows_the_numbers_of_eval_json(a1_real):
    from ccost.report.view import KEY_NUMBERS, fmt_value

    html, doc, _ = a1_real
    assert doc["plans"], "the example defines plans"
    for name, plan in doc["plans"].items():
        text = section(html, f"plan-{name}")
        for key in KEY_NUMBERS:
            if key in plan:
                assert fmt_value(key, plan[key]).replace("'", "&#39;") in text, (name, key)
        for c in plan["collectives"]:
            assert fmt_value("time_s", c["time_s"]) in text


def test_real_review_has_no_checkout_paths(a1_real):
    # committed reviews must not depend on where the repository is checked out
    html, _, _ = a1_real
    assert str(REPO) not in html and "specs/a1-tp-decode.ccost" in html


def test_real_review_a1_exact_numbers(a1_real):
    # worked example A1 (docs/examples.md), exact column: ring 4.806 ms, tree 2.246 ms, one-shot 1.606 ms (ring-volume
    # convention), compute 141 GB / 8 / 3.35 TB/s = 5.261 ms, 160 AllReduces of 512 KiB.
    html, doc, _ = a1_real
    by_algorithm = {p["collectives"][0]["algorithm"]: n for n, p in doc["plans"].items()}
    expect = {"ring": "4.806 ms", "tree": "2.246 ms", "one_shot": "1.606 ms"}
    for algorithm, t_comm in expect.items():
        text = section(html, f"plan-{by_algorithm[algorithm]}")
        assert t_comm in text and "5.261 ms" in text and "524.3 kB" in text and "160" in text


def test_real_review_has_every_derivation_step(a1_real):
    from ccost.check import load_spec
    from ccost.evaluate import explain

    html, doc, _ = a1_real
    spec, _ = load_spec(str(A1_SPEC))
    for name in doc["plans"]:
        text = section(html, f"plan-{name}")
        steps = explain(spec, name)
        assert len(steps) > 20
        for s in steps:
            assert s.result.replace("'", "&#39;") in text, (name, s.name)
            if s.kind != "input":
                assert s.formula in text, (name, s.name)


def test_real_review_checklist_rows(a1_real):
    html, doc, _ = a1_real
    checklist = section(html, "checklist")
    tables = checklist.split('<table class="data checklist">')[1:]
    assert len(tables) == len(doc["plans"])
    for table, plan in zip(tables, doc["plans"].values()):
        ids = re.findall(r'<tr class="st-[a-z]+"><td class="num">(\d+)</td>', table)
        # the notes' ten items, in order (the engine may add items after them)
        assert ids[:10] == [str(i) for i in range(1, 11)]
        assert len(ids) == len(plan["checklist"])


def test_cli_report_writes_and_prints_paths(tmp_path, capsys, monkeypatch):
    from ccost.cli import main

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    assert main(["report", "specs/a1-tp-decode.ccost", "-o", f"{tmp_path}/", "--format", "html"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / "a1-tp-decode.html"), str(tmp_path / "a1-tp-decode.yaml")]
    assert (tmp_path / "a1-tp-decode.html").read_bytes().startswith(b"<!DOCTYPE html>")
    # the YAML is the results document, byte for byte what `ccost eval --format yaml` prints
    assert main(["eval", "specs/a1-tp-decode.ccost", "--format", "yaml"]) == 0
    assert (tmp_path / "a1-tp-decode.yaml").read_text(encoding="utf-8") == capsys.readouterr().out


def test_cli_report_bad_spec_is_a_diagnostic(tmp_path, capsys, monkeypatch):
    from ccost.cli import main

    bad = tmp_path / "bad.ccost"
    bad.write_text('link l { alpha = 2 }\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.ccost:1" in err and "Traceback" not in err
    assert not (tmp_path / "reports").exists()  # nothing written


@pytest.mark.slow
def test_committed_reports_are_current():
    """reports/ holds the reviews of specs/*.ccost; regenerate with `python -m ccost.report.regen`."""
    from ccost.report.regen import example_specs, stale

    assert example_specs(), "specs/ has example specs"
    bad = stale()
    assert not bad, f"stale reviews {bad}: run `python -m ccost.report.regen` and commit reports/"


@pytest.mark.slow
def test_pdf_byte_identical_across_processes(tmp_path):
    # two runs of the CLI, one rendering the PDF in a second process (ccost.report.pdfproc), one in its own
    outs = []
    for i, pdf_process in ((1, "1"), (2, "0")):
        env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, "CCOST_PDF_PROCESS": pdf_process}
        out = tmp_path / f"run{i}/"
        subprocess.run([sys.executable, "-m", "ccost", "report", "specs/a1-tp-decode.ccost", "-o", f"{out}/",
                        "--format", "pdf", "--no-git"], cwd=REPO, env=env, check=True, capture_output=True)
        outs.append((out / "a1-tp-decode.pdf").read_bytes())
    assert outs[0] == outs[1] and outs[0].startswith(b"%PDF")


def test_cli_report_malformed_source_date_epoch(tmp_path, capsys, monkeypatch):
    from ccost.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "last tuesday")
    assert main(["report", str(A1_SPEC)]) == 2
    err = capsys.readouterr().err
    assert "E504" in err and "SOURCE_DATE_EPOCH" in err and "Traceback" not in err
    assert not (tmp_path / "reports").exists()


def test_screen_and_print_variants(a1_review):
    rev = a1_review(charts=False)
    screen, printed = render(rev, "screen"), render(rev, "print")
    assert "@page" not in screen and 'class="screen"' in screen
    assert "size: A4" in printed and "counter(pages)" in printed and 'class="print"' in printed
    # self-contained: no stylesheet links, scripts or remote references in either
    for html in (screen, printed):
        assert "<link" not in html and "<script" not in html
        assert "http://" not in html and "https://" not in html  # (SVG namespaces only come with charts)


def test_real_review_of_a_search(monkeypatch):
    from ccost.report import review

    monkeypatch.chdir(REPO)
    rev = review(Path("specs/search-llama70b-serving.ccost"), include_git=False, cwd=REPO, charts=False)
    html = render(rev)
    searches = section(html, "searches")
    doc = rev.document["searches"]
    for name, s in doc.items():
        assert f'id="search-{name}"' in searches
        for c in s["constraints"]:
            assert f"<td>{c['constraint']}</td>" in searches
        assert len(s["top"]) >= 1


def test_opening_comment_for_the_cover():
    from ccost.report.build import opening_comment

    assert opening_comment("# TP=8 decode.\n# More detail.\nlink x {}") == "TP=8 decode."
    assert opening_comment("# Which layout\n# is fastest?\n") == "Which layout is fastest?"
    assert opening_comment("#\n# After a blank comment line.\n") == "After a blank comment line."
    assert opening_comment("link x { alpha = 2 us }  # not a header") == ""
    assert opening_comment("# a\n# b\n# c\n# d\n# e\n") == "a b c d"  # at most four lines


@pytest.mark.slow
def test_committed_pdfs_match_their_specs():
    """Each committed PDF is the review of the current spec: its cover carries the spec's SHA-256."""
    import hashlib

    import pypdf

    from ccost.report.regen import example_specs

    for spec in example_specs():
        pdf = REPO / "reports" / f"{spec.stem}.pdf"
        assert pdf.is_file(), f"{pdf.name} missing: run `python -m ccost.report.regen`"
        reader = pypdf.PdfReader(str(pdf))
        cover = reader.pages[0].extract_text()
        digest = hashlib.sha256((REPO / spec).read_bytes()).hexdigest()
        assert digest in cover.replace("\n", ""), f"{pdf.name} is stale: run `python -m ccost.report.regen`"
        assert f"page {len(reader.pages)} of {len(reader.pages)}" in reader.pages[-1].extract_text()


def _boxes_past_right_margin(html: str) -> list[str]:
    """Laid-out boxes of the PDF that end right of the page's content area (cut or in the margin), or
    start left of it. WeasyPrint's own layout boxes: what the PDF draws, not what the HTML asks for."""
    import weasyprint

    from ccost.report.fetcher import DataOnlyFetcher

    def walk(box):
        yield box
        for child in getattr(box, "children", None) or ():
            yield from walk(child)

    out = []
    document = weasyprint.HTML(string=html, url_fetcher=DataOnlyFetcher()).render()
    for number, page in enumerate(document.pages, 1):
        root = page._page_box
        left = root.content_box_x()
        right = left + root.width
        for box in walk(root):
            if box is not root and not type(box).__name__.startswith("Margin"):
                over = box.position_x + box.margin_width() - right
                if over > 0.5:
                    out.append(f"page {number}: {getattr(box, 'element_tag', '?')} {over:.1f}px over")
                if box.position_x < left - 0.5:
                    out.append(f"page {number}: {getattr(box, 'element_tag', '?')} "
                               f"{left - box.position_x:.1f}px left of the margin")
    return out


def test_the_margin_check_sees_a_table_past_the_margin():
    # A4 less 2 x 15 mm margins is 180 mm wide: a 200 mm table and one unbreakable cell too wide for the
    # page both stick out; a table of the page's width does not.
    css = "<style>@page { size: A4; margin: 15mm } body { margin: 0 }</style>"
    assert _boxes_past_right_margin(css + '<table style="width: 200mm"><tr><td>x</td></tr></table>')
    assert _boxes_past_right_margin(css + "<table><tr><td style='white-space: nowrap'>" + "W" * 200
                                    + "</td></tr></table>")
    assert _boxes_past_right_margin(css + '<table style="width: 180mm"><tr><td>x</td></tr></table>') == []


BUNDLED = sorted(p.stem for p in (REPO / "specs").glob("*.ccost"))


@pytest.mark.slow
@pytest.mark.parametrize("spec", [None] + BUNDLED)
def test_nothing_overflows_the_page(spec, a1_review, monkeypatch):
    # The fixture, and every example the repository ships, full review and summary: every box stays
    # inside the A4 content area (deepseek-v3-train's cost table once ended 14 px past the margin).
    from ccost.report import review
    from ccost.report.render import render_summary_html

    if spec is None:
        # with a URL for a source and a title that is one long word: they must wrap, not widen tables
        url = "measured: https://example.invalid/" + "a-long-path-segment/" * 6 + "log.txt"
        rev = a1_review(spec=a1_spec(title="NVLink" * 14, source=url))
        assert _boxes_past_right_margin(render(rev, "print")) == []
        return
    monkeypatch.chdir(REPO)
    rev = review(Path(f"specs/{spec}.ccost"), include_git=False, cwd=REPO)
    assert _boxes_past_right_margin(render(rev, "print")) == []
    assert _boxes_past_right_margin(render_summary_html(rev.view, "print")) == []


def test_soft_wrap_breaks_only_long_words():
    from ccost.report.render import soft_wrap

    zw = "\u200b"
    assert soft_wrap("nvlink4 — NVLink 4 through NVSwitch") == "nvlink4 — NVLink 4 through NVSwitch"
    assert soft_wrap("see https://example.invalid/a/b") == f"see https:{zw}/{zw}/{zw}example.{zw}invalid/{zw}a/{zw}b"
    assert soft_wrap("x" * 50) == "x" * 24 + zw + "x" * 24 + zw + "xx"
    assert soft_wrap("<script>alert(1)</script>").replace(zw, "") == "<script>alert(1)</script>"


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                          check=True, capture_output=True)


def test_dirty_flag_of_a_plans_repository_whose_spec_imports_std(tmp_path):
    """Issue 26 item 4: a spec importing `std/` showed `<rev> (dirty flag unknown)`: git was asked about
    the bundled library's path, outside the plans repository (the ccost checkout's std/ is another
    repository, an installed one none). The flag is judged on the spec's files in its own repository."""
    from ccost.check import load_spec
    from ccost.report.provenance import git_state

    repo = tmp_path / "plans"
    (repo / "specs").mkdir(parents=True)
    spec = repo / "specs" / "p.ccost"
    spec.write_text('import "std/gpus.ccost"\nimport "hw.ccost"\n')
    (repo / "specs" / "hw.ccost").write_text("link l { alpha = 2 us; bandwidth = 450 GB/s }\n")
    _git(repo, "init", "-q")
    files = [Path(f) for f in load_spec(str(spec))[0].files]
    assert any("std" in str(f) and "gpus.ccost" in str(f) for f in files) and len(files) >= 3
    assert git_state(files) == "no commit yet (spec files not committed)"  # before: "not in git"
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "plans")
    head = _git(repo, "rev-parse", "--short=12", "HEAD").stdout.decode().strip()
    assert git_state(files) == f"{head} (clean)"  # before: "(dirty flag unknown)"
    (repo / "specs" / "hw.ccost").write_text("link l { alpha = 3 us; bandwidth = 450 GB/s }\n")
    assert git_state(files) == f"{head} (spec files modified)"  # an import changed


def test_the_review_cover_of_a_committed_spec_importing_std_says_clean(tmp_path):
    from ccost.report import review

    repo = tmp_path / "plans"
    repo.mkdir()
    spec = repo / "a1.ccost"
    shutil.copy(REPO / "specs" / "a1-tp-decode.ccost", spec)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "plans")
    stamp = review(spec, cwd=repo).view.provenance
    assert stamp.git.endswith("(clean)") and "unknown" not in stamp.git
