"""`numasim report`: one self-contained page, loaded in headless Chromium, where every
image must decode (naturalWidth > 0) and the comparison tables must be present."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import SMALL_NUMA02, numasim_cli
from numasim import storage
from numasim.repeat import run_iterations
from numasim.report import write_report
from numasim.scenario import scenario_toml

ROOT = Path(__file__).resolve().parent.parent

# written into the page by the test (not part of the report): what the browser sees
PROBE = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var r = {images: imgs.length,
           decoded: imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length,
           widths: imgs.map(function (i) { return i.naturalWidth; }),
           tables: Array.prototype.map.call(document.querySelectorAll('table.mmtests'),
                                            function (t) { return t.dataset.section; }),
           amean_rows: Array.prototype.filter.call(document.querySelectorAll('table.mmtests tr th:first-child'),
                                                   function (th) { return th.textContent === 'Amean'; }).length,
           scenarios: document.querySelectorAll('#scenarios ~ h3').length};
  var out = document.createElement('pre');
  out.id = 'numasim-probe';
  out.textContent = JSON.stringify(r);
  document.body.appendChild(out);
});
</script>"""


def chromium():
    """Path of chromium; installs it through the project's own setup if missing
    (scripts/system-deps.sh, as `make system-deps`); None if that is impossible."""
    exe = shutil.which("chromium")
    if exe is None:
        subprocess.run(["bash", str(ROOT / "scripts" / "system-deps.sh"), str(ROOT / "system-packages.txt")],
                       capture_output=True, text=True, timeout=900)
        exe = shutil.which("chromium")
    return exe


def browser_probe(exe, page: Path, tmp_path: Path) -> dict:
    probed = page.with_name("probe.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    p = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=15000",
         "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=180)
    m = re.search(r'<pre id="numasim-probe">(.*?)</pre>', p.stdout, re.S)
    assert m, f"the page did not finish loading in chromium (rc={p.returncode}): {p.stderr[-2000:]}"
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    d = tmp_path_factory.mktemp("results")
    for bal in ("off", "on"):
        text = scenario_toml(SMALL_NUMA02, balancing=bal, overrides={"run.placement_interval_ms": 100})
        storage.save_iterations(run_iterations(text, 2), d / bal, scenario_text=text)
    return d


def test_report_page_is_self_contained(groups, tmp_path):
    p = numasim_cli("report", groups / "off", groups / "on", "--out", tmp_path / "rep", "--title", "off vs on")
    assert p.returncode == 0, p.stderr
    page = tmp_path / "rep" / "index.html"
    assert p.stdout.strip() == str(page)
    html = page.read_text(encoding="utf-8")
    srcs = re.findall(r'<img src="([^"]*)"', html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not re.search(r'(src|href)="(https?:|file:|/)', html)  # nothing outside the page
    assert "<title>off vs on</title>" in html
    assert html.count('class="mmtests"') == 3
    assert "numa_balancing = false" in html and "numa_balancing = true" in html  # the scenarios
    # the table cells carry mmtests' numbers: the same as `numasim compare`
    cmp = numasim_cli("compare", groups / "off", groups / "on")
    amean = next(l for l in cmp.stdout.splitlines() if l.startswith("Amean") and "syst-" in l)
    pct = re.search(r"[(*]\s*(-?\d+\.\d+%)[)*]\s*$", amean).group(1)
    assert pct in html


def test_report_loads_in_headless_chromium(groups, tmp_path):
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed and scripts/system-deps.sh could not install it "
                    "(no apt-get, or neither root nor password-less sudo)")
    page = write_report(storage.load_columns([groups / "off", groups / "on"]), tmp_path / "rep")
    r = browser_probe(exe, page, tmp_path)
    # per test: one rates plot, and per column memory, tasks and placement
    assert r["images"] == 1 + 2 * 3, r
    assert r["decoded"] == r["images"] and min(r["widths"]) > 0, r
    assert r["tables"] == ["autonumabench: NUMA02", "Duration (all runs of the column)",
                           "vmstat (summed over all runs of the column)"], r
    assert r["amean_rows"] == 2  # syst- and elsp-NUMA02
    assert r["scenarios"] == 2


def test_broken_image_is_detected(groups, tmp_path):
    """The probe itself: a page with a corrupt data URI reports it undecoded."""
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed and could not be installed")
    page = tmp_path / "bad" / "index.html"
    page.parent.mkdir()
    page.write_text('<!DOCTYPE html><html><body><img src="data:image/png;base64,AAAA"></body></html>')
    r = browser_probe(exe, page, tmp_path)
    assert r["images"] == 1 and r["decoded"] == 0
