"""The tree engine's XGBoost, LightGBM and CatBoost readers (``compute/trees/boosters.py``),
run in a pytest process of their own: the cases (``tests/tree_boosters_cases.py``) fit and
call the libraries in process, which this process must never do (its forked job processes
would inherit the libraries' mappings and OpenMP pools; see
``tests/test_boosters.py::test_the_test_process_never_imported_a_booster_library``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers.cases import run_cases

from compute.trees.boosters import finisher

CASES = Path(__file__).with_name("tree_boosters_cases.py")


def test_the_booster_readers_equal_each_librarys_own_predict():
    run_cases(CASES, at_least=60)


def test_the_binary_finisher_gives_the_sigmoid_of_every_row_bit_for_bit():
    """The binary classifiers' finisher (computed in place, one column per class) equals the
    sigmoid of ``scale * (base + sum)`` and its complement as written plainly, to the bit,
    with the class shown contiguous; the other links keep the general finisher."""
    total = np.random.default_rng(0).normal(scale=20.0, size=(257, 1))
    total[:3, 0] = [0.0, 800.0, -800.0]  # overflow of exp: 0 and 1 exactly, as plainly
    for base, scale in ((0.0, 1.0), (-1.3, 1.0), (0.4, 2.5)):
        with np.errstate(over="ignore"):
            p = 1.0 / (1.0 + np.exp(-(scale * (np.array([[base]]) + total)[:, 0])))
            got = finisher("sigmoid", np.array([base]), True, scale)(total)
        assert got.shape == (257, 2) and got[:, 1].flags.c_contiguous
        assert np.array_equal(got[:, 1], p) and np.array_equal(got[:, 0], 1.0 - p)
    plain = finisher("sigmoid", np.array([0.2]), False)(total[3:])
    assert plain.shape == (254,)
