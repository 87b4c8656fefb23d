"""The command ``why-it-performs`` that ``pip install`` puts on the PATH; ``python -m dashboard``
and the repository's ``python app.py`` run the same:

    why-it-performs [serve] [--port 8050 --cache-dir .wip-cache ...]   # gunicorn, demo warmed
    why-it-performs --debug                                           # Flask's development server
    why-it-performs --model M [--model M2] --data D --target T [--labels labels.json]   # the operator's data set
    why-it-performs report --model M --data D --target T --out review.html   # a review, no browser

Serving is what it does without a subcommand (``serve`` says it outright). Options:
``why-it-performs --help`` and ``why-it-performs report --help``; each option of the server
has a ``WIP_*`` environment variable (README)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path

import compute

from . import serving
from .cli import add_row_options, open_files, report_main
from .config import parse_args
from .loading import LoadError
from .server import create_app, warm
from .start import set_start

#: gunicorn's settings (workers, threads, timeouts, limits) where no ``gunicorn.conf.py`` is
#: given: the installed package's copy of the repository's file
GUNICORN_CONF = Path(__file__).with_name("gunicorn_conf.py")


def program_name() -> str:
    """How the user started us, for the help: ``why-it-performs``, ``python -m dashboard``
    (``dashboard/__main__.py`` sets it) or ``python app.py``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return {"": "why-it-performs", "app.py": "python app.py"}.get(name, name)


def subcommands(name: str) -> str:
    """The help's last words: the subcommands."""
    return (
        "subcommands:\n"
        f"  serve                 serve the dashboard (the default): {name} [serve] [options]\n"
        f"  report                the review without a browser: {name} report --help"
    )


def main(argv: list[str] | None = None, *, prog: str | None = None, conf_file: Path | None = None) -> None:
    """Run the command: ``report ...`` writes the review and exits with its status; anything
    else (``serve`` or no subcommand) serves the dashboard until it is stopped. ``prog``: the
    command as the help names it; ``conf_file``: gunicorn's settings (``python app.py`` gives
    the repository's ``gunicorn.conf.py``; else :data:`GUNICORN_CONF`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    name = prog or program_name()
    if argv[:1] == ["report"]:  # report --model ... --data ... --target ... --out ...
        sys.exit(report_main(argv[1:], prog=f"{name} report"))
    if argv[:1] == ["serve"]:
        argv = argv[1:]
    serve(argv, name, conf_file or GUNICORN_CONF)


def serve(argv: list[str], name: str, conf_file: Path) -> None:
    """Serve the dashboard (see the module docstring) until it is stopped."""
    own = argparse.ArgumentParser(add_help=False)  # the operator's own data set, opened at start
    mine = own.add_argument_group("the data set to open at start (given together; the demos stay one click away)")
    mine.add_argument("--model", action="append", type=Path, help="a model file or MLflow folder (repeat for more)")
    mine.add_argument(
        "--data",
        type=Path,
        help="the data with the target column: a .csv or .parquet file, or a Parquet data set "
        "(a folder of files, or a quoted glob)",
    )
    mine.add_argument("--target", help="the outcome column of the data")
    add_row_options(mine)
    files, rest = own.parse_known_args(argv)
    config = parse_args(rest, parents=[own], epilog=subcommands(name))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(config)
    start, path = None, config.url_prefix
    if files.labels is not None and not files.model:
        sys.exit("error: --labels names the features of a data set: give it with --model, --data and --target")
    if files.model or files.data or files.target:
        if not (files.model and files.data and files.target):
            sys.exit("error: give --model (one or more), --data and --target together")
        try:
            ws = open_files(
                app._wip_context,
                files.model,
                files.data,
                files.target,
                held_out=files.held_out,
                output=files.output,
                labels=files.labels,
                columns_in_order=files.columns_in_order,
            )
        except (LoadError, compute.ExplainError, OSError) as exc:
            sys.exit(f"error: {' '.join(str(exc).split())[:500]}")
        start, path = {"ws": ws.id}, f"{config.url_prefix}?ws={ws.id}"
    set_start(app._wip_context, start["ws"] if start else None)  # what the root address opens
    print(f"Why it performs: http://{config.host}:{config.port}{path} (cache {config.cache_path})", file=sys.stderr)
    warming = (lambda: warm(app, start)) if config.warm or start else None
    if config.debug:  # Flask's development server: one thread per connection, Dash's debugger
        if warming is not None:
            threading.Thread(target=warming, daemon=True).start()
        app.run(host=config.host, port=config.port, debug=True)
        return
    # as in production: a gunicorn master and its workers, forked from this process with the
    # app (and the operator's data set, kept in the cache folder) ready; the warm-up runs in
    # a child process (the master forks its workers with no thread of ours running)
    serving.serve(app.server, serving.settings(config, conf_file), warming)
