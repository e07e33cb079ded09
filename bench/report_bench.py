"""How long the design review takes to render, next to `ccost eval` on the same spec.

    .venv/bin/python bench/report_bench.py [SPEC] [--runs N]

Default SPEC: the example whose results document is largest (the most plans, sweeps and collectives).
Prints, as medians over N runs:

- `ccost eval SPEC --format json` as a command (interpreter start included), and in-process
  (check + evaluate + document);
- the HTML review: check, evaluate, explain, view model with charts, screen template (in-process);
- the PDF review: print template + WeasyPrint (in-process, after the HTML's view model);
- `ccost report SPEC --format both` as a command, end to end.

A benchmark, not a test: the numbers depend on the machine and its load (2 shared cores here).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EPOCH = "1767225600"


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def largest_example() -> Path:
    from ccost.check import load_spec
    from ccost.evaluate import evaluate, results_document
    from ccost.output import to_json

    sizes = []
    for p in sorted((REPO / "specs").glob("*.ccost")):
        spec, _ = load_spec(str(p.relative_to(REPO)))
        sizes.append((len(to_json(results_document(evaluate(spec)))), p))
    return max(sizes)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spec", nargs="?", help="spec to render (default: the largest example)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    os.chdir(REPO)
    os.environ["SOURCE_DATE_EPOCH"] = EPOCH
    logging.disable(logging.WARNING)  # WeasyPrint's font-subsetting notices

    from ccost.check import load_spec
    from ccost.evaluate import evaluate, results_document
    from ccost.output import to_json
    from ccost.report import review
    from ccost.report.render import render_html, render_pdf

    spec_path = Path(args.spec) if args.spec else largest_example().relative_to(REPO)
    cli = [sys.executable, "-m", "ccost"]

    def run(cmd):
        subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    eval_cmd = median_time(lambda: run(cli + ["eval", str(spec_path), "--format", "json"]), args.runs)
    eval_inproc = median_time(lambda: to_json(results_document(evaluate(load_spec(str(spec_path))[0]))),
                              args.runs)
    holder = {}

    def html():
        holder["rev"] = review(spec_path, include_git=False, cwd=REPO)
        holder["html"] = render_html(holder["rev"].view, "screen")

    html_t = median_time(html, args.runs)
    def pdf():
        holder["pdf"] = render_pdf(render_html(holder["rev"].view, "print"))

    pdf_t = median_time(pdf, args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        report_cmd = median_time(lambda: run(cli + ["report", str(spec_path), "-o", f"{tmp}/", "--no-git"]),
                                 args.runs)
    import io

    import pypdf

    pages = len(pypdf.PdfReader(io.BytesIO(holder["pdf"])).pages)
    print(f"spec: {spec_path}  ({len(holder['html']):,} B of HTML, "
          f"{len(holder['pdf']):,} B / {pages} pages of PDF)")
    print(f"median of {args.runs} runs:")
    rows = [("ccost eval --format json (command)", eval_cmd, ""),
            ("eval in-process (check+evaluate+json)", eval_inproc, ""),
            ("HTML review in-process", html_t, f"({html_t / eval_inproc:.0f}x eval in-process)"),
            ("PDF from the view model", pdf_t, f"({pdf_t / eval_inproc:.0f}x eval in-process)"),
            ("ccost report --format both (command)", report_cmd,
             f"({report_cmd / eval_cmd:.1f}x the eval command)")]
    for label, t, note in rows:
        print(f"  {label:<40} {t * 1000:8.0f} ms  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
