"""The HTTP surface a visitor's browser reaches, defended (issue 29): request bodies (size,
chunked, pace), methods, cross-site requests, the Host of loopback connections, malformed
callback envelopes, and the names uploads are known by. :func:`dashboard.server.create_app`
installs them (:func:`limit_requests`, :func:`guard_routes`)."""

from __future__ import annotations

import functools
import io
import ipaddress
import logging
import os
import re
import socket
import threading
import time
import unicodedata
from pathlib import Path
from urllib.parse import urlsplit

from dash import Dash
from dash.exceptions import DependencyException, InvalidResourceError, PreventUpdate
from flask import Response, abort, jsonify, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge, RequestTimeout

from .config import Config
from .quota import client_key

log = logging.getLogger(__name__)


CALLBACK_BODY_LIMIT = 2 * 2**20  # the largest honest callback body is a few hundred KiB
UPLOAD = "upload"  # the upload route, under the URL prefix (upload.js posts to it relative to the page)


def limit_requests(server, prefix: str = "/") -> None:
    """Bodies over CALLBACK_BODY_LIMIT get 413 on every route (``/upload`` raises its own
    limit per request), chunked ones included (:class:`BodyGuard`), and JSON nested too
    deeply for the parser gets 400, not a 500. A body that arrives too slowly gets 408."""
    server.config["MAX_CONTENT_LENGTH"] = CALLBACK_BODY_LIMIT
    server.wsgi_app = BodyGuard(server.wsgi_app, prefix + UPLOAD)

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

    def __init__(self, app, upload_path: str = "/" + UPLOAD):
        self.app = app
        self.upload_path = upload_path  # its body streams to the route, which sets its own limit

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
            if environ.get("PATH_INFO") == self.upload_path:
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
    post_only = {prefix + "_dash-update-component", prefix + UPLOAD}
    check_host = not config.trusted_proxies

    @server.before_request
    def guard():
        if check_host and rebound_host(request.remote_addr, request.environ.get("HTTP_HOST")):
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
    not ``localhost`` (or a name under it) or an IP address: a DNS-rebinding site. ``host``
    is the raw Host header: Werkzeug's ``request.host`` is empty for one it cannot read
    (``a_b.evil.example``), which must not pass for a local name, so a Host that does not
    parse is refused too. None (no header: HTTP/1.0, never a browser's) names nothing."""
    try:
        peer = ipaddress.ip_address(remote_addr or "")
    except ValueError:
        return False
    mapped = getattr(peer, "ipv4_mapped", None)
    if not (peer.is_loopback or (mapped is not None and mapped.is_loopback)):
        return False
    if host is None:
        return False
    name = host_name(host)
    if name is None:
        return True
    if name == "localhost" or name.endswith(".localhost"):
        return False
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return True
    return False


_HOST = re.compile(r"(\[[^\]]*\]|[^:]*)(?::([0-9]{1,5}))?")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def host_name(host: str) -> str | None:
    """The name or IP address a Host header value (``name``, ``name:port``, ``[v6]:port``)
    names, lower-case, without a final dot; None for one that is not a host: empty, a port
    that is not one, or a name that is not letters, digits and hyphens in dot-separated
    labels (RFC 1123; a browser sends an international name as punycode)."""
    host = host.strip(" \t").lower()
    if host.count(":") > 1 and not host.startswith("["):  # a bare IPv6 address
        host = f"[{host}]"
    match = _HOST.fullmatch(host)
    if match is None or (match[2] is not None and not 0 < int(match[2]) < 65536):
        return None
    name = match[1]
    if name.startswith("["):
        try:
            return str(ipaddress.IPv6Address(name[1:-1]))
        except ValueError:
            return None
    name = name.removesuffix(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return None
    return name


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
