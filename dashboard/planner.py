"""The generic planner: the results a drill-down state needs, as cacheable tasks with their keys.

A view never calls a model. :func:`plan` is a loop over :class:`TaskSpec` s (the built-in ones
in :mod:`dashboard.tasks`, the views' own): each lists the results a state needs with their
cache keys; :func:`missing` says which are not cached yet. :mod:`dashboard.jobs` computes
them, in an isolated process (:mod:`dashboard.isolation`). Everything here derives from the
state and the server's configuration: a browser names a state, never a task, a key or a
parameter. This module names no kind of task and no view: facts several specs share (PFI's
row sample: :mod:`dashboard.pfi_plan`) are registered with :func:`add_facts`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .budgets import SEED
from .rows import rows_id
from .store import ModelEntry, Store, Workspace, result_key

_NO_DATA = pd.DataFrame()  # what a ``reads_rows`` task's cost gets: the data set is not loaded for it
#: Facts specs share, by name: derived from a PlanInput once, when first asked (add_facts)
_FACTS: dict[str, Callable[[PlanInput], Any]] = {}


def add_facts(facts: dict[str, Callable[[PlanInput], Any]]) -> None:
    """Register facts of a plan several specs read (``p.<name>``, derived once per plan),
    as :mod:`dashboard.pfi_plan` does for PFI's row sample when imported."""
    for name, derive in facts.items():
        if name in _FACTS and _FACTS[name] is not derive:
            raise ValueError(f"the planning fact {name!r} is registered twice")
        _FACTS[name] = derive


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
    parameters itself (the ``task_rows`` fact: ``condition``, ``excluded``, and, from
    :mod:`dashboard.pfi_plan`, ``via_pairs`` when the PFI bars come from the all-rows
    permutations), and ``run`` gets only those rows; with ``via_pairs`` it gets every row and
    ``inside=`` the selected rows' mask: it computes on all rows, as the bars, and restricts
    (``PermutationImportance.restrict``).

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

    ``reads_rows=True``: the task reads only a range of rows (``params["rows"]``) through
    ``job.rows``, which reads only the row groups holding them; a job of such tasks alone
    loads no data set (the parts of the all-rows prediction pass, :mod:`dashboard.row_groups`).

    ``first=True``: other tasks read its result (the every-row predictions give the curves
    their output range): a job runs it before the other tasks, a split job its join before
    the other joins, so they find it rather than compute it again.

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
    reads_rows: bool = False
    first: bool = False

    def __post_init__(self):
        if self.models not in ("all", "focus"):
            raise ValueError(f"TaskSpec {self.kind!r}: models is 'all' or 'focus', not {self.models!r}")
        if self.execute is None and self.run is None:
            raise ValueError(f"TaskSpec {self.kind!r} needs run (or its own execute)")

    def key(self, kind: str, ws: Workspace, model: ModelEntry | None, **params) -> str:
        """A cache key of this spec (``kind``: the spec's own or one of the results it writes)."""
        return result_key(kind, ws, model, version=self.version, **params)

    def estimate(self, ws: Workspace, task: Task, data: pd.DataFrame | None) -> list[int]:
        """Estimated model rows per progress step (``cost``; default one prediction per row;
        ``data`` is None for a ``reads_rows`` task, whose ``cost`` reads its rows' range)."""
        if self.cost is not None:
            return self.cost(ws, task, data if data is not None else _NO_DATA)
        return [len(data)] if data is not None else [0]

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
    the server's settings. Facts several specs share (registered with :func:`add_facts`:
    PFI's row sample, whether a subgroup's PFI comes from the all-rows pairs) are read as
    attributes (``p.pfi_n_obs``) and derived once, when first asked."""

    ws: Workspace
    state: dict
    n_rows: int
    max_curves: int
    grid_budget: int
    data: pd.DataFrame | None = None
    _known: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def focus(self) -> ModelEntry:
        return self.ws.model(str(self.state.get("model") or ""))

    @property
    def condition(self) -> str:
        return self.state.get("subgroup", "") or ""

    @property
    def excluded(self) -> list:
        return list(self.state.get("exclude") or ())

    @functools.cached_property
    def rows(self) -> str:
        return rows_id(self.condition, self.excluded)

    def fact(self, name: str) -> Any:
        """A registered fact of this plan (:func:`add_facts`), derived once."""
        known = self.__dict__.setdefault("_known", {})
        if name not in known:
            if name not in _FACTS:
                raise AttributeError(f"no planning fact {name!r} is registered (known: {sorted(_FACTS)})")
            known[name] = _FACTS[name](self)
        return known[name]

    def __getattr__(self, name: str) -> Any:
        """A registered fact as an attribute (``p.pfi_n_obs``), as the specs read them."""
        if name.startswith("__"):
            raise AttributeError(name)
        return self.fact(name)

    def task_rows(self) -> dict:
        """The selected rows as a ``rows=True`` task gets them in its parameters: the
        ``task_rows`` fact when registered, else the condition and the excluded rows."""
        if "task_rows" in _FACTS:
            return dict(self.fact("task_rows"))
        return {"condition": self.condition, "excluded": self.excluded}


def plan_declared(p: PlanInput, spec: TaskSpec) -> Planned:
    """A view's spec: its ``params`` from the state (the selected rows added for ``rows``),
    one task per model of ``models``."""
    declared = spec.params(p.state, p.ws)
    if declared is None:
        return Planned({spec.kind: {}}, [])
    if spec.rows:
        declared = {**declared, **p.task_rows()}
    keys: dict[str, str] = {}
    tasks = []
    for m in p.ws.models if spec.models == "all" else [p.focus]:
        keys[m.name] = spec.key(spec.kind, p.ws, m, seed=SEED, **declared)
        tasks.append(Task(spec.kind, keys[m.name], m.name, declared))
    return Planned({spec.kind: keys}, tasks)


def plan(p: PlanInput, specs: tuple[TaskSpec, ...], *, then: Callable[[dict], dict | None] | None = None) -> dict:
    """The cache keys a drill-down state needs, and the tasks that produce them: each spec's
    :class:`Planned`, in the order given (``views.needed_specs()``: the built-in ones the
    views read, then the views' own). ``then(keys so far)``: after each spec, a state to
    plan the later specs with (the default observation, once the curves' keys are known),
    or None; asked until it gives one. ``state`` in the result: the state planned last."""
    keys: dict[str, Any] = {}
    tasks: list[Task] = []
    for spec in specs:
        planned = spec.planned(p)
        keys.update(planned.keys)
        tasks += planned.tasks
        shown = then(keys) if then is not None else None
        if shown is not None:
            then = None
            p.state = shown  # only the observation changes: nothing p derived so far reads it
    return {"keys": keys, "tasks": [t.to_dict() for t in tasks], "state": p.state}


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
