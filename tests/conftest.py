"""Shared seeded data and fitted models (session scope: fitted once per run)."""

from __future__ import annotations

import os

# One OpenMP thread in the test process, set before any library that uses OpenMP loads: many
# tests fork model processes from this process (dashboard.isolation), and a child forked after
# libgomp started its thread pool hangs in its first parallel region (HistGradientBoosting or
# XGBoost trained here, then an XGBoost file loaded in a forked child: the load timed out).
# The servers the tests start inherit it too; production keeps its own setting.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler


@pytest.fixture(scope="session")
def reg_data():
    """Tie-free numeric regression data with an interaction, string row labels."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(60, 3)), columns=["x1", "x2", "x3"])
    X.index = [f"r{i}" for i in range(len(X))]
    y = X.x1 + 2 * X.x2 * (X.x3 > 0) + 0.1 * rng.normal(size=len(X))
    return X, y.to_numpy()


@pytest.fixture(scope="session")
def ols(reg_data):
    X, y = reg_data
    return LinearRegression().fit(X, y)


@pytest.fixture(scope="session")
def gbm(reg_data):
    X, y = reg_data
    return GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(X, y)


@pytest.fixture(scope="session")
def mass_data():
    """Boston-like regression data with ties and mass points: ``nox`` takes one value per
    town (47 distinct over 506 rows, towns of very unequal size), ``ptratio`` 33 values, a
    quarter of them 20.2; ``rm`` is nearly tie-free. y is linear in the features plus noise."""
    rng = np.random.default_rng(5)
    n = 506
    towns = rng.choice(81, size=n, p=rng.dirichlet(np.full(81, 0.3)))
    nox = np.sort(np.round(rng.uniform(0.385, 0.871, size=81), 3))[towns]
    levels = np.round(np.linspace(12.6, 22.0, 46), 1)
    ptratio = rng.choice(levels, size=n, p=rng.dirichlet(np.full(46, 0.5)))
    ptratio[rng.random(n) < 0.27] = 20.2
    rm = np.round(rng.normal(6.3, 0.7, size=n), 3)
    X = pd.DataFrame({"nox": nox, "ptratio": ptratio, "rm": rm})
    y = 30 - 17 * X.nox - 0.9 * X.ptratio + 4 * X.rm + rng.normal(0, 3, n)
    return X, y.to_numpy()


@pytest.fixture(scope="session")
def mass_gbm(mass_data):
    X, y = mass_data
    return GradientBoostingRegressor(n_estimators=40, max_depth=3, random_state=0).fit(X, y)


@pytest.fixture(scope="session")
def clf_data():
    """Mixed-type classification data: numeric, string (pandas str dtype) with missing
    values, a categorical and a boolean column; three classes."""
    rng = np.random.default_rng(1)
    n = 300
    num = rng.normal(size=n)
    city = rng.choice(["paris", "rome", "oslo"], size=n).astype(object)
    city[rng.random(n) < 0.05] = None
    size = pd.Categorical(rng.choice(["S", "M", "L"], size=n), categories=["S", "M", "L"], ordered=True)
    flag = rng.random(n) < 0.4
    X = pd.DataFrame({"num": num, "city": pd.array(city, dtype="str"), "size": size, "flag": flag})
    score = num + (X.city == "rome").to_numpy() - 0.8 * flag + rng.normal(scale=0.5, size=n)
    y = np.where(score > 0.7, "high", np.where(score > -0.3, "mid", "low"))
    return X, y


@pytest.fixture(scope="session")
def clf_pipeline(clf_data):
    X, y = clf_data
    pre = ColumnTransformer(
        [
            ("num", StandardScaler(), ["num"]),
            ("cat", OneHotEncoder(handle_unknown="ignore"), ["city", "size", "flag"]),
        ]
    )
    return make_pipeline(pre, LogisticRegression(max_iter=500)).fit(X, y)


@pytest.fixture(scope="session")
def forest_clf(clf_data):
    X, y = clf_data
    pre = ColumnTransformer(
        [("cat", OneHotEncoder(handle_unknown="ignore"), ["city", "size", "flag"])],
        remainder="passthrough",
    )
    return make_pipeline(pre, RandomForestClassifier(n_estimators=20, random_state=0)).fit(X, y)


@pytest.fixture(scope="session")
def chrome():
    """Debian's Chromium, headless, driven by Playwright: one per test session, shared by the
    browser and Celery tests (the sync API cannot run two drivers in one process)."""
    import shutil

    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    args = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=args)
        yield browser
        browser.close()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Expose each phase's report on the test item (``item.rep_call``) for fixtures that
    save evidence (screenshots, server logs) when a test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
