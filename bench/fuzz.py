"""Fuzz the whole pipeline with mutated specs (issue 11, item 7): no input may cause an internal error.

    .venv/bin/python bench/fuzz.py [--specs 100000] [--explain 10000] [--review 50] [--logs 20300]
                                   [--configs 10000] [--steps 5000] [--addresses 2000] [--lsp 2000]
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

The surfaces added since (issue 31), each with its own count:

- ``--configs N``: mutated Hugging Face ``config.json`` files (tests/data/hf/*; a count replaced by a hostile
  one: 0, -1, 2^40, 10^12, 1e308, a 5,000-digit number, Infinity, NaN, true, a string, a list; keys deleted,
  renamed or wrapped in ``text_config``; nesting 10,000 deep; text cut or bytes replaced) go through
  ``import hf`` (the block it prints must check clean) and through a spec that names the file
  (``model m { config = "..." }``, checked, and evaluated in one plan in five).
- ``--steps N``: mutated ``calibrate --steps`` files (CSV, YAML rows, vLLM JSON, Megatron logs of the
  plans of bench/validation/inference.ccost, in a project of their own; times made hostile: nan, inf, 0,
  1e-320, 1e400, 5,000 digits; spec paths out of the project: /etc/passwd, /proc/self/environ, ../, a link
  out; YAML alias bombs and deep nesting; rows deleted, duplicated or repeated into the thousands) go
  through the command's reading, fit and block; the block must check clean and carry no NaN or inf.
- ``--addresses N``: scheduler addresses (every scheme Dask knows and some it does not; hosts: loopback,
  IPv6, names that do not resolve, bytes that are no host; ports: closed, out of range, garbage, a local
  port that accepts and never answers, one that answers like a web server) go through the connection
  ``--scheduler`` makes (``ccost.remote.client``, its timeout cut to ``--address-timeout``): each must be
  an E513 within the timeout and a few seconds, never a hang or another exception.
- ``--lsp N``: N language-server sessions of random edits, by ``bench/fuzz_lsp.py`` (when it is there),
  with the same seed.

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


# --------------------------------------------------------------------------------------------------
# The surfaces of issue 31: config.json, steps files, scheduler addresses

_HF_DIR = REPO / "tests" / "data" / "hf"
_COUNT_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
               "vocab_size", "head_dim", "n_routed_experts", "num_local_experts", "num_experts_per_tok",
               "n_shared_experts", "moe_intermediate_size", "first_k_dense_replace", "moe_layer_freq",
               "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
               "num_nextn_predict_layers", "shared_expert_intermediate_size", "tie_word_embeddings",
               "torch_dtype", "quantization_config", "attention_bias", "mlp_bias", "topk_method", "text_config"]
_HOSTILE_JSON = ["0", "-1", "1", "2", "3", "7", "64", "1099511627776", "1099511627777", "1000000000000",
                 "1000000000", "1048577", "1.5", "1e308", "1e400", "-1e400", "Infinity", "NaN", "true", "false",
                 "null", '"8"', '""', "[]", "{}", "[1, 2]", '{"bits": 4}', '{"quant_method": "fp8"}', "9" * 5000,
                 "0.0", "5e-324", '"bfloat16"', '"float8_e4m3fn"']


def mutate_config(rng: random.Random, text: str) -> str:
    """A config.json made hostile: counts replaced, keys deleted, renamed or nested, the text cut."""
    import json

    cfg = json.loads(text)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if op < 0.55:
            cfg[rng.choice(_COUNT_KEYS)] = "@@%d@@" % rng.randrange(len(_HOSTILE_JSON))
        elif op < 0.7 and cfg:
            del cfg[rng.choice(list(cfg))]
        elif op < 0.8 and cfg:
            k = rng.choice(list(cfg))
            cfg[k + rng.choice(["_x", "", "s"])] = cfg.pop(k)
        elif op < 0.88:
            cfg = {"text_config": cfg, "model_type": rng.choice(["llava", "qwen2", "deepseek_v3", ""])}
        else:
            cfg[rng.choice(_COUNT_KEYS)] = "@@deep@@"
    out = json.dumps(cfg, indent=rng.choice([None, 2]))
    out = re.sub(r'"@@(\d+)@@"', lambda m: _HOSTILE_JSON[int(m.group(1))], out)
    depth = rng.choice([50, 70, 10_000])  # a value nested this deep (closed, or left open: not JSON)
    out = out.replace('"@@deep@@"', "[" * depth + ("]" * depth if rng.random() < 0.7 else ""))
    r = rng.random()
    if r < 0.08:
        out = out[: rng.randrange(len(out) + 1)]
    elif r < 0.16 and out:
        j = rng.randrange(len(out))
        out = out[:j] + chr(rng.choice([0, 7, 0x202E, rng.randrange(32, 127), 0xD800])) + out[j + 1:]
    return out


_PROJECT: dict = {}


def _project() -> Path:
    """A project of this worker process (a `.git` entry marks it): inference.ccost and the measured link it
    imports, an outside file with a marker and a link out of the project; made once per process."""
    import tempfile

    pid = os.getpid()
    if pid not in _PROJECT:
        root = Path(tempfile.mkdtemp(prefix="ccost-fuzz-"))
        project = root / "p"
        (project / "specs" / "measured").mkdir(parents=True)
        (project / ".git").mkdir()
        import shutil

        shutil.copy(REPO / "specs" / "measured" / "a100-nvlink.ccost", project / "specs" / "measured")
        (project / "bench").mkdir()
        shutil.copy(REPO / "bench" / "validation" / "inference.ccost", project / "bench" / "inference.ccost")
        (project / "bench" / "inference.ccost").write_text(
            (project / "bench" / "inference.ccost").read_text().replace("../../specs/", "../specs/"))
        (root / "outside.ccost").write_text("SECRET_MARKER_8812 = 1\n")
        (project / "bench" / "link-out.ccost").symlink_to(root / "outside.ccost")
        _PROJECT[pid] = project
    return _PROJECT[pid]


def one_config(args: tuple[int, int, str, str]) -> tuple[str, str | None]:
    """A mutated config.json through ``import hf`` (its block must check clean) and a spec naming it."""
    index, seed, name, text = args
    from ccost import hf
    from ccost.check import check_file, check_text
    from ccost.diagnostics import CcostError

    rng = random.Random(seed * 1_000_003 + index)
    mutated = mutate_config(rng, text)
    project = _project()
    folder = project / "hf" / f"c{index % 64}"
    stage = "import hf"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(mutated, encoding="utf-8", errors="surrogatepass")
        try:
            model = hf.imported(hf.load_config(str(folder / "config.json")))
            block = hf.model_block(model, "m", name, f"{name}/config.json")
            result = check_text(block, "imported.ccost")
            if not result.ok:
                raise AssertionError("the imported block does not check: "
                                     + "; ".join(d.message for d in result.errors[:2]))
            outcome = "config: imported, block checks"
        except hf.HfError:
            outcome = "config: E510"
        stage = "spec naming it"
        spec = project / "cfg.ccost"
        plan = rng.random() < 0.2
        spec.write_text(f'model m {{ config = "hf/c{index % 64}/config.json" }}\n' + (
            'import "std/gpus.ccost"\nimport "std/links.ccost"\nimport "std/clusters.ccost"\n'
            "plan p { model = m; cluster = hgx_h100; phase = decode; batch = 8; seq = 1024; tp = 1 }\n"
            if plan else ""))
        result = check_file(str(spec))
        if plan and result.ok:
            stage = "eval of a spec naming it"
            from ccost import evaluate

            try:
                evaluate.results_document(evaluate.evaluate(result.spec))
            except CcostError:
                pass
        return outcome, None
    except Exception:
        return f"INTERNAL ERROR in config ({stage})", f"config mutant {index}: {traceback.format_exc(limit=6)}"


_PLANS = {"tpot": ["v9_tp1", "v9_tp4", "v11b_tp2_b1", "v11b_tp8_b16", "v11e_llama70b"],
          "ttft": ["v10_7b", "v10_70b"], "step_time": ["v9_tp2", "v10_70b"]}
_TIMES = ["nan", "inf", "-inf", "0", "-1", "1e-320", "5e-324", "1e400", "9" * 5000, "1e-7", "3601", "0.5",
          "32.1 ms", "32.1 GB", "fast", "", "1e308", "N/A"]
_PATHS = ["/etc/passwd", "/proc/self/environ", "../outside.ccost", "link-out.ccost", "", ".", "inference.ccost",
          "../bench/inference.ccost", "missing.ccost", "/dev/zero", "inference.ccost\x00x", "../../../etc/shadow"]


def _steps_text(rng: random.Random) -> tuple[str, str, str | None, str | None]:
    """(file name, text, --spec, --plan) of a steps file, hostile in one to four places."""
    kind = rng.choice(["csv", "csv", "yaml", "json", "megatron"])
    n = rng.choice([1, 2, 3, 5, 8, 20]) if rng.random() < 0.99 else rng.choice([2_000, 10_001])
    metric = rng.choice(["tpot", "ttft", "step_time"])
    plans = rng.sample(_PLANS[metric], min(len(_PLANS[metric]), rng.choice([1, 1, 2, 3])))
    cli_spec = rng.choice(["inference.ccost"] * 8 + ["missing.ccost", "/dev/zero"])  # --spec: the user's own
    def time_cell() -> str:
        return rng.choice(_TIMES) if rng.random() < 0.08 else f"{rng.uniform(5, 80):.3f}"
    def path_cell() -> str:
        return rng.choice(_PATHS) if rng.random() < 0.06 else "inference.ccost"
    if kind == "csv":
        col = metric + rng.choice(["_ms", "_ms", ""])
        lines = [f"plan,spec,{col}"] + [f"{rng.choice(plans)},{path_cell()},{time_cell()}" for _ in range(n)]
        text, name = "\n".join(lines) + "\n", "steps.csv"
    elif kind == "yaml":
        rows = "".join(f"  - {{plan: {rng.choice(plans)}, spec: \"{path_cell()}\", metric: "
                       f"{ {'tpot': 'decode_step', 'ttft': 'prefill', 'step_time': 'step_time'}[metric]}, "
                       f"measured: {time_cell()}e-3}}\n" for _ in range(n))
        text, name = "rows:\n" + rows, "steps.yaml"
        r = rng.random()
        if r < 0.05:
            text = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else '"x"'] * 9) + "]\n" for i in range(9)) \
                + text
        elif r < 0.1:
            text = "rows:\n" + "".join(" " * (2 * i) + "- \n" for i in range(1, rng.choice([30, 100, 400])))
    elif kind == "json":
        import json

        doc = {"completed": 100, "median_tpot_ms": float(f"{rng.uniform(5, 80):.3f}"),
               "median_ttft_ms": float(f"{rng.uniform(50, 800):.3f}")}
        text, name = json.dumps(doc, indent=2), "bench.json"
        if rng.random() < 0.3:
            text = text.replace(str(doc["median_tpot_ms"]), rng.choice(_TIMES) or "1", 1)
        return name, text, cli_spec, rng.choice(_PLANS["tpot"])
    else:
        text = "".join(f" iteration {i + 1}/ 100 | elapsed time per iteration (ms): {time_cell()} | lr: 1.0E-04 |\n"
                       for i in range(max(n, 2)))
        return "train.log", text, cli_spec, rng.choice(_PLANS["step_time"])
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(0, 2)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        op = rng.randrange(4)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif op == 2 and lines[i]:
            j = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:j] + chr(rng.choice([0, 0x202E, rng.randrange(32, 127), 44, 58])) + lines[i][j + 1:]
        else:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    return name, "".join(lines), None, None


def one_steps(args: tuple[int, int]) -> tuple[str, str | None]:
    """A mutated steps file through ``calibrate --steps``: read, fit, block; the block must check clean."""
    index, seed = args
    from ccost.calibrate.files import read_steps_file
    from ccost.calibrate.steps import fit_steps, stack_block
    from ccost.check import check_text
    from ccost.diagnostics import CcostError

    rng = random.Random(seed * 7_000_003 + index)
    name, text, spec, plan = _steps_text(rng)
    here = _project() / "bench"
    path = here / name
    stage = "read"
    try:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            rows = read_steps_file(path, str(here / spec) if spec else None, plan)
            stage = "fit"
            fit = fit_steps(rows, rng.choice([0, 0, 2]), name)
        except CcostError as exc:
            if "SECRET_MARKER" in str(exc.diagnostics):
                raise AssertionError("a diagnostic shows the outside file") from None
            return "steps: E501", None
        stage = "block"
        block = stack_block(fit, "measured_stack", None, "ccost calibrate --steps " + name)
        if not check_text(block, "stack.ccost").ok:
            raise AssertionError("the stack block does not check")
        if re.search(r"\b(nan|inf)\b", block.lower()):
            raise AssertionError("the block prints NaN or inf")
        return "steps: fitted, block checks", None
    except Exception:
        return f"INTERNAL ERROR in steps ({stage})", f"steps mutant {index} ({name}): {traceback.format_exc(limit=6)}"


_SERVERS: dict = {}


def _servers() -> dict:
    """Local TCP services of this worker: a port that accepts and never answers, one that answers like a
    web server, and one closed."""
    import socket
    import threading

    pid = os.getpid()
    if pid in _SERVERS:
        return _SERVERS[pid]
    ports = {}
    for kind in ("silent", "http"):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        ports[kind] = sock.getsockname()[1]

        def serve(sock=sock, kind=kind):
            held = []
            while True:
                conn, _ = sock.accept()
                held.append(conn)
                if kind == "http":
                    try:
                        conn.settimeout(2)
                        conn.recv(65536)
                        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    except OSError:
                        pass

        threading.Thread(target=serve, daemon=True).start()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    ports["closed"] = closed.getsockname()[1]
    closed.close()
    _SERVERS[pid] = ports
    return ports


def address(rng: random.Random, ports: dict) -> str:
    scheme = rng.choice(["tcp://", "tcp://", "", "tls://", "ws://", "wss://", "ucx://", "inproc://", "http://",
                         "foo://", "tcp:/", "TCP://", "tcp://tcp://"])
    host = rng.choice(["127.0.0.1", "127.0.0.1", "localhost", "[::1]", "::1", "nonexistent.invalid", "",
                       "256.1.1.1", "ä.invalid", "127.0.0.1\x00", "[::1", "a b"])
    port = rng.choice([str(ports["closed"]), str(ports["closed"]), str(ports["silent"]), str(ports["http"]), "0",
                       "65536", "-1", "abc", "", "99999999999", "1e3", "８７８６"])
    text = f"{scheme}{host}" + (f":{port}" if rng.random() < 0.9 else "") + rng.choice(["", "", "/", "/x", "?a=b", " "])
    if rng.random() < 0.1 and text:
        j = rng.randrange(len(text))
        text = text[:j] + chr(rng.choice([0, 7, 0x202E, rng.randrange(32, 127)])) + text[j + 1:]
    return text


def one_address(args: tuple[int, int, float]) -> tuple[str, str | None]:
    """A scheduler address through the connection ``--scheduler`` makes: E513 within the timeout."""
    index, seed, timeout = args
    from ccost import remote
    from ccost.diagnostics import CcostError

    remote.TIMEOUT = timeout
    rng = random.Random(seed * 9_000_011 + index)
    addr = address(rng, _servers())
    start = time.perf_counter()
    try:
        try:
            c = remote.client(addr)
        except CcostError as exc:
            codes = {d.code for d in exc.diagnostics}
            took = time.perf_counter() - start
            if took > 3 * timeout + 10:
                raise AssertionError(f"{addr!r}: {took:.1f} s for a timeout of {timeout} s") from None
            return ("address: " + "/".join(sorted(codes)), None)
        c.close()
        raise AssertionError(f"{addr!r}: connected to a scheduler, but none runs here")
    except Exception:
        return "INTERNAL ERROR in scheduler address", f"address {addr!r}: {traceback.format_exc(limit=6)}"


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
    ap.add_argument("--configs", type=int, default=0, help="mutated config.json files through import hf and a spec")
    ap.add_argument("--steps", type=int, default=0, help="mutated steps files through calibrate --steps")
    ap.add_argument("--addresses", type=int, default=0, help="scheduler addresses through --scheduler's connection")
    ap.add_argument("--address-timeout", type=float, default=1.0,
                    help="ccost.remote.TIMEOUT for the addresses (seconds; the command's is 10)")
    ap.add_argument("--lsp", type=int, default=0,
                    help="language-server sessions of random edits (bench/fuzz_lsp.py, when it is there)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-points", type=int, default=200_000)
    ap.add_argument("--out", default=str(REPO / "bench" / "fuzz-failures"),
                    help="where specs that caused an internal error are saved")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}  (re-run: bench/fuzz.py --seed {seed} --specs {args.specs} --explain {args.explain} "
          f"--review {args.review} --logs {args.logs} --configs {args.configs} --steps {args.steps} "
          f"--addresses {args.addresses} --lsp {args.lsp})", flush=True)
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
        configs = sorted(_HF_DIR.glob("*/config.json"))
        work_configs = ((i, seed, configs[i % len(configs)].parent.name, configs[i % len(configs)].read_text())
                        for i in range(args.configs))
        for k, (outcome, err) in enumerate(pool.imap_unordered(one_config, work_configs, chunksize=32), 1):
            counts[outcome] += 1
            if err:
                errors.append(err)
            if k % 5_000 == 0:
                print(f"  {k:,} configs done, {time.perf_counter() - start:.0f} s", flush=True)
        for k, (outcome, err) in enumerate(pool.imap_unordered(one_steps, ((i, seed) for i in range(args.steps)),
                                                               chunksize=8), 1):
            counts[outcome] += 1
            if err:
                errors.append(err)
            if k % 1_000 == 0:
                print(f"  {k:,} steps files done, {time.perf_counter() - start:.0f} s", flush=True)
        work_addresses = ((i, seed, args.address_timeout) for i in range(args.addresses))
        for outcome, err in pool.imap_unordered(one_address, work_addresses, chunksize=4):
            counts[outcome] += 1
            if err:
                errors.append(err)
    lsp_status = 0
    if args.lsp:
        lsp_status = run_lsp(args.lsp, seed, args.jobs)
    wall = time.perf_counter() - start
    surfaces = ("log:", "config", "steps", "address", "INTERNAL ERROR in calibrate", "INTERNAL ERROR in config",
                "INTERNAL ERROR in steps", "INTERNAL ERROR in scheduler")
    checked = sum(v for k, v in counts.items() if not k.startswith(surfaces))
    evaluated = sum(v for k, v in counts.items() if k.startswith(("eval", "deep", "explain", "writers",
                                                                   "review", "INTERNAL ERROR in e")))
    deep = sum(v for k, v in counts.items() if k.startswith("deep"))
    reviewed = sum(v for k, v in counts.items() if "review: ok" in k)
    print(f"{checked:,} mutated specs through check; {evaluated:,} through eval; {deep:,} of those through "
          f"explain and the text/JSON/YAML writers; {reviewed:,} through the HTML review")
    for k, v in sorted(counts.items()):
        print(f"  {k:45s} {v:>8,}")
    for what, prefix in (("config.json files", "config"), ("steps files", "steps"), ("scheduler addresses", "address")):
        n = sum(v for k, v in counts.items() if k.startswith(prefix) or k.startswith(f"INTERNAL ERROR in {prefix}")
                or (prefix == "address" and k.startswith("INTERNAL ERROR in scheduler")))
        if n:
            print(f"{n:,} {what}")
    print(f"internal errors: {len(errors)}   wall time {wall:.0f} s with {args.jobs} processes   seed {seed}")
    for e in errors[:10]:
        print(e)
    return 1 if errors or lsp_status else 0


def run_lsp(sessions: int, seed: int, jobs: int) -> int:
    """``bench/fuzz_lsp.py``'s own run of ``sessions`` editing sessions with this seed (its report printed as
    it goes); its exit status, or 0 with a note when the file is not there."""
    path = Path(__file__).resolve().parent / "fuzz_lsp.py"
    if not path.is_file():
        print(f"--lsp {sessions}: bench/fuzz_lsp.py is not in this checkout; no language-server sessions run")
        return 0
    import importlib.util

    spec = importlib.util.spec_from_file_location("fuzz_lsp", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    print(f"language server: bench/fuzz_lsp.py --sessions {sessions} --seed {seed} --jobs {jobs}", flush=True)
    return int(module.main(["--sessions", str(sessions), "--seed", str(seed), "--jobs", str(jobs)]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
