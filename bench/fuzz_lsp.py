"""Fuzz the language server with random editing sessions (issue 31): no session may cause an internal error.

    .venv/bin/python bench/fuzz_lsp.py [--sessions 2000] [--per-server 25] [--jobs 2] [--seed N] [--first I]

Every session is what an editor does to one document, sent to ``ccost lsp`` by a real LSP client (pygls's,
tests/lsp_client.py) over stdio: open a spec (an example of specs/, a case of the bad-input corpus
tests/bad/ or tests/hostile/, or a mutant of one of them made by bench/fuzz.py's ``mutate``), then 5-40
random actions — typing (a token inserted), deleting a range, pasting bad imports (absolute paths,
``../`` and ``std/../..`` out of the project, a symbolic link out, ``/dev/zero``, ``/proc/self/environ``),
pasting huge text (long lines of digits, braces, brackets or comments, hundreds of plans, beyond the size
bound sometimes), replacing a number, undoing, saving — each followed now and then by hover, completion,
go to definition or formatting at a random position (past the end of a line or of the text sometimes).
Edits are sent back to back, as typing does, so the server's debouncing is exercised; each session ends
by waiting for the diagnostics of its last version, and closes the document.

A server runs ``--per-server`` sessions, in a project folder of its own (a git work tree holding the
examples and their measured/ files), then is shut down as an editor does and a new one starts; ``--jobs``
servers run at once. An internal error is: a server that exits or stops answering (a request or the
final diagnostics not answered ``HANG_S`` after the time allowed, ``SLOW_S`` plus ``SLOW_S_PER_MB`` a
megabyte of document; an answer between the two is counted and timed as slow, not as an error: a large
document is checked in full, and the machine may be busy), an error response (other than a cancelled
request), an error message to the editor, a traceback or an error line on the server's standard error,
or an answer that shows the secret placed outside the project (a file with a marker, imported in many
refused ways) or locates a file outside the project and std/. The actions of a failing session are saved
under ``--out`` to reproduce it.

Prints the seed first (re-run with ``--seed``; one session: ``--seed S --first N --sessions 1``), then
sessions, actions, requests and checks done, the slow answers, the failures by kind, and the wall time.
Exit 1 when there was an internal error. A benchmark, not a test: the suite runs the same session code on
a few sessions (tests/test_lsp_fuzz.py).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "compiler"))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

MARKER = "LSPSECRET4471"


# --------------------------------------------------------------------------------------------------
# Documents and edits


@functools.lru_cache(maxsize=1)
def documents() -> list[tuple[str, str]]:
    out = []
    for folder in ("specs", "tests/bad", "tests/hostile"):
        for p in sorted((REPO / folder).glob("*.ccost")):
            out.append((p.name, p.read_text(encoding="utf-8", errors="replace")))
    return out


def bad_imports(project: Path, outside: Path) -> list[str]:
    secret = outside / "secret.ccost"
    return [
        f'import "{secret}"', 'import "../outside/secret.ccost"', 'import "./../outside/secret.ccost"',
        'import "std/../../outside/secret.ccost"', 'import "std/../../../../../../../../etc/passwd"',
        f'import "std/../../../../../../../..{secret}"', 'import "/etc/passwd"', 'import "/etc/shadow"',
        'import "/dev/zero"', 'import "/proc/self/environ"', 'import "link-out.ccost"',
        'import "linkdir/secret.ccost"', 'import ""', 'import "std/"', 'import "std/gpus.ccost"',
        'import "measured/a100-nvlink.ccost"', 'import "a1-tp-decode.ccost"', 'import "nope.ccost"',
        'import "a\x00b.ccost"', 'import "' + "../" * 40 + 'etc/passwd"',
        f'import "{project}/a1-tp-decode.ccost"',
    ]


def huge(rng: random.Random) -> str:
    """A paste of 100 kB to 5 MB (beyond the 4 MiB bound one time in four); hundreds of plans at most
    300 kB (checking them all takes seconds: that is the checker's speed, bench/check_scaling.py)."""
    size = int(rng.choice([100e3, 300e3, 1e6, 4.5e6]) * rng.uniform(0.8, 1.2))
    kind = rng.choice(["digits", "braces", "brackets", "comment", "plans", "words", "quotes", "unicode"])
    if kind == "plans":
        size = min(size, 300_000)
        block = ('\nplan p{} "plan" {{\n  model = llama3_70b; cluster = hgx; phase = decode\n'
                 "  batch = 8; tp = 8\n}}\n")
        n = size // len(block)
        return "".join(block.format(rng.randrange(10 ** 9)) for _ in range(max(1, n)))
    unit = {"digits": "7", "braces": "{", "brackets": "(", "comment": "#x", "words": "plan link ",
            "quotes": '"a', "unicode": "é🚀\u202e"}[kind]
    return unit * (size // len(unit))


class Doc:
    """The client's copy of the document, edited as an editor would and sent whole (the server asks for
    full-text sync)."""

    def __init__(self, text: str):
        self.text = text
        self.version = 1
        self.history: list[str] = []

    def lines(self) -> list[str]:
        return self.text.split("\n")

    def offset(self, rng: random.Random) -> int:
        return rng.randint(0, len(self.text))

    def set(self, text: str) -> None:
        self.history.append(self.text)
        del self.history[:-3]
        self.text = text
        self.version += 1


#: A member being typed at the end of the document: completion there offers names (of imported files too),
#: values and units; hover and definition after it name the block
MEMBERS = ["\ncluster c9 {\n  intra_node = ", "\ncluster c9 {\n  gpu = ", "\nplan q9 {\n  model = ",
           "\nplan q9 {\n  cluster = ", "\nlink l9 {\n  alpha = 2 ", "\nplan q9 {\n  allreduce = ",
           "\nplan q9 extends ", "\ngpu g9 {\n  memory = h100.", "\nplan q9 {\n  ", "\n",
           "\ncluster c9 {\n  intra_node = secretlink }\n", "\nplan q9 {\n  tp = pow2(1, 8"]


def edit(rng: random.Random, doc: Doc, pastes: list[str]) -> tuple[str, tuple[int, int] | None]:
    """One random edit of ``doc``: what it was, for the log, and where the cursor is when that is worth
    a request (the end of a member being typed)."""
    from fuzz import TOKENS, mutate

    op = rng.choices(["type", "delete", "paste_import", "huge", "mutate", "undo", "newline", "replace_all",
                      "member"], weights=[30, 15, 12, 0.6, 20, 6, 10, 3, 15])[0]
    t = doc.text
    if op == "member":
        typed = rng.choice(MEMBERS)
        doc.set(t + typed)
        lines = doc.lines()
        return f"type {typed!r} at the end", (len(lines) - 1, len(lines[-1]))
    if op == "type":
        i = doc.offset(rng)
        tok = rng.choice(TOKENS + ["\ud800", "\x00", "\r\n", "🚀", "std/", "import "])
        doc.set(t[:i] + tok + t[i:])
        return f"type {tok!r} at {i}", None
    if op == "delete":
        i = doc.offset(rng)
        j = min(len(t), i + rng.choice([1, 1, 2, 5, 40, 400, 10 ** 6]))
        doc.set(t[:i] + t[j:])
        return f"delete {i}:{j}", None
    if op == "paste_import":
        i = rng.choice([0, doc.offset(rng)])
        line = rng.choice(pastes)
        doc.set(t[:i] + line + "\n" + t[i:])
        return f"paste {line!r} at {i}", None
    if op == "huge":
        i = doc.offset(rng)
        text = huge(rng)
        doc.set(t[:i] + text + t[i:])
        return f"paste {len(text)} characters ({text[:8]!r}...) at {i}", None
    if op == "mutate":
        doc.set(mutate(rng, t))
        return "mutate", None
    if op == "undo" and doc.history:
        doc.text = doc.history.pop()
        doc.version += 1
        return "undo", None
    if op == "newline":
        i = doc.offset(rng)
        doc.set(t[:i] + "\n" + " " * rng.choice([0, 2, 4]) + t[i:])
        return f"newline at {i}", None
    doc.set(rng.choice(documents())[1])
    return "replace all", None


def position(rng: random.Random, doc: Doc) -> tuple[int, int]:
    """Mostly on a word (names, fields, units, import paths), else at the end of a line, else anywhere
    (past the end of the line or of the text sometimes)."""
    lines = doc.lines()
    r = rng.random()
    line = rng.randrange(len(lines))
    text = lines[line][:2000]
    words = [m.span() for m in re.finditer(r"[A-Za-z_/.][A-Za-z0-9_/.]*", text)] if r < 0.6 else []
    if words:
        a, b = rng.choice(words)
        return line, rng.randint(a, b)
    if r < 0.85:
        return line, len(lines[line])
    line = rng.randint(0, len(lines) + (1 if rng.random() < 0.05 else -1))
    width = len(lines[line]) if line < len(lines) else 0
    return line, rng.randint(0, width + (3 if rng.random() < 0.1 else 0))


# --------------------------------------------------------------------------------------------------
# Sessions


def allowed_uri(uri: str, project: Path) -> bool:
    """A definition may lead into the project or the bundled library, nowhere else."""
    from urllib.parse import unquote, urlparse

    from ccost.check.load import _std_dir

    path = os.path.realpath(unquote(urlparse(uri).path))
    roots = [os.path.realpath(project)] + ([os.path.realpath(_std_dir())] if _std_dir() else [])
    return any(os.path.commonpath([path, r]) == r for r in roots)


def leaks(answer, project: Path) -> str | None:
    """What of the secret an answer shows, if anything."""
    if answer is None:
        return None
    if hasattr(answer, "uri") and not allowed_uri(answer.uri, project):
        return f"definition outside the project: {answer.uri}"
    text = json.dumps(answer, default=lambda o: getattr(o, "__dict__", str(o)), ensure_ascii=False)
    return f"the secret's marker in an answer: {text[:300]}" if MARKER in text else None


SLOW_S = 60  # an answer later than this (plus SLOW_S_PER_MB a megabyte of document) is counted as slow
SLOW_S_PER_MB = 30
HANG_S = 900  # and one not given this long after that is a hang


async def answered(coro, limit: float, stats: Counter, log: list[str]) -> tuple[bool, object]:
    """(True, the answer) once ``coro`` finishes. Past ``limit`` the answer is counted as slow (with its
    time; a busy machine or a large document checked in full, not an error) and waited for ``HANG_S``
    more; (False, None) then: a hang."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    task = asyncio.ensure_future(coro)
    done, _ = await asyncio.wait({task}, timeout=limit)
    if not done:
        done, _ = await asyncio.wait({task}, timeout=HANG_S)
        if not done:
            task.cancel()
            return False, None
        took = loop.time() - t0
        stats["slow answers"] += 1
        stats["slowest answer (s)"] = max(stats["slowest answer (s)"], round(took))
        log.append(f"  (answered after {took:.0f} s)")
    return True, task.result()


async def session(s, rng: random.Random, uri: str, pastes: list[str], project: Path, stats: Counter,
                  log: list[str]) -> list[str]:
    """One document's life; returns the problems found (leaks and hangs; the server's own errors are read
    from the Session by the caller)."""
    from fuzz import mutate

    problems: list[str] = []
    name, text = rng.choice(documents())
    if rng.random() < 0.3:
        text = mutate(rng, text)
    doc = Doc(text)
    log.append(f"open {name}")
    s.open(uri, doc.text, doc.version)
    for _ in range(rng.randint(5, 40)):
        what, cursor = edit(rng, doc, pastes)
        log.append(what)
        s.change(uri, doc.text, doc.version)
        stats["edits"] += 1
        if rng.random() < 0.05:
            s.save(uri)
            log.append("save")
        if rng.random() < (0.8 if cursor else 0.35):
            kind = rng.choice(["hover", "hover", "complete", "complete", "definition", "format"])
            at = cursor if cursor and rng.random() < 0.7 else position(rng, doc)
            if cursor and kind in ("hover", "definition") and rng.random() < 0.5:  # on the word before
                at = (at[0], max(0, at[1] - 2))
            log.append(f"{kind} at {at}")
            limit = SLOW_S + SLOW_S_PER_MB * len(doc.text) / 1e6
            ask = {"hover": lambda: s.hover(uri, *at), "complete": lambda: s.complete(uri, *at),
                   "definition": lambda: s.definition(uri, *at), "format": lambda: s.format(uri)}[kind]
            ok, answer = await answered(ask(), limit, stats, log)
            if not ok:
                problems.append(f"hang: {kind} at {at} not answered in {limit + HANG_S:.0f} s")
                return problems
            stats["requests"] += 1
            leak = leaks(answer, project) if kind != "format" else None
            if leak:
                problems.append(leak)
    limit = SLOW_S + SLOW_S_PER_MB * len(doc.text) / 1e6
    ok, final = await answered(s.diagnostics(uri, doc.version, timeout=limit + HANG_S), limit, stats, log)
    if ok:
        stats["checks"] += 1
        shown = " ".join(d.message for d in final)
        if MARKER in shown:
            problems.append(f"the secret's marker in a diagnostic: {shown[:300]}")
    else:
        problems.append(f"hang: no diagnostics for version {doc.version} in {limit + HANG_S:.0f} s")
    s.close(uri)
    log.append("close")
    return problems


def make_project(root: Path) -> tuple[Path, Path]:
    """root/project: a git work tree with the examples, their measured/ files and symbolic links out;
    root/outside: the secret."""
    project, outside = root / "project", root / "outside"
    outside.mkdir(parents=True)
    (outside / "secret.ccost").write_text(
        f'link secretlink "{MARKER}" {{ alpha = 1 us; bandwidth = 1 GB/s }}\n# {MARKER}\n')
    shutil.copytree(REPO / "specs", project, ignore=shutil.ignore_patterns("std"))
    (project / ".git").mkdir()
    (project / "link-out.ccost").symlink_to(outside / "secret.ccost")
    (project / "linkdir").symlink_to(outside)
    return project, outside


async def batch(seed: int, indices: list[int], root: Path, out: Path) -> tuple[Counter, list[str]]:
    """Sessions ``indices`` on one server after another (a new one every ``per_server`` sessions is the
    caller's: one batch is one server)."""
    from lsp_client import Session

    project, outside = make_project(root)
    pastes = bad_imports(project, outside)
    stats: Counter = Counter()
    failures: list[str] = []
    s = await Session(cwd=str(project)).start()
    seen = {"errors": 0, "messages": 0, "stderr": 0}
    for i in indices:
        rng = random.Random(f"{seed}:{i}")
        log: list[str] = []
        uri = (project / f"s{i}.ccost").as_uri()
        problems = await session(s, rng, uri, pastes, project, stats, log)
        stats["sessions"] += 1
        new_err = s.errors[seen["errors"]:]
        new_msg = s.messages[seen["messages"]:]
        new_log = "".join(s.stderr[seen["stderr"]:])
        seen = {"errors": len(s.errors), "messages": len(s.messages), "stderr": len(s.stderr)}
        problems += [f"error response: {e}" for e in new_err] + [f"error message: {m}" for m in new_msg]
        if "Traceback" in new_log or "ERROR" in new_log or "Exception" in new_log:
            problems.append("server log: " + new_log[-2000:])
        if s.exited_early():
            problems.append(f"server exited (status {s.client._server.returncode})")
        if problems:
            stats["failed sessions"] += 1
            for p in problems:
                stats["failure: " + p.split(":")[0]] += 1
            out.mkdir(parents=True, exist_ok=True)
            (out / f"lsp-{seed}-{i}.txt").write_text("\n".join(problems + ["", "actions:"] + log),
                                                     encoding="utf-8")
            failures.append(f"session {i}: " + problems[0][:300])
        if problems and (s.exited_early() or any(p.startswith("hang") for p in problems)):
            await s.stop(timeout=5)
            s = await Session(cwd=str(project)).start()
            seen = {"errors": 0, "messages": 0, "stderr": 0}
    status = await s.stop()
    if status not in (0, None):
        failures.append(f"server exit status {status} after sessions {indices[0]}-{indices[-1]}")
        stats["failure: exit status"] += 1
    return stats, failures


def run_batch(args: tuple[int, list[int], str]) -> tuple[Counter, list[str]]:
    seed, indices, out = args
    root = Path(tempfile.mkdtemp(prefix="ccost-fuzz-lsp-"))
    try:
        return asyncio.run(batch(seed, indices, root, Path(out)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def merge(total: Counter, more: Counter) -> None:
    """Add one server's counts to the run's (the slowest answer is a maximum, not a sum)."""
    slowest = max(total["slowest answer (s)"], more["slowest answer (s)"])
    total.update(more)
    total["slowest answer (s)"] = slowest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--per-server", type=int, default=25, help="sessions per server process")
    ap.add_argument("--jobs", type=int, default=2, help="servers at once")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--first", type=int, default=0,
                    help="the number of the first session (one: --seed S --first N --sessions 1)")
    ap.add_argument("--out", default=str(REPO / "bench" / "fuzz-failures"))
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 32)
    print(f"seed {seed}", flush=True)
    t0 = time.time()
    end = args.first + args.sessions
    batches = [(seed, list(range(i, min(i + args.per_server, end))), args.out)
               for i in range(args.first, end, args.per_server)]
    stats: Counter = Counter()
    failures: list[str] = []
    if args.jobs > 1:
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            results = pool.imap_unordered(run_batch, batches)
            for k, (st, fl) in enumerate(results, 1):
                merge(stats, st)
                failures += fl
                print(f"  {k}/{len(batches)} servers, {stats['sessions']} sessions, "
                      f"{stats['failed sessions']} failed, {time.time() - t0:.0f} s", flush=True)
    else:
        for k, b in enumerate(batches, 1):
            st, fl = run_batch(b)
            merge(stats, st)
            failures += fl
            print(f"  {k}/{len(batches)} servers, {stats['sessions']} sessions, "
                  f"{stats['failed sessions']} failed, {time.time() - t0:.0f} s", flush=True)
    print(f"seed {seed}: {stats['sessions']} sessions on {len(batches)} servers, {stats['edits']} edits, "
          f"{stats['requests']} requests answered, {stats['checks']} final diagnostics received")
    print(f"slow answers (after {SLOW_S} s + {SLOW_S_PER_MB} s a megabyte; not errors): "
          f"{stats['slow answers']}"
          + (f", the slowest after {stats['slowest answer (s)']} s" if stats["slow answers"] else ""))
    internal = sum(v for k, v in stats.items() if k.startswith("failure: "))
    print(f"internal errors: {internal} in {stats['failed sessions']} session(s)"
          + "".join(f"\n  {k[9:]}: {v}" for k, v in sorted(stats.items()) if k.startswith("failure: ")))
    for f in failures[:20]:
        print("  " + f)
    print(f"wall time {time.time() - t0:.0f} s")
    return 1 if internal else 0


if __name__ == "__main__":
    sys.exit(main())
