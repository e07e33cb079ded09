"""``ccost calibrate LOG...``: fit α and bandwidth from nccl-tests output, print a ``link`` block.

The block comes from the first all_reduce test among the logs (or ``--test``); every other test in the
logs is fitted too and shown in comments as a cross-check (an all_gather log should imply about the same
bandwidth as the all_reduce one).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from pathlib import Path

HELP = "fit alpha and bandwidth from nccl-tests logs; print a link block ready to import"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ccost.collectives import ALGORITHMS

    p.description = (
        "Fit T = a + b*size (piecewise, by relative error) to the times nccl-tests printed, convert it "
        "through the collective's hop and volume formulas into alpha per hop and bandwidth per GPU per "
        "direction, and print a `link` block with the fit quality in comments.")
    p.epilog = ("example: ccost calibrate all_reduce.txt --name nvlink_measured --holdout "
                "--plot fit.svg -o specs/measured/nvlink.ccost")
    p.add_argument("logs", nargs="*", metavar="LOG", help="nccl-tests output (all_reduce_perf, ...)")
    p.add_argument("--steps", default=None, metavar="FILE",
                   help="fit a software-stack profile instead, to measured step times: a CSV/YAML table (plan, "
                   "spec, tpot|ttft|step_time), vLLM benchmark_serving JSON or a Megatron log (with --spec and "
                   "--plan); prints a `stack` block")
    p.add_argument("--kernels", default=None, metavar="SYSTEM[,SYSTEM...]",
                   help="reduce measured kernel tables to curves instead: AIConfigurator's silicon database for "
                   "these systems (h100_sxm, h200_sxm, b200_sxm, a100_sxm); prints one `kernels` block per "
                   "system (needs ccost's `kernels` extra: pip install -e '.[kernels]' in a checkout)")
    p.add_argument("--engine", default="vllm", metavar="ENGINE[,ENGINE...]",
                   help="--kernels: the engines whose tables to read (vllm, sglang, trtllm, comma-separated; "
                   "default vllm): one block per system and engine")
    p.add_argument("--spec", default=None, metavar="SPEC", help="--steps: the spec of rows that name none")
    p.add_argument("--plan", default=None, metavar="NAME", help="--steps: the plan a JSON result or a log measured")
    p.add_argument("--only", default=None, metavar="STACK", help="--steps: only the rows whose `stack` column is this")
    p.add_argument("--folds", type=int, default=5, metavar="K", help="--steps: k-fold hold-out (default 5; 0: none)")
    p.add_argument("--name", default="measured",
                   help="name of the link block: letters, digits and _, not a keyword (default: measured)")
    p.add_argument("--title", default=None,
                   help="title of the link block, one line without control characters (default: test, "
                        "ranks, GPUs)")
    p.add_argument("--algorithm", default="ring", choices=ALGORITHMS,
                   help="AllReduce algorithm whose hop and volume formulas convert the fit (default ring, "
                   "what NCCL uses for large messages on one node)")
    p.add_argument("--ranks", type=int, default=None, metavar="N",
                   help="rank count, when the log does not say it (multi-process runs without device "
                   "lines)")
    p.add_argument("--test", default=None, metavar="NAME",
                   help="which test gives the block, e.g. all_gather_perf (default: the first all_reduce)")
    p.add_argument("--sizes", default=None, metavar="LO..HI",
                   help="fit only these message sizes, e.g. 64KiB..4MiB for decode-sized AllReduces "
                   "(either end may be left out); by default every size, in pieces")
    p.add_argument("--in-place", action="store_true", help="fit the in-place times (default out-of-place)")
    p.add_argument("--holdout", action="store_true",
                   help="also fit on every other size and report the error on the others")
    p.add_argument("--line-rate", default=None, metavar="BW",
                   help="spec-sheet bandwidth per GPU per direction to compare the busbw plateau with, "
                   "e.g. '300 GB/s' (default: from the GPU names in the log, when it lists them)")
    p.add_argument("--intra", default=None, metavar="LOG|SPEC[:LINK]",
                   help="the intra-node link of a multi-node all_reduce log: a one-node nccl-tests log of the "
                   "same machine, or a spec and the name of its link (specs/x.ccost:nvlink4). The log's "
                   "inter-node link is then fitted under the hierarchical model and printed")
    p.add_argument("--per-node", type=int, default=None, metavar="G",
                   help="ranks per node of the multi-node log (default: from its Rank lines' hosts)")
    p.add_argument("--plot", default=None, metavar="FILE.svg", help="write an SVG of the fit (log-log)")
    p.add_argument("-o", "--output", default=None, metavar="FILE",
                   help="write the block to FILE (atomically) instead of standard output; the block's "
                   "source then names the log relative to FILE, which is where the review looks for it")


def _usage(message: str, help: str | None = None):
    from ccost.diagnostics import CcostError, error

    return CcostError(error("E501", message, None, help))


def _line_rate(text: str | None) -> float | None:
    if text is None:
        return None
    from ccost import units

    try:
        value, dim = units.parse_quantity(text)
    except (ValueError, units.UnitError) as exc:
        raise _usage(f"--line-rate {text!r} is not a bandwidth ({exc})", "write it like '300 GB/s'") from None
    from ccost.schema import R_LINK_BANDWIDTH

    lo, hi = R_LINK_BANDWIDTH["minimum"], R_LINK_BANDWIDTH["maximum"]
    if dim != units.BANDWIDTH or not lo <= value <= hi:  # also NaN and 1e400 (infinity)
        raise _usage(f"--line-rate needs a bandwidth between {units.format_quantity(lo, units.BANDWIDTH)} and "
                     f"{units.format_quantity(hi, units.BANDWIDTH)}, like '300 GB/s'; got {text[:40]!r}")
    return value


def _command(args: argparse.Namespace) -> str:
    """The command line that regenerates the output, for the block's comment."""
    parts = ["ccost", "calibrate", *args.logs]
    if getattr(args, "kernels", None):
        parts += ["--kernels", args.kernels, "--engine", args.engine]
    for opt in ("steps", "spec", "plan", "only"):
        if getattr(args, opt, None):
            parts += [f"--{opt}", getattr(args, opt)]
    if getattr(args, "steps", None) and args.folds != 5:
        parts += ["--folds", str(args.folds)]
    if args.name != "measured":
        parts += ["--name", args.name]
    if args.title:
        parts += ["--title", args.title]
    if args.algorithm != "ring":
        parts += ["--algorithm", args.algorithm]
    if args.ranks is not None:
        parts += ["--ranks", str(args.ranks)]
    if args.test:
        parts += ["--test", args.test]
    if args.sizes:
        parts += ["--sizes", args.sizes]
    if args.in_place:
        parts.append("--in-place")
    if args.holdout:
        parts.append("--holdout")
    if args.line_rate:
        parts += ["--line-rate", args.line_rate]
    if getattr(args, "intra", None):
        parts += ["--intra", args.intra]
    if getattr(args, "per_node", None) is not None:
        parts += ["--per-node", str(args.per_node)]
    if args.plot:
        parts += ["--plot", args.plot]
    if args.output:
        parts += ["-o", args.output]
    return " ".join(shlex.quote(p) for p in parts)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _self_check(text: str, path: str) -> None:
    """The block must check clean as it is written: whatever a log or the options carried, it is a
    comment or an escaped string, never code. A failure here is a bug in ccost, said as one."""
    from ccost.check import check_text

    result = check_text(text, path)
    if not result.ok:
        first = result.errors[0] if result.errors else None
        raise _usage("the generated link block does not check" + (f": {first.code} {first.message}" if first
                                                                    else ""),
                     "this is a bug in ccost; nothing was written. Please report it with the log attached")


def _write_all(outputs: list[tuple[str, str]]) -> None:
    """Block and plot land together or not at all (docs/interface.md: never a half-written output)."""
    from ccost.report.atomic import AtomicFiles, check_targets

    try:
        check_targets(Path(path) for path, _ in outputs)  # before anything is written
        with AtomicFiles() as files:  # an error or SIGTERM/SIGHUP: no temporary file left behind
            for path, text in outputs:
                files.write(Path(path), text.encode("utf-8"))
    except OSError as exc:
        raise _usage(f"cannot write {exc.filename or 'the output'}: {exc.strerror or exc}",
                     "nothing was replaced; check that the path is a file in a folder you can write") from None


def _intra_link(spec: str, algorithm: str, in_place: bool):
    """``--intra``: (LinkParams, label) from a one-node log, or from ``SPEC.ccost[:LINK]``."""
    from ccost.model import costs

    path, _, name = spec.partition(":") if ".ccost:" in spec or spec.endswith(".ccost") else (spec, "", "")
    if path.endswith(".ccost"):
        from ccost.check import check_file

        if not Path(path).is_file():
            raise _usage(f"--intra {spec[:80]!r}: spec {path} not found", "check the path")
        result = check_file(path)
        if not result.ok:
            first = result.errors[0]
            raise _usage(f"--intra {path}: the spec does not check ({first.code} {first.message})",
                         f"fix it first: ccost check {path}")
        links = result.spec.links
        found = {k.name: k for k in (links.values() if hasattr(links, "values") else links)}
        if not name:
            if len(found) != 1:
                raise _usage(f"--intra {path}: the spec has {len(found)} links; say which",
                             f"write --intra {path}:LINK with one of {', '.join(sorted(found)) or '(none)'}")
            name = next(iter(found))
        if name not in found:
            raise _usage(f"--intra {spec[:80]!r}: no link `{name[:40]}` in {path}",
                         f"links there: {', '.join(sorted(found)) or '(none)'}")
        return costs.LinkParams.from_link(found[name], label="intra"), f"link {name} of {path}"
    from ccost.calibrate import fit_log, read_log
    from ccost.calibrate.hier import link_params_of_fit

    one = fit_log(read_log(path), algorithm, in_place=in_place)
    return link_params_of_fit(one), f"the fit of {path} ({one.ranks} ranks)"


def _run_steps(args: argparse.Namespace) -> int:
    """``--steps FILE``: fit a stack profile to measured step times and print a ``stack`` block."""
    from ccost.calibrate.block import valid_name
    from ccost.calibrate.files import read_steps_file
    from ccost.calibrate.steps import fit_steps, plot_steps_svg, stack_block

    if args.logs:
        raise _usage("--steps fits a stack profile; nccl-tests logs are calibrated on their own",
                     "run ccost calibrate LOG... and ccost calibrate --steps FILE separately")
    name = args.name if args.name != "measured" else "measured_stack"
    if not valid_name(name):
        raise _usage(f"--name {name[:40]!r} is not a valid block name", "e.g. --name vllm_h100_measured")
    if args.title is not None and _CONTROL.search(args.title):
        raise _usage("--title contains a control character", "write the title on one line")
    if not 0 <= args.folds <= 100:
        raise _usage(f"--folds {args.folds}: between 0 (no hold-out) and 100")
    rows = read_steps_file(args.steps, args.spec, args.plan, args.only)
    fit = fit_steps(rows, args.folds, args.steps)
    block = stack_block(fit, name, args.title, _command(args))
    _self_check(block, args.output or "<calibrate>")
    return _emit(args, block, lambda: plot_steps_svg(fit), [],
                 f"stack {name}, fit median error {100 * fit.median_error:.1f} %")


def _run_kernels(args: argparse.Namespace) -> int:
    """``--kernels SYSTEM``: reduce AIConfigurator's measured kernel tables to ``kernels`` blocks."""
    import os as _os

    from ccost import check
    from ccost.calibrate import kernels as K

    if args.logs or args.steps is not None:
        raise _usage("--kernels reduces kernel tables; nccl-tests logs and --steps are calibrated on their own",
                     "run ccost calibrate --kernels SYSTEM alone")
    systems = [x.strip() for x in args.kernels.split(",") if x.strip()]
    unknown = [x for x in systems if x not in K.SYSTEMS]
    if not systems or unknown:
        raise _usage(f"--kernels {(unknown or [args.kernels])[0][:40]!r} is not a system ccost can reduce",
                     "one or more of " + ", ".join(K.SYSTEMS) + ", comma-separated")
    engines = [x.strip() for x in args.engine.split(",") if x.strip()]
    bad = [x for x in engines if x not in K.ENGINES]
    if not engines or bad:
        raise _usage(f"--engine {(bad or [args.engine])[0][:40]!r} is not an engine of the tables",
                     "one or more of " + ", ".join(K.ENGINES) + ", comma-separated")
    folder = check._std_dir()
    if folder is None:  # pragma: no cover - an installation without its library
        raise _usage("the bundled library (std/gpus.ccost) is missing", "reinstall ccost")
    spec, _ = check.load_spec(_os.path.join(folder, "gpus.ccost"))
    blocks = []
    for system in systems:
        gpu = spec.gpus[K.SYSTEMS[system]]
        peaks = {"flops": gpu.flops, "fp8_flops": gpu.fp8_flops, "hbm_bandwidth": gpu.hbm_bandwidth}
        for engine in engines:
            if not K.has_tables(system, engine):
                if len(engines) == 1:
                    raise _usage(f"the tables have no {engine} kernels for {system}",
                                 "another engine (--engine vllm), or leave the system out")
                continue  # a system measured under some engines only: the others' blocks
            red = K.reduce_system(system, engine, peaks, gpu.name)
            blocks.append(K.kernels_block(red, f"{gpu.name}_{engine}", _command(args)))
    header = ("# ccost standard library: measured kernel curves (docs/kernels.md), GENERATED by `ccost calibrate "
              "--kernels`;\n# do not edit by hand. Data: AIConfigurator's silicon database, Apache-2.0 "
              "(docs/sources.md).\n\n") if args.output else ""
    text = header + "\n".join(blocks)
    _self_check(text, args.output or "<calibrate>")
    return _emit(args, text, lambda: "", [], f"{len(blocks)} kernels block(s)")


def run(args: argparse.Namespace) -> int:
    from ccost.calibrate import fit_test, link_block, quality_lines, read_log
    from ccost.calibrate.block import comment_safe, valid_name
    from ccost.calibrate.fit import select_test
    from ccost.calibrate.logs import MAX_RANKS
    from ccost.diagnostics import CcostError

    if getattr(args, "kernels", None) is not None:
        return _run_kernels(args)
    if args.steps is not None:
        return _run_steps(args)
    if not args.logs:
        raise _usage("no log given", "pass nccl-tests output (ccost calibrate all_reduce.txt), or --steps FILE "
                     "to fit a stack profile to measured step times")
    if not valid_name(args.name):
        from ccost.schema import keywords

        why = "is a keyword of the language" if args.name in keywords() else "is not a valid block name"
        raise _usage(f"--name {args.name[:40]!r} {why}",
                     "use letters, digits and _, not starting with a digit, and not a keyword such as `plan` "
                     "or `link`, e.g. --name nvlink_measured")
    if args.title is not None and _CONTROL.search(args.title):
        bad = _CONTROL.search(args.title).group()
        raise _usage(f"--title contains a control character (U+{ord(bad):04X}); the block's title is one "
                     "line of text", "write the title without newlines, tabs or escape sequences")
    if args.ranks is not None and not 2 <= args.ranks <= MAX_RANKS:
        raise _usage(f"--ranks {args.ranks}: a collective needs at least 2 ranks" if args.ranks < 2 else
                     f"--ranks {str(args.ranks)[:24]}: at most {MAX_RANKS:,} ranks")
    rate = _line_rate(args.line_rate)
    sizes = None
    if args.sizes is not None:
        from ccost.calibrate.fit import parse_size_range

        try:
            sizes = parse_size_range(args.sizes)
        except ValueError as exc:
            raise _usage(f"--sizes {args.sizes!r}: {exc}", "write it like --sizes 64KiB..4MiB") from None
    logs = [read_log(path, args.ranks) for path in args.logs]
    warnings = [w for log in logs for w in log.warnings]

    # The block's test: --test in any log, else the first all_reduce, else the first fittable test.
    chosen = None
    if args.test:
        for log in logs:
            if any(t.name == (args.test if args.test.endswith("_perf") else args.test + "_perf")
                   for t in log.tests):
                chosen = (log, select_test(log, args.test))
                break
        if chosen is None:
            select_test(logs[0], args.test)  # raises with the list of tests it has
    else:
        for log in logs:
            for t in log.tests:
                if t.kind == "allreduce":
                    chosen = (log, t)
                    break
            if chosen:
                break
        if chosen is None:
            chosen = (logs[0], select_test(logs[0]))
    log, test = chosen
    fit = fit_test(test, args.algorithm, args.in_place, args.holdout, log, rate, sizes)

    out_dir = Path(args.output).parent if args.output else None
    log_name = os.path.relpath(log.file, out_dir).replace(os.sep, "/") if out_dir is not None else log.file
    if args.intra:
        from ccost.calibrate.hier import fit_hierarchical, hier_block

        intra, label = _intra_link(args.intra, args.algorithm, args.in_place)
        hfit = fit_hierarchical(fit, test, intra, label, args.per_node)
        text = hier_block(hfit, args.name, log_name, args.title, _command(args))
        _self_check(text, args.output or "<calibrate>")
        return _emit(args, text, _link_plot(fit), warnings,
                     f"inter-node link {args.name}, hierarchical median error {100 * hfit.median_error:.1f} %")
    elif args.per_node is not None:
        raise _usage("--per-node is for the hierarchical fit", "pass --intra with the intra-node link too")
    text = link_block(fit, args.name, log_name, args.title, _command(args))

    cross = []
    for other_log in logs:
        for t in other_log.tests:
            if t is test:
                continue
            head = f"# Cross-check: {t.name} in {other_log.file} (line {t.line}), {t.ranks} ranks"
            try:
                f = fit_test(t, args.algorithm, args.in_place, False, other_log, rate, sizes)
            except CcostError as exc:
                cross.append(f"{head}: not fitted: {exc.diagnostics[0].message}")
                continue
            cross.append(f"{head}: alpha {f.alpha * 1e6:.4g} us, bandwidth {f.bandwidth / 1e9:.4g} GB/s "
                         f"({f.algorithm})")
            cross += ["#   " + line[2:] for line in quality_lines(f)]
    if cross:
        text = "\n".join(comment_safe(line) for line in cross) + "\n" + text
    _self_check(text, args.output or "<calibrate>")

    return _emit(args, text, _link_plot(fit), warnings,
                 f"link {args.name}, alpha {fit.alpha * 1e6:.4g} us, bandwidth {fit.bandwidth / 1e9:.4g} GB/s")


def _link_plot(fit):
    """Draws the link fit's plot when called (matplotlib is imported only when --plot asks for it)."""
    def draw() -> str:
        from ccost.calibrate import plot_svg

        return plot_svg(fit)
    return draw


def _emit(args: argparse.Namespace, text: str, plot, warnings: list, what: str) -> int:
    """Print the warnings, then write the block (-o) and the plot (--plot: ``plot()`` draws it) together —
    all or none — or print the block on standard output; ``what`` says on standard error what was written."""
    from ccost.diagnostics import render_all, use_colour

    if warnings:
        print(render_all(warnings, None, use_colour(sys.stderr)), file=sys.stderr)
    outputs: list[tuple[str, str]] = [(args.output, text)] if args.output else []
    if args.plot:
        outputs.append((args.plot, plot()))
    if outputs:
        _write_all(outputs)
    if args.output:
        print(f"wrote {args.output}: {what}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
