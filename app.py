"""Why it performs: the feature-importance dashboard.

    python app.py [--port 8050 --cache-dir .wip-cache ...]   # gunicorn (gunicorn.conf.py), demo warmed
    python app.py --debug                                    # Flask's development server, Dash debug mode
    python app.py --model M [--model M2] --data D --target T [--labels labels.json]   # the operator's data set
    python app.py report --model M --data D --target T --out review.html   # a review, no browser
    gunicorn -c gunicorn.conf.py app:server                  # production (options from WIP_* env)

Options: ``python app.py --help``; each has a ``WIP_*`` environment variable (README). The
command lives in the package (:mod:`dashboard.command`): installed, it is ``why-it-performs``
(or ``python -m dashboard``), the same options and subcommands.
"""

from __future__ import annotations

from pathlib import Path

from dashboard import command
from dashboard.config import from_env
from dashboard.server import create_app


def main(argv=None) -> None:
    """``python app.py ...``: the command, with this folder's ``gunicorn.conf.py``."""
    command.main(argv, prog="python app.py", conf_file=Path(__file__).with_name("gunicorn.conf.py"))


if __name__ == "__main__":
    main()
else:  # imported by gunicorn (or a Celery worker): configuration from WIP_* environment variables
    app = create_app(from_env())
    server = app.server
    celery_app = app._wip_celery  # `celery -A app:celery_app worker` when WIP_CELERY_BROKER is set
