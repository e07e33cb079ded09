"""The language server: `ccost lsp` driven over pipes by pygls's own LSP client (a spec with an error shows
its diagnostic, hovering a field shows its doc and SI value, a unit completes, a name jumps to the file it
is imported from), the answers behind it tested directly, and the generated TextMate grammar kept in step
with the grammar and the schema."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import pytest
from ccost.lsp import features as F

REPO = Path(__file__).resolve().parent.parent
A1 = REPO / "specs" / "a1-tp-decode.ccost"

pytest.importorskip("pygls", reason="pygls is in the test extra; `pip install -e '.[test]'` installs it")
from lsprotocol import types as L  # noqa: E402 - after the skip when pygls is missing
from pygls.lsp.client import LanguageClient  # noqa: E402


def _pos(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    """(line, character) of ``needle`` in ``text`` (0-based, as LSP counts), plus ``offset`` characters."""
    i = text.index(needle) + offset
    return text.count("\n", 0, i), i - (text.rfind("\n", 0, i) + 1)


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """A spec that imports a file of its own and the bundled library."""
    (tmp_path / "hw.ccost").write_text(
        'link fast "A fast link" { alpha = 1 us; bandwidth = 400 GB/s }\n'
        'gpu g "A GPU" { memory = 80 GB; hbm_bandwidth = 3 TB/s; flops = 900 TFLOP/s }\n')
    main = tmp_path / "main.ccost"
    main.write_text('import "hw.ccost"\nimport "std/models.ccost"\n\n'
                    "cluster c { gpu = g; intra_node = fast }\n"
                    "plan p { model = llama3_8b; cluster = c; phase = decode; batch = 8; tp = 2 }\n")
    return tmp_path, main


async def _session(uri: str, text: str, requests):
    """Start `python -m ccost lsp`, open ``text`` as ``uri``, run ``requests(client)``; return the published
    diagnostics and the results."""
    client = LanguageClient("ccost-test", "1")
    published: dict[str, list] = {}

    @client.feature(L.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def _diagnostics(ls, params: L.PublishDiagnosticsParams):
        published[params.uri] = params.diagnostics

    await client.start_io(sys.executable, "-m", "ccost", "lsp")
    try:
        await client.initialize_async(L.InitializeParams(capabilities=L.ClientCapabilities()))
        client.initialized(L.InitializedParams())
        client.text_document_did_open(L.DidOpenTextDocumentParams(
            L.TextDocumentItem(uri=uri, language_id="ccost", version=1, text=text)))
        for _ in range(400):  # the first check builds the parser: allow a few seconds
            if uri in published:
                break
            await asyncio.sleep(0.025)
        results = await requests(client)
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
    return published.get(uri), results


# slow (~1 s: the server as a subprocess over pipes): run by CI; the in-process tests of each request stay
# in the inner loop
@pytest.mark.slow
def test_the_server_over_pipes_diagnoses_hovers_completes_and_jumps(tmp_path):
    root, main = _project(tmp_path)
    text = main.read_text().replace("tp = 2 }", "tp = 2 }\nlink broken { alpha = 2 us; bandwidth = 450 GBps }")
    uri = main.as_uri()

    async def requests(client: LanguageClient):
        doc = L.TextDocumentIdentifier(uri)
        hover = await client.text_document_hover_async(L.HoverParams(doc, L.Position(*_pos(text, "alpha"))))
        # complete a unit after `alpha = 2 ` on a new, unfinished line
        typed = text + "\nlink other {\n  alpha = 2 "
        client.text_document_did_change(L.DidChangeTextDocumentParams(
            L.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [L.TextDocumentContentChangeWholeDocument(text=typed)]))
        last = typed.split("\n")
        completion = await client.text_document_completion_async(L.CompletionParams(
            doc, L.Position(len(last) - 1, len(last[-1]))))
        client.text_document_did_change(L.DidChangeTextDocumentParams(
            L.VersionedTextDocumentIdentifier(uri=uri, version=3), [L.TextDocumentContentChangeWholeDocument(text=text)]))
        here = await client.text_document_definition_async(L.DefinitionParams(
            doc, L.Position(*_pos(text, "gpu = g", 6))))
        std = await client.text_document_definition_async(L.DefinitionParams(
            doc, L.Position(*_pos(text, "llama3_8b", 2))))
        return hover, completion, here, std

    diagnostics, (hover, completion, here, std) = asyncio.run(_session(uri, text, requests))
    # the error, where it is, with the fix
    assert diagnostics, "no diagnostics were published"
    bad = [d for d in diagnostics if d.code == "E202"]
    assert len(bad) == 1 and "GBps" in bad[0].message and "GB/s" in bad[0].message
    line, col = _pos(text, "GBps")
    assert (bad[0].range.start.line, bad[0].range.start.character) == (line, col)
    assert bad[0].severity == L.DiagnosticSeverity.Error
    # hover a field: its doc, its unit and (the document has an error, so) no value
    assert "latency per hop" in hover.contents.value and "SI unit: s" in hover.contents.value
    # complete a unit: the times, and nothing of another dimension
    labels = {i.label for i in completion.items}
    assert {"us", "ms", "ns", "s"} <= labels and "GB/s" not in labels and "GB" not in labels
    # definitions: in an imported file of the project, and in the bundled library
    assert here.uri == (root / "hw.ccost").as_uri() and here.range.start.line == 1
    assert std.uri.endswith("/models.ccost") and "std" in std.uri


@pytest.mark.slow  # as above: a server subprocess
def test_formatting_over_pipes_is_ccost_fmt(tmp_path):
    spec = tmp_path / "f.ccost"
    text = "link l {alpha=2 us;   bandwidth = 450 GB/s}\n"
    spec.write_text(text)

    async def requests(client):
        return await client.text_document_formatting_async(L.DocumentFormattingParams(
            L.TextDocumentIdentifier(spec.as_uri()), L.FormattingOptions(tab_size=2, insert_spaces=True)))

    diagnostics, edits = asyncio.run(_session(spec.as_uri(), text, requests))
    from ccost.fmt import format_checked

    assert list(diagnostics) == [] and len(edits) == 1
    assert edits[0].new_text == format_checked(text, str(spec))


# --------------------------------------------------------------------------------------------------
# The answers, directly


def test_hover_resolves_values_in_si_and_shows_a_plans_numbers():
    text, path = A1.read_text(), str(A1)
    alpha = F.hover(text, path, *_pos(text, "alpha  "))
    assert "value: **2 µs** = 2e-06 s (SI)" in alpha
    bw = F.hover(text, path, *_pos(text, "bandwidth        ="))
    assert "450 GB/s" in bw and "4.5e+11 B/s (SI)" in bw
    unit = F.hover(text, path, *_pos(text, "450 GB/s  #", 5))
    assert "1 GB/s = 1e+09 B/s" in unit
    plan = F.hover(text, path, *_pos(text, "plan tp8 ", 5))
    # the same evaluation as `ccost eval`: A1's step time is 10.07 ms (5.261 compute + 4.806 ring T_comm)
    assert "10.07 ms" in plan and "5.261 ms / 4.806 ms" in plan and "GPUs | 8" in plan
    ref = F.hover(text, path, *_pos(text, "= llama3_70b", 3))
    assert "model `llama3_70b`" in ref and "Llama-3-70B" in ref


def test_completion_of_fields_enums_and_references():
    text, path = A1.read_text(), str(A1)

    def at_end(extra: str):
        t = text + extra
        lines = t.split("\n")
        return {i.label for i in F.complete(t, path, len(lines) - 1, len(lines[-1]))}

    assert at_end("\nlink x {\n  alpha = 1 us\n  ") >= {"bandwidth", "one_shot_latency", "efficiency"}
    assert "alpha" not in at_end("\nlink x {\n  alpha = 1 us\n  ")  # written already
    assert at_end("\nplan x {\n  allreduce = ") == {"ring", "tree", "one_shot", "two_shot", "auto"}
    assert at_end("\nplan x {\n  model = ") == {"llama3_70b"}
    assert at_end("\ngpu x {\n  memory = 80 G") == {"GB", "GiB", "Gb", "Gbit"}  # bits are sizes too
    assert at_end("\nplan x {\n  fsdp = ") == {"true", "false"}
    assert at_end("\npl") == {"plan"} and at_end("\np") >= {"plan", "policy"}
    assert "memory" in at_end("\nlink x {\n  alpha = h100.")


def test_diagnostics_are_ccost_checks(tmp_path):
    spec = tmp_path / "x.ccost"
    text = "link l { alpha = 2; bandwidth = 450 GB/s }\n"
    problems = F.diagnostics(text, str(spec))
    assert [(p.code, p.line, p.character) for p in problems] == [("E201", 0, 17)]
    assert "help:" in problems[0].message


def test_definition_across_imports_and_on_an_import_path(tmp_path):
    root, main = _project(tmp_path)
    text = main.read_text()
    path, span = F.definition(text, str(main), *_pos(text, "intra_node = fast", 14))
    assert Path(path) == root / "hw.ccost" and (span.line, span.column) == (1, 6)
    path, _ = F.definition(text, str(main), *_pos(text, '"std/models.ccost"', 3))
    assert path.endswith("models.ccost")
    assert F.definition(text, str(main), *_pos(text, "phase")) is None


def test_check_path_stays_light():
    """`ccost check` imports neither the language server nor shell completion (bench/check_speed.py)."""
    import subprocess

    probe = ("import sys, io, contextlib\nfrom ccost.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
             "    main(['check', 'specs/a1-tp-decode.ccost'])\n"
             "print(sorted(m for m in ('pygls', 'lsprotocol', 'argcomplete', 'cattrs') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------------------
# The TextMate grammar


def test_committed_textmate_grammar_is_in_step():
    from ccost.lsp import textmate

    committed = (REPO / "editors" / "vscode" / "syntaxes" / "ccost.tmLanguage.json").read_text(encoding="utf-8")
    assert committed == textmate.text(), ("editors/vscode/syntaxes/ccost.tmLanguage.json is stale: run "
                                          "`python -m ccost.lsp.textmate > editors/vscode/syntaxes/ccost.tmLanguage.json`")


def _tokenize(grammar: dict, line: str) -> list[tuple[str, str]]:
    """A small TextMate matcher (single-line `match` rules, as the generated grammar has): at each place
    the earliest match of any rule wins, ties to the rule listed first. Returns (text, scope) pairs."""
    repo = grammar["repository"]

    def rules(entry):
        if "include" in entry:
            yield from rules(repo[entry["include"][1:]])
        elif "patterns" in entry:
            for p in entry["patterns"]:
                yield from rules(p)
        else:
            yield entry

    flat = [r for p in grammar["patterns"] for r in rules(p)]
    out, pos = [], 0
    while pos < len(line):
        best = None
        for r in flat:
            m = re.compile(r["match"]).search(line, pos)
            if m and m.end() > m.start() and (best is None or m.start() < best[0].start()):
                best = (m, r)
        if best is None:
            break
        m, r = best
        if "name" in r:
            out.append((m.group(0), r["name"]))
        for k, cap in r.get("captures", {}).items():
            if m.group(int(k)) is not None:
                out.append((m.group(int(k)), cap["name"]))
        pos = m.end()
    return out


def test_textmate_grammar_scopes_a_spec_as_the_language_reads_it():
    grammar = json.loads((REPO / "editors" / "vscode" / "syntaxes" / "ccost.tmLanguage.json").read_text())
    toks = dict(_tokenize(grammar, 'link nvlink4 "NVLink 4" {'))
    assert toks["link"].startswith("keyword.declaration") and toks["nvlink4"] == "entity.name.type.ccost"
    assert toks['"NVLink 4"'] == "string.quoted.double.ccost"
    toks = _tokenize(grammar, "  bandwidth = 450 GB/s  # per direction")
    assert ("bandwidth", "variable.other.property.ccost") in toks
    assert ("450", "constant.numeric.ccost") in toks and ("GB/s", "keyword.other.unit.ccost") in toks
    assert ("# per direction", "comment.line.number-sign.ccost") in toks
    toks = _tokenize(grammar, "  allreduce = ring; tp = pow2(1, 8); x = h100.memory * 0.9")
    assert ("ring", "constant.language.enum.ccost") in toks and ("pow2", "support.function.builtin.ccost") in toks
    assert ("memory", "variable.other.property.ccost") in toks
    assert ("x", "invalid.illegal.unknown-field.ccost") in toks
    toks = dict(_tokenize(grammar, "plan tp8_tree extends tp8 {"))
    assert toks["tp8"] == "entity.other.inherited-class.ccost"


def test_vscode_extension_starts_ccost_lsp_with_the_generated_grammar():
    pkg = json.loads((REPO / "editors" / "vscode" / "package.json").read_text())
    grammar = pkg["contributes"]["grammars"][0]
    assert (REPO / "editors" / "vscode" / grammar["path"]).is_file()
    tm = json.loads((REPO / "editors" / "vscode" / grammar["path"]).read_text())
    assert grammar["scopeName"] == tm["scopeName"] and grammar["language"] == "ccost"
    assert pkg["contributes"]["languages"][0]["extensions"] == [".ccost"]
    props = pkg["contributes"]["configuration"]["properties"]
    assert props["ccost.server.command"]["default"] == "ccost" and props["ccost.server.args"]["default"] == ["lsp"]
    js = (REPO / "editors" / "vscode" / "extension.js").read_text()
    assert "vscode-languageclient/node" in js and 'config.get("server.args", ["lsp"])' in js
    assert "ccost[lsp]" not in js  # ccost is not on the package index: that command cannot work
    from ccost.cli import VERBS

    assert "lsp" in VERBS


def test_vscode_extension_is_a_bundled_package_with_a_licence_and_a_repository():
    """The manifest names its repository and licence, the licence text ships, the client
    is bundled (esbuild, vscode-languageclient inside) by the pinned tools that .ci/run uses to build the
    .vsix, and the .vsix holds nothing else."""
    import tomllib

    folder = REPO / "editors" / "vscode"
    pkg = json.loads((folder / "package.json").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert pkg["repository"]["type"] == "git" and pkg["repository"]["directory"] == "editors/vscode"
    assert pkg["license"] == project["license"]["text"] == "MIT"
    assert (folder / "LICENSE").read_text().startswith("MIT License\n")
    assert pkg["version"] == project["version"]
    # bundled: the manifest's entry point is the bundle of extension.js, with only `vscode` left outside
    assert pkg["main"] == "./dist/extension.js"
    assert "esbuild extension.js --bundle" in pkg["scripts"]["bundle"] and "--external:vscode" in pkg["scripts"]["bundle"]
    assert "--outfile=dist/extension.js" in pkg["scripts"]["bundle"]
    assert pkg["scripts"]["vscode:prepublish"] == "npm run bundle"
    assert pkg["scripts"]["package"].startswith("vsce package --no-dependencies")
    # pinned: exact versions in the manifest and the lock, so `npm ci` builds the same .vsix from empty caches
    lock = json.loads((folder / "package-lock.json").read_text())
    for name, version in {**pkg["dependencies"], **pkg["devDependencies"]}.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), (name, version)
        assert lock["packages"][f"node_modules/{name}"]["version"] == version, name
    assert "@vscode/vsce" in pkg["devDependencies"] and "esbuild" in pkg["devDependencies"]
    ignore = (folder / ".vscodeignore").read_text().split()
    assert ignore[ignore.index("**"):] == ["**", "!dist/extension.js", "!syntaxes/ccost.tmLanguage.json",
                                          "!language-configuration.json", "!package.json", "!README.md", "!LICENSE"]
    assert {"node_modules/", "dist/", "*.vsix"} <= set((folder / ".gitignore").read_text().split())
    ci = (REPO / ".ci" / "run").read_text()
    assert "npm ci" in ci and "npm run --silent package" in ci and 'npm_config_cache="$scratch/npm-cache"' in ci


def test_without_pygls_ccost_lsp_says_how_to_add_the_extra_to_this_installation(monkeypatch, capsys):
    """ccost is not on the package index, so `pip install 'ccost[lsp]'` cannot work. The
    help is this Python's pip installing the extra's requirements (read from ccost's metadata, and met by
    the pygls installed here), and for an editable install the checkout's `-e '.[lsp]'`."""
    import shlex
    from importlib.metadata import version

    from ccost.cli import main
    from ccost.extras import install_command

    commands = install_command("lsp")
    assert commands, "ccost's metadata names the lsp extra's requirements"
    argv = shlex.split(commands[-1])
    assert argv[:4] == [sys.executable, "-m", "pip", "install"]
    from packaging.requirements import Requirement

    [req] = [Requirement(a) for a in argv[4:]]
    assert req.name == "pygls" and req.specifier.contains(version("pygls"))
    monkeypatch.setitem(sys.modules, "pygls", None)  # as if the extra were not installed
    assert main(["lsp"]) == 2
    err = capsys.readouterr().err
    assert "E512" in err and "pip install 'ccost[lsp]'" not in err
    for c in commands:
        assert f"`{c}`" in err


# slow (starts pip, ~2 s): CI runs it; the test above checks the message in process
@pytest.mark.slow
def test_the_install_command_in_the_hint_is_one_pip_accepts():
    """Run the hint's pip command as printed (offline: --no-index), in this environment, where pygls is
    installed: pip must parse it and find the requirement met."""
    import shlex
    import subprocess

    from ccost.extras import install_command

    argv = shlex.split(install_command("lsp")[-1]) + ["--no-index", "--quiet"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
