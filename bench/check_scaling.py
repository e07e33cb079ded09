"""Does checking stay linear in the size of the spec?

    .venv/bin/python bench/check_scaling.py [--repeat N]

Generates, in memory, specs that used to take time out of proportion to their length and times
``check_text`` plus the rendering of its diagnostics on each (median of ``--repeat`` runs, in-process, no interpreter start):

* an ``extends`` chain of 1,000 and of 4,000 plans (each plan extends the previous one), written in
  order and in reverse order (children before parents);
* 5,000 and 20,000 references to unknown names (each one an E101 with a did-you-mean search);
* 5,000 and 20,000 plans that each reference a model, a cluster and a link (no errors).

Prints the time of each and the ratio of the larger to the smaller. Four times the spec should cost about
four times the time; the target is at most 6x for the 4x longer chain. A benchmark, not a test:
timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "compiler"))

from ccost.check import check_text  # noqa: E402
from ccost.diagnostics import render_all  # noqa: E402

HEAD = """link nv { alpha = 2 us; bandwidth = 450 GB/s }
gpu g { memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s }
cluster c { gpu = g; intra_node = nv }
model m { layers = 80; hidden = 8192; params = 70e9 }
"""


def chain(n: int, reverse: bool = False) -> str:
    blocks = ["plan p0 { model = m; cluster = c; phase = decode }"]
    blocks += [f"plan p{i} extends p{i - 1} {{ batch = {i % 64 + 1} }}" for i in range(1, n)]
    if reverse:
        blocks.reverse()
    return HEAD + "\n".join(blocks) + "\n"


def unknown_refs(n: int) -> str:
    return HEAD + "\n".join(f"plan q{i} {{ model = mm{i}; cluster = c; phase = decode }}" for i in range(n)) + "\n"


def plans(n: int) -> str:
    return HEAD + "\n".join(f"plan q{i} {{ model = m; cluster = c; phase = decode; batch = {i % 64 + 1} }}"
                            for i in range(n)) + "\n"


def timed(text: str, repeat: int) -> tuple[float, int]:
    times, n_diag = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        result = check_text(text, "bench.ccost")
        render_all(result.diagnostics, result.sources)  # what `ccost check` prints: error reporting too
        times.append(time.perf_counter() - t)
        n_diag = len(result.diagnostics)
    return statistics.median(times), n_diag


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cases = [
        ("extends chain, in order", chain, 1000, 4000),
        ("extends chain, children first", lambda n: chain(n, reverse=True), 1000, 4000),
        ("unknown references (E101 each)", unknown_refs, 5000, 20000),
        ("plans with references, no errors", plans, 5000, 20000),
    ]
    worst = 0.0
    for label, make, small, large in cases:
        t_small, d_small = timed(make(small), args.repeat)
        t_large, d_large = timed(make(large), args.repeat)
        ratio = t_large / t_small
        worst = max(worst, ratio)
        print(f"{label:34s} {small:>6,}: {t_small:7.3f} s   {large:>6,}: {t_large:7.3f} s   "
              f"ratio {ratio:4.1f}x for {large // small}x the spec  ({d_small:,} / {d_large:,} diagnostics)")
    print(f"worst ratio {worst:.1f}x (target: at most 6x for 4x the spec)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
