"""The built-in tasks as :class:`~dashboard.planning.TaskSpec` s: the ICE/ICI pass of every
feature (``profiles``), permutation importance (``pfi``) and Shapley feature importance
(``sfimp``), with the parts a split job computes them in (``profile_part``, ``pfi_part``,
``sfimp_part``). A view's own tasks are specs of the same type, declared in its module; the
planner (:func:`dashboard.planning.plan`) and the job runner (:mod:`dashboard.jobs`) are
loops over specs and name none of these.

Per (workspace, model) one pass per feature (``compute.feature_profile``) yields the ICE
tensor; each feature's profile is cached, with a :class:`compute.ProfileSummary` (the local
PFI of every explained row and feature, each row's ICE extremes, CIU's output range, ICE
feature impact and PD importance). Permutation PFI with repetitions (Eq. 8, on the
subgroup's rows) and SFIMP are tasks of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

import compute
from compute.importance import permutation_block
from compute.sampling import distinct_up_to

from . import samples
from .planning import (
    QUANTILE_GRID,
    SEED,
    SFIMP_BUDGET,
    SFIMP_EXACT,
    SFIMP_PERMUTATIONS,
    PlanInput,
    Planned,
    Split,
    Task,
    TaskSpec,
    rows_id,
    sample_positions,
    select_rows,
    sfimp_sample,
)
from .predictions import every_row_key, known_output_range
from .samples import SAMPLE, feature_blocks, sample_task
from .store import Failed, ModelEntry, Store, Workspace


@dataclass
class Job:
    """What a task computes with, in the job process: the cache, the data set (or a range of
    its rows), the worker count, and ``say(label, step)``, the progress bar's label at a step of the task."""

    store: Store
    ws: Workspace
    frame: pd.DataFrame | None  # the data set, read when a task first asks for it
    n_jobs: int
    say: Callable[[str, int], None]

    @property
    def data(self) -> pd.DataFrame:
        if self.frame is None:
            self.frame = self.store.data(self.ws)
        return self.frame

    def rows(self, rows: tuple[int, int], columns: list[str]) -> pd.DataFrame:
        """Rows ``[a, b)`` of the data set, only ``columns``, read from the row groups holding
        them alone (a ``reads_rows`` task: the whole data set is never loaded for it)."""
        return self.store.rows(self.ws, rows, columns)

    def column(self, name: str) -> pd.Series:
        """One column over every row: off the data set when this process holds it, else read
        alone by row groups (a worker that has not fetched the data set does not)."""
        if self.frame is not None or not self.ws.n_rows:
            return self.data[name]
        return self.rows((0, int(self.ws.n_rows)), [name])[name]

    @property
    def y(self) -> pd.Series:
        return self.data[self.ws.target]

    def X(self, model: str) -> pd.DataFrame:
        return self.data[list(self.ws.model(model).features)]


def need_rows(mask: np.ndarray, least: int) -> None:
    if int(mask.sum()) < least:
        raise compute.InputError(
            f"The selected rows number {int(mask.sum())}; at least {least} are needed to permute a feature. "
            "Choose a larger subgroup or exclude fewer observations."
        )


def _selected(job: Job, params: dict) -> np.ndarray:
    mask = select_rows(job.data, params["condition"], params["excluded"]).to_numpy()
    need_rows(mask, 2)
    return mask


# --- a view's task (View(tasks=...)) ---------------------------------------------------------
def execute_declared(spec: TaskSpec, job: Job, task: Task, model) -> None:
    """The default ``execute``: ``spec.run`` on the task's rows, its result cached."""
    assert spec.run is not None  # a spec without run has its own execute (TaskSpec checks)
    job.say(f"{task.model}: {spec.label or spec.kind}", 0)
    X, y = job.X(task.model), job.y
    if spec.rows:  # the rows PFI uses
        chosen = _selected(job, task.params)
        if task.params.get("via_pairs"):  # as the bars: every row, then restricted
            job.store.put(task.key, spec.run(model, X, y, job.ws, task.params, job.n_jobs, inside=chosen))
            return
        X, y = X[chosen], y[chosen]
    job.store.put(task.key, spec.run(model, X, y, job.ws, task.params, job.n_jobs))


def executor(spec: TaskSpec) -> Callable[[Job, Task, Any], None]:
    return spec.execute if spec.execute is not None else partial(execute_declared, spec)


# --- profiles: one ICE/ICI pass per feature, and their summary --------------------------------
def _profiles_plan(p: PlanInput, spec: TaskSpec) -> Planned:
    entry, settings = p.focus, p.settings
    summary = spec.key("summary", p.ws, entry, **settings)
    per_feature = {f: spec.key("profile", p.ws, entry, feature=str(f), **settings) for f in entry.features}
    every_row = {"every_row": every_row_key(p.ws, entry)} if p.ws.task == "regression" else {}
    task = Task(spec.kind, summary, entry.name, {**settings, **every_row}, tuple(per_feature.values()))
    return Planned({"summary": summary, "profiles": per_feature}, [task])


def _profiles_read(keys: dict, state: dict) -> list:
    return [keys["summary"], keys["profiles"].get(state.get("feature"))]


def _pass_rows(ws: Workspace, params: dict, data: pd.DataFrame, feature) -> int:
    """Model rows of one feature's pass: explained rows x grid points (a part reading its
    sample has no data set: its grid counted as quantiles)."""
    n_obs = params.get("n_obs") or len(data) or int(ws.n_rows)
    if feature not in data:
        return n_obs * (QUANTILE_GRID + 1)
    n_unique = distinct_up_to(data[feature], params.get("budget", 0) // n_obs)
    return n_obs * (n_unique if n_obs * n_unique <= params.get("budget", 0) else QUANTILE_GRID + 1)


def _profiles_cost(ws: Workspace, task: Task, data: pd.DataFrame) -> list[int]:
    """Per feature (a regressor's output-range pass over every row on the first: a
    classifier's range is 0 to 1, no rows)."""
    out = [_pass_rows(ws, task.params, data, f) for f in ws.model(task.model).features]
    output_range = len(data) if ws.task == "regression" else 0
    return [out[0] + output_range, *out[1:]] if out else out


def _profiles_split(ws: Workspace, task: Task) -> Split:
    """One part per feature (``profile_part``, writing that feature's cached profile), each
    reading the explained rows from their sample (:mod:`dashboard.samples`, kept by the job
    first) and its feature's column; the task itself then joins them (it reuses the cached
    profiles and adds the summary and the output-range pass)."""
    entry = ws.model(task.model)
    sample = sample_task(ws, entry, task.params, "profile")
    named = {"sample": sample.to_dict()} if sample is not None else {}
    parts = [
        Task(PROFILE_PART.kind, key, task.model, {**task.params, "feature": feature, **named})
        for feature, key in zip(entry.features, task.also)
    ]
    return Split([sample, *parts] if sample is not None else parts, task)


def _profile(ws, model, X, y, feature, settings, *, n_jobs: int, column=None) -> compute.FeatureProfile:
    """One feature's ICE/ICI pass, with the grid rule of the dashboard (``column``: the
    feature over every row when X holds the explained rows alone, a part's sample)."""
    n_obs = settings["n_obs"]
    n_explained = len(X) if n_obs is None else n_obs
    # the observed values when they fit the budget (counted only up to what it allows)
    n_unique = distinct_up_to(X[feature] if column is None else column, settings["budget"] // n_explained)
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
        column=column,
    )


def _profiles_execute(job: Job, task: Task, model) -> None:
    """All feature profiles of one model (cached one by one) and their summary."""
    entry: ModelEntry = job.ws.model(task.model)
    X, y = job.X(task.model), job.y

    def passes():
        for i, (feature, key) in enumerate(zip(entry.features, task.also)):
            job.say(f"{entry.name}: ICE/ICI pass for {feature}", i)
            prof = job.store.get(key)  # a split job's parts computed it already
            if prof is None:
                try:
                    prof = _profile(job.ws, model, X, y, feature, task.params, n_jobs=job.n_jobs)
                except compute.InputError as exc:  # this feature alone (no values, one value): its panels say why
                    prof = Failed(f"The ICE/ICI curves of {feature} could not be computed: {exc}")
                job.store.put(key, prof)
            if not isinstance(prof, Failed):  # the summary holds the features that have curves
                yield feature, prof

    summary = compute.ProfileSummary.from_profiles(
        passes(), out_range=_output_range(job, task, model, X), n_rows=len(X)
    )
    job.store.put(task.key, summary)


def _output_range(job: Job, task: Task, model, X: pd.DataFrame) -> tuple[float, float]:
    """CIU's output range over all rows: off the cached predictions on every row, else one pass
    over X; a model constant on X gets a unit range around its value (every CI 0 or out of range)."""
    try:
        known = known_output_range(job, task.params.get("every_row"), len(X))
        return known or compute.output_range(model, X, output=job.ws.output, n_jobs=job.n_jobs)
    except compute.InputError:  # a regressor constant on X
        value = float(np.ravel(model.predict(X.iloc[:1]))[0])
        return (value - 0.5, value + 0.5)


def _profile_part_execute(job: Job, task: Task, model) -> None:
    """One feature's ICE/ICI pass of a split job: on its sample and its column alone when
    it has a sample (the same numbers as on the whole data set)."""
    feature = task.params["feature"]
    job.say(f"{task.model}: ICE/ICI pass for {feature}", 0)
    settings = {k: task.params[k] for k in ("n_obs", "budget", "seed")}
    sample = samples.read(job, task)
    if sample is None:
        prof = _profile(job.ws, model, job.X(task.model), job.y, feature, settings, n_jobs=job.n_jobs)
    else:
        X, y = sample[list(job.ws.model(task.model).features)], sample[job.ws.target]
        prof = _profile(job.ws, model, X, y, feature, settings, n_jobs=job.n_jobs, column=job.column(feature))
    job.store.put(task.key, prof)


PROFILES = TaskSpec(
    "profiles",
    plan=_profiles_plan,
    reads=_profiles_read,
    cost=_profiles_cost,
    split=_profiles_split,
    execute=_profiles_execute,
    models="focus",
    label="ICE/ICI passes",
)
PROFILE_PART = TaskSpec(
    "profile_part",
    cost=lambda ws, task, data: [_pass_rows(ws, task.params, data, task.params["feature"])],
    execute=_profile_part_execute,
    label="ICE/ICI pass",
    reads_rows=True,  # its sample and one column (the whole data set when it explains every row)
)


# --- permutation importance ----------------------------------------------------------------
PFI_BLOCK = 1  # features per PFI part when a job is split over workers


def _pfi_key(p: PlanInput, spec: TaskSpec, m: ModelEntry, rows: str, via: str = "") -> str:
    extra = {"via": via} if via else {}
    n_obs = p.pfi_n_obs[m.name]
    return spec.key(spec.kind, p.ws, m, rows=rows, n_repeats=p.n_repeats, seed=SEED, n_obs=n_obs, **extra)


def _pairs_key(p: PlanInput, spec: TaskSpec, m: ModelEntry) -> str:
    """The all-rows PFI with every (row, donor) pair kept (``keep_pairs``)."""
    return spec.key("pfi_pairs", p.ws, m, n_repeats=p.n_repeats, seed=SEED, n_obs=p.pfi_n_obs[m.name])


def _pfi_plan(p: PlanInput, spec: TaskSpec) -> Planned:
    """One task per model on the selected rows. On a sample of large data the all-rows PFI
    keeps its (row, donor) pairs for the subgroups to come; a subgroup's PFI then comes from
    them (:func:`dashboard.planning.pfi_via_pairs`), planned after the all-rows task."""
    keys: dict[str, str] = {}
    tasks: list[Task] = []
    whole_rows = not p.condition.strip() and not p.excluded
    for m in p.ws.models:
        base: dict[str, Any] = {"n_repeats": p.n_repeats, "n_obs": p.pfi_n_obs[m.name]}
        kept = _pairs_key(p, spec, m)
        params: dict[str, Any] = {"condition": p.condition, "excluded": p.excluded, **base}
        if m.name in p.via_pairs:  # the all-rows PFI with its pairs, then the subgroup's share of them
            keys[m.name] = _pfi_key(p, spec, m, p.rows, via="pairs")
            every: dict[str, Any] = {"condition": "", "excluded": [], **base, "keep": kept}
            tasks.append(Task(spec.kind, _pfi_key(p, spec, m, rows_id("", ())), m.name, every, (kept,)))
            tasks.append(Task(spec.kind, keys[m.name], m.name, {**params, "pairs": kept}))
            continue
        keys[m.name] = _pfi_key(p, spec, m, p.rows)
        if whole_rows and p.keeps_pairs[m.name]:  # kept for the subgroups to come
            tasks.append(Task(spec.kind, keys[m.name], m.name, {**params, "keep": kept}, (kept,)))
        else:
            tasks.append(Task(spec.kind, keys[m.name], m.name, params))
    return Planned({spec.kind: keys}, tasks)


def _pfi_rows(ws: Workspace, task: Task, data: pd.DataFrame) -> int:
    p = len(task.params.get("features") or ws.model(task.model).features)
    n = len(data) or int(ws.n_rows)  # a part reading its sample has no data set
    rows = min(n, task.params.get("n_obs") or n)
    return rows * p * int(task.params.get("n_repeats", 10)) + rows


def _pfi_cost(ws: Workspace, task: Task, data: pd.DataFrame) -> list[int]:
    if task.params.get("parts") or task.params.get("pairs"):
        return [1]  # joining cached parts, or restricting cached pairs
    return [_pfi_rows(ws, task, data)]


def _pfi_split(ws: Workspace, task: Task) -> Split | None:
    """One part per block of PFI_BLOCK features (``pfi_part``), each on the same rows with
    the permutation streams its features have in the whole call; the PFI task then joins
    them (``PermutationImportance.concat``), bit for bit the one call. A subgroup's share of
    the all-rows pairs is no part: it runs after they are joined."""
    if task.params.get("pairs"):
        return Split([], task)
    return feature_blocks(PFI, PFI_PART.kind, ws, task, PFI_BLOCK, keep=bool(task.params.get("keep")))


def _restrict(whole: compute.PermutationImportance, data: pd.DataFrame, params: dict):
    mask = select_rows(data, params["condition"], params["excluded"]).to_numpy()
    need_rows(mask, 2)
    # by position (the rows the all-rows call used): labels may repeat in an uploaded parquet
    positions = sample_positions(len(data), params.get("n_obs"))
    return whole.restrict(mask[positions], n_total=int(mask.sum()))


def _pfi_derive(store: Store, ws: Workspace, task: Task, data: pd.DataFrame) -> bool:
    """A subgroup's PFI planned from the all-rows pairs (``params["pairs"]``), restricted to
    its rows and cached, when those pairs are cached: no model call, so the web process may
    do it at once. False when the pairs are not cached (or the task is no such share)."""
    if not task.params.get("pairs"):
        return False
    whole = store.get(task.params["pairs"])
    if whole is None:
        return False
    store.put(task.key, _restrict(whole, data, task.params))
    return True


def permutation_importance(model, X, y, ws: Workspace, params: dict, n_jobs: int, *, keep_pairs: bool = False):
    """PFI as the page computes it (the seed, the loss and output of the data set), a block
    of a split job's features (``streams``) or keeping its pairs for the subgroups to come."""
    return permutation_block(
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


def _pfi_execute(job: Job, task: Task, model) -> None:
    params, name = task.params, task.model
    X, y = job.X(name), job.y
    mask = _selected(job, params)
    if params.get("parts"):  # a split job: join its parts
        job.say(f"{name}: permutation importance (joining {len(params['parts'])} parts)", 0)
        found = [job.store.get(key) for key in params["parts"]]
        if any(part is None for part in found):
            raise compute.ModelError("A part of the permutation importance was lost from the cache; run it again.")
        # the rows of the data set the sample was drawn from (a part on its sample saw those alone)
        result = replace(compute.PermutationImportance.concat(found), n_total=int(mask.sum()))
    elif params.get("pairs"):  # the pairs were evicted: compute them again
        job.say(f"{name}: permutation importance ({params['n_repeats']} repeats, all rows)", 0)
        whole = permutation_importance(model, X, y, job.ws, params, job.n_jobs, keep_pairs=True)
        job.store.put(params["pairs"], whole)
        result = _restrict(whole, job.data, params)
    else:
        job.say(f"{name}: permutation importance ({params['n_repeats']} repeats)", 0)
        keep = bool(params.get("keep"))
        result = permutation_importance(model, X[mask], y[mask], job.ws, params, job.n_jobs, keep_pairs=keep)
    if params.get("keep") and result.pairs is not None:
        job.store.put(params["keep"], result)  # the all-rows PFI keeps its pairs apart
        result = result.without_pairs()
    job.store.put(task.key, result)


def _pfi_part_execute(job: Job, task: Task, model) -> None:
    """A block of features on the selected rows: on their sample alone when the task has one
    (``permutation_block`` on the sampled rows draws the permutations of the call on all)."""
    params = task.params
    job.say(f"{task.model}: permutation importance ({params['n_repeats']} repeats)", 0)
    sample = samples.read(job, task)
    if sample is None:
        mask = _selected(job, params)
        X, y = job.X(task.model)[mask], job.y[mask]
    else:
        need_rows(np.ones(len(sample), dtype=bool), 2)  # a sample is min(n_obs, selected) rows
        X, y = sample[list(job.ws.model(task.model).features)], sample[job.ws.target]
    result = permutation_importance(model, X, y, job.ws, params, job.n_jobs, keep_pairs=bool(params.get("keep")))
    job.store.put(task.key, result)


PFI = TaskSpec(
    "pfi",
    plan=_pfi_plan,
    cost=_pfi_cost,
    split=_pfi_split,
    execute=_pfi_execute,
    derive=_pfi_derive,
    label="permutation importance",
)
PFI_PART = TaskSpec(
    "pfi_part",
    cost=lambda ws, task, data: [_pfi_rows(ws, task, data)],
    execute=_pfi_part_execute,
    label="permutation importance",
    reads_rows=True,  # its sample (the whole data set when it permutes every selected row)
)


# --- Shapley feature importance -------------------------------------------------------------
SFIMP_PARTS = 4  # batches of coalitions an exact SFIMP is split into
SFIMP_AUTO = 500_000  # model rows (all models) below which SFIMP is computed without being asked


def sfimp_rows(ws: Workspace, n_rows: int, all_rows: bool = False) -> int:
    """The model rows SFIMP costs for every model of the data set (at most: on all rows)."""
    total = 0
    for m in ws.models:
        p = len(m.features)
        rows = min(n_rows, sfimp_sample(p, all_rows) or n_rows)
        total += (1 << p) * SFIMP_PERMUTATIONS * rows if p <= SFIMP_EXACT else SFIMP_BUDGET
    return total


def sfimp_by_itself(ws: Workspace, n_rows: int) -> bool:
    """SFIMP is computed without being asked when it is cheap (SFIMP_AUTO model rows for all
    the models: the small demos): no empty panel where a few seconds give the chart."""
    return sfimp_rows(ws, n_rows) <= SFIMP_AUTO


def _sfimp_plan(p: PlanInput, spec: TaskSpec) -> Planned:
    """When the state asks for SFIMP (its button), or by itself when it is cheap: one task
    per model."""
    if not (p.state.get("sfimp") or sfimp_by_itself(p.ws, p.n_rows)):
        return Planned({spec.kind: {}}, [])
    keys: dict[str, str] = {}
    tasks = []
    for m in p.ws.models:
        n_obs = sfimp_sample(len(m.features), p.all_rows)
        extra = {"n_obs": n_obs} if n_obs is not None else {}
        keys[m.name] = spec.key(spec.kind, p.ws, m, rows=p.rows, seed=SEED, **extra)
        params = {"condition": p.condition, "excluded": p.excluded, "n_obs": n_obs}
        tasks.append(Task(spec.kind, keys[m.name], m.name, params))
    return Planned({spec.kind: keys}, tasks)


def _sfimp_cost(ws: Workspace, task: Task, data: pd.DataFrame) -> list[int]:
    rows = min(len(data), task.params.get("n_obs") or len(data))
    p = len(ws.model(task.model).features)
    if task.kind == SFIMP_PART.kind:
        start, stop = task.params["masks"]
        return [(stop - start) * SFIMP_PERMUTATIONS * rows]
    if task.params.get("parts"):
        return [rows]  # joining cached parts
    if p <= SFIMP_EXACT:
        return [(1 << p) * SFIMP_PERMUTATIONS * rows]
    return [SFIMP_BUDGET]


def _sfimp_split(ws: Workspace, task: Task) -> Split | None:
    """The exact game: its 2^p coalitions in SFIMP_PARTS batches (``sfimp_part``,
    ``compute.shapley_coalitions``), joined by the SFIMP task
    (``shapley_importance(coalitions=...)``), bit for bit. A sampled SFIMP (its orderings
    are drawn until the error is small, one after another) is one part."""
    entry = ws.model(task.model)
    if len(entry.features) > SFIMP_EXACT:
        return None
    top = 1 << len(entry.features)
    size = max(1, -(-top // SFIMP_PARTS))
    parts = []
    for start in range(0, top, size):
        key = SFIMP.key(SFIMP_PART.kind, ws, entry, of=task.key, start=start)
        masks = [start, min(start + size, top)]
        parts.append(Task(SFIMP_PART.kind, key, task.model, {**task.params, "masks": masks}))
    join = Task(task.kind, task.key, task.model, {**task.params, "parts": [t.key for t in parts]}, task.also)
    return Split(parts, join)


def _sfimp_game(ws: Workspace, params: dict) -> dict:
    """The arguments that make an SFIMP game, the same for the whole task and its parts."""
    return {
        "loss": ws.loss,
        "output": ws.output,
        "random_state": SEED,
        "n_obs": params.get("n_obs"),
        "n_obs_permutations": SFIMP_PERMUTATIONS,
    }


def _sfimp_execute(job: Job, task: Task, model) -> None:
    job.say(f"{task.model}: Shapley feature importance", 0)
    mask = _selected(job, task.params)
    found = [job.store.get(key) for key in task.params.get("parts") or ()]
    if any(part is None for part in found):
        raise compute.ModelError("A part of the Shapley feature importance was lost from the cache; run it again.")
    result = compute.shapley_importance(
        model,
        job.X(task.model)[mask],
        job.y[mask],
        exact_max_players=SFIMP_EXACT,
        tol=0.02,
        max_rows=SFIMP_BUDGET,
        coalitions=found or None,
        n_jobs=job.n_jobs,
        **_sfimp_game(job.ws, task.params),
    )
    job.store.put(task.key, result)


def _sfimp_part_execute(job: Job, task: Task, model) -> None:
    """A batch of the exact game's coalitions."""
    start, stop = task.params["masks"]
    job.say(f"{task.model}: Shapley feature importance (coalitions {start} to {stop - 1})", 0)
    mask = _selected(job, task.params)
    X, y = job.X(task.model)[mask], job.y[mask]
    game = _sfimp_game(job.ws, task.params)
    job.store.put(task.key, compute.shapley_coalitions(model, X, y, range(start, stop), n_jobs=job.n_jobs, **game))


SFIMP = TaskSpec(
    "sfimp",
    plan=_sfimp_plan,
    cost=_sfimp_cost,
    split=_sfimp_split,
    execute=_sfimp_execute,
    label="Shapley feature importance",
)
SFIMP_PART = TaskSpec("sfimp_part", cost=_sfimp_cost, execute=_sfimp_part_execute, label="Shapley feature importance")

#: The built-in specs a view may name in ``View(needs=...)``, in planning order (the ICE/ICI
#: pass first: the progress bar shows it first, and a subgroup's share of the all-rows PFI
#: pairs follows them)
BUILT_IN: tuple[TaskSpec, ...] = (PROFILES, PFI, SFIMP)
#: The parts of a split job (never planned from a state: a spec's ``split`` makes them)
PARTS: tuple[TaskSpec, ...] = (SAMPLE, PROFILE_PART, PFI_PART, SFIMP_PART)
