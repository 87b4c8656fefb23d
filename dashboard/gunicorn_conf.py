"""gunicorn settings of the dashboard: read by the installed command ``why-it-performs`` (and
``python -m dashboard``), by ``python app.py`` and by ``gunicorn -c gunicorn.conf.py app:server``
(the repository's ``gunicorn.conf.py`` imports this module: one copy); ``gunicorn -c
python:dashboard.gunicorn_conf`` reads it too.

The app itself reads its options from WIP_* environment variables (README).
"""

import os

bind = os.environ.get("WIP_BIND", f"{os.environ.get('WIP_HOST', '127.0.0.1')}:{os.environ.get('WIP_PORT', '8050')}")
workers = int(os.environ.get("WIP_WORKERS", "2"))
threads = int(os.environ.get("WIP_THREADS", "4"))  # gthread: polls of background jobs are cheap
# gunicorn's gthread worker that dies with the master and, told to stop, ends its background
# jobs and model processes at once (dashboard/serving.py; `python app.py` uses it too)
worker_class = "dashboard.serving.Worker"
# Slow clients: gthread waits for a connection's first bytes without using a thread, but then
# reads its headers in a thread with no deadline; request bodies have one in the app (server.
# BodyGuard: 408 once a body falls behind 10 s + 8 KiB/s). Facing the internet, put a buffering
# reverse proxy (nginx's default) in front: it takes slow headers off the workers as well.
# Heavy work runs in background jobs (forked children), so request handlers stay short;
# the timeout covers the slowest plain callback (a large CSV upload being parsed).
timeout = int(os.environ.get("WIP_TIMEOUT", "120"))
graceful_timeout = 30
keepalive = 75  # above browsers' idle reuse: fewer connection resets
limit_request_line = 8190  # the drill-down state travels in the URL
limit_request_fields = 100
# Recycle workers now and then (bounded memory), but rarely: one click is ~20 requests and a
# restart re-imports the app (~2 CPU s); at 2,000 restarts took a quarter of the server's time
# under 50 sessions (benchmarks/load_test.py).
max_requests = 50_000
max_requests_jitter = 5_000
accesslog = os.environ.get("WIP_ACCESS_LOG") or None
