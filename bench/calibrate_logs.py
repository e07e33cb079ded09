"""Does the link block `ccost calibrate` prints predict the log it came from?

For every nccl-tests log given (default: specs/measured/*.txt), run the real
command, check the block it prints as a spec, and price every measured size with the cost core on that
link as a plan would (`auto` AllReduce on one node of the log's rank count). Prints the median error, the
worst error at >= 64 MiB, and the same for one α-β line (the block's alpha and bandwidth alone, the
spec-sheet form, priced with the algorithm the fit converts through, ring) for comparison.

    python bench/calibrate_logs.py [LOG ...]
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LARGE = 64 * 2**20


def block_for(log: str, extra: tuple[str, ...] = ()) -> str:
    from ccost.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["calibrate", log, "--name", "measured", *extra])
    if rc:
        raise SystemExit(f"ccost calibrate {log} failed ({rc})")
    return out.getvalue()


def link_of(text: str):
    from ccost.check import check_text

    res = check_text(text, "<calibrated>")
    errors = [d for d in res.diagnostics if d.code.startswith("E")]
    if errors:
        raise SystemExit(f"the printed block does not check: {errors}")
    return res.spec.links[0] if isinstance(res.spec.links, (list, tuple)) else next(iter(res.spec.links.values()))


def errors(log: str, extra: tuple[str, ...] = ()) -> dict:
    from ccost.model import costs
    from ccost.calibrate import fit_log, read_log

    fit = fit_log(read_log(log))
    link = link_of(block_for(log, extra))
    sizes = np.array([p.size for p in fit.points], dtype=float)
    times = np.array([p.time for p in fit.points])
    p = float(fit.ranks)
    alg = "auto" if fit.kind == "allreduce" else None
    full = costs.LinkParams.from_link(link)
    line = costs.LinkParams(link.alpha, link.effective_bandwidth, None, "line")
    out = {"log": Path(log).name, "test": fit.test, "ranks": fit.ranks}
    for name, lp, a in (("curve", full, alg), ("line", line, fit.algorithm if alg else None)):
        t = costs.group_cost(fit.kind, a, p, sizes, p, lp, None).chosen.time
        rel = np.abs(t - times) / times
        big = rel[sizes >= LARGE]
        out[name] = (float(np.median(rel)), float(big.max()) if big.size else None)
    return out


def main(argv: list[str]) -> int:
    logs = argv or sorted(str(p) for p in (ROOT / "specs" / "measured").glob("*.txt"))
    print(f"{'log':34} {'test':22} {'P':>3}  {'block median':>12} {'>=64MiB worst':>13}   "
          f"{'one line median':>15} {'>=64MiB worst':>13}")
    for log in logs:
        r = errors(log)
        def pct(x):
            return "-" if x is None else f"{100 * x:.1f} %"
        print(f"{r['log']:34} {r['test']:22} {r['ranks']:>3}  {pct(r['curve'][0]):>12} {pct(r['curve'][1]):>13}"
              f"   {pct(r['line'][0]):>15} {pct(r['line'][1]):>13}")
    multi = []
    for log in logs:
        from ccost.calibrate import read_log

        t = read_log(log).tests[0]
        if len(t.hosts) >= 2:
            multi.append(log)
    if multi:
        print("\nhierarchical (calibrate --intra specs/std/links.ccost:nvlink4: the spec-sheet NVLink 4 inside"
              " the node), the inter-node link's prediction of the whole log:")
        for log in multi:
            h = hierarchical(log)
            print(f"{Path(log).name:34} {h.nodes} nodes x {h.per_node}  median {100 * h.median_error:.1f} %"
                  f", >=64MiB worst " + ("-" if h.large_worst_error is None else f"{100 * h.large_worst_error:.1f} %")
                  + f"  (inter alpha {h.alpha * 1e6:.4g} us, bandwidth {h.bandwidth / 1e9:.4g} GB/s)")
    return 0


def hierarchical(log: str):
    from ccost.model import costs
    from ccost.calibrate import fit_log, read_log
    from ccost.calibrate.hier import fit_hierarchical
    from ccost.check import check_file

    links = check_file(str(ROOT / "specs" / "std" / "links.ccost")).spec.links
    intra = costs.LinkParams.from_link(links["nvlink4"], label="intra")
    parsed = read_log(log)
    return fit_hierarchical(fit_log(parsed), parsed.tests[0], intra, "nvlink4")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "compiler"))
    raise SystemExit(main(sys.argv[1:]))
