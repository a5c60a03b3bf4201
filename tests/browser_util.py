"""Headless Chromium for the tests that drive the Web UI (Debian's `chromium` +
`chromium-driver`, through selenium): the `driver` fixture and page helpers."""
from __future__ import annotations

import json
import shutil
import time

import pytest

SETUP_HINT = "run ./scripts/setup --tests (it installs Debian's chromium and chromium-driver and the selenium package)"


def _browser_parts():
    missing = [name for name in ("chromium", "chromedriver") if not shutil.which(name)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium Python package")
    if missing:
        pytest.fail(f"the Web UI tests need a real browser; missing: {', '.join(missing)}: {SETUP_HINT}")
    return shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def driver():
    chromium, chromedriver = _browser_parts()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,860", "--disable-gpu",
              "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
              "--disable-component-update", "--disable-default-apps"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    # an explicit driver path: Selenium Manager never downloads anything
    d = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    d.set_page_load_timeout(60)
    d.set_script_timeout(60)
    yield d
    d.quit()


@pytest.fixture(scope="module")
def shots(request, tmp_path_factory):
    """A directory for the module's screenshots (printed with `-s`)."""
    name = request.module.__name__.replace("test_", "").replace("_", "-")
    d = tmp_path_factory.mktemp(f"{name}-screenshots")
    print(f"\n{name} screenshots: {d}")
    return d


# ------------------------------------------------------------------ helpers


def wait(cond, timeout=60.0, interval=0.05, what="condition"):
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def js(d, script, *args):
    return d.execute_script(script, *args)


def open_page(d, url, settings=None):
    """Loads the page with empty storage, then `settings` stored."""
    d.get(url + "/health")  # the same origin, without the app running
    js(d, "localStorage.clear()")
    if settings:
        js(d, "localStorage.setItem('llamars.settings', arguments[0])", json.dumps({k: str(v) for k, v in settings.items()}))
    d.get_log("browser")  # console_errors() reports what happens from here on
    d.get(url + "/")
    wait(lambda: js(d, "return !!document.querySelector('[data-testid=model-info]').textContent"), 30, what="/props in the header")


def by(d, testid):
    from selenium.webdriver.common.by import By

    return d.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]')


def texts(d, role):
    return js(d, f"return [...document.querySelectorAll('[data-testid=message-{role}] .body')].map(e => e.innerText)")


def busy(d):
    return not js(d, "return document.getElementById('stop').hidden")


def send(d, text):
    box = by(d, "prompt")
    box.click()  # after a closed dialog, typing into a still-focused box needs the click
    box.clear()
    box.send_keys(text)
    by(d, "send").click()


def wait_idle(d, timeout=120):
    wait(lambda: not busy(d), timeout, what="the reply to finish")


def stored(d):
    return json.loads(js(d, "return localStorage.getItem('llamars.conversations')") or "[]")


def console_errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def shot(d, shots, name):
    time.sleep(0.3)  # let a CSS transition finish
    d.save_screenshot(str(shots / f"{name}.png"))
