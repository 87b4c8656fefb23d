"""The Dash app factory: layout, callbacks, background-callback manager and upload route."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import threading
import time
from pathlib import Path

from dash import Dash, DiskcacheManager, callback_context, no_update, set_props
from flask import jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from . import ids, jobs, labels, layout, planning
from .broker import BrokerError, unreachable
from .callbacks import register_all
from .callbacks.compute import page_nonce, resolve_state, run_parts, run_request
from .callbacks.load import LOAD_OUTPUTS
from .config import Config
from .http_guard import UPLOAD, guard_routes, limit_requests, upload_name
from .isolation import become_child, in_forking_thread
from .loading import DATA_SUFFIXES, preload
from .loading.formats import ACCEPTED_SUFFIXES
from .quota import WRITING, UploadQuota, client_key
from .state import Context, default_state, make_context, normalize
from .store import ForkSafeCache

log = logging.getLogger(__name__)
_FORM_OVERHEAD = 64 * 1024


# Dash's page, in English for screen readers and translation tools (WCAG 3.1.1: the page
# names its language; Dash's default <html> names none).
INDEX_STRING = """<!DOCTYPE html>
<html lang="en">
    <head>
        {%metas%}
        <title>{%title%}</title>
        {%favicon%}
        {%css%}
    </head>
    <body>
        {%app_entry%}
        <footer>
            {%config%}
            {%scripts%}
            {%renderer%}
        </footer>
    </body>
</html>"""


def create_app(config: Config) -> Dash:
    ctx = make_context(config)
    manager, celery_app = background_manager(config)
    app = Dash(
        __name__,
        title="Why it performs",
        index_string=INDEX_STRING,
        assets_folder=str(_assets_folder()),
        background_callback_manager=manager,
        on_error=broker_unreachable if config.celery_broker else None,
        suppress_callback_exceptions=False,
        url_base_pathname=config.url_prefix,  # every route, asset and callback under it ("/" by default)
    )
    app._wip_celery = celery_app  # type: ignore[attr-defined]
    app.server.secret_key = config.secret_key
    limit_requests(app.server, config.url_prefix)
    app.layout = layout.page(config)
    register_all(app, ctx)
    add_upload_route(app.server, ctx)
    guard_routes(app, config)
    add_security_headers(app)
    ctx.store.purge_uploads(config.upload_ttl_hours)  # files past their lifetime go at start-up too
    preload()  # jobs fork from here: each then starts with the model-loading imports done
    # Dash registers its script bundles on the first request, after flagging setup as done:
    # a second thread's request meanwhile gets "dash is not a registered library" (500).
    # One request here, before any real traffic, closes that window.
    app.server.test_client().get(config.url_prefix)
    app._wip_context = ctx  # type: ignore[attr-defined]  # for tests and benchmarks (read-only handle; no per-user data)
    return app


def broker_unreachable(exc: Exception):
    """Every callback's error handler with a broker: a broker or object store that cannot be
    reached (the web worker's own calls, a job that could not be queued or polled) ends in a
    message next to what the visitor did, not in an HTTP 500 and a page left waiting: the
    load's status line for the Load button, the job's end (shown with Retry by ``finish``)
    for the background job, the page's status line otherwise. Anything else is raised as
    before."""
    said = unreachable(exc)
    if said is None:
        raise exc
    log.warning("a callback could not reach the broker: %s", said)
    message = f"{said[:1].upper()}{said[1:]}. The server keeps running; press Retry (or Load) once it is back."
    targets = {o["id"] for o in _flat(callback_context.outputs_grouping)}
    if ids.JOB_DONE in targets:  # the job could not be queued or polled: its end says why
        values = {**callback_context.inputs, **callback_context.states}
        request = values.get(f"{ids.JOB_REQUEST}.data")
        request = request if isinstance(request, dict) else {}
        done = {"request": request.get("request"), "error": message, "nonce": page_nonce(request)}
        if len(targets) == 1:  # the job itself
            return done
        return {"done": done, "cancel": True, "box": {"visibility": "hidden"}, "watch": True}  # its watchdog
    if ids.LOAD_STATUS in targets:  # the load could not be queued: said under the Load button
        return {name: message if name == "status" else no_update for name in LOAD_OUTPUTS}
    set_props(ids.STATUS, {"children": message})
    set_props(ids.RETRY, {"style": {}})
    return None


def _flat(grouping) -> list[dict]:
    """A callback's outputs (``{"id", "property"}`` each) from its grouping (one, a list, named)."""
    if isinstance(grouping, dict) and "id" in grouping and "property" in grouping:
        return [grouping]
    items = grouping.values() if isinstance(grouping, dict) else grouping if isinstance(grouping, list) else []
    return [o for item in items for o in _flat(item)]


def warm(app: Dash, state: dict | None = None) -> bool:
    """Compute the first views of a state (default: the default demo's) into the cache, so
    the page opens on results; True when everything it needs is cached afterwards. Warming
    is a convenience: a failure is logged and the page computes on demand."""
    ctx = app._wip_context
    try:
        state, _ = normalize(ctx, state or default_state())
        request = resolve_state(ctx, state, None).request
        if isinstance(request, dict):
            run_request(ctx, request)
        done = not isinstance(resolve_state(ctx, state, None).request, dict)
        logging.getLogger("wip").info("warmed %s: %s", state["ws"], "done" if done else "not all computed")
        return done
    except Exception:
        logging.getLogger("wip").exception("warming failed")
        return False


def content_security_policy(app: Dash) -> str:
    """No script but the app's own files and its inline scripts by hash (Dash's config and
    clientside callbacks: ``Dash.csp_hashes``), so markup a visitor smuggles into the page
    cannot run; no framing by other sites; no plugins. Styles may be inline (Plotly and Dash
    set element styles); images may be data:/blob: URLs (Plotly's PNG export)."""
    scripts = " ".join(["'self'", *app.csp_hashes()])
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src {scripts}",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def add_security_headers(app: Dash) -> None:
    """Every response says what it is (``nosniff``: an upload echoed back is never run as a
    script or page) and, for pages, where scripts may come from (see
    :func:`content_security_policy`, computed once the layout and callbacks are registered)."""
    policy: list[str] = []

    @app.server.after_request
    def headers(response):
        if not policy:
            policy.append(content_security_policy(app))
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Content-Security-Policy", policy[0])
        return response


class JobManager(DiskcacheManager):
    """Dash's disk-cache job manager without its race on a job that ends while it is being
    looked at: Dash checks ``pid_exists`` and then opens the process, so a job ending in
    between raised ``psutil.NoSuchProcess`` out of a poll (an HTTP 500, about 1 in 350 polls
    of a refused Load under load). An ended job is not running and needs no killing."""

    def job_running(self, job):
        import psutil

        try:
            return super().job_running(job)
        except psutil.NoSuchProcess:  # ZombieProcess included
            return False

    def terminate_job(self, job):
        import psutil

        try:
            super().terminate_job(job)
        except psutil.NoSuchProcess:
            pass
        _reap()

    def call_job_fn(self, key, job_fn, args, context):
        """Start the job's process (as Dash does, through ``multiprocess``), forked by the
        worker's forking thread so that it dies with the worker and not with the request
        thread (:func:`dashboard.isolation.in_forking_thread`), and a reaper that collects it
        once it ends. The job first closes the sockets it inherits and arms
        ``PR_SET_PDEATHSIG`` (:func:`dashboard.isolation.become_child`)."""
        from multiprocess import Process

        parent = os.getpid()
        job_args = (key, self._make_progress_key(key), args, context)

        def start() -> int:
            process = Process(target=_job_process, args=(parent, job_fn, job_args))
            process.start()
            return process.pid

        pid = in_forking_thread(start)
        _start_reaper()
        _end_jobs_at_exit()
        return pid


def _job_process(parent: int, job_fn, job_args: tuple) -> None:
    """A background job's process: a child of the server like any other, then Dash's job."""
    become_child(parent)
    job_fn(*job_args)


_AT_EXIT: list = []  # the pid that registered _end_jobs (a forked worker registers its own)


def _end_jobs_at_exit() -> None:
    """When this process exits, end its job processes first: ``multiprocess`` joins them at
    exit (a server stopping would wait for every running computation to finish). Registered
    after ``multiprocess`` has registered its own exit function, so it runs before it."""
    import multiprocess.util  # noqa: F401 - registers its exit function (if not yet done)

    if _AT_EXIT != [os.getpid()]:
        _AT_EXIT[:] = [os.getpid()]
        atexit.register(_end_jobs)


def _end_jobs() -> None:
    import multiprocess

    if _AT_EXIT == [os.getpid()]:
        for process in multiprocess.active_children():
            process.kill()


_REAPER: list = []  # this worker's reaper thread, while it has job processes
_LAST_START = [0.0]  # when this worker last started a job (the reaper outlives it by 2 s)


def _reap() -> int:
    """Collect this worker's job processes that have ended (``multiprocess`` reaps its
    children only when the next one starts: an ended or cancelled job stayed a zombie, one
    per job, until then). Returns how many still run."""
    import multiprocess

    return len(multiprocess.active_children())


def _start_reaper() -> None:
    """One thread per worker that reaps ended jobs every half second while any run."""

    _LAST_START[0] = time.monotonic()
    if _REAPER and _REAPER[0].is_alive():
        return

    def loop():
        while _reap() or time.monotonic() - _LAST_START[0] < 2.0:
            time.sleep(0.5)

    _REAPER[:] = [threading.Thread(target=loop, name="job-reaper", daemon=True)]
    _REAPER[0].start()


_RETRY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1}  # Celery's, to Redis


def background_manager(config: Config):
    """Where background jobs run: forked children of the web worker, coordinated through a
    disk cache in the cache folder (one machine), or Celery workers behind a Redis broker
    (``--celery-broker``; compute workers may then live on other machines, each with a cache
    folder of its own: results, files and job records travel through the broker, see
    :mod:`dashboard.broker`). Returns (manager, celery app or None)."""
    if config.celery_broker:
        from celery import Celery
        from dash import CeleryManager

        celery_app = Celery("why_it_performs", broker=config.celery_broker, backend=config.celery_broker)
        celery_app.conf.update(
            task_acks_late=True,
            task_reject_on_worker_lost=True,  # a pool process killed mid-job: its job goes back to the queue
            worker_prefetch_multiplier=1,
            result_expires=3600,
            broker_connection_retry_on_startup=True,
            # a whole worker gone (killed, its machine lost): the job it had taken is handed to
            # another after requeue_after s (swept every 2 s); a job running longer than that
            # may be started a second time elsewhere, which its task locks make cheap
            broker_transport_options={
                "visibility_timeout": max(int(config.requeue_after), 1),
                "unacked_restore_interval": 2,
                "unacked_restore_throttle": 1,
                "socket_connect_timeout": 5,  # a broker that cannot be reached: said within seconds, never a hang
                "socket_timeout": 30,
            },
            redis_socket_connect_timeout=5,
            redis_socket_timeout=30,
            task_publish_retry_policy=_RETRY,
            result_backend_transport_options={"retry_policy": _RETRY},
        )
        register_part_task(celery_app, config)
        return CeleryManager(celery_app, expire=3600), celery_app
    jobs_cache = ForkSafeCache(str(config.cache_path / "jobs"))  # job processes fork from threads
    return JobManager(jobs_cache, expire=3600), None


def register_part_task(celery_app, config: Config) -> None:
    """The Celery task a split job sends its parts as (``callbacks.compute.run_request``):
    run planned tasks of a workspace into the cache (and the broker), in an isolated process with the
    job limits; returns how many it computed. A part another process finished (or is
    computing: the per-task lock) is skipped, so parts may be sent to every worker and run
    in any order; parts of a job that has ended (``jobs.job_ended``) are not run."""

    @celery_app.task(name=jobs.PART_TASK, acks_late=True)
    def compute_part(ws_id: str, tasks: list, token: str | None = None) -> int:
        ctx = make_context(config)
        ws = ctx.store.workspace(ws_id)
        if ws is None or not planning.missing(ctx.store, tasks):
            return 0
        if token and jobs.job_ended(ctx.store, token):  # cancelled or over: no process, no model load
            return 0
        # the data set (our own parquet, written at upload), read once per worker process: the
        # isolated process of each message inherits it; the model loads there, in isolation
        if not all(jobs.spec_for(t["kind"]).reads_rows for t in tasks):  # those read their own rows
            ctx.store.data(ws)
        return run_parts(ctx, ws, tasks, token)


def _assets_folder() -> Path:
    """The page's CSS and scripts: ``assets/`` beside the package in the repository (an
    editable install too); ``dashboard/assets`` in an installed wheel (pyproject.toml ships
    the repository's folder there)."""
    here = Path(__file__).resolve().parent
    installed = here / "assets"
    return installed if installed.is_dir() else here.parent / "assets"


#: what the /upload route takes, by kind: the model formats' table (and .model / .bst, the suffixes
#: of LightGBM's and XGBoost's examples, read by content at Load), the data and labels files
UPLOAD_SUFFIXES = {"model": ACCEPTED_SUFFIXES, "data": DATA_SUFFIXES, "labels": labels.SUFFIXES}


def _trust_proxies(server, hops: int) -> None:
    """The client's address from ``X-Forwarded-For`` when the operator says how many proxies
    are in front (the upload quota is per client)."""
    if hops:
        from werkzeug.middleware.proxy_fix import ProxyFix

        server.wsgi_app = ProxyFix(server.wsgi_app, x_for=hops)


def _refused(verdict, status=429):
    """The answer to an upload the quota refuses, with when to try again."""
    response = jsonify(error=verdict.message)
    response.status_code = status
    response.headers["Retry-After"] = str(verdict.retry_after)
    return response


def add_upload_route(server, ctx: Context) -> None:
    """POST /upload (multipart, field ``file``): streams the file to the upload folder.

    The size limit is enforced by Werkzeug while it reads the body (before anything is
    decoded); the answer is JSON ``{"id", "name", "size"}`` or ``{"error"}``. The id is a
    random token: the only handle callbacks get.
    """
    limit = config_limit = ctx.config.upload_limit_mb * 2**20
    suffixes = UPLOAD_SUFFIXES
    # a labels file is small text: its own limit, far below the upload limit
    kind_limit = {"labels": min(labels.MAX_BYTES, config_limit)}
    last_purge = [0.0]
    quota = UploadQuota(
        ctx.store.root,
        per_minute=ctx.config.upload_per_minute,
        bytes_per_hour=ctx.config.upload_mb_per_hour * 2**20,
        disk_budget=max(ctx.config.upload_disk_mb, ctx.config.upload_limit_mb) * 2**20,
    )
    _trust_proxies(server, ctx.config.trusted_proxies)

    @server.route(ctx.config.url_prefix + UPLOAD, methods=["POST"])
    def upload():
        if time.time() - last_purge[0] > 600:
            last_purge[0] = time.time()
            ctx.store.purge_uploads(ctx.config.upload_ttl_hours)
        request.max_content_length = limit + _FORM_OVERHEAD
        too_big = (
            f"The file is larger than this server's upload limit of {ctx.config.upload_limit_mb} MiB "
            "(option --upload-limit-mb)."
        )
        if request.content_length is not None and request.content_length > limit + _FORM_OVERHEAD:
            return jsonify(error=too_big), 413
        verdict = quota.admit(client_key(request.remote_addr), request.content_length or limit)
        if not verdict.ok:
            return _refused(verdict)
        try:
            kind = request.form.get("kind", "")
            file = request.files.get("file")
        except RequestEntityTooLarge:
            return jsonify(error=too_big), 413
        if kind not in suffixes:
            said = "The upload must say whether it is a 'model' or 'data' file (or a 'labels' file)."
            return jsonify(error=said), 400
        if file is None or not file.filename:
            return jsonify(error="No file was sent (form field 'file')."), 400
        name = upload_name(file.filename)
        suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
        if suffix not in suffixes[kind]:
            return jsonify(
                error=f"{name}: a {kind} file must end in {', '.join(suffixes[kind])} (got {suffix or 'no suffix'})."
            ), 400
        token, path = ctx.store.new_upload(name)
        marker = path.parent / WRITING  # the disk budget never evicts an upload being received
        marker.touch()
        try:
            file.save(path)
        except RequestEntityTooLarge:
            shutil.rmtree(path.parent, ignore_errors=True)
            return jsonify(error=too_big), 413
        except OSError as exc:  # a full disk: no partial file stays, and the page gets a message
            shutil.rmtree(path.parent, ignore_errors=True)
            log.warning("upload could not be written: %s", exc)
            return jsonify(error="The server could not store the file (no space left); try again later."), 507
        finally:
            marker.unlink(missing_ok=True)
        size = path.stat().st_size
        if size > config_limit:
            shutil.rmtree(path.parent, ignore_errors=True)
            return jsonify(error=too_big), 413
        if size > kind_limit.get(kind, config_limit):
            shutil.rmtree(path.parent, ignore_errors=True)
            return jsonify(error=f"{name}: a labels file is at most {kind_limit[kind] // 1024} KiB."), 413
        room = quota.enforce_disk_budget(ctx.store.root / "uploads", keep=path.parent)
        if not room.ok:
            shutil.rmtree(path.parent, ignore_errors=True)
            return _refused(room, 507)
        try:  # machines sharing only the broker: the one whose job loads it reads it there
            ctx.store.publish_upload(token)
        except BrokerError as exc:
            shutil.rmtree(path.parent, ignore_errors=True)
            log.warning("upload could not be kept in the broker: %s", exc)
            return jsonify(error=f"{name}: the server could not keep the file ({exc}); try again later."), 503
        return jsonify(id=token, name=name, size=size)
