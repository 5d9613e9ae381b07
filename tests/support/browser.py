"""A real headless browser for the console's tests: Debian's Chromium and chromedriver driven by
Selenium (nothing here downloads a browser), and a WSGI app served on a free port in a thread.

Screenshots for docs/console.md are written when HASHBEAT_SCREENSHOTS names a directory
(``make -C docs screenshots`` is not needed: see docs/console.md for the one command)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        return (
            f"no browser: {', '.join(missing)} missing; install Debian's chromium and "
            f"chromium-driver (apt-get install -y chromium chromium-driver; .ci/run does)"
        )
    return None


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium, 1280x900 (a phone's width is another window size away)."""
    why = browser_missing()
    if why is not None:
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--disable-gpu",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


def screenshot(driver: Any, name: str) -> None:
    """Save the page as ``name``.png in HASHBEAT_SCREENSHOTS, when it is set (docs/console.md)."""
    where = os.environ.get("HASHBEAT_SCREENSHOTS")
    if not where:
        return
    Path(where).mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    inner = driver.execute_script("return window.innerHeight")
    chrome = 900 - int(inner)  # the window's height that is not the page's
    driver.set_window_size(1280, min(int(height) + chrome, 2400))
    target = Path(where) / f"{name}.png"
    driver.save_screenshot(str(target.with_suffix(".tmp.png")))
    shutil.move(target.with_suffix(".tmp.png"), target)
    driver.set_window_size(1280, 900)


def by_label(driver: Any, label: str) -> Any:
    """The form control a person finds by its visible label."""
    found = driver.find_element(By.XPATH, f"//label[normalize-space()='{label}']")
    return driver.find_element(By.ID, found.get_attribute("for"))


class PageGone(StaleElementReferenceException):
    """A read or click that met the page going away under it: tried again."""


def on_this_page(act: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """``act`` for ``WebDriverWait``, with Chrome's other word for an element of a page that is
    going away ("does not belong to the document", not a stale element) made a stale element:
    a person looks again on the page that comes next."""

    def acted(driver: Any) -> bool:
        try:
            return act(driver)
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                raise PageGone(str(exc)) from exc
            raise

    return acted


def click(driver: Any, text: str, timeout_s: float = 10.0) -> None:
    """Click the button or link a person finds by its visible text. The page may swap the
    element between finding and clicking it (the entries page refreshes its table, a form's
    answer replaces the page): then it is found again, as a person's next look would."""
    where = f"//button[normalize-space()='{text}'] | //a[normalize-space()='{text}']"

    def clicked(found: Any) -> bool:
        found.find_element(By.XPATH, where).click()
        return True

    WebDriverWait(driver, timeout_s, ignored_exceptions=(StaleElementReferenceException,)).until(
        on_this_page(clicked)
    )


def shows(driver: Any, text: str, timeout_s: float = 10.0) -> bool:
    """Whether the page comes to show ``text`` (any case) within ``timeout_s``: a click that
    submits a form returns before the next page has loaded, so the body read may belong to the
    page that is going away (stale): then it is read again."""
    try:
        WebDriverWait(
            driver, timeout_s, ignored_exceptions=(StaleElementReferenceException,)
        ).until(
            on_this_page(lambda d: text.lower() in d.find_element(By.TAG_NAME, "body").text.lower())
        )
    except TimeoutException:
        return False
    return True
