"""Running: the model work that fills the cache with the tasks :mod:`dashboard.planning` plans.

:func:`run` computes the missing tasks of a plan inside an isolated process
(:func:`dashboard.isolation.isolated`, called by the background job), one task at a time
under a per-task lock shared by every process using the cache folder. Each task is done by
its :class:`~dashboard.planning.TaskSpec` (the built-in ones in :mod:`dashboard.tasks`, the
views' own in their modules): this module names no kind of task.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import replace

import numpy as np
import pandas as pd

import compute

from . import row_groups, samples, session_models
from . import tasks as built_in
from .loading import load_model
from .planning import Task, TaskSpec, missing
from .store import Failed, Store, Workspace
from .tasks import Job, executor
from .views import REGISTRY, task_specs

Progress = Callable[[int, int, str], None]
PART_TASK = "wip.compute_part"  # the Celery task a split job sends its parts as


def spec_for(kind: str) -> TaskSpec:
    """The spec of a task kind: a built-in one, a part of a split job, or a view's."""
    views_parts = (spec for view in REGISTRY for spec in view.parts)  # View(parts=...): never planned
    for spec in (*built_in.BUILT_IN, *built_in.PARTS, *task_specs(), *views_parts):
        if spec.kind == kind:
            return spec
    raise KeyError(f"no task of kind {kind!r}")


def step_rows(ws: Workspace, task: Task, data: pd.DataFrame | None) -> list[int]:
    """Estimated model rows of each progress step of a task (its spec's ``cost``)."""
    return spec_for(task.kind).estimate(ws, task, data)


def split(ws: Workspace, todo: list[dict]) -> tuple[list[dict], list[dict]]:
    """A job's tasks as independent parts for several workers, and the steps that join them
    (each spec's ``split``: the ICE/ICI pass one part per feature, PFI one per block of
    features, exact SFIMP batches of coalitions, each joined bit for bit the one call; a
    task without parts is one part itself). Returns (parts, joins); the parts others read
    (``TaskSpec.first``: the rows a task's parts explain) come first, and the job computes
    them before it sends the rest; joins run once every part is done."""
    parts: list[dict] = []
    joins: list[dict] = []
    seen: set[str] = set()
    for record in todo:
        task = Task.from_dict(record)
        found = spec_for(task.kind).parts(ws, task)
        if found is None:
            parts.append(record)
            continue
        parts += [t.to_dict() for t in found.parts if t.key not in seen]  # a sample two tasks share: once
        seen |= {t.key for t in found.parts}
        joins.append(found.join.to_dict())
    return _first_first(parts), _first_first(joins)


def for_workers(ws: Workspace, parts: list[dict]) -> list[dict]:
    """The parts a split job sends its workers: all but those others read (``first``: the
    samples, and on small data the predictions on every row, which the job computes before
    it sends); on a data set of more than one row group,
    only the parts that read their own rows, as a worker would fetch the whole data set for
    any other (gigabytes at ten million rows) and the job, which holds it, computes them."""
    sent = [p for p in parts if not spec_for(p["kind"]).first]
    if int(ws.n_rows) <= row_groups.ROW_GROUP_ROWS:  # one group: fetching it whole is fetching a part's rows
        return sent
    return [p for p in sent if spec_for(p["kind"]).reads_rows and samples.reads_own_rows(p)]


def _first_first(tasks: list[dict]) -> list[dict]:
    """The tasks whose results others read (``TaskSpec.first``) ahead of the rest, each group in its order."""
    return sorted(tasks, key=lambda t: not spec_for(t["kind"]).first)


def run(
    store: Store,
    ws: Workspace,
    tasks: list[dict],
    *,
    policy,
    n_jobs: int = 1,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    models: dict | None = None,
    wait: bool = True,
) -> list[dict]:
    """Compute the missing tasks and cache their results (inside a background job). Each
    progress label ends with the time left ("about 40 s left", or "estimating" until a tenth
    of the job's model rows are done; see :class:`Eta`). ``models``: the
    models already loaded in this process, by name, filled as models load (the parts of a
    split job share them). ``wait=False``: a task another process is computing is skipped,
    not waited for; returns the tasks skipped so."""
    report = progress or (lambda done, total, label: None)
    todo = [Task.from_dict(t) for t in _first_first(missing(store, tasks))]
    # parts that read only their own rows (``reads_rows``) load no data set
    data = None if all(spec_for(t.kind).reads_rows for t in todo) else store.data(ws)
    models = {} if models is None else models
    costs = [step_rows(ws, t, data) for t in todo]
    steps = sum(len(c) for c in costs)
    eta = Eta(
        np.cumsum([0] + [rows for c in costs for rows in c]), clock, loads=len({t.model for t in todo} - {*models})
    )
    eta.begin()

    def tell(done: int, total: int, label: str) -> None:
        left = eta.left(done)
        report(done, total, f"{label} · {left}" if left and label != "done" else label)

    if todo and data is not None and eta.cumulative[-1] >= PROBE_FROM:  # a small job is over before an estimate helps
        if todo[0].model not in models:
            tell(0, steps, f"loading model {todo[0].model}")
        with eta.aside(load=todo[0].model not in models):
            eta.probe(_probe(store, ws, todo[0], data, models, policy))

    done = 0
    busy: list[dict] = []
    for task, cost in zip(todo, costs):
        with task_lock(store, task.key, wait=wait) as mine:  # another session may be computing it
            if not mine:
                busy.append(task.to_dict())
                continue
            if missing(store, [task.to_dict()]):
                try:
                    job = Job(store, ws, data, n_jobs, _say(tell, done, steps))
                    _run_task(job, task, models, policy, loading=lambda: eta.aside(load=True))
                except compute.InputError as exc:  # this state's data cannot give it: its panels say why
                    fail(store, task, exc)
            done += len(cost)
    tell(steps, steps, "done")
    return busy


def fail(store: Store, task: Task, exc: Exception) -> None:
    """Keep ``task``'s failure under each of its keys not computed (the keys of a task that
    got part way, as a profiles pass over several features, keep what they got)."""
    spec = spec_for(task.kind)
    what = spec.label or task.kind
    message = (
        f"{what[0].upper()}{what[1:]} could not be computed for these rows: {exc} Choose another subgroup or "
        "feature to see it; the other panels are not affected."
    )
    for key in (task.key, *task.also):
        if not store.has(key):
            store.put(key, Failed(" ".join(message.split())[:600]))


def _say(tell: Progress, at: int, steps: int) -> Callable[[str, int], None]:
    """A task's progress: its step ``step`` is the job's step ``at + step``."""

    def say(label: str, step: int) -> None:
        tell(at + step, steps, label)

    return say


@contextmanager
def task_lock(store: Store, key: str, wait: bool = True):
    """An exclusive lock per task across processes (``flock`` on the cache folder: released by
    the kernel if the holder dies, so a killed job blocks no one) and, with a broker, across
    machines (a Redis lock its holder renews: it frees itself seconds after the holder died).
    Yields True once held; with ``wait=False``, False at once when another process holds it."""
    if store.remote is not None:
        with store.remote.lock("task:" + key, wait=wait) as held:
            yield held
        return
    with open(_lock_path(store, key), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _lock_path(store: Store, name: str):
    folder = store.root / "locks"
    folder.mkdir(exist_ok=True)
    return folder / (hashlib.sha256(name.encode()).hexdigest()[:32] + ".lock")


@contextmanager
def job_alive(store: Store, token: str):
    """Held by a split job while it lives (an exclusive ``flock`` on a file named after the
    job's token): the parts it queued for other workers run only while it is held. A job that
    ends in any way (done, cancelled, killed for time or memory, its server restarted)
    releases it, through the kernel if it has to (with a broker: within seconds, as the lock's
    renewals stop)."""
    if store.remote is not None:
        with store.remote.lock("job:" + token):
            yield
        return
    with open(_lock_path(store, "job:" + token), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def job_ended(store: Store, token: str) -> bool:
    """True when no process holds the job's :func:`job_alive` lock: its queued parts are
    then not wanted any more."""
    if store.remote is not None:
        return not store.remote.held("job:" + token)
    with open(_lock_path(store, "job:" + token), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


# --- a job's record: does its process live, and how did it end --------------------------
# Dash learns that a background job ended by polling it; a poll lost with its worker (killed,
# restarted) ends the page's polling with nothing shown. Each job therefore keeps a record
# the page's watchdog (dashboard.callbacks.compute.check_job) reads on its own requests: a
# marker file (running, then done with the job's outcome) and an exclusive lock held by the
# job's process while it lives, which the kernel releases however that process ends.
RECORDS = "running"  # folder of the cache_dir holding the job markers
RECORD_DAYS = 1.0  # markers older than this are removed as new jobs start
_TTL = int(RECORD_DAYS * 86400)  # the same, for records kept in the broker


def _record_path(store: Store, token: str, suffix: str = ".json"):
    folder = store.root / RECORDS
    folder.mkdir(exist_ok=True)
    return folder / (hashlib.sha256(token.encode()).hexdigest()[:32] + suffix)


def _write_record(path, record: dict) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(json.dumps(record, default=str))
    os.replace(tmp, path)


def _prune_records(store: Store) -> None:
    limit = time.time() - RECORD_DAYS * 86400
    for old in (store.root / RECORDS).iterdir():
        try:
            if old.stat().st_mtime < limit:
                old.unlink()
        except OSError:
            continue


@contextmanager
def job_record(store: Store, token: str):
    """Held by a job's process for the whole job: marks it running and holds its lock; yields
    ``finish(outcome)``, which keeps the job's outcome (a JSON-able dict) before the lock
    goes, so a watchdog that finds the lock free reads either the outcome or a job that died."""
    if store.remote is not None:  # the page's watchdog may ask from another machine
        remote = store.remote
        with remote.lock("run:" + token):
            remote.put_json("rec:" + token, {"state": "running", "pid": os.getpid(), "t": time.time()}, ttl_s=_TTL)

            def finish_remote(outcome: dict) -> None:
                remote.put_json("rec:" + token, {"state": "done", "outcome": outcome, "t": time.time()}, ttl_s=_TTL)

            yield finish_remote
        return
    try:
        _prune_records(store)
    except OSError:
        pass
    marker = _record_path(store, token)
    with open(_lock_path(store, "run:" + token), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            _write_record(marker, {"state": "running", "pid": os.getpid(), "t": time.time()})

            def finish(outcome: dict) -> None:
                _write_record(marker, {"state": "done", "outcome": outcome, "t": time.time()})

            yield finish
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def job_cancelled(store: Store, token: str) -> None:
    """The visitor cancelled the job: its end is no failure to report."""
    if store.remote is not None:
        store.remote.put_json("cancelled:" + token, {"t": time.time()}, ttl_s=_TTL)
        return
    _write_record(_record_path(store, token, ".cancelled"), {"t": time.time()})


def first_look(store: Store, token: str, now: float) -> float:
    """When a watchdog first looked for this job (``now`` on the first call)."""
    if store.remote is not None:
        store.remote.add_json("seen:" + token, {"t": now}, ttl_s=_TTL)
        seen = store.remote.get_json("seen:" + token)
        try:
            return float(seen["t"])
        except (TypeError, KeyError, ValueError):
            return now
    path = _record_path(store, token, ".seen")
    try:
        return float(json.loads(path.read_text())["t"])
    except (OSError, ValueError, KeyError, TypeError):
        _write_record(path, {"t": now})
        return now


def job_status(store: Store, token: str) -> tuple[str, dict]:
    """What became of a job: ("unknown", {}) before its process marked it, ("running", record)
    while its process holds its lock, ("done", record with its ``outcome`` and time ``t``),
    ("cancelled", {}), or ("died", record) when its process ended without an outcome."""
    if store.remote is not None:
        return _remote_status(store.remote, token)
    if _record_path(store, token, ".cancelled").exists():
        return "cancelled", {}
    with open(_lock_path(store, "run:" + token), "a") as handle:  # the lock first: a job that
        try:  # ended well wrote its outcome before letting it go
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "running", {}
        fcntl.flock(handle, fcntl.LOCK_UN)
    try:
        record = json.loads(_record_path(store, token).read_text())
    except FileNotFoundError:
        return "unknown", {}
    except (OSError, ValueError):
        return "died", {}
    if not isinstance(record, dict):
        return "died", {}
    if record.get("state") == "done" and isinstance(record.get("outcome"), dict):
        return "done", record
    return "died", record


def _remote_status(remote, token: str) -> tuple[str, dict]:
    if remote.get_json("cancelled:" + token) is not None:
        return "cancelled", {}
    if remote.held("run:" + token):  # the lock first, as above
        return "running", {}
    record = remote.get_json("rec:" + token)
    if record is None:
        return "unknown", {}
    if not isinstance(record, dict):
        return "died", {}
    if record.get("state") == "done" and isinstance(record.get("outcome"), dict):
        return "done", record
    return "died", record


def load(store, ws, name: str, models: dict, policy):
    """The model of that name, loaded once per job."""
    entry = ws.model(name)
    if entry.name not in models and session_models.is_session_model(entry.path):
        models[entry.name] = session_models.get(entry.path, entry.name)
    if entry.name not in models:
        path = store.path(entry.path)
        # the file passed the upload limit when it arrived (demo models are ours)
        file_policy = replace(policy, max_bytes=max(policy.max_bytes, path.stat().st_size))
        models[entry.name] = load_model(
            path,
            name=entry.name,
            policy=file_policy,
            accepted_types=entry.accepted_types,
            classes=list(entry.classes) or None,
        )
    return models[entry.name]


PROBE_ROWS = 500
PROBE_FROM = 200_000  # model rows from which a job is timed for its estimate


def _probe(store, ws, task, data, models, policy) -> float | None:
    """Seconds of one warm call of the first task's model on a few hundred rows: its fixed
    cost per call, which the job's small steps pay almost whole (None if it fails: the task
    itself will then report the failure)."""
    try:
        model = load(store, ws, task.model, models, policy)
        X = data[list(ws.model(task.model).features)].iloc[:PROBE_ROWS]
        predict = getattr(model, "predict_proba", None) if ws.task == "classification" else None
        predict = predict or model.predict
        predict(X)  # warm (first-call costs)
        start = time.perf_counter()
        predict(X)
        return time.perf_counter() - start
    except Exception:
        return None


class Eta:
    """Time left from the estimated model rows of each step (``cumulative[k]``: rows of the
    first k steps), priced by the steps timed so far: "estimating" until a tenth of the rows
    are done and a step after the first is timed, no number under :attr:`FLOOR` seconds (a
    job that short needs none).

    A step costs a fixed time (the probe: one model call on a few hundred rows, which small
    steps pay almost whole) plus a time per row, measured over the steps done. One-time
    costs are kept out of that rate, as extrapolating them made the estimate 10-30x too long:
    model loads and the probe (timed :meth:`aside`; the models still to load are added at
    their mean load time) and the job's first step (first-call costs) once later steps are
    timed."""

    START = 0.1  # share of the job's rows done before a number is given
    FLOOR = 3.0  # seconds left under which no number is given

    def __init__(self, cumulative: np.ndarray, clock: Callable[[], float], loads: int = 0):
        self.cumulative, self.clock = cumulative, clock
        self.call = 0.0  # seconds of one model call (the probe)
        self.loads_left = loads
        self.load_times: list[float] = []
        self.mark: tuple[int, float] | None = None  # (steps done, time) when they were first reported
        self.excluded = 0.0  # one-time seconds since the mark
        self.timed: list[tuple[int, float, float]] = []  # (steps, rows, seconds) between marks

    def begin(self) -> None:
        """The job starts now (else at the first report)."""
        self.mark, self.excluded = (0, self.clock()), 0.0

    def probe(self, seconds: float | None) -> None:
        self.call = seconds or 0.0

    @contextmanager
    def aside(self, load: bool = False):
        """Time spent inside is a one-time cost (``load``: loading a model), not priced per row."""
        start = self.clock()
        try:
            yield
        finally:
            spent = self.clock() - start
            self.excluded += spent
            if load:
                self.load_times.append(spent)
                self.loads_left = max(self.loads_left - 1, 0)

    def left(self, done: int) -> str:
        now, last = self.clock(), len(self.cumulative) - 1
        done = min(max(done, 0), last)
        if self.mark is None:
            self.mark, self.excluded = (done, now), 0.0
        elif done > self.mark[0]:
            at, then = self.mark
            rows = float(self.cumulative[done] - self.cumulative[at])
            self.timed.append((done - at, rows, max(now - then - self.excluded, 0.0)))
            self.mark, self.excluded = (done, now), 0.0
        total = float(self.cumulative[-1])
        if len(self.timed) < 2 or total <= 0 or self.cumulative[done] < self.START * total:
            return "estimating"  # the first step pays first-call costs: a later one must be timed too
        seconds = self.seconds_left(done)
        if seconds < self.FLOOR:
            return ""
        return f"about {seconds:.0f} s left" if seconds < 90 else f"about {seconds / 60:.0f} min left"

    def seconds_left(self, done: int) -> float:
        """The steps after ``done`` at the fixed time per step and the rate per row measured
        (the job's first step left out once others are timed), plus the models still to load."""
        timed = self.timed[1:] if len(self.timed) > 1 else self.timed
        steps = sum(n for n, _, _ in timed)
        rows = sum(r for _, r, _ in timed)
        seconds = sum(t for _, _, t in timed)
        fixed = min(self.call, seconds / max(steps, 1))
        per_row = max(seconds - fixed * steps, 0.0) / rows if rows > 0 else 0.0
        last = len(self.cumulative) - 1
        rows_left = float(self.cumulative[-1] - self.cumulative[done])
        loads = self.loads_left * float(np.mean(self.load_times)) if self.load_times else 0.0
        return fixed * (last - done) + per_row * rows_left + loads


def derive(store: Store, ws: Workspace, task: dict, data: pd.DataFrame) -> bool:
    """Compute a task from cached results without a model (its spec's ``derive``: a
    subgroup's PFI from the all-rows pairs), so the web process may do it at once. False
    when its spec cannot (or the results it derives from are not cached)."""
    spec = spec_for(task["kind"])
    return spec.derive is not None and spec.derive(store, ws, Task.from_dict(task), data)


def _run_task(job: Job, task: Task, models: dict, policy, loading=nullcontext) -> None:
    """Compute one task into the cache (``loading()``: the context a model loads in, timed
    apart by the job's estimate)."""
    spec = spec_for(task.kind)
    if spec.derive is not None and spec.derive(job.store, job.ws, task, job.data):
        job.say(f"{task.model}: {spec.label} (from cached results)", 0)
        return
    if task.model not in models:
        job.say(f"loading model {task.model}", 0)
        with loading():
            load(job.store, job.ws, task.model, models, policy)
    executor(spec)(job, task, load(job.store, job.ws, task.model, models, policy))
