"""The tree engine on XGBoost's categorical splits (``compute/trees/xgboost_read.py``): the cases
(``tests/tree_xgboost_categorical_cases.py``) run in a pytest process of their own, as
``tests/test_tree_boosters.py`` runs its cases: they fit and call XGBoost in process, which
this process must never do (``tests/test_boosters.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from helpers.cases import run_cases

if importlib.util.find_spec("xgboost") is None:  # looked up, never imported here
    pytest.skip("xgboost is not installed", allow_module_level=True)
if importlib.util.find_spec("numba") is None:
    pytest.skip("categorical splits are walked by the compiled walk only (numba)", allow_module_level=True)

CASES = Path(__file__).with_name("tree_xgboost_categorical_cases.py")


def test_xgboost_categorical_splits_equal_its_own_predict():
    run_cases(CASES, at_least=39)
