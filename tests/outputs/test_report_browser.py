"""report.html in a real headless browser (Debian's chromium): it renders, its script runs
and zooms into a 10 ms spike, the console stays empty, and no request leaves the machine.

Two ways of seeing a request: the page's Content-Security-Policy turns any attempt into a
console message, and chromium's net log lists every URL the page itself asked for (the
browser's own background traffic has no page origin and is left out). A control page that
does make requests proves both detectors see them.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import command_path

import herdsim
from herdsim.outputs.report import render
from herdsim.outputs.report.page import CSP

BROWSER = command_path("chromium")
pytestmark = [pytest.mark.slow, pytest.mark.requires("chromium")]
CONTROL = ('<!doctype html><html><head><script src="http://example.com/x.js"></script>'
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}"></head><body>'
           '<script>console.error("boom"); fetch("http://example.org/y").catch(()=>0);'
           "</script></body></html>")  # one request before the policy, one it blocks


def browse(page: Path, tmp: Path, *flags: str) -> tuple[str, list[str], list[str]]:
    """``(dom after scripts, console messages, URLs the page requested)``."""
    netlog = tmp / f"{page.stem}-net.json"
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp / 'profile'}", '--host-resolver-rules=MAP * ~NOTFOUND',
         "--enable-logging=stderr", "--v=0", f"--log-net-log={netlog}",
         "--virtual-time-budget=2000", *flags, page.as_uri() + "#zoom-spike"],
        capture_output=True, text=True, timeout=90, check=True)
    console = re.findall(r":CONSOLE[^\]]*\] (.*)", done.stderr)
    return done.stdout, console, page_requests(netlog)


def page_requests(netlog: Path) -> list[str]:
    """URLs a page started loading (not file: or data:), from chromium's net log."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params", {})
        url = params.get("url")
        ours = event["type"] == start and params.get("initiator") != "not an origin"
        if ours and url and not url.startswith(("file:", "data:")):
            urls.append(url)
    return urls


@pytest.fixture(scope="module")
def page(make_scenario, tmp_path_factory) -> Path:
    sc = herdsim.load_scenario(make_scenario(
        name="blip", duration="3s", workload={"rate": 100},
        downstream={"outages": [{"start": "1s", "duration": "500ms"}]}))
    c = herdsim.compare(sc, ["fixed", "full_jitter"], processes=1, progress=False)
    path = tmp_path_factory.mktemp("browser") / "report.html"
    path.write_text(render(c, kinds=("landing",)), encoding="utf-8")  # one figure: faster
    return path


def test_the_detectors_see_requests_and_console_errors(tmp_path):
    control = tmp_path / "control.html"
    control.write_text(CONTROL)
    _, console, requests = browse(control, tmp_path, "--dump-dom")
    assert any("boom" in line for line in console)
    assert any("Content Security Policy" in line for line in console)
    assert requests == ["http://example.com/x.js"]


def test_report_renders_offline_with_no_console_message(page, tmp_path):
    dom, console, requests = browse(page, tmp_path, "--dump-dom")
    assert console == []
    assert requests == []
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert 'data-ready="yes"' in body  # the script ran to its end
    view = [float(v) for v in re.search(r'data-view="([^"]+)"', body).group(1).split(",")]
    assert view[1] - view[0] <= 1.0 + 1e-9  # #zoom-spike: one second around the spike
    assert re.search(r'data-finest="0.01"', body)  # drawn from the 10 ms bins
    assert "Verdict" in dom


def test_report_without_its_policy_still_requests_nothing(page, tmp_path):
    """The CSP would hide an attempt; with it removed the net log must still be empty."""
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "",
                           page.read_text(encoding="utf-8")), encoding="utf-8")
    screenshot = tmp_path / "report.png"
    _, console, requests = browse(bare, tmp_path, "--window-size=1300,2400",
                                  f"--screenshot={screenshot}")
    assert requests == [] and console == []
    assert screenshot.stat().st_size > 10_000


FITS = """<script>
window.addEventListener("load", () => {
  const out = [];  // every table cell that ends beyond the window or its table's box
  for (const table of document.querySelectorAll("table")) {
    if (table.scrollWidth > table.clientWidth + 1) out.push("scrolls");
    for (const cell of table.querySelectorAll("th, td")) {
      if (cell.getBoundingClientRect().right > window.innerWidth) out.push(cell.textContent);
    }
  }
  document.body.dataset.tables = document.querySelectorAll("table").length;
  document.body.dataset.hidden = out.length ? out.join("|") : "none";
});
</script>"""


@pytest.mark.parametrize(("width", "media"), [(1400, "screen"), (720, "print")])
def test_every_key_number_of_eight_arms_is_in_sight_on_screen_and_in_print(
        make_scenario, tmp_path, width, media):
    """Eight arms with long labels: every cell of the key-numbers tables (latency last;
    the page has no other table here) ends inside the window and its table's box, at
    1,400 px, and at A4's printable width (720 px at 96 dpi) with the print style sheet
    applied to the screen."""
    sc = herdsim.load_scenario(make_scenario(
        name="eight", duration="3s", downstream={"outages": [{"start": "1s",
                                                              "duration": "500ms"}]}))
    c = herdsim.compare(sc, ["fixed", "exponential", "full_jitter", "equal_jitter"],
                        vary={"retry.base": ["50ms", "100ms"]}, processes=1, progress=False)
    assert len(c.arms) == 8
    text = render(c, kinds=())
    if media == "print":
        text = text.replace("@media print {", "@media all {")
    page = tmp_path / "eight.html"
    page.write_text(text.replace("</body>", FITS + "</body>"), encoding="utf-8")
    dom, console, _ = browse(page, tmp_path, "--dump-dom", f"--window-size={width},2000")
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert console == []
    assert int(re.search(r'data-tables="(\d+)"', body).group(1)) >= 1  # the key numbers
    assert 'data-hidden="none"' in body, re.search(r'data-hidden="([^"]*)"', body).group(1)
