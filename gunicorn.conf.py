"""gunicorn settings for the dashboard: ``gunicorn -c gunicorn.conf.py app:server``.

Every value can be overridden on the command line or with GUNICORN_CMD_ARGS. The app
itself reads its options from WIP_* environment variables (README).
"""

import os

bind = os.environ.get("WIP_BIND", f"{os.environ.get('WIP_HOST', '127.0.0.1')}:{os.environ.get('WIP_PORT', '8050')}")
workers = int(os.environ.get("WIP_WORKERS", "2"))
threads = int(os.environ.get("WIP_THREADS", "4"))  # gthread: polls of background jobs are cheap
worker_class = "gthread"
# Heavy work runs in background jobs (forked children), so request handlers stay short;
# the timeout covers the slowest plain callback (a large CSV upload being parsed).
timeout = int(os.environ.get("WIP_TIMEOUT", "120"))
graceful_timeout = 30
keepalive = 75  # above browsers' idle reuse: fewer connection resets
limit_request_line = 8190  # the drill-down state travels in the URL
limit_request_fields = 100
max_requests = 2000  # recycle workers now and then (bounded memory)
max_requests_jitter = 200
accesslog = os.environ.get("WIP_ACCESS_LOG") or None
