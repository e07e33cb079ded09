"""How long `ccost check` takes on an example spec, interpreter start included, against `python -c pass`.

    .venv/bin/python bench/check_speed.py [SPEC] [--runs N]

Prints the median wall time of each (ms) and the ratio, and which heavy modules the check path imported
(pint, numpy, jinja2, weasyprint, matplotlib must not be among them). A benchmark, not a test: timings
depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("pint", "numpy", "jinja2", "weasyprint", "matplotlib", "yaml", "pygls", "lsprotocol", "argcomplete")


# As a user runs it: with compiled bytecode (some sandboxes set PYTHONDONTWRITEBYTECODE; a first, untimed
# run writes the __pycache__ folders, which .gitignore keeps out of git).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str], runs: int) -> float:
    subprocess.run(cmd, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", nargs="?", default="specs/a1-tp-decode.ccost")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    py = sys.executable
    base = wall([py, "-c", "pass"], args.runs)
    check = wall([py, "-m", "ccost", "check", args.spec], args.runs)
    probe = (
        "import sys; from ccost.cli import main; import contextlib, io\n"
        f"with contextlib.redirect_stdout(io.StringIO()): main(['check', {args.spec!r}])\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    loaded = subprocess.run([py, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()
    print(f"python -c pass      {base * 1000:7.1f} ms")
    print(f"ccost check {args.spec}  {check * 1000:7.1f} ms")
    print(f"ratio               {check / base:7.1f}x   (check alone: {(check - base) * 1000:.1f} ms)")
    print(f"heavy modules imported by check: {loaded or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
