"""Resolve and check a .ccost spec: syntax trees in, an immutable ``ccost.spec.Spec`` out.

The stages, in order:

1. **load** — parse the spec and, depth first, every file it imports (relative to the importing file, or
   ``std/...`` from the bundled library); import cycles and missing files are reported with the chain.
2. **declare** — one table of names for the spec and its imports: duplicates (E102), keywords used as
   names (E110), unknown fields with a did-you-mean (E103), ``extends`` of another kind or in a cycle
   (E107), more than one policy per file (E109).
3. **evaluate** — every field, lazily and once: expressions are evaluated on ``(SI float, Dim)`` pairs
   (unit algebra on floats, never Pint arithmetic), ``NAME.FIELD`` reads another block's field (written,
   inherited or defaulted), and the value is checked against the schema: dimension, whole numbers,
   ranges, enums, references.
4. **build** — frozen entities from the checked values (the builders live in ``ccost.schema``), then the
   topology checks that need no cost model (``_check_plan``).

Every problem of the spec and its imports is collected; the caller gets them all at once (``CheckResult``,
or one ``CcostError`` from ``load_spec``). The schema (``ccost.schema``) drives stages 2-4, so a new block
kind needs no change here.
"""

from __future__ import annotations

import difflib
import gc
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable

from ccost import schema as SC
from ccost import units as U
from ccost.diagnostics import CcostError, Diagnostic, Diagnostics, Span, error, warning
from ccost.spec import Policy, Spec
from ccost.syntax import tree as T

Reader = Callable[[str], str]

# A sweep is evaluated point by point; beyond this many points it is a typo, not a study (DESIGN §8).
MAX_SWEEP_POINTS = 100_000


@dataclass(frozen=True)
class CheckResult:
    """What ``check_file``/``check_text`` return: the spec (None when there are errors), every diagnostic
    (errors and warnings, sorted by place) and the text of every file read, for rendering."""

    spec: Spec | None
    diagnostics: list[Diagnostic]
    sources: dict[str, str]

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.is_error]

    @property
    def ok(self) -> bool:
        return self.spec is not None and not self.errors


@contextmanager
def _no_gc_pauses():
    """Python's cyclic GC rescans every live object each time enough new ones pile up; a 20,000-block spec
    builds hundreds of thousands of small acyclic ones (tokens, nodes, spans), so the scans made checking
    grow faster than the spec. Paused while one spec is checked (its few cycles are freed afterwards)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def check_file(path: str, reader: Reader | None = None) -> CheckResult:
    """Check the spec at ``path`` and everything it imports.

    ``reader(path) -> str`` reads a file (default: the working tree); it raises ``FileNotFoundError`` for a
    missing file and ``CcostError`` (E002) for one that cannot be read. ``ccost diff`` passes a reader
    that answers from a git revision.
    """
    with _no_gc_pauses():
        return _Checker(reader).run(path, None)


def check_text(text: str, path: str = "<text>", reader: Reader | None = None) -> CheckResult:
    """Check spec text as if it were the file ``path`` (imports are resolved relative to it)."""
    with _no_gc_pauses():
        return _Checker(reader).run(path, text)


def load_spec(path: str, reader: Reader | None = None) -> tuple[Spec, list[Diagnostic]]:
    """The checked spec and its warnings; raises ``CcostError`` with every error (``.sources`` set, so the
    CLI can show the source lines).

    >>> spec, warnings = load_spec("specs/llama3-70b-decode.ccost")   # doctest: +SKIP
    >>> spec.plans["tp8"].gpus                                         # doctest: +SKIP
    8
    """
    result = check_file(path, reader)
    if result.spec is None or result.errors:
        exc = CcostError(result.diagnostics)
        exc.sources = result.sources  # type: ignore[attr-defined]
        raise exc
    return result.spec, result.warnings


# ---------------------------------------------------------------------------------------------------
# Reading files


def _default_reader(path: str) -> str:
    from ccost.syntax.parse import read_source

    if not os.path.lexists(path) or os.path.isdir(path):  # the caller words both
        raise FileNotFoundError(path)
    return read_source(path)  # regular files only, bounded (ccost.userfiles)


def project_root(spec_path: str) -> str:
    """The folder a spec's imports must stay inside: the top of the git work tree that holds the spec
    (the nearest folder upwards with a ``.git`` entry), or the spec's own folder when it is not in git.

    >>> project_root("specs/a1-tp-decode.ccost")   # doctest: +SKIP
    '/path/to/capacity-plans'
    """
    start = os.path.abspath(os.path.dirname(spec_path) or ".")
    d = start
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return start
        d = parent


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (both absolute and normalised)."""
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives
        return False


from ccost.syntax.parse import MAX_IMPORT_DEPTH  # noqa: E402
#: Did-you-mean searches compare a misspelt name with every candidate; the checker stops offering them
#: after this many comparisons in one run, so 20,000 unknown names cost time linear in their number.
HINT_BUDGET = 200_000


def _std_dir() -> str | None:
    from ccost.resources import resource_dir

    try:
        return str(resource_dir("std"))
    except FileNotFoundError:
        return None


@dataclass(eq=False)
class _File:
    display: str  # the name in diagnostics and ``sources``
    real: str  # a path that opens the file (``Spec.files``)
    key: str  # identity: the real path with symlinks resolved (a symlinked self-import is a cycle)
    area: str = ""  # the folder its relative imports must stay in: the project root, or std/
    tree: T.File | None = None
    imports: list[str] = field(default_factory=list)  # keys


@dataclass(eq=False)
class _Block:
    node: T.Block
    kind: SC.BlockKind | None
    file: _File
    name: str | None

    @property
    def where(self) -> Span:
        return self.node.name_span or self.node.kind_span or self.node.span

    @property
    def label(self) -> str:
        return f"{self.node.kind} `{self.name}`" if self.name else self.node.kind


class _Bad(Exception):
    """An expression failed; its diagnostic is already in the bag."""


_ERR = object()  # a field whose value failed to check
_UNSET = object()  # a field neither written nor defaulted


def _unparen(e: T.Expr) -> T.Expr:
    while isinstance(e, T.Paren):
        e = e.inner
    return e


def _suggest(word: str, candidates: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def _did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    s = _suggest(word, candidates)
    return f"did you mean `{s}`?" if s else None


# Field names of model configs and launch scripts (Hugging Face, Megatron-LM, the Llama reference code)
# with the ccost field they mean. Spelling distance alone sends `ffn_hidden` to `hidden`, which is a
# different number.
FIELD_ALIASES: dict[str, dict[str, str]] = {
    "model": {
        "ffn_hidden": "ffn", "ffn_hidden_size": "ffn", "intermediate_size": "ffn", "ffn_dim": "ffn",
        "d_ff": "ffn", "inter_dim": "ffn", "mlp_hidden": "ffn", "hidden_size": "hidden", "d_model": "hidden",
        "dim": "hidden", "n_embd": "hidden", "num_layers": "layers", "n_layers": "layers",
        "num_hidden_layers": "layers", "n_layer": "layers", "num_attention_heads": "heads",
        "n_heads": "heads", "n_head": "heads", "num_key_value_heads": "kv_heads", "n_kv_heads": "kv_heads",
        "num_query_groups": "kv_heads", "vocab_size": "vocab", "padded_vocab_size": "vocab",
        "num_experts": "experts", "n_routed_experts": "experts", "num_local_experts": "experts",
        "num_experts_per_tok": "top_k", "moe_router_topk": "top_k", "n_activated_experts": "top_k",
        "parameters": "params", "num_params": "params", "n_params": "params",
    },
    "plan": {
        "tensor_model_parallel_size": "tp", "tensor_parallel_size": "tp", "tp_size": "tp",
        "pipeline_model_parallel_size": "pp", "pipeline_parallel_size": "pp", "pp_size": "pp",
        "expert_model_parallel_size": "ep", "expert_parallel_size": "ep", "ep_size": "ep",
        "data_parallel_size": "dp", "dp_size": "dp", "batch_size": "batch", "global_batch_size": "batch",
        "micro_batches": "microbatches", "num_microbatches": "microbatches", "seq_len": "seq",
        "seq_length": "seq", "max_seq_len": "seq", "sequence_length": "seq",
    },
    "link": {"latency": "alpha", "bw": "bandwidth"},
    "gpu": {"hbm": "memory", "hbm_bw": "hbm_bandwidth", "memory_bandwidth": "hbm_bandwidth",
            "peak_flops": "flops"},
}


def _field_guess(kind: str, word: str, names: Iterable[str]) -> str | None:
    """The field ``word`` probably meant in a ``kind`` block: a known alias first, then the closest name."""
    names = list(names)
    alias = FIELD_ALIASES.get(kind, {}).get(word)
    if alias in names:
        return alias
    return _suggest(word, names)


# Magnitude suffixes people write after a count (`params = 70B`, `7M`, `1.5T`): in a spec they would be
# units (`B` is the byte), so the help spells the count out instead.
_COUNT_SUFFIXES = {"k": 3, "K": 3, "thousand": 3, "M": 6, "million": 6, "B": 9, "b": 9, "G": 9, "bn": 9,
                   "billion": 9, "T": 12, "trillion": 12}
_SUFFIX_WORDS = {3: "thousand", 6: "million", 9: "billion", 12: "trillion"}


def _count_help(f: SC.Field, number_text: str, unit: str | None) -> str | None:
    """``params = 70B`` → "`B` is the byte, not a billion: write `params = 70e9` (or `70_000_000_000`)";
    None when ``unit`` is not a magnitude suffix, or ``f`` is not a count that runs into millions (for
    `layers = 80B` a billion is not what was meant)."""
    exp = _COUNT_SUFFIXES.get((unit or "").strip())
    try:
        big = float(f.example.replace("_", "")) >= 1e6
    except ValueError:
        big = False
    if exp is None or not big:
        return None
    field = f.name
    digits = number_text.replace("_", "")
    try:
        value = float(digits) * 10.0**exp
    except ValueError:
        return None
    spelled = f"{number_text}e{exp}" if "e" not in digits.lower() else f"{value:g}"
    whole = f" (or `{int(value):_}`)" if value == int(value) and value < 1e16 else ""
    what = {"B": "`B` is the byte, not a billion", "b": "`b` is the bit, not a billion",
            "G": "`G` is not a unit here", "M": "`M` is not a unit here", "T": "`T` is not a unit here",
            "k": "`k` is not a unit here", "K": "`K` is not a unit here"}.get(unit.strip(),
                                                                        "a count takes no unit")
    return (f"{what}: for {number_text} {_SUFFIX_WORDS[exp]} write `{field} = {spelled}`{whole}")


# ---------------------------------------------------------------------------------------------------


class _Checker:
    def __init__(self, reader: Reader | None):
        self.read: Reader = reader or _default_reader
        self.diags = Diagnostics()
        self.sources: dict[str, str] = {}
        self.files: dict[str, _File] = {}  # key -> file, in load order (imports before importers)
        self.loading: list[_File] = []
        self.blocks: list[_Block] = []
        self.names: dict[str, _Block] = {}
        self.visible: dict[str, frozenset[str]] = {}
        self.own_names: dict[str, list[str]] = {}  # file key -> the names its blocks define
        self.kind_names: dict[tuple[str, str | None], list[str]] = {}
        self.hint_budget = HINT_BUDGET
        self.bad_blocks: set[int] = set()  # id(_Block) whose extends chain is broken
        self.members_memo: dict[int, dict[str, tuple[T.Member, _Block]]] = {}
        self.values: dict[tuple[int, str], Any] = {}
        self.active: list[tuple[_Block, str]] = []
        self.entities: dict[int, Any] = {}
        self.building: set[int] = set()
        self._field_ctx: SC.Field | None = None
        self.misspelled: set[tuple[int, str]] = set()  # (block, field) an unknown field probably meant  # the field being evaluated, for hints deep in expressions

    def add(self, d: Diagnostic) -> None:
        self.diags.add(d)

    # --- 1. load ---------------------------------------------------------------------------------------

    def run(self, path: str, text: str | None) -> CheckResult:
        self.project = project_root(path)
        self.project_real = os.path.realpath(self.project)
        root = _File(display=path, real=path, key=os.path.realpath(path), area=self.project)
        try:
            if text is None:
                try:
                    text = self.read(path)
                except FileNotFoundError:
                    if os.path.isdir(path):
                        self.add(error("E002", f"{path} is a folder, not a spec file",
                                       help=f"name the .ccost files, like `{os.path.join(path, '*.ccost')}`"))
                    else:
                        self.add(error("E002", f"{path}: no such file",
                                       help="check the path; specs usually live in specs/"))
                    return self._result(None)
                except CcostError as exc:
                    self.diags.extend(exc.diagnostics)
                    self._show_anyway(path, path)
                    return self._result(None)
            self._load(root, text)
            self._declare()
            spec = self._build_spec(root)
        except RecursionError:  # the parser bounds nesting; this is the last line of defence
            self.add(error("E006", "an expression or a chain of references is nested too deeply",
                           Span.point(path, 1, 1), help="split it into smaller parts"))
            spec = None
        return self._result(spec)

    def _result(self, spec: Spec | None) -> CheckResult:
        diags = self.diags.sorted()
        if any(d.is_error for d in diags):
            spec = None
        return CheckResult(spec, diags, dict(self.sources))

    def _load(self, f: _File, text: str) -> None:
        from ccost.syntax.parse import parse

        self.sources[f.display] = text
        self.loading.append(f)
        try:
            f.tree = parse(text, f.display)
        except CcostError as exc:
            self.diags.extend(exc.diagnostics)
            f.tree = None
        if f.tree is not None and f.tree.imports and len(self.loading) > MAX_IMPORT_DEPTH:
            chain = " → ".join(g.display for g in self.loading[:3]) + " → ... → " + f.display
            self.add(error("E113", f"imports are nested more than {MAX_IMPORT_DEPTH} files deep", 
                           f.tree.imports[0].path_span, help="import the shared files from one place, "
                           "not each from the previous one", notes=[f"import chain: {chain}"]))
        elif f.tree is not None:
            for imp in f.tree.imports:
                target = self._locate(imp, f)
                if target is None:
                    continue
                if any(g.key == target.key for g in self.loading):
                    start = next(i for i, g in enumerate(self.loading) if g.key == target.key)
                    chain = " → ".join([g.display for g in self.loading[start:]] + [target.display])
                    self.add(error("E105", f"import cycle: {chain}", imp.path_span,
                                   help="move the shared blocks into a file that both import, and import "
                                        "it from each"))
                    continue
                if target.key in self.files:
                    f.imports.append(target.key)
                    continue
                try:
                    target_text = self.read(target.real)
                except FileNotFoundError:
                    self._missing_import(imp, f, target)
                    continue
                except CcostError as exc:
                    self.diags.extend(self._at_import(d, imp) for d in exc.diagnostics)
                    self._show_anyway(target.display, target.real)
                    continue
                self._load(target, target_text)
                f.imports.append(target.key)
        self.loading.pop()
        self.files[f.key] = f

    def _show_anyway(self, display: str, real: str) -> None:
        """A file that is not UTF-8 cannot be checked, but its line can still be shown under the caret."""
        if self.read is not _default_reader:
            return
        from ccost.userfiles import read_user_bytes

        try:
            data = read_user_bytes(real, limit=1 << 20)
        except (OSError, CcostError):  # a folder, a device, too large: nothing to show
            return
        self.sources[display] = data.decode("utf-8", "replace")

    def _at_import(self, d: Diagnostic, imp: T.Import) -> Diagnostic:
        """A read error of an imported file has no place in that file; show the import line instead."""
        if d.span is not None:
            return d
        return Diagnostic(d.code, d.severity, d.message, imp.path_span, d.help, d.notes)

    def _locate(self, imp: T.Import, importer: _File) -> _File | None:
        """The file an import names, or None after an error. Imports stay inside the project (the spec's
        git work tree, else its folder) or the bundled ``std/``: absolute paths, ``..`` that climbs out,
        and symlinks that lead out are refused (E113) before anything is read."""
        path = imp.path
        if not path.strip():
            self.add(error("E106", "an empty import path", imp.path_span,
                           help='name a file: `import "std/gpus.ccost"`'))
            return None
        if any(ord(c) < 32 or ord(c) == 127 for c in path):
            self.add(error("E113", "an import path with a control character", imp.path_span,
                           help="name the file with printable characters"))
            return None
        if path.startswith("std/"):
            std = _std_dir()
            if std is None:
                self.add(error("E106", "this installation of ccost has no bundled std/ library",
                               imp.path_span))
                return None
            return self._confined(imp, os.path.normpath(path), os.path.join(std, path[4:]), std)
        if os.path.isabs(path) or path.startswith("\\") or (len(path) > 1 and path[1] == ":"):
            self.add(error("E113", "an import path must be relative to the importing file, not absolute",
                           imp.path_span,
                           help=f"imports stay inside {self._area_name(importer.area)}: write the path "
                                'relative to this file, or import the bundled library with `import "std/..."`'))
            return None
        # display and real differ inside the bundled library: `std/a.ccost` importing "b.ccost"
        display = os.path.normpath(os.path.join(os.path.dirname(importer.display), path))
        real = os.path.join(os.path.dirname(importer.real), path)
        return self._confined(imp, display, real, importer.area)

    def _is_std(self, area: str) -> bool:
        std = _std_dir()
        return std is not None and os.path.abspath(area) == os.path.abspath(std)

    def _area_name(self, area: str) -> str:
        if self._is_std(area):
            return "the bundled std/ library"
        shown = os.path.relpath(area) if _inside(os.path.abspath(area), os.getcwd()) else area
        if os.path.lexists(os.path.join(area, ".git")):
            return f"the project `{shown}` (the git work tree that holds the spec)"
        return f"the project `{shown}` (the spec's folder; it is not in a git work tree)"

    def _confined(self, imp: T.Import, display: str, real: str, area: str) -> _File | None:
        """The import target, when it stays inside ``area`` both as written and with symlinks resolved."""
        area_abs = os.path.abspath(area)
        target = os.path.normpath(os.path.abspath(real))
        where = self._area_name(area)
        fix = ('`std/...` names a file of the bundled library, like `std/gpus.ccost`' if self._is_std(area)
               else "copy the file into the project and import it from there")
        if not _inside(target, area_abs):
            self.add(error("E113", f"`{imp.path}` leads outside {where}", imp.path_span, help=fix))
            return None
        resolved = os.path.realpath(target)
        if not _inside(resolved, os.path.realpath(area_abs)):
            self.add(error("E113", f"`{imp.path}` is a symbolic link that leads outside {where}", imp.path_span,
                           help=fix))
            return None
        return _File(display=display, real=os.path.normpath(real), key=resolved, area=area)

    def _missing_import(self, imp: T.Import, importer: _File, target: _File) -> None:
        chain = " → ".join([g.display for g in self.loading] + [target.display])
        folder = os.path.dirname(target.real) or "."
        help_text = None
        try:
            siblings = sorted(n for n in os.listdir(folder) if n.endswith(".ccost"))
        except OSError:
            siblings = []
        base = os.path.basename(target.real)
        guess = _suggest(base, siblings)
        if guess:
            shown = os.path.join(os.path.dirname(imp.path), guess) if os.path.dirname(imp.path) else guess
            help_text = f'did you mean `import "{shown}"`?'
        elif imp.path.startswith("std/") and siblings:
            help_text = "the std library has: " + ", ".join(f'"std/{n}"' for n in siblings)
        else:
            help_text = "a relative path is relative to the importing file; the bundled library is `std/...`"
        self.add(error("E106", f"imported file not found: {target.display}", imp.path_span, help=help_text,
                       notes=[f"import chain: {chain}"]))

    # --- 2. declare ------------------------------------------------------------------------------------

    def _declare(self) -> None:
        keywords = SC.keywords()
        for f in self.files.values():
            if f.tree is None:
                continue
            policies: list[_Block] = []
            for node in f.tree.blocks:
                kind = SC.SCHEMA.get(node.kind)
                b = _Block(node, kind, f, node.name)
                if kind is None:
                    self.add(error("E001", f"unknown block kind `{node.kind}`", node.kind_span,
                                   help=_did_you_mean(node.kind, SC.SCHEMA) or
                                   "the kinds are " + ", ".join(SC.SCHEMA)))
                    continue
                self.blocks.append(b)
                if not kind.named:
                    policies.append(b)
                    if len(policies) > 1:
                        first = policies[0].node.kind_span
                        self.add(error("E109", f"a second `{node.kind}` block in this file", node.kind_span,
                                       help=f"merge it into the first one, at {first}",
                                       notes=[f"the first is at {first}"]))
                elif node.name is None:
                    self.add(error("E001", f"a {node.kind} block needs a name", node.kind_span,
                                   help=f"write `{node.kind} NAME {{ ... }}`"))
                elif node.name in keywords:
                    self.add(error("E110", f"`{node.name}` is a keyword and cannot name a block",
                                   node.name_span or node.kind_span,
                                   help=f"pick another name, like `my_{node.name}`"))
                elif node.name in self.names:
                    first = self.names[node.name]
                    self.add(error("E102", f"`{node.name}` is defined twice", b.where,
                                   help="rename one of them",
                                   notes=[f"first defined as {first.node.kind} `{node.name}` at {first.where}"]))
                else:
                    self.names[node.name] = b
                if node.name is not None and node.name in self.names:  # not a keyword
                    self.own_names.setdefault(f.key, []).append(node.name)
                self._check_member_names(b)
        for f in self.files.values():
            self._visible(f.key, set())
        self._resolve_extends()

    def _check_member_names(self, b: _Block) -> None:
        kind = b.kind
        assert kind is not None
        varies = SC.SCHEMA[kind.varies] if kind.varies else None
        seen: dict[str, T.Member] = {}
        for m in b.node.members:
            if m.name in seen:
                self.add(error("E102", f"`{m.name}` is set twice in {b.label}", m.name_span,
                               help="keep one of them", notes=[f"first set at {seen[m.name].name_span}"]))
                continue
            seen[m.name] = m
            if kind.field(m.name) is None and not (varies and varies.field(m.name)):
                names = list(kind.field_names) + (list(varies.field_names) if varies else [])
                guess = _field_guess(kind.name, m.name, names)
                gf = (kind.field(guess) or (varies.field(guess) if varies else None)) if guess else None
                hint = (f"did you mean `{guess}` ({gf.doc.split(';')[0]})?" if gf is not None else
                        f"did you mean `{guess}`?" if guess else None)
                if guess:  # `bandwith` → `bandwidth`: don't also report `bandwidth` as missing
                    self.misspelled.add((id(b), guess))
                known = ", ".join(f"`{n}`" for n in names)
                self.add(error("E103", f"{kind.name} has no field `{m.name}`", m.name_span,
                               help=hint or f"the fields of a {kind.name} are {known}"))

    def _visible(self, key: str, stack: set[str]) -> frozenset[str]:
        if key in self.visible:
            return self.visible[key]
        f = self.files[key]
        names = set(self.own_names.get(key, ()))
        stack = stack | {key}
        for k in f.imports:
            if k not in stack and k in self.files:
                names |= self._visible(k, stack)
        self.visible[key] = frozenset(names)
        return self.visible[key]

    def _resolve_extends(self) -> None:
        """Every ``extends`` chain, each block visited once (time linear in the number of blocks): walk up
        from a block until a block whose chain is already known, a block that extends nothing, a broken
        link (unknown parent, another kind) or a block already on this walk (a cycle); then every block of
        the walk gets that answer. A block reports only its own broken ``extends``; its descendants are
        broken silently. Every block of a cycle reports the cycle once, at its own ``extends``."""
        state: dict[int, bool] = {}  # id(block) -> chain sound
        for start in self.blocks:
            if id(start) in state:
                continue
            path: list[_Block] = []
            on_path: dict[int, int] = {}
            cur = start
            sound = True
            while True:
                if id(cur) in state:
                    sound = state[id(cur)]
                    break
                on_path[id(cur)] = len(path)
                path.append(cur)
                if cur.node.extends is None:
                    break
                span = cur.node.extends_span or cur.where
                parent = self.names.get(cur.node.extends)
                if parent is None or cur.node.extends not in self.visible.get(cur.file.key, frozenset()):
                    self._unknown_name(cur.node.extends, cur.file, span, cur.node.kind)
                    sound = False
                    break
                if parent.node.kind != cur.node.kind:
                    self.add(error("E107", f"{cur.label} cannot extend {parent.label}: a block extends "
                                   "another of its own kind", span,
                                   help=self._did_you_mean_kind(cur.node.extends, cur)
                                   or f"extend a {cur.node.kind}, or drop `extends {cur.node.extends}`"))
                    sound = False
                    break
                if id(parent) in on_path:
                    cycle = path[on_path[id(parent)]:]
                    for i, x in enumerate(cycle):
                        text = " → ".join(y.name or "?" for y in cycle[i:] + cycle[:i] + [x])
                        self.add(error("E107", f"extends cycle: {text}", x.node.extends_span or x.where,
                                       help="one of these blocks must stand on its own"))
                    sound = False
                    break
                cur = parent
            for x in path:
                state[id(x)] = sound
                if not sound:
                    self.bad_blocks.add(id(x))

    def _did_you_mean_kind(self, name: str, b: _Block) -> str | None:
        same = [n for n in self._names_of_kind(b.file.key, b.node.kind) if self.names[n] is not b]
        return self._hint(name, same)

    def _hint(self, name: str, candidates: list[str]) -> str | None:
        """``did you mean `x`?`` while the run's budget of comparisons lasts (``HINT_BUDGET``)."""
        if not candidates or self.hint_budget < len(candidates):
            return None
        self.hint_budget -= len(candidates)
        return _did_you_mean(name, candidates)

    def _names_of_kind(self, key: str, kind: str | None) -> list[str]:
        """The names visible in a file, of one kind (all kinds for None), sorted; computed once each."""
        memo = self.kind_names.get((key, kind))
        if memo is None:
            scope = self.visible.get(key, frozenset())
            memo = sorted(n for n in scope if kind is None or self.names[n].node.kind == kind)
            self.kind_names[(key, kind)] = memo
        return memo

    def _unknown_name(self, name: str, f: _File, span: Span, want: str | None) -> None:
        """E101 with the best hint: a near name in scope, or the file that defines it."""
        scope = self.visible.get(f.key, frozenset())
        if name in self.names and name not in scope:
            where = self.names[name].file.display
            self.add(error("E101", f"`{name}` is defined in {where}, which {f.display} does not import",
                           span, help=f'add `import "{os.path.relpath(where, os.path.dirname(f.display) or ".")}"`'))
            return
        same_kind = self._names_of_kind(f.key, want) if want else []
        hint = self._hint(name, same_kind) or self._hint(name, self._names_of_kind(f.key, None))
        notes = []
        if want and same_kind:
            notes.append(f"{want} blocks in scope: " + ", ".join(same_kind[:12])
                         + (f" and {len(same_kind) - 12:,} more" if len(same_kind) > 12 else ""))
        what = f"no {want} named `{name}`" if want else f"unknown name `{name}`"
        if not hint and want in ("gpu", "link", "model"):
            hint = f'define it, or import the bundled library: `import "std/{want}s.ccost"`'
        self.add(error("E101", what, span, help=hint, notes=notes))

    # --- 3. evaluate -----------------------------------------------------------------------------------

    def _members(self, b: _Block) -> dict[str, tuple[T.Member, _Block]]:
        """The block's members, through its extends chain (the parent first, the child overriding).

        Iterative and memoised: a chain of any length is walked once, without recursion."""
        memo = self.members_memo.get(id(b))
        if memo is not None:
            return memo
        chain: list[_Block] = []
        seen: set[int] = set()
        cur: _Block | None = b
        while cur is not None and id(cur) not in self.members_memo and id(cur) not in seen:
            seen.add(id(cur))
            chain.append(cur)
            parent = None
            if cur.node.extends is not None and id(cur) not in self.bad_blocks:
                parent = self.names.get(cur.node.extends)
            cur = parent
        base = self.members_memo.get(id(cur), {}) if cur is not None else {}
        for x in reversed(chain):
            merged = dict(base)
            own: dict[str, tuple[T.Member, _Block]] = {}
            for m in x.node.members:
                own.setdefault(m.name, (m, x))
            if x.kind is not None and x.kind.name == "model" and "config" in own:
                merged.update(self._config_members(x, own["config"][0]))  # written fields override the config
            merged.update(own)
            self.members_memo[id(x)] = merged
            base = merged
        return self.members_memo[id(b)]

    def _config_members(self, b: _Block, m: T.Member) -> dict[str, tuple[T.Member, _Block]]:
        """``config = "hf/config.json"`` in a model: the fields the Hugging Face config gives (``ccost.hf``),
        as members placed at the string, so a wrong value points there. Read like an import: relative to
        the file, inside its project, a bounded regular file; E510 when it cannot be read or understood."""
        from ccost import hf

        e = _unparen(m.value)
        if not isinstance(e, T.String):
            return {}  # the field's own check reports the wrong type
        # If the config fails, its error is the one to fix: no "missing `layers`" on top of it.
        assert b.kind is not None
        self.misspelled.update((id(b), f.name) for f in b.kind.fields)
        shown = os.path.normpath(os.path.join(os.path.dirname(b.file.display), e.value))
        real = os.path.normpath(os.path.join(os.path.dirname(b.file.real), e.value))
        try:
            if self.read is _default_reader:
                cfg = hf.load_config(real, hf.project_root(b.file.real), shown)
            else:  # `ccost diff` reads the config from the same git revision as the spec
                cfg = hf.parse_json(self.read(real), shown)
            got = hf.imported(cfg)
        except hf.HfError as exc:
            self.add(error("E510", f"model `{b.name}`: {exc.message}", e.span, help=exc.help))
            return {}
        except FileNotFoundError:
            self.add(error("E510", f"model `{b.name}`: {shown}: no such file", e.span,
                           help="the path is relative to the spec"))
            return {}
        except CcostError as exc:
            self.diags.extend(Diagnostic(d.code, d.severity, d.message, d.span or e.span, d.help, d.notes)
                              for d in exc.diagnostics)
            return {}
        self.misspelled.difference_update((id(b), f.name) for f in b.kind.fields)
        values = dict(got.fields, source=f"config.json: {shown}")
        out: dict[str, tuple[T.Member, _Block]] = {}
        for name, v in values.items():
            if isinstance(v, bool):
                expr: T.Expr = T.Bool(v, e.span)
            elif isinstance(v, str):
                expr = T.String(v, e.span) if name == "source" else T.Ref(v, None, e.span)
            else:
                expr = T.Number(value=float(v), text=str(v), unit=None, span=e.span)
            out[name] = (T.Member(name, expr, e.span, m.name_span), b)
        return out

    def _field(self, b: _Block, name: str) -> SC.Field | None:
        assert b.kind is not None
        return b.kind.field(name)

    def _value(self, b: _Block, name: str, at: Span | None) -> Any:
        """The checked value of field ``name`` of block ``b``: written, inherited or defaulted."""
        key = (id(b), name)
        if key in self.values:
            return self.values[key]
        if (b, name) in self.active:
            start = self.active.index((b, name))
            text = " → ".join(f"{x.name}.{n}" for x, n in self.active[start:]) + f" → {b.name}.{name}"
            self.add(error("E112", f"reference cycle: {text}", at,
                           help="one of these fields must be given a value of its own"))
            return _ERR
        f = self._field(b, name)
        assert f is not None
        self.active.append((b, name))
        try:
            members = self._members(b)
            if name in members:
                m, owner = members[name]
                try:
                    v = self._eval_field(m.value, f, owner)
                except _Bad:
                    v = _ERR
            elif isinstance(f.default, SC.Same):
                v = self._value(b, f.default.field, at)
            elif f.default is not None:
                v = f.default
            else:
                v = _UNSET
        finally:
            self.active.pop()
        self.values[key] = v
        return v

    def _eval_field(self, expr: T.Expr, f: SC.Field, owner: _Block) -> Any:
        t = f.type
        e = _unparen(expr)
        if t.kind == "list":
            if not isinstance(e, T.ListExpr):
                self.add(error("E205", f"`{f.name}` takes a list, like `{f.name} = {f.example}`; got "
                               f"{self._describe(e)}", expr.span, help=f"write `{f.name} = {f.example}`"))
                raise _Bad
            if not e.items:
                self.add(error("E203", f"`{f.name}` is an empty list", expr.span,
                               help=f"name at least one, like `{f.name} = {f.example}`"))
                raise _Bad
            assert t.item is not None
            return self._eval_items(e.items, t.item, f, owner)
        if isinstance(e, T.ListExpr):
            hint = f"give one value, like `{f.name} = {f.example}`"
            if owner.kind is not None and owner.kind.name == "plan":
                hint += f"; to try several, write a sweep: `sweep NAME {{ base = PLAN; {f.name} = [...] }}`"
            self.add(error("E205", f"`{f.name}` takes one value, not a list", expr.span, help=hint))
            raise _Bad
        return self._eval_item(e, t, f, owner, expr.span)

    def _eval_items(self, items: Iterable[T.Expr], t: SC.FieldType, f: SC.Field, owner: _Block) -> tuple:
        out, bad = [], False
        for item in items:
            e = _unparen(item)
            if isinstance(e, T.ListExpr):
                self.add(error("E205", f"a list inside a list in `{f.name}`", item.span,
                               help="write one flat list of values"))
                bad = True
                continue
            try:
                out.append(self._eval_item(e, t, f, owner, item.span))
            except _Bad:
                bad = True
        if bad:
            raise _Bad
        return tuple(out)

    def _describe(self, e: T.Expr) -> str:
        e = _unparen(e)
        if isinstance(e, T.String):
            return "a string"
        if isinstance(e, T.Bool):
            return f"`{str(e.value).lower()}`"
        if isinstance(e, T.ListExpr):
            return "a list"
        if isinstance(e, T.Ref) and e.field is None:
            return f"the name `{e.name}`"
        return "a number"

    def _eval_item(self, e: T.Expr, t: SC.FieldType, f: SC.Field, owner: _Block, span: Span) -> Any:
        scope = owner.file
        if t.kind == "enum":
            if isinstance(e, T.Ref) and e.field is None:
                word = e.name
            elif isinstance(e, T.String):
                word = e.value
            elif isinstance(e, T.Ref):
                v, ft = self._deref(e, scope)
                if ft.type.kind != "enum":
                    self._wrong_type(f, t, f"`{e.name}.{e.field}`, {ft.type.describe()}", span)
                word = v
            else:
                self._wrong_type(f, t, self._describe(e), span)
            if word not in t.values:
                hint = _did_you_mean(word, t.values) or f"write one of: {', '.join(t.values)}"
                self.add(error("E204", f"`{f.name}` must be one of {', '.join(t.values)}; got `{word}`", span,
                               help=hint))
                raise _Bad
            return word
        if t.kind == "ref":
            if isinstance(e, T.Ref) and e.field is None:
                return self._lookup(e.name, scope, span, t.ref, f).name
            if isinstance(e, T.Ref):
                v, ft = self._deref(e, scope)
                if ft.type.kind == "ref" and ft.type.ref == t.ref:
                    return v
                self._wrong_type(f, t, f"`{e.name}.{e.field}`, {ft.type.describe()}", span)
            if isinstance(e, T.String):
                self.add(error("E205", f"`{f.name}` takes the name of a {t.ref} block, not a string", span,
                               help=f"drop the quotes: `{f.name} = {e.value}`"))
                raise _Bad
            self._wrong_type(f, t, self._describe(e), span)
        if t.kind == "string":
            if isinstance(e, T.String):
                return e.value
            if isinstance(e, T.Ref) and e.field is not None:
                v, ft = self._deref(e, scope)
                if ft.type.kind == "string":
                    return v
            self._wrong_type(f, t, self._describe(e), span, help=f'put it in double quotes: `{f.name} = "..."`')
        if t.kind == "bool":
            if isinstance(e, T.Bool):
                return e.value
            if isinstance(e, T.Ref) and e.field is not None:
                v, ft = self._deref(e, scope)
                if ft.type.kind == "bool":
                    return v
            self._wrong_type(f, t, self._describe(e), span, help=f"write `{f.name} = true` or `{f.name} = false`")
        # numeric
        self._field_ctx = f
        v, d = self._num(e, scope)
        return self._check_number(v, d, t, f, e, span)

    def _wrong_type(self, f: SC.Field, t: SC.FieldType, got: str, span: Span, help: str | None = None) -> None:
        self.add(error("E205", f"`{f.name}` takes {t.describe()}; got {got}", span,
                       help=help or f"write it like `{f.name} = {f.example}`"))
        raise _Bad

    # expressions on (SI float, Dim) pairs

    def _num(self, e: T.Expr, scope: _File) -> tuple[float, U.Dim]:
        if isinstance(e, T.Number):
            v = float(e.value)
            d: U.Dim = U.DIMENSIONLESS
            if e.unit:
                try:
                    factor, d = U.parse_unit(e.unit)
                except U.UnitError as exc:
                    self._unknown_unit(e, exc)
                v *= factor
            return self._finite(v, d, e.span, "this number")
        if isinstance(e, T.Paren):
            return self._num(e.inner, scope)
        if isinstance(e, T.Neg):
            v, d = self._num(e.operand, scope)
            return -v, d
        if isinstance(e, T.BinOp):
            return self._binop(e, scope)
        if isinstance(e, T.Call):
            return self._call(e, scope)
        if isinstance(e, T.Ref):
            if e.field is not None:
                v, ft = self._deref(e, scope)
                if not ft.type.numeric:
                    self.add(error("E205", f"`{e.name}.{e.field}` is {ft.type.describe()}, not a number",
                                   e.span, help="only numeric fields can be used in arithmetic"))
                    raise _Bad
                return float(v), ft.type.needs_dim
            self._bare_name(e, scope)
        if isinstance(e, T.String):
            f = self._field_ctx
            if f is not None:
                self.add(error("E205", f"`{f.name}` takes {f.type.describe()}; got a string", e.span,
                               help=f"drop the quotes: `{f.name} = {f.example}`"))
            else:
                self.add(error("E205", "a string where a number is needed", e.span, help="drop the quotes"))
            raise _Bad
        if isinstance(e, T.Bool):
            self.add(error("E205", f"`{str(e.value).lower()}` where a number is needed", e.span))
            raise _Bad
        if isinstance(e, T.ListExpr):
            self.add(error("E205", "a list where one number is needed", e.span,
                           help="lists go in `sweep` fields and `compare.plans`"))
            raise _Bad
        self.add(error("E205", "this expression is not a number", e.span))
        raise _Bad

    def _unknown_unit(self, e: T.Number, exc: U.UnitError) -> None:
        f = getattr(self, "_field_ctx", None)
        span = e.unit_span or e.span
        counted = _count_help(f, e.text, e.unit) if f is not None and f.type.kind in ("int", "count") \
            else None
        ft = f.type.item if f is not None and f.type.kind == "list" and f.type.item is not None else (
            f.type if f is not None else None)
        suggestion = exc.suggestion
        if ft is not None and ft.kind == "quantity":  # only a unit this field can take: `usec` is no bandwidth
            suggestion = U.suggest_unit(e.unit or "", ft.needs_dim)
        if counted:
            help_text = counted
        elif suggestion:
            help_text = f"did you mean `{suggestion}`? write `{e.text} {suggestion}`"
            bits = U.bit_reading(e.unit or "", suggestion)
            if bits:
                help_text += f" (or `{e.text} {bits}` if you meant bits)"
        elif f is not None and ft is not None and ft.kind == "quantity":
            help_text = f"`{f.name}` needs {ft.describe()}, written like `{f.name} = {f.example}`"
        elif f is not None and f.type.kind in ("int", "count"):
            help_text = f"`{f.name}` is a count: write a plain number, like `{f.name} = {e.text}`"
        else:
            help_text = "units are like `us`, `GB`, `GiB`, `GB/s`, `Gbit/s`, `TFLOP/s`, `%`"
        if f is not None and f.type.kind in ("int", "count") and exc.suggestion and not counted:
            help_text += f" (but `{f.name}` is a count: a plain number, like `{f.name} = {e.text}`)"
        self.add(error("E202", f"unknown unit `{e.unit}`", span, help=help_text))
        raise _Bad

    def _bare_name(self, e: T.Ref, scope: _File) -> None:
        f = getattr(self, "_field_ctx", None)
        fname = f.name if f is not None else "this field"
        if e.name in self.names and e.name in self.visible.get(scope.key, frozenset()):
            b = self.names[e.name]
            first = b.kind.fields[0].name if b.kind and b.kind.fields else "field"
            self.add(error("E205", f"`{e.name}` is a {b.node.kind} block, not a number", e.span,
                           help=f"name one of its fields, like `{e.name}.{first}`"))
            raise _Bad
        unit = self._as_unit(e.name)
        if unit is not None:
            example = f.example if f is not None else "2"
            number = example.split(" ")[0]
            self.add(error("E201", f"`{e.name}` is a unit without a number", e.span,
                           help=f"write a number before the unit: `{fname} = {number} {unit}`"))
            raise _Bad
        owners = sorted({g.name for k in SC.SCHEMA.values() for g in k.fields
                         if g.type.kind == "enum" and e.name in g.type.values})
        if owners:  # `tp = ring`: a word of an enumerated field where a number belongs
            self.add(error("E205", f"`{e.name}` is a value of `{owners[0]}`, not a number", e.span,
                           help=f"write it like `{fname} = {f.example}`" if f is not None else None))
            raise _Bad
        self._unknown_name(e.name, scope, e.span, None)
        raise _Bad

    def _as_unit(self, word: str) -> str | None:
        try:
            U.parse_unit(word)
            return word
        except U.UnitError as exc:
            return exc.suggestion if word in U.COMMON_MISTAKES else None

    def _split_unit(self, e: T.BinOp, scope: _File) -> bool:
        """``450 GB / s``: a unit written with spaces around its ``/`` parses as a number divided by a bare
        unit. Say so (E201 on the bare unit), with the whole quantity written as one unit."""
        right = _unparen(e.right)
        left = _unparen(e.left)
        if e.op not in "*/" or not isinstance(right, T.Ref) or right.field is not None:
            return False
        if right.name in self.names and right.name in self.visible.get(scope.key, frozenset()):
            return False  # a block of that name: not a unit
        unit = self._as_unit(right.name)
        if unit is None or not isinstance(left, T.Number):
            return False
        f = getattr(self, "_field_ctx", None)
        joined = f"{left.unit}{e.op}{unit}" if left.unit else unit
        if e.op == "*" and left.unit:
            joined = f"{left.unit}·{unit}"
        fix = f"{left.text} {joined}"
        where = f"`{f.name} = {fix}`" if f is not None else f"`{fix}`"
        self.add(error("E201", f"`{right.name}` after `{e.op}` is a unit, not a number", right.span,
                       help=f"write the unit in one piece, without spaces around `{e.op}`: {where}"))
        return True

    def _binop(self, e: T.BinOp, scope: _File) -> tuple[float, U.Dim]:
        if self._split_unit(e, scope):
            raise _Bad
        # Evaluate both sides even when the left fails, so every mistake in one expression is reported.
        lv = rv = None
        try:
            lv = self._num(e.left, scope)
        except _Bad:
            pass
        try:
            rv = self._num(e.right, scope)
        except _Bad:
            pass
        if lv is None or rv is None:
            raise _Bad
        (a, da), (b, db) = lv, rv
        if e.op in "+-":
            if da != db:
                self.add(error("E206", f"cannot {'add' if e.op == '+' else 'subtract'} "
                               f"{U.dim_name(db)} {'to' if e.op == '+' else 'from'} {U.dim_name(da)}", e.span,
                               help="both sides of + and - need the same dimension"))
                raise _Bad
            return self._finite(a + b if e.op == "+" else a - b, da, e.span, "the result")
        if e.op == "*":
            return self._finite(a * b, U.dim_mul(da, db), e.span, "the product")
        if b == 0:
            self.add(error("E203", "division by zero", e.right.span,
                           help="the divisor must not be zero"))
            raise _Bad
        return self._finite(a / b, U.dim_div(da, db), e.span, "the quotient")

    def _finite(self, v: float, d: U.Dim, span: Span, what: str) -> tuple[float, U.Dim]:
        if not math.isfinite(v):
            f = self._field_ctx
            why = "overflow" if not math.isnan(v) else "NaN"
            if f is not None and f.range_text():
                self.add(error("E203", f"`{f.name}`: {what} is not a finite number ({why})", span,
                               help=f"a plausible `{f.name}` is {f.range_text()}, like `{f.name} = {f.example}`"))
            else:
                self.add(error("E203", f"{what} is not a finite number ({why})", span,
                               help="use a value between about 1e-300 and 1e300"))
            raise _Bad
        return v, d

    def _call(self, e: T.Call, scope: _File) -> tuple[float, U.Dim]:
        if e.func not in SC.FUNCTIONS:
            self.add(error("E111", f"unknown function `{e.func}`", e.span,
                           help=_did_you_mean(e.func, SC.FUNCTIONS) or
                           "the functions are " + ", ".join(SC.FUNCTIONS)))
            raise _Bad
        sig = SC.FUNCTIONS[e.func][0]
        if e.func in SC.LIST_FUNCTIONS:
            self.add(error("E205", f"`{sig}` gives a list of values, not one number", e.span,
                           help="use it for a field of a `sweep` or `search`, like `tp = pow2(1, 64)`"))
            raise _Bad
        args, bad = [], False
        for a in e.args:
            try:
                args.append(self._num(a, scope))
            except _Bad:
                bad = True
        if bad:
            raise _Bad
        if e.func in ("min", "max"):
            if not args:
                self.add(error("E111", f"`{e.func}` needs at least one argument", e.span, help=f"write {sig}"))
                raise _Bad
            dims = {d for _, d in args}
            if len(dims) > 1:
                self.add(error("E206", f"`{e.func}` of values of different dimensions "
                               f"({', '.join(U.dim_name(d) for d in sorted(dims))})", e.span,
                               help="compare like with like"))
                raise _Bad
            pick = min if e.func == "min" else max
            return pick(v for v, _ in args), args[0][1]
        if len(args) != 1:
            self.add(error("E111", f"`{e.func}` takes one argument; got {len(args)}", e.span, help=f"write {sig}"))
            raise _Bad
        v, d = args[0]
        if e.func == "sqrt":
            if any(x % 2 for _, x in d):
                self.add(error("E206", f"the square root of {U.dim_name(d)} has no unit", e.span,
                               help="take the square root of a plain number, then multiply by a unit: "
                                    "`sqrt(4) * 1 us`"))
                raise _Bad
            if v < 0:
                self.add(error("E203", "the square root of a negative number", e.span))
                raise _Bad
            return math.sqrt(v), tuple((k, x // 2) for k, x in d)
        if d != U.DIMENSIONLESS:
            self.add(error("E206", f"`{e.func}` takes a plain number; got {U.dim_name(d)}", e.span,
                           help=f"divide by a unit first, like `{e.func}(x / 1 GB)`"))
            raise _Bad
        if e.func == "log2":
            if v <= 0:
                self.add(error("E203", f"log2 of {U.format_quantity(v, d)}: the argument must be positive",
                               e.span))
                raise _Bad
            return math.log2(v), d
        return float(math.ceil(v) if e.func == "ceil" else math.floor(v)), d

    def _deref(self, e: T.Ref, scope: _File) -> tuple[Any, SC.Field]:
        """``NAME.FIELD``: the value of a field of another block and the field's schema entry."""
        b = self._lookup(e.name, scope, e.span, None, None)
        assert b.kind is not None and e.field is not None
        f = b.kind.field(e.field)
        if f is None:
            guess = _field_guess(b.kind.name, e.field, b.kind.field_names)
            hint = (f"did you mean `{guess}`?" if guess else None) or \
                "its fields are " + ", ".join(f"`{n}`" for n in b.kind.field_names)
            self.add(error("E103", f"{b.node.kind} `{e.name}` has no field `{e.field}`", e.span, help=hint))
            raise _Bad
        saved = getattr(self, "_field_ctx", None)
        try:
            v = self._value(b, e.field, e.span)
        finally:
            self._field_ctx = saved
        if v is _ERR:
            raise _Bad
        if v is _UNSET:
            self.add(error("E104", f"`{e.name}.{e.field}` is not set and has no default", e.span,
                           help=f"set `{e.field}` in {b.label}, or write the value here"))
            raise _Bad
        return v, f

    def _lookup(self, name: str, scope: _File, span: Span, want: str | None, f: SC.Field | None) -> _Block:
        b = self.names.get(name)
        if b is None or name not in self.visible.get(scope.key, frozenset()):
            if want is None and b is None and self._as_unit(name) is not None:
                self.add(error("E201", f"`{name}` is a unit without a number", span,
                               help="write a number before the unit"))
                raise _Bad
            self._unknown_name(name, scope, span, want)
            raise _Bad
        if want is not None and b.node.kind != want:
            same = self._names_of_kind(scope.key, want)
            fname = f"`{f.name}`" if f else "this reference"
            self.add(error("E108", f"{fname} must name a {want}; `{name}` is a {b.node.kind}", span,
                           help=self._hint(name, same) or
                           (f"{want} blocks in scope: " + ", ".join(same[:12]) if same
                            else f"define a {want} block")))
            raise _Bad
        return b

    def _check_number(self, v: float, d: U.Dim, t: SC.FieldType, f: SC.Field, e: T.Expr, span: Span) -> Any:
        need = t.needs_dim
        if d != need:
            self._wrong_dim(v, d, t, f, e, span)
        if t.kind == "int":
            if abs(v - round(v)) > 1e-9 * max(1.0, abs(v)):
                self.add(error("E203", f"`{f.name}` must be a whole number; got {U._sig(v, 6)}", span,
                               help=f"round it, like `{f.name} = {max(1, round(v))}`"))
                raise _Bad
        lo, hi = f.minimum, f.maximum
        out_low = lo is not None and (v <= lo if f.min_open else v < lo)
        out_high = hi is not None and (v >= hi if f.max_open else v > hi)
        if out_low or out_high:
            if out_low:
                rng = (f"greater than {f.format_value(lo)}" if f.min_open else f"at least {f.format_value(lo)}")
            else:
                rng = (f"less than {f.format_value(hi)}" if f.max_open else f"at most {f.format_value(hi)}")
            got = f.format_value(v)
            help_text = f"a plausible `{f.name}` is {f.range_text()}, like `{f.name} = {f.example}`"
            if t.kind == "fraction":
                plain = isinstance(e, T.Number) and not e.unit
                if out_high and plain and v > 1:
                    help_text = f"a fraction is at most 1: write `{U._sig(v, 6)} %` or `{U._sig(v / 100, 6)}`"
            elif f.name in _AXIS and v < 1:
                help_text = f"`{f.name} = 1` means no {_AXIS[f.name]} parallelism"
            self.add(error("E203", f"`{f.name}` must be {rng}; got {got}", span, help=help_text))
            raise _Bad
        if t.kind == "int":
            return int(round(v))
        return float(v)

    def _wrong_dim(self, v: float, d: U.Dim, t: SC.FieldType, f: SC.Field, e: T.Expr, span: Span) -> None:
        need = t.needs_dim
        need_name = {"quantity": t.describe(), "fraction": "a fraction (a plain number or %)"}.get(
            t.kind, "a plain number")
        got = U.dim_name(d)
        text = self._source_text(span)
        msg = f"`{f.name}` needs {need_name}, like {f.example}; got {got}"
        if text and len(text) <= 40:
            msg += f": `{text}`"
        help_text = f"write it like `{f.name} = {f.example}`"
        if isinstance(e, T.Number):
            num = e.text
            if not e.unit and t.kind == "quantity":
                unit = f.example.split(" ", 1)[1] if " " in f.example else ""
                help_text = f"write the unit after the number: `{f.name} = {num} {unit}`"
            elif e.unit and t.kind == "quantity":
                unit = e.unit
                if need == U.dim_div(d, U.TIME):  # 450 GB where GB/s is needed
                    help_text = f"a rate is per time: `{f.name} = {num} {unit}/s`"
                elif d == U.dim_div(need, U.TIME) and unit.endswith("/s"):  # 80 GB/s where GB is needed
                    help_text = f"`{f.name}` is an amount, not a rate: `{f.name} = {num} {unit[:-2]}`"
                elif unit in ("b", "Gb", "Mb", "Tb", "Kb", "kb") and need == U.dim_div(d, U.TIME):
                    help_text = f"`{unit}` is a bit unit; a rate is per time: `{f.name} = {num} {unit}it/s`"
            elif e.unit and t.kind == "fraction":
                help_text = f"`{f.name}` is a fraction: like `{f.name} = {f.example}` or `{f.name} = 0.4`"
            elif e.unit and t.kind != "quantity":
                help_text = (_count_help(f, num, e.unit)
                             or f"`{f.name}` is a plain number, without a unit: `{f.name} = {num}`")
        self.add(error("E201", msg, span, help=help_text))
        raise _Bad

    def _source_text(self, span: Span) -> str | None:
        text = self.sources.get(span.file)
        if text is None or span.line != span.end_line:
            return None
        lines = text.splitlines()
        if not 1 <= span.line <= len(lines):
            return None
        return lines[span.line - 1][span.column - 1:span.end_column - 1].strip() or None

    # --- 4. build ----------------------------------------------------------------------------------------

    def _entity(self, b: _Block) -> Any:
        """The frozen entity of a block, or None when it (or something it needs) has an error."""
        if id(b) in self.entities:
            return self.entities[id(b)]
        if id(b) in self.building:  # a reference loop between blocks; kinds cannot form one today
            return None
        self.building.add(id(b))
        try:
            ent = self._build(b)
        finally:
            self.building.discard(id(b))
        self.entities[id(b)] = ent
        return ent

    def _build(self, b: _Block) -> Any:
        kind = b.kind
        assert kind is not None
        if id(b) in self.bad_blocks:
            # still evaluate the members, so their own mistakes are reported
            for m in b.node.members:
                if kind.field(m.name):
                    self._value(b, m.name, m.span)
            return None
        members = self._members(b)
        values: dict[str, Any] = {}
        spans: dict[str, Span] = {}
        written: set[str] = set()
        bad = False
        for f in kind.fields:
            if f.name in members:
                v = self._value(b, f.name, members[f.name][0].span)
                written.add(f.name)
                spans[f.name] = members[f.name][0].value.span
                if v is _ERR:
                    bad = True
                else:
                    values[f.name] = v
            elif f.default is not None and not isinstance(f.default, SC.Same):
                values[f.name] = f.default
        for f in kind.fields:
            if f.name in written:
                continue
            if f.required or (f.required_if is not None and not bad and f.required_if(values)):
                if self._parent_lacks(b, f.name) or self._misspelled(b, f.name):
                    bad = True
                    continue
                cond = "" if f.required else f", {f.required_doc}"
                self.add(error(f.missing_code, f"{b.label} is missing `{f.name}`{cond}: {f.doc}", b.where,
                               help=f"add `{f.name} = {f.example}`"))
                bad = True
        varied = self._varied(b, members) if kind.varies else ()
        if varied is None:
            bad = True
        # references to entities
        for f in kind.fields:
            if f.name not in values:
                continue
            if f.type.kind == "ref":
                ent = self._entity(self.names[values[f.name]])
                if ent is None:
                    bad = True
                values[f.name] = ent
            elif f.type.kind == "list" and f.type.item is not None and f.type.item.kind == "ref":
                ents = tuple(self._entity(self.names[n]) for n in values[f.name])
                if any(x is None for x in ents):
                    bad = True
                values[f.name] = ents
        if bad:
            return None
        ctx = SC.BuildContext(b.name or kind.name, b.node.title, b.where, MappingProxyType(spans),
                              MappingProxyType(values), varied or ())
        ent = kind.build(ctx)
        validate = _VALIDATORS.get(kind.name)
        if validate is not None:
            own_members = {m.name: m for m in b.node.members}

            def where(name: str, reads: Iterable[str] = ()) -> Span | None:
                """Where a check about ``name`` points: the member if this block writes it, else the block's
                name; None for a block that extends another and writes none of the fields the check
                ``reads`` (its parent already reports the same thing)."""
                own = own_members.get(name)
                if own is not None:
                    return own.value.span
                if b.node.extends is not None and not (set(own_members) & set(reads)):
                    return None
                return b.where
            where.written = frozenset(own_members)  # type: ignore[attr-defined]
            # the names this block can see, for help that must not lead into a name clash: computed only
            # when such help is written (building it for every block made checking quadratic)
            visible_keys = self.visible.get(b.file.key, frozenset())
            where.visible = lambda: {n: self.names[n].node.kind  # type: ignore[attr-defined]
                                     for n in visible_keys if n in self.names}
            for d in validate(ent, where):
                self.add(d)
        return ent

    def _has_unknown_fields(self, b: _Block) -> bool:
        kind = b.kind
        assert kind is not None
        varies = SC.SCHEMA[kind.varies] if kind.varies else None
        return any(kind.field(m.name) is None and not (varies and varies.field(m.name)) for m in b.node.members)

    def _misspelled(self, b: _Block, name: str) -> bool:
        """Whether an unknown field of ``b`` (or of a block it extends) was probably ``name``."""
        cur: _Block | None = b
        for _ in range(64):
            if cur is None:
                return False
            if (id(cur), name) in self.misspelled:
                return True
            cur = self.names.get(cur.node.extends) if cur.node.extends else None
        return False

    def _parent_lacks(self, b: _Block, name: str) -> bool:
        """A missing field inherited from a parent that lacks it too is reported once, on the parent."""
        if b.node.extends is None:
            return False
        parent = self.names.get(b.node.extends)
        return parent is not None and name not in self._members(parent)

    def _varied(self, b: _Block, members: dict[str, tuple[T.Member, _Block]]) -> tuple | None:
        kind = b.kind
        assert kind is not None and kind.varies is not None
        target = SC.SCHEMA[kind.varies]
        out: list[tuple[str, tuple]] = []
        bad = False
        for name, (m, owner) in members.items():
            if kind.field(name) is not None:
                continue
            f = target.field(name)
            if f is None:
                continue  # reported as an unknown field
            e = _unparen(m.value)
            items = e.items if isinstance(e, T.ListExpr) else (m.value,)
            if isinstance(e, T.Call) and e.func in SC.LIST_FUNCTIONS:  # pow2(1, 64), range(1, 16)
                items = self._range_items(e, owner.file)
                if items is None:
                    bad = True
                    continue
            if isinstance(e, T.ListExpr) and not items:
                self.add(error("E203", f"`{name}` is an empty list: a {kind.name} needs at least one value",
                               m.value.span, help=f"like `{name} = [1, 2, 4, 8]`" if f.type.kind == "int"
                               else f"like `{name} = [{f.example}]`"))
                bad = True
                continue
            if f.type.kind == "list":
                self.add(error("E205", f"`{name}` cannot be swept", m.name_span,
                               help="sweep the plans' fields instead, like `tp = [1, 2, 4, 8]`"))
                bad = True
                continue
            try:
                vals = self._eval_items(items, f.type, f, owner)
            except _Bad:
                bad = True
                continue
            if f.type.kind == "ref":
                ents = tuple(self._entity(self.names[n]) for n in vals)
                if any(x is None for x in ents):
                    bad = True
                    continue
                vals = ents
            out.append((name, vals))
        if bad:
            return None
        if not out:
            if any(id(b) == blk for blk, _ in self.misspelled) or self._has_unknown_fields(b):
                return None  # its unknown field (reported) was probably meant to vary
            self.add(error("E104", f"{b.label} varies nothing", b.where,
                           help=f"add a {kind.varies} field with a list of values, like `tp = [1, 2, 4, 8]`"))
            return None
        points = math.prod(len(v) for _, v in out)
        if points > MAX_SWEEP_POINTS and kind.name != "search":  # a search checks its own `limit`
            self.add(error("E402", f"{b.label} has {points:,} points (more than {MAX_SWEEP_POINTS:,})", b.where,
                           help="sweep fewer values, or split it into several sweeps"))
            return None
        return tuple(out)

    def _range_items(self, e: T.Call, scope: _File) -> tuple | None:
        """The values of ``pow2(lo, hi)`` / ``range(lo, hi[, step])`` as number nodes at the call's span
        (checked like any list item afterwards), or None after reporting an error."""
        from ccost.schema import range_values

        args = []
        try:
            for a in e.args:
                v, d = self._num(a, scope)
                if d != U.DIMENSIONLESS:
                    self.add(error("E206", f"`{e.func}` takes plain numbers; got {U.dim_name(d)}", a.span,
                                   help=f"write it like `{SC.FUNCTIONS[e.func][0]}`"))
                    return None
                args.append(v)
        except _Bad:
            return None
        vals = range_values(e.func, args)
        if isinstance(vals, str):
            too_many = "more than" in vals
            self.add(error("E402" if too_many else "E203", vals, e.span,
                           help="take a step, like `range(1, 1024, 8)`, or powers of two, like `pow2(1, 1024)`"
                           if too_many else f"write it like `{SC.FUNCTIONS[e.func][0]}`"))
            return None
        return tuple(T.Number(value=float(v), text=str(v), unit=None, span=e.span) for v in vals)

    def _build_spec(self, root: _File) -> Spec | None:
        by_attr: dict[str, dict[str, Any]] = {}
        for kind in SC.SCHEMA.values():
            if kind.spec_attr != "policy":
                by_attr.setdefault(kind.spec_attr, {})
        policy: Policy | None = None
        local_plans: list[str] = []
        for b in self.blocks:
            ent = self._entity(b)
            if ent is None or b.kind is None:
                continue
            if b.kind.spec_attr == "policy":
                if b.file is root and policy is None:
                    policy = ent
                continue
            if b.name is None or self.names.get(b.name) is not b:
                continue  # a duplicate: already reported
            by_attr[b.kind.spec_attr][b.name] = ent
            if b.kind.name == "plan" and b.file is root:
                local_plans.append(b.name)
        if self.diags.has_errors():
            return None
        frozen = {k: MappingProxyType(v) for k, v in by_attr.items()}
        return Spec(path=root.display, policy=policy or Policy("policy", None, None), **frozen,
                    files=tuple(f.real for f in [root] + [g for g in self.files.values() if g is not root]),
                    local_plans=tuple(local_plans))


# ---------------------------------------------------------------------------------------------------
# Topology checks that need no cost model

_AXIS = {"tp": "tensor", "pp": "pipeline", "ep": "expert", "dp": "data"}


from ccost import axes  # noqa: E402  (the layout rules below; the checker above reads no degree list)
from ccost import layout_rules as rules  # noqa: E402


def _divisors(n: int, limit: int) -> str:
    return rules.divisors(n, limit)


def _std_link_names() -> set[str]:
    import re

    folder = _std_dir()
    if folder is None:
        return set()
    try:
        with open(os.path.join(folder, "links.ccost"), encoding="utf-8") as fh:
            text = fh.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return set()
    return set(re.findall(r"^link\s+(\w+)", text, flags=re.M))


def _inter_node_example(c, visible: dict[str, str]) -> str:
    """How to give cluster ``c`` an inter-node link, in a way that checks in this spec: a link it already
    has, else the std library's (when importing it clashes with no name of the spec), else a block."""
    own = sorted(n for n, kind in visible.items() if kind == "link"
                 and (c.intra_node is None or n != c.intra_node.name))
    if own:
        return f"such as `inter_node = {own[0]}`"
    std = _std_link_names()
    if "ib_ndr" in std and not (std & set(visible)):
        return 'such as `inter_node = ib_ndr`, from `import "std/links.ccost"`'
    return ("a `link` block of your own, such as `link ib { alpha = 3 us; bandwidth = 50 GB/s }` and "
            "`inter_node = ib`")


def _too_many_gpus(p, where: Callable[..., Span | None]) -> Diagnostic:
    """E301: the plan's degrees need more GPUs than its cluster has. The caret goes on a degree the block
    writes (the last one written, usually the one just raised), and the help gives fixes that each check:
    a degree lowered to what fits, or a cluster with enough nodes (and, when it has none, an inter-node
    link: `nodes = 2` alone would only lead to the next error)."""
    c = p.cluster
    own = getattr(where, "written", frozenset())  # the fields this block writes itself
    written = sorted((where(d, (d,)).line, where(d, (d,)).column, d) for d in axes.NAMES
                     if getattr(p, d) > 1 and d in own)
    degree = written[-1][2] if written else None
    if degree:
        span = where(degree, (degree,))
    elif "cluster" in own:
        span = where("cluster", ("cluster",))
    else:
        span = where("__plan__", ("cluster", *axes.NAMES))
    lower = []
    for d in [w[2] for w in reversed(written)]:  # the degree under the caret first
        others = p.gpus // getattr(p, d)
        fits = c.gpus // others
        if fits >= 1:
            lower.append(f"`{d} = {fits}`")
    fixes = []
    if lower:
        fixes.append(" or ".join(lower) + f" fits the {c.gpus} GPUs of `{c.name}`")
    need_nodes = -(-p.gpus // c.gpus_per_node)
    if c.inter_node is None:
        fixes.append(f"give cluster `{c.name}` `nodes = {need_nodes}` and an `inter_node` link between the "
                     f"nodes ({_inter_node_example(c, getattr(where, 'visible', dict)())})")
    else:
        fixes.append(f"give cluster `{c.name}` `nodes = {need_nodes}`")
    return error("E301", rules.too_many_gpus(p, c), span, help="; or ".join(fixes))


def _check_plan(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """Checks that need no cost model: degrees fit the cluster (E301), TP inside the NVLink domain (W301),
    TP divides kv_heads (W302), PP divides layers (W303), EP divides experts (W304).

    ``where(field, reads)`` places a diagnostic, or is None when the plan inherits everything the check
    reads from the plan it extends (which reports it already)."""
    out: list[Diagnostic] = []
    c, m = p.cluster, p.model
    too_big = not rules.fits_cluster(p.gpus, c.gpus)
    if too_big and where("__plan__", ("cluster", *axes.NAMES)) is not None:
        out.append(_too_many_gpus(p, where))
    if not rules.tp_in_domain(p.tp, c.domain) and not too_big and c.inter_node is not None \
            and where("tp", ("tp", "cluster")) is not None:
        # (more GPUs than the cluster has is E301 above; no inter-node link at all is the cluster's E302)
        out.append(warning(
            "W301", f"the tensor-parallel group of plan `{p.name}` (tp = {p.tp}) is larger than the NVLink "
            f"domain of cluster `{c.name}` ({c.domain} GPUs): its AllReduces cross the slower inter-node link "
            f"`{c.inter_node.name}`",
            where("tp", ("tp", "cluster")),
            help=f"legitimate but costly: compare with tp = {c.domain} and pipeline or data parallelism "
                 "across nodes"))
    if m.kv_heads and p.tp > 1 and not rules.tp_divides_kv_heads(p.tp, m.kv_heads) \
            and where("tp", ("tp", "model")) is not None:
        if p.tp % m.kv_heads == 0:
            detail = f"each KV head is replicated on {p.tp // m.kv_heads} GPUs"
        else:
            detail = "the KV heads split unevenly across the group"
        out.append(warning("W302", f"tp = {p.tp} does not divide kv_heads = {m.kv_heads} of model `{m.name}`: "
                           f"{detail}", where("tp", ("tp", "model")),
                           help=f"tp values that divide {m.kv_heads}: {_divisors(m.kv_heads, 1 << 20)}"))
    if p.pp > 1 and not rules.pp_divides_layers(p.pp, m.layers) and where("pp", ("pp", "model")) is not None:
        lo, hi = m.layers // p.pp, -(-m.layers // p.pp)
        out.append(warning("W303", f"pp = {p.pp} does not divide layers = {m.layers} of model `{m.name}`: "
                           f"stages get {lo} or {hi} layers and the largest sets the pace", where("pp", ("pp", "model")),
                           help=f"pp values that divide {m.layers}: {_divisors(m.layers, 64)}"))
    if p.ep > 1 and where("ep", ("ep", "model")) is not None:
        if not rules.ep_has_experts(p.ep, m.experts or 0):
            out.append(warning("W304", f"ep = {p.ep} but model `{m.name}` has no experts: expert parallelism "
                               "has nothing to shard", where("ep", ("ep", "model")),
                               help="set `experts` on the model, or use `ep = 1`"))
        elif not rules.ep_divides_experts(p.ep, m.experts):
            out.append(warning("W304", f"ep = {p.ep} does not divide experts = {m.experts} of model "
                               f"`{m.name}`: some GPUs hold more experts than others", where("ep", ("ep", "model")),
                               help=f"ep values that divide {m.experts}: {_divisors(m.experts, 1 << 20)}"))
    out += _check_training(p, where)
    out += _check_serve(p, where)
    out += _check_stack_phase(p, where)
    return out


def _check_stack_phase(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """A training plan on a stack with a host time per sequence (W305): training charges the stack's
    fixed time per step, not per running sequence (a serving engine's sampling and detokenising)."""
    st = getattr(p, "stack", None)
    if p.phase != "train" or st is None or not getattr(st, "seq_overhead", 0) or "stack" not in p.spans:
        return []
    span = where("stack", ("stack",))
    if span is None:
        return []
    return [warning("W305", f"plan `{p.name}` trains on stack `{st.name}`, whose `seq_overhead` is not charged in "
                    "training (host time per running sequence is a serving cost)", span,
                    help="use a training stack (e.g. `training_default`), or leave `seq_overhead` out of this one")]


SERVE_FIELDS = ("concurrency", "input_tokens", "output_tokens", "chunk_tokens")


def _check_serve(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """Serving fields on a plan that does not serve, and `batch`/`seq` on one that does (W306): legal, but
    nothing reads them (ccost.serve)."""
    if p.phase != "serve":
        written = [f for f in SERVE_FIELDS if f in p.spans]
        if written and where(written[0], (*written, "phase")) is not None:
            return [warning("W306", f"plan `{p.name}` is a {p.phase} plan: " + ", ".join(f"`{f}`" for f in written)
                            + (" applies" if len(written) == 1 else " apply") + " only to `phase = serve`",
                            where(written[0], (*written, "phase")), help="remove them, or set `phase = serve`")]
        return []
    written = [f for f in ("batch", "seq") if f in p.spans]
    if written and where(written[0], (*written, "phase")) is not None:
        return [warning("W306", f"plan `{p.name}` is a serve plan: " + " and ".join(f"`{f}`" for f in written)
                        + (" is" if len(written) == 1 else " are") + " not read (the serve step's batch is `concurrency`, its contexts come from "
                        "`input_tokens` and `output_tokens`)", where(written[0], (*written, "phase")),
                        help="remove them; set `concurrency`, `input_tokens` and `output_tokens`")]
    return []


TRAINING_FIELDS = ("schedule", "virtual_stages", "recompute", "sequence_parallel", "optimizer_sharding",
                   "master_weights", *axes.TRAIN_ONLY)


def _check_training(p, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """Training choices that change nothing as written (W305): they are legal, but the author meant
    something else."""
    out: list[Diagnostic] = []
    if p.phase != "train":
        written = [f for f in TRAINING_FIELDS if f in p.spans]
        if written and where(written[0], (*written, "phase")) is not None:
            out.append(warning("W305", f"plan `{p.name}` is a {p.phase} plan: "
                               + ", ".join(f"`{f}`" for f in written)
                               + (" applies" if len(written) == 1 else " apply") + " only to training",
                               where(written[0], (*written, "phase")),
                               help="remove them, or set `phase = train`"))
        return out
    reads = ("schedule", "virtual_stages", "pp", "microbatches")
    if p.schedule == "interleaved" and where("schedule", reads) is not None:
        if p.pp == 1:
            out.append(warning("W305", f"plan `{p.name}` has `schedule = interleaved` but pp = 1: there is no "
                               "pipeline to interleave", where("schedule", reads), help="set pp > 1"))
        elif p.virtual_stages < 2:
            out.append(warning("W305", f"plan `{p.name}` has `schedule = interleaved` with virtual_stages = 1: "
                               "that is plain 1F1B, bubble (P−1)/(M+P−1)", where("schedule", reads),
                               help="give `virtual_stages = 2` or more (model chunks per GPU)"))
        elif p.microbatches % p.pp:
            out.append(warning("W305", f"plan `{p.name}`: the interleaved schedule runs micro-batches in groups "
                               f"of pp = {p.pp}, but microbatches = {p.microbatches} is not a multiple of it "
                               "(Megatron-LM refuses this layout)", where("microbatches", reads),
                               help=f"use microbatches = {(p.microbatches // p.pp + 1) * p.pp}"))
    elif p.virtual_stages > 1 and where("virtual_stages", reads) is not None:
        out.append(warning("W305", f"plan `{p.name}`: virtual_stages = {p.virtual_stages} only applies to "
                           f"`schedule = interleaved` (this plan runs {p.schedule})",
                           where("virtual_stages", reads), help="add `schedule = interleaved`"))
    if p.sequence_parallel and p.tp == 1 and where("sequence_parallel", ("sequence_parallel", "tp")) is not None:
        out.append(warning("W305", f"plan `{p.name}`: sequence_parallel splits over the tp ranks, but tp = 1",
                           where("sequence_parallel", ("sequence_parallel", "tp")),
                           help="remove it, or use tp > 1"))
    if p.optimizer_sharding != "none" and p.fsdp and where("optimizer_sharding", ("optimizer_sharding", "fsdp")) \
            is not None:
        out.append(warning("W305", f"plan `{p.name}`: fsdp = true already shards the optimizer state, "
                           f"gradients and parameters; optimizer_sharding = {p.optimizer_sharding} adds nothing",
                           where("optimizer_sharding", ("optimizer_sharding", "fsdp")),
                           help="remove `optimizer_sharding`"))
    return out


def _check_search(s, where: Callable[..., Span | None]) -> list[Diagnostic]:
    from ccost.search import validate  # the search's own rules (searchable fields, size limit E402)

    return validate(s, where)


def _check_link(link, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """A measured curve is one piece per entry of each list, starting at 0 B and going up (E203)."""
    out: list[Diagnostic] = []
    starts = link.curve_from
    if not starts:
        return out
    reads = ("curve_from", "curve_alpha", "curve_bandwidth")
    n = len(starts)
    for name in ("curve_alpha", "curve_bandwidth"):
        vals = getattr(link, name)
        if vals and len(vals) != n and (span := where(name, reads)) is not None:
            out.append(error("E203", f"`{name}` of link `{link.name}` has {len(vals)} value"
                             f"{'s' if len(vals) != 1 else ''} but `curve_from` starts {n} piece"
                             f"{'s' if n != 1 else ''}", span,
                             help="give one value per piece, in the order of `curve_from`"))
    if (span := where("curve_from", reads)) is not None:
        if starts[0] != 0:
            out.append(error("E203", f"the first piece of link `{link.name}`'s curve starts at "
                             f"{U.format_quantity(starts[0], U.INFORMATION)}, so smaller messages have no piece",
                             span, help="start the first piece at `0 B`"))
        elif any(b <= a for a, b in zip(starts, starts[1:])):
            out.append(error("E203", f"`curve_from` of link `{link.name}` must go up: each piece starts "
                             "above the one before", span, help="list the pieces from the smallest messages"))
    return out


_VALIDATORS: dict[str, Callable[[Any, Callable[[str], Span]], list[Diagnostic]]] = {
    "link": _check_link,
    "plan": _check_plan,
    "search": _check_search,
}
