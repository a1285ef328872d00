"""Headless Chromium (Debian's `chromium`, installed by scripts/install_system.sh) driven
through the DevTools protocol over a pipe: open a page as a signed-in user (the session
cookie the UI's login sets), read its rendered text and take a screenshot.

`--remote-debugging-pipe` talks JSON messages ended by NUL on the child's fds 3 (in) and
4 (out), so no port is opened and no WebDriver or extra Python package is needed.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]
WIDTH, HEIGHT = 1280, 900


class ChromiumError(RuntimeError):
    pass


class Chromium:
    """One headless browser; use as a context manager."""

    def __init__(self, timeout: float = 120) -> None:
        binary = shutil.which("chromium")
        if binary is None:
            raise ChromiumError("chromium is not installed: run `make install` (scripts/install_system.sh)")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="tidemark-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_fds() -> None:  # in the child: its fd 3 reads our messages, fd 4 answers
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4 first
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)  # dup2 leaves the copies inheritable
            os.dup2(high_w, 4)
            os.close(high_r)
            os.close(high_w)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds,
            close_fds=False,  # keep 3 and 4; Python's own descriptors are not inheritable
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.session: str | None = None

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ protocol

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> dict[str, Any]:
        """Call a DevTools method (on the attached page unless `session` is False)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_event(self, name: str) -> dict[str, Any]:
        for i, event in enumerate(self._events):
            if event.get("method") == name:
                return self._events.pop(i)
        while True:
            event = self._read()
            if event.get("method") == name:
                return event
            self._events.append(event)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise ChromiumError(f"no answer from chromium within {self.timeout:.0f}s")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise ChromiumError(f"chromium exited (code {self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    # ------------------------------------------------------------------ pages

    def open(self, url: str, cookies: dict[str, str] | None = None, settle_seconds: float = 0) -> None:
        """Load `url` in a new 1280x900 tab, with `cookies` set for its origin first;
        returns after the load event (and `settle_seconds` more for script-built pages)."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        attached = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)
        self.session = attached["sessionId"]
        self.send("Page.enable")
        self.send("Network.enable")
        for name, value in (cookies or {}).items():
            self.send("Network.setCookie", {"name": name, "value": value, "url": url})
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
        )
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        if settle_seconds:
            time.sleep(settle_seconds)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result["result"].get("value")

    def text(self) -> str:
        """The page's rendered text (what a reader sees, not the HTML source)."""
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.send("Browser.close", session=False)
                self.proc.wait(30)
        except (ChromiumError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(30)
        finally:
            for fd in (self._to_child, self._from_child):
                with contextlib.suppress(OSError):
                    os.close(fd)
            shutil.rmtree(self.profile, ignore_errors=True)
