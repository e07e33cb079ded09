"""``ccost import hf PATH/config.json``: print a ``model`` block from a Hugging Face config.

The block lists the shape (layers, hidden, heads, KV heads, FFN, vocabulary, experts, top-k, shared
experts, MLA ranks, dtype, tied embeddings) and ``params`` computed from it (``ccost.hf``), with comments
that break the count down. When ``model.safetensors.index.json`` lies beside the config, the count is
checked against its ``metadata.total_size``; beyond 1 % a W510 warning gives both figures.

Local files only: a Hugging Face model id is not fetched. Append the output to a spec
(``ccost import hf x/config.json >> specs/models.ccost``) or name the file in a model block instead
(``model m { config = "x/config.json" }``). Exit 0, or 2 when the file cannot be read or understood.
"""

from __future__ import annotations

import argparse
import os
import sys

HELP = "print a model block from a Hugging Face config.json, with its parameter count"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="source", metavar="SOURCE", required=True)
    hf = sub.add_parser("hf", help="a Hugging Face config.json (a local file)",
                        description="Print a model block from a local Hugging Face config.json; the "
                        "parameter count is computed from the shapes and checked against "
                        "model.safetensors.index.json when it lies beside the config.")
    hf.add_argument("path", metavar="PATH", help="config.json, or the folder that holds it")
    hf.add_argument("--name", help="the block's name (default: from the folder, e.g. llama_3_1_8b)")
    hf.add_argument("--title", help="the block's title (default: the folder's name)")


def _fail(message: str, help: str | None = None):
    from ccost.diagnostics import CcostError, error

    return CcostError(error("E510", message, None, help))


def run(args: argparse.Namespace) -> int:
    from ccost import hf
    from ccost.diagnostics import render_all, use_colour, warning

    path = args.path
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    if not os.path.exists(path):
        looks_like_id = "://" not in path and path.count("/") == 1 and not path.endswith(".json")
        if "://" in path or looks_like_id:
            raise _fail(f"{args.path}: ccost reads local files only",
                        "download the model's config.json (and model.safetensors.index.json) first, then "
                        "name the file: `ccost import hf ./Llama-3.1-8B/config.json`")
    try:
        cfg = hf.load_config(path)
        model = hf.imported(cfg)
    except hf.HfError as exc:
        raise _fail(exc.message, exc.help) from None
    name, title = hf.block_name(path)
    if args.name:
        from ccost.syntax.parse import _NAME_RE

        if not _NAME_RE.match(args.name):
            raise _fail(f"--name {args.name!r} is not a name", "use letters, digits and _, like llama_8b")
        name = args.name
    title = args.title or title
    index_path = os.path.join(os.path.dirname(path), hf.INDEX_NAME)
    check = note = None
    if os.path.exists(index_path):
        try:
            check = hf.check_index(model, index_path, cfg.get("torch_dtype"))
        except hf.HfError as exc:
            note = f"{hf.INDEX_NAME} not used: {exc.message}"
        if check is None and note is None:
            note = f"{hf.INDEX_NAME} has no metadata.total_size to compare with"
    else:
        note = f"no {hf.INDEX_NAME} beside the config: the count is not checked against the weights"
    text = hf.model_block(model, name, title, _shown(path), check, note)
    from ccost.fmt import format_text

    text = format_text(text, "<import>")
    # The block must check as printed (the rules a config.json can break are refused above with their own
    # words; this is the net under them: a rule of the checker the importer does not know yet)
    from ccost.check import check_text

    result = check_text(text, "<import>")
    if not result.ok:
        first = next(d for d in result.diagnostics if d.is_error)
        raise _fail(f"{args.path}: the model block it gives does not check: {first.message}",
                    first.help or "check the config's counts")
    sys.stdout.write(text)
    if check is not None and not check.agrees:
        d = warning("W510", f"{path}: the parameter count disagrees with the checkpoint by more than 1 %: "
                    f"{check.text()}",
                    help="the count assumes the layout of the families ccost knows (Llama, Mistral, Mixtral, "
                         "Qwen2, DeepSeek-V2/V3); set `params` in the block to the checkpoint's figure if "
                         "the architecture differs")
        print(render_all([d], {}, use_colour(sys.stderr)), file=sys.stderr)
    return 0


def _shown(path: str) -> str:
    """The path as the block's source names it: relative to the current folder when below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
