"""Every command in the docs runs (issue 10, item 3).

The `sh` and `ccost` code blocks of README.md and docs/*.md are extracted and run, in order, in a
temporary copy of the repository (a git repository with two commits, so `HEAD~1` exists), or, for a page
that says so (`<!-- docs-test: ... plans repository of their own ... -->`, docs/git-workflow.md), in a new
git repository of its own whose branch is `main`. Conventions the docs follow:

- `<!-- file: PATH -->` before a `ccost` block: the block is that file; it is written there and must check
  clean. The other `ccost` blocks of a page are read as one spec (the language reference builds its
  examples on each other) and must check clean.
- In an `sh` block each line is a command; a trailing comment `(exit N)` says the command exits N (else
  0). The steps that set up Python — `python3 -m venv`, `. .venv/bin/activate`, `pip install`, and
  `python -m pytest` — are not run here: `.ci/run` runs README's two commands exactly as written, on an
  empty cache. Everything else (`ccost ...`, `git ...`) runs as written, with this test's ccost first on
  PATH.
- `pycon` blocks are Python sessions (docs/python.md): all of a page's, in order, are run as one doctest
  (`python -m doctest`) with this test's Python, after its commands, so what they show is what they print.
- `text` blocks are output shown, not commands (docs/git-workflow.md's diff output is checked against
  ccost by tests/test_diff.py).

docs/examples/ccost-ci.yml is run step by step in a plans repository with a pull-request branch: ccost is
installed from a wheel built from this checkout (the workflow's `CCOST_PACKAGE`), every `run:` step runs
as GitHub would run it (bash -e), except the one that posts to GitHub.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent  # the venv running the tests: its `ccost` goes first on PATH
SETUP = re.compile(r"^\s*(python3? -m venv\b|\. \S*activate\b|source \S*activate\b|pip install\b|"
                   r"python3? -m pip install\b|python3? -m pytest\b)")
EXIT = re.compile(r"\(exit (\d+)\)\s*$")
GIT_ENV = {"GIT_AUTHOR_NAME": "docs test", "GIT_AUTHOR_EMAIL": "docs@example.com",
           "GIT_COMMITTER_NAME": "docs test", "GIT_COMMITTER_EMAIL": "docs@example.com",
           "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass
class Block:
    lang: str
    text: str
    line: int  # where the block starts in its page
    file: str | None = None  # `<!-- file: PATH -->` before it


def blocks(page: Path) -> list[Block]:
    """Fenced code blocks of a Markdown page, indented ones (in list items) included."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i, marker = 0, None
    while i < len(lines):
        m = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        fm = re.match(r"^\s*<!-- file: (\S+) -->\s*$", lines[i])
        if fm:
            marker = fm.group(1)
        elif m:
            indent, lang = len(m.group(1)), m.group(2)
            body, j = [], i + 1
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
                j += 1
            out.append(Block(lang, "\n".join(body) + "\n", i + 1, marker))
            marker, i = None, j
        elif lines[i].strip():
            marker = None if not lines[i].lstrip().startswith("<!--") else marker
        i += 1
    return out


def commands(block: Block) -> list[tuple[str, int]]:
    """(command, expected exit status) for each line of an sh block, setup steps dropped."""
    out = []
    joined = block.text.replace("\\\n", " ")
    for line in joined.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = EXIT.search(line)
        expect = int(m.group(1)) if m else 0
        parts = [p.strip() for p in line.split("&&")]
        kept = [p for p in parts if not SETUP.match(p)]
        if kept:
            out.append((" && ".join(kept), expect))
    return out


def env_for(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(GIT_ENV)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(home)  # no user git config, no cache of the machine
    env["SOURCE_DATE_EPOCH"] = "1767225600"
    env.pop("CCOST_DEBUG", None)
    return env


def sh(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def copy_repository(dest: Path) -> None:
    """The repository's files (what git tracks and what it would track), without caches or venvs."""
    try:
        names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                                "--exclude-standard"], capture_output=True, check=True).stdout.decode()
        files = [n for n in names.split("\0") if n and (REPO / n).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        skip = {".git", ".venv", "review", "__pycache__", ".pytest_cache", ".hypothesis"}
        files = [str(p.relative_to(REPO)) for p in REPO.rglob("*")
                 if p.is_file() and not (set(p.relative_to(REPO).parts) & skip)]
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)


def git_repo(path: Path, env: dict[str, str]) -> None:
    for cmd in ("git init -q -b main", "git add -A", "git commit -q --allow-empty -m base",
                "git commit -q --allow-empty -m second"):
        r = sh(cmd, path, env)
        assert r.returncode == 0, (cmd, r.stderr)


def runs_in_plans_repository(page: Path) -> bool:
    return bool(re.search(r"<!-- docs-test:.*plans repository of their own", page.read_text(encoding="utf-8"),
                          flags=re.S))


def test_block_extraction():
    page = REPO / "docs" / "git-workflow.md"
    bs = blocks(page)
    assert [b.lang for b in bs][:3] == ["ccost", "sh", "sh"]
    assert bs[0].file == "specs/plan.ccost" and bs[0].text.startswith('import "std/gpus.ccost"\n')
    assert runs_in_plans_repository(page) and not runs_in_plans_repository(REPO / "README.md")
    readme = [b for b in blocks(REPO / "README.md") if b.lang == "sh"]
    first = commands(readme[0])
    assert first == [("ccost report specs/a1-tp-decode.ccost -o review/", 0)]  # the setup is .ci/run's
    assert ("ccost check --policy specs/llama3-70b-serving.ccost   # one plan fails (exit 1)", 1) \
        in commands(readme[1])


RUNNABLE = [p for p in DOCS if any(b.lang in ("sh", "ccost", "pycon") for b in blocks(p))]


def test_the_pages_with_commands():
    """Which pages have commands to run; the others (examples, interface, sources) are reference text."""
    assert {str(p.relative_to(REPO)) for p in RUNNABLE} == {"README.md", "docs/git-workflow.md",
                                                          "docs/language.md", "docs/editors.md", "docs/cost.md",
                                                          "docs/python.md"}


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(REPO)) for p in RUNNABLE])
def test_docs_code_blocks_run(page: Path, tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    env = env_for(home)
    work = tmp_path / "work"
    work.mkdir()
    if not runs_in_plans_repository(page):
        copy_repository(work)
    git_repo(work, env)
    bs = blocks(page)
    loose: list[str] = []
    ran = 0
    for b in bs:
        where = f"{page.relative_to(REPO)}:{b.line}"
        if b.lang == "ccost" and b.file:
            target = work / b.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b.text, encoding="utf-8")
            r = sh(f"ccost check {b.file}", work, env)
            assert r.returncode == 0, f"{where}: {b.file} does not check:\n{r.stderr}"
            ran += 1
        elif b.lang == "ccost":
            loose.append(b.text)
        elif b.lang == "sh":
            for cmd, expect in commands(b):
                r = sh(cmd, work, env)
                assert r.returncode == expect, (f"{where}: `{cmd}` exited {r.returncode}, the docs say "
                                                f"{expect}\nstdout:\n{r.stdout[-2000:]}\nstderr:\n{r.stderr[-2000:]}")
                assert "internal error" not in r.stderr and "Traceback" not in r.stderr, (where, cmd, r.stderr)
                ran += 1
    sessions = [b.text for b in bs if b.lang == "pycon"]
    if sessions:
        script = work / f"_docs_{page.stem}_python.txt"
        script.write_text("\n".join(sessions), encoding="utf-8")
        r = subprocess.run([sys.executable, "-m", "doctest", script.name], cwd=work, env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, f"{page.name}: its pycon blocks do not print what they show:\n{r.stdout[-4000:]}"
        ran += 1
    if loose:
        spec = work / f"_docs_{page.stem}.ccost"
        spec.write_text("\n".join(loose), encoding="utf-8")
        r = sh(f"ccost check {spec.name}", work, env)
        assert r.returncode == 0, f"{page.name}: its ccost blocks, read as one spec, do not check:\n{r.stderr}"
        ran += 1
    assert ran


# ---------------------------------------------------------------------------------------------------
# docs/examples/ccost-ci.yml, step by step, in a plans repository that is not ccost's

WORKFLOW = REPO / "docs" / "examples" / "ccost-ci.yml"


def _build_wheel(out: Path) -> Path:
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(REPO), "-w", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    [wheel] = out.glob("ccost-*.whl")
    return wheel


def _ci_venv(path: Path, env: dict[str, str]) -> Path:
    """A fresh virtual environment for the workflow's install step. Its dependencies are those of the
    environment running the tests (a .pth line), so the step itself runs exactly as written, without
    downloading lark, Pint or WeasyPrint again; PIP_NO_DEPS tells pip not to look for them."""
    r = subprocess.run([sys.executable, "-m", "venv", str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    purelib = Path(sysconfig.get_paths()["purelib"])
    site = next(path.glob("lib/python*/site-packages"))
    (site / "_test_dependencies.pth").write_text(str(purelib) + "\n")
    return path / "bin"


@pytest.mark.slow
def test_ci_workflow_runs_in_a_plans_repository(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    env = env_for(home)
    # The plans repository: origin with main; a clone with a pull-request branch, as actions/checkout leaves it.
    origin, work = tmp_path / "origin.git", tmp_path / "plans"
    seed = tmp_path / "seed"
    (seed / "specs").mkdir(parents=True)
    page_blocks = blocks(REPO / "docs" / "git-workflow.md")
    plan = next(b for b in page_blocks if b.file == "specs/plan.ccost")
    (seed / "specs" / "plan.ccost").write_text(plan.text, encoding="utf-8")
    wheel = _build_wheel(tmp_path / "wheel")
    (seed / "tools").mkdir()
    shutil.copy(wheel, seed / "tools" / wheel.name)
    for cmd in ("git init -q -b main", "git add -A", "git commit -q -m plans"):
        assert sh(cmd, seed, env).returncode == 0
    assert sh(f"git clone -q --bare {seed} {origin}", tmp_path, env).returncode == 0
    assert sh(f"git clone -q {origin} {work}", tmp_path, env).returncode == 0
    # The pull request: TP=8 → TP=4. The KV cache of 64 sequences of 8,192 tokens then takes each GPU to
    # 35.3 GB of weights + 42.9 GB of KV cache = 78.2 GB, over the 90 % of 80 GB: the gate must fail it.
    spec = work / "specs" / "plan.ccost"
    spec.write_text(spec.read_text().replace("tp        = 8", "tp        = 4"), encoding="utf-8")
    for cmd in ("git switch -q -c tp4", "git commit -q -am 'TP=4'"):
        assert sh(cmd, work, env).returncode == 0

    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    job = workflow["jobs"]["plans"]
    package = workflow["env"]["CCOST_PACKAGE"]
    assert package == f"tools/{wheel.name}", "the workflow's pinned wheel is not the one this version builds"
    venv_bin = _ci_venv(tmp_path / "ci-venv", env)
    env = dict(env, PATH=f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}", PIP_NO_DEPS="1",
               PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
               **{k: str(v) for k, v in workflow.get("env", {}).items()})
    github = {"github.base_ref": "main", "github.token": "not-used", "github.event.pull_request.number": "1"}
    outcomes: dict[str, int] = {}
    for step in job["steps"]:
        name = step.get("name") or step.get("uses")
        if "uses" in step:
            continue  # checkout and setup-python: done above (the clone, this Python)
        if "gh pr comment" in step["run"]:
            continue  # posts to GitHub: nothing to run it against here
        step_env = dict(env)
        for k, v in (step.get("env") or {}).items():
            step_env[k] = re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: github[m.group(1)], str(v))
        r = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=work, env=step_env, capture_output=True,
                           text=True, timeout=600)
        outcomes[name] = r.returncode
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, (name, r.stderr)
        if name != "Policy gate":
            assert r.returncode == 0, (name, r.stdout[-2000:], r.stderr[-2000:])
    assert set(outcomes) == {"Install ccost", "Specs are in canonical form", "Diff against the base branch",
                             "Policy gate"}
    installed = subprocess.run([str(venv_bin / "python"), "-c", "import ccost, sys; print(ccost.__file__)"],
                               capture_output=True, text=True, env=env)
    assert str(tmp_path / "ci-venv") in installed.stdout  # the wheel's ccost, not this checkout's
    diff = (work / "diff.md").read_text(encoding="utf-8")
    assert "<!-- ccost-diff -->" in diff and "| plan `tp8` | `tp` | 8 | 4 |" in diff
    assert "| `tp8` | memory per GPU | 39.11 GB | 78.23 GB |" in diff  # 17.6 + 21.5 GB → 35.3 + 42.9 GB
    assert (tmp_path / "summary.md").read_text(encoding="utf-8") == diff
    assert outcomes["Policy gate"] == 1  # 78.23 GB > 72 GB: the pull request is refused
