"""The widgets in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by selenium) opens a notebook served by a local Jupyter
server, changes a control, and reads the new value, which the test checks against
lowprec's own API. Skipped, naming what is missing, where any of these is not there.

With ``LOWPREC_SCREENSHOTS=DIR`` the test also saves a screenshot of each widget, in
JupyterLab's light and dark themes, and of the ``lp.explain`` card.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

import pytest

import lowprec as lp

pytest.importorskip("anywidget")
pytest.importorskip("notebook", reason="the browser test serves a notebook (notebook>=7)")
webdriver = pytest.importorskip("selenium.webdriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if not (CHROMIUM and DRIVER):
    why = "no chromium and chromedriver (apt-get install chromium chromium-driver)"
    # .ci/run's browser step sets LOWPREC_REQUIRE_BROWSER=1: there a skip is a failure.
    if os.environ.get("LOWPREC_REQUIRE_BROWSER") == "1":
        pytest.fail(why, pytrace=False)
    pytest.skip(why, allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

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


@pytest.fixture(scope="module")
def page(tmp_path_factory):
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
    options.binary_location = CHROMIUM
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
        driver = webdriver.Chrome(service=webdriver.ChromeService(DRIVER), options=options)
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
        yield driver, wait
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.wait(timeout=30)


def _output(driver, i):
    """The output area of the notebook's i-th widget (in `CELLS` order, from 1)."""
    return driver.find_elements(By.CSS_SELECTOR, ".jp-Cell")[i].find_element(
        By.CSS_SELECTOR, ".jp-OutputArea")


def _role(area, role):
    # Read in the page: a redraw replaces the view's elements, never the output area.
    return area.parent.execute_script(
        "const e = arguments[0].querySelector(arguments[1]); return e && e.textContent",
        area, f'[data-role="{role}"]')


def _changed(wait, area, role, want):
    wait.until(lambda d: _role(area, role) == want)
    return _role(area, role)


@pytest.mark.slow
def test_widgets_answer_clicks_and_controls_with_lowprecs_numbers(page):
    driver, wait = page
    bits = _output(driver, 1)
    assert _role(bits, "value") == str(float(lp.decode(0x3dcd, "bf16")))
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
           ).select_by_value("ceil")
    q = lp.mx.quantize([0.1, 1.0, 2.0, 957.0], "mxfp8_e4m3", scale_rule="ceil")
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
