"""Fuzz the whole pipeline with mutated specs (issue 11, item 7): no input may cause an internal error.

    .venv/bin/python bench/fuzz.py [--specs 100000] [--explain 10000] [--review 50] [--seed N] [--jobs 2]

Sources: the shipped example specs (specs/*.ccost), the bad-input corpus (tests/bad/*.ccost), the hostile
cases of issue 11 (tests/hostile/*.ccost) and specs drawn from the schema's ranges (tests/plan_gen.py).
Each mutant gets 1-4 edits: a token deleted, inserted, duplicated or swapped, a character replaced, or a
number replaced by a hostile one (0, -1, 5e-324, 1e-320, 1e308, 1e400, 2**64, ...).

Every mutant goes through ``check``; each that checks clean goes through ``eval`` (the results document).
The first ``--explain`` of those also go through ``explain`` of every plan and the text, JSON and YAML
writers, and ``--review`` of them through the HTML review (view model, charts, template). Anything that
raises other than a ``CcostError`` (the diagnostics every user error becomes) is an internal error: the
spec is saved under ``--out`` and counted. A search larger than ``--max-points`` is checked but not
evaluated (pricing 10 million layouts is slow, not wrong; bench/search.py measures that), and counted.

Prints the seed first (re-run with ``--seed`` to reproduce), then counts and the wall time. Exit 1 when
there was an internal error. A benchmark, not a test: the suite runs a small version (tests/test_fuzz_pipeline.py).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import random
import re
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "compiler"))
sys.path.insert(0, str(REPO / "tests"))

HOSTILE_NUMBERS = ["0", "-1", "5e-324", "1e-320", "1e-300", "1e308", "1.7976931348623157e308", "1e400",
                   "18446744073709551616", "1e15", "1e-9", "0.5", "1e9", "999999999999", "-0", "1e-6",
                   "1048577", "1048576"]
TOKENS = ["{", "}", "=", ";", "\n", "(", ")", "[", "]", ",", ".", "+", "-", "*", "/", "#", '"', "%",
          "0", "1e400", "2.5", "-1", "us", "s", "B", "GB/s", "TFLOP/s", "tp", "pp", "ep", "dp", "alpha",
          "plan", "link", "gpu", "sweep", "search", "compare", "extends", "import", '"std/gpus.ccost"',
          '"../x.ccost"', '"/etc/passwd"', "true", "h100", "ring", "tree", "auto", "pow2(1, 64)", "range(1, 9)",
          "µs", "\t", "\\", "é", "\x1b[2J", "\x07", "decode", "prefill", "train", "batch", "seq", "overlap"]
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def sources() -> list[tuple[str, str]]:
    out = []
    for folder in ("specs", "tests/bad", "tests/hostile"):
        for p in sorted((REPO / folder).glob("*.ccost")):
            out.append((str(p), p.read_text(encoding="utf-8", errors="replace")))
    return out


def mutate(rng: random.Random, text: str) -> str:
    parts = re.findall(r"\s+|\w+|[^\w\s]", text)
    for _ in range(rng.randint(1, 4)):
        if not parts:
            break
        i = rng.randrange(len(parts))
        op = rng.choice(["delete", "insert", "duplicate", "swap", "char", "number", "number"])
        if op == "delete":
            del parts[i]
        elif op == "insert":
            parts.insert(i, rng.choice(TOKENS))
        elif op == "duplicate":
            parts.insert(i, parts[i])
        elif op == "swap" and i + 1 < len(parts):
            parts[i], parts[i + 1] = parts[i + 1], parts[i]
        elif op == "char" and parts[i]:
            j = rng.randrange(len(parts[i]))
            parts[i] = parts[i][:j] + chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 32),
                                                      rng.randrange(128, 0x3000)])) + parts[i][j + 1:]
        elif op == "number":
            nums = [k for k, p in enumerate(parts) if NUMBER.fullmatch(p)]
            if nums:
                parts[rng.choice(nums)] = rng.choice(HOSTILE_NUMBERS)
    return "".join(parts)


def search_points(spec) -> int:
    most = 0
    for s in (getattr(spec, "searches", None) or {}).values():
        n = 1
        for _, values in getattr(s, "axes", ()) or getattr(s, "fields", ()) or ():
            n *= max(len(values), 1)
        most = max(most, n)
    return most


def one(args: tuple[int, int, str, str, bool, bool, int, str]) -> tuple[str, str | None]:
    """Run one mutant; returns (outcome, error text or None)."""
    index, seed, path, text, deep, review, max_points, out_dir = args
    from ccost import evaluate, output
    from ccost.check import check_text
    from ccost.diagnostics import CcostError, render_all

    stage = "check"
    try:
        result = check_text(text, path)
        render_all(result.diagnostics, result.sources)
        if not result.ok:
            return "check: diagnostics", None
        spec = result.spec
        if search_points(spec) > max_points:
            return "check: ok, search too large to evaluate here", None
        stage = "eval"
        try:
            doc = evaluate.results_document(evaluate.evaluate(spec))
        except CcostError:
            return "eval: diagnostics", None
        for p, v in _numbers(doc):
            if not math.isfinite(v):
                raise AssertionError(f"result {p} = {v} is not finite")
        if not deep:
            return "eval: ok", None
        stage = "explain"
        from ccost.commands.explain import render as explain

        for name in spec.local_plans:
            explain(spec, name)
        stage = "writers"
        output.to_text(doc)
        output.to_json(doc)
        output.to_yaml(doc)
        if review:
            stage = "review"
            import tempfile

            from ccost.report import render, review as make_review

            with tempfile.TemporaryDirectory() as folder:
                p = Path(folder) / "fuzz.ccost"
                p.write_text(text, encoding="utf-8")
                try:
                    rev = make_review(p, include_git=False, cwd=Path(folder))
                except CcostError:  # an import that resolves elsewhere from the temporary folder
                    return "deep: ok, review: diagnostics", None
                render.render_html(rev.view, "screen")
            return "deep: ok, review: ok", None
        return "deep: ok", None
    except CcostError:
        return f"{stage}: diagnostics", None
    except Exception:
        name = Path(out_dir) / f"internal-{seed}-{index}.ccost"
        name.parent.mkdir(parents=True, exist_ok=True)
        name.write_text(text, encoding="utf-8", errors="replace")
        return f"INTERNAL ERROR in {stage}", f"{name}: {traceback.format_exc(limit=6)}"


def _numbers(doc, path=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(doc, (list, tuple)):
        for i, v in enumerate(doc):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(doc, float):
        yield path, doc


def cases(seed: int, n: int, n_deep: int, n_review: int, max_points: int, out_dir: str):
    from plan_gen import random_draw, spec_text

    rng = random.Random(seed)
    draw = random_draw(rng)
    srcs = sources()
    for i in range(n):
        if i % 4 == 3:  # a quarter from the schema's ranges, mutated or not
            text = spec_text(draw)
            path = str(REPO / "specs" / "fuzz-drawn.ccost")
            if rng.random() < 0.7:
                text = mutate(rng, text)
        else:
            path, text = srcs[rng.randrange(len(srcs))]
            text = mutate(rng, text)
        yield (i, seed, path, text, i < n_deep * 2, i < n_review * 8, max_points, out_dir)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", type=int, default=100_000, help="mutants through check and eval")
    ap.add_argument("--explain", type=int, default=10_000,
                    help="about this many of the clean ones also through explain and the writers")
    ap.add_argument("--review", type=int, default=50, help="about this many through the HTML review")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-points", type=int, default=200_000)
    ap.add_argument("--out", default=str(REPO / "bench" / "fuzz-failures"),
                    help="where specs that caused an internal error are saved")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}  (re-run: bench/fuzz.py --seed {seed} --specs {args.specs})", flush=True)
    start = time.perf_counter()
    counts: Counter = Counter()
    errors: list[str] = []
    # Roughly half the mutants check clean; ask for twice as many deep runs as wanted among the first ones.
    work = cases(seed, args.specs, args.explain, args.review, args.max_points, args.out)
    with multiprocessing.Pool(args.jobs) as pool:
        for k, (outcome, err) in enumerate(pool.imap_unordered(one, work, chunksize=64), 1):
            counts[outcome] += 1
            if err:
                errors.append(err)
            if k % 10_000 == 0:
                print(f"  {k:,} done, {time.perf_counter() - start:.0f} s", flush=True)
    wall = time.perf_counter() - start
    checked = sum(counts.values())
    evaluated = sum(v for k, v in counts.items() if k.startswith(("eval", "deep", "explain", "writers",
                                                                   "review", "INTERNAL ERROR in e")))
    deep = sum(v for k, v in counts.items() if k.startswith("deep"))
    reviewed = sum(v for k, v in counts.items() if "review: ok" in k)
    print(f"{checked:,} mutated specs through check; {evaluated:,} through eval; {deep:,} of those through "
          f"explain and the text/JSON/YAML writers; {reviewed:,} through the HTML review")
    for k, v in sorted(counts.items()):
        print(f"  {k:45s} {v:>8,}")
    print(f"internal errors: {len(errors)}   wall time {wall:.0f} s with {args.jobs} processes   seed {seed}")
    for e in errors[:10]:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
