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

    With ``rows`` and ``params["via_pairs"]`` (set by the view when the plan tells it, in
    ``state["pfi_via_pairs"]``, that the PFI bars come from the all-rows permutations), ``run``
    gets every row and ``inside=`` the selected rows' mask: it computes on all rows, as the
    bars, and restricts (``PermutationImportance.restrict``).
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


def pfi_key(ws, model, rows: str, n_repeats: int, n_obs: int | None = None, via: str = "") -> str:
    extra = {"via": via} if via else {}
    return result_key("pfi", ws, model, rows=rows, n_repeats=int(n_repeats), seed=SEED, n_obs=n_obs, **extra)


def pairs_key(ws, model, n_repeats: int, n_obs: int | None) -> str:
    """The all-rows PFI with every (row, donor) pair kept (``keep_pairs``)."""
    return result_key("pfi_pairs", ws, model, n_repeats=int(n_repeats), seed=SEED, n_obs=n_obs)


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


def sfimp_key(ws, model, rows: str, n_obs: int | None = None) -> str:
    extra = {"n_obs": n_obs} if n_obs is not None else {}
    return result_key("sfimp", ws, model, rows=rows, seed=SEED, **extra)


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
    data: pd.DataFrame | None = None,
) -> dict:
    """The cache keys a drill-down state needs, and the tasks that produce them; ``needs``:
    the task kinds the views read (``dashboard.views.needed_tasks()``); ``specs``: the tasks
    views declare themselves, planned from ``state``. ``data`` (the data set): a subgroup's
    PFI on large data then comes from the all-rows permutations where
    :func:`pfi_via_pairs` allows it (the all-rows PFI is planned first)."""
    settings = profile_settings(n_rows, max_curves, grid_budget)
    focus_entry = ws.model(focus)
    rows = rows_id(condition, excluded)
    n_obs = {m.name: pfi_sample(len(m.features), pfi_all) for m in ws.models}
    keep = {m.name: keeps_pairs(n_rows, len(m.features), n_repeats, n_obs[m.name]) for m in ws.models}
    found: dict = {}  # pfi_via_pairs per sample size

    def via_pairs(m) -> bool:
        if data is None or not keep[m.name] or not ((condition or "").strip() or excluded):
            return False
        if n_obs[m.name] not in found:
            found[n_obs[m.name]] = pfi_via_pairs(data, condition, excluded, n_obs[m.name])
        return found[n_obs[m.name]]

    pairs = {m.name for m in ws.models if via_pairs(m)}
    sfimp_n_obs = {m.name: sfimp_sample(len(m.features), pfi_all) for m in ws.models}
    keys: dict[str, Any] = {
        "summary": summary_key(ws, focus_entry, settings),
        "profiles": {f: profile_key(ws, focus_entry, f, settings) for f in focus_entry.features},
        "pfi": {
            m.name: pfi_key(ws, m, rows, n_repeats, n_obs[m.name], via="pairs" if m.name in pairs else "")
            for m in ws.models
        },
        "sfimp": {m.name: sfimp_key(ws, m, rows, sfimp_n_obs[m.name]) for m in ws.models} if sfimp else {},
    }
    tasks = []
    if "profiles" in needs:
        tasks.append(Task("profiles", keys["summary"], focus_entry.name, settings, tuple(keys["profiles"].values())))
    if "pfi" in needs:
        for m in ws.models:
            base: dict[str, Any] = {"n_repeats": int(n_repeats), "n_obs": n_obs[m.name]}
            kept = pairs_key(ws, m, n_repeats, n_obs[m.name])
            if m.name in pairs:  # the all-rows PFI with its pairs, then the subgroup's share of them
                whole = pfi_key(ws, m, rows_id("", ()), n_repeats, n_obs[m.name])
                every: dict[str, Any] = {"condition": "", "excluded": [], **base, "keep": kept}
                tasks.append(Task("pfi", whole, m.name, every, (kept,)))
                mine: dict[str, Any] = {"condition": condition, "excluded": list(excluded or ()), **base}
                tasks.append(Task("pfi", keys["pfi"][m.name], m.name, {**mine, "pairs": kept}))
                continue
            params: dict[str, Any] = {"condition": condition, "excluded": list(excluded or ()), **base}
            whole_rows = not (condition or "").strip() and not excluded
            if whole_rows and keep[m.name]:  # kept for the subgroups to come
                tasks.append(Task("pfi", keys["pfi"][m.name], m.name, {**params, "keep": kept}, (kept,)))
            else:
                tasks.append(Task("pfi", keys["pfi"][m.name], m.name, params))
    if "sfimp" in needs:
        tasks += [
            Task(
                "sfimp",
                keys["sfimp"][m.name],
                m.name,
                {"condition": condition, "excluded": list(excluded or ()), "n_obs": sfimp_n_obs[m.name]},
            )
            for m in ws.models
            if sfimp
        ]
    # a view's task on the PFI rows follows the bars: from all rows, restricted, where they are
    spec_state = {**(state or {}), "pfi_via_pairs": focus_entry.name in pairs}
    for spec in specs:
        declared = spec.params(spec_state, ws)
        keys[spec.kind] = {}
        if declared is None:
            continue
        for m in ws.models if spec.models == "all" else [focus_entry]:
            keys[spec.kind][m.name] = result_key(spec.kind, ws, m, seed=SEED, **declared)
            tasks.append(Task(spec.kind, keys[spec.kind][m.name], m.name, declared))
    return {"keys": keys, "tasks": [t.to_dict() for t in tasks]}


PFI_BLOCK = 1  # features per PFI part when a job is split over workers
SFIMP_PARTS = 4  # batches of coalitions an exact SFIMP is split into


def split(ws: Workspace, tasks: list[dict]) -> tuple[list[dict], list[dict]]:
    """A job's tasks as independent parts for several workers, and the steps that join them.

    The ICE/ICI pass of a model: one part per feature (``profile_part``, writing that
    feature's cached profile); the task itself then joins them (it reuses cached profiles
    and adds the summary and the output-range pass). PFI of a model: one part per block of
    PFI_BLOCK features (``pfi_part``), each on the same rows with the permutation streams
    its features have in the whole call; the PFI task then joins them
    (``PermutationImportance.concat``), bit for bit the one call. Exact SFIMP of a model:
    SFIMP_PARTS batches of its coalitions (``sfimp_part``, ``compute.shapley_coalitions``),
    joined by the SFIMP task (``shapley_importance(coalitions=...)``), bit for bit. Other
    tasks (sampled SFIMP, whose orderings are drawn until its error is small) are one part
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
        elif task.kind == "pfi" and task.params.get("pairs"):
            joins.append(t)  # a subgroup's share of the all-rows pairs: after they are joined
        elif task.kind == "pfi":
            features = list(entry.features)
            keys = []
            for start in range(0, len(features), PFI_BLOCK):
                block = features[start : start + PFI_BLOCK]
                key = result_key(
                    "pfi_part",
                    ws,
                    entry,
                    of=task.key,
                    features=[str(f) for f in block],
                    keep=bool(task.params.get("keep")),
                )
                keys.append(key)
                params = {**task.params, "features": block, "streams": list(range(start, start + len(block)))}
                parts.append(Task("pfi_part", key, task.model, params).to_dict())
            joins.append(Task(task.kind, task.key, task.model, {**task.params, "parts": keys}, task.also).to_dict())
        elif task.kind == "sfimp" and len(entry.features) <= SFIMP_EXACT:
            # the exact game: its 2^p coalitions in SFIMP_PARTS batches, joined by the task
            top = 1 << len(entry.features)
            size = max(1, -(-top // SFIMP_PARTS))
            keys = []
            for start in range(0, top, size):
                key = result_key("sfimp_part", ws, entry, of=task.key, start=start)
                keys.append(key)
                masks = [start, min(start + size, top)]
                parts.append(Task("sfimp_part", key, task.model, {**task.params, "masks": masks}).to_dict())
            joins.append(Task(task.kind, task.key, task.model, {**task.params, "parts": keys}, task.also).to_dict())
        else:  # sampled SFIMP: its orderings are drawn until the error is small, one after another
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


def plan_state(ctx, ws, state: dict, *, needs: frozenset, specs: tuple[TaskSpec, ...]) -> dict:
    """Cache keys and tasks of a (cleaned, normalised) state. Everything in the plan, keys
    and parameters alike, derives from the state and the server's configuration: a client
    can only reach, or cause, results of a state it can name. ``needs`` and ``specs``: the
    built-in task kinds the views read and the tasks they declare (``views.plan_state``
    passes the registry's)."""
    n_rows = len(ctx.store.data(ws))  # read once per process and data set (the store keeps it)
    return plan(
        ws,
        focus=str(state.get("model") or ""),
        n_rows=n_rows,
        condition=state.get("subgroup", ""),
        excluded=state.get("exclude") or [],
        n_repeats=state.get("repeats", 10),
        sfimp=bool(state.get("sfimp")),
        pfi_all=bool(state.get("pfi_all")),
        max_curves=ctx.config.max_curves,
        grid_budget=ctx.config.grid_budget,
        needs=needs,
        specs=specs,
        state=state,
        data=ctx.store.data(ws),
    )
