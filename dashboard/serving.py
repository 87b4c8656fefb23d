"""How the dashboard is served: by gunicorn, for ``python app.py`` as in production.

``gunicorn -c gunicorn.conf.py app:server`` and ``python app.py`` run the same server and
process model: a gunicorn master and gthread workers of the class :class:`Worker` (the
settings of ``gunicorn.conf.py``; ``python app.py`` binds its ``--host``/``--port``).
Flask's development server (one thread per connection, reloader, debugger) only runs with
``--debug``.

Every process of the server ends with it:

- a worker dies with the master (``PR_SET_PDEATHSIG``), even when the master is killed
  with SIGKILL;
- a worker told to stop (SIGTERM, SIGINT, SIGQUIT) first kills its descendants (background
  jobs, model processes, warm processes): a request waiting for one of them gets its
  answer at once instead of holding the worker until the computation ends; a child started
  by a request still running meanwhile goes when the worker's loop ends;
- every child forked by the server closes the sockets it inherits at once and dies with
  its parent (:func:`dashboard.isolation.become_child`), so nothing re-parented to init
  keeps the port.
"""

from __future__ import annotations

import atexit
import logging
import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path

from gunicorn.app.base import BaseApplication
from gunicorn.workers.gthread import ThreadWorker

from .config import Config
from .isolation import become_child, die_with_parent, end_descendants, name_process

WORKER_CLASS = "dashboard.serving.Worker"


class Worker(ThreadWorker):
    """gunicorn's gthread worker, ending with the master and taking its children along."""

    def init_process(self):
        die_with_parent(self.ppid)  # a master killed with SIGKILL takes its workers along
        super().init_process()

    def run(self):
        try:
            super().run()
        except SystemExit as stop:  # SIGINT, SIGQUIT: gunicorn's quick stop
            end_descendants()
            _exit_at_exit(stop.code)
            raise
        end_descendants()  # started by a request that ran while the worker stopped
        _exit_at_exit(0)

    def handle_exit(self, sig, frame):  # SIGTERM: graceful stop
        end_descendants()
        super().handle_exit(sig, frame)

    def handle_quit(self, sig, frame):  # SIGINT, SIGQUIT: quick stop
        end_descendants()
        super().handle_quit(sig, frame)


class Application(BaseApplication):
    """gunicorn's application API serving an app created in this process (the workers fork
    from it, as with ``--preload``)."""

    def __init__(self, wsgi, settings: dict):
        self._wsgi, self._settings = wsgi, settings
        super().__init__()

    def load_config(self):
        for key, value in self._settings.items():
            if key.lower() in self.cfg.settings and value is not None:
                self.cfg.set(key.lower(), value)

    def load(self):
        return self._wsgi


def _exit_at_exit(code) -> None:
    """Once gunicorn has done its part of a worker's stop, end the process without the
    interpreter's finalisation: tearing down the modules and objects of a worker that holds
    the app took 2-3 s on a busy two-core machine, during which the worker was still there.
    Registered last, this runs first among the exit functions (the others close nothing a
    process's end does not: ``multiprocess`` joins job processes, already ended here)."""
    atexit.register(_exit_now, code if isinstance(code, int) else 1)


def _exit_now(code: int) -> None:
    end_descendants()
    logging.shutdown()  # flushes the log handlers
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def settings(config: Config, conf_file: Path | None = None) -> dict:
    """gunicorn settings for ``python app.py``: those of ``conf_file`` (``gunicorn.conf.py``:
    workers, threads, timeouts, limits), bound to the configured host and port, with no
    control socket (nothing here uses it, and two servers on one machine would share it)."""
    found: dict = {"worker_class": WORKER_CLASS}
    if conf_file is not None and conf_file.is_file():
        values = runpy.run_path(str(conf_file))
        found.update({key: value for key, value in values.items() if not key.startswith("_")})
    found["bind"] = [bind_address(config.host, config.port)]
    found["control_socket_disable"] = True
    return found


def serve(wsgi, options: dict, warm: Callable[[], object] | None = None) -> None:
    """Serve ``wsgi`` with gunicorn until it is stopped (SIGTERM, SIGINT: Ctrl-C), then exit.
    ``warm`` runs in a child process of the master (so the master forks its workers with no
    thread running), which ends with it."""
    if warm is not None:
        start_child(warm, "wip-warm-up")
    try:
        Application(wsgi, options).run()
    except SystemExit as stop:  # the master stopped (its workers are gone): the warm-up too
        end_descendants()
        _exit_now(stop.code if isinstance(stop.code, int) else 1)
    end_descendants()


def start_child(fn: Callable[[], object], name: str) -> int:
    """Run ``fn()`` in a forked child that holds no socket and dies with this process."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            become_child(parent)
            name_process(name)
            fn()
        except BaseException:  # noqa: BLE001 - logged by fn; the server keeps running
            code = 1
        finally:
            os._exit(code)
    return pid
