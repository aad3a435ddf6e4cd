"""The anywidget classes: a changed trait (what a click or a control sends) redraws the
view from lowprec's numbers, and the display carries the same view as text/html."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

import lowprec as lp

pytest.importorskip("anywidget")
import lowprec.widgets as w


def role(markup: str, name: str) -> str:
    m = re.search(rf'data-role="{re.escape(name)}">([^<]*)<', markup)
    assert m, f"no data-role {name!r}"
    return m.group(1)


def test_bits_click_and_typed_value():
    b = w.bits("bf16", 0x3dcd)
    b.pattern ^= 1 << 15                        # the sign bit, as a click sends it
    assert float(role(b.html, "value")) == float(lp.decode(0xbdcd, "bf16"))
    b.value = "0.1"
    assert b.pattern == int(lp.encode(lp.round(0.1, "bf16"), "bf16"))
    for mode in ("rne", "rz", "ru"):
        assert int(role(b.html, f"encoded-{mode}"), 16) == int(
            lp.encode(lp.round(0.1, "bf16", mode), "bf16"))
    b.value = "not a number"
    assert "encoded-" not in b.html


def test_rounding_mode_and_x():
    r = w.rounding(0.1, "e4m3")
    for mode in ("rne", "rz", "ru", "rd", "rna", "ro"):
        r.mode = mode
        assert float(role(r.html, "chosen")) == float(lp.round(0.1, "e4m3", mode))
    r.x = 300.0
    assert float(role(r.html, "chosen")) == float(lp.round(300.0, "e4m3", "ro"))


def test_block_rule_tensor_core_model_and_summation_n():
    values = [0.5, 3.0, 957.0]
    b = w.block(values)
    for rule in ("floor", "ceil"):
        b.rule = rule
        q = lp.mx.quantize(values, "mxfp8_e4m3", scale_rule=rule)
        assert float(role(b.html, "scale")) == float(q.scales[0])
    t = w.tensor_core([1.0, 1.0, 1.0, 1.0], [1.0, 2.0**-24, 2.0**-24, 2.0**-24], "v100")
    for model in ("v100", "a100", "h100"):
        t.model = model
        want = lp.matmul([[1.0] * 4], [[1.0], [2.0**-24], [2.0**-24], [2.0**-24]],
                         model=model, in_fmt="fp16")[0, 0]
        assert float(role(t.html, "result")) == float(want)
    s = w.summation([0.1] * 64, "fp16")
    s.n = 7
    assert float(role(s.html, "sum-pairwise")) == float(
        lp.sum(lp.round([0.1] * 7, "fp16"), "fp16", order="pairwise"))


def test_display_carries_the_static_view():
    b = w.bits("e4m3", 0x1c)
    data, _ = b._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/html"] == b.static() == b.html


# -- in a real browser ---------------------------------------------------------------------
# Headless Chromium (Debian's chromium and chromium-driver, driven by selenium) opens a
# notebook served by a local Jupyter server, changes a control and reads the new value,
# which the test checks against lowprec's own API. With LOWPREC_SCREENSHOTS=DIR it also
# saves a screenshot of each widget and of the lp.explain card, in JupyterLab's light
# and dark themes.

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKEN = "lowprec-browser-test"
CELLS = [
    "import lowprec as lp\nimport lowprec.widgets as w",
    "w.bits('bf16', 0x3dcd)",
    "w.rounding(0.1, 'e4m3', 'rne')",
    "w.block([0.1, 1.0, 2.0, 957.0], 'mxfp8_e4m3')",
    "w.tensor_core([1.0, 1.0, 1.0, 1.0], [1.0, 2.0**-24, 2.0**-24, 2.0**-24], 'v100')",
    "w.summation([0.1] * 2000, 'fp16', 2000)",
    "lp.explain(0.1, 'bf16')",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _browser():
    """selenium's webdriver and the chromium and chromedriver paths, or a skip naming
    what is missing (a failure where .ci/run's browser step sets
    LOWPREC_REQUIRE_BROWSER=1)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    missing = [name for name, ok in (("chromium", chromium), ("chromedriver", driver))
               if not ok]
    for module in ("selenium", "notebook"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        why = (f"no {', '.join(missing)} (apt-get install chromium chromium-driver; "
               "pip install selenium notebook)")
        if os.environ.get("LOWPREC_REQUIRE_BROWSER") == "1":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    from selenium import webdriver
    return webdriver, chromium, driver


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    webdriver, chromium, chromedriver = _browser()
    work = tmp_path_factory.mktemp("browser")
    cells = [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [],
              "execution_count": None} for c in CELLS]
    (work / "widgets.ipynb").write_text(json.dumps(
        {"cells": cells, "metadata": {"kernelspec": {"name": "python3",
                                                     "display_name": "Python 3",
                                                     "language": "python"}},
         "nbformat": 4, "nbformat_minor": 5}))
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    server = subprocess.Popen(
        [sys.executable, "-m", "notebook", "--no-browser", f"--port={port}",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={work}",
         "--expose-app-in-browser", "--ServerApp.ip=127.0.0.1", "--allow-root"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1200,1000"):
        options.add_argument(arg)
    driver = None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("the Jupyter server did not start in 60 s")
                time.sleep(0.5)
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait
        driver = webdriver.Chrome(service=webdriver.ChromeService(chromedriver), options=options)
        driver.get(f"http://127.0.0.1:{port}/notebooks/widgets.ipynb?token={TOKEN}")
        wait = WebDriverWait(driver, 90, poll_frequency=0.3)
        wait.until(lambda d: d.execute_script(
            "const a = window.jupyterapp; return !!(a && a.shell && a.shell.currentWidget"
            " && a.shell.currentWidget.sessionContext && a.shell.currentWidget"
            ".sessionContext.session && a.shell.currentWidget.sessionContext.session"
            ".kernel && a.shell.currentWidget.sessionContext.session.kernel.status"
            " === 'idle')"))
        driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-role]")) >= 10)
        # Each widget's live view draws its controls; a click before that (on a
        # loaded machine) would meet no handler and be lost.
        wait.until(lambda d: all(_output(d, i).find_elements(By.CSS_SELECTOR,
                                                             "[data-control]")
                                 for i in range(1, 6)))
        yield driver, wait
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.wait(timeout=30)


def _output(driver, i):
    from selenium.webdriver.common.by import By

    """The output area of the notebook's i-th widget (in `CELLS` order, from 1)."""
    return driver.find_elements(By.CSS_SELECTOR, ".jp-Cell")[i].find_element(
        By.CSS_SELECTOR, ".jp-OutputArea")


def _page_role(area, role):
    # Read in the page: a redraw replaces the view's elements, never the output area.
    return area.parent.execute_script(
        "const e = arguments[0].querySelector(arguments[1]); return e && e.textContent",
        area, f'[data-role="{role}"]')


def _changed(wait, area, role, want):
    wait.until(lambda d: _page_role(area, role) == want)
    return _page_role(area, role)


@pytest.mark.slow
def test_in_a_browser_widgets_answer_clicks_and_controls_with_lowprecs_numbers(page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    driver, wait = page
    bits = _output(driver, 1)
    assert _page_role(bits, "value") == str(float(lp.decode(0x3dcd, "bf16")))
    bits.find_element(By.CSS_SELECTOR, '[data-bit="15"]').click()          # the sign bit
    assert _changed(wait, bits, "value", "-0.10009765625") == \
        str(float(lp.decode(0xbdcd, "bf16")))

    rounding = _output(driver, 2)
    Select(rounding.find_element(By.CSS_SELECTOR, '[data-control="mode"]')
           ).select_by_value("rz")
    assert float(_changed(wait, rounding, "chosen", "0.09375")) == \
        float(lp.round(0.1, "e4m3", "rz"))

    block = _output(driver, 3)
    Select(block.find_element(By.CSS_SELECTOR, '[data-control="rule"]')
           ).select_by_value("floor")          # from the default rceil's 4 to 2
    q = lp.mx.quantize([0.1, 1.0, 2.0, 957.0], "mxfp8_e4m3", scale_rule="floor")
    assert float(_changed(wait, block, "scale", repr(float(q.scales[0])))) == q.scales[0]

    tc = _output(driver, 4)
    Select(tc.find_element(By.CSS_SELECTOR, '[data-control="model"]')).select_by_value("a100")
    want = lp.matmul([[1.0] * 4], [[1.0], [2.0**-24], [2.0**-24], [2.0**-24]],
                     model="a100", in_fmt="fp16")[0, 0]
    assert float(_changed(wait, tc, "result", repr(float(want)))) == want

    summation = _output(driver, 5)
    slider = summation.find_element(By.CSS_SELECTOR, '[data-control="n"]')
    driver.execute_script("arguments[0].value = 100; arguments[0].dispatchEvent("
                          "new Event('change'))", slider)
    want = lp.sum(lp.round([0.1] * 100, "fp16"), "fp16", order="sequential")
    assert float(_changed(wait, summation, "sum-sequential", repr(float(want)))) == want

    shots = os.environ.get("LOWPREC_SCREENSHOTS")
    if shots:
        out = pathlib.Path(shots)
        out.mkdir(parents=True, exist_ok=True)
        names = ["bits", "rounding", "block", "tensor_core", "summation", "explain"]
        for theme, label in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
            driver.execute_script("return window.jupyterapp.commands.execute("
                                  "'apputils:change-theme', {theme: arguments[0]})", theme)
            time.sleep(2)
            for i, name in enumerate(names, start=1):
                area = _output(driver, i)
                driver.execute_script("arguments[0].scrollIntoView()", area)
                area.screenshot(str(out / f"{name}-{label}.png"))
