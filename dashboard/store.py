"""Server-side state on disk: uploaded files, workspaces, demo models and the result cache.

Everything a session sees is reached through a workspace id. Demo workspaces have fixed
public ids (``demo-x3`` ...); a workspace built from uploads gets a random 128-bit token,
so one session cannot guess or enumerate another's. Workspaces are immutable: adding a
model makes a new workspace, so a shared URL always shows what it showed.

Results are cached in one :class:`diskcache.Cache` under keys derived from the SHA-256 of
the model file, of the data and of the parameters (:func:`result_key`), so a second visit,
a second session on the same files or a second gunicorn worker gets them at once.

Layout of ``cache_dir``::

    uploads/<token>/<name>      files as uploaded (deleted after upload_ttl_hours)
    data/<sha>.parquet          parsed data sets, by content hash
    models/<sha><suffix>        model files, by content hash
    workspaces/<id>.json        workspace records
    workspaces/copies/<id>.json their second copies (a damaged or lost record is restored from it)
    demos/                      demo models (.skops) and data, built at first use
    results/                    diskcache: computed results
    jobs/                       diskcache: Dash background-callback manager
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import row_groups
from .broker import Broker, BrokerError
from .fork_safe_cache import ForkSafeCache
from .sealed import _CORRUPT, seal, sealed_intact, unseal

log = logging.getLogger(__name__)
RESULT_VERSION = "r6"  # bump when a result's meaning changes, to orphan old entries (r6: parts by feature, pairs)
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
_DEMO_ID = re.compile(r"^demo-[a-z0-9]+$")


@dataclass(frozen=True)
class Failed:
    """What a task's key holds when the task cannot be computed for this state's data (a
    feature with no values in the subgroup, a constant column): the reason, for the panels
    that need the result to say, while every other panel is drawn. Cached like a result, so
    the page does not ask for it again; only input errors are kept so (a model that failed
    or ran out of time fails the job, and Retry runs it again)."""

    message: str


@dataclass(frozen=True)
class ModelEntry:
    name: str  # shown to the user (file name without suffix, or the demo model's name)
    path: str  # relative to cache_dir
    sha: str  # SHA-256 of the file
    accepted_types: tuple = ()
    features: tuple = ()  # the data columns the model reads, in its order
    classes: tuple = ()  # class labels of an XGBoost/LightGBM classifier (its file does not store them)
    # the exact tree walk computes its PFI (compute.pfi_engine, asked where the model is loaded):
    # the planner gives it a larger row budget (budgets.pfi_sample)
    walked: bool = False

    @property
    def key(self) -> str:
        return self.sha[:16]


@dataclass(frozen=True)
class Workspace:
    id: str
    title: str
    data_path: str  # parquet, relative to cache_dir
    data_sha: str
    target: str
    task: str  # "regression" or "classification"
    loss: str
    output: Any = None  # class whose probability is explained (classifiers)
    models: tuple[ModelEntry, ...] = ()
    demo: bool = False
    features: tuple = ()  # model inputs (the same for every model of the workspace)
    warnings: tuple = field(default=())
    data_role: str = "unknown"  # "held-out", "training" or "unknown": what the user said at upload
    n_rows: int = 0  # rows of the data set (0: a record written before it was kept; no part by rows)
    # {"features": {column: label}, "classes": {class: label}}: presentation only (dashboard.labels),
    # never part of a cache key, the state or its URL
    labels: dict = field(default_factory=dict, hash=False)

    def model(self, name: str | None) -> ModelEntry:
        for entry in self.models:
            if entry.name == name:
                return entry
        return self.models[0]

    def to_json(self) -> str:
        record = asdict(self)
        record["models"] = [asdict(m) for m in self.models]
        return json.dumps(record, default=_json_default)

    @classmethod
    def from_json(cls, text: str) -> Workspace:
        record = json.loads(text)
        record["models"] = tuple(
            ModelEntry(
                **{
                    **m,
                    "accepted_types": tuple(m["accepted_types"]),
                    "features": tuple(m["features"]),
                    "classes": tuple(m.get("classes", ())),
                }
            )
            for m in record["models"]
        )
        record["features"] = tuple(record["features"])
        record["warnings"] = tuple(record.get("warnings", ()))
        # workspaces saved before the question was asked: the demos' data is held out
        record.setdefault("data_role", "held-out" if record.get("demo") else "unknown")
        labels = record.get("labels")  # saved before labels existed: none
        record["labels"] = labels if isinstance(labels, dict) else {}
        return cls(**record)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# --- SQLite and fork ---------------------------------------------------------------------
DAMAGED = ".damaged"  # suffix of a workspace record found unreadable (kept for the operator)
COPIES = "copies"  # the workspaces' folder of second copies of their records
REFUSED = ".refused"  # an upload folder's record of why its file was refused (hidden from upload_path)


def _refused_message(name: str, reason: str) -> str:
    reason = reason.strip()
    said = reason if reason.startswith(name) else f"{name}: {reason}"
    return f"{said} (this upload was refused; choose a corrected file)"


DemoBuilder = Callable[["Store", str], "Workspace | None"]


_SHARED_FILE = re.compile(r"^(data|models|demos)/[A-Za-z0-9._-]{1,200}$")  # files a job may fetch


class Store:
    """File layout and caches under one folder shared by the workers of a machine.

    With a ``remote`` (:class:`dashboard.broker.Broker`: machines that share only the
    broker), the folder is this machine's cache: results, data and model files, uploads and
    workspace records written here are also kept in the broker, and one missing here is
    fetched from it (checked against its signature) and kept here."""

    def __init__(
        self,
        root: str | Path,
        *,
        size_limit_mb: int = 2048,
        build_demo: DemoBuilder | None = None,
        remote: Broker | None = None,
    ):
        self.root = Path(root).resolve()
        self.remote = remote
        self.build_demo = build_demo  # (store, demo id) -> its Workspace: trains a demo at first use
        self.bytes_written = 0  # result bytes this process stored (a job's share of the cache)
        self.size_limit_mb = int(size_limit_mb)
        for sub in ("uploads", "data", "models", "workspaces", "demos"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.results = ForkSafeCache(
            str(self.root / "results"),
            size_limit=int(size_limit_mb) * 2**20,
            eviction_policy="least-recently-used",
        )

    # --- files -----------------------------------------------------------------------
    def path(self, relative: str) -> Path:
        """The local path of a stored file; a data, model or demo file this machine has not
        seen is fetched from the broker first (when there is one and it has the file)."""
        local = self.root / relative
        if self.remote is not None and _SHARED_FILE.match(relative) and not local.exists():
            if relative.startswith("data/") and row_groups.fetch_whole(self, relative, local):
                return local
            data = self.remote_read(f"f:{relative}")  # a file published whole
            if data is not None:
                _atomic_write(local, lambda p: Path(p).write_bytes(data))
        return local

    def _publish(self, relative: str) -> None:
        """Keep a stored file in the broker too (once: it is named by its content or id)."""
        if self.remote is not None and relative.startswith("data/"):
            row_groups.publish(self, relative)  # a data set travels as its row groups
            return
        if self.remote is None or self.remote.exists(f"f:{relative}"):
            return
        self.remote.put(f"f:{relative}", (self.root / relative).read_bytes())

    def remote_read(self, name: str) -> bytes | None:
        """A value from the broker, None when absent, refused or the broker unreachable (logged:
        what needs it is computed again, and a job that cannot reach it says so)."""
        assert self.remote is not None
        try:
            return self.remote.get(name)
        except BrokerError as exc:
            log.warning("%s", exc)
            return None

    def remote_read_many(self, names: list[str]) -> list[bytes | None]:
        """:meth:`remote_read` of several values in a few round trips (``Broker.get_many``)."""
        assert self.remote is not None
        try:
            return self.remote.get_many(names)
        except BrokerError as exc:
            log.warning("%s", exc)
            return [None] * len(names)

    def publish_upload(self, token: str) -> None:
        """Keep a received upload in the broker, so the machine whose job loads it can read it."""
        path = self.upload_path(token)
        if self.remote is not None and path is not None:
            self.remote.put(f"u:{token}", path.name.encode() + b"\0" + path.read_bytes())

    def new_upload(self, filename: str) -> tuple[str, Path]:
        token = secrets.token_urlsafe(16)
        folder = self.root / "uploads" / token
        folder.mkdir(parents=True)
        return token, folder / safe_name(filename)

    def upload_path(self, token: str) -> Path | None:
        """The file of an upload token, or None (unknown, malformed or expired token)."""
        if not isinstance(token, str) or not _TOKEN.match(token):
            return None
        folder = self.root / "uploads" / token
        files = [p for p in folder.iterdir() if not p.name.startswith(".")] if folder.is_dir() else []
        if not files and self.remote is not None and not (folder / REFUSED).exists():
            files = self._fetch_upload(token, folder)
        return files[0] if len(files) == 1 else None

    def _fetch_upload(self, token: str, folder: Path) -> list[Path]:
        data = self.remote_read(f"u:{token}")
        name, sep, body = (data or b"").partition(b"\0")
        try:
            filename = safe_name(name.decode())
        except UnicodeDecodeError:
            return []
        if not sep or not filename:
            return []
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / filename, lambda p: Path(p).write_bytes(body))
        return [folder / filename]

    def discard_upload(self, token: str, reason: str = "") -> bool:
        """Delete an upload's file at once (a file found invalid) and keep why, so a later
        Load of the same upload says why it was refused, not that it expired (the reason
        goes with the folder at the upload lifetime). False for an unknown token."""
        path = self.upload_path(token)
        if path is None:
            return False
        path.unlink(missing_ok=True)
        said = str(reason)[:2000] or "the file was refused"
        (path.parent / REFUSED).write_text(said, encoding="utf-8")
        if self.remote is not None:
            try:
                self.remote.delete(f"u:{token}")
                self.remote.put(f"ur:{token}", said.encode())
            except BrokerError as exc:
                log.warning("%s", exc)
        return True

    def upload_gone(self, token, name: str) -> str:
        """What to say of an upload whose file is not there: why it was refused, or that it
        expired."""
        if isinstance(token, str) and _TOKEN.match(token):
            record = self.root / "uploads" / token / REFUSED
            try:
                return _refused_message(name, record.read_text(encoding="utf-8")[:2000])
            except (OSError, UnicodeDecodeError):
                pass
            said = self.remote_read(f"ur:{token}") if self.remote is not None else None
            if said is not None:
                return _refused_message(name, said.decode("utf-8", "replace")[:2000])
        return f"{name}: the upload expired; choose the file again."

    def purge_uploads(self, ttl_hours: float) -> int:
        """Delete uploads, and workspaces made from uploads, older than the configured
        lifetime, then the data and model files no remaining workspace uses (demo files are
        kept). Returns how many uploads and workspaces were deleted."""
        limit = time.time() - ttl_hours * 3600
        removed = 0
        for folder in (self.root / "uploads").iterdir():
            try:
                if folder.stat().st_mtime < limit:
                    shutil.rmtree(folder, ignore_errors=True)
                    removed += 1
            except FileNotFoundError:
                continue
        used: set[str] = set()
        for record in (self.root / "workspaces").glob("*.json"):
            try:
                ws = Workspace.from_json(record.read_text())
                if not ws.demo and record.stat().st_mtime < limit:
                    record.unlink()
                    self._copy_of(ws.id).unlink(missing_ok=True)
                    removed += 1
                    continue
            except (FileNotFoundError, ValueError, KeyError, TypeError):
                continue
            used.add(ws.data_path)
            used.update(m.path for m in ws.models)
        for copy in (self.root / "workspaces" / COPIES).glob("*.json"):  # copies of upload records gone
            stale = not copy.name.startswith("demo-") and copy.stat().st_mtime < limit
            if stale and not (self.root / "workspaces" / copy.name).exists():
                copy.unlink(missing_ok=True)
        for sub in ("data", "models"):
            for file in (self.root / sub).iterdir():
                rel = re.sub(r"\.g\d+(\.c\d+)?$", "", f"{sub}/{file.name}")  # a row group or chunk: its data set
                try:
                    if rel not in used and file.stat().st_mtime < limit:
                        file.unlink()
                except FileNotFoundError:
                    continue
        return removed

    def keep_data(self, frame: pd.DataFrame) -> tuple[str, str]:
        """Store a parsed data set by content hash; returns (relative path, sha)."""
        sha = frame_sha(frame)
        rel = f"data/{sha}.parquet"
        if not self.path(rel).exists():
            _atomic_write(self.path(rel), lambda p: row_groups.write(frame, p))
        self._publish(rel)
        return rel, sha

    def keep_model(self, source: Path, suffix: str) -> tuple[str, str]:
        sha = file_sha(source)
        rel = f"models/{sha}{suffix}"
        if not self.path(rel).exists():
            _atomic_write(self.path(rel), lambda p: shutil.copyfile(source, p))
        self._publish(rel)
        return rel, sha

    # --- workspaces ------------------------------------------------------------------
    def save_workspace(self, ws: Workspace) -> None:
        """Write the workspace's record, and the copy a damaged or lost one is restored from."""
        text = ws.to_json()
        if self.remote is not None:  # the files it names first: a machine that reads it finds them
            for rel in (ws.data_path, *(m.path for m in ws.models)):
                if _SHARED_FILE.match(rel) and (self.root / rel).exists():
                    self._publish(rel)
            self.remote.put(f"w:{ws.id}", text.encode())  # raises BrokerError: then no record here either
        _atomic_write(self.root / "workspaces" / f"{ws.id}.json", lambda p: Path(p).write_text(text))
        _atomic_write(self._copy_of(ws.id), lambda p: Path(p).write_text(text))

    def _copy_of(self, ws_id: str) -> Path:
        return self.root / "workspaces" / COPIES / f"{ws_id}.json"

    def _read_record(self, file: Path, ws_id: str) -> Workspace:  # checked: it names its own id
        ws = Workspace.from_json(file.read_text())
        if ws.id != ws_id or not ws.models:
            raise ValueError("the record names another workspace")
        return ws

    def workspace(self, ws_id: str) -> Workspace | None:
        """A workspace by id, or None for an unknown or malformed id (never a path escape).
        A record found damaged (truncated, garbled) is set aside and, like a lost one, restored
        from its copy when that is whole; a demo without either is built again."""
        if not isinstance(ws_id, str) or not (_TOKEN.match(ws_id) or _DEMO_ID.match(ws_id)):
            return None
        file = self.root / "workspaces" / f"{ws_id}.json"
        if file.exists():
            try:
                return self._read_record(file, ws_id)
            except FileNotFoundError:  # purged meanwhile
                return None
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                # truncated or garbled (a full disk, a crash while writing): set aside, so a
                # demo is built again and an upload's page says what happened
                log.warning("workspace record %s is damaged (%s); set aside", ws_id, type(exc).__name__)
                try:
                    file.replace(file.with_name(file.name + DAMAGED))
                except OSError:
                    pass
        restored = self._restore(ws_id, file) or self._fetch_workspace(ws_id, file)
        if restored is not None:
            return restored
        if _DEMO_ID.match(ws_id) and self.build_demo is not None:
            return self.build_demo(self, ws_id)  # trained at first use (or again, after damage)
        return None

    def _restore(self, ws_id: str, file: Path) -> Workspace | None:
        """The workspace from its copy, written back as its record; None without a whole copy."""
        try:
            ws = self._read_record(self._copy_of(ws_id), ws_id)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # none, or damaged too
            return None
        log.warning("workspace record %s restored from its copy", ws_id)
        _atomic_write(file, lambda p: Path(p).write_text(ws.to_json()))
        return ws

    def _fetch_workspace(self, ws_id: str, file: Path) -> Workspace | None:
        """A workspace another machine recorded, from the broker (kept here with its copy)."""
        data = self.remote_read(f"w:{ws_id}") if self.remote is not None else None
        if data is None:
            return None
        try:
            ws = Workspace.from_json(data.decode())
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            return None
        if ws.id != ws_id or not ws.models:
            return None
        _atomic_write(file, lambda p: Path(p).write_bytes(data))
        _atomic_write(self._copy_of(ws_id), lambda p: Path(p).write_bytes(data))
        return ws

    def workspace_damaged(self, ws_id) -> bool:
        """Whether the record of this workspace was found damaged and set aside."""
        if not isinstance(ws_id, str) or not (_TOKEN.match(ws_id) or _DEMO_ID.match(ws_id)):
            return False
        return (self.root / "workspaces" / f"{ws_id}.json{DAMAGED}").exists()

    def data(self, ws: Workspace) -> pd.DataFrame:
        return row_groups.cached_frame(str(self.path(ws.data_path)), ws.data_sha)

    def rows(self, ws: Workspace, rows: tuple[int, int], columns: list[str] | None = None) -> pd.DataFrame:
        """Rows ``[a, b)`` of the workspace's data set, reading only the row groups holding
        them (:func:`dashboard.row_groups.read_rows`)."""
        return row_groups.read_rows(self, ws.data_path, rows, columns)

    # --- results ---------------------------------------------------------------------
    def get(self, key: str):
        """A cached result, or None when absent, evicted, or damaged (a value file missing or
        garbled, an altered row, a failed checksum): then it is deleted, so the job the page
        waits for computes it again. A damaged entry is never served."""
        blob = self._blob(key)
        if blob is None:
            return None
        value = unseal(blob)
        if value is _CORRUPT:
            log.warning("result %s failed its checksum; dropped", key)
            self._drop(key)
            return None
        return value

    def intact(self, key: str) -> bool:
        """Whether ``key`` holds a readable result whose checksum holds (read, not unpickled);
        a damaged entry is deleted as :meth:`get` does."""
        blob = self._blob(key)
        whole = blob is not None and sealed_intact(blob)
        if blob is not None and not whole:
            log.warning("result %s failed its checksum; dropped", key)
            self._drop(key)
        return whole

    def _blob(self, key: str):
        """The stored bytes of ``key``, None when absent; an unreadable entry is dropped."""
        try:
            blob = self.results.get(key, default=None, retry=True)
            if blob is None and key in self.results:
                # a row whose value file is gone reads as None: once more (a writer may be replacing it)
                blob = self.results.get(key, default=None, retry=True)
                if blob is None:
                    raise OSError("value file missing")
        except Exception:  # unreadable value file, damaged database row
            log.warning("result %s unreadable; dropped", key)
            self._drop(key)
            return None
        if blob is None and self.remote is not None:  # computed on another machine
            blob = self.remote_read(f"r:{key}")
            if blob is not None and sealed_intact(blob):
                self.results.set(key, blob, retry=True)
            else:
                blob = None
        return blob

    def has(self, key: str) -> bool:
        if key in self.results:
            return True
        if self.remote is None:
            return False
        try:
            return self.remote.exists(f"r:{key}")
        except BrokerError:
            return False

    def put(self, key: str, value) -> None:
        """Keep a result (and in the broker, when there is one: raises
        :class:`~dashboard.broker.BrokerError` when it cannot be reached)."""
        blob = seal(value)
        self.results.set(key, blob, retry=True)
        self.bytes_written += len(blob)
        if self.remote is not None:
            self.remote.put(f"r:{key}", blob)

    def _drop(self, key: str) -> None:
        try:
            self.results.delete(key, retry=True)
        except Exception:
            log.exception("could not delete result %s", key)


def result_key(kind: str, ws: Workspace, model: ModelEntry | None = None, **params) -> str:
    """Cache key from the content hashes of data and model, the task settings and params."""
    spec = {
        "v": RESULT_VERSION,
        "kind": kind,
        "data": ws.data_sha,
        "target": ws.target,
        "loss": ws.loss,
        "output": ws.output,
        "model": None if model is None else model.sha,
        "params": params,
    }
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
    return f"{kind}:{digest[:40]}"


def new_workspace_id() -> str:
    return secrets.token_urlsafe(16)


def safe_name(filename: str) -> str:
    """A file name without any path part or odd characters (for the upload folder)."""
    base = os.path.basename(str(filename or "").replace("\\", "/")) or "upload"
    stem, suffix = os.path.splitext(re.sub(r"[^A-Za-z0-9._-]", "_", base))
    stem = stem[:100].lstrip(".") or "upload"
    return stem + suffix[:16]


def file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def frame_sha(frame: pd.DataFrame) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([str(c) for c in frame.columns]).encode())
    digest.update(json.dumps([str(t) for t in frame.dtypes]).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    return digest.hexdigest()


def _atomic_write(target: Path, write) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


class Lru:
    """A small thread-safe per-process LRU: ``get(key, compute)`` returns the cached value
    or computes it. A None result is not kept (a missing result is read again), nor one
    ``keep`` refuses."""

    def __init__(self, size: int):
        self.size, self.lock = size, threading.Lock()
        self.items: OrderedDict = OrderedDict()

    def get(self, key, compute, keep: Callable[[Any], bool] | None = None):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = compute()
        if value is not None and (keep is None or keep(value)):
            with self.lock:
                self.items[key] = value
                while len(self.items) > self.size:
                    self.items.popitem(last=False)
        return value

    def drop(self, key) -> None:
        """Forget ``key`` (a kept value found stale)."""
        with self.lock:
            self.items.pop(key, None)
