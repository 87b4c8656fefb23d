"""The checks every booster file's trees get (:mod:`dashboard.loading.booster_files`): whole and
finite numbers, and a binary tree's children that make every walk from the root end at a leaf."""

from __future__ import annotations

import numpy as np

from .ubjson import _refuse

MAX_CATEGORY = 1 << 24  # largest category code a split may test (bitsets are sized by it)


def _ints(values, label: str, what: str) -> np.ndarray:
    arr = np.asarray(values if values is not None else [])
    if arr.size and not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise _refuse(label, f"{what} are not numbers")
    if arr.size and np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise _refuse(label, f"{what} are not whole numbers")
    return arr.astype(np.int64, copy=False).ravel()


def _finite(values, label: str, what: str) -> np.ndarray:
    try:
        arr = np.asarray(values if values is not None else [], dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise _refuse(label, f"{what} are not numbers") from exc
    if not np.all(np.isfinite(arr)):
        raise _refuse(label, f"{what} hold a non-finite value")
    return arr


def _numbers_or_nan(values, label: str, what: str) -> np.ndarray:
    """Numbers (NaN allowed: the caller says where), as a float array."""
    try:
        return np.asarray(values if values is not None else [], dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise _refuse(label, f"{what} are not numbers") from exc


def check_binary_tree(left: np.ndarray, right: np.ndarray, label: str, where: str) -> None:
    """Children (-1 for none) within the tree, both or neither, never the root, and no node
    with two parents: then every walk from the root visits each node at most once and ends at
    a leaf within n steps (nodes nobody reaches are left over from pruning: harmless)."""
    n = len(left)
    if len(right) != n or n == 0:
        raise _refuse(label, f"{where} has {n} left and {len(right)} right children")
    internal = left >= 0
    if np.any(internal != (right >= 0)) or np.any(left < -1) or np.any(right < -1):
        raise _refuse(label, f"{where} has a node with one child")
    kids = np.concatenate([left[internal], right[internal]])
    if kids.size and (kids.min() < 1 or kids.max() >= n):
        bad = int(kids.max()) if kids.max() >= n else int(kids.min())
        raise _refuse(label, f"{where} has a child index outside its {n} nodes or at its root ({bad:,})")
    if len(np.unique(kids)) != kids.size:
        raise _refuse(label, f"{where} has a node with two parents")
