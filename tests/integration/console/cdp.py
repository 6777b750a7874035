"""cdp.py: a headless Chromium (Debian's chromium) driven through its DevTools protocol over
--remote-debugging-pipe (file descriptors 3 and 4, messages separated by NUL bytes): no
WebSocket, no Python package beyond the standard library.

    with Browser() as b:
        b.goto("http://127.0.0.1:7434/#/jobs")
        b.wait("document.body.dataset.rendered === 'jobs'")
        b.eval("document.title")
        b.screenshot("jobs.png")

Everything the page reports as an error (uncaught exceptions, console.error, failed loads,
CSP violations) is collected in b.errors; a JavaScript dialog (alert, confirm, prompt) is
dismissed and collected in b.dialogs."""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio"]


def chromium_path():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return None


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, width=1400, height=1000, timeout=60):
        self.timeout = timeout
        self.dir = tempfile.mkdtemp(prefix="culprit-chromium-")
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        def fds():  # the child's 3 and 4, as --remote-debugging-pipe wants them (either may be 3 or 4 now)
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
        self.proc = subprocess.Popen(
            [chromium_path(), *FLAGS, f"--user-data-dir={self.dir}", "--remote-debugging-pipe",
             f"--window-size={width},{height}", "about:blank"],
            preexec_fn=fds, close_fds=False, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.session = None
        self.errors = []
        self.dialogs = []
        self.events = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True, session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.call("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def _read_message(self, deadline):
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise BrowserError("chromium closed its pipe (did it start?)")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def _event(self, m):
        method, p = m.get("method"), m.get("params", {})
        self.events.append(method)
        if method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append("exception: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        elif method == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            self.errors.append("console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            self.errors.append("log: " + p["entry"]["text"] + " " + p["entry"].get("url", ""))
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append(p["message"])
            self._send("Page.handleJavaScriptDialog", {"accept": False}, self.session)

    def _send(self, method, params, session):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        return self._id

    def call(self, method, session=True, **params):
        mid = self._send(method, params, self.session if session else None)
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == mid:
                if "error" in m:
                    raise BrowserError(f"{method}: {m['error'].get('message')}")
                return m.get("result", {})
            if "method" in m:
                self._event(m)

    def pump(self, seconds=0.0):
        """Takes the events that came meanwhile (a cheap round trip)."""
        end = time.monotonic() + seconds
        while True:
            self.call("Runtime.evaluate", expression="0")
            if time.monotonic() >= end:
                return
            time.sleep(0.05)

    def eval(self, expression, await_promise=False):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=await_promise)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression}: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def goto(self, url):
        self.call("Page.navigate", url=url)

    def wait(self, condition, timeout=None):
        """Waits until the JavaScript expression condition is true (polled every 50 ms)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            try:
                if self.eval(f"!!({condition})"):
                    return
            except BrowserError:
                pass
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {condition}")
            time.sleep(0.05)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def mouse(self, kind, x, y):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left" if kind != "mouseMoved" else "none",
                  clickCount=1 if kind != "mouseMoved" else 0)
