"""Planning: the results a drill-down state needs, as cacheable tasks with their keys.

A view never calls a model. :func:`plan` lists the results a state needs with their cache
keys (only the task kinds the registered views read); :func:`missing` says which are not
cached yet. :mod:`dashboard.jobs` computes them, in an isolated process
(:mod:`dashboard.isolation`). Everything here derives from the state and the server's
configuration: a browser names a state, never a task, a key or a parameter.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import compute
from compute.sampling import is_categorical

from .store import Failed, Lru, ModelEntry, Store, Workspace, result_key

SEED = 0
QUANTILE_GRID = 60


@dataclass(frozen=True)
class Task:
    kind: str  # the kind of its TaskSpec
    key: str  # cache key of the result the task writes (profiles: the summary)
    model: str  # model name within the workspace
    params: dict
    also: tuple = ()  # further keys the task writes (profiles: one per feature)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "key": self.key, "model": self.model, "params": self.params, "also": list(self.also)}

    @classmethod
    def from_dict(cls, record: dict) -> Task:
        return cls(record["kind"], record["key"], record["model"], record["params"], tuple(record.get("also", ())))


@dataclass(frozen=True)
class Planned:
    """What one TaskSpec plans for a state: its cache keys (merged into the plan's ``keys``,
    usually ``{kind: {model name: key}}``) and the tasks that write them."""

    keys: dict
    tasks: list[Task]


@dataclass(frozen=True)
class Split:
    """A task as parts any worker may compute (each its own cached result) and the task that
    joins them once all are done (``TaskSpec.split``)."""

    parts: list[Task]
    join: Task


@dataclass(frozen=True)
class TaskSpec:
    """A kind of result the page needs: the built-in ones (``dashboard.tasks``: ICE/ICI
    profiles, PFI, SFIMP and the parts of a split job) and the ones views declare in their
    module (``View(tasks=...)``). The planner and the job runner are loops over specs.

    A view's spec gives ``params`` and ``run``: ``params(state, ws)`` derives the task's
    parameters from the cleaned drill-down state alone (None: the state needs no such
    result); they go into the cache key. ``run(model, X, y, ws, params, n_jobs)`` computes
    the result in the isolated job process. ``models``: one task per model of the data set
    ("all") or for the selected model only ("focus"). ``label`` says what runs, in the
    progress bar.

    ``rows=True``: the task runs on the rows PFI uses. The planner then adds them to its
    parameters itself (``condition``, ``excluded``, and ``via_pairs`` when the PFI bars come
    from the all-rows permutations), and ``run`` gets only those rows; with ``via_pairs``
    it gets every row and ``inside=`` the selected rows' mask: it computes on all rows, as
    the bars, and restricts (``PermutationImportance.restrict``).

    Hooks, each with a default a view rarely overrides:

    - ``cost(ws, task, data)``: the estimated model rows of each progress step (the job's
      time-left estimate); default one step of one prediction per row.
    - ``split(ws, task)``: a :class:`Split` when the task can be computed in parts by
      several workers (Celery), else None (default: one part).
    - ``plan(p, spec)``: the keys and tasks for a :class:`PlanInput` (default: ``params``,
      one task per model of ``models``). ``reads(keys, state)``: the cache keys of this kind
      a view reads (default: all of ``keys[kind]``).
    - ``execute(job, task, model)``: computes the task into the cache in the job process
      (default: ``run`` on the task's rows, its result stored under ``task.key``).
    - ``derive(store, ws, task, data)``: computes the task without a model from results
      already cached (a subgroup's PFI from the all-rows pairs), or returns False.

    ``version`` is part of every cache key the spec writes: bump it when ``run`` changes
    what it returns, and the cache serves no stale result.

    ``quick=True``: the task answers a click (one row's what-if): the request that needs it
    computes it at once in a warm model process (:mod:`dashboard.warm`) rather than in a
    background job, which takes it over if that fails or takes too long.
    """

    kind: str
    params: Callable[[dict, Workspace], dict | None] = lambda state, ws: None
    run: Callable[..., Any] | None = None
    models: str = "all"
    label: str = ""  # for the progress bar ("predictions on every row")
    rows: bool = False
    version: int = 1
    cost: Callable[[Workspace, Task, pd.DataFrame], list[int]] | None = None
    split: Callable[[Workspace, Task], Split | None] | None = None
    plan: Callable[[PlanInput, TaskSpec], Planned] | None = None
    reads: Callable[[dict, dict], list] | None = None
    execute: Callable[..., None] | None = None
    derive: Callable[..., bool] | None = None
    quick: bool = False

    def __post_init__(self):
        if self.models not in ("all", "focus"):
            raise ValueError(f"TaskSpec {self.kind!r}: models is 'all' or 'focus', not {self.models!r}")
        if self.execute is None and self.run is None:
            raise ValueError(f"TaskSpec {self.kind!r} needs run (or its own execute)")

    def key(self, kind: str, ws: Workspace, model: ModelEntry | None, **params) -> str:
        """A cache key of this spec (``kind``: the spec's own or one of the results it writes)."""
        return result_key(kind, ws, model, version=self.version, **params)

    def estimate(self, ws: Workspace, task: Task, data: pd.DataFrame) -> list[int]:
        """Estimated model rows per progress step (``cost``; default one prediction per row)."""
        return self.cost(ws, task, data) if self.cost is not None else [len(data)]

    def parts(self, ws: Workspace, task: Task) -> Split | None:
        return self.split(ws, task) if self.split is not None else None

    def keys_read(self, keys: dict, state: dict) -> list:
        if self.reads is not None:
            return self.reads(keys, state)
        return list(keys.get(self.kind, {}).values())

    def planned(self, p: PlanInput) -> Planned:
        return self.plan(p, self) if self.plan is not None else plan_declared(p, self)


@dataclass
class PlanInput:
    """What every spec plans from: the data set, the selected model, the cleaned state and
    the server's settings; facts several specs share (the PFI row sample, whether a
    subgroup's PFI comes from the all-rows pairs) are derived once, when first asked."""

    ws: Workspace
    state: dict
    n_rows: int
    max_curves: int
    grid_budget: int
    data: pd.DataFrame | None = None

    @property
    def focus(self) -> ModelEntry:
        return self.ws.model(str(self.state.get("model") or ""))

    @property
    def condition(self) -> str:
        return self.state.get("subgroup", "") or ""

    @property
    def excluded(self) -> list:
        return list(self.state.get("exclude") or ())

    @property
    def n_repeats(self) -> int:
        return int(self.state.get("repeats", DEFAULT_PFI_REPEATS))

    @property
    def all_rows(self) -> bool:
        return bool(self.state.get("pfi_all"))

    @functools.cached_property
    def rows(self) -> str:
        return rows_id(self.condition, self.excluded)

    @functools.cached_property
    def settings(self) -> dict:
        return profile_settings(self.n_rows, self.max_curves, self.grid_budget)

    @functools.cached_property
    def pfi_n_obs(self) -> dict[str, int | None]:
        return {m.name: pfi_sample(len(m.features), self.all_rows) for m in self.ws.models}

    @functools.cached_property
    def keeps_pairs(self) -> dict[str, bool]:
        """Per model: whether its all-rows PFI keeps its (row, donor) pairs."""
        return {
            m.name: keeps_pairs(self.n_rows, len(m.features), self.n_repeats, self.pfi_n_obs[m.name])
            for m in self.ws.models
        }

    @functools.cached_property
    def via_pairs(self) -> frozenset[str]:
        """The models whose subgroup PFI comes from the all-rows permutations (``pfi_via_pairs``)."""
        if self.data is None or not (self.condition.strip() or self.excluded):
            return frozenset()
        found: dict = {}  # per sample size
        chosen = set()
        for m in self.ws.models:
            n_obs = self.pfi_n_obs[m.name]
            if not self.keeps_pairs[m.name]:
                continue
            if n_obs not in found:
                found[n_obs] = pfi_via_pairs(self.data, self.condition, self.excluded, n_obs)
            if found[n_obs]:
                chosen.add(m.name)
        return frozenset(chosen)

    def pfi_rows(self) -> dict:
        """The selected rows as a ``rows=True`` task gets them in its parameters."""
        found: dict[str, Any] = {"condition": self.condition, "excluded": self.excluded}
        return {**found, "via_pairs": True} if self.focus.name in self.via_pairs else found


def plan_declared(p: PlanInput, spec: TaskSpec) -> Planned:
    """A view's spec: its ``params`` from the state (the selected rows added for ``rows``),
    one task per model of ``models``."""
    state = {**p.state, "pfi_via_pairs": p.focus.name in p.via_pairs}
    declared = spec.params(state, p.ws)
    if declared is None:
        return Planned({spec.kind: {}}, [])
    if spec.rows:
        declared = {**declared, **p.pfi_rows()}
    keys: dict[str, str] = {}
    tasks = []
    for m in p.ws.models if spec.models == "all" else [p.focus]:
        keys[m.name] = spec.key(spec.kind, p.ws, m, seed=SEED, **declared)
        tasks.append(Task(spec.kind, keys[m.name], m.name, declared))
    return Planned({spec.kind: keys}, tasks)


# --- keys --------------------------------------------------------------------------------
def profile_settings(n_rows: int, max_curves: int, grid_budget: int) -> dict:
    n_obs = min(int(n_rows), int(max_curves))
    return {"n_obs": n_obs if n_obs < n_rows else None, "budget": int(grid_budget), "seed": SEED}


def rows_id(condition: str, excluded) -> str:
    """Identifies a selection of rows: a subgroup condition minus excluded observations."""
    spec = json.dumps([(condition or "").strip(), sorted(str(e) for e in (excluded or ()))])
    return hashlib.sha256(spec.encode()).hexdigest()[:24]


#: Most model rows (rows x features x repeats) one model's PFI may predict before it runs
#: on a seeded sample of the selected rows (its standard error shown); "Use all rows" lifts it.
PFI_BUDGET = 1_000_000
PFI_MIN_ROWS = 500  # a sample never smaller than this
DEFAULT_PFI_REPEATS = 10  # the repetitions the budget is sized for (the state's default)


def pfi_sample(n_features: int, all_rows: bool = False) -> int | None:
    """The PFI row sample for a budget of PFI_BUDGET model rows at the default repetitions:
    None (every row) when asked, else budget / (features x 10) rows (at least PFI_MIN_ROWS),
    whatever the repetitions, so "More repetitions" adds permutations to the same rows (more
    precise, at more cost) rather than trading rows for them. A selection with fewer rows
    uses them all (``permutation_importance``'s ``n_obs`` is then no sample)."""
    if all_rows:
        return None
    return max(PFI_MIN_ROWS, PFI_BUDGET // max(1, int(n_features) * DEFAULT_PFI_REPEATS))


#: Most (row, donor) pairs (rows x features x repeats) an all-rows PFI keeps for its subgroups
#: (12 bytes each in the cache)
PAIRS_MAX = 6_000_000


def keeps_pairs(n_rows: int, n_features: int, n_repeats: int, n_obs: int | None) -> bool:
    """Whether the all-rows PFI keeps its pairs: it runs on a sample (large data, where a
    subgroup's own PFI costs a full budget of model rows) and they fit PAIRS_MAX."""
    return n_obs is not None and n_obs < n_rows and n_obs * n_features * n_repeats <= PAIRS_MAX


@functools.lru_cache(maxsize=16)
def sample_positions(n_rows: int, n_obs: int | None) -> np.ndarray:
    """Positions of the rows the all-rows PFI with ``n_obs`` uses (memoised per process)."""
    return compute.permutation_rows(n_rows, n_obs, SEED)


def pfi_via_pairs(data: pd.DataFrame, condition: str, excluded, n_obs: int | None) -> bool:
    """Whether a subgroup's PFI comes from the all-rows permutations
    (``PermutationImportance.restrict``) rather than its own: on a sample of large data,
    when the sample holds enough of the subgroup's rows that the pairs inside it (about
    m^2 / s per permutation, m of its rows among the s sampled) number PFI_MIN_ROWS or more.
    A choice made from the state and the data alone, so one URL always shows one result."""
    if not (condition or "").strip() and not excluded:
        return False
    n = len(data)
    if n_obs is None or n_obs >= n:
        return False
    try:
        inside = select_rows(data, condition, excluded).to_numpy()
    except compute.SubgroupError:
        return False
    m = int(inside[sample_positions(n, n_obs)].sum())
    return m * m / n_obs >= PFI_MIN_ROWS


#: Most model rows one model's SFIMP may evaluate (its ``max_rows``), and the budget its row
#: sample is sized for; exact over all coalitions up to SFIMP_EXACT players, sampled above
SFIMP_BUDGET = 4_000_000
SFIMP_EXACT = 10
SFIMP_PERMUTATIONS = 5  # observation permutations per coalition (n_obs_permutations)


def sfimp_sample(n_features: int, all_rows: bool = False) -> int | None:
    """The SFIMP row sample: None (every row) when asked, else the rows that fit
    SFIMP_BUDGET: 2^p coalitions x 5 permutations each (exact), or 16 antithetic pairs of
    orderings of 2 (p - 1) coalitions each (sampled); at least PFI_MIN_ROWS."""
    if all_rows:
        return None
    p = max(1, int(n_features))
    per_row = (1 << p) * SFIMP_PERMUTATIONS if p <= SFIMP_EXACT else 32 * (p - 1) * SFIMP_PERMUTATIONS
    return max(PFI_MIN_ROWS, SFIMP_BUDGET // per_row)


def plan(p: PlanInput, specs: tuple[TaskSpec, ...]) -> dict:
    """The cache keys a drill-down state needs, and the tasks that produce them: each spec's
    :class:`Planned`, in the order given (``views.needed_specs()``: the built-in ones the
    views read, then the views' own)."""
    keys: dict[str, Any] = {}
    tasks: list[Task] = []
    for spec in specs:
        planned = spec.planned(p)
        keys.update(planned.keys)
        tasks += planned.tasks
    return {"keys": keys, "tasks": [t.to_dict() for t in tasks]}


def missing(store: Store, tasks: list[dict], verify: bool = False) -> list[dict]:
    """The tasks with a result not in the cache (evicted or dropped as damaged included).
    ``verify``: every key is read and checksummed (:meth:`Store.intact`), so a damaged entry
    (a truncated value file, an altered row) is dropped and its task counted missing, every
    one of them at once; else only the keys' presence is looked up."""
    if not verify:
        return [t for t in tasks if not all(store.has(k) for k in (t["key"], *t.get("also", ())))]
    out = []
    for t in tasks:
        found = [store.intact(k) for k in (t["key"], *t.get("also", ()))]  # each read: no short cut
        if not all(found):
            out.append(t)
    return out


# --- rows --------------------------------------------------------------------------------
def select_rows(data: pd.DataFrame, condition: str, excluded=()) -> pd.Series:
    """Boolean mask over the data: the subgroup condition (all rows if empty) minus the
    excluded row labels. Raises ``SubgroupError`` for a bad condition."""
    mask = compute.parse_subgroup(condition, data) if (condition or "").strip() else pd.Series(True, index=data.index)
    if excluded:
        labels = pd.Index([row_label(e, data.index) for e in excluded])
        mask = mask & ~data.index.isin(labels)
    return mask


def clean_edits(data: pd.DataFrame, features, row, edit: dict) -> dict:
    """What-if edits valid for this row: columns the model uses, a level found in the data
    (as its text) for a categorical column, a number clamped to the observed range (whole
    for an integer column) otherwise; values equal to the row's own are dropped."""
    by_name = {str(f): f for f in features}
    kept: dict = {}
    for key, value in (edit or {}).items():
        column = by_name.get(key)
        if column is None:
            continue
        values = data[column]
        old = data.at[row, column]
        if is_categorical(values):
            levels = {str(level): level for level in values.dropna().unique()}
            if isinstance(value, str) and value in levels and not _equal(levels[value], old):
                kept[key] = value
            continue
        if isinstance(value, str) or isinstance(value, bool):
            continue
        low, high = float(values.min()), float(values.max())
        number: float | int = min(max(float(value), low), high)
        if pd.api.types.is_integer_dtype(values):
            number = int(round(number))
        if not _equal(number, old):
            kept[key] = number
    return dict(sorted(kept.items()))


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def row_label(value, index: pd.Index):
    """A row label as it arrives from the URL or a click (a string or int) in the index's type."""
    if pd.api.types.is_integer_dtype(index.dtype):
        try:
            return int(value)
        except (TypeError, ValueError):
            return value
    return value


def plan_state(ctx, ws, state: dict, *, specs: tuple[TaskSpec, ...]) -> dict:
    """Cache keys and tasks of a (cleaned, normalised) state, and the state the views show
    (``state``: with no observation selected, the default one once the curves are cached;
    see :func:`default_observation`). Everything in the plan, keys and parameters alike,
    derives from the state, the server's configuration and results the server computed for
    it: a client can only reach, or cause, results of a state it can name. ``specs``: the
    tasks the registered views need (``views.plan_state`` passes the registry's)."""
    data = ctx.store.data(ws)  # read once per process and data set (the store keeps it)

    def planned_for(shown: dict) -> dict:
        settings = {"max_curves": ctx.config.max_curves, "grid_budget": ctx.config.grid_budget}
        return plan(PlanInput(ws, shown, len(data), data=data, **settings), specs)

    planned = planned_for(state)
    shown = with_default_observation(ctx.store, state, planned["keys"], data)
    if shown is not state:
        planned = planned_for(shown)
    return {**planned, "state": shown}


#: The default observation per (store, summary key, rows): results are immutable.
_DEFAULT_ROWS = Lru(64)


def with_default_observation(store: Store, state: dict, keys: dict, data: pd.DataFrame) -> dict:
    """The state with its observation: the selected one, else :func:`default_observation`
    (``obs_default`` then says so) once the focus model's curve summary is cached; the
    state itself while it is not."""
    key = keys.get("summary")
    if state.get("obs") is not None or not key:
        return state
    condition, excluded = state.get("subgroup") or "", tuple(state.get("exclude") or ())
    tag = (str(store.root), key, rows_id(condition, excluded))

    def find():
        summary = store.get(key)
        if summary is None or isinstance(summary, Failed):  # no curves: no default observation
            return None
        return str(default_observation(summary, select_rows(data, condition, excluded)))

    row = _DEFAULT_ROWS.get(tag, find)
    return state if row is None else {**state, "obs": row, "obs_default": True}


def default_observation(summary, mask: pd.Series | None = None):
    """The observation every per-row view explains when none is selected: among the rows
    the curves explain (within the selected rows, ``mask`` over the data, when they hold
    any), the most influential one over all features (``ProfileSummary.most_influential``).
    It depends on the rows, not on the feature: a feature switch keeps the row, and its
    cached what-if and contributions."""
    return summary.most_influential(mask)
