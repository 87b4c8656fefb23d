"""Bad input to every public function: the package's own error, naming the parameter.

One table of ``(function, kwargs, error, match)``: each call must raise ``error``
(:class:`compute.InputError` or :class:`compute.ModelError`) with a message matching
``match``, which names the parameter (or the column) at fault. Anything else escaping,
a bare ``TypeError``, ``KeyError``, ``IndexError``, ``ZeroDivisionError``, a numpy or a
pandas error, is a bug and fails the test with its type.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import compute
from compute import ExplainError, InputError, ModelError
from compute.importance import permutation_block

# --- tiny seeded data and models ---------------------------------------------------------
_rng = np.random.default_rng(0)
X = pd.DataFrame(_rng.normal(size=(20, 3)), columns=["a", "b", "c"])
X.index = [f"r{i}" for i in range(len(X))]
Y = X.a.to_numpy() + 2 * X.b.to_numpy() + 0.1 * _rng.normal(size=len(X))
OLS = LinearRegression().fit(X, Y)

XC = pd.DataFrame(
    {
        "num": _rng.normal(size=40),
        "city": pd.array(_rng.choice(["paris", "rome", "oslo"], size=40), dtype="str"),
        "flag": _rng.random(40) < 0.5,
    }
)
YC = np.where(XC.num > 0, "hi", "lo")
CLF = make_pipeline(
    ColumnTransformer(
        [
            ("num", StandardScaler(), ["num"]),
            ("cat", OneHotEncoder(handle_unknown="ignore"), ["city", "flag"]),
        ]
    ),
    LogisticRegression(),
).fit(XC, YC)


class NoProba:
    """A classifier with labels but no predict_proba."""

    classes_ = np.array(["hi", "lo"])

    def predict(self, X):
        return np.where(np.asarray(X["num"]) > 0, "hi", "lo")


class Raising:
    """A model whose predict raises."""

    def predict(self, X):
        raise ZeroDivisionError("division by zero inside the model")


class WrongShape:
    """A model returning three columns per row."""

    def predict(self, X):
        return np.zeros((len(X), 3))


class WrongLength:
    """A model returning one prediction too few."""

    def predict(self, X):
        return np.zeros(len(X) - 1)


class Words:
    """A regressor returning strings."""

    def predict(self, X):
        return np.array(["high"] * len(X))


class NaNs:
    """A model returning NaN for every row."""

    def predict(self, X):
        return np.full(len(X), np.nan)


class RowMean:
    """A regressor without fitted attributes: the mean of each row."""

    def predict(self, X):
        return np.asarray(X, dtype=float).mean(axis=1)


def raising_loss(y, pred):
    raise KeyError("no such thing")


def scalar_loss(y, pred):
    return 1.0


@functools.cache
def prof(y=True, feature="a"):
    """A profile of OLS (or of CLF for the feature 'city')."""
    if feature == "city":
        return compute.feature_profile(CLF, XC, YC if y else None, "city")
    return compute.feature_profile(OLS, X, Y if y else None, feature)


# --- what each function is called with when a case overrides nothing --------------------
CALLS = {
    "feature_profile": (compute.feature_profile, lambda: dict(model=OLS, X=X, y=Y, feature="a")),
    "feature_profiles": (compute.feature_profiles, lambda: dict(model=OLS, X=X, y=Y, features=["a"])),
    "permutation_importance": (
        compute.permutation_importance,
        lambda: dict(model=OLS, X=X, y=Y, n_repeats=2),
    ),
    "permutation_block": (  # the job runner's seam: the split mechanics
        permutation_block,
        lambda: dict(model=OLS, X=X, y=Y, n_repeats=2),
    ),
    "shapley_importance": (
        compute.shapley_importance,
        lambda: dict(model=OLS, X=X, y=Y, n_obs_permutations=2),
    ),
    "shapley_coalitions": (
        compute.shapley_coalitions,
        lambda: dict(model=OLS, X=X, y=Y, masks=[0, 1], n_obs_permutations=2),
    ),
    "compare_shapley_importance": (
        compute.compare_shapley_importance,
        lambda: dict(models={"ols": OLS}, X=X, y=Y, n_obs_permutations=2),
    ),
    "contextual_importance": (
        compute.contextual_importance,
        lambda: dict(model=OLS, X=X, instance="r0", n_samples=5),
    ),
    "global_contextual_importance": (
        compute.global_contextual_importance,
        lambda: dict(model=OLS, X=X, n_samples=5),
    ),
    "ciu_from_profiles": (
        compute.ciu_from_profiles,
        lambda: dict(profiles={"a": prof()}, row="r0", out_range=(-5, 5)),
    ),
    "ice_feature_impact": (compute.ice_feature_impact, lambda: dict(model=OLS, X=X)),
    "ice_impact": (compute.ice_impact, lambda: dict(prof=prof())),
    "ale_curve": (compute.ale_curve, lambda: dict(model=OLS, X=X, feature="a", n_intervals=3)),
    "ale_from_profile": (compute.ale_from_profile, lambda: dict(prof=prof())),
    "marginal_effects": (compute.marginal_effects, lambda: dict(model=OLS, X=X)),
    "pd_importance": (compute.pd_importance, lambda: dict(prof=prof())),
    "pd_variance_importance": (compute.pd_variance_importance, lambda: dict(model=OLS, X=X)),
    "parse_subgroup": (compute.parse_subgroup, lambda: dict(condition="a > 0", X=X)),
    "format_condition": (compute.format_condition, lambda: dict(column="a", op=">", value=0)),
    "FeatureProfile.subset": (
        lambda prof, mask: prof.subset(mask),
        lambda: dict(prof=prof(), mask=np.ones(20, dtype=bool)),
    ),
    "FeatureProfile.extremes": (lambda prof, k: prof.extremes(k), lambda: dict(prof=prof(), k=1)),
    "output_range": (compute.output_range, lambda: dict(model=OLS, X=X)),
    "output_range_of": (compute.output_range_of, lambda: dict(pred=compute.predict_rows(OLS, X))),
    "predict_rows": (compute.predict_rows, lambda: dict(model=OLS, X=X)),
    "shapley_contributions": (
        compute.shapley_contributions,
        lambda: dict(model=OLS, X=X, instance="r0", n_background=5),
    ),
    "model_performance": (compute.model_performance, lambda: dict(pred=compute.predict_rows(OLS, X), y=Y)),
    "confusion_matrix": (compute.confusion_matrix, lambda: dict(pred=compute.predict_rows(CLF, XC), y=YC)),
    "performance_gap": (
        compute.performance_gap,
        lambda: dict(pred=compute.predict_rows(OLS, X), y=Y, mask=np.arange(len(X)) < len(X) // 2),
    ),
    "calibration_curve": (compute.calibration_curve, lambda: dict(pred=compute.predict_rows(CLF, XC), y=YC)),
    "rank_extremes": (compute.rank_extremes, lambda: dict(values=np.arange(5.0), k=2)),
    "what_if": (compute.what_if, lambda: dict(model=OLS, X=X, instance="r0", edits={"a": 1.0})),
    "what_if_grids": (compute.what_if_grids, lambda: dict(X=X)),
    "apply_edits": (compute.apply_edits, lambda: dict(X=X, original=X.iloc[[0]], edits={"a": 1.0})),
    "suggest_subgroups": (compute.suggest_subgroups, lambda: dict(profile=prof(), X=X)),
    "pfi_convergence": (
        compute.pfi_convergence,
        lambda: dict(pfi=compute.permutation_importance(OLS, X, Y, n_repeats=3)),
    ),
    "feature_dependence": (compute.feature_dependence, lambda: dict(X=X)),
    "permutation_rows": (compute.permutation_rows, lambda: dict(n_rows=20, n_obs=5)),
    "pfi_engine": (compute.pfi_engine, lambda: dict(model=OLS, X=X)),
    "PermutationImportance.restrict": (
        lambda pfi, subgroup: pfi.restrict(subgroup),
        lambda: dict(pfi=permutation_block(OLS, X, Y, n_repeats=2, keep_pairs=True), subgroup=np.ones(20, bool)),
    ),
    "constant_model_error": (compute.constant_model_error, lambda: dict(y=Y, loss="squared_error")),
    "model_skill": (compute.model_skill, lambda: dict(pred=compute.predict_rows(OLS, X), y=Y)),
    "compare_models": (
        compute.compare_models,
        lambda: dict(preds={"a": compute.predict_rows(OLS, X), "b": compute.predict_rows(OLS, X)}, y=Y),
    ),
    "compare_features": (
        compute.compare_features,
        lambda: dict(pfi=compute.permutation_importance(OLS, X, Y, n_repeats=2), a="a", b="b"),
    ),
    "tied_with": (
        compute.tied_with,
        lambda: dict(pfi=compute.permutation_importance(OLS, X, Y, n_repeats=2), feature="a"),
    ),
    "ranking_ties": (
        compute.ranking_ties,
        lambda: dict(pfi=compute.permutation_importance(OLS, X, Y, n_repeats=2), top=3),
    ),
    "leakage_check": (
        compute.leakage_check,
        lambda: dict(pfi=compute.permutation_importance(OLS, X, Y, n_repeats=2), y=Y),
    ),
    "grouped_against_alone": (
        compute.grouped_against_alone,
        lambda: dict(
            grouped=compute.permutation_importance(OLS, X, Y, n_repeats=2, groups={"g": list(X.columns[:2])}),
            alone=compute.permutation_importance(OLS, X, Y, n_repeats=2),
            groups={"g": list(X.columns[:2])},
        ),
    ),
    "interaction_strength": (compute.interaction_strength, lambda: dict(model=OLS, X=X, n_obs=10, grid_size=3)),
    "InteractionStrength.pd2": (
        lambda result, a, b: result.pd2(a, b),
        lambda: dict(result=compute.interaction_strength(OLS, X, n_obs=8, grid_size=3), a="a", b=X.columns[1]),
    ),
    "conditional_importance": (compute.conditional_importance, lambda: dict(model=OLS, X=X, y=Y, n_repeats=2)),
    "confusion_accuracy": (
        compute.confusion_accuracy,
        lambda: dict(matrix=compute.confusion_matrix(compute.predict_rows(CLF, XC), YC)),
    ),
}

#: Functions taking a model and X, and the shared knobs each of them accepts.
MODEL_FUNCTIONS = {
    "feature_profile": {"y", "output", "n_jobs", "chunk_rows", "random_state", "n_obs", "grid", "loss"},
    "feature_profiles": {"y", "output", "n_jobs", "chunk_rows", "random_state", "n_obs", "grid", "loss"},
    "permutation_importance": {"y", "output", "n_jobs", "chunk_rows", "random_state", "loss", "n_obs"},
    "conditional_importance": {"y", "output", "n_jobs", "chunk_rows", "random_state", "loss", "n_obs"},
    "interaction_strength": {"output", "n_jobs", "chunk_rows", "random_state", "n_obs"},
    "shapley_importance": {"y", "output", "n_jobs", "chunk_rows", "random_state", "n_obs", "loss"},
    "shapley_coalitions": {"y", "output", "n_jobs", "chunk_rows", "random_state", "n_obs", "loss"},
    "contextual_importance": {"output", "n_jobs", "chunk_rows", "random_state"},
    "global_contextual_importance": {"output", "n_jobs", "chunk_rows", "random_state"},
    "ice_feature_impact": {"output", "n_jobs", "chunk_rows", "random_state", "n_obs", "grid"},
    "ale_curve": {"output", "n_jobs", "chunk_rows"},
    "marginal_effects": {"output", "n_jobs", "chunk_rows"},
    "pd_variance_importance": {"output", "n_jobs", "chunk_rows", "random_state", "n_obs", "grid"},
    "output_range": {"output", "n_jobs", "chunk_rows"},
    "predict_rows": {"output", "n_jobs", "chunk_rows"},
    "shapley_contributions": {"output", "n_jobs", "chunk_rows", "random_state"},
    "what_if": {"output", "n_jobs", "chunk_rows"},
}

#: Bad values of the shared knobs: (value, error, match).
SHARED = {
    "n_jobs": [
        (0, "'n_jobs' parameter must be a positive int"),
        (1.5, "'n_jobs'"),
        ("2", "'n_jobs'"),
        (True, "'n_jobs'"),
    ],
    "chunk_rows": [
        (0, r"'chunk_rows' parameter must be an int >= 1 or None \(got 0\)"),
        (-3, "'chunk_rows'"),
        (2.5, "'chunk_rows'"),
        (True, "'chunk_rows'"),
        ("100", "'chunk_rows'"),
    ],
    "random_state": [
        (-1, "'random_state' parameter must be"),
        (1.5, "'random_state'"),
        ("seed", "'random_state'"),
        (True, "'random_state'"),
    ],
    "output": [("yes", "'output' parameter is only for classifiers")],
    "n_obs": [
        (0, "'n_obs' parameter must be an int >= "),
        (-2, "'n_obs'"),
        (2.5, "'n_obs'"),
        (True, "'n_obs'"),
        ("5", "'n_obs'"),
        (np.nan, "'n_obs'"),
    ],
    "grid": [
        (1, r"'grid' parameter must be an int in \[2, 10000\]"),
        (0, "'grid'"),
        (True, "'grid'"),
        ("quantiles", "'grid' parameter must be \"observed\""),
        ([0.5], "'grid'.*at least two"),
        ([0.0, np.nan], "'grid' array contains NaN"),
        (["lo", "hi"], "'grid'.*numbers"),
        (2.5, "'grid'"),
        (None, "'grid'"),
        (np.ones((2, 2)), "'grid'"),
    ],
    "loss": [
        ("hinge", "'loss' parameter must be one of"),
        (3, "'loss' parameter must be one of"),
        ("log_loss", "loss 'log_loss' is for a classifier"),
        (raising_loss, "'loss' callable failed.*KeyError"),
        (scalar_loss, "'loss' callable returned"),
    ],
    "y": [
        (Y[:-1], "'X' has 20 rows but 'y' has 19"),
        (np.where(np.arange(20) == 3, np.nan, Y), "'y' has 1 missing value.*position 3"),
        (np.where(np.arange(20) == 3, np.inf, Y), "'y' contains infinite values"),
        (np.c_[Y, Y], "'y' must be one-dimensional"),
        (np.array(["u"] * 20), "'y' has dtype"),
        (5.0, "'y' must be one-dimensional"),
    ],
}

#: Bad model or X for every function that takes them: (tag, kwargs, error, match).
MODEL_AND_X = [
    ("model-no-predict", dict(model=object()), InputError, "'model' must have a predict method"),
    ("model-None", dict(model=None), InputError, "'model' must have a predict method"),
    (
        "model-raises",
        dict(model=Raising()),
        ModelError,
        "predict failed on .* ZeroDivisionError: division by zero",
    ),
    ("model-3-columns", dict(model=WrongShape()), ModelError, r"shape \(\d+, 3\).*expected \(\d+,\)"),
    ("model-short", dict(model=WrongLength()), ModelError, r"shape \(\d+,\) for \d+ rows"),
    ("model-strings", dict(model=Words()), ModelError, "model's predict returned non-numeric values"),
    ("model-nan", dict(model=NaNs()), ModelError, "model's predict returned NaN"),
    ("X-list", dict(X=[[1.0, 2.0, 3.0]]), InputError, "'X' must be a pandas DataFrame"),
    ("X-None", dict(X=None), InputError, "'X' must be a pandas DataFrame"),
    ("X-1d", dict(X=np.ones(3)), InputError, "'X' must be 2-dimensional"),
    ("X-no-rows", dict(X=X.iloc[:0]), InputError, "'X' has no rows"),
    ("X-no-columns", dict(X=X.iloc[:, :0]), InputError, "'X' has no columns"),
    (
        "X-duplicated",
        dict(X=pd.concat([X, X.a], axis=1)),
        InputError,
        r"'X' has duplicated column names: \['a'\]",
    ),
    (
        "X-lacks-column",
        dict(X=X.drop(columns="c")),
        InputError,
        r"'X' lacks 1 column\(s\) that the model was fitted on: \['c'\]",
    ),
]

FEATURE_LISTS = [  # the 'features' of feature_profiles, PFI, ICE impact, PD variance, AME
    ([], "The 'features' list is empty; name at least one column"),
    (["a", "zz"], "Unknown feature 'zz' in 'features'"),
    (["a", "a"], r"'features' parameter names 'a' twice"),
    ("zz", "Unknown feature 'zz'"),
    ({"g": "a"}, "'features' parameter must be a column label or a list"),
    ([["a", "b"]], "'features' parameter must hold column labels"),
]

PLAYERS = [  # the 'features' of SFIMP and CIU: columns or groups of them
    ([], "'features' parameter names no players"),
    (["zz"], "Unknown feature 'zz'"),
    ([[]], "Player '' in 'features' has no columns"),
    ({"g": []}, "Player 'g' in 'features' has no columns"),
    ({"g": ["a", "zz"]}, "Unknown feature 'zz'"),
    (["a", "a"], "Column 'a' belongs to two players in 'features'"),
    ({"g": ["a", "b"], "h": "a"}, "Column 'a' belongs to two players in 'features': 'g' and 'h'"),
    ("a", "'features' parameter must be None, a list"),
    (5, "'features' parameter must be None, a list"),
]


def _cases():
    out = []

    def add(name, kwargs, error, match, tag=""):
        out.append(pytest.param(name, kwargs, error, match, id=f"{name}-{tag or '-'.join(kwargs)}"))

    for name, knobs in MODEL_FUNCTIONS.items():
        for tag, kwargs, error, match in MODEL_AND_X:
            add(name, kwargs, error, match, tag)
        for knob in sorted(knobs):
            for value, match in SHARED[knob]:
                add(name, {knob: value}, InputError, match, f"{knob}={value!r}"[:40])
        if "y" in knobs and name != "feature_profile" and name != "feature_profiles":
            add(name, {"y": None}, InputError, "needs the target 'y'")
    for name in (
        "feature_profiles",
        "permutation_importance",
        "ice_feature_impact",
        "pd_variance_importance",
        "marginal_effects",
    ):
        for value, match in FEATURE_LISTS:
            add(name, {"features": value}, InputError, match, f"features={value!r}")
    for name in ("shapley_importance", "contextual_importance", "global_contextual_importance"):
        for value, match in PLAYERS:
            add(name, {"features": value}, InputError, match, f"features={value!r}")

    # feature_profile
    for value, match in [
        ("aa", "Unknown feature 'aa'.*Did you mean 'a'"),
        (None, "'feature' parameter is required"),
        (["a"], "'feature' parameter must be one column label"),
    ]:
        add("feature_profile", {"feature": value}, InputError, match, f"feature={value!r}")
    add(
        "feature_profile",
        {"X": X.assign(a=1.0)},
        InputError,
        "Feature 'a' has a single distinct value",
        "constant",
    )
    for kw, match in [
        (
            dict(grid=[0.0, 1.0], grid_weights=[1.0]),
            "'grid_weights' needs an array 'grid' of the same length",
        ),
        (dict(grid_weights=[1.0] * 20), "'grid_weights' needs an array 'grid'"),
        (dict(grid=[0.0, 1.0], grid_weights=[-1.0, 2.0]), "'grid_weights' must be finite, non-negative"),
        (dict(grid=[0.0, 1.0], grid_weights=[np.nan, 1.0]), "'grid_weights' must be finite"),
        (dict(grid=[0.0, 1.0], grid_weights=[0.0, 0.0]), "'grid_weights'.*not all zero"),
        (dict(grid=[0.0, 1.0], grid_weights=["x", "y"]), "'grid_weights' must be numbers"),
    ]:
        add("feature_profile", kw, InputError, match, "-".join(f"{k}={v!r}" for k, v in kw.items())[:50])
    clf = dict(model=CLF, X=XC, y=YC, feature="num")
    for kw, match in [
        (dict(output="huge"), r"'output' class 'huge' is not one of the model's classes \['hi', 'lo'\]"),
        (dict(output=["hi", "lo"]), "'output' class must be one of the model's classes"),
        (
            dict(y=np.where(np.arange(40) == 0, "extreme", YC)),
            r"'y' contains labels the model does not know: \['extreme'\]",
        ),
        (dict(loss="squared_error"), "loss 'squared_error' is for a regressor"),
        (dict(model=NoProba(), loss="log_loss"), "loss 'log_loss' needs class probabilities"),
        (
            dict(feature="city", grid=["paris", "tokyo"]),
            r"'grid' values \['tokyo'\] are not levels of feature 'city'",
        ),
    ]:
        add("feature_profile", clf | kw, InputError, match, "clf-" + "-".join(kw))
    add(
        "feature_profile",
        dict(X=X.assign(a=np.nan)),
        InputError,
        r"Feature 'a' has no curve: a holds no values in these rows \(all missing\)",
        "all-nan",
    )
    add(
        "feature_profile",
        dict(X=X.assign(a=np.nan), grid=[0.0, 1.0]),
        InputError,
        r"Feature 'a' holds no values in these rows \(all missing\): an array 'grid' needs 'grid_weights'",
        "all-nan-array-grid",
    )

    # feature_profiles: forwarded keywords
    add(
        "feature_profiles",
        {"n_repeats": 3},
        InputError,
        "'n_repeats' keyword is not a parameter of feature_profiles",
    )
    add(
        "feature_profiles",
        {"feature": "a"},
        InputError,
        "'feature' keyword is not a parameter of feature_profiles",
    )

    # permutation_importance
    for value, match in [
        (0, r"'n_repeats' parameter must be an int in \[1, 100000\] \(got 0\)"),
        (-1, "'n_repeats'"),
        (2.5, "'n_repeats'"),
        ("3", "'n_repeats'"),
        (True, "'n_repeats'"),
        (None, "'n_repeats'"),
        (10**6, "'n_repeats'"),
    ]:
        add("permutation_importance", {"n_repeats": value}, InputError, match, f"n_repeats={value!r}")
    for value in ("percent", None, 1, ["ratio"]):
        add(
            "permutation_importance",
            {"kind": value},
            InputError,
            r"'kind' parameter must be one of \['difference', 'ratio'\]",
            f"kind={value!r}",
        )
    add(
        "permutation_importance",
        dict(y=OLS.predict(X), kind="ratio"),
        InputError,
        "ratio form of PFI is undefined.*kind='difference'",
        "ratio-zero-error",
    )

    for value in ("yes", 1, None):
        match = r"'keep_pairs' parameter must be True or False \(got "
        add("permutation_block", {"keep_pairs": value}, InputError, match)
    for kwargs, match in [
        ({"n_rows": 0}, r"'n_rows' parameter must be an int >= 1 \(got 0\)"),
        ({"n_rows": "20"}, "'n_rows'"),
        ({"n_obs": 1}, r"'n_obs' parameter must be an int >= 2 or None \(got 1\)"),
        ({"n_obs": 2.5}, "'n_obs'"),
    ]:
        add("permutation_rows", kwargs, InputError, match)
    # pfi_engine reads the model and X as PFI does, and never calls the model
    for tag, kwargs, error, match in MODEL_AND_X:
        if tag.startswith(("model-no", "model-None", "X-")):
            add("pfi_engine", kwargs, error, match, tag)
    add("pfi_engine", {"output": "yes"}, InputError, "'output' parameter is only for classifiers")
    add(
        "PermutationImportance.restrict",
        {"subgroup": np.ones(3, bool)},
        InputError,
        "subgroup mask has 3 entries; this result used 20 rows",
        "short-mask",
    )
    add(
        "PermutationImportance.restrict",
        {"pfi": permutation_block(OLS, X, Y, n_repeats=2)},
        InputError,
        r"keeps no pairs: compute it with permutation_block\(keep_pairs=True\)",
        "no-pairs",
    )
    add(
        "PermutationImportance.restrict",
        {"subgroup": np.arange(20) < 2},
        InputError,
        "subgroup holds 2 of the 20 permuted rows.*subgroup's own permutations",
        "tiny",
    )
    add(
        "PermutationImportance.restrict",
        {"subgroup": ["no such row"]},
        InputError,
        "subgroup holds 0 of the 20 permuted rows",
        "unknown-labels",
    )

    # shapley_coalitions and joining them
    for masks in ([-1], [1 << 10], [0, 2**40], ["a"], [0.5], None):
        add("shapley_coalitions", {"masks": masks}, InputError, r"'masks' must be coalitions of the \d+ players")
    add(
        "shapley_importance",
        {"coalitions": ["not a part"]},
        InputError,
        "Each of 'coalitions' must be a ShapleyCoalitions",
        "coalitions-type",
    )

    # shapley_importance
    for knob, values in [
        ("n_permutations", [0, -2, "4", True, 2.5, 2**70]),
        ("n_obs_permutations", [0, 1.5, None]),
        ("exact_max_players", [0, 21, "3"]),
        ("n_obs", [1]),
        ("max_rows", [0, None]),
    ]:
        for value in values:
            add(
                "shapley_importance",
                {knob: value},
                InputError,
                f"'{knob}' parameter must be an int",
                f"{knob}={value!r}",
            )
    for value in (0, -1.0, np.nan, "0.1", True, None):
        add(
            "shapley_importance",
            {"tol": value},
            InputError,
            "'tol' parameter must be a positive number",
            f"tol={value!r}",
        )

    # compare_shapley_importance
    for value in ({}, [OLS], None):
        add(
            "compare_shapley_importance",
            {"models": value},
            InputError,
            "'models' must be a non-empty dict",
            f"models={type(value).__name__}",
        )
    add(
        "compare_shapley_importance",
        {"models": {"m": object()}},
        InputError,
        "Model 'm' in 'models' must have a predict method",
        "models-no-predict",
    )
    add(
        "compare_shapley_importance",
        {"models": {"m": Raising()}},
        ModelError,
        "Model 'm' in 'models': .*predict failed",
        "models-raising",
    )
    add(
        "compare_shapley_importance",
        {"n_repeats": 2},
        InputError,
        "'n_repeats' keyword is not a parameter of compare_shapley_importance",
    )
    add("compare_shapley_importance", {"tol": -1}, InputError, "'tol' parameter")
    add("compare_shapley_importance", {"y": None}, InputError, "needs the target 'y'")

    # contextual_importance and its global form
    for value, match in [
        ("nope", "'instance' 'nope' is neither a row label of X nor a one-row DataFrame"),
        (None, "'instance' None is neither a row label"),
        (["r0"], "'instance' must be a row label of X or a one-row DataFrame"),
        (X.iloc[0], r"'instance' must be a row label of X or a one-row DataFrame.*X.loc\[\[label\]\]"),
        (X.iloc[:2], "'instance' DataFrame must have exactly one row"),
        (X.iloc[:0], "'instance' DataFrame must have exactly one row"),
        (X[["a", "b"]].iloc[:1], r"'instance' lacks columns \['c'\]"),
    ]:
        add(
            "contextual_importance",
            {"instance": value},
            InputError,
            match,
            f"instance={type(value).__name__}-{value if isinstance(value, str) else ''}",
        )
    add(
        "contextual_importance",
        dict(X=X.set_axis(["r0"] * 20)),
        InputError,
        "'instance' label 'r0' is not unique in X",
        "instance-not-unique",
    )
    for name in ("contextual_importance", "global_contextual_importance"):
        for value in (-1, 1.5, "10", True, None):
            add(
                name,
                {"n_samples": value},
                InputError,
                "'n_samples' parameter must be an int",
                f"n_samples={value!r}",
            )
        for value, match in [
            ((1, 0), "'out_range'.*MIN < MAX"),
            ((1, 1), "'out_range'.*MIN < MAX"),
            ((0, np.nan), "'out_range'.*MIN < MAX"),
            ("wide", "'out_range' parameter must be a pair"),
            ((0, 1, 2), "'out_range' parameter must be a pair"),
            (5, "'out_range' parameter must be a pair"),
        ]:
            add(name, {"out_range": value}, InputError, match, f"out_range={value!r}")
    for value in (-0.1, 1.5, np.nan, "0.5", True, None):
        add(
            "contextual_importance",
            {"phi0": value},
            InputError,
            r"'phi0' parameter must be a number in \[0, 1\]",
            f"phi0={value!r}",
        )
    for value in ("sideways", None, 1):
        add(
            "contextual_importance",
            {"utility": value},
            InputError,
            r"'utility' parameter must be one of \['increasing', 'decreasing'\]",
            f"utility={value!r}",
        )
    wide = pd.DataFrame(_rng.normal(size=(5, 11)), columns=[f"w{j}" for j in range(11)])
    add(
        "contextual_importance",
        dict(model=RowMean(), X=wide, instance=0, features=[list(wide.columns)], n_samples=0),
        InputError,
        "'n_samples' parameter must be >= 1 to sweep a group of 11 numeric columns",
        "group-without-sweep",
    )
    for value, match in [
        ([], "'instances' parameter names no rows"),
        (["nope"], "'instances' entry 'nope' is neither a row label"),
        (X, "'instances' parameter must be row labels of X"),
        ([["r0"]], "'instances' entry must be a row label of X or a one-row DataFrame"),
    ]:
        add(
            "global_contextual_importance",
            {"instances": value},
            InputError,
            match,
            f"instances={type(value).__name__}-{len(value)}",
        )
    for value in (0, "3", True, 2.5):
        add(
            "global_contextual_importance",
            {"n_instances": value},
            InputError,
            "'n_instances' parameter must be an int",
            f"n_instances={value!r}",
        )
    add(
        "global_contextual_importance",
        {"instances": ["r0"], "n_instances": -1},
        InputError,
        "'n_instances' parameter must be an int",
        "n_instances-with-instances",
    )

    # ciu_from_profiles
    for value, match in [
        ([prof()], "'profiles' parameter must be a dict"),
        ({}, "'profiles' dict is empty"),
        (None, "'profiles' parameter must be a dict"),
        ({"a": "x"}, "'profiles' value 'a' must be a FeatureProfile \\(got str\\)"),
    ]:
        add("ciu_from_profiles", {"profiles": value}, InputError, match, f"profiles={value!r}"[:40])
    for value, match in [
        ("nope", "'row' 'nope' is not among the rows explained by the profile of 'a'"),
        (["r0", "r1"], "'row' must be one row label"),
        (None, "'row' None is not among"),
    ]:
        add("ciu_from_profiles", {"row": value}, InputError, match, f"row={value!r}")
    for value, match in [
        (None, "'out_range' parameter must be a pair"),
        ((1, 0), "'out_range'.*MIN < MAX"),
        ((np.inf, 1), "'out_range'.*MIN < MAX"),
    ]:
        add("ciu_from_profiles", {"out_range": value}, InputError, match, f"out_range={value!r}")
    for value in (2, -1, "a", np.nan, True):
        add(
            "ciu_from_profiles",
            {"phi0": value},
            InputError,
            r"'phi0' parameter must be a number in \[0, 1\]",
            f"phi0={value!r}",
        )
    add("ciu_from_profiles", {"utility": "up"}, InputError, "'utility' parameter must be one of")
    add(
        "ciu_from_profiles",
        {"row": object()},
        InputError,
        "'row' <object .*> is not among the rows",
        "row-object",
    )
    add(
        "contextual_importance",
        {"phi0": 2**70},
        InputError,
        r"'phi0' parameter must be a number in \[0, 1\]",
        "phi0-huge-int",
    )
    add(
        "ice_impact",
        {"alpha": 10**400},
        InputError,
        "'alpha' parameter must be a finite number",
        "alpha-huge-int",
    )

    # profile-based functions
    for name in ("ice_impact", "ale_from_profile", "pd_importance"):
        for value in (None, "a", X, {"a": 1}):
            add(
                name,
                {"prof": value},
                InputError,
                "'prof' parameter must be a FeatureProfile",
                f"prof={type(value).__name__}",
            )
    for value in (-1.0, np.nan, np.inf, "1", True, None):
        add(
            "ice_impact",
            {"alpha": value},
            InputError,
            "'alpha' parameter must be a finite number >= 0",
            f"alpha={value!r}",
        )
        add(
            "ice_feature_impact",
            {"alpha": value},
            InputError,
            "'alpha' parameter must be a finite number >= 0",
            f"alpha={value!r}",
        )
    for value in (0.0, -1.0, np.nan, "1", True):
        add(
            "ice_impact",
            {"sd": value},
            InputError,
            "'sd' parameter must be a finite number > 0",
            f"sd={value!r}",
        )
    add(
        "ale_from_profile",
        {"prof": prof(feature="city")},
        InputError,
        "ALE needs a numeric feature; 'city' is categorical",
    )
    for value in (1, 0, 2.5, "5", True, 10**6):
        add(
            "ale_from_profile",
            {"n_intervals": value},
            InputError,
            r"'n_intervals' parameter must be an int",
            f"n_intervals={value!r}",
        )

    # ale_curve
    for value, match in [
        ("zz", "Unknown feature 'zz'"),
        (None, "'feature' parameter is required"),
        (["a"], "'feature' parameter must be one column label"),
    ]:
        add("ale_curve", {"feature": value}, InputError, match, f"feature={value!r}")
    for value in (1, 0, -3, 2.5, "5", True, None, 10**6):
        add(
            "ale_curve",
            {"n_intervals": value},
            InputError,
            r"'n_intervals' parameter must be an int",
            f"n_intervals={value!r}",
        )
    add(
        "ale_curve",
        dict(model=CLF, X=XC, feature="city"),
        InputError,
        "ALE needs a numeric feature, but 'city' is categorical",
    )
    add("ale_curve", dict(X=X.assign(a=2.0)), InputError, r"Feature 'a' is constant \(2.0\)", "constant")
    add(
        "ale_curve",
        dict(X=X.assign(a=np.nan)),
        InputError,
        "Feature 'a' has no non-missing values",
        "all-nan",
    )

    # marginal_effects
    for value, match in [
        ("median", "'at' parameter must be None \\(AME\\), \"mean\""),
        ({}, "'at' parameter"),
        (5, "'at' parameter"),
        (["a"], "'at' parameter"),
        ({"zz": 1.0}, "Unknown column in 'at' 'zz'"),
        ({"a": "x"}, "'at' value of numeric column 'a' must be a finite number"),
        ({"a": np.nan}, "'at' value of numeric column 'a'"),
        ({"a": True}, "'at' value of numeric column 'a'"),
    ]:
        add("marginal_effects", {"at": value}, InputError, match, f"at={value!r}")
    add(
        "marginal_effects",
        dict(model=CLF, X=XC, at={"city": "tokyo"}),
        InputError,
        "'at' value 'tokyo' is not a level of 'city'",
        "at-level",
    )
    add(
        "marginal_effects",
        dict(model=CLF, X=XC, features=["city"]),
        InputError,
        "A marginal effect needs a numeric feature, but 'city' is categorical",
        "features-categorical",
    )
    add(
        "marginal_effects",
        dict(X=X.assign(a=1.0), features=["a"]),
        InputError,
        "Feature 'a' is constant",
        "constant",
    )
    for value, match in [
        (0.0, r"'step' parameter must be a finite number > 0 \(got 0.0\)"),
        (-1.0, "'step'"),
        (np.nan, "'step'"),
        ("x", "'step'"),
        (True, "'step'"),
        ([0.1], "'step'"),
        ({"zz": 0.1}, r"'step' dict names \['zz'\]"),
        ({"a": 0.0}, "'step'"),
    ]:
        add("marginal_effects", {"step": value}, InputError, match, f"step={value!r}")

    # parse_subgroup and format_condition
    for value, match in [
        (None, "The subgroup 'condition' must be a string \\(got NoneType\\)"),
        (5, "'condition' must be a string"),
        ("", "'condition' is empty"),
        ("   ", "'condition' is empty"),
        ("a = 0", "Subgroup 'a = 0': use '==' to compare"),
        ("zz > 0", "unknown column 'zz'"),
    ]:
        add("parse_subgroup", {"condition": value}, InputError, match, f"condition={value!r}")
    for value, match in [
        (None, "'X' must be a pandas DataFrame"),
        ([[1, 2]], "'X' must be a pandas DataFrame"),
        ({"a": [1, 2]}, "'X' must be a pandas DataFrame"),
    ]:
        add("parse_subgroup", {"X": value}, InputError, match, f"X={type(value).__name__}")
    for kw, match in [
        (dict(op="~"), "Unknown subgroup operator '~': the 'op' parameter must be one of"),
        (dict(op=None), "the 'op' parameter must be one of"),
        (dict(op="in", value="abc"), "The 'value' of operator 'in' needs a list of values"),
        (dict(op="in", value=5), "The 'value' of operator 'in' needs a list"),
        (
            dict(op="between", value=(1, 2, 3)),
            r"The 'value' of operator 'between' must be a \(low, high\) pair",
        ),
        (dict(op="between", value=5), r"'value' of operator 'between' must be a \(low, high\) pair"),
        (dict(op="is missing", value=1), "Operator 'is missing' takes no value; leave 'value' as None"),
        (dict(op="==", value=np.nan), "The 'value' nan cannot be compared; use 'is missing'"),
        (dict(op="==", value=object()), "Cannot use .* as a subgroup 'value'"),
        (dict(op="in", value=[1, [2]]), "Cannot use .* as a subgroup 'value'"),
    ]:
        add("format_condition", kw, InputError, match, "-".join(f"{k}={v!r}" for k, v in kw.items())[:40])

    # FeatureProfile methods
    for value, match in [
        (np.ones(5, dtype=bool), r"'mask' array must have one entry per explained row \(20\)"),
        (np.ones(20, dtype=int), "'mask' must be boolean \\(got dtype int64\\)"),
        (None, "'mask' array must have one entry"),
        (np.ones((20, 1), dtype=bool), "'mask' array"),
        (["yes"] * 20, "'mask' must be boolean"),
        (pd.Series(True, index=["r0", "r1"]), r"'mask' has no value for rows \['r2'"),
        (np.zeros(20, dtype=bool), "The subgroup 'mask' selects 0 of the 20 explained rows"),
        (pd.Series(False, index=X.index), "selects 0 of the 20"),
    ]:
        add(
            "FeatureProfile.subset",
            {"mask": value},
            InputError,
            match,
            f"mask={type(value).__name__}-{np.shape(value)}",
        )
    for value in (0, -1, "2", 1.5, True, None):
        add(
            "FeatureProfile.extremes",
            {"k": value},
            InputError,
            r"'k' parameter must be an int >= 1",
            f"k={value!r}",
        )
    add(
        "FeatureProfile.extremes",
        {"prof": prof(y=False)},
        InputError,
        "needs the target: pass y",
        "no-target",
    )
    add("output_range", {"X": X.assign(a=0.0, b=0.0, c=0.0)}, InputError, "predictions over X are constant", "constant")
    add("output_range_of", {"pred": OLS}, InputError, "'pred' must be the Predictions of compute.predict_rows", "pred")
    flat = compute.predict_rows(OLS, X.assign(a=0.0, b=0.0, c=0.0))
    add("output_range_of", {"pred": flat}, InputError, "predictions over X are constant", "constant")
    for value in (0, -1, "2", 1.5, True, None):
        add("rank_extremes", {"k": value}, InputError, r"'k' parameter must be an int >= 1", f"k={value!r}")
    for value, match in [
        ("zz", "'instance' 'zz' is neither a row label of X nor a one-row DataFrame"),
        (X.iloc[:2], "'instance' DataFrame must have exactly one row"),
        (X.iloc[0], "'instance' must be a row label of X or a one-row DataFrame"),
    ]:
        add("shapley_contributions", {"instance": value}, InputError, match, f"instance={type(value).__name__}")
    for value in (0, -1, 2.5, "10", None):
        add("shapley_contributions", {"n_background": value}, InputError, "'n_background'", f"bg={value!r}")
    add("shapley_contributions", {"features": ["a", "zz"]}, InputError, "zz", "features")
    add("shapley_contributions", {"tol": 0}, InputError, "'tol'", "tol")
    for value, match in [
        ("zz", "'instance' must be a row label of X.*'zz'"),
        (X.iloc[[0]], "'instance' must be a row label of X.*DataFrame"),
        (None, "'instance' must be a row label"),
    ]:
        add("what_if", {"instance": value}, InputError, match, f"instance={type(value).__name__}")
    for value, match in [
        ({"zz": 1.0}, "Unknown column in 'edits' 'zz'"),
        ({"a": "x"}, "numeric column 'a' must be a finite number"),
        ({"a": np.inf}, "'a' must be a finite number"),
        ([("a", 1.0)], "'edits' parameter must be a dict"),
    ]:
        add("what_if", {"edits": value}, InputError, match, f"edits={value!r}")
        add("apply_edits", {"edits": value}, InputError, match, f"edits={value!r}")
    for value, match in [
        (1, r"'grid' parameter must be an int in \[2"),
        ("quantiles", "'grid' parameter must be \"observed\""),
        ([0.0, 1.0], "'grid' parameter must be \"observed\" or an int"),
    ]:
        add("what_if", {"grid": value}, InputError, match, f"grid={value!r}")
        add("what_if_grids", {"grid": value}, InputError, match, f"grid={value!r}")
    add("what_if", {"features": ["a", "zz"]}, InputError, "zz", "features")
    add("what_if_grids", {"features": ["a", "zz"]}, InputError, "zz", "features")
    add("what_if_grids", {"X": "not a frame"}, InputError, "DataFrame", "X")
    for value in ({}, {"a": [0.0, 1.0]}, [("a", None)]):
        add("what_if", {"grids": value}, InputError, r"'grids' must map every feature to its Grid", f"grids={value!r}")
    add("what_if", {"features": []}, InputError, "'features' parameter must be a non-empty list", "no-features")
    add("what_if", {"out_range": (1.0, 1.0)}, InputError, "'out_range' must be two finite numbers", "out_range")
    add("what_if", {"phi0": 2.0}, InputError, "phi0", "phi0")
    add("what_if", {"utility": "up"}, InputError, "utility", "utility")
    for value, match in [
        (X.iloc[:2], "'original' row must be a one-row DataFrame.*2 rows"),
        (X.iloc[0], "'original' row must be a one-row DataFrame.*Series"),
        (X.iloc[[0]][["a"]], "'original' row lacks the columns \\['b', 'c'\\]"),
    ]:
        add("apply_edits", {"original": value}, InputError, match, f"original={type(value).__name__}-{len(value)}")
    for name in ("model_performance", "confusion_matrix", "calibration_curve"):
        add(name, {"pred": OLS}, InputError, "'pred' must be the Predictions of compute.predict_rows", "pred")
        add(
            name,
            {"mask": np.ones(3, bool)},
            InputError,
            "'mask' must be a boolean array with one entry per row",
            "mask",
        )
        add(name, {"mask": [1, 0] * 10}, InputError, "'mask' must be a boolean array", "mask-ints")
    add("model_performance", {"y": Y[:5]}, InputError, "'X' has 20 rows but 'y' has 5", "y-length")
    add("model_performance", {"y": np.where(np.arange(20) == 3, np.nan, Y)}, InputError, "'y' has 1 missing", "y-nan")
    add("model_performance", {"loss": "log_loss"}, InputError, "is for a classifier", "loss")
    add("model_performance", {"mask": np.zeros(20, bool)}, InputError, "No rows are selected", "no-rows")
    for value in (-0.1, 1.5, "0.5", None, float("nan")):
        add("confusion_matrix", {"threshold": value}, InputError, "'threshold' parameter", f"threshold={value!r}")
    add("confusion_matrix", {"pred": compute.predict_rows(OLS, X), "y": Y}, InputError, "for a classifier", "reg")
    add("confusion_matrix", {"y": np.where(YC == "hi", "HI", YC)}, InputError, "labels the model does not know", "y")
    for value in (0, -2, 2.5, "10", None):
        add(
            "calibration_curve",
            {"n_bins": value},
            InputError,
            "'n_bins' parameter must be an int >= 1",
            f"bins={value!r}",
        )
    add(
        "calibration_curve",
        {"pred": compute.predict_rows(OLS, X), "y": Y},
        InputError,
        "needs class probabilities",
        "reg",
    )
    add("rank_extremes", {"values": ["a", "b"]}, InputError, "'values' parameter must be numbers", "text")
    add("rank_extremes", {"values": np.ones((2, 2))}, InputError, "'values' parameter must be one-dimensional", "2d")
    add("suggest_subgroups", {"profile": "a"}, InputError, "'profile' must be a FeatureProfile", "profile")
    add("suggest_subgroups", {"profile": prof(y=False)}, InputError, "needs the target", "no-target")
    add("suggest_subgroups", {"X": X.values}, InputError, "'X' must be a pandas DataFrame", "ndarray")
    add("suggest_subgroups", {"X": X.iloc[5:]}, InputError, "'X' lacks 5 of the profile's rows", "rows")
    add("suggest_subgroups", {"features": ["b", "zz"]}, InputError, "'features' names columns not in 'X'", "features")
    add("suggest_subgroups", {"max_depth": 9}, InputError, "'max_depth' must be a whole number from 1 to 5", "depth")
    add("suggest_subgroups", {"max_depth": 2.5}, InputError, "'max_depth'", "depth-float")
    add("suggest_subgroups", {"min_leaf_share": 0}, InputError, "'min_leaf_share' must be a share", "leaf")
    add("suggest_subgroups", {"min_leaf_share": "x"}, InputError, "'min_leaf_share'", "leaf-text")
    add(
        "suggest_subgroups",
        {"mask": np.ones(4, bool)},
        InputError,
        "'mask' must have one value per profile row",
        "mask",
    )
    add("pfi_convergence", {"pfi": prof()}, InputError, "'pfi' must be a PermutationImportance", "pfi")
    add("pfi_convergence", {"level": 1.0}, InputError, "'level' must be a probability", "level")
    add("pfi_convergence", {"top": 0}, InputError, "'top' must be a whole number", "top")
    add("feature_dependence", {"X": [[1, 2]]}, InputError, "'X' must be a pandas DataFrame", "list")
    add("feature_dependence", {"features": ["a", "q"]}, InputError, "'features' names columns not in 'X'", "features")
    add("constant_model_error", {"loss": "hinge"}, InputError, "No constant-model yardstick for loss 'hinge'", "loss")
    add("constant_model_error", {"y": np.array([1.0, np.nan])}, InputError, "'y' has missing values", "nan")
    add("constant_model_error", {"y": np.array([])}, InputError, "'y' is empty", "empty")
    add("leakage_check", {"pfi": None}, InputError, "'pfi' must be a PermutationImportance", "pfi")
    add("grouped_against_alone", {"alone": None}, InputError, "must be PermutationImportance results", "alone")
    add("grouped_against_alone", {"groups": {"h": ["a"]}}, InputError, "Group 'h' is not in the grouped", "group")
    add("confusion_accuracy", {"matrix": np.ones(3)}, InputError, "A confusion matrix is square", "1-d")
    add(
        "leakage_check",
        {"pfi": compute.permutation_importance(OLS, X, Y, n_repeats=2, kind="ratio")},
        InputError,
        "difference form",
        "ratio",
    )
    add("permutation_block", {"streams": [0]}, InputError, "'streams' parameter must list one stream", "streams-n")
    add(
        "permutation_block",
        {"features": ["a", "b"], "streams": [1, 1]},
        InputError,
        "'streams' must be distinct",
        "streams-dup",
    )
    add(
        "permutation_block",
        {"features": ["a"], "streams": [-1]},
        InputError,
        "'streams' must be whole numbers",
        "streams-neg",
    )
    for value in ("some", [("a",)], [("a", "a")], [("a", "zz")], [3]):
        add("interaction_strength", {"pairs": value}, InputError, "pair", f"pairs={value!r}")
    for value in (1, 0, 101, 2.5, "5", True):
        add("interaction_strength", {"grid_size": value}, InputError, "'grid_size'", f"grid_size={value!r}")
    add("interaction_strength", {"features": "zz"}, InputError, "zz", "h-features")
    for value in (1, 101, "3"):
        add("interaction_strength", {"top": value}, InputError, "'top'", f"top={value!r}")
    add("conditional_importance", {"marginal": "yes"}, InputError, "'marginal'", "cs-marginal")
    add("InteractionStrength.pd2", {"a": "zz"}, InputError, "was not computed", "pd2-unknown")
    for value in (0, 1.5, "0.1", True):
        add("conditional_importance", {"alpha": value}, InputError, "'alpha'", f"alpha={value!r}")
    add("performance_gap", {"mask": np.ones(3, bool)}, InputError, "'mask'", "gap-mask-shape")
    add("model_skill", {"pred": "preds"}, InputError, "'pred'", "skill-pred")
    add("model_skill", {"mask": np.ones(3, bool)}, InputError, "'mask'", "skill-mask")
    add("model_skill", {"y": Y[:5]}, InputError, "rows", "skill-y-length")
    add("model_skill", {"level": 1.0}, InputError, "'level'", "skill-level")
    add("model_skill", {"loss": "hinge"}, InputError, "'loss'", "skill-loss")
    add("compare_models", {"preds": [1, 2]}, InputError, "'preds'", "compare-list")
    add("compare_models", {"preds": {"a": compute.predict_rows(OLS, X)}}, InputError, "at least two", "compare-one")
    add("compare_features", {"pfi": "pfi"}, InputError, "'pfi'", "features-pfi")
    add("compare_features", {"b": "zz"}, InputError, "'zz' is not a feature", "features-unknown")
    add("tied_with", {"feature": "zz"}, InputError, "'zz' is not a feature", "tied-unknown")
    for value in (0, 2.5, "3"):
        add("ranking_ties", {"top": value}, InputError, "'top'", f"ties-top={value!r}")
    add("performance_gap", {"mask": np.arange(len(X)) < 1}, InputError, "at least 2 rows", "gap-one-row")
    for value in (-1, 9, 2.5, "4", True):
        add("conditional_importance", {"max_depth": value}, InputError, "'max_depth'", f"max_depth={value!r}")
    for value in (0, -5, 1.5, None):
        add("conditional_importance", {"min_leaf": value}, InputError, "'min_leaf'", f"min_leaf={value!r}")
    add("conditional_importance", {"features": ["zz"]}, InputError, "zz", "cs-features")
    add("conditional_importance", {"kind": "log"}, InputError, "'kind'", "cs-kind")
    add("permutation_importance", {"groups": ["a"]}, InputError, "'groups' parameter must map a name", "groups-list")
    add("permutation_importance", {"groups": {}}, InputError, "'groups' mapping is empty", "groups-empty")
    add("permutation_importance", {"groups": {"": ["a"]}}, InputError, "needs a non-empty text name", "groups-name")
    add("permutation_importance", {"groups": {"g": ["zz"]}}, InputError, "zz", "groups-column")
    add("permutation_importance", {"groups": {"g": []}}, InputError, "groups\\['g'\\]", "groups-members")
    add(
        "permutation_importance",
        {"features": ["a"], "groups": {"a": ["a", "b"]}},
        InputError,
        "also in 'features'",
        "groups-clash",
    )
    return out


CASES = _cases()


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("name, kwargs, error, match", CASES)
def test_bad_input(name, kwargs, error, match):
    """Bad input raises the package's InputError or ModelError, naming the parameter."""
    fn, defaults = CALLS[name]
    args = defaults() | kwargs
    with pytest.raises(error, match=match):
        try:
            fn(**args)
        except ExplainError:
            raise
        except Exception as exc:  # a bare TypeError, KeyError, numpy or pandas error: a bug
            pytest.fail(f"{name} leaked {type(exc).__module__}.{type(exc).__name__}: {exc}")


def test_table_covers_every_public_function():
    """Every function in compute.__all__ has rows in the table."""
    public = {n for n in compute.__all__ if callable(getattr(compute, n)) and n[0].islower()}
    covered = {c.values[0] for c in CASES}
    assert public | {"FeatureProfile.subset", "FeatureProfile.extremes", "PermutationImportance.restrict"} <= covered


def test_model_error_keeps_its_cause():
    """A model failure is a ModelError chained to the model's own exception."""
    with pytest.raises(ModelError) as info:
        compute.permutation_importance(Raising(), X, Y, n_repeats=1)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
