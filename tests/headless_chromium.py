"""Headless Chromium driven over WebDriver (chromedriver's HTTP protocol, no client library).

Used by the viewer test to load a served page, click a node and read what the page shows.
Chromium is the Debian ``chromium`` and ``chromium-driver`` packages (``.ci/run`` installs
them); :func:`find_chromium` says why it cannot run where it cannot.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
]


def find_chromium() -> tuple[str | None, str | None, str]:
    """(browser, driver, why not) : the paths of chromium and chromedriver, or the reason they are missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        return None, None, "Chromium is not installed (apt-get install -y chromium chromium-driver; .ci/run does)"
    return browser, driver, ""


class Browser:
    """One WebDriver session: open a page, find elements, click, read the DOM, screenshot."""

    def __init__(self, base: str, session: str) -> None:
        self.base = f"{base}/session/{session}"

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read())["value"]

    def open(self, url: str) -> None:
        self.call("POST", "/url", {"url": url})

    def elements(self, css: str) -> list[str]:
        return [next(iter(found.values())) for found in self.call("POST", "/elements", {"using": "css selector",
                                                                                        "value": css})]

    def wait_for(self, css: str, timeout: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.elements(css)
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.1)

    def text(self, element: str) -> str:
        return str(self.call("GET", f"/element/{element}/text"))

    def click(self, element: str) -> None:
        self.call("POST", f"/element/{element}/click", {})

    def dom(self) -> str:
        return str(self.call("GET", "/source"))

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("GET", "/screenshot"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def chromium(browser: str, driver: str) -> Iterator[Browser]:
    """A headless Chromium with a fresh profile, closed (with its driver) afterwards."""
    port = _free_port()
    process = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/status", timeout=5).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with tempfile.TemporaryDirectory() as profile:
            options = {"binary": browser, "args": [*FLAGS, f"--user-data-dir={profile}"]}
            capabilities = {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}
            request = urllib.request.Request(base + "/session", method="POST",
                                             data=json.dumps({"capabilities": capabilities}).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=120) as answer:
                session = json.loads(answer.read())["value"]["sessionId"]
            page = Browser(base, session)
            try:
                yield page
            finally:
                page.call("DELETE", "")
    finally:
        process.terminate()
        process.wait(timeout=30)
