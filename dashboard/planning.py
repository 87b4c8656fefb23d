"""A drill-down state's plan, assembled: the generic planner (:mod:`dashboard.planner`), the
rows a state selects (:mod:`dashboard.rows`), the row budgets (:mod:`dashboard.budgets`) and
PFI's own planning facts (:mod:`dashboard.pfi_plan`, registered with the planner when this
module is imported), and :func:`plan_state`, which plans a state with its default
observation. The names of those modules are importable from here as before.
"""

from __future__ import annotations

import pandas as pd

from . import pfi_plan  # noqa: F401 - registers PFI's planning facts with the planner
from .budgets import (
    DEFAULT_PFI_REPEATS,
    PAIRS_MAX,
    PFI_BUDGET,
    PFI_MIN_ROWS,
    QUANTILE_GRID,
    SEED,
    SFIMP_BUDGET,
    SFIMP_EXACT,
    SFIMP_PERMUTATIONS,
    keeps_pairs,
    pfi_sample,
    profile_settings,
    sfimp_sample,
)
from .pfi_plan import pfi_via_pairs, sample_positions
from .planner import PlanInput, Planned, Split, Task, TaskSpec, add_facts, missing, plan, plan_declared
from .rows import clean_edits, row_label, rows_id, select_rows
from .store import Failed, Lru, Store


def _settings(p: PlanInput) -> dict:
    """The curves' settings for this data set and server (``budgets.profile_settings``)."""
    return profile_settings(p.n_rows, p.max_curves, p.grid_budget)


add_facts({"settings": _settings})


def plan_state(ctx, ws, state: dict, *, specs: tuple[TaskSpec, ...]) -> dict:
    """Cache keys and tasks of a (cleaned, normalised) state, and the state the views show
    (``state``: with no observation selected, the default one once the curves are cached;
    see :func:`default_observation`), in one pass over the specs: the default observation is
    looked up as soon as the curves' summary key is planned, and the specs after it (the
    per-row ones) are planned with it. Everything in the plan, keys and parameters alike,
    derives from the state, the server's configuration and results the server computed for
    it: a client can only reach, or cause, results of a state it can name. ``specs``: the
    tasks the registered views need (``views.plan_state`` passes the registry's)."""
    # the data set (read once per process, the store keeps it) only for a state selecting rows:
    # a job's plan of the whole data set reads none (ten seconds at 10,000,000 x 100)
    rows = bool((state.get("subgroup") or "").strip() or state.get("exclude")) or not ws.n_rows
    data = ctx.store.data(ws) if rows else None
    settings = {"max_curves": ctx.config.max_curves, "grid_budget": ctx.config.grid_budget}

    def then(keys: dict) -> dict | None:
        if state.get("obs") is not None:
            return state
        return with_default_observation(ctx.store, state, keys, data) if keys.get("summary") else None

    n_rows = len(data) if data is not None else int(ws.n_rows)
    return plan(PlanInput(ws, state, n_rows, data=data, **settings), specs, then=then)


#: The default observation per (store, summary key, rows): results are immutable.
_DEFAULT_ROWS = Lru(64)


def with_default_observation(store: Store, state: dict, keys: dict, data: pd.DataFrame | None) -> dict:
    """The state with its observation: the selected one, else :func:`default_observation`
    (``obs_default`` then says so) once the focus model's curve summary is cached; the
    state itself while it is not. ``data``: None for a state selecting no rows."""
    key = keys.get("summary")
    if state.get("obs") is not None or not key:
        return state
    condition, excluded = state.get("subgroup") or "", tuple(state.get("exclude") or ())
    tag = (str(store.root), key, rows_id(condition, excluded))

    def find():
        summary = store.get(key)
        if summary is None or isinstance(summary, Failed):  # no curves: no default observation
            return None
        mask = select_rows(data, condition, excluded) if data is not None else None  # None: every row
        return str(default_observation(summary, mask))

    row = _DEFAULT_ROWS.get(tag, find)
    return state if row is None else {**state, "obs": row, "obs_default": True}


def default_observation(summary, mask: pd.Series | None = None):
    """The observation every per-row view explains when none is selected: among the rows
    the curves explain (within the selected rows, ``mask`` over the data, when they hold
    any), the most influential one over all features (``ProfileSummary.most_influential``).
    It depends on the rows, not on the feature: a feature switch keeps the row, and its
    cached what-if and contributions."""
    return summary.most_influential(mask)


__all__ = [
    "DEFAULT_PFI_REPEATS",
    "PAIRS_MAX",
    "PFI_BUDGET",
    "PFI_MIN_ROWS",
    "QUANTILE_GRID",
    "SEED",
    "SFIMP_BUDGET",
    "SFIMP_EXACT",
    "SFIMP_PERMUTATIONS",
    "PlanInput",
    "Planned",
    "Split",
    "Task",
    "TaskSpec",
    "add_facts",
    "clean_edits",
    "default_observation",
    "keeps_pairs",
    "missing",
    "pfi_sample",
    "pfi_via_pairs",
    "plan",
    "plan_declared",
    "plan_state",
    "profile_settings",
    "row_label",
    "rows_id",
    "sample_positions",
    "select_rows",
    "sfimp_sample",
    "with_default_observation",
]
