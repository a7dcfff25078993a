"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for the
web UI tests: navigate, run JavaScript, wait for a condition, take a screenshot.
Every host but 127.0.0.1 is unresolvable (the UI must work offline). The browser runs
in its own process group and is killed on close."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(AssertionError):
    pass


class Browser:
    def __init__(self, profile_dir: Path, width: int = 1500, height: int = 1100):
        if CHROMIUM is None:
            pytest.fail("chromium is not installed: `make test` installs it (apt-get install chromium)")
        from websockets.sync.client import connect

        self.profile_dir = Path(profile_dir)
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
               "--hide-scrollbars", f"--window-size={width},{height}", f"--user-data-dir={self.profile_dir}",
               "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
               "--remote-debugging-port=0", "about:blank"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = self.profile_dir / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BrowserError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port = int(port_file.read_text().splitlines()[0])
        import httpx

        targets = []
        while not targets:
            targets = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json() if t["type"] == "page"]
            if time.monotonic() > deadline:
                self.close()
                raise BrowserError("chromium has no page")
            time.sleep(0.05)
        self.stack = contextlib.ExitStack()
        url = targets[0]["webSocketDebuggerUrl"]
        try:
            conn = connect(url, max_size=None, open_timeout=30, proxy=None)  # loopback: never via a proxy
        except TypeError:  # websockets < 15 has no proxy support at all
            conn = connect(url, max_size=None, open_timeout=30)
        self.ws = self.stack.enter_context(conn)
        self.ids = itertools.count(1)
        self.console: list[str] = []
        self.call("Page.enable")
        self.call("Runtime.enable")

    # ------------------------------------------------------------------ protocol
    def call(self, method: str, timeout_s: float = 60.0, **params) -> dict:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"{method}: no answer in {timeout_s} s")
            msg = json.loads(self.ws.recv(timeout=left))
            if msg.get("method") == "Runtime.exceptionThrown":
                self.console.append("exception: " + json.dumps(msg["params"]["exceptionDetails"])[:500])
            elif msg.get("method") == "Runtime.consoleAPICalled" and msg["params"]["type"] in ("error", "warning"):
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in msg["params"]["args"]))
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg["result"]

    def eval(self, expression: str):  # noqa: ANN201
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise BrowserError(f"{expression[:80]}: {res['exceptionDetails'].get('text')} "
                               f"{res['exceptionDetails'].get('exception', {}).get('description', '')}")
        return res["result"].get("value")

    # ------------------------------------------------------------------ helpers
    def wait_for(self, expression: str, timeout_s: float = 60.0, what: str = ""):  # noqa: ANN201
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                value = self.eval(expression)
            except BrowserError:
                value = None  # a page in the middle of navigating
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {what or expression} at {self.url()}; console: {self.console[-5:]}")
            time.sleep(0.1)

    def goto(self, url: str, timeout_s: float = 60.0) -> None:
        self.console.clear()  # what the new page says, from here on
        self.call("Page.navigate", url=url)
        self.wait_loaded(timeout_s)

    def wait_loaded(self, timeout_s: float = 60.0) -> None:
        time.sleep(0.05)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'", timeout_s, "page load")

    def url(self) -> str:
        try:
            return self.eval("location.href")
        except BrowserError:
            return "?"

    def screenshot(self, path: Path) -> Path:
        res = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(res["data"]))
        return path

    def close(self) -> None:
        stack = getattr(self, "stack", None)
        if stack is not None:
            try:
                stack.close()
            except Exception:  # noqa: BLE001 - closing anyway
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(10)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.close()
