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
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pandas as pd

import compute

from . import session_models
from . import tasks as built_in
from .loading import load_model
from .planning import Task, TaskSpec, missing
from .store import Failed, Store, Workspace
from .tasks import Job, executor
from .views import task_specs

Progress = Callable[[int, int, str], None]
PART_TASK = "wip.compute_part"  # the Celery task a split job sends its parts as


def spec_for(kind: str) -> TaskSpec:
    """The spec of a task kind: a built-in one, a part of a split job, or a view's."""
    for spec in (*built_in.BUILT_IN, *built_in.PARTS, *task_specs()):
        if spec.kind == kind:
            return spec
    raise KeyError(f"no task of kind {kind!r}")


def step_rows(ws: Workspace, task: Task, data: pd.DataFrame) -> list[int]:
    """Estimated model rows of each progress step of a task (its spec's ``cost``)."""
    return spec_for(task.kind).estimate(ws, task, data)


def split(ws: Workspace, todo: list[dict]) -> tuple[list[dict], list[dict]]:
    """A job's tasks as independent parts for several workers, and the steps that join them
    (each spec's ``split``: the ICE/ICI pass one part per feature, PFI one per block of
    features, exact SFIMP batches of coalitions, each joined bit for bit the one call; a
    task without parts is one part itself). Returns (parts, joins); joins run once every
    part is done."""
    parts: list[dict] = []
    joins: list[dict] = []
    for record in todo:
        task = Task.from_dict(record)
        found = spec_for(task.kind).parts(ws, task)
        if found is None:
            parts.append(record)
            continue
        parts += [t.to_dict() for t in found.parts]
        joins.append(found.join.to_dict())
    return parts, joins


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
    progress label ends with the time left ("about 40 s left"): the job's model rows are
    estimated per step (:func:`step_rows`) and priced first by a timed probe (the first
    model predicting a few hundred rows), then by the rate measured so far. ``models``: the
    models already loaded in this process, by name, filled as models load (the parts of a
    split job share them). ``wait=False``: a task another process is computing is skipped,
    not waited for; returns the tasks skipped so."""
    report = progress or (lambda done, total, label: None)
    todo = [Task.from_dict(t) for t in missing(store, tasks)]
    data = store.data(ws)
    models = {} if models is None else models
    costs = [step_rows(ws, t, data) for t in todo]
    steps = sum(len(c) for c in costs)
    eta = Eta(np.cumsum([0] + [rows for c in costs for rows in c]), clock)
    if todo and eta.cumulative[-1] >= PROBE_FROM:  # a small job is over before an estimate helps
        eta.probe(_probe(store, ws, todo[0], data, models, policy))

    def tell(done: int, total: int, label: str) -> None:
        left = eta.left(done)
        report(done, total, f"{label} · {left}" if left and label != "done" else label)

    done = 0
    busy: list[dict] = []
    for task, cost in zip(todo, costs):
        with task_lock(store, task.key, wait=wait) as mine:  # another session may be computing it
            if not mine:
                busy.append(task.to_dict())
                continue
            if missing(store, [task.to_dict()]):
                try:
                    _run_task(Job(store, ws, data, n_jobs, _say(tell, done, steps)), task, models, policy)
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
    """An exclusive lock per task across processes and machines sharing the cache folder
    (``flock``: released by the kernel if the holder dies, so a killed job blocks no one).
    Yields True once held; with ``wait=False``, False at once when another process holds it."""
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
    releases it, through the kernel if it has to."""
    with open(_lock_path(store, "job:" + token), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def job_ended(store: Store, token: str) -> bool:
    """True when no process holds the job's :func:`job_alive` lock: its queued parts are
    then not wanted any more."""
    with open(_lock_path(store, "job:" + token), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


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
    """Seconds per row of the first task's model on a few hundred rows (None if it fails:
    the task itself will then report the failure)."""
    try:
        model = load(store, ws, task.model, models, policy)
        X = data[list(ws.model(task.model).features)].iloc[:PROBE_ROWS]
        predict = getattr(model, "predict_proba", None) if ws.task == "classification" else None
        predict = predict or model.predict
        predict(X)  # warm (first-call costs)
        start = time.perf_counter()
        predict(X)
        return (time.perf_counter() - start) / max(len(X), 1)
    except Exception:
        return None


class Eta:
    """Time left from the estimated model rows done (``cumulative[k]``: rows of the first k
    steps): the probe's seconds per row until a second of work has been timed, then the
    rate measured since the first step."""

    def __init__(self, cumulative: np.ndarray, clock: Callable[[], float]):
        self.cumulative, self.clock = cumulative, clock
        self.start: float | None = None
        self.rate: float | None = None

    def probe(self, seconds_per_row: float | None) -> None:
        self.rate = seconds_per_row

    def left(self, done: int) -> str:
        now = self.clock()
        if self.start is None:
            self.start = now
        total = float(self.cumulative[-1])
        rows_done = float(self.cumulative[min(max(done, 0), len(self.cumulative) - 1)])
        elapsed = now - self.start
        rate = elapsed / rows_done if (rows_done > 0 and elapsed >= 1.0) else self.rate
        if rate is None or total <= 0:
            return ""
        seconds = (total - rows_done) * rate
        if seconds < 2:
            return ""
        return f"about {seconds:.0f} s left" if seconds < 90 else f"about {seconds / 60:.0f} min left"


def derive(store: Store, ws: Workspace, task: dict, data: pd.DataFrame) -> bool:
    """Compute a task from cached results without a model (its spec's ``derive``: a
    subgroup's PFI from the all-rows pairs), so the web process may do it at once. False
    when its spec cannot (or the results it derives from are not cached)."""
    spec = spec_for(task["kind"])
    return spec.derive is not None and spec.derive(store, ws, Task.from_dict(task), data)


def _run_task(job: Job, task: Task, models: dict, policy) -> None:
    """Compute one task into the cache."""
    spec = spec_for(task.kind)
    if spec.derive is not None and spec.derive(job.store, job.ws, task, job.data):
        job.say(f"{task.model}: {spec.label} (from cached results)", 0)
        return
    if task.model not in models:
        job.say(f"loading model {task.model}", 0)
    model = load(job.store, job.ws, task.model, models, policy)
    executor(spec)(job, task, model)
