"""Planning: the results a drill-down state needs, as cacheable tasks with their keys.

A view never calls a model. :func:`plan` lists the results a state needs with their cache
keys (only the task kinds the registered views read); :func:`missing` says which are not
cached yet. :mod:`dashboard.jobs` computes them, in an isolated process
(:mod:`dashboard.isolation`). Everything here derives from the state and the server's
configuration: a browser names a state, never a task, a key or a parameter.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

import compute

from .store import ModelEntry, Store, Workspace, result_key

SEED = 0
QUANTILE_GRID = 60


@dataclass(frozen=True)
class TaskSpec:
    """A result a view needs beyond the built-in tasks (profiles, PFI, SFIMP), declared in the
    view's module (``View(tasks=...)``).

    ``params(state, ws)`` derives the task's parameters from the cleaned drill-down state
    alone (None: the state needs no such result); they go into the cache key. ``run(model,
    X, y, ws, params, n_jobs)`` computes the result in the isolated job process. ``models``:
    one task per model of the data set ("all") or for the selected model only ("focus").
    ``label`` says what runs, in the progress bar. ``rows``: see below.
    """

    kind: str
    params: Callable[[dict, Workspace], dict | None]
    run: Callable[..., Any]
    models: str = "all"
    label: str = ""  # for the progress bar ("predictions on every row")
    # True: ``run`` gets only the selected rows, those of ``params["condition"]`` minus
    # ``params["excluded"]`` (the rows PFI uses), instead of every row
    rows: bool = False


@dataclass(frozen=True)
class Task:
    kind: str  # "profiles", "pfi", "sfimp" or a view's TaskSpec.kind
    key: str  # cache key of the result the task writes (profiles: the summary)
    model: str  # model name within the workspace
    params: dict
    also: tuple = ()  # further keys the task writes (profiles: one per feature)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "key": self.key, "model": self.model, "params": self.params, "also": list(self.also)}

    @classmethod
    def from_dict(cls, record: dict) -> Task:
        return cls(record["kind"], record["key"], record["model"], record["params"], tuple(record.get("also", ())))


# --- keys --------------------------------------------------------------------------------
def profile_settings(n_rows: int, max_curves: int, grid_budget: int) -> dict:
    n_obs = min(int(n_rows), int(max_curves))
    return {"n_obs": n_obs if n_obs < n_rows else None, "budget": int(grid_budget), "seed": SEED}


def summary_key(ws: Workspace, model: ModelEntry, settings: dict) -> str:
    return result_key("summary", ws, model, **settings)


def profile_key(ws: Workspace, model: ModelEntry, feature: str, settings: dict) -> str:
    return result_key("profile", ws, model, feature=str(feature), **settings)


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


def pfi_key(ws, model, rows: str, n_repeats: int, n_obs: int | None = None) -> str:
    return result_key("pfi", ws, model, rows=rows, n_repeats=int(n_repeats), seed=SEED, n_obs=n_obs)


def sfimp_key(ws, model, rows: str) -> str:
    return result_key("sfimp", ws, model, rows=rows, seed=SEED)


def plan(
    ws: Workspace,
    *,
    focus: str,
    n_rows: int,
    condition: str,
    excluded,
    n_repeats: int,
    sfimp: bool,
    max_curves: int,
    pfi_all: bool = False,
    grid_budget: int,
    needs: frozenset = frozenset({"profiles", "pfi", "sfimp"}),
    specs: tuple[TaskSpec, ...] = (),
    state: dict | None = None,
) -> dict:
    """The cache keys a drill-down state needs, and the tasks that produce them; ``needs``:
    the task kinds the views read (``dashboard.views.needed_tasks()``); ``specs``: the tasks
    views declare themselves, planned from ``state``."""
    settings = profile_settings(n_rows, max_curves, grid_budget)
    focus_entry = ws.model(focus)
    rows = rows_id(condition, excluded)
    keys: dict[str, Any] = {
        "summary": summary_key(ws, focus_entry, settings),
        "profiles": {f: profile_key(ws, focus_entry, f, settings) for f in focus_entry.features},
        "pfi": {m.name: pfi_key(ws, m, rows, n_repeats, pfi_sample(len(m.features), pfi_all)) for m in ws.models},
        "sfimp": {m.name: sfimp_key(ws, m, rows) for m in ws.models} if sfimp else {},
    }
    tasks = []
    if "profiles" in needs:
        tasks.append(Task("profiles", keys["summary"], focus_entry.name, settings, tuple(keys["profiles"].values())))
    if "pfi" in needs:
        tasks += [
            Task(
                "pfi",
                keys["pfi"][m.name],
                m.name,
                {
                    "condition": condition,
                    "excluded": list(excluded or ()),
                    "n_repeats": int(n_repeats),
                    "n_obs": pfi_sample(len(m.features), pfi_all),
                },
            )
            for m in ws.models
        ]
    if "sfimp" in needs:
        tasks += [
            Task("sfimp", keys["sfimp"][m.name], m.name, {"condition": condition, "excluded": list(excluded or ())})
            for m in ws.models
            if sfimp
        ]
    for spec in specs:
        params = spec.params(state or {}, ws)
        keys[spec.kind] = {}
        if params is None:
            continue
        for m in ws.models if spec.models == "all" else [focus_entry]:
            keys[spec.kind][m.name] = result_key(spec.kind, ws, m, seed=SEED, **params)
            tasks.append(Task(spec.kind, keys[spec.kind][m.name], m.name, params))
    return {"keys": keys, "tasks": [t.to_dict() for t in tasks]}


PFI_BLOCK = 2  # features per PFI part when a job is split over workers


def split(ws: Workspace, tasks: list[dict]) -> tuple[list[dict], list[dict]]:
    """A job's tasks as independent parts for several workers, and the steps that join them.

    The ICE/ICI pass of a model: one part per feature (``profile_part``, writing that
    feature's cached profile); the task itself then joins them (it reuses cached profiles
    and adds the summary and the output-range pass). PFI of a model: one part per block of
    PFI_BLOCK features (``pfi_part``), each on the same rows with the permutation streams
    its features have in the whole call; the PFI task then joins them
    (``PermutationImportance.concat``), bit for bit the one call. Other tasks are one part
    each. Returns (parts, joins); joins run once every part is done."""
    parts: list[dict] = []
    joins: list[dict] = []
    for t in tasks:
        task = Task.from_dict(t)
        entry = ws.model(task.model)
        if task.kind == "profiles":
            for feature, key in zip(entry.features, task.also):
                parts.append(Task("profile_part", key, task.model, {**task.params, "feature": feature}).to_dict())
            joins.append(t)
        elif task.kind == "pfi":
            features = list(entry.features)
            keys = []
            for start in range(0, len(features), PFI_BLOCK):
                block = features[start : start + PFI_BLOCK]
                key = result_key("pfi_part", ws, entry, of=task.key, block=start)
                keys.append(key)
                params = {**task.params, "features": block, "streams": list(range(start, start + len(block)))}
                parts.append(Task("pfi_part", key, task.model, params).to_dict())
            joins.append(Task(task.kind, task.key, task.model, {**task.params, "parts": keys}, task.also).to_dict())
        else:
            parts.append(t)
    return parts, joins


def missing(store: Store, tasks: list[dict]) -> list[dict]:
    """The tasks with a result not in the cache (evicted or dropped as damaged included)."""
    return [t for t in tasks if not all(store.has(k) for k in (t["key"], *t.get("also", ())))]


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
    from compute.sampling import is_categorical

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
