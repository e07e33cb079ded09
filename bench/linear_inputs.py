"""Input size against time for three inputs that took time out of proportion:

    .venv/bin/python bench/linear_inputs.py [--repeat N] [--no-pdf]

* **the long-line review**: `specs/a1-tp-decode.ccost` with one comment line of n characters before it,
  reviewed as `ccost report` does (check, evaluate, view model, the print HTML and, unless `--no-pdf`,
  the PDF). Before: 50 kB took 11 s, 100 kB over 60 s, 200 kB 174 s (WeasyPrint laid the unbroken line
  out again for every printed line it wrapped onto, on the cover and in the source appendix);
* **the long sum**: `layers = 0+0+…` of n terms, checked (before: 1.3 M terms took 21–44 s and 1.9 GB to
  reach E006; now the parser stops at the 201st operator);
* **the large list**: a sweep list of n items, checked (before: 1 M items took 37 s and 1.4 GB to reach
  E402; now the parser stops at the 10,001st item).

For each it prints the input size, the median time of `--repeat` runs, the time per megabyte, and the
ratio of the largest size's time to the smallest's against the ratio of their sizes. Linear (or bounded,
as the two refused inputs now are) means the time ratio stays at or below the size ratio. A benchmark,
not a test: timings depend on the machine and its load (tests/test_linear_inputs.py checks the
diagnostics, without timing them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "compiler"))

from ccost.check import check_text  # noqa: E402

BASE = (ROOT / "specs" / "a1-tp-decode.ccost").read_text(encoding="utf-8")


def long_line(n: int) -> str:
    return "# " + "x" * n + "\n" + BASE


def long_sum(n: int) -> str:
    return "model m { layers = " + "+".join(["0"] * n) + "; hidden = 8192; params = 70e9 }\n"


def large_list(n: int) -> str:
    return ("plan p { tp = 1 }\nsweep s { base = p; tp = [" + ", ".join(str(1 + i % 64) for i in range(n))
            + "] }\n")


def review_time(text: str, pdf: bool) -> float:
    from ccost.report import render, review

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "long.ccost"
        path.write_text(text, encoding="utf-8")
        t = time.perf_counter()
        rev = review(path, include_git=False, cwd=Path(folder))
        html = render.render_html(rev.view, "print")
        if pdf:
            render.render_pdf(html)
        return time.perf_counter() - t


def check_time(text: str) -> tuple[float, str]:
    t = time.perf_counter()
    r = check_text(text, "bench.ccost")
    elapsed = time.perf_counter() - t
    first = r.diagnostics[0] if r.diagnostics else None
    return elapsed, f"{first.code} {first.message}" if first else "clean"


def run(label: str, sizes, make, timed, repeat: int) -> float:
    print(f"\n{label}")
    print(f"  {'size':>12}  {'bytes':>12}  {'median s':>9}  {'s per MB':>9}  first diagnostic")
    rows = []
    timed(make(sizes[0]))  # a warm-up: the first run imports the modules
    for n in sizes:
        text = make(n)
        results = [timed(text) for _ in range(repeat)]
        t = statistics.median(r[0] for r in results)
        note = results[0][1]
        mb = len(text.encode()) / 1e6
        rows.append((n, mb, t))
        print(f"  {n:>12,}  {len(text.encode()):>12,}  {t:>9.3f}  {t / mb:>9.3f}  {note}")
    (n0, mb0, t0), (n1, mb1, t1) = rows[0], rows[-1]
    ratio = t1 / t0
    print(f"  {n1 / n0:.0f}x the input: {ratio:.2f}x the time (linear: at most {mb1 / mb0:.0f}x)")
    return ratio / (mb1 / mb0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-pdf", action="store_true", help="time the review up to its print HTML only")
    args = ap.parse_args()
    what = "review up to the print HTML" if args.no_pdf else "review with its PDF"
    worst = max(
        run(f"long comment line ({what})", (25_000, 50_000, 100_000, 200_000), long_line,
            lambda text: (review_time(text, not args.no_pdf), ""), max(1, min(args.repeat, 2))),
        run("long sum `layers = 0+0+…` (check)", (10_000, 100_000, 1_300_000), long_sum,
            check_time, args.repeat),
        run("large list `tp = [...]` (check)", (10_000, 100_000, 1_000_000), large_list,
            check_time, args.repeat),
    )
    print(f"\nworst time ratio over size ratio: {worst:.2f} (at most 1: linear or better)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
