"""``ccost init [PATH] --model NAME --cluster NAME``: write a starter spec for a bundled model and cluster.

The spec imports the bundled library, defines one plan (tensor parallelism inside a node, pipeline stages
across nodes until the weights fit), a sweep over the batch size and the default policy, then the command
prints what to run next. An existing file is never overwritten (the file is created exclusively, so two
runs racing cannot clobber each other either), the folders of PATH are created, and a failed write leaves
nothing (``report.atomic.write_new``). ``ccost init -`` prints the spec on standard output instead.
``--list`` prints the bundled models and clusters.

Exit 0, or 2 for an unknown name or a file that already exists.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HELP = "write a starter spec for a bundled model and cluster"

DEFAULT_MODEL, DEFAULT_CLUSTER = "llama3_70b", "hgx_h100"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default="plan.ccost", metavar="PATH",
                        help="the spec to write (default: plan.ccost; its folders are created); never "
                             "overwritten; `-` prints it on standard output")
    model = parser.add_argument("--model", default=DEFAULT_MODEL,
                                help=f"a model of the bundled library (default: {DEFAULT_MODEL}; see --list)")
    cluster = parser.add_argument("--cluster", default=DEFAULT_CLUSTER,
                                  help=f"a cluster of the bundled library (default: {DEFAULT_CLUSTER}; "
                                  "see --list)")
    # shell completion (argcomplete) offers the bundled names; argparse ignores the attribute
    model.completer = lambda **_: names_of("model")  # type: ignore[attr-defined]
    cluster.completer = lambda **_: names_of("cluster")  # type: ignore[attr-defined]
    from ccost.schema import PHASE_NAMES

    parser.add_argument("--phase", choices=PHASE_NAMES, default="decode",
                        help="the workload (default: decode)")
    parser.add_argument("--list", action="store_true",
                        help="list the bundled models and clusters, write nothing")


def bundled():
    """The bundled library, checked: (models, clusters) by name."""
    from ccost.check import check_text

    result = check_text('import "std/models.ccost"\nimport "std/clusters.ccost"\n', "<bundled>")
    if result.spec is None:  # the library is ccost's own: this is a bug, not a user error
        raise RuntimeError("the bundled std library does not check: "
                           + "; ".join(d.message for d in result.errors))
    return result.spec.models, result.spec.clusters


def names_of(kind: str) -> list[str]:
    """Bundled model or cluster names, for --list and shell completion."""
    models, clusters = bundled()
    return list(models if kind == "model" else clusters)


def _pick(name: str, table, what: str):
    from difflib import get_close_matches

    from ccost.diagnostics import CcostError, error

    if name in table:
        return table[name]
    close = get_close_matches(name, list(table), n=1)
    raise CcostError(error("E101", f"no bundled {what} named `{name}`", None,
                           (f"did you mean `{close[0]}`? " if close else "")
                           + f"the bundled {what}s: " + ", ".join(table)))


def layout(model, cluster, max_memory: float = 0.9) -> tuple[int, int, str]:
    """(tp, pp, why): TP over the node's fast domain, as far as it divides the KV heads; PP across nodes,
    doubling until the weights fit the policy's share of GPU memory (or the cluster runs out)."""
    limit = min(cluster.gpus_per_node, cluster.domain)
    tp = 1
    while tp * 2 <= limit and (not model.kv_heads or model.kv_heads % (tp * 2) == 0):
        tp *= 2
    pp = 1
    weights = model.total_weight_bytes
    budget = cluster.gpu.memory * max_memory
    while weights / (tp * pp) > budget and tp * pp * 2 <= cluster.gpus and model.layers % (pp * 2) == 0:
        pp *= 2
    fits = weights / (tp * pp) <= budget
    why = (f"tp = {tp}: the largest power of two within a node's NVLink domain that divides kv_heads; "
           + (f"pp = {pp}: the weights ({weights / 1e9:.0f} GB) need {tp * pp} GPUs at "
              f"{max_memory:.0%} of {cluster.gpu.memory / 1e9:.0f} GB" if pp > 1 else
              f"the weights ({weights / 1e9:.0f} GB) fit {tp} GPUs")
           + ("" if fits else " — they do NOT fit this cluster: pick a larger one (`ccost eval` fails its memory check, item 11)"))
    return tp, pp, why


def starter(model, cluster, phase: str) -> str:
    """The starter spec: the phase's workload lines, sweep and defaults come from its record
    (``ccost.schema.PHASE_KINDS``, its ``starter``)."""
    from ccost.schema import phase_kind

    st = phase_kind(phase).starter
    tp, pp, why = layout(model, cluster)
    plan = f"{phase}_tp{tp}" + (f"_pp{pp}" if pp > 1 else "")
    title = f"{model.label} {phase} on {cluster.label}".replace('"', "'")
    lines = [
        f"# A starter capacity plan written by `ccost init`: {model.label} on {cluster.label}.",
        "# Edit the plan, then run `ccost check` / `ccost eval` / `ccost report` on this file.",
        "# The language: docs/language.md (or `ccost schema`); the bundled library: specs/std/.",
        "",
        'import "std/gpus.ccost"',
        'import "std/links.ccost"',
        'import "std/clusters.ccost"',
        'import "std/models.ccost"',
        "",
        f"# {why}",
        f'plan {plan} "{title}" {{',
        f"  model   = {model.name}",
        f"  cluster = {cluster.name}",
        f"  phase   = {phase}",
        *(line.format(batch=st.batch) for line in st.workload),
        f"  tp      = {tp}",
    ]
    if pp > 1:
        lines.append(f"  pp      = {pp}")
        if st.microbatches:  # a training pipeline needs micro-batches to fill
            lines.append(f"  microbatches = {4 * pp}")
    lines += [
        "}",
        "",
        st.sweep[0],
        f"  base  = {plan}",
        st.sweep[1],
        "}",
        "",
        "policy { max_overhead = 30 %; min_efficiency = 70 %; max_memory = 90 % }",
    ]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from ccost.diagnostics import CcostError, error

    models, clusters = bundled()
    if args.list:
        print("models:   " + ", ".join(models))
        print("clusters: " + ", ".join(clusters))
        return 0
    model = _pick(args.model, models, "model")
    cluster = _pick(args.cluster, clusters, "cluster")
    text = starter(model, cluster, args.phase)
    from ccost.fmt import format_text

    path = args.path
    text = format_text(text, "<stdin>" if path == "-" else path)
    if path == "-":  # standard output, as `-` means to every verb; the starter is then all it prints
        sys.stdout.write(text)
        return 0
    if os.path.isdir(path):
        raise CcostError(error("E511", f"{path} is a folder", None,
                               f"name the file to write, like {os.path.join(path, 'plan.ccost')}"))
    from ccost.report.atomic import write_new

    try:
        write_new(Path(path), text.encode("utf-8"))  # its folders created; complete or not at all
    except FileExistsError:
        raise CcostError(error("E511", f"{path} already exists: ccost init never overwrites a file", None,
                               "name a new file: `ccost init specs/new-plan.ccost`")) from None
    except OSError as exc:
        raise CcostError(error("E511", f"cannot write {exc.filename or path}: {exc.strerror or exc}", None,
                               "check that the folder can be created and written, and that the disk has room"
                               )) from None
    print(f"wrote {path}: {model.label} on {cluster.label}, {args.phase}")
    print("next:")
    stem = os.path.splitext(os.path.basename(path))[0]
    print(f"  ccost report {path}    # the design review: reports/{stem}.html and .pdf")
    print(f"  ccost eval {path}      # the numbers, in the terminal")
    sys.stdout.flush()
    return 0
