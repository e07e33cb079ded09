"""The package's import structure: the layer contract of pyproject.toml holds with no exception,
every import goes down the layers (those inside a function too), and the imports a module runs when it is
imported form no cycle."""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib


PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "compiler" / "ccost"
ROOT = PACKAGE.parent.parent


def _lint_imports() -> str | None:
    here = pathlib.Path(sys.executable).parent / "lint-imports"
    return str(here) if here.exists() else shutil.which("lint-imports")


def test_layer_contract_holds():
    # import-linter is a test dependency (pyproject's `test` extra): missing, this fails rather than
    # skips, so an install that forgot it cannot pass the layer check by not running it.
    exe = _lint_imports()
    assert exe is not None, "lint-imports not found: install the test extra (pip install -e '.[test]')"
    run = subprocess.run([exe, str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    assert run.returncode == 0 and "0 broken" in run.stdout, run.stdout + run.stderr


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = ("ccost", *p.relative_to(PACKAGE).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _import_time_edges(name: str, path: pathlib.Path, modules: dict, in_functions: bool = False) -> set[str]:
    """The ccost modules ``name`` imports while it is itself imported: statements at module level, not
    inside a function or an ``if TYPE_CHECKING:`` block. ``in_functions``: the imports inside functions
    too (every import the module can run)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not in_functions:
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                mod = ".".join([*base, *([node.module] if node.module else [])])
                for a in node.names:
                    out.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod)
            visit(ast.iter_child_nodes(node))

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {m for m in out if m in modules and m != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (found := dfs(w)):
                return found
        state[v] = 2
        stack.pop()
        return None

    for v in sorted(graph):
        if v not in state and (found := dfs(v)):
            return found
    return None


def test_no_import_cycle_at_module_level():
    modules = _modules()
    graph = {m: _import_time_edges(m, p, modules) for m, p in modules.items()}
    assert len(graph) > 50 and graph["ccost.model.analysis"] >= {"ccost.model.lower", "ccost.model.costs"}
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def _contract(kind: str = "layers", container: str = "ccost") -> dict:
    """The contract of ``kind``; a layers contract by its container (``ccost``, or the model's own,
    ``ccost.model``)."""
    (contract,) = [c for c in _contracts() if c["type"] == kind
                   and (kind != "layers" or c.get("containers") == [container])]
    return contract


def test_the_layer_contract_has_no_exceptions():
    for contract in _contracts():
        assert contract["type"] in ("layers", "forbidden")
        assert not {"ignore_imports", "unmatched_ignore_imports_alerting", "allow_indirect_imports"} & set(contract), \
            "an import against the layers is fixed, not ignored"


#: The model: what prices a checked plan, the package ccost.model. It reads no file and never imports the
#: front end.
MODEL = {"costs", "program", "lower", "analysis", "phases", "economics", "training", "serve", "kernels", "target"}


def test_the_model_is_forbidden_the_front_end():
    """The second contract: the model (the package ccost.model) does not import ccost.check or the parser
    (not even through another module: indirect imports count), so evaluation never parses or checks a file.
    Every phase's cost model (the module of its functions in ccost.model.phases: training, serve, ...) is in
    the package."""
    from ccost.model import phases

    forbidden = _contract("forbidden")
    assert forbidden["source_modules"] == ["ccost.model"]
    assert {m for m in MODEL if (PACKAGE / "model" / f"{m}.py").is_file()} == MODEL
    cost_models = {f.__module__ for ph in phases.PHASES.values()
                   for f in (ph.price, ph.explain, ph.record, ph.lower, ph.analyse) if f is not None}
    assert all(m.startswith("ccost.model.") for m in cost_models), cost_models
    assert {"ccost.model.training", "ccost.model.serve"} <= cost_models
    assert {"ccost.check", "ccost.syntax"} <= set(forbidden["forbidden_modules"])


def test_a_planted_import_of_the_front_end_breaks_the_contract(tmp_path):
    """lint-imports on a copy of the package where ccost.model.lower imports the checker (as lower.default_stack
    once did to read std/stacks.ccost): the forbidden contract breaks, and says which import."""
    exe = _lint_imports()
    assert exe is not None, "lint-imports not found: install the test extra (pip install -e '.[test]')"
    shutil.copytree(PACKAGE, tmp_path / "ccost", ignore=shutil.ignore_patterns("__pycache__", "_data"))
    lower = tmp_path / "ccost" / "model" / "lower.py"
    lower.write_text(lower.read_text(encoding="utf-8") + "\n\ndef _planted():\n    from ccost import check\n\n"
                     "    return check\n", encoding="utf-8")
    run = subprocess.run([exe, str(ROOT / "pyproject.toml")], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode != 0, run.stdout
    assert "the model layers do not import ccost.check or the parser BROKEN" in run.stdout, run.stdout
    assert "ccost.model.lower -> ccost.check" in run.stdout, run.stdout


def _layer_of(container: str = "ccost") -> dict[str, int]:
    """Module or package directly in ``container`` → its layer's index in the contract, 0 the highest."""
    out = {}
    for i, layer in enumerate(_contract("layers", container)["layers"]):
        for name in layer.replace(":", "|").split("|"):
            out[name.strip().strip("()")] = i
    return out


def _upward(edges: dict[str, set[str]], layer_of: dict[str, int], container: str = "ccost") -> list[str]:
    """The imports ``a -> b`` inside ``container`` whose target sits in a higher layer than the importer."""
    depth = container.count(".") + 1

    def top(m):
        parts = m.split(".")
        inside = ".".join(parts[:depth]) == container and len(parts) > depth
        return parts[depth] if inside else None

    return sorted(f"{a} -> {b}" for a, bs in edges.items() for b in bs
                  if top(a) in layer_of and top(b) in layer_of and layer_of[top(b)] < layer_of[top(a)])


def test_no_import_goes_up_not_even_inside_a_function():
    """The same rule as the contract, read from the source itself: an import inside a function counts (it
    runs when the function does), so a lazy import cannot hide an upward dependency."""
    modules = _modules()
    layer_of = _layer_of()
    tops = {m.split(".")[1] for m in modules if m.count(".")}
    assert tops <= set(layer_of), f"modules in no layer of the contract: {sorted(tops - set(layer_of))}"
    edges = {m: _import_time_edges(m, p, modules, in_functions=True) for m, p in modules.items()}
    # the walk sees imports inside functions (ccost.search.pricing imports ccost.model.economics only when it runs)
    assert "ccost.model.economics" in edges["ccost.search.pricing"]
    assert "ccost.model.economics" not in _import_time_edges("ccost.search.pricing", modules["ccost.search.pricing"], modules)
    assert _upward(edges, layer_of) == []
    # and inside the model, by its own contract
    inner = _layer_of("ccost.model")
    subs = {m.split(".")[2] for m in modules if m.startswith("ccost.model.")}
    assert subs <= set(inner), f"modules of ccost.model in no layer of its contract: {sorted(subs - set(inner))}"
    assert _upward(edges, inner, "ccost.model") == []


def test_an_upward_import_is_found():
    layer_of = {"evaluate": 0, "pricing": 1, "check": 2}
    assert _upward({"ccost.pricing": {"ccost.check.plan"}, "ccost.evaluate": {"ccost.pricing"}}, layer_of) == []
    assert _upward({"ccost.check.plan": {"ccost.evaluate"}}, layer_of) == ["ccost.check.plan -> ccost.evaluate"]
    inner = {"phases": 0, "pricing": 1}
    assert _upward({"ccost.model.pricing": {"ccost.model.phases"}}, inner, "ccost.model") == \
        ["ccost.model.pricing -> ccost.model.phases"]
    assert _upward({"ccost.model.phases": {"ccost.model.pricing"}}, inner, "ccost.model") == []
