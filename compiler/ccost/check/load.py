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
from ccost.userfiles import project_root


def _default_reader(path: str) -> str:
    from ccost.syntax.parse import read_source

    if not os.path.lexists(path) or os.path.isdir(path):  # the caller words both
        raise FileNotFoundError(path)
    return read_source(path)  # regular files only, bounded (ccost.userfiles)


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (both absolute and normalised)."""
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives
        return False


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


def _locate(ctx: Context, imp: T.Import, importer: File) -> File | None:
    """The file an import names, or None after an error. Imports stay inside the project (the spec's
    git work tree, else its folder) or the bundled ``std/``: absolute paths, ``..`` that climbs out,
    and symlinks that lead out are refused (E113) before anything is read."""
    path = imp.path
    if not path.strip():
        ctx.add(error("E106", "an empty import path", imp.path_span,
                      help='name a file: `import "std/gpus.ccost"`'))
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        ctx.add(error("E113", "an import path with a control character", imp.path_span,
                      help="name the file with printable characters"))
        return None
    if path.startswith("std/"):
        std = _std_dir()
        if std is None:
            ctx.add(error("E106", "this installation of ccost has no bundled std/ library",
                          imp.path_span))
            return None
        return _confined(ctx, imp, os.path.normpath(path), os.path.join(std, path[4:]), std)
    if os.path.isabs(path) or path.startswith("\\") or (len(path) > 1 and path[1] == ":"):
        ctx.add(error("E113", "an import path must be relative to the importing file, not absolute",
                      imp.path_span,
                      help=f"imports stay inside {_area_name(importer.area)}: write the path "
                           'relative to this file, or import the bundled library with `import "std/..."`'))
        return None
    # display and real differ inside the bundled library: `std/a.ccost` importing "b.ccost"
    display = os.path.normpath(os.path.join(os.path.dirname(importer.display), path))
    real = os.path.join(os.path.dirname(importer.real), path)
    return _confined(ctx, imp, display, real, importer.area)


def _is_std(area: str) -> bool:
    std = _std_dir()
    return std is not None and os.path.abspath(area) == os.path.abspath(std)


def _area_name(area: str) -> str:
    if _is_std(area):
        return "the bundled std/ library"
    shown = os.path.relpath(area) if _inside(os.path.abspath(area), os.getcwd()) else area
    if os.path.lexists(os.path.join(area, ".git")):
        return f"the project `{shown}` (the git work tree that holds the spec)"
    return f"the project `{shown}` (the spec's folder; it is not in a git work tree)"


def _confined(ctx: Context, imp: T.Import, display: str, real: str, area: str) -> File | None:
    """The import target, when it stays inside ``area`` both as written and with symlinks resolved."""
    area_abs = os.path.abspath(area)
    target = os.path.normpath(os.path.abspath(real))
    where = _area_name(area)
    fix = ('`std/...` names a file of the bundled library, like `std/gpus.ccost`' if _is_std(area)
           else "copy the file into the project and import it from there")
    if not _inside(target, area_abs):
        ctx.add(error("E113", f"`{imp.path}` leads outside {where}", imp.path_span, help=fix))
        return None
    resolved = os.path.realpath(target)
    if not _inside(resolved, os.path.realpath(area_abs)):
        ctx.add(error("E113", f"`{imp.path}` is a symbolic link that leads outside {where}", imp.path_span,
                      help=fix))
        return None
    return File(display=display, real=os.path.normpath(real), key=resolved, area=area)


def _missing_import(ctx: Context, imp: T.Import, importer: File, target: File) -> None:
    chain = " → ".join([g.display for g in ctx.loading] + [target.display])
    folder = os.path.dirname(target.real) or "."
    help_text = None
    try:
        siblings = sorted(n for n in os.listdir(folder) if n.endswith(".ccost"))
    except OSError:
        siblings = []
    base = os.path.basename(target.real)
    guess = suggest(base, siblings)
    if guess:
        shown = os.path.join(os.path.dirname(imp.path), guess) if os.path.dirname(imp.path) else guess
        help_text = f'did you mean `import "{shown}"`?'
    elif imp.path.startswith("std/") and siblings:
        help_text = "the std library has: " + ", ".join(f'"std/{n}"' for n in siblings)
    else:
        help_text = "a relative path is relative to the importing file; the bundled library is `std/...`"
    ctx.add(error("E106", f"imported file not found: {target.display}", imp.path_span, help=help_text,
                  notes=[f"import chain: {chain}"]))
