"""A real viewer and a real browser for the tests and the benchmark: uvicorn on 127.0.0.1
serving ``agui_store.ui.app``, and a headless Chromium driven by Selenium.

Selenium drives Debian's ``chromium`` through ``chromium-driver``: both come from the same
Debian source package, so the driver always speaks the browser's version, and nothing is
downloaded at test time. ``AGUI_STORE_CHROMIUM`` and ``AGUI_STORE_CHROMEDRIVER`` name other
binaries. In CI (``AGUI_STORE_REQUIRE_BROWSER=1``) a missing browser fails the tests instead
of skipping them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from typing import Any

REQUIRE_BROWSER = os.environ.get("AGUI_STORE_REQUIRE_BROWSER") == "1"

#: How long a wait for the page may take before the test fails (it never times anything).
PATIENCE_S = 30


def browser_unavailable() -> str | None:
    """Why no headless Chromium can be started here, or ``None``."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if chromium_path() is None:
        return "no chromium binary (apt-get install chromium chromium-driver)"
    if chromedriver_path() is None:
        return "no chromedriver binary (apt-get install chromium-driver)"
    return None


def chromium_path() -> str | None:
    return os.environ.get("AGUI_STORE_CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser"
    )


def chromedriver_path() -> str | None:
    return os.environ.get("AGUI_STORE_CHROMEDRIVER") or shutil.which("chromedriver")


def start_chromium(width: int = 1400, height: int = 1000) -> Any:
    """A new headless Chromium session (a Selenium ``WebDriver``); quit it when done."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # Both binaries are named: Selenium Manager must never fetch a browser or a driver.
    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium_path() or ""
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(chromedriver_path() or ""))


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free port of 127.0.0.1; yields its base URL."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="viewer-under-test", daemon=True)
    thread.start()
    started = threading.Event()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn stopped before it listened")
        started.wait(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(PATIENCE_S)


def wait_until(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    """Wait for ``condition(driver)`` to be truthy, and return it; fail naming ``what``. A
    condition that reads elements the page replaces meanwhile (a live update of the run
    tree) is asked again."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(
        driver,
        PATIENCE_S,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(condition, message=f"never: {what}")


def page_ready(driver: Any) -> bool:
    """Whether the viewer's script ran on the current page (it marks ``body[data-ready]``)."""
    return bool(driver.execute_script("return document.body && document.body.dataset.ready"))


def script_errors(driver: Any) -> list[str]:
    """What the page logged as errors since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
