"""A pass over a few rows of a large data set reads those rows alone (issue 44): a row's
contributions, a sample's curves and a what-if never build the float array of every row
(``Design.numbers``: 1.6 GB and 6 s at 2,000,000 x 100), and give the numbers they give
when it is built."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

import compute
from compute.intervention import FEW_ROWS, Design


@pytest.fixture(scope="module")
def large():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(20_000, 6)).astype(np.float32), columns=[f"x{j}" for j in range(6)])
    y = X.x0 * 2 + X.x1 * X.x2 + rng.normal(size=len(X))
    return HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(X, y), X, y.to_numpy()


def _whole_array_refused(monkeypatch):
    """Design.numbers fails where it would build the array of the 20,000 rows (a sample's or
    two rows' own design, built from those rows, still reads its array)."""
    original = Design.numbers

    def numbers(self):
        if self._array is None and self.n_rows >= 20_000:
            pytest.fail("the float array of every row was built")
        return original(self)

    monkeypatch.setattr(Design, "numbers", numbers)


def test_a_block_of_few_rows_reads_them_alone_and_equals_the_block_off_the_whole_array(large):
    _, X, _ = large
    positions = np.array([5, 19_999, 7, 5, 12_000])
    assert positions.size * FEW_ROWS < len(X)
    few = Design(X, as_frame=True)
    block = few.block(positions, {"x3": np.arange(5.0)})
    assert few._array is None  # nothing of the other rows copied
    whole = Design(X, as_frame=True)
    whole.numbers()
    pd.testing.assert_frame_equal(block, whole.block(positions, {"x3": np.arange(5.0)}))
    np.testing.assert_array_equal(block.to_numpy()[:, 0], X.x0.to_numpy(dtype=float)[positions])


@pytest.mark.parametrize("call", ["contributions", "curves", "what-if"])
def test_passes_over_a_few_rows_never_build_the_whole_array(large, monkeypatch, call):
    model, X, y = large
    run = {
        "contributions": lambda: compute.shapley_contributions(model, X, 7, n_background=50, random_state=0).values,
        "curves": lambda: compute.feature_profile(model, X, y, "x1", grid=20, n_obs=100, random_state=0).pred,
        "what-if": lambda: compute.what_if(model, X, 7, edits={"x0": 1.5}, out_range=(-5.0, 5.0)).curves["x1"],
    }[call]
    expected = run()  # as the call gives it (the whole array may be built)
    _whole_array_refused(monkeypatch)
    got = run()
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_every_row_in_order_is_read_without_a_copy():
    """``read_numbers`` of every row in order (a walk over all rows) gives the frame's own
    float64 array, not a copy of it: read-only, the values ``take_numbers`` gives; any other
    positions (a subset, every row shuffled) are gathered as before, and a built array is
    itself returned."""
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(500, 4)), columns=list("abcd"))
    X.loc[::7, "b"] = np.nan
    design = Design(X, as_frame=True)
    every = np.arange(len(X))
    read = design.read_numbers(every)
    assert np.shares_memory(read, X["a"].to_numpy()) and not read.flags.writeable
    np.testing.assert_array_equal(read, design.take_numbers(every))
    shuffled = rng.permutation(len(X))
    for positions in (shuffled, every[:-1], every[::2]):
        got = design.read_numbers(positions)
        assert not np.shares_memory(got, X["a"].to_numpy())
        np.testing.assert_array_equal(got, X.to_numpy()[positions])
    built = design.numbers()
    assert design.read_numbers(every) is built
