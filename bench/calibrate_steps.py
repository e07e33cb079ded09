"""Time of ``ccost calibrate --steps`` against the rows of the file (issue 31, item 10): linear, and fast.

    .venv/bin/python bench/calibrate_steps.py [--rows 100,1000,10000] [--plans 10] [--folds 5]

Each file has N rows of measured TPOTs of the same ``--plans`` decode plans of
``bench/validation/inference.ccost`` (copied into a temporary project with the measured link it imports),
times drawn at random between 10 and 30 ms (seeded). The fit is the command's: read the file, check the
spec, fit with a k-fold hold-out. Prints seconds per file and per 1,000 rows, and the ratio of the
largest file's time to the smallest's against the ratio of their rows: the rows only add numpy work
(each distinct plan is priced once per step of the fit, on arrays of the stacks), so the time stays
nearly flat as the rows grow. Before this change 1,000 rows took 437 s and 10,000 did not finish in
600 s (issue 31).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "compiler"))

PLANS = ["v9_tp1", "v9_tp2", "v9_tp4", "v9_tp8", "v11b_tp2_b1", "v11b_tp4_b1", "v11b_tp8_b1", "v11b_tp2_b16",
         "v11b_tp8_b16", "v11e_llama70b"]


def project(root: Path) -> Path:
    here = root / "bench" / "validation"
    here.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "specs" / "measured").mkdir(parents=True)
    shutil.copy(REPO / "specs" / "measured" / "a100-nvlink.ccost", root / "specs" / "measured")
    shutil.copy(REPO / "bench" / "validation" / "inference.ccost", here)
    return here


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="100,1000,10000")
    ap.add_argument("--plans", type=int, default=10, help=f"distinct plans (at most {len(PLANS)})")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    from ccost.calibrate.files import read_steps_file
    from ccost.calibrate.steps import fit_steps

    rng = random.Random(args.seed)
    plans = PLANS[: max(1, min(args.plans, len(PLANS)))]
    sizes = [int(n) for n in args.rows.split(",")]
    seen = []
    with tempfile.TemporaryDirectory() as tmp:
        here = project(Path(tmp))
        for n in sizes:
            lines = ["plan,spec,tpot_ms"] + [f"{rng.choice(plans)},inference.ccost,{rng.uniform(10, 30):.3f}"
                                             for _ in range(n)]
            path = here / f"rows{n}.csv"
            path.write_text("\n".join(lines) + "\n")
            start = time.perf_counter()
            fit = fit_steps(read_steps_file(path), args.folds, path.name)
            wall = time.perf_counter() - start
            seen.append((n, wall))
            print(f"{n:>7,} rows of {len(plans)} plans, {args.folds}-fold hold-out: {wall:7.2f} s "
                  f"({1000 * wall / n:8.3f} s per 1,000 rows), fit median error {fit.median_error:.1%}",
                  flush=True)
    (n0, t0), (n1, t1) = seen[0], seen[-1]
    print(f"rows x{n1 / n0:g} -> time x{t1 / t0:.2f} (linear would be at most x{n1 / n0:g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
