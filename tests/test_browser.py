"""The HTML review seen in a real browser.

The A1 review (`ccost report specs/a1-tp-decode.ccost --format html`) is opened in headless Chromium at
1280 px and 390 px wide, driven through the DevTools protocol over `--remote-debugging-pipe` (NUL-separated
JSON on file descriptors 3 and 4: no websocket, no extra package). At each width:

- the page does not overflow horizontally (a wide table may scroll inside its own box, not the page);
- every table and chart has a size and is displayed;
- nothing is requested but the file itself and `data:` URIs;
- no console message, exception or error log entry.

A screenshot of each width is kept in the test's tmp output (`a1-1280.png`, `a1-390.png`) for a person to
look at. A control copy of the review with one table made too wide must fail the same check.

Debian's `chromium` (installed by `.ci/run` when absent); the test skips, saying so, only when no Chromium
binary is found.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = next((p for p in (os.environ.get("CCOST_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium",
                             shutil.which("chromium-browser"), shutil.which("google-chrome"))
                 if p and os.path.exists(p)), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
         "--disable-extensions", "--mute-audio", "--hide-scrollbars"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary on this machine (Debian: "
                                 "apt-get install chromium; .ci/run installs it)")]

# Runs in the page after load: what overflows, what is hidden. A table wider than the page is allowed
# only inside a box that scrolls horizontally and itself fits.
PROBE = r"""
(() => {
  const W = document.documentElement.clientWidth;
  const out = {width: W, scrollWidth: document.documentElement.scrollWidth, hidden: [], outside: [],
               tables: 0, charts: 0};
  const scrollsInside = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const s = getComputedStyle(p);
      if ((s.overflowX === "auto" || s.overflowX === "scroll") && p.getBoundingClientRect().right <= W + 1)
        return true;
    }
    return false;
  };
  const check = (el, label) => {
    const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    if (r.width <= 0 || r.height <= 0 || s.display === "none" || s.visibility === "hidden")
      out.hidden.push(label);
    if ((r.left < -1 || r.right > W + 1) && !scrollsInside(el))
      out.outside.push(label + " spans " + Math.round(r.left) + ".." + Math.round(r.right) + " px");
  };
  const tables = document.querySelectorAll("table");
  tables.forEach((t, i) => check(t, "table " + i + " (" + t.className + ")"));
  const charts = document.querySelectorAll("figure.chart svg");
  charts.forEach((c, i) => check(c, "chart " + i));
  out.tables = tables.length; out.charts = charts.length;
  return out;
})()
"""


class Chromium:
    """Headless Chromium on a DevTools pipe: ``call(method, params, session)`` returns the result; events
    are kept in ``events``."""

    def __init__(self, profile: Path, log: Path):
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        # bash puts the pipe ends on fds 3 and 4, where --remote-debugging-pipe expects them
        script = f'exec "$0" "$@" 3<&{cmd_r} 4>&{res_w}'
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            ["bash", "-c", script, CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
             "about:blank"],
            pass_fds=(cmd_r, res_w), stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._res_r], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60) -> dict:
        for e in self.events:
            if e.get("method") == method:
                return e
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            e = self._read(deadline - time.monotonic())
            self.events.append(e)
            if e.get("method") == method:
                return e
        raise TimeoutError(method)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)
        os.close(self._res_r)
        self._log.close()


def look_at(html: Path, width: int, tmp: Path, name: str) -> dict:
    """Open ``html`` at ``width`` px; the probe's findings plus requests, console and errors; a screenshot
    at ``tmp/<name>-<width>.png``."""
    browser = Chromium(tmp / f"profile-{name}-{width}", tmp / f"chromium-{name}-{width}.log")
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            browser.call(f"{domain}.enable", session=s)
        browser.call("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600}, session=s)
        browser.call("Page.navigate", {"url": html.as_uri()}, session=s)
        browser.wait_for("Page.loadEventFired")
        found = browser.call("Runtime.evaluate", {"expression": PROBE, "returnByValue": True},
                             session=s)["result"]["value"]
        size = browser.call("Page.getLayoutMetrics", session=s)["cssContentSize"]
        shot = browser.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": min(size["height"], 12000), "scale": 1}},
            session=s)
        (tmp / f"{name}-{width}.png").write_bytes(base64.b64decode(shot["data"]))
        ev = [e for e in browser.events if e.get("sessionId") == s]
        found["requests"] = [e["params"]["request"]["url"] for e in ev if e["method"] == "Network.requestWillBeSent"]
        found["console"] = [f"{e['params']['type']}: " + " ".join(str(a.get("value", a.get("description", "")))
                                                             for a in e["params"]["args"])
                            for e in ev if e["method"] == "Runtime.consoleAPICalled"]
        found["exceptions"] = [e["params"]["exceptionDetails"].get("text", "") for e in ev
                               if e["method"] == "Runtime.exceptionThrown"]
        found["log_errors"] = [e["params"]["entry"].get("text", "") for e in ev
                               if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"]
        return found
    finally:
        browser.close()


def problems(found: dict, page: Path) -> list[str]:
    out = []
    if found["scrollWidth"] > found["width"] + 1:
        out.append(f"the page is {found['scrollWidth']} px wide in a {found['width']} px window")
    out += [f"outside the page: {x}" for x in found["outside"]]
    out += [f"not visible: {x}" for x in found["hidden"]]
    out += [f"fetched: {u}" for u in found["requests"] if u != page.as_uri() and not u.startswith("data:")]
    out += [f"console {x}" for x in found["console"]]
    out += [f"exception: {x}" for x in found["exceptions"]]
    out += [f"error: {x}" for x in found["log_errors"]]
    return out


@pytest.fixture(scope="module")
def a1_html(tmp_path_factory) -> Path:
    from ccost.cli import main

    out = tmp_path_factory.mktemp("review")
    old = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = "1767225600"
    try:
        assert main(["report", str(REPO / "specs" / "a1-tp-decode.ccost"), "-o", f"{out}/", "--format", "html",
                     "--no-git"]) == 0
    finally:
        if old is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = old
    return out / "a1-tp-decode.html"


@pytest.mark.parametrize("width", [1280, 390])
def test_a1_review_in_a_browser(a1_html: Path, width: int, tmp_path: Path):
    found = look_at(a1_html, width, tmp_path, "a1")
    assert found["width"] == width  # the emulated viewport, not Chromium's minimum window
    assert found["tables"] >= 15 and found["charts"] >= 3  # A1: inputs, plans, checklists; sweep and compare
    assert problems(found, a1_html) == []
    assert (tmp_path / f"a1-{width}.png").stat().st_size > 10_000


def test_a_table_too_wide_for_the_page_is_caught(a1_html: Path, tmp_path: Path):
    """The control: the same review with one table that cannot shrink (no wrapper that scrolls) fails."""
    html = a1_html.read_text(encoding="utf-8")
    wide = ('<table class="data" style="width:1800px"><tr><td style="white-space:nowrap">'
            + "wide " * 40 + "</td></tr></table>")
    broken = tmp_path / "a1-wide.html"
    broken.write_text(html.replace('<section class="chapter" id="summary">',
                                   wide + '<section class="chapter" id="summary">', 1), encoding="utf-8")
    found = look_at(broken, 1280, tmp_path, "a1-wide")
    said = problems(found, broken)
    assert any(p.startswith("the page is") for p in said), said
    assert any("outside the page: table 1" in p for p in said), said


def test_a_fetch_and_a_console_error_are_caught(a1_html: Path, tmp_path: Path):
    html = a1_html.read_text(encoding="utf-8")
    broken = tmp_path / "a1-fetch.html"
    broken.write_text(html.replace("</body>", '<img src="http://example.invalid/x.png">'
                                   '<script>console.error("boom")</script></body>', 1), encoding="utf-8")
    said = problems(look_at(broken, 1280, tmp_path, "a1-fetch"), broken)
    assert "fetched: http://example.invalid/x.png" in said, said
    assert any(p.startswith("console error: boom") for p in said), said
