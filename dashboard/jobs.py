"""Running: the model work that fills the cache with the tasks :mod:`dashboard.planning` plans.

:func:`run` computes the missing tasks of a plan inside an isolated process
(:func:`dashboard.isolation.isolated`, called by the background job), one task at a time
under a per-task lock shared by every process using the cache folder.

Per (workspace, model) one pass per feature (``compute.feature_profile``) yields the ICE
tensor; we cache each feature's profile and a :class:`compute.ProfileSummary` (the local
PFI of every explained row and feature, each row's ICE extremes, CIU's output range, ICE
feature impact and PD importance). Conditional PFI of any subgroup, global CI, an
observation's CIU and the influential rows are methods of the summary, in compute:
switching feature, subgroup or observation needs no new prediction, and the page shows
the library's numbers. Permutation PFI with repetitions (Eq. 8, on the subgroup's rows)
and SFIMP are separate tasks.
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

from .loading import load_model
from .planning import (
    QUANTILE_GRID,
    SEED,
    SFIMP_BUDGET,
    SFIMP_EXACT,
    SFIMP_PERMUTATIONS,
    Task,
    missing,
    profile_key,
    sample_positions,
    select_rows,
)
from .store import Store, Workspace
from .views import task_spec

Progress = Callable[[int, int, str], None]
BUILT_IN = ("profiles", "pfi", "sfimp")
PARTS = ("pfi_part", "sfimp_part")  # parts of a split job (``planning.split``)
PART_TASK = "wip.compute_part"  # the Celery task a split job sends its parts as


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
    y = data[ws.target]
    models = {} if models is None else models
    steps = sum(len(ws.model(t.model).features) if t.kind == "profiles" else 1 for t in todo)
    eta = Eta(np.cumsum([0] + [rows for t in todo for rows in step_rows(ws, t, data)]), clock)
    if todo and eta.cumulative[-1] >= PROBE_FROM:  # a small job is over before an estimate helps
        eta.probe(_probe(store, ws, todo[0], data, models, policy))

    def tell(done: int, total: int, label: str) -> None:
        left = eta.left(done)
        report(done, total, f"{label} · {left}" if left and label != "done" else label)

    done = 0
    busy: list[dict] = []
    for task in todo:
        with task_lock(store, task.key, wait=wait) as mine:  # another session may be computing it
            if not mine:
                busy.append(task.to_dict())
                continue
            if not missing(store, [task.to_dict()]):
                done += len(ws.model(task.model).features) if task.kind == "profiles" else 1
                continue
            done = _run_task(store, ws, task, data, y, models, policy, n_jobs, tell, done, steps)
    tell(steps, steps, "done")
    return busy


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


def _load(store, ws, name: str, models: dict, policy):
    """The model of that name, loaded once per job."""
    entry = ws.model(name)
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
        model = _load(store, ws, task.model, models, policy)
        X = data[list(ws.model(task.model).features)].iloc[:PROBE_ROWS]
        predict = getattr(model, "predict_proba", None) if ws.task == "classification" else None
        predict = predict or model.predict
        predict(X)  # warm (first-call costs)
        start = time.perf_counter()
        predict(X)
        return (time.perf_counter() - start) / max(len(X), 1)
    except Exception:
        return None


def step_rows(ws: Workspace, task: Task, data: pd.DataFrame) -> list[int]:
    """Estimated model rows of each progress step of a task: per feature for the ICE/ICI pass
    (explained rows x grid points, the output-range pass on the first), else one step."""
    n = len(data)

    def pass_rows(feature) -> int:
        n_obs = task.params.get("n_obs") or n
        n_unique = int(data[feature].nunique(dropna=False))
        return n_obs * (n_unique if n_obs * n_unique <= task.params.get("budget", 0) else QUANTILE_GRID + 1)

    if task.kind == "profiles":
        out = [pass_rows(f) for f in ws.model(task.model).features]
        return [out[0] + n, *out[1:]] if out else out
    if task.kind == "profile_part":
        return [pass_rows(task.params["feature"])]
    p = len(task.params.get("features") or ws.model(task.model).features)
    if task.kind == "pfi" and (task.params.get("parts") or task.params.get("pairs")):
        return [1]  # joining cached parts, or restricting cached pairs
    if task.kind in ("pfi", "pfi_part", "pfi_groups"):
        rows = min(n, task.params.get("n_obs") or n)
        return [rows * p * int(task.params.get("n_repeats", 10)) + rows]
    if task.kind in ("sfimp", "sfimp_part"):
        rows = min(n, task.params.get("n_obs") or n)
        if task.kind == "sfimp_part":
            start, stop = task.params["masks"]
            return [(stop - start) * SFIMP_PERMUTATIONS * rows]
        if task.params.get("parts"):
            return [rows]  # joining cached parts
        if p <= SFIMP_EXACT:
            return [(1 << p) * SFIMP_PERMUTATIONS * rows]
        return [SFIMP_BUDGET]
    return [n]


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
    """A subgroup's PFI planned from the all-rows pairs (``params["pairs"]``), restricted to
    its rows and cached, when those pairs are cached: no model call, so the web process may
    do it at once. False when the task is another kind or the pairs are not cached."""
    params = task.get("params") or {}
    if task.get("kind") != "pfi" or not params.get("pairs"):
        return False
    whole = store.get(params["pairs"])
    if whole is None:
        return False
    store.put(task["key"], _restrict(whole, data, params))
    return True


def _restrict(whole: compute.PermutationImportance, data: pd.DataFrame, params: dict):
    mask = select_rows(data, params["condition"], params["excluded"]).to_numpy()
    _need_rows(mask, 2)
    # by position (the rows the all-rows call used): labels may repeat in an uploaded parquet
    positions = sample_positions(len(data), params.get("n_obs"))
    return whole.restrict(mask[positions], n_total=int(mask.sum()))


def _run_task(store, ws, task, data, y, models, policy, n_jobs, progress, done, steps) -> int:
    """Compute one task into the cache; returns the progress count after it."""
    if derive(store, ws, task.to_dict(), data):  # a subgroup's share of cached all-rows pairs
        progress(done, steps, f"{task.model}: permutation importance of the subgroup (from all rows)")
        return done + 1
    entry = ws.model(task.model)
    if entry.name not in models:
        progress(done, steps, f"loading model {entry.name}")
    model = _load(store, ws, task.model, models, policy)
    X = data[list(entry.features)]
    if task.kind == "profiles":

        def step(feature, i):
            progress(done + i, steps, f"{entry.name}: ICE/ICI pass for {feature}")

        store.put(task.key, _profiles(store, ws, entry, model, X, y, task.params, n_jobs, step))
        return done + len(entry.features)
    if task.kind == "profile_part":  # one feature's ICE/ICI pass of a split job
        progress(done, steps, f"{entry.name}: ICE/ICI pass for {task.params['feature']}")
        settings = {k: task.params[k] for k in ("n_obs", "budget", "seed")}
        store.put(task.key, _profile(ws, model, X, y, task.params["feature"], settings, n_jobs))
        return done + 1
    if task.kind not in BUILT_IN and task.kind not in (
        "pfi_part",
        "sfimp_part",
    ):  # a task a view declares (View(tasks=...))
        spec = task_spec(task.kind)
        progress(done, steps, f"{entry.name}: {spec.label or spec.kind}")
        if spec.rows:  # the rows PFI uses
            chosen = select_rows(data, task.params["condition"], task.params["excluded"]).to_numpy()
            _need_rows(chosen, 2)
            if task.params.get("via_pairs"):  # as the bars: every row, then restricted
                store.put(task.key, spec.run(model, X, y, ws, task.params, n_jobs, inside=chosen))
                return done + 1
            X, y = X[chosen], (None if y is None else y[chosen])
        store.put(task.key, spec.run(model, X, y, ws, task.params, n_jobs))
        return done + 1
    mask = select_rows(data, task.params["condition"], task.params["excluded"]).to_numpy()
    _need_rows(mask, 2)
    result: compute.PermutationImportance | compute.ShapleyImportance
    if task.kind == "pfi" and task.params.get("parts"):  # a split job: join its parts
        progress(done, steps, f"{entry.name}: permutation importance (joining {len(task.params['parts'])} parts)")
        found = [store.get(key) for key in task.params["parts"]]
        if any(part is None for part in found):
            raise compute.ModelError("A part of the permutation importance was lost from the cache; run it again.")
        result = compute.PermutationImportance.concat(found)
    elif task.kind == "pfi" and task.params.get("pairs"):  # the pairs were evicted: compute them again
        progress(done, steps, f"{entry.name}: permutation importance ({task.params['n_repeats']} repeats, all rows)")
        whole = _permutation_importance(model, X, y, ws, task.params, n_jobs, keep_pairs=True)
        store.put(task.params["pairs"], whole)
        result = _restrict(whole, data, task.params)
    elif task.kind in ("pfi", "pfi_part"):
        progress(done, steps, f"{entry.name}: permutation importance ({task.params['n_repeats']} repeats)")
        keep = bool(task.params.get("keep"))
        result = _permutation_importance(model, X[mask], y[mask], ws, task.params, n_jobs, keep_pairs=keep)
    elif task.kind == "sfimp_part":  # a batch of the exact game's coalitions
        start, stop = task.params["masks"]
        progress(done, steps, f"{entry.name}: Shapley feature importance (coalitions {start} to {stop - 1})")
        part = compute.shapley_coalitions(
            model, X[mask], y[mask], range(start, stop), n_jobs=n_jobs, **_sfimp(ws, task)
        )
        store.put(task.key, part)
        return done + 1
    elif task.kind == "sfimp":
        progress(done, steps, f"{entry.name}: Shapley feature importance")
        found = [store.get(key) for key in task.params.get("parts") or ()]
        if any(part is None for part in found):
            raise compute.ModelError("A part of the Shapley feature importance was lost from the cache; run it again.")
        result = compute.shapley_importance(
            model,
            X[mask],
            y[mask],
            exact_max_players=SFIMP_EXACT,
            tol=0.02,
            max_rows=SFIMP_BUDGET,
            coalitions=found or None,
            n_jobs=n_jobs,
            **_sfimp(ws, task),
        )
    keep = task.params.get("keep")
    if isinstance(result, compute.PermutationImportance) and task.kind == "pfi" and keep and result.pairs is not None:
        store.put(task.params["keep"], result)  # the all-rows PFI keeps its pairs apart
        result = result.without_pairs()
    store.put(task.key, result)
    return done + 1


def _sfimp(ws, task) -> dict:
    """The arguments that make an SFIMP game, the same for the whole task and its parts."""
    return {
        "loss": ws.loss,
        "output": ws.output,
        "random_state": SEED,
        "n_obs": task.params.get("n_obs"),
        "n_obs_permutations": SFIMP_PERMUTATIONS,
    }


def _permutation_importance(model, X, y, ws, params, n_jobs, keep_pairs=False):
    return compute.permutation_importance(
        model,
        X,
        y,
        loss=ws.loss,
        n_repeats=params["n_repeats"],
        output=ws.output,
        n_obs=params.get("n_obs"),
        random_state=SEED,
        n_jobs=n_jobs,
        features=params.get("features"),
        streams=params.get("streams"),
        keep_pairs=keep_pairs,
    )


def _need_rows(mask: np.ndarray, least: int) -> None:
    if int(mask.sum()) < least:
        raise compute.InputError(
            f"The selected rows number {int(mask.sum())}; at least {least} are needed to permute a feature. "
            "Choose a larger subgroup or exclude fewer observations."
        )


def _profile(ws, model, X, y, feature, settings, n_jobs) -> compute.FeatureProfile:
    """One feature's ICE/ICI pass, with the grid rule of the dashboard."""
    n_obs = settings["n_obs"]
    n_explained = len(X) if n_obs is None else n_obs
    n_unique = X[feature].nunique(dropna=False)
    grid = "observed" if n_explained * n_unique <= settings["budget"] else QUANTILE_GRID
    return compute.feature_profile(
        model,
        X,
        y,
        feature,
        grid=grid,
        loss=ws.loss,
        output=ws.output,
        n_obs=n_obs,
        random_state=settings["seed"],
        n_jobs=n_jobs,
    )


def _profiles(store, ws, entry, model, X, y, settings, n_jobs, step) -> compute.ProfileSummary:
    """All feature profiles of one model (cached one by one) and their summary."""

    def passes():
        for i, feature in enumerate(entry.features):
            step(feature, i)
            key = profile_key(ws, entry, feature, settings)
            prof = store.get(key)  # a split job's parts computed it already
            if prof is None:
                prof = _profile(ws, model, X, y, feature, settings, n_jobs)
                store.put(key, prof)
            yield feature, prof

    # CIU's output range over all rows, as the library's default (one pass over X); a model
    # constant on X gets a unit range around its value (every CI is then 0 or out of range)
    try:
        out_range = compute.output_range(model, X, output=ws.output, n_jobs=n_jobs)
    except compute.InputError:  # a regressor constant on X
        value = float(np.ravel(model.predict(X.iloc[:1]))[0])
        out_range = (value - 0.5, value + 0.5)
    return compute.ProfileSummary.from_profiles(passes(), out_range=out_range, n_rows=len(X))
