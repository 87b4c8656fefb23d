"""A task's cost (the model rows its progress steps are priced by, issue 40's time left) is
the rows its computation really evaluates: an over-count made the label say "about 5 s
left" with 0.8 s to go (the what-if counted a classifier's output-range pass it never makes,
the contributions their 400,000-row budget where an exact explanation takes 2^p x 100)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import compute
from dashboard.views import contributions, whatif


def _ws(task: str, features: list[str]):
    entry = SimpleNamespace(features=tuple(features))
    return SimpleNamespace(task=task, model=lambda name: entry)


@pytest.mark.parametrize("p", [3, 6, 13])
def test_the_contributions_cost_is_the_rows_the_explanation_evaluates(p):
    rng = np.random.default_rng(p)
    X = pd.DataFrame(rng.normal(size=(300, p)), columns=[f"x{j}" for j in range(p)])
    y = X.sum(axis=1) + rng.normal(0, 0.1, 300)
    model = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    task = SimpleNamespace(model="m", params={"n_background": contributions.N_BACKGROUND})
    said = contributions.cost(_ws("regression", list(X.columns)), task, X)
    done = compute.shapley_contributions(
        model,
        X,
        X.index[0],
        n_background=contributions.N_BACKGROUND,
        exact_max_players=contributions.EXACT_PLAYERS,
        tol=0.02,
        max_rows=contributions.MAX_ROWS,
    ).n_rows
    if p <= contributions.EXACT_PLAYERS:
        assert said == done
    else:  # sampled: at most the budget, which the cost says
        assert done <= said == contributions.MAX_ROWS


def test_the_what_if_cost_counts_the_output_range_pass_for_a_regressor_only():
    X = pd.DataFrame(np.random.default_rng(0).normal(size=(5000, 4)), columns=list("abcd"))
    task = SimpleNamespace(model="m")
    curves = 2 * whatif.GRID * 4 + 2
    assert whatif.cost(_ws("regression", list(X.columns)), task, X) == [curves + 5000]
    assert whatif.cost(_ws("classification", list(X.columns)), task, X) == [curves]
    y = (X.a > 0).astype(int)
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    calls = []

    class Counting:
        classes_ = model.classes_

        def predict_proba(self, rows):
            calls.append(len(rows))
            return model.predict_proba(rows)

    compute.what_if(Counting(), X, X.index[0], {"a": 1.0}, grid=whatif.GRID, output=1)
    assert sum(calls) <= curves  # no pass over the 5,000 rows


def test_the_profiles_cost_counts_the_output_range_pass_for_a_regressor_only(monkeypatch):
    from dashboard import tasks

    monkeypatch.setattr(tasks, "_pass_rows", lambda ws, params, data, f: 100)
    X = pd.DataFrame(np.zeros((5000, 3)), columns=list("abc"))
    task = SimpleNamespace(model="m", params={})
    assert tasks._profiles_cost(_ws("regression", list(X.columns)), task, X) == [5100, 100, 100]
    assert tasks._profiles_cost(_ws("classification", list(X.columns)), task, X) == [100, 100, 100]
    assert compute.output_range(
        RandomForestClassifier(n_estimators=2).fit(X.assign(a=np.arange(5000) % 2), np.arange(5000) % 2), X
    ) == (0.0, 1.0)
