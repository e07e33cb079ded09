"""Suite-wide settings.

``python -m pytest`` with no paths (README's command 2, what CI runs) spreads the whole suite over one worker
process per core when pytest-xdist is installed (the ``test`` extra has it): on a 2-core machine that halves
the wall time. Naming tests (``python -m pytest tests/test_x.py``), passing ``-n``/``-p no:xdist``, or
setting ``CCOST_TEST_PROCESSES=1`` runs them in this process (``tests/README.md``).

ccost's cache (the parser's tables, ``ccost.report.chart_cache``'s charts and templates) goes to a folder
of this run, never the user's ``~/.cache``: tests must not read charts a previous run (or another checkout
with other chart code) left there.
"""

import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The whole suite on one process per core (before xdist reads ``-n``; see the docstring above)."""
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if config.option.numprocesses is not None or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return  # the user chose the processes, or named the tests to run
    if config.getoption("usepdb", False) or config.option.collectonly:
        return
    wanted = os.environ.get("CCOST_TEST_PROCESSES", "auto")
    config.option.numprocesses = "auto" if wanted == "auto" else int(wanted)


def pytest_addoption(parser):
    parser.addoption(
        "--update-expectations", action="store_true", default=False,
        help="rewrite the inline `# E:` / `# W:` comments of tests/bad/*.ccost from ccost check's actual "
             "output (tests/test_bad_corpus.py), then pass; read the diff before committing it",
    )


@pytest.fixture(autouse=True, scope="session")
def _private_chart_cache(tmp_path_factory):
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old
