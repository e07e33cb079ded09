"""Pass 1, load: parse the spec and, depth first, every file it imports (relative to the importing file,
or ``std/...`` from the bundled library). Imports stay inside the project (E113); cycles (E105), missing
files (E106) and chains deeper than ``MAX_IMPORT_DEPTH`` (E113) are reported with the import chain.
"""

from __future__ import annotations

import os

from ccost.check.context import Context, File
from ccost.check.hints import suggest
from ccost.diagnostics import CcostError, Diagnostic, error
from ccost.syntax import tree as T
from ccost.schema import MAX_IMPORT_DEPTH, MAX_TOTAL_BYTES  # imports nested deeper, or more in all: E113
from ccost.userfiles import Outside, confine, inside, project_root


def _default_reader(path: str) -> str:
    from ccost.syntax.parse import read_source

    if not os.path.lexists(path) or os.path.isdir(path):  # the caller words both
        raise FileNotFoundError(path)
    return read_source(path)  # regular files only, bounded (ccost.userfiles)


def _std_dir() -> str | None:
    from ccost.resources import resource_dir

    try:
        return str(resource_dir("std"))
    except FileNotFoundError:
        return None


def std_file(kind: str) -> str | None:
    """The bundled library file of a block kind (``std/models.ccost``), or None when ccost ships none."""
    folder = _std_dir()
    name = f"{kind}s.ccost"
    return f"std/{name}" if folder is not None and os.path.isfile(os.path.join(folder, name)) else None


def imports_of(text: str, path: str) -> tuple[File, dict[str, File]]:
    """The spec ``text``, read as the file ``path``, and every file it imports (key -> File, parsed),
    resolved and read exactly as ``ccost check`` does: inside the project or std/ (E113), missing and
    unreadable files left out. The diagnostics are dropped: the language server follows imports with
    this, and shows ``check``'s own diagnostics."""
    ctx = Context(read=_default_reader, path=path, text=text, hint_budget=0)
    load(ctx)
    assert ctx.root is not None  # set whenever the text is given
    return ctx.root, ctx.files


# ---------------------------------------------------------------------------------------------------
# The pass


def load(ctx: Context) -> None:
    """Read and parse the spec (``ctx.path``, or ``ctx.text`` as that file) and its imports into
    ``ctx.files``; a spec that cannot be read is an E002 and leaves nothing to check."""
    path = ctx.path
    ctx.project = project_root(path)
    root = File(display=path, real=path, key=os.path.realpath(path), area=ctx.project)
    text = ctx.text
    if text is None:
        try:
            text = ctx.read(path)
        except FileNotFoundError:
            if os.path.isdir(path):
                ctx.add(error("E002", f"{path} is a folder, not a spec file",
                              help=f"name the .ccost files, like `{os.path.join(path, '*.ccost')}`"))
            else:
                ctx.add(error("E002", f"{path}: no such file",
                              help="check the path; specs usually live in specs/"))
            return
        except CcostError as exc:
            ctx.diags.extend(exc.diagnostics)
            _show_anyway(ctx, path, path)
            return
    ctx.root = root
    _load(ctx, root, text)


def _load(ctx: Context, f: File, text: str) -> None:
    from ccost.syntax.parse import parse

    ctx.sources[f.display] = text
    ctx.read_bytes += len(text)
    ctx.loading.append(f)
    try:
        f.tree = parse(text, f.display)
    except CcostError as exc:
        ctx.diags.extend(exc.diagnostics)
        f.tree = None
    if f.tree is not None and f.tree.imports and len(ctx.loading) > MAX_IMPORT_DEPTH:
        chain = " → ".join(g.display for g in ctx.loading[:3]) + " → ... → " + f.display
        ctx.add(error("E113", f"imports are nested more than {MAX_IMPORT_DEPTH} files deep",
                      f.tree.imports[0].path_span, help="import the shared files from one place, "
                      "not each from the previous one", notes=[f"import chain: {chain}"]))
    elif f.tree is not None:
        for imp in f.tree.imports:
            target = _locate(ctx, imp, f)
            if target is None:
                continue
            if any(g.key == target.key for g in ctx.loading):
                start = next(i for i, g in enumerate(ctx.loading) if g.key == target.key)
                chain = " → ".join([g.display for g in ctx.loading[start:]] + [target.display])
                ctx.add(error("E105", f"import cycle: {chain}", imp.path_span,
                              help="move the shared blocks into a file that both import, and import "
                                   "it from each"))
                continue
            if target.key in ctx.files:
                f.imports.append(target.key)
                continue
            try:
                target_text = ctx.read(target.real)
            except FileNotFoundError:
                _missing_import(ctx, imp, f, target)
                continue
            except CcostError as exc:
                ctx.diags.extend(_at_import(d, imp) for d in exc.diagnostics)
                _show_anyway(ctx, target.display, target.real)
                continue
            if ctx.read_bytes + len(target_text) > MAX_TOTAL_BYTES:
                # everything read is parsed, checked and shown in the review's appendix: bounded in all
                mib = (ctx.read_bytes + len(target_text)) / 2**20
                ctx.add(error("E113", f"importing `{imp.path}` brings the spec and its imports to {mib:.1f} MiB, "
                              f"more than {MAX_TOTAL_BYTES // 2**20} MiB in all", imp.path_span,
                              help="a project's specs come to a few hundred KB; is one of them generated?"))
                continue
            _load(ctx, target, target_text)
            f.imports.append(target.key)
    ctx.loading.pop()
    ctx.files[f.key] = f


def _show_anyway(ctx: Context, display: str, real: str) -> None:
    """A file that is not UTF-8 cannot be checked, but its line can still be shown under the caret."""
    if ctx.read is not _default_reader:
        return
    from ccost.userfiles import read_user_bytes

    try:
        data = read_user_bytes(real, limit=1 << 20)
    except (OSError, CcostError):  # a folder, a device, too large: nothing to show
        return
    ctx.sources[display] = data.decode("utf-8", "replace")


def _at_import(d: Diagnostic, imp: T.Import) -> Diagnostic:
    """A read error of an imported file has no place in that file; show the import line instead."""
    if d.span is not None:
        return d
    return Diagnostic(d.code, d.severity, d.message, imp.path_span, d.help, d.notes)


# ---------------------------------------------------------------------------------------------------
# Confinement: where an import may lead


class ImportRefused(Exception):
    """An import path that cannot be followed: ``code`` (E106 or E113), ``message`` and ``help``."""

    def __init__(self, code: str, message: str, help: str | None = None):
        super().__init__(message)
        self.code, self.message, self.help = code, message, help


def resolve_import(path: str, importer: File) -> File:
    """The file ``import "PATH"`` in ``importer`` names, or ``ImportRefused``: the checker's rule, which
    the language server follows too (so completion, hover and definition go nowhere ``check`` refuses).
    Imports stay inside the project (the spec's git work tree, else its folder) or the bundled ``std/``:
    absolute paths, ``..`` that climbs out and symlinks that lead out are refused (E113) before anything
    is read (``ccost.userfiles.confine``)."""
    if not path.strip():
        raise ImportRefused("E106", "an empty import path", 'name a file: `import "std/gpus.ccost"`')
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise ImportRefused("E113", "an import path with a control character",
                            "name the file with printable characters")
    if path.startswith("std/"):
        std = _std_dir()
        if std is None:
            raise ImportRefused("E106", "this installation of ccost has no bundled std/ library")
        return _confined(path, os.path.normpath(path), os.path.join(std, path[4:]), std)
    if os.path.isabs(path) or path.startswith("\\") or (len(path) > 1 and path[1] == ":"):
        raise ImportRefused("E113", "an import path must be relative to the importing file, not absolute",
                            f"imports stay inside {_area_name(importer.area)}: write the path relative to "
                            'this file, or import the bundled library with `import "std/..."`')
    # display and real differ inside the bundled library: `std/a.ccost` importing "b.ccost"
    display = os.path.normpath(os.path.join(os.path.dirname(importer.display), path))
    real = os.path.join(os.path.dirname(importer.real), path)
    return _confined(path, display, real, importer.area)


def importer_file(path: str) -> File:
    """A spec file as an importer, for ``resolve_import`` from outside a check (the language server):
    its imports stay inside its project, or inside ``std/`` for a file of the bundled library."""
    real = os.path.realpath(path)
    std = _std_dir()
    area = std if std is not None and inside(real, os.path.realpath(std)) else project_root(real)
    return File(display=path, real=path, key=real, area=area)


def _locate(ctx: Context, imp: T.Import, importer: File) -> File | None:
    """The file an import names (``resolve_import``), or None after an error at the import."""
    try:
        return resolve_import(imp.path, importer)
    except ImportRefused as exc:
        ctx.add(error(exc.code, exc.message, imp.path_span, help=exc.help))
        return None


def _is_std(area: str) -> bool:
    std = _std_dir()
    return std is not None and os.path.abspath(area) == os.path.abspath(std)


def _area_name(area: str) -> str:
    if _is_std(area):
        return "the bundled std/ library"
    shown = os.path.relpath(area) if inside(os.path.abspath(area), os.getcwd()) else area
    if os.path.lexists(os.path.join(area, ".git")):
        return f"the project `{shown}` (the git work tree that holds the spec)"
    return f"the project `{shown}` (the spec's folder; it is not in a git work tree)"


def _confined(written: str, display: str, real: str, area: str) -> File:
    """The import target, when it stays inside ``area`` both as written and with symlinks resolved."""
    fix = ('`std/...` names a file of the bundled library, like `std/gpus.ccost`' if _is_std(area)
           else "copy the file into the project and import it from there")
    try:
        resolved = confine(real, area, written)
    except Outside as exc:
        how = "is a symbolic link that leads" if exc.through_link else "leads"
        raise ImportRefused("E113", f"`{written}` {how} outside {_area_name(area)}", fix) from None
    return File(display=display, real=os.path.normpath(real), key=resolved, area=area)


def _missing_import(ctx: Context, imp: T.Import, importer: File, target: File) -> None:
    chain = " → ".join([g.display for g in ctx.loading] + [target.display])
    folder = os.path.dirname(target.real) or "."
    help_text = None
    # never the importing file or one that imports it (importing it back is a cycle, E105): `old.ccost`
    # missing "models.ccost" was told `did you mean import "old.ccost"`
    importers = {g.key for g in ctx.loading}
    try:
        siblings = sorted(n for n in os.listdir(folder) if n.endswith(".ccost")
                          and os.path.realpath(os.path.join(folder, n)) not in importers)
    except OSError:
        siblings = []
    base = os.path.basename(target.real)
    guess = suggest(base, siblings)
    std = _std_dir()
    if not imp.path.startswith("std/") and std is not None and os.path.isfile(os.path.join(std, base)):
        help_text = f'did you mean the bundled library\'s `import "std/{base}"`?'
    elif guess:
        shown = os.path.join(os.path.dirname(imp.path), guess) if os.path.dirname(imp.path) else guess
        help_text = f'did you mean `import "{shown}"`?'
    elif imp.path.startswith("std/") and siblings:
        help_text = "the std library has: " + ", ".join(f'"std/{n}"' for n in siblings)
    else:
        help_text = "a relative path is relative to the importing file; the bundled library is `std/...`"
    ctx.add(error("E106", f"imported file not found: {target.display}", imp.path_span, help=help_text,
                  notes=[f"import chain: {chain}"]))
