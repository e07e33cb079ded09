"""Suite-wide settings.

ccost's cache (the parser's tables, ``ccost.report.chart_cache``'s charts and templates) goes to a folder
of this run, never the user's ``~/.cache``: tests must not read charts a previous run (or another checkout
with other chart code) left there.
"""

import os

import pytest


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
