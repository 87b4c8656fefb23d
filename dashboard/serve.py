"""The server ``dashboard.show`` starts: ``python -m dashboard.serve --inbox DIR --port P``.

A fresh interpreter (so no OpenMP pool of the caller's is running when it forks its job
processes) serving the dashboard on 127.0.0.1. Data sets arrive through ``DIR``, a private
folder the caller created: each ``NAME.pkl`` (the caller's own models, data frame and
target, pickled) is opened as a workspace (checked as an upload is, the models in an
isolated process) and answered with ``NAME.json`` (``{"ws": id}`` or ``{"error": reason}``),
then its first views are computed. The line ``READY`` on standard output says it listens.

With ``--parent PID`` (what ``show`` passes unless ``keep=True``) the server ends when that
process ends, however it ends: a kernel restarted or shut down (SIGTERM, then SIGKILL), a
script stopped by a signal, where ``atexit`` never runs. A thread watches the parent's pid
(re-parenting changes ``getppid()``; ``PR_SET_PDEATHSIG`` alone would follow the thread
that started us, and a notebook may call ``show`` from a thread that ends first) and ends
every process of the server's session within a second or two.

With ``--url-prefix <base_url>proxy/<port>/`` (what ``show`` passes in a notebook under a
Jupyter server's proxy) the page is served under that path, as ``jupyter-server-proxy``'s
``<base_url>proxy/absolute/<port>/`` forwards it, and also without it, as its
``<base_url>proxy/<port>/`` forwards it (the prefix removed): :class:`UnderProxy` puts the
prefix back. The page may be framed by the notebook (the inline view): by its own origin
under the proxy, by a notebook on this machine otherwise."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import pickle
import signal
import threading
import time
from pathlib import Path

import psutil

import compute

from .config import Config
from .doors import open_workspace
from .loading import LoadError
from .server import create_app, warm

log = logging.getLogger("wip")

#: who may frame the page without a proxy: a notebook on this machine (Jupyter on localhost,
#: VS Code's notebook webview)
LOCAL_NOTEBOOKS = "'self' http://localhost:* http://127.0.0.1:* https://localhost:* https://127.0.0.1:* vscode-webview:"


class UnderProxy:
    """WSGI: a request whose path lacks ``prefix`` (``jupyter-server-proxy``'s ``proxy/<port>/``
    removes it) is served as the same path under it; every answer may be framed by
    ``ancestors`` (the notebook's inline view) instead of by nothing."""

    def __init__(self, wsgi, prefix: str, ancestors: str):
        self.wsgi, self.prefix, self.ancestors = wsgi, prefix, ancestors

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if not path.startswith(self.prefix) and path + "/" != self.prefix:
            environ["PATH_INFO"] = self.prefix.rstrip("/") + (path if path.startswith("/") else "/" + path)

        def framed(status, headers, exc_info=None):
            kept = []
            for name, value in headers:
                if name.lower() == "x-frame-options":
                    continue  # DENY; frame-ancestors says who may frame it
                if name.lower() == "content-security-policy":
                    value = value.replace("frame-ancestors 'none'", f"frame-ancestors {self.ancestors}")
                kept.append((name, value))
            return start_response(status, kept, exc_info) if exc_info else start_response(status, kept)

        return self.wsgi(environ, framed)


def watch_inbox(app, inbox: Path, stop: threading.Event, interval: float = 0.1) -> None:
    """Open every data set that arrives in ``inbox`` (see the module docstring)."""
    ctx = app._wip_context
    while not stop.is_set():
        for request in sorted(inbox.glob("*.pkl")):
            answer = request.with_suffix(".json")
            ws = None
            try:
                with open(request, "rb") as handle:
                    given = pickle.load(handle)  # written by dashboard.show in the caller's process
                ws = open_workspace(
                    ctx,
                    given["models"],
                    given["data"],
                    given["target"],
                    title=given.get("title") or "",
                    data_role="held-out" if given.get("held_out") else "unknown",
                    output=given.get("positive_class"),
                    labels=given.get("labels"),
                    columns_in_order=bool(given.get("columns_in_order")),  # PYTHON_CONFIRM: show()'s words
                )
                reply: dict = {"ws": ws.id, "warnings": list(ws.warnings)}
            except (LoadError, compute.ExplainError, OSError) as exc:
                reply = {"error": " ".join(str(exc).split())[:500]}
            except Exception as exc:  # a bug: say it, keep serving
                log.exception("opening a data set failed")
                reply = {"error": f"Opening the data set failed ({type(exc).__name__}: {exc})"[:500]}
            partial = answer.with_suffix(".part")
            partial.write_text(json.dumps(reply))
            partial.replace(answer)
            request.unlink(missing_ok=True)
            if ws is not None:
                warm(app, {"ws": ws.id})
        stop.wait(interval)


def watch_parent(parent: int, interval: float = 0.2) -> None:
    """Return when ``parent`` is no longer this process's parent (it ended: we were
    re-parented to init or a subreaper)."""
    while os.getppid() == parent:
        time.sleep(interval)


def end_session(grace: float = 2.0) -> None:
    """End this server and every process it started: its descendants get SIGTERM, those
    still there after ``grace`` seconds SIGKILL, then this process ends. As the leader of
    its own process group (``show`` starts it in a session of its own) the group is killed
    too, which reaches a job process whose parent already ended."""
    try:
        others = psutil.Process().children(recursive=True)
    except psutil.Error:
        others = []
    for process in others:
        try:
            process.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(others, timeout=grace)
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            pass
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)  # this process too
    os.kill(os.getpid(), signal.SIGKILL)


def _end_with(parent: int) -> None:
    watch_parent(parent)
    log.warning("the process that started the dashboard (pid %d) ended: stopping", parent)
    end_session()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dashboard.serve")
    parser.add_argument("--inbox", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--cache-dir", default=".wip-cache")
    parser.add_argument("--parent", type=int, default=None, help="end when this process ends")
    parser.add_argument("--url-prefix", default=None, help="served under a Jupyter server's proxy at this path")
    args = parser.parse_args(argv)
    if args.parent is not None:  # before anything slow: a caller gone during start-up ends us too
        threading.Thread(target=_end_with, args=(args.parent,), daemon=True, name="wip-parent").start()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = Config(cache_dir=args.cache_dir, host="127.0.0.1", port=args.port, warm=False)
    if args.url_prefix:
        config = dataclasses.replace(config, url_prefix=args.url_prefix)
    app = create_app(config)
    # the notebook frames the page: under the proxy from its own origin, else from this machine's
    ancestors = "'self'" if args.url_prefix else LOCAL_NOTEBOOKS
    app.server.wsgi_app = UnderProxy(app.server.wsgi_app, config.url_prefix, ancestors)
    for noisy in ("werkzeug", "dash.dash", app.logger.name):  # no request log or banner in the caller's notebook
        logging.getLogger(noisy).setLevel(logging.ERROR)
    stop = threading.Event()
    threading.Thread(target=watch_inbox, args=(app, args.inbox, stop), daemon=True).start()
    print("READY", flush=True)
    app.run(host="127.0.0.1", port=args.port, debug=False)


if __name__ == "__main__":
    main()
