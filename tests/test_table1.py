"""Quick version of the Table 1 reproduction (seed 000, Sec. 6.1): the finding holds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "table1_x3_simulation.py"


@pytest.fixture(scope="module")
def table1():
    spec = importlib.util.spec_from_file_location("table1_x3_simulation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    res = module.run(n_train=2_000, n_trees=40, n_test_sets=5, seed=11, n_jobs=1)
    return {key: vals.mean() for key, vals in res.items()}


def test_global_pfi_of_x1_and_x2_are_similar(table1):
    """Globally X1 and X2 are about equally important."""
    assert 0.7 <= table1[("all", "X1")] / table1[("all", "X2")] <= 1.4


def test_x1_dominates_on_x3_equal_0(table1):
    """Conditional on X3 = 0, PFI(X1) exceeds 20 x PFI(X2)."""
    assert table1[("X3 == 0", "X1")] > 20 * table1[("X3 == 0", "X2")]


def test_x2_dominates_on_x3_equal_1(table1):
    """Conditional on X3 = 1, PFI(X2) exceeds 20 x PFI(X1)."""
    assert table1[("X3 == 1", "X2")] > 20 * table1[("X3 == 1", "X1")]
