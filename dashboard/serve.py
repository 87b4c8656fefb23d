"""The server ``dashboard.show`` starts: ``python -m dashboard.serve --inbox DIR --port P``.

A fresh interpreter (so no OpenMP pool of the caller's is running when it forks its job
processes) serving the dashboard on 127.0.0.1. Data sets arrive through ``DIR``, a private
folder the caller created: each ``NAME.pkl`` (the caller's own models, data frame and
target, pickled) is opened as a workspace (checked as an upload is, the models in an
isolated process) and answered with ``NAME.json`` (``{"ws": id}`` or ``{"error": reason}``),
then its first views are computed. The line ``READY`` on standard output says it listens."""

from __future__ import annotations

import argparse
import json
import logging
import pickle
import threading
from pathlib import Path

import compute

from .config import Config
from .doors import open_workspace
from .loading import LoadError
from .server import create_app, warm

log = logging.getLogger("wip")


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
                    ctx, given["models"], given["data"], given["target"], title=given.get("title") or ""
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dashboard.serve")
    parser.add_argument("--inbox", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--cache-dir", default=".wip-cache")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(Config(cache_dir=args.cache_dir, host="127.0.0.1", port=args.port, warm=False))
    for noisy in ("werkzeug", "dash.dash", app.logger.name):  # no request log or banner in the caller's notebook
        logging.getLogger(noisy).setLevel(logging.ERROR)
    stop = threading.Event()
    threading.Thread(target=watch_inbox, args=(app, args.inbox, stop), daemon=True).start()
    print("READY", flush=True)
    app.run(host="127.0.0.1", port=args.port, debug=False)


if __name__ == "__main__":
    main()
