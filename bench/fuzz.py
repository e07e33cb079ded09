"""Fuzz the whole pipeline with mutated specs (issue 11, item 7): no input may cause an internal error.

    .venv/bin/python bench/fuzz.py [--specs 100000] [--explain 10000] [--review 50] [--logs 20300]
                                   [--seed N] [--jobs 2]

Sources: specs drawn from the schema's ranges (tests/plan_gen.py; 40 %), the shipped example specs
(specs/*.ccost) and the valid hostile cases of issue 11 (tests/hostile/*.ccost; 40 %), and the bad-input
corpus (tests/bad/*.ccost, with the hostile cases of issue 11; 20 %).
Each mutant gets 1-4 edits: a token deleted, inserted, duplicated or swapped, a character replaced, or a
number replaced by a hostile one (0, -1, 5e-324, 1e-320, 1e308, 1e400, 2**64, ...).

Every mutant goes through ``check``; each that checks clean goes through ``eval`` (the results document).
The first ``--explain`` of those (in the order they finish) also go through ``explain`` of every plan and
the text, JSON and YAML writers, and the first ``--review`` of them through the HTML review (view model,
charts, template). Six mutants in ten change only numbers, so most of them check and are evaluated. Anything that
raises other than a ``CcostError`` (the diagnostics every user error becomes) is an internal error: the
spec is saved under ``--out`` and counted. A search larger than ``--max-points`` is checked but not
evaluated (pricing 10 million layouts is slow, not wrong; bench/search.py measures that), and counted.

With ``--logs N``, N mutated nccl-tests logs (specs/measured/*.txt; numbers made hostile, lines deleted,
duplicated or cut, characters replaced) go through calibrate's parser and fit, and every block it writes
must check clean.

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


def sources(folders) -> list[tuple[str, str]]:
    out = []
    for folder in folders:
        for p in sorted((REPO / folder).glob("*.ccost")):
            out.append((str(p), p.read_text(encoding="utf-8", errors="replace")))
    return out


def _number(rng: random.Random) -> str:
    """Half the time a hostile number, else an ordinary one of any magnitude (so the mutant still checks
    and reaches evaluation)."""
    r = rng.random()
    if r < 0.3:
        return rng.choice(HOSTILE_NUMBERS)
    if r < 0.65:
        return str(rng.choice([1, 2, 3, 4, 6, 8, 16, 32, 64, 128, 256, 1024, 4096]))
    return f"{10 ** rng.uniform(-12, 18):.4g}"


def mutate(rng: random.Random, text: str) -> str:
    parts = re.findall(r"\s+|\w+(?:\.\d+)?(?:[eE][-+]?\d+)?|[^\w\s]", text)
    numbers_only = rng.random() < 0.6  # keeps the syntax: most of these check and reach evaluation
    for _ in range(rng.randint(1, 3 if numbers_only else 4)):
        if not parts:
            break
        i = rng.randrange(len(parts))
        op = "number" if numbers_only else rng.choice(["delete", "insert", "duplicate", "swap", "char",
                                                       "number"])
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
                parts[rng.choice(nums)] = _number(rng)
    return "".join(parts)


def search_points(spec) -> int:
    most = 0
    for s in (getattr(spec, "searches", None) or {}).values():
        n = 1
        for _, values in getattr(s, "axes", ()) or getattr(s, "fields", ()) or ():
            n *= max(len(values), 1)
        most = max(most, n)
    return most


_DEEP = _REVIEW = None  # shared countdowns: how many more evaluated mutants go through explain / review


def _init(deep, review) -> None:
    global _DEEP, _REVIEW
    _DEEP, _REVIEW = deep, review


def _take(counter) -> bool:
    with counter.get_lock():
        if counter.value <= 0:
            return False
        counter.value -= 1
        return True


def pipeline(path: str, text: str, deep, review, max_points: int = 200_000) -> str:
    """One spec through check → eval → (``deep()``) explain and the writers → (``review()``) the HTML
    review. Returns the outcome; a ``CcostError`` is an outcome (a diagnostic), anything else propagates as
    an internal error. ``deep`` and ``review`` are asked only once the spec has evaluated."""
    from ccost import evaluate, output
    from ccost.check import check_text
    from ccost.diagnostics import CcostError, render_all

    stage = "check"
    try:
        result = check_text(text, path)
        render_all(result.diagnostics, result.sources)
        if not result.ok:
            return "check: diagnostics"
        spec = result.spec
        if search_points(spec) > max_points:
            return "check: ok, search too large to evaluate here"
        stage = "eval"
        doc = evaluate.results_document(evaluate.evaluate(spec))
        for p, v in _numbers(doc):
            if not math.isfinite(v):
                raise AssertionError(f"result {p} = {v} is not finite")
        if not deep():
            return "eval: ok"
        stage = "explain"
        from ccost.commands.explain import render as explain

        for name in spec.local_plans:
            explain(spec, name)
        stage = "writers"
        output.to_text(doc)
        output.to_json(doc)
        output.to_yaml(doc)
        if not review():
            return "deep: ok"
        stage = "review"
        import tempfile

        from ccost.report import render, review as make_review

        with tempfile.TemporaryDirectory() as folder:
            p = Path(folder) / "fuzz.ccost"
            p.write_text(text, encoding="utf-8")
            try:
                rev = make_review(p, include_git=False, cwd=Path(folder))
            except CcostError:  # an import that resolves elsewhere from the temporary folder
                return "deep: ok, review: diagnostics"
            render.render_html(rev.view, "screen")
        return "deep: ok, review: ok"
    except CcostError:
        return f"{stage}: diagnostics"
    except Exception as exc:
        exc.stage = stage  # type: ignore[attr-defined]
        raise


def one(args: tuple[int, int, str, str, int, str]) -> tuple[str, str | None]:
    """Run one mutant; returns (outcome, error text or None)."""
    index, seed, path, text, max_points, out_dir = args
    try:
        return pipeline(path, text, lambda: _take(_DEEP), lambda: _take(_REVIEW), max_points), None
    except Exception as exc:
        name = Path(out_dir) / f"internal-{seed}-{index}.ccost"
        name.parent.mkdir(parents=True, exist_ok=True)
        name.write_text(text, encoding="utf-8", errors="replace")
        return (f"INTERNAL ERROR in {getattr(exc, 'stage', '?')}",
                f"{name}: {traceback.format_exc(limit=6)}")


LOG_HOSTILE = ["0", "-1", "5e-324", "1e-320", "1e308", "1e400", "nan", "inf", "N/A", "1" + "0" * 30,
               "1" + "0" * 400, "18446744073709551616", "0.001", "1e12", "-0"]


def one_log(args: tuple[int, int, str, str]) -> tuple[str, str | None]:
    """Mutate one nccl-tests log; parse, fit (with hold-out) and write its block, which must check clean."""
    index, seed, path, text = args
    from ccost.calibrate import fit_log, link_block, parse_log
    from ccost.check import check_text
    from ccost.diagnostics import CcostError

    rng = random.Random(seed * 1_000_003 + index)
    lines = text.splitlines()
    for _ in range(rng.randint(1, 5)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        op = rng.randrange(5)
        if op == 0:
            f = lines[i].split()
            nums = [k for k, x in enumerate(f) if x.replace(".", "").replace("-", "").isdigit()]
            if nums:
                f[rng.choice(nums)] = rng.choice(LOG_HOSTILE)
                lines[i] = "  ".join(f)
        elif op == 1:
            del lines[i]
        elif op == 2:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif op == 3 and lines[i]:
            j = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:j] + chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 32), 0x2028])) \
                + lines[i][j + 1:]
        else:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    mutated = "\n".join(lines) + "\n"
    try:
        try:
            fit = fit_log(parse_log(mutated, path), holdout=True)
        except CcostError:
            return "log: diagnostics", None
        block = link_block(fit, "measured", path, None, "ccost calibrate log")
        if not check_text(block, "b.ccost").ok:
            raise AssertionError("the generated block does not check")
        return "log: fitted, block checks", None
    except Exception:
        return "INTERNAL ERROR in calibrate", f"log mutant {index}: {traceback.format_exc(limit=6)}"


def _numbers(doc, path=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(doc, (list, tuple)):
        for i, v in enumerate(doc):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(doc, float):
        yield path, doc


def cases(seed: int, n: int, max_points: int, out_dir: str):
    from plan_gen import random_draw, spec_text

    rng = random.Random(seed)
    draw = random_draw(rng)
    good, bad = sources(("specs", "tests/hostile")), sources(("tests/bad",))
    for i in range(n):
        r = rng.random()
        if r < 0.4:  # from the schema's ranges, mutated or not
            text = spec_text(draw)
            path = str(REPO / "specs" / "fuzz-drawn.ccost")
            if rng.random() < 0.7:
                text = mutate(rng, text)
        else:  # a shipped or hostile spec (2 in 3), or one of the bad-input corpus
            path, text = (good if r < 0.8 else bad)[rng.randrange(len(good if r < 0.8 else bad))]
            text = mutate(rng, text)
        yield (i, seed, path, text, max_points, out_dir)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", type=int, default=100_000, help="mutants through check and eval")
    ap.add_argument("--explain", type=int, default=10_000,
                    help="this many of the evaluated ones also through explain and the writers")
    ap.add_argument("--review", type=int, default=50, help="this many of those through the HTML review")
    ap.add_argument("--logs", type=int, default=0, help="mutated nccl-tests logs through calibrate")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-points", type=int, default=200_000)
    ap.add_argument("--out", default=str(REPO / "bench" / "fuzz-failures"),
                    help="where specs that caused an internal error are saved")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}  (re-run: bench/fuzz.py --seed {seed} --specs {args.specs} --explain {args.explain} "
          f"--review {args.review} --logs {args.logs})", flush=True)
    start = time.perf_counter()
    counts: Counter = Counter()
    errors: list[str] = []
    work = cases(seed, args.specs, args.max_points, args.out)
    deep, review = multiprocessing.Value("i", args.explain), multiprocessing.Value("i", args.review)
    with multiprocessing.Pool(args.jobs, initializer=_init, initargs=(deep, review)) as pool:
        for k, (outcome, err) in enumerate(pool.imap_unordered(one, work, chunksize=64), 1):
            counts[outcome] += 1
            if err:
                errors.append(err)
            if k % 10_000 == 0:
                print(f"  {k:,} done, {time.perf_counter() - start:.0f} s", flush=True)
        logs = sorted((REPO / "specs" / "measured").glob("*.txt"))
        work_logs = ((i, seed, str(logs[i % len(logs)].name), logs[i % len(logs)].read_text())
                     for i in range(args.logs))
        for outcome, err in pool.imap_unordered(one_log, work_logs, chunksize=64):
            counts[outcome] += 1
            if err:
                errors.append(err)
    wall = time.perf_counter() - start
    checked = sum(v for k, v in counts.items() if "calibrate" not in k and not k.startswith("log:"))
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
