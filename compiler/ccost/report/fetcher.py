"""The PDF renderer's only way to load a resource: nothing from the network or the file system.

Principle (docs/architecture.md): specs are untrusted input. Titles and sources are escaped by the templates,
so a spec cannot inject an ``<img>`` or a stylesheet link; this fetcher is the second wall. The review embeds
its CSS and SVG inline, so the only URLs it may load are ``data:`` URIs. Everything else raises
``BlockedFetch``, which derives from WeasyPrint's ``FatalURLFetchingError``: with an ordinary exception
WeasyPrint would only log the refusal and render on (STYLE.md), hiding a template bug or an injection.
"""

from __future__ import annotations

from weasyprint.urls import FatalURLFetchingError, URLFetcher


class BlockedFetch(FatalURLFetchingError):
    """The review tried to load something other than a ``data:`` URI."""

    def __init__(self, url: str):
        self.url = url
        super().__init__(f"the review may load only data: URIs, not {url[:200]!r}")


class DataOnlyFetcher(URLFetcher):
    """A WeasyPrint ``URLFetcher`` (the v68+ API) that serves ``data:`` URIs and refuses everything else.

    ``requested`` records every URL asked for, in order, so tests (and callers) can see what was tried.
    """

    def __init__(self) -> None:
        super().__init__(allowed_protocols=("data",), allow_redirects=False, fail_on_errors=True)
        self.requested: list[str] = []

    def fetch(self, url, headers=None):
        self.requested.append(url)
        if not url.lower().startswith("data:"):
            raise BlockedFetch(url)
        return super().fetch(url, headers)
