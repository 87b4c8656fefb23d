"""How many rows each costly result runs on: the row budgets of the curves (``profile_settings``),
PFI (``pfi_sample``, and whether its all-rows run keeps its pairs: ``keeps_pairs``) and SFIMP
(``sfimp_sample``), with their constants. One place for the page's cost decisions: the planner
and the tasks read them, and a model read by a faster engine would raise them here.
"""

from __future__ import annotations

SEED = 0  # every sample and permutation of the page is seeded: one URL shows one result
QUANTILE_GRID = 60  # grid points of a feature's curves beyond the observed values' budget


def profile_settings(n_rows: int, max_curves: int, grid_budget: int) -> dict:
    n_obs = min(int(n_rows), int(max_curves))
    return {"n_obs": n_obs if n_obs < n_rows else None, "budget": int(grid_budget), "seed": SEED}


#: Most model rows (rows x features x repeats) one model's PFI may predict before it runs
#: on a seeded sample of the selected rows (its standard error shown); "Use all rows" lifts it.
PFI_BUDGET = 1_000_000
#: The budget's multiple for a model whose PFI the exact tree walk computes (``ModelEntry.walked``):
#: benchmarks/speed_trees.py measures its PFI at 0.16-0.45x the raw predict of the same rows on
#: HistGradientBoosting, LightGBM and forests (the batched predict: about 1x), so twice the rows
#: cost less time than the budget's rows did, and the sample's standard error falls by 1/sqrt(2)
WALKED_PFI_FACTOR = 2
PFI_MIN_ROWS = 500  # a sample never smaller than this
DEFAULT_PFI_REPEATS = 10  # the repetitions the budget is sized for (the state's default)


def pfi_sample(n_features: int, all_rows: bool = False, *, walked: bool = False) -> int | None:
    """The PFI row sample for a budget of PFI_BUDGET model rows at the default repetitions
    (WALKED_PFI_FACTOR times that for a model the exact tree walk computes: ``walked``):
    None (every row) when asked, else budget / (features x 10) rows (at least PFI_MIN_ROWS),
    whatever the repetitions, so "More repetitions" adds permutations to the same rows (more
    precise, at more cost) rather than trading rows for them. A selection with fewer rows
    uses them all (``permutation_importance``'s ``n_obs`` is then no sample)."""
    if all_rows:
        return None
    budget = PFI_BUDGET * (WALKED_PFI_FACTOR if walked else 1)
    return max(PFI_MIN_ROWS, budget // max(1, int(n_features) * DEFAULT_PFI_REPEATS))


#: Most (row, donor) pairs (rows x features x repeats) an all-rows PFI keeps for its subgroups
#: (12 bytes each in the cache)
PAIRS_MAX = 6_000_000


def keeps_pairs(n_rows: int, n_features: int, n_repeats: int, n_obs: int | None) -> bool:
    """Whether the all-rows PFI keeps its pairs: it runs on a sample (large data, where a
    subgroup's own PFI costs a full budget of model rows) and they fit PAIRS_MAX."""
    return n_obs is not None and n_obs < n_rows and n_obs * n_features * n_repeats <= PAIRS_MAX


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
