"""Issue 43, item 3: Polars and PyArrow frames are taken wherever a pandas frame is,
converted once at the door (categoricals kept as categories, nulls as missing values), and
every result equals the pandas one at 1e-12."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from numpy.testing import assert_allclose
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

import compute
from compute.errors import InputError
from compute.validation import as_pandas
from dashboard.config import Config
from dashboard.doors import open_workspace
from dashboard.server import create_app

FEATURES = ["income", "age", "region"]


@pytest.fixture(scope="module")
def frames():
    """One data set as pandas, Polars and PyArrow: a categorical column, missing values in a
    numeric one, a text target; a pipeline that imputes and one-hot encodes."""
    rng = np.random.default_rng(3)
    n = 240
    income = rng.normal(50, 12, n).round(2)
    income[rng.random(n) < 0.1] = np.nan
    age = rng.integers(18, 80, n).astype(float)
    region = rng.choice(["north", "south", "east"], n)
    churn = np.where(rng.random(n) < 0.25 + 0.3 * (region == "south"), "yes", "no")
    pandas_frame = pd.DataFrame({"income": income, "age": age, "region": pd.Categorical(region), "churn": churn})
    polars_frame = pl.DataFrame(
        {
            "income": pl.Series(income).fill_nan(None),  # Polars' missing value is null, not NaN
            "age": age,
            "region": pl.Series(region, dtype=pl.Categorical),
            "churn": churn,
        }
    )
    arrow_table = pa.table(
        {
            "income": pa.array(income, from_pandas=True),  # NaN -> null
            "age": age,
            "region": pa.array(region).dictionary_encode(),
            "churn": churn,
        }
    )
    pre = ColumnTransformer(
        [("num", SimpleImputer(), ["income", "age"]), ("cat", OneHotEncoder(handle_unknown="ignore"), ["region"])]
    )
    model = make_pipeline(pre, RandomForestClassifier(n_estimators=25, random_state=0)).fit(
        pandas_frame[FEATURES], pandas_frame["churn"]
    )
    return {"pandas": pandas_frame, "polars": polars_frame, "arrow": arrow_table, "model": model}


def _X(frames, kind):
    frame = frames[kind]
    return frame[FEATURES] if kind == "pandas" else frame.select(FEATURES)  # Polars and Arrow: select


def _y(frames, kind):
    return frames[kind]["churn"] if kind != "arrow" else frames[kind].column("churn")


def test_the_door_converts_once_keeping_categories_and_missing_values(frames):
    for kind in ("polars", "arrow"):
        converted = as_pandas(frames[kind], "X")
        assert isinstance(converted, pd.DataFrame) and list(converted.columns) == list(frames["pandas"].columns)
        assert isinstance(converted["region"].dtype, pd.CategoricalDtype), (kind, converted.dtypes)
        # the levels sorted as pandas sorts them (Polars and Arrow list them as first seen)
        assert list(converted["region"].cat.categories) == ["east", "north", "south"], kind
        assert converted["income"].isna().sum() == frames["pandas"]["income"].isna().sum() > 0, kind
        assert_allclose(converted["income"].to_numpy(float), frames["pandas"]["income"].to_numpy(float))
        assert list(converted["churn"]) == list(frames["pandas"]["churn"])
    assert as_pandas(frames["pandas"]) is frames["pandas"]  # pandas and arrays pass as they are
    enum = as_pandas(pl.DataFrame({"size": pl.Series(["M", "S", "L"], dtype=pl.Enum(["S", "M", "L"]))}))
    assert list(enum["size"].cat.categories) == ["S", "M", "L"] and enum["size"].cat.ordered  # its own order
    series = as_pandas(frames["polars"]["churn"], "y")
    assert isinstance(series, pd.Series) and list(series) == list(frames["pandas"]["churn"])
    with pytest.raises(InputError, match=r"'X' is a LazyFrame, which has no to_pandas\(\): pass a DataFrame"):
        compute.permutation_importance(frames["model"], pl.LazyFrame(frames["polars"]), None)


def _same(a, b, where: str = "result") -> None:
    """Equal results: frames, series and arrays at 1e-12, everything else equal."""
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12, atol=1e-12, obj=where)
    elif isinstance(a, pd.Series):
        pd.testing.assert_series_equal(a, b, check_exact=False, rtol=1e-12, atol=1e-12, obj=where)
    elif isinstance(a, np.ndarray):
        if a.dtype.kind in "fc":
            assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=where)
        else:
            assert np.array_equal(a, b), where
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for field in dataclasses.fields(a):
            _same(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{k}]")
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b), where
    elif isinstance(a, (float, np.floating)):
        assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=where)
    elif isinstance(a, (pd.Index, pd.Categorical)) or np.ndim(a) > 0:
        assert np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)), where
    else:
        assert a == b, (where, a, b)


CALLS = {
    "permutation_importance": lambda m, X, y: compute.permutation_importance(m, X, y, n_repeats=3, random_state=1),
    "feature_profile": lambda m, X, y: compute.feature_profile(m, X, y, feature="income", output="yes"),
    "shapley_importance": lambda m, X, y: compute.shapley_importance(m, X, y, n_obs_permutations=2, random_state=2),
    "conditional_importance": lambda m, X, y: compute.conditional_importance(m, X, y, n_repeats=2, random_state=0),
    "ale_curve": lambda m, X, y: compute.ale_curve(m, X, "age", output="yes"),
    "ice_feature_impact": lambda m, X, y: compute.ice_feature_impact(m, X, output="yes"),
    "interaction_strength": lambda m, X, y: compute.interaction_strength(m, X, n_obs=60, grid_size=8, output="yes"),
    "global_contextual_importance": lambda m, X, y: compute.global_contextual_importance(
        m, X, n_instances=20, n_samples=30, output="yes"
    ),
    "contextual_importance": lambda m, X, y: compute.contextual_importance(m, X, 7, n_samples=30, output="yes"),
    "what_if": lambda m, X, y: compute.what_if(m, X, 7, {"age": 30.0}, grid=10, output="yes"),
    "feature_dependence": lambda m, X, y: compute.feature_dependence(X),
    "parse_subgroup": lambda m, X, y: compute.parse_subgroup("region == 'south' and age > 40", X),
}


@pytest.mark.parametrize("kind", ["polars", "arrow"])
@pytest.mark.parametrize("name", list(CALLS))
def test_every_function_gives_the_pandas_result(frames, kind, name):
    call, model = CALLS[name], frames["model"]
    expected = call(model, frames["pandas"][FEATURES], frames["pandas"]["churn"])
    _same(call(model, _X(frames, kind), _y(frames, kind)), expected, f"{name}[{kind}]")


def test_a_subgroup_is_suggested_from_a_polars_frame(frames):
    model = frames["model"]
    profile = compute.feature_profile(model, frames["pandas"][FEATURES], frames["pandas"]["churn"], feature="age")
    expected = compute.suggest_subgroups(profile, frames["pandas"][FEATURES])
    _same(compute.suggest_subgroups(profile, frames["polars"].select(FEATURES)), expected, "suggest_subgroups")


def test_a_polars_row_is_an_instance_like_a_pandas_one(frames):
    """A one-row frame of the caller's library is a row to explain, as X.loc[[label]] is."""
    model, X = frames["model"], frames["pandas"][FEATURES]
    expected = compute.contextual_importance(model, X, X.iloc[[7]], n_samples=30, output="yes")
    row = frames["polars"].select(FEATURES).slice(7, 1)
    _same(compute.contextual_importance(model, X, row, n_samples=30, output="yes"), expected, "instance")


def test_the_dashboard_door_opens_the_same_data_set(frames, tmp_path):
    """show(), report() and the command line open a workspace through open_workspace: a
    Polars or PyArrow frame stores the same data (its content hash, hence every cache key, is
    the pandas frame's)."""
    ctx = create_app(Config(cache_dir=str(tmp_path / "cache")))._wip_context
    opened = {
        kind: open_workspace(ctx, {"forest": frames["model"]}, frames[kind], "churn", title="churn")
        for kind in ("pandas", "polars", "arrow")
    }
    assert opened["polars"].data_sha == opened["arrow"].data_sha == opened["pandas"].data_sha
    stored = ctx.store.data(opened["polars"])
    assert isinstance(stored["region"].dtype, pd.CategoricalDtype) and stored["income"].isna().any()
