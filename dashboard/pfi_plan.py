"""PFI's own planning: the facts of a state that the PFI bars and the tasks on "the rows PFI
uses" share, derived once per plan (:class:`dashboard.planner.PlanInput` facts, registered
here): the repetitions, whether every row is asked for, each model's row sample
(``budgets.pfi_sample``), whether its all-rows run keeps its (row, donor) pairs, and whether a
subgroup's PFI comes from them (:func:`pfi_via_pairs`). The generic planner names none of this.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

import compute

from . import budgets  # read as budgets.X: a budget patched (a test, an engine's own) is seen here
from .budgets import SEED
from .planner import PlanInput, add_facts
from .rows import select_rows


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
    return m * m / n_obs >= budgets.PFI_MIN_ROWS


def n_repeats(p: PlanInput) -> int:
    """The state's PFI repetitions."""
    return int(p.state.get("repeats", budgets.DEFAULT_PFI_REPEATS))


def all_rows(p: PlanInput) -> bool:
    """Whether the state asks for PFI (and SFIMP) on every selected row ("Use all rows")."""
    return bool(p.state.get("pfi_all"))


def pfi_n_obs(p: PlanInput) -> dict[str, int | None]:
    """Per model: the rows of its PFI sample (None: every row)."""
    return {m.name: budgets.pfi_sample(len(m.features), p.all_rows, walked=m.walked) for m in p.ws.models}


def pairs_kept(p: PlanInput) -> dict[str, bool]:
    """Per model: whether its all-rows PFI keeps its (row, donor) pairs."""
    return {
        m.name: budgets.keeps_pairs(p.n_rows, len(m.features), p.n_repeats, p.pfi_n_obs[m.name]) for m in p.ws.models
    }


def via_pairs(p: PlanInput) -> frozenset[str]:
    """The models whose subgroup PFI comes from the all-rows permutations (:func:`pfi_via_pairs`)."""
    if p.data is None or not (p.condition.strip() or p.excluded):
        return frozenset()
    found: dict = {}  # per sample size
    chosen = set()
    for m in p.ws.models:
        n_obs = p.pfi_n_obs[m.name]
        if not p.keeps_pairs[m.name]:
            continue
        if n_obs not in found:
            found[n_obs] = pfi_via_pairs(p.data, p.condition, p.excluded, n_obs)
        if found[n_obs]:
            chosen.add(m.name)
    return frozenset(chosen)


def task_rows(p: PlanInput) -> dict[str, Any]:
    """The selected rows as a ``rows=True`` task gets them in its parameters: PFI's rows, and
    ``via_pairs`` when the focus model's bars come from the all-rows permutations."""
    found: dict[str, Any] = {"condition": p.condition, "excluded": p.excluded}
    return {**found, "via_pairs": True} if p.focus.name in p.via_pairs else found


add_facts(
    {
        "n_repeats": n_repeats,
        "all_rows": all_rows,
        "pfi_n_obs": pfi_n_obs,
        "keeps_pairs": pairs_kept,
        "via_pairs": via_pairs,
        "task_rows": task_rows,
    }
)
