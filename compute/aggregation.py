"""Aggregation stage (SIPA, Scholbeck et al. 2019, Sec. 4): pure functions on the tensor.

Notation of Casalicchio, Molnar & Bischl (2018): ``pred[i, k]`` is
f(x_S^(k), x_C^(i)), the prediction of observation i with feature S set to grid point k.
"""

from __future__ import annotations

import numpy as np

from .checks import check_int
from .errors import InputError


def pd_curve(pred: np.ndarray) -> np.ndarray:
    """Partial dependence, Eq. (2): the mean of the ICE curves at each grid point."""
    return pred.mean(axis=0)


def centered_ice(pred: np.ndarray) -> np.ndarray:
    """Centred ICE (Goldstein et al. 2015): each curve minus its value at the first grid point."""
    return pred - pred[:, :1]


def ici_curves(loss_grid: np.ndarray, base_loss: np.ndarray) -> np.ndarray:
    """Individual conditional importance, Casalicchio et al. (2018), Sec. 4.

    dL_i(x_S^(k)) = L(f(x_S^(k), x_C^(i)), y_i) - L(f(x^(i)), y_i): positive where setting
    the feature to x_S^(k) makes the prediction of observation i worse.
    """
    return loss_grid - base_loss[:, None]


def pi_curve(ici: np.ndarray) -> np.ndarray:
    """Partial importance, Sec. 4: PI_S(x_S) = (1/n) sum_i dL_i(x_S), the mean ICI curve."""
    return ici.mean(axis=0)


def local_importance(ici: np.ndarray, grid_weights: np.ndarray) -> np.ndarray:
    """Local PFI of each observation, Sec. 4: the ICI curve integrated over the feature's
    distribution, PFI^(i) = sum_k w_k dL_i(x_S^(k)).

    With the observed values as grid and frequency weights this is exactly
    (1/n) sum_k dL_i(x_S^(k)) over the n observed values.
    """
    return ici @ grid_weights


def global_importance(local: np.ndarray) -> float:
    """Global PFI, Eq. (9): the mean of the local importances (equal to Eq. 7 on the
    observed grid, and to the PI curve integrated with the grid weights)."""
    return float(local.mean())


def rank_extremes(values, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the ``k`` largest values (decreasing) and the ``k`` smallest (increasing).

    Ties go to the earlier position in both lists, NaN is never ranked, and a position in
    the largest list is not repeated in the smallest one (fewer than 2k finite values).
    """
    k = check_int(k, "k", low=1)
    try:
        values = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"The 'values' parameter must be numbers (got {type(values).__name__}).") from exc
    if values.ndim != 1:
        raise InputError(f"The 'values' parameter must be one-dimensional (got shape {values.shape}).")
    largest, smallest = _ranked(values, k, largest=True), _ranked(values, k, largest=False)
    return largest, smallest[~np.isin(smallest, largest)]


def smallest_positions(values, k: int) -> np.ndarray:
    """Positions of the ``k`` smallest values (increasing), with :func:`rank_extremes`' rule
    (ties to the earlier position, NaN never ranked) but allowed to overlap the largest."""
    return _ranked(np.asarray(values, dtype=float), check_int(k, "k", low=1), largest=False)


def _ranked(values: np.ndarray, k: int, *, largest: bool) -> np.ndarray:
    positions = np.flatnonzero(~np.isnan(values))
    finite = values[positions]
    return positions[np.lexsort((positions, -finite if largest else finite))][:k]
