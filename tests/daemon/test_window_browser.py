"""ragd's window in a real browser (issue 38): Debian's Chromium, headless, driven by Selenium
through chromium-driver, against the real daemon of ``window_fixture`` (the shared kepano
vault). Type a query and see results with a highlighted snippet; watch a progress bar move on
the status page while a project indexes; see the skipped note with its code; add a project
folder from the sources page and find its file. A screenshot of each page is written to
``build/test-artefacts/window/`` (``RAGD_ARTEFACTS`` elsewhere).

Without Chromium and its driver the tests skip and say so; CI sets ``RAGD_REQUIRE_BROWSER=1``
and installs both, so there they fail instead."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from window_fixture import Window

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ARTEFACTS = Path(os.environ.get("RAGD_ARTEFACTS", REPO / "build" / "test-artefacts")) / "window"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _browser() -> tuple[str, str]:
    binary = next((b for b in map(shutil.which, BROWSERS) if b), None)
    driver = shutil.which("chromedriver")
    if binary and driver:
        return binary, driver
    why = ("no Chromium and chromium-driver (apt-get install chromium chromium-driver); "
           ".ci/run installs them")
    if os.environ.get("RAGD_REQUIRE_BROWSER") == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    binary, driver_path = _browser()
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for drivers online
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, what: str, fn: Any, timeout: float = 30) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(
        lambda d: fn(d), message=f"the page did not show {what} in {timeout:g} s")


def _css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def _texts(driver: Any, selector: str) -> list[str]:
    """The text of each element the selector finds, read in one go (the page re-renders
    while it refreshes: an element found a moment ago may be gone)."""
    return list(driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.innerText)", selector))


def _shot(driver: Any, name: str) -> None:
    driver.save_screenshot(str(ARTEFACTS / f"{name}.png"))


def _open(driver: Any, window: Window, view: str) -> None:
    if not driver.current_url.startswith(window.base):
        driver.get(window.url)  # the token becomes the session's cookie
        _wait(driver, "the page", lambda d: d.current_url == window.base + "/")
    driver.get(f"{window.base}/#/{view}")
    _wait(driver, f"the {view} view", lambda d: _css(d, f"#{view}-view:not([hidden])"))


def test_typing_a_query_shows_results_with_a_highlighted_snippet(browser: Any,
                                                                  window: Window) -> None:
    from selenium.webdriver.common.keys import Keys

    _open(browser, window, "search")
    box = _css(browser, "#q")[0]
    assert browser.switch_to.active_element == box, "the search box has the focus"
    box.send_keys("daily note template")
    results = _wait(browser, "results", lambda d: _css(d, "#results li.result"))
    assert results[0].find_element("css selector", ".title").text
    marks = _wait(browser, "a highlighted word", lambda d: _css(d, "#results .snippet mark"))
    assert marks[0].text.lower() in ("daily", "note", "template", "notes")
    box.send_keys(Keys.ARROW_DOWN)
    _wait(browser, "the first result selected",
          lambda d: _css(d, '#results li.result[aria-selected="true"]'))
    _shot(browser, "search")


def test_the_skipped_view_shows_the_broken_note_with_its_code(browser: Any,
                                                              window: Window) -> None:
    _open(browser, window, "skipped")
    rows = _wait(browser, "the skipped note", lambda d: [
        r for r in d.execute_script(
            "return [...document.querySelectorAll('#skipped-table tr.skip-row')].map(r => "
            "[r.querySelector('.skip-path').innerText, r.querySelector('.skip-code').innerText,"
            " r.querySelector('.skip-reason').innerText])") if window.broken in r[0]])
    assert rows[0][1] == "binary" and rows[0][2], rows
    _shot(browser, "skipped")


def test_a_folder_added_in_the_page_indexes_with_a_moving_progress_bar_and_is_found(
        browser: Any, window: Window, tmp_path: Path) -> None:
    project = tmp_path / "field-notes"
    project.mkdir()
    for n in range(250):  # enough that its vectors take seconds: the bar is seen moving
        (project / f"note {n:03}.md").write_text(
            f"# Field note {n}\n\n" + " ".join(f"observation {n} of the wombatfield survey, "
                                                 f"plot {k}." for k in range(40)) + "\n",
            encoding="utf-8")
    (project / "needle.md").write_text("# Needle\n\nThe xylophant needle is here.\n",
                                       encoding="utf-8")
    _open(browser, window, "sources")
    browser.find_element("css selector", "#add-path").send_keys(str(project))
    browser.find_element("css selector", "#add-submit").click()
    _wait(browser, "the adding message",
          lambda d: "field-notes" in d.find_element("css selector", "#add-message").text)
    _shot(browser, "sources")

    _open(browser, window, "status")
    seen: list[tuple[str, str]] = []

    def moved(d: Any) -> bool:
        bars = d.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(b => "
            "[b.getAttribute('value'), b.getAttribute('max')])",
            '.collection-row[data-name="field-notes"] progress.progress')
        for value, top in bars:
            if value is not None and (value, top) not in seen:
                seen.append((value, top))
                if len(seen) == 2:
                    _shot(d, "status")
        return len(seen) >= 3

    _wait(browser, "the project's progress bar moving", moved, timeout=120)

    _open(browser, window, "search")
    box = _css(browser, "#q")[0]
    box.clear()
    box.send_keys("xylophant needle")
    try:
        hits = _wait(browser, "the project's file", lambda d: [
            t for t in _texts(d, "#results li.result .title") if "needle" in t.lower()],
            timeout=60)
    finally:
        _shot(browser, "search-project")
    assert hits
    deadline = time.monotonic() + 120  # leave the daemon idle for the next module
    while window.daemon.call("status")["indexing"]["active"] and time.monotonic() < deadline:
        time.sleep(0.5)


def test_the_keyboard_alone_and_200_percent_zoom(browser: Any, window: Window) -> None:
    """Keys: `/` to the box, arrows through the results, Alt+2 to the status view; at 200 %
    zoom (a 1280-pixel window shows 640 CSS pixels) no view scrolls sideways."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    _open(browser, window, "search")
    browser.find_element("css selector", "body").click()
    ActionChains(browser).send_keys("/").perform()
    box = _css(browser, "#q")[0]
    _wait(browser, "the box focused by /", lambda d: d.switch_to.active_element == box)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("weekly review")
    _wait(browser, "results", lambda d: _texts(d, "#results li.result .title"))
    ActionChains(browser).send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN).perform()
    _wait(browser, "the second result selected",
          lambda d: _css(d, '#results li.result[data-index="1"][aria-selected="true"]'))
    ActionChains(browser).key_down(Keys.ALT).send_keys("2").key_up(Keys.ALT).perform()
    _wait(browser, "the status view by Alt+2", lambda d: _css(d, "#status-view:not([hidden])"))

    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 640, "height": 450, "deviceScaleFactor": 2, "mobile": False})
    try:
        for view in ("search", "status", "skipped", "sources"):
            _open(browser, window, view)
            time.sleep(0.3)  # its first answer is drawn
            wide = browser.execute_script(
                "return [document.documentElement.scrollWidth, "
                "document.documentElement.clientWidth]")
            assert wide[0] <= wide[1] + 1, f"the {view} view scrolls sideways at 200 %: {wide}"
            _shot(browser, f"{view}-200")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
