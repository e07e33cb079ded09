"""How long a design review takes, phase by phase, against the commit before the render work (the summary
review, the chart cache, HarfBuzz subsetting).

    .venv/bin/python bench/report_bench.py [SPEC] [--runs N] [--base COMMIT]

Default SPEC: worked example A1 (``specs/a1-tp-decode.ccost``). The bench checks out ``--base`` (default
``BASE``, the commit before the work) as a git worktree in a temporary folder and times, in the same run,
interleaved (base, new, base, new, ...) so that the load of a shared machine falls on both alike:

- the commands a user waits for, interpreter start included (``python -m ccost report SPEC -o TMP/
  --no-git``): the base's full review (HTML + PDF), and this tree's full review, ``--summary`` and
  ``--format html``; this tree's twice, with a chart cache of earlier runs (what a reviewer re-rendering
  gets) and with an empty one (the first render of a spec); as a user runs them, so this tree's PDF is
  rendered by the second process ``ccost report`` starts (``ccost.report.pdfproc``) where it can help;
- the phases of one render, in-process, in each tree: imports, check + evaluate, explain + view model
  (charts), the HTML, WeasyPrint's layout (HTML parse, style cascade, boxes, layout) and writing the PDF
  (draw, then fonts subset and the PDF's objects written).

Prints medians over N runs and each of this tree's times as a ratio to the base's full review (the render
work's targets: full review <= 0.40, --summary <= 0.25, HTML only <= 0.10). A benchmark, not a test: the times
depend on the machine and its load; the ratios much less.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASE = "9ba8958"  # the commit before the render work (render speed, --summary, --format html)
EPOCH = "1767225600"
TARGETS = {"full": 0.40, "summary": 0.25, "html": 0.10}

# Run in a fresh interpreter with the tree's compiler/ first on sys.path; prints one JSON object of seconds.
PHASES = r"""
import json, logging, os, sys, time
logging.disable(logging.WARNING)
T = time.perf_counter
out = {}
t = T(); import ccost.report, ccost.report.render; out["import ccost"] = T() - t
t = T()
try:
    from ccost.report.weasy import import_weasyprint  # as render_pdf imports it (new tree)
    weasyprint = import_weasyprint()
except ImportError:
    import weasyprint
out["import weasyprint"] = T() - t
t = T(); import matplotlib.pyplot; out["import matplotlib"] = T() - t
from ccost.check import load_spec
from ccost import evaluate as E
spec_path = sys.argv[1]
t = T(); spec, _ = load_spec(spec_path); doc = E.results_document(E.evaluate(spec)); out["check + evaluate"] = T() - t
t = T(); rev = ccost.report.review(spec_path, include_git=False); out["review: check .. view (charts)"] = T() - t
from ccost.report.render import render_html
t = T(); render_html(rev.view, "screen"); out["HTML (screen)"] = T() - t
t = T(); html = render_html(rev.view, "print"); out["HTML (print)"] = T() - t
from ccost.report.fetcher import DataOnlyFetcher
import contextlib
try:
    from ccost.report.fonts import harfbuzz_subsetting
except ImportError:
    harfbuzz_subsetting = contextlib.nullcontext
# as render_pdf runs WeasyPrint (new tree: without the cycle collector)
quiet_gc = getattr(ccost.report.render, "without_cycle_collection", contextlib.nullcontext)
# WeasyPrint's own steps, timed where they are called from weasyprint.document
import functools
import weasyprint.document as WD
steps = {}
def timing(fn, label):
    @functools.wraps(fn)
    def timed(*a, **k):
        t = T()
        try:
            r = fn(*a, **k)
            return list(r) if label == "layout" else r  # layout_document yields the pages
        finally:
            steps[label] = steps.get(label, 0.0) + T() - t
    return timed
WD.get_all_computed_styles = timing(WD.get_all_computed_styles, "style cascade")
WD.build_formatting_structure = timing(WD.build_formatting_structure, "boxes")
WD.layout_document = timing(WD.layout_document, "layout")
WD.Page.paint = timing(WD.Page.paint, "draw")
t = T()
with quiet_gc():
    h = weasyprint.HTML(string=html, base_url=None, url_fetcher=DataOnlyFetcher())
    out["  HTML parse"] = T() - t
    document = h.render()
out["WeasyPrint parse + layout"] = T() - t
for k in ("style cascade", "boxes", "layout"):
    out[f"  {k}"] = steps.get(k, 0.0)
out["pages"] = len(document.pages)
t = T()
with harfbuzz_subsetting(), quiet_gc():
    pdf = document.write_pdf()
out["write PDF (draw, fonts)"] = T() - t
out["  draw"] = steps.get("draw", 0.0)
out["  fonts + PDF objects"] = out["write PDF (draw, fonts)"] - out["  draw"]
if hasattr(ccost.report.render, "render_summary_html"):
    t = T(); s = ccost.report.render.render_summary_html(rev.view, "print")
    with harfbuzz_subsetting(), quiet_gc():
        d = weasyprint.HTML(string=s, base_url=None, url_fetcher=DataOnlyFetcher()).render()
        d.write_pdf()
    out["summary PDF (layout + write)"] = T() - t
    out["summary pages"] = len(d.pages)
print(json.dumps(out))
"""

# Which subsetter a tree's PDF fonts go through: ccost's answer where it has one, else WeasyPrint's own.
SUBSETTER = r"""
try:
    from ccost.report.fonts import subsetter
except ImportError:
    def subsetter():
        from weasyprint.text.ffi import harfbuzz, harfbuzz_subset
        ok = harfbuzz_subset is not None and harfbuzz.hb_version_atleast(4, 1, 0)
        return "libharfbuzz-subset" if ok else "fontTools"
print(subsetter())
"""


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout


PYCACHE: str | None = None  # set by main: a temporary PYTHONPYCACHEPREFIX
XDG: Path | None = None  # set by main: a temporary XDG_CACHE_HOME, shared by base and new


def env_for(tree: Path) -> dict[str, str]:
    # One cache folder for both trees: the parser's tables (which both have) are shared; the chart and
    # template caches (new only) are emptied before each "cold" run.
    env = dict(os.environ, SOURCE_DATE_EPOCH=EPOCH, PYTHONPATH=str(tree / "compiler"), XDG_CACHE_HOME=str(XDG))
    env.pop("CCOST_NO_CACHE", None)
    # Bytecode as an installed package has it (pip compiles .pyc), kept out of the trees: without it each
    # run recompiles every module it imports (~0.2 s), for base and new alike.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if PYCACHE:
        env["PYTHONPYCACHEPREFIX"] = PYCACHE
    return env


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spec", nargs="?", default="specs/a1-tp-decode.ccost",
                        help="spec to review, relative to the repository (default: worked example A1)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (median; default 5)")
    parser.add_argument("--base", default=BASE, help=f"the commit to compare with (default {BASE})")
    args = parser.parse_args(argv)
    global PYCACHE, XDG
    py = sys.executable
    if subprocess.run(["git", "cat-file", "-e", f"{args.base}^{{commit}}"], cwd=REPO,
                      capture_output=True).returncode:
        print(f"report_bench: the base commit {args.base} is not in this clone (a shallow clone?): "
              f"`git fetch --unshallow`, or name another with --base", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ccost-report-bench-") as tmp:
        tmp = Path(tmp)
        PYCACHE, XDG = str(tmp / "pycache"), tmp / "xdg"
        base = tmp / "base"
        git("worktree", "add", "--detach", "--quiet", str(base), args.base)
        try:
            return run(args, py, base, tmp)
        finally:
            git("worktree", "remove", "--force", str(base))


def forget_charts() -> None:
    """An empty chart and template cache: the first render of a spec."""
    for sub in ("charts", "templates"):
        shutil.rmtree(XDG / "ccost" / sub, ignore_errors=True)


def run(args, py: str, base: Path, tmp: Path) -> int:
    spec = args.spec
    out = str(tmp / "out") + "/"
    report = [py, "-m", "ccost", "report", spec, "-o", out, "--no-git"]
    commands = {  # label: (tree, extra arguments, chart cache: "warm", "cold" or None for the base)
        "base: full review (HTML + PDF)": (base, [], None),
        "full review, warm chart cache": (REPO, [], "warm"),
        "full review, cold chart cache": (REPO, [], "cold"),
        "--summary, warm": (REPO, ["--summary"], "warm"),
        "--summary, cold": (REPO, ["--summary"], "cold"),
        "--format html, warm": (REPO, ["--format", "html"], "warm"),
        "--format html, cold": (REPO, ["--format", "html"], "cold"),
    }
    # Prime the caches once (the parser's tables, then the charts: the first render of the spec), and
    # check that every command works.
    for label, (tree, extra, cache) in commands.items():
        timed(report + extra, tree, env_for(tree))
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(args.runs):
        for label, (tree, extra, cache) in commands.items():
            if cache == "cold":
                forget_charts()
            times[label].append(timed(report + extra, tree, env_for(tree)))  # (a cold run fills it again)
    runs: dict[str, list[dict]] = {"base": [], "new": []}
    for _ in range(args.runs):  # interleaved too
        for name, tree in (("base", base), ("new", REPO)):
            res = subprocess.run([py, "-c", PHASES, spec], cwd=tree, env=env_for(tree), check=True,
                                 capture_output=True, text=True)
            runs[name].append(json.loads(res.stdout.strip().splitlines()[-1]))
    phases = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}

    head = git("rev-parse", "--short", "HEAD").strip()
    print(f"spec: {spec}   base: {args.base}   this tree: {head} (+ uncommitted changes, if any)")
    paths = {name: subprocess.run([py, "-c", SUBSETTER], cwd=tree, env=env_for(tree), check=True,
                                  capture_output=True, text=True).stdout.strip()
             for name, tree in (("base", base), ("new", REPO))}
    print(f"font subsetting: base {paths['base']}, this tree {paths['new']}")
    print(f"medians of {args.runs} runs, interleaved; the machine's load varies, the ratios less so\n")
    print("phases of one render, in-process (s)")
    keys = list(dict.fromkeys(list(phases["base"]) + list(phases["new"])))
    print(f"  {'phase':<34} {'base':>8} {'new':>8}")
    for k in keys:
        b, n = phases["base"].get(k), phases["new"].get(k)
        fmt = (lambda v: f"{v:8.0f}") if "pages" in k else (lambda v: f"{v:8.3f}")
        print(f"  {k:<34} {fmt(b) if b is not None else '       -'} {fmt(n) if n is not None else '       -'}")
    med = {k: statistics.median(v) for k, v in times.items()}
    ref = med["base: full review (HTML + PDF)"]
    print("\ncommands, end to end (s), and as a ratio to the base's full review")
    for label, t in med.items():
        kind = "full" if label.startswith("full") else "summary" if "summary" in label else \
            "html" if "html" in label else None
        target = f"target <= {TARGETS[kind]:.2f}: {'met' if t / ref <= TARGETS[kind] else 'NOT met'}" \
            if kind else ""
        spread = f"[{min(times[label]):.2f} .. {max(times[label]):.2f}]"
        print(f"  {label:<34} {t:6.2f} {spread:>16}  {t / ref:5.2f}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
