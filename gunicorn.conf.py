"""gunicorn settings for ``python app.py`` and ``gunicorn -c gunicorn.conf.py app:server``:
the package's own (``dashboard/gunicorn_conf.py``, which the installed command
``why-it-performs`` reads), so there is one copy. The app itself reads its options from
WIP_* environment variables (README)."""

from dashboard.gunicorn_conf import *  # noqa: F403
