"""Why it performs: the feature-importance dashboard.

    python app.py [--port 8050 --cache-dir .wip-cache ...]   # gunicorn (gunicorn.conf.py), demo warmed
    python app.py --debug                                    # Flask's development server, Dash debug mode
    python app.py --model M [--model M2] --data D --target T [--labels labels.json]   # the operator's data set
    python app.py report --model M --data D --target T --out review.html   # a review, no browser
    gunicorn -c gunicorn.conf.py app:server                  # production (options from WIP_* env)

Options: ``python app.py --help``; each has a ``WIP_*`` environment variable (README).
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from pathlib import Path

import compute
from dashboard import serving
from dashboard.cli import add_row_options, open_files, report_main
from dashboard.config import from_env, parse_args
from dashboard.loading import LoadError
from dashboard.server import create_app, warm
from dashboard.start import set_start

SUBCOMMANDS = """subcommands:
  report                the review without a browser: python app.py report --help"""


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:  # python app.py report --model ... --data ... --target ... --out ...
        sys.exit(report_main(argv[1:]))
    own = argparse.ArgumentParser(add_help=False)  # the operator's own data set, opened at start
    mine = own.add_argument_group("the data set to open at start (given together; the demos stay one click away)")
    mine.add_argument("--model", action="append", type=Path, help="a model file (repeat for more)")
    mine.add_argument("--data", type=Path, help="the data (.csv or .parquet) with the target column")
    mine.add_argument("--target", help="the outcome column of the data")
    add_row_options(mine)
    files, rest = own.parse_known_args(argv)
    config = parse_args(rest, parents=[own], epilog=SUBCOMMANDS)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(config)
    start, path = None, "/"
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
        start, path = {"ws": ws.id}, f"/?ws={ws.id}"
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
    serving.serve(app.server, serving.settings(config, Path(__file__).with_name("gunicorn.conf.py")), warming)


if __name__ == "__main__":
    main()
else:  # imported by gunicorn (or a Celery worker): configuration from WIP_* environment variables
    app = create_app(from_env())
    server = app.server
    celery_app = app._wip_celery  # `celery -A app:celery_app worker` when WIP_CELERY_BROKER is set
