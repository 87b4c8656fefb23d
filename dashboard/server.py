"""The Dash app factory: layout, callbacks, background-callback manager and upload route."""

from __future__ import annotations

import functools
import io
import ipaddress
import logging
import os
import re
import shutil
import socket
import threading
import time
import unicodedata
from pathlib import Path
from urllib.parse import urlsplit

from dash import Dash, DiskcacheManager
from dash.exceptions import DependencyException, InvalidResourceError, PreventUpdate
from flask import Response, abort, jsonify, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge, RequestTimeout

from . import jobs, layout, planning
from .callbacks import register_all
from .callbacks.compute import run_parts
from .config import Config
from .loading import DATA_SUFFIXES, MODEL_SUFFIXES, preload
from .quota import WRITING, UploadQuota, client_key
from .state import Context, make_context
from .store import ForkSafeCache

log = logging.getLogger(__name__)
_FORM_OVERHEAD = 64 * 1024


def create_app(config: Config) -> Dash:
    ctx = make_context(config)
    manager, celery_app = background_manager(config)
    app = Dash(
        __name__,
        title="Why it performs",
        assets_folder=str(_assets_folder()),
        background_callback_manager=manager,
        suppress_callback_exceptions=False,
    )
    app._wip_celery = celery_app  # type: ignore[attr-defined]
    app.server.secret_key = config.secret_key
    limit_requests(app.server)
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
    app.server.test_client().get("/")
    app._wip_context = ctx  # type: ignore[attr-defined]  # for tests and benchmarks (read-only handle; no per-user data)
    return app


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


CALLBACK_BODY_LIMIT = 2 * 2**20  # the largest honest callback body is a few hundred KiB
UPLOAD_PATH = "/upload"


def limit_requests(server) -> None:
    """Bodies over CALLBACK_BODY_LIMIT get 413 on every route (``/upload`` raises its own
    limit per request), chunked ones included (:class:`BodyGuard`), and JSON nested too
    deeply for the parser gets 400, not a 500. A body that arrives too slowly gets 408."""
    server.config["MAX_CONTENT_LENGTH"] = CALLBACK_BODY_LIMIT
    server.wsgi_app = BodyGuard(server.wsgi_app)

    @server.before_request
    def refused_body():
        refusal = request.environ.get(BodyGuard.REFUSED)
        if refusal is not None:
            raise refusal

    @server.errorhandler(RecursionError)
    def too_deep(_exc):
        return jsonify(error="The request is nested too deeply."), 400

    @server.errorhandler(RequestTimeout)
    def too_slow(_exc):
        return jsonify(error="The request arrived too slowly; try again."), 408


# --- request bodies: size, pace, and how many one client may keep open -------------------------
BODY_GRACE = 10.0  # seconds any request body may take before it must keep BODY_MIN_RATE
BODY_MIN_RATE = 8 * 1024  # bytes a second a body must average after the grace (64 kbit/s)
BODY_PER_CLIENT = 2  # bodies one client may have arriving at once in a worker with the full grace
BODY_BUSY_GRACE = 0.5  # the grace of a client's further bodies while those arrive
_STEP = 16 * 1024  # the most read from the server at once: progress is seen in steps this size


class _Body:
    """A request body as it arrives (the WSGI input, read through): how much came, and by
    when the rest is due: ``grace`` seconds from the first read plus one second per
    BODY_MIN_RATE bytes received (Apache's mod_reqtimeout, ``body=10,MinRate=8192``). Time
    the server spends before it reads (``/upload`` checks the quota first) is not counted."""

    def __init__(self, raw, sock: socket.socket | None, client: str, length: int | None):
        self.raw, self.sock, self.client, self.length = raw, sock, client, length
        self.start: float | None = None  # the first read
        self.grace = BODY_GRACE
        self.received = 0
        self.finished = False  # read to its end
        self.expired = False  # fell behind: cut

    def due(self) -> float:
        if self.start is None:
            return float("inf")
        return self.start + self.grace + self.received / BODY_MIN_RATE

    def _begin(self) -> None:
        if self.start is None:
            self.start = time.monotonic()
        if self.expired or time.monotonic() > self.due():
            raise self._late()

    def cut(self) -> None:
        """Stop receiving: a read blocked on the connection returns at once, and gunicorn
        closes the connection after the answer instead of draining (or lingering on) the
        rest of the body."""
        self.expired = True
        if hasattr(self.raw, "failed"):  # gunicorn's Body: the connection is not reused
            self.raw.failed = True
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RD)
            except OSError:
                pass

    def _late(self) -> RequestTimeout:
        self.cut()
        return RequestTimeout(f"The request body arrived too slowly (under {BODY_MIN_RATE // 1024} KiB/s).")

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(_STEP), b""))
        if size == 0 or self.finished:
            return b""
        self._begin()
        want = min(size, _STEP)
        if self.length is not None:
            want = min(want, self.length - self.received)
        if want <= 0:
            self.finished = True
            return b""
        try:
            data = self.raw.read(want)
        except Exception:
            if self.expired:
                raise self._late() from None
            raise
        if self.expired:  # the watchdog shut the connection while this read waited
            raise self._late()
        self.received += len(data)
        if not data or (self.length is not None and self.received >= self.length):
            self.finished = True
        return data

    def readline(self, size: int | None = -1) -> bytes:
        if self.finished:
            return b""
        self._begin()
        data = self.raw.readline(_STEP if size is None or size < 0 else min(size, _STEP))
        if self.expired:
            raise self._late()
        self.received += len(data)
        if not data or (self.length is not None and self.received >= self.length):
            self.finished = True
        return data

    def __iter__(self):
        return iter(self.readline, b"")


class _Receiving:
    """This worker's request bodies still arriving. A watchdog thread (while there are any)
    cuts each one that falls behind its due time, so a client trickling a byte a second, or
    sending nothing after its headers, holds a worker thread for BODY_GRACE seconds, not for
    ever. A client with BODY_PER_CLIENT bodies arriving gets BODY_BUSY_GRACE for more: one
    address cannot hold many threads with slow bodies, while honest bodies, read as soon as
    they arrive, never notice."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bodies: set[_Body] = set()
        self.watchdog: threading.Thread | None = None

    def add(self, body: _Body) -> None:
        with self.lock:
            arriving = sum(1 for b in self.bodies if b.client == body.client and not b.finished)
            if arriving >= BODY_PER_CLIENT:
                body.grace = BODY_BUSY_GRACE
            self.bodies.add(body)
            if body.sock is not None and (self.watchdog is None or not self.watchdog.is_alive()):
                self.watchdog = threading.Thread(target=self._watch, name="body-watchdog", daemon=True)
                self.watchdog.start()

    def remove(self, body: _Body) -> None:
        with self.lock:
            self.bodies.discard(body)

    def _watch(self) -> None:
        while True:
            time.sleep(0.1)
            now = time.monotonic()
            with self.lock:
                if not self.bodies:
                    self.watchdog = None
                    return
                late = [b for b in self.bodies if not (b.finished or b.expired) and now > b.due()]
            for body in late:
                body.cut()


_RECEIVING = _Receiving()


def _content_length(environ) -> int | None:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    return length if length > 0 else None


class BodyGuard:
    """WSGI middleware for request bodies (``/upload`` streams; any other body is at most
    CALLBACK_BODY_LIMIT and is read here, before the app runs):

    - a chunked body (no Content-Length) over the limit gets 413 once the limit is passed.
      Werkzeug's own limit on a stream quietly cuts a chunked body at the limit (and the
      first 2 MiB of a forged body then parsed as the whole), and would read the rest
      into memory first;
    - each body must keep pace (:class:`_Body`, :class:`_Receiving`), else 408 and the
      connection is closed;
    - a refused body left unread closes the connection rather than being drained by gunicorn
      (which lingers up to 2 s on its main thread with a trickling client).
    A refusal is raised in the app (``REFUSED``), so it carries the usual headers."""

    REFUSED = "wip.refused_body"

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        length = None if chunked else _content_length(environ)
        if not chunked and length is None:
            return self.app(environ, start_response)
        sock = environ.get("gunicorn.socket") if environ.get("SERVER_PROTOCOL", "").startswith("HTTP/1") else None
        body = _Body(environ["wsgi.input"], sock, client_key(environ.get("REMOTE_ADDR")), length)
        statuses: list[int] = []

        def start(status, headers, exc_info=None):
            statuses.append(int(status.split(" ", 1)[0]))
            return start_response(status, headers, exc_info)

        _RECEIVING.add(body)
        try:
            if environ.get("PATH_INFO") == UPLOAD_PATH:
                environ["wsgi.input"] = body
            elif length is None or length <= CALLBACK_BODY_LIMIT:
                self._buffer(environ, body)
            return self.app(environ, start)
        finally:
            _RECEIVING.remove(body)
            if not body.finished and (body.expired or any(s >= 400 for s in statuses)):
                body.cut()

    def _buffer(self, environ, body: _Body) -> None:
        data = bytearray()
        try:
            while len(data) <= CALLBACK_BODY_LIMIT:
                chunk = body.read(CALLBACK_BODY_LIMIT + 1 - len(data))
                if not chunk:
                    break
                data += chunk
        except RequestTimeout as exc:
            environ[self.REFUSED] = exc
            data = bytearray()
        if len(data) > CALLBACK_BODY_LIMIT:
            environ[self.REFUSED] = RequestEntityTooLarge()
            data = bytearray()
        environ["wsgi.input"] = io.BytesIO(bytes(data))
        environ["CONTENT_LENGTH"] = str(len(data))
        environ.pop("HTTP_TRANSFER_ENCODING", None)


# --- methods, cross-site requests, Host, malformed callback envelopes ------------------------
def guard_routes(app: Dash, config: Config) -> None:
    """What reaches the routes that change state (``/_dash-update-component``, ``/upload``):

    - only POST (other methods get 405, not the page the catch-all route would answer);
    - not a cross-site request (:func:`cross_site`: a form or script on another site cannot
      upload files or run callbacks with a visitor's browser), 403;
    - on a loopback connection, only a Host that is an IP address or ``localhost``
      (:func:`rebound_host`), so a site whose name was re-pointed at 127.0.0.1 (DNS
      rebinding) cannot use a dashboard running on a visitor's own machine; not applied
      behind ``--trusted-proxies``, where the proxy chooses the host;
    - a callback envelope Dash cannot read (not an object, an unknown output, wrong types)
      gets 400 (:func:`guard_callbacks`); a Dash resource path that is not one gets 404.
    Nothing builds a URL from the Host header: pages use relative paths, there are no
    redirects, the report's link is the browser's own address (``export.report_base``)."""
    server = app.server
    prefix = app.config.routes_pathname_prefix
    post_only = {prefix + "_dash-update-component", UPLOAD_PATH}
    check_host = not config.trusted_proxies

    @server.before_request
    def guard():
        if check_host and rebound_host(request.remote_addr, request.host):
            return _text(
                "This server answers a local connection only at localhost or an IP address "
                "(behind a reverse proxy, start it with --trusted-proxies).",
                403,
            )
        if request.path in post_only and request.method != "POST":
            abort(405, valid_methods=["POST"])
        if request.method not in ("GET", "HEAD", "OPTIONS") and cross_site(request.headers, request.host):
            return jsonify(error="Requests from other sites are refused."), 403
        return None

    @server.errorhandler(DependencyException)
    def not_a_resource(_exc):
        return _text("Not found.", 404)

    guard_callbacks(app)


def _text(message: str, status: int) -> Response:
    return Response(message, status=status, content_type="text/plain; charset=utf-8")


def cross_site(headers, host: str) -> bool:
    """Whether a browser sent this request for another site's page (Go's
    ``http.CrossOriginProtection``): its ``Sec-Fetch-Site`` (every current browser) is not
    ``same-origin`` (or ``none``: typed by the user); without it, its ``Origin`` is not this
    host. A request without either is not from a browser and not cross-site."""
    site = headers.get("Sec-Fetch-Site")
    if site is not None:
        return site.strip().lower() not in ("same-origin", "none")
    origin = headers.get("Origin")
    if origin is None:
        return False
    try:
        return urlsplit(origin.strip()).netloc.lower() != (host or "").lower()
    except ValueError:
        return True


def rebound_host(remote_addr: str | None, host: str | None) -> bool:
    """A loopback connection (the visitor's browser on this machine) naming a host that is
    not ``localhost`` or an IP address: a DNS-rebinding site."""
    try:
        peer = ipaddress.ip_address(remote_addr or "")
    except ValueError:
        return False
    mapped = getattr(peer, "ipv4_mapped", None)
    if not (peer.is_loopback or (mapped is not None and mapped.is_loopback)):
        return False
    name = (host or "").strip().lower()
    if name.startswith("["):  # [::1]:8050
        name = name[1 : name.find("]")]
    elif name.count(":") == 1:  # name:port (more colons: a bare IPv6 address)
        name = name.split(":")[0]
    name = name.rstrip(".")
    if not name or name == "localhost" or name.endswith(".localhost"):
        return False
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return True
    return False


_PROJECT = tuple(str(Path(__file__).resolve().parent.parent / part) + os.sep for part in ("dashboard", "compute"))


def _in_project(exc: BaseException) -> bool:
    """Whether the exception (or one it came from) passed through this project's code."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    first = True
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        tb = current.__traceback__
        if first and tb is not None:  # the frame that caught it: the guard itself
            tb, first = tb.tb_next, False
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.startswith(_PROJECT):
                return True
            tb = tb.tb_next
        pending += [current.__cause__, current.__context__]
    return False


def guard_callbacks(app: Dash) -> None:
    """``/_dash-update-component`` answers 400 to an envelope Dash cannot read: not a JSON
    object, an output no callback has, inputs or outputs of the wrong types or numbers. Dash
    raises on these (an HTTP 500); an error raised in this project's own code (a callback)
    still is a 500, logged, so a bug is not mistaken for a forged request."""
    server = app.server
    path = app.config.routes_pathname_prefix + "_dash-update-component"
    endpoint = next(rule.endpoint for rule in server.url_map.iter_rules() if rule.rule == path)
    dispatch = server.view_functions[endpoint]
    callbacks = app.callback_map

    def refuse(message: str):
        return jsonify(error=f"Malformed callback request: {message}."), 400

    @functools.wraps(dispatch)
    def guarded(*args, **kwargs):
        body = request.get_json()
        if not isinstance(body, dict):
            return refuse("not a JSON object")
        output = body.get("output")
        if not isinstance(output, str) or output not in callbacks:
            return refuse("no such callback")
        for key, kinds in (("inputs", (list,)), ("state", (list,)), ("outputs", (list, dict))):
            if key in body and not isinstance(body[key], kinds):
                return refuse(f"'{key}' has the wrong type")
        if not isinstance(body.get("changedPropIds", []), list):
            return refuse("'changedPropIds' has the wrong type")
        try:
            return dispatch(*args, **kwargs)
        except (HTTPException, PreventUpdate, InvalidResourceError, RecursionError):
            raise
        except Exception as exc:
            if _in_project(exc):
                raise
            log.info("malformed callback request refused: %s: %s", type(exc).__name__, str(exc)[:200])
            return refuse(type(exc).__name__)

    server.view_functions[endpoint] = guarded


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
        """Start the job's process, and a reaper that collects it once it ends."""
        pid = super().call_job_fn(key, job_fn, args, context)
        _start_reaper()
        return pid


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
    import threading

    _LAST_START[0] = time.monotonic()
    if _REAPER and _REAPER[0].is_alive():
        return

    def loop():
        while _reap() or time.monotonic() - _LAST_START[0] < 2.0:
            time.sleep(0.5)

    _REAPER[:] = [threading.Thread(target=loop, name="job-reaper", daemon=True)]
    _REAPER[0].start()


def background_manager(config: Config):
    """Where background jobs run: forked children of the web worker, coordinated through a
    disk cache in the shared cache folder (one machine), or Celery workers behind a broker
    such as Redis (``--celery-broker``; compute workers may then live on other machines,
    sharing the cache folder, e.g. over NFS). Returns (manager, celery app or None)."""
    if config.celery_broker:
        from celery import Celery
        from dash import CeleryManager

        celery_app = Celery("why_it_performs", broker=config.celery_broker, backend=config.celery_broker)
        celery_app.conf.update(
            task_acks_late=True,
            worker_prefetch_multiplier=1,
            result_expires=3600,
            broker_connection_retry_on_startup=True,
        )
        register_part_task(celery_app, config)
        return CeleryManager(celery_app, expire=3600), celery_app
    jobs_cache = ForkSafeCache(str(config.cache_path / "jobs"))  # job processes fork from threads
    return JobManager(jobs_cache, expire=3600), None


def register_part_task(celery_app, config: Config) -> None:
    """The Celery task a split job sends its parts as (``callbacks.compute.run_request``):
    run planned tasks of a workspace into the shared cache, in an isolated process with the
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
        ctx.store.data(ws)
        return run_parts(ctx, ws, tasks, token)


def _assets_folder():
    from pathlib import Path

    return Path(__file__).resolve().parent.parent / "assets"


def add_upload_route(server, ctx: Context) -> None:
    """POST /upload (multipart, field ``file``): streams the file to the upload folder.

    The size limit is enforced by Werkzeug while it reads the body (before anything is
    decoded); the answer is JSON ``{"id", "name", "size"}`` or ``{"error"}``. The id is a
    random token: the only handle callbacks get.
    """
    limit = config_limit = ctx.config.upload_limit_mb * 2**20
    suffixes = {"model": MODEL_SUFFIXES, "data": DATA_SUFFIXES}
    last_purge = [0.0]
    quota = UploadQuota(
        ctx.store.root,
        per_minute=ctx.config.upload_per_minute,
        bytes_per_hour=ctx.config.upload_mb_per_hour * 2**20,
        disk_budget=max(ctx.config.upload_disk_mb, ctx.config.upload_limit_mb) * 2**20,
    )
    if ctx.config.trusted_proxies:
        from werkzeug.middleware.proxy_fix import ProxyFix

        server.wsgi_app = ProxyFix(server.wsgi_app, x_for=ctx.config.trusted_proxies)

    def refused(verdict, status=429):
        response = jsonify(error=verdict.message)
        response.status_code = status
        response.headers["Retry-After"] = str(verdict.retry_after)
        return response

    @server.route(UPLOAD_PATH, methods=["POST"])
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
            return refused(verdict)
        try:
            kind = request.form.get("kind", "")
            file = request.files.get("file")
        except RequestEntityTooLarge:
            return jsonify(error=too_big), 413
        if kind not in suffixes:
            return jsonify(error="The upload must say whether it is a 'model' or 'data' file."), 400
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
        room = quota.enforce_disk_budget(ctx.store.root / "uploads", keep=path.parent)
        if not room.ok:
            shutil.rmtree(path.parent, ignore_errors=True)
            return refused(room, 507)
        return jsonify(id=token, name=name, size=size)


_NOT_SHOWN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}  # controls, bidi and other format marks, line breaks


def upload_name(raw) -> str:
    """The name an upload is known by (shown, checked for its suffix, and the base of the
    stored file's name, ``store.safe_name``): the last part of what the browser sent (``/``
    and ``\\`` both end a folder: a Unix, Windows or ``../`` path keeps only its file name,
    RFC 5987 ``filename*`` included), without control, NUL, bidi-override or line-break
    characters, at most 180 characters before a suffix of at most 16."""
    name = unicodedata.normalize("NFC", str(raw or ""))
    name = re.split(r"[\\/]", name)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch) not in _NOT_SHOWN).strip()
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        return name.strip(" .")[:180] or "upload"
    stem = stem.strip(" .")[:180] or "upload"
    suffix = suffix.strip()[:16]
    return f"{stem}.{suffix}" if suffix else stem
