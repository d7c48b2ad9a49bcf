"""The report page of a real pendulum run in headless Chromium: no console errors, the hover read-out works, and
the screenshot shows the charts. Skipped (with the reason) only when no Chromium can be found or started
(Debian: ``apt-get install chromium``). ``RLCORE_REPORT_SCREENSHOT=<file.png>`` keeps a copy of the screenshot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from rlcore.report import cli
from rlcore.report import page as report_page
from rlcore.report.diagnosis import load_scalars

pytestmark = pytest.mark.slow  # starts a headless browser on a trained run's report

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
CONSOLE = re.compile(r"CONSOLE[:(]\d+")  # how Chromium's --enable-logging=stderr reports a console message


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    """``run(url, *flags) -> CompletedProcess`` of a headless Chromium, or a skip saying why there is none."""
    binary = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if binary is None:
        pytest.skip(f"no Chromium found (looked for {', '.join(BROWSERS)}; Debian: apt-get install chromium)")
    profile = tmp_path_factory.mktemp("chromium-profile")

    def run(url: str, *flags: str) -> subprocess.CompletedProcess:
        cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
               *flags, url]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=90)

    probe = tmp_path_factory.mktemp("probe") / "probe.html"
    probe.write_text('<html><body><p id="x">ok</p></body></html>')
    try:
        proc = run(probe.as_uri(), "--dump-dom")
    except (OSError, subprocess.TimeoutExpired) as err:
        pytest.skip(f"Chromium ({binary}) cannot be started: {err}")
    if proc.returncode != 0 or 'id="x"' not in proc.stdout:
        pytest.skip(f"Chromium ({binary}) cannot be started: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return run


def console_messages(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if CONSOLE.search(line)]


@pytest.fixture(scope="module")
def pendulum_page(pendulum_run) -> str:
    out, _ = cli.write_report([str(pendulum_run)])
    return out


def test_console_errors_are_seen(chromium, tmp_path):
    """The check below can fail: a page with a script error is reported on stderr."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    messages = console_messages(chromium(bad.as_uri(), "--dump-dom"))
    assert any("Uncaught ReferenceError" in m for m in messages), messages


def test_page_loads_without_console_errors_and_hover_shows_values(chromium, pendulum_page, pendulum_run, tmp_path):
    proc = chromium(f"file://{pendulum_page}", "--dump-dom", "--window-size=1400,1000")
    assert console_messages(proc) == []
    assert '<body data-ready="1">' in proc.stdout  # the page's script ran to its end
    # Move the mouse to the middle of the return chart (iteration 2 of 0..4): the read-out shows its value.
    page = open(pendulum_page).read()
    middle = (report_page.LEFT + report_page.RIGHT) / 2 / report_page.W
    probe = (f"<script>var s=document.querySelector('#{report_page._anchor('Episode/mean_return')} svg');"
             "var r=s.getBoundingClientRect();s.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,"
             f"clientX:r.left+r.width*{middle},clientY:r.top+r.height/2}}));</script>")
    hovered = tmp_path / "hovered.html"
    hovered.write_text(page.replace("</body>", probe + "</body>"))
    proc = chromium(hovered.as_uri(), "--dump-dom", "--window-size=1400,1000")
    assert console_messages(proc) == []
    tip = re.search(r'<div id="tip"([^>]*)>(.*?)</div></div>', proc.stdout, re.S)
    assert tip and "hidden" not in tip.group(1), proc.stdout[-2000:]
    assert "<b>iteration 2</b>" in tip.group(2)
    shown = float(re.search(r"pendulum: ([-+0-9.e]+)", tip.group(2)).group(1))
    expected = dict(load_scalars(str(pendulum_run))["Episode/mean_return"])[2]
    assert shown == pytest.approx(expected, rel=1e-4)


def test_screenshot_shows_the_report(chromium, pendulum_page, tmp_path):
    from PIL import Image

    def shoot(url: str, name: str) -> np.ndarray:
        png = tmp_path / name
        proc = chromium(url, f"--screenshot={png}", "--window-size=1400,2000")
        assert png.is_file(), proc.stderr[-2000:]
        image = Image.open(png).convert("RGB")
        assert image.size == (1400, 2000)
        return np.asarray(image).astype(np.float64)

    blank = tmp_path / "blank.html"
    blank.write_text("<html><body></body></html>")
    assert shoot(blank.as_uri(), "blank.png").std() < 1.0  # the control: a blank page is seen as blank
    pixels = shoot(f"file://{pendulum_page}", "report.png")
    ink = (pixels.min(axis=2) < 200).mean()  # share of pixels that are not (near) white
    assert pixels.std() > 10.0 and 0.01 < ink < 0.6, (pixels.std(), ink)
    blue = np.abs(pixels - np.array([0x1F, 0x77, 0xB4])).max(axis=2) < 40  # the run's curve colour
    assert blue.sum() > 300, blue.sum()
    if os.environ.get("RLCORE_REPORT_SCREENSHOT"):
        shutil.copy(tmp_path / "report.png", os.environ["RLCORE_REPORT_SCREENSHOT"])
