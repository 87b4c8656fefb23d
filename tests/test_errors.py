"""Bad input: one exception type of the package, a message naming the culprit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression

from compute import InputError, ModelError, feature_profile, permutation_importance

rng = np.random.default_rng(0)
X = pd.DataFrame(rng.normal(size=(20, 3)), columns=["a", "b", "c"])
Y = X.a.to_numpy() + X.b.to_numpy()
MODEL = LinearRegression().fit(X, Y)


class Exploding:
    """A model whose predict raises."""

    def predict(self, X):
        raise ZeroDivisionError("division by zero inside the model")


class WrongShape:
    def predict(self, X):
        return np.zeros((len(X), 3))


def y_with(value, pos=3):
    y = Y.copy()
    y[pos] = value
    return y


CASES = [
    (dict(feature="aa"), "Unknown feature 'aa'.*Did you mean 'a'"),
    (dict(y=Y[:-1]), "'X' has 20 rows but 'y' has 19"),
    (dict(y=y_with(np.nan)), "'y' has 1 missing value.*position 3"),
    (dict(y=y_with(np.inf)), "'y' contains infinite values"),
    (dict(y=np.array(["u"] * 20)), "needs a numeric target.*dtype"),
    (dict(loss="log_loss"), "'log_loss' is for a classifier, but this model is a regressor"),
    (dict(loss="hinge"), "'loss' parameter must be one of"),
    (dict(grid=1), "'grid' parameter must be an int in \\[2, 10000\\]"),
    (dict(grid="quantiles"), "'grid' parameter must be \"observed\""),
    (dict(grid=[0.5]), "at least two points"),
    (dict(grid=[0.0, np.nan]), "NaN or infinite"),
    (dict(n_obs=0), "'n_obs' parameter must be an int >= 1"),
    (dict(n_jobs=0), "'n_jobs' parameter must be a positive int"),
    (dict(random_state="seed"), "'random_state' parameter must be"),
    (dict(output="yes"), "'output' parameter is only for classifiers"),
    (dict(X=X.iloc[:0], y=Y[:0]), "'X' has no rows"),
    (dict(X=pd.concat([X, X.a], axis=1)), "duplicated column names: \\['a'\\]"),
    (dict(X=X.assign(a=1.0)), "Feature 'a' has a single distinct value.*at least two grid points"),
    (dict(X=X.drop(columns="c")), "lacks 1 column\\(s\\) that the model was fitted on: \\['c'\\]"),
    (dict(model=object()), "'model' must have a predict method"),
    (dict(X=[[1, 2]]), "'X' must be a pandas DataFrame"),
]


@pytest.mark.parametrize("params, match", CASES, ids=[c[1][:40] for c in CASES])
def test_feature_profile_rejects(params, match):
    """feature_profile raises InputError with a message naming the problem."""
    args = dict(model=MODEL, X=X, y=Y, feature="a") | params
    with pytest.raises(InputError, match=match):
        feature_profile(args.pop("model"), args.pop("X"), args.pop("y"), args.pop("feature"), **args)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(kind="percent"), "'kind' parameter must be one of"),
        (dict(n_repeats=0), "'n_repeats' parameter must be an int"),
        (dict(features=["a", "zz"]), "Unknown feature 'zz'"),
        (dict(features=[]), "'features' list is empty"),
        (dict(y=None), "needs the target 'y'"),
    ],
)
def test_permutation_importance_rejects(params, match):
    """permutation_importance raises InputError naming the bad parameter."""
    args = dict(y=Y) | params
    with pytest.raises(InputError, match=match):
        permutation_importance(MODEL, X, args.pop("y"), **args)


def test_ratio_with_zero_error_is_refused():
    """The ratio form needs a non-zero model error."""
    y = MODEL.predict(X)
    with pytest.raises(InputError, match="ratio form of PFI is undefined"):
        permutation_importance(MODEL, X, y, kind="ratio")


def test_model_failure_is_wrapped_with_cause():
    """A model that raises gives ModelError with its message, chained to the cause."""
    with pytest.raises(ModelError, match="predict failed on .* ZeroDivisionError: division by zero") as info:
        feature_profile(Exploding(), X, Y, "a")
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_model_wrong_shape():
    """A model returning the wrong shape gives ModelError stating both shapes."""
    with pytest.raises(ModelError, match=r"shape \(\d+, 3\).*expected \(\d+,\)"):
        feature_profile(WrongShape(), X, Y, "a", grid=3)


def test_unknown_class_label_in_y(clf_pipeline, clf_data):
    """A label the classifier does not know is named."""
    Xc, y = clf_data
    y = y.astype(object)
    y[0] = "extreme"
    with pytest.raises(InputError, match="labels the model does not know: \\['extreme'\\]"):
        feature_profile(clf_pipeline, Xc, y, "num", grid=3)


def test_unknown_output_class(clf_pipeline, clf_data):
    """An output class that does not exist is named with the model's classes."""
    Xc, y = clf_data
    with pytest.raises(InputError, match="'output' class 'huge' is not one of"):
        feature_profile(clf_pipeline, Xc, y, "num", output="huge")


def test_a_constant_feature_is_named_with_its_value_as_people_write_it():
    """Issue 41, item 2: the message showed NumPy's repr ("np.float64(0.0)")."""
    X0 = pd.DataFrame({"a": [0.0] * 5, "b": [1.0, 2.0, 3.0, 4.0, 5.0], "region": ["US"] * 5})
    model = LinearRegression().fit(X0[["a", "b"]], X0["b"])
    with pytest.raises(InputError) as said:
        feature_profile(model, X0[["a", "b"]], feature="a")
    assert "single distinct value (0.0) in these rows" in str(said.value) and "np." not in str(said.value)
