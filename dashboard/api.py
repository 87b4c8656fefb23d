"""The Python doors: ``dashboard.show(models, data, target)`` and ``dashboard.report(models,
data, target, path)``.

The caller's objects (fitted models, a data frame) are pickled to a private file and
handed to a fresh interpreter that opens them as a data set and writes the review
(``python -m dashboard.cli --session``): nothing here imports the dashboard or runs a model,
so a notebook whose XGBoost or scikit-learn OpenMP pool is running never forks (a child
forked from a running pool hangs), and the models still run only in the job processes
that interpreter forks. This module imports nothing of the dashboard's: ``import
dashboard`` stays light."""

from __future__ import annotations

import atexit
import html
import importlib.util
import json
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import webbrowser
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from compute.validation import as_pandas

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Pickled:
    """A model as bytes: ``how`` "pickle" (``pickle.dumps``) or "joblib" (a joblib file's
    bytes), unpickled by ``dashboard.session_models`` in the job process that runs it; or
    "file:SUFFIX", a booster's own file format, loaded as that file is."""

    blob: bytes
    how: str = "pickle"


class ShowError(ValueError):
    """The dashboard could not show the data set: the message says why (a missing column,
    a model that cannot be used, a server that did not start)."""


class ReportError(ValueError):
    """The review could not be written: a missing column, a model that cannot be used, an
    object that cannot be handed over. The message says which."""


def report(
    models,
    data,
    target: str,
    path,
    *,
    json_path=None,
    loss: str | None = None,
    title: str = "",
    cache_dir=".wip-cache",
    progress: bool = True,
    held_out: bool = False,
    positive_class=None,
    labels=None,
    columns_in_order: bool = False,
) -> dict:
    """Write the dashboard's one-file HTML review of ``models`` on ``data`` to ``path``.

    ``models``: one fitted model (anything with ``predict``/``predict_proba``: scikit-learn
    estimators and pipelines, the XGBoost/LightGBM/CatBoost scikit-learn wrappers) or a
    ``{name: model}`` dict; ``data``: a pandas DataFrame (or a Polars DataFrame or PyArrow
    Table, converted once, or the path of a .csv/.parquet file or of a Parquet data set: a
    folder of files or a glob) holding the ``target`` column. All
    sections are computed (PFI and its caveats, SFIMP, subgroups found, the curves of the
    most important feature, performance). Returns the numbers behind the report (also
    written to ``json_path`` when given): each model's PFI with its standard error and
    every view's numbers. ``held_out=True``: the models did not train on these rows (the
    report then drops its warning that the errors are optimistic); ``positive_class``: the
    class whose probability is explained; ``labels``: human labels of features and classes,
    ``{"features": {"income_k": "Yearly income (k$)"}, "classes": {"1": "churned"}}`` or the
    path of such a JSON file, shown on axes, in tables, in the findings and in the report
    (the column names stay the keys of the returned numbers); ``columns_in_order=True``: the
    data's columns (the target left out) are in the order a model that names no inputs was
    trained on (XGBoost/LightGBM/CatBoost trained on arrays, a single-tensor ONNX model).
    Raises :class:`ReportError` with a one-line reason."""
    named = _pickled(models)
    data = _data_given(data, ReportError)
    # absolute: the dashboard's process runs from the package's folder, relative paths are the caller's
    out, cache_dir = Path(path).absolute(), Path(cache_dir).absolute()
    with tempfile.TemporaryDirectory(prefix="wip-report-") as folder:
        session = Path(folder) / "session.pkl"
        numbers = Path(json_path).absolute() if json_path is not None else Path(folder) / "numbers.json"
        try:
            with open(os.open(session, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                given = {"models": named, "data": data, "target": target, "title": title, "held_out": bool(held_out)}
                given.update(positive_class=positive_class, labels=_labels_given(labels, ReportError))
                given.update(columns_in_order=bool(columns_in_order))
                pickle.dump(given, handle, protocol=5)
        except ReportError:
            raise
        except Exception as exc:  # a lambda in a pipeline, an open connection: the object stays here
            raise ReportError(
                f"The models and data could not be handed to the dashboard's process ({type(exc).__name__}: {exc})."
            ) from exc
        command = [sys.executable, "-m", "dashboard.cli", "--session", str(session), "--out", str(out)]
        command += ["--json", str(numbers), "--cache-dir", str(cache_dir)] + (["--loss", loss] if loss else [])
        done = subprocess.run(command, cwd=ROOT, stderr=subprocess.PIPE, text=True, env=_env())
        if progress and done.stderr:
            sys.stderr.write(done.stderr)
        if done.returncode != 0:
            reasons = [line[len("error: ") :] for line in done.stderr.splitlines() if line.startswith("error: ")]
            raise ReportError(reasons[-1] if reasons else done.stderr.strip()[-500:] or "the review failed")
        return json.loads(numbers.read_text(encoding="utf-8"))


class Shown:
    """A data set ``dashboard.show`` opened: its page's ``url`` (what the person's browser
    opens: under a Jupyter server's proxy the path ``<base_url>proxy/<port>/?ws=...`` on the
    notebook's own address), ``local_url`` (the server itself on 127.0.0.1, for code running
    on this machine), and ``stop()`` to end the server (which every data set shown in this
    session shares)."""

    def __init__(self, server: _Server, url: str, ws: str, warnings: list[str], local_url: str = ""):
        self.server, self.url, self.ws, self.warnings = server, url, ws, warnings
        self.local_url = local_url or url

    def stop(self) -> None:
        self.server.stop()

    def __repr__(self) -> str:
        return f"Shown(url={self.url!r})"

    def _repr_html_(self) -> str:  # a notebook shows the page inline, with a link for a full tab
        url = html.escape(self.url, quote=True)  # under a proxy: a path on the notebook's own address
        return (
            f'<p><a href="{url}" target="_blank">Open the dashboard in a new tab</a></p>'
            f'<iframe src="{url}" width="100%" height="900" style="border:1px solid #ddd"></iframe>'
        )


class _Server:
    """The dashboard's server process of this session (``python -m dashboard.serve``)."""

    def __init__(self, port: int | None, cache_dir, *, keep: bool = False, base: str | None = None):
        self.inbox = Path(tempfile.mkdtemp(prefix="wip-show-"))  # private: 0700
        cache_dir = Path(cache_dir).absolute()  # the server runs from the package's folder: the caller's path
        self.port = port or _free_port()
        self.keep = keep
        self.base = base  # the Jupyter server's base URL whose proxy serves the page; None: none
        self.prefix = proxied_prefix(base, self.port) if base is not None else "/"
        tie = [] if keep else ["--parent", str(os.getpid())]  # it ends when this process ends, however
        served = ["--url-prefix", self.prefix] if base is not None else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dashboard.serve", "--inbox", str(self.inbox), "--port", str(self.port)]
            + ["--cache-dir", str(cache_dir), *tie, *served],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its job processes end with it (stop() ends the group)
        )
        line = self.process.stdout.readline() if self.process.stdout else ""
        if line.strip() != "READY":
            self.stop()
            raise ShowError(f"The dashboard's server did not start (it said {line.strip()[:200]!r}).")
        if keep:
            pid = self.process.pid
            print(
                f"The dashboard's server (process {pid}, port {self.port}) keeps running after this Python process"
                f" ends: stop it with shown.stop(), or from a shell with: kill -TERM -- -{pid}",
                file=sys.stderr,
            )
        else:
            atexit.register(self.stop)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def open(self, given: dict, timeout: float = 600.0) -> dict:
        """Hand a data set to the server; its reply (``ws`` or ``error``)."""
        name = f"{time.monotonic_ns()}-{os.getpid()}"
        partial = self.inbox / f"{name}.tmp"
        with open(os.open(partial, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
            pickle.dump(given, handle, protocol=5)
        partial.replace(self.inbox / f"{name}.pkl")
        answer = self.inbox / f"{name}.json"
        deadline = time.monotonic() + timeout
        while not answer.exists():
            if not self.alive:
                raise ShowError("The dashboard's server stopped while opening the data set.")
            if time.monotonic() > deadline:
                raise ShowError(f"The dashboard's server took more than {timeout:g} s to open the data set.")
            time.sleep(0.05)
        reply = json.loads(answer.read_text())
        answer.unlink(missing_ok=True)
        return reply

    def stop(self) -> None:
        if self.alive:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.process.pid, signal.SIGKILL)
        shutil.rmtree(self.inbox, ignore_errors=True)


_SERVER: _Server | None = None


def show(
    models,
    data,
    target: str,
    *,
    port: int | None = None,
    open_browser: bool = False,
    title: str = "",
    cache_dir=".wip-cache",
    keep: bool = False,
    held_out: bool = False,
    positive_class=None,
    labels=None,
    columns_in_order: bool = False,
    proxy: bool | str = "auto",
) -> Shown:
    """Show ``models`` on ``data`` (its ``target`` column the outcome) in the dashboard and
    return at once: a :class:`Shown` with the page's ``url`` and ``stop()``. In a notebook
    the page shows inline (with a link for a full tab). ``models``: one fitted model or a
    ``{name: model}`` dict (anything with ``predict``/``predict_proba``). The objects are
    handed to a server process of their own (a fresh interpreter), whose isolated job
    processes run them; calling ``show`` again adds a data set to the same server.

    The server ends when this Python process ends, however it ends (a kernel restarted or
    shut down, a script killed): ``keep=True`` lets it outlive the process (it prints how to
    stop it); asking for the other choice than the running server's starts a new server.
    ``held_out``, ``positive_class``, ``labels`` and ``columns_in_order`` as in :func:`report`.

    ``proxy``: in a notebook whose kernel runs under JupyterHub (``JUPYTERHUB_SERVICE_PREFIX``
    is set) or under a Jupyter server with ``jupyter-server-proxy`` installed, the person's
    browser may not reach this machine's 127.0.0.1: with ``"auto"`` (the default) the page
    is then served through the Jupyter server's own proxy, under ``<base_url>proxy/<port>/``,
    and the inline view and ``url`` are that path on the notebook's own address; elsewhere
    (a script, VS Code, a notebook server without the proxy) the page is at
    ``http://127.0.0.1:<port>/``. ``proxy=True`` forces the proxy's path (the base URL ``/``
    when no Jupyter server is found), ``proxy=False`` the direct address.
    Raises :class:`ShowError` with a one-line reason."""
    global _SERVER
    named = _pickled(models)
    data = _data_given(data, ShowError)
    shown_labels = _labels_given(labels, ShowError)
    if proxy not in (True, False, "auto"):
        raise ShowError(f"proxy must be True, False or 'auto' (got {proxy!r}).")
    base = jupyter_base(proxy)
    if base is not None and not re.fullmatch(r"/(?:[A-Za-z0-9._~-]+/)*", base):  # as dashboard.config's url_prefix
        raise ShowError(
            f"The Jupyter server's base URL {base[:80]!r} has characters the dashboard cannot serve under (only "
            "letters, digits and . _ ~ - between slashes); show(..., proxy=False) serves it at 127.0.0.1 instead."
        )
    current = _SERVER
    if (
        current is None
        or not current.alive
        or (port is not None and port != current.port)
        or current.keep != keep
        or current.base != base
    ):
        if current is not None:
            current.stop()
        _SERVER = current = _Server(port, cache_dir, keep=keep, base=base)
    try:
        given = {"models": named, "data": data, "target": target, "title": title}
        given.update(held_out=bool(held_out), positive_class=positive_class, labels=shown_labels)
        given.update(columns_in_order=bool(columns_in_order))
        reply = current.open(given)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise ShowError(
            f"The models and data could not be handed to the dashboard ({type(exc).__name__}: {exc})."
        ) from exc
    if "error" in reply:
        raise ShowError(reply["error"])
    local = f"http://127.0.0.1:{current.port}{current.prefix}?ws={reply['ws']}"
    url = f"{current.prefix}?ws={reply['ws']}" if current.base is not None else local
    shown = Shown(current, url, reply["ws"], list(reply.get("warnings", [])), local_url=local)
    if open_browser:
        webbrowser.open(local)
    return shown


def proxied_prefix(base: str, port: int) -> str:
    """The path of the page under a Jupyter server's proxy: ``<base_url>proxy/<port>/``."""
    return "/" + "/".join(p for p in (*base.split("/"), "proxy", str(port)) if p) + "/"


def jupyter_base(proxy: bool | str = "auto", environ: Mapping[str, str] | None = None) -> str | None:
    """The base URL of the Jupyter server whose proxy should serve the page, or None (serve
    at 127.0.0.1): JupyterHub's ``JUPYTERHUB_SERVICE_PREFIX`` (``/user/<name>/``); else the
    Jupyter server that started this kernel (its pid is the kernel's ``JPY_PARENT_PID``,
    found among ``list_running_servers()``) when ``jupyter_server_proxy`` is importable;
    ``proxy=True``: that, or ``/``; ``proxy=False``: None."""
    if proxy is False:
        return None
    env = os.environ if environ is None else environ
    hub = env.get("JUPYTERHUB_SERVICE_PREFIX", "").strip()
    if hub:
        return "/" + "/".join(p for p in hub.split("/") if p) + "/" if hub.strip("/") else "/"
    server = kernel_server(env)
    if server is not None and (proxy is True or importlib.util.find_spec("jupyter_server_proxy") is not None):
        return str(server.get("base_url") or "/")
    return "/" if proxy is True else None


def kernel_server(environ: Mapping[str, str]) -> dict | None:
    """The running Jupyter server that started this kernel (its info: ``base_url``, ``port``,
    ``pid``...), or None: not a kernel of a Jupyter server (a script, nbclient, VS Code)."""
    try:
        parent = int(environ.get("JPY_PARENT_PID") or 0)
    except ValueError:
        return None
    if parent <= 0:
        return None
    try:
        from jupyter_server.serverapp import list_running_servers
    except ImportError:  # the kernel's environment lacks jupyter_server: read its info file
        try:
            from jupyter_core.paths import jupyter_runtime_dir
        except ImportError:
            return None
        try:
            found = json.loads((Path(jupyter_runtime_dir()) / f"jpserver-{parent}.json").read_text())
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None
    try:
        return next((info for info in list_running_servers() if info.get("pid") == parent), None)
    except (OSError, ValueError):
        return None


def _data_given(data, error: type[Exception]):
    """``data=`` as handed to the dashboard's process: a pandas frame (a Polars or PyArrow
    frame converted), or the path of a .csv or .parquet file or of a Parquet data set (a
    folder of files, or a glob), made absolute here and read there as ``--data`` is."""
    if isinstance(data, (str, os.PathLike)):
        return os.path.abspath(os.fspath(data))
    return as_pandas(data, "data")  # a Polars or PyArrow frame: pandas before it is handed over


def _labels_given(labels, error: type[Exception]):
    """``labels=`` as the dashboard's process takes it: None, a plain dict, or a path as
    text, made absolute here (that process runs in the dashboard's folder), read and
    checked there as ``--labels`` is."""
    if labels is None:
        return None
    if isinstance(labels, (str, os.PathLike)):
        return os.path.abspath(os.fspath(labels))
    if isinstance(labels, Mapping):
        return {str(k): dict(v) if isinstance(v, Mapping) else v for k, v in labels.items()}
    raise error("labels must be a dict {'features': {...}, 'classes': {...}} or the path of a labels JSON file.")


def _pickled(models) -> dict:
    """{name: the model's pickled bytes}: the dashboard's processes unpickle a model only in
    the job process that runs it (never where its library would start a thread pool that
    later forks hang on)."""
    named = dict(models) if isinstance(models, Mapping) else {type(models).__name__: models}
    out = {}
    for name, model in named.items():
        try:
            out[str(name)] = _native(model) or Pickled(pickle.dumps(model, protocol=5))
        except Exception as exc:  # a lambda in a pipeline, an open connection: the object stays here
            what = f"{type(exc).__name__}: {exc}"
            raise ReportError(f"The model {name!r} could not be handed to the dashboard's process ({what}).") from exc
    return out


def _native(model) -> Pickled | None:
    """A raw XGBoost or LightGBM booster (no scikit-learn methods) as its own file format's
    bytes: the dashboard loads it as it loads that file (column names, categories, task
    from the objective, every check); None for anything else."""
    kind = (type(model).__module__.split(".")[0], type(model).__name__)
    if kind == ("xgboost", "Booster"):
        return Pickled(bytes(model.save_raw(raw_format="ubj")), "file:.ubj")
    if kind == ("lightgbm", "Booster"):
        return Pickled(model.model_to_string().encode(), "file:.txt")
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env() -> dict:
    """The child finds this checkout's packages first (an editable install does too)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env
