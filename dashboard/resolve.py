"""One resolve per request: a state from the browser, cleaned, made valid for its data set and
planned, once.

Every callback that starts from a drill-down state (the compute callbacks, the job, the
watchdogs, the views) calls :func:`resolve` (through ``views.resolve``, which hands it the
registry's specs) and passes the :class:`Resolved` down: nothing below it normalises or plans
the state again. Resolutions are memoised per process by the cleaned state (results are a pure
function of files and state), and one still waiting for its default observation (the curves
not cached yet) is not kept, so the request after the curves arrive plans it with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pandas as pd

from . import planning
from .planning import TaskSpec
from .state import clean_state, normalize
from .store import Lru, Store, Workspace


@dataclass(frozen=True)
class Resolved:
    """A state as the server trusts it, with its plan. ``state``: normalised for its data set
    (what the page names); ``shown``: with the default observation once the curves are cached
    (what the views show); ``keys`` and ``tasks``: the plan of ``shown``; ``error``: what
    normalising said (a refused subgroup, a data set no longer there). Not to be changed:
    one is shared by every request of its state in this process."""

    state: dict
    shown: dict
    ws: Workspace
    store: Store  # the data is read through it (its own cache bounds the frames kept), not held
    keys: dict
    tasks: list[dict]
    error: str | None = None

    @property
    def data(self) -> pd.DataFrame:
        """The data set's rows (the store's per-process cache of frames)."""
        return self.store.data(self.ws)

    @property
    def settled(self) -> bool:
        """Whether the plan is final: an observation is shown (selected, or the default one)."""
        return self.shown.get("obs") is not None

    @property
    def mask(self) -> pd.Series | None:
        """The subgroup's rows (None: no subgroup), as the views read them."""
        return planning.select_rows(self.data, self.state["subgroup"]) if self.state.get("subgroup") else None


_RESOLVED = Lru(32)  # per (store, settings, cleaned state); only settled ones are kept


def resolve(ctx, raw, *, specs: tuple[TaskSpec, ...]) -> Resolved | None:
    """The :class:`Resolved` of whatever the browser sent as a state (None: not a state, or
    neither its data set nor the demo it falls back to can be had). Memoised per process; a
    memoised one is used only while its data set's record is still the one it was resolved
    with (an upload that expired is resolved again, to the demo). The budgets and planning
    facts are code: a test that patches them forgets the memo (``_RESOLVED``)."""
    if not isinstance(raw, dict):
        return None
    cleaned = clean_state(raw)
    try:  # one server process may hold several apps (tests): their store and settings differ
        tag = (str(ctx.store.root), ctx.config, specs, json.dumps(cleaned, sort_keys=True, default=str))
    except (TypeError, ValueError):
        return None
    asked = ctx.store.workspace(cleaned["ws"])
    found = _RESOLVED.get(tag, lambda: _resolve(ctx, cleaned, asked, specs), keep=lambda r: r[1].settled)
    if found is not None and not _current(ctx, found, asked):  # a record changed (expired, restored)
        _RESOLVED.drop(tag)
        found = _RESOLVED.get(tag, lambda: _resolve(ctx, cleaned, asked, specs), keep=lambda r: r[1].settled)
    return None if found is None else found[1]


def _current(ctx, found: tuple[Workspace | None, Resolved], asked: Workspace | None) -> bool:
    """Whether a memoised resolution still holds: the record asked for, and the one it
    resolved to (the demo it fell back to, say), are as they were."""
    resolved = found[1].ws
    return found[0] == asked and (resolved == asked or ctx.store.workspace(resolved.id) == resolved)


def _resolve(ctx, cleaned: dict, asked: Workspace | None, specs) -> tuple[Workspace | None, Resolved] | None:
    state, error = normalize(ctx, cleaned)
    ws = asked if asked is not None and asked.id == state["ws"] else ctx.store.workspace(state["ws"])
    if ws is None:
        return None
    return asked, _planned(ctx, state, ws, specs, error)


def _planned(ctx, state: dict, ws: Workspace, specs, error: str | None) -> Resolved:
    planned = planning.plan_state(ctx, ws, state, specs=specs)
    return Resolved(state, planned["state"], ws, ctx.store, planned["keys"], planned["tasks"], error)


def settle(ctx, resolved: Resolved, *, specs: tuple[TaskSpec, ...]) -> Resolved:
    """The resolution planned again when it was still waiting for its default observation
    (a job that just computed the curves): the same normalised state, no second normalising;
    the resolution itself when it is settled."""
    if resolved.settled:
        return resolved
    again = _planned(ctx, resolved.state, resolved.ws, specs, resolved.error)
    return again if again.settled else replace(resolved, keys=again.keys, tasks=again.tasks)
