"""One gunicorn for a browser test module: ``gunicorn -c gunicorn.conf.py app:server -w 2`` on
a free loopback port with its own cache folder, answered before it is handed over, ended
(SIGTERM, then SIGKILL) when the module is done."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def gunicorn_server(cache: Path, env: dict | None = None, start_s: float = 90.0):
    """Yields ``{"url", "proc", "cache"}``; ``env``: more ``WIP_*`` settings."""
    import requests

    port = free_port()
    full = {**os.environ, "WIP_CACHE_DIR": str(cache), "WIP_SECRET_KEY": "test-secret", **(env or {})}
    log_path = cache / "gunicorn.log"
    with open(log_path, "w") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), "app:server", "-w", "2"]
            + ["-b", f"127.0.0.1:{port}", "--no-control-socket"],
            cwd=ROOT,
            env=full,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + start_s
        while True:
            try:
                if requests.get(url + "/", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail("gunicorn did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.3)
        yield {"url": url, "proc": proc, "cache": cache}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
