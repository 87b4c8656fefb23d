"""Why it performs: the feature-importance dashboard.

    python app.py [--port 8050 --cache-dir .wip-cache ...]   # development server, demo warmed
    python app.py report --model M --data D --target T --out review.html   # a review, no browser
    gunicorn -c gunicorn.conf.py app:server                  # production (options from WIP_* env)

Options: ``python app.py --help``; each has a ``WIP_*`` environment variable (README).
"""

from __future__ import annotations

import logging
import sys
import threading

from dashboard.cli import report_main
from dashboard.config import from_env, parse_args
from dashboard.server import create_app, warm


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:  # python app.py report --model ... --data ... --target ... --out ...
        sys.exit(report_main(argv[1:]))
    config = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(config)
    if config.warm:
        threading.Thread(target=warm, args=(app,), daemon=True).start()
    print(f"Why it performs: http://{config.host}:{config.port}/ (cache {config.cache_path})", file=sys.stderr)
    app.run(host=config.host, port=config.port, debug=config.debug)


if __name__ == "__main__":
    main()
else:  # imported by gunicorn (or a Celery worker): configuration from WIP_* environment variables
    app = create_app(from_env())
    server = app.server
    celery_app = app._wip_celery  # `celery -A app:celery_app worker` when WIP_CELERY_BROKER is set
