"""Model files written by old XGBoost and LightGBM releases, with the old library's own
predictions (issue 41: "older formats"). Run once per release, each in an environment that
has only that release of the library (PyPI wheels; Python 3.11, numpy 1.26.4, pandas 2.1.4,
scipy 1.17.1)::

    python -m venv /tmp/old/venv
    /tmp/old/venv/bin/pip install "numpy<2" "pandas<2.2" scipy
    /tmp/old/venv/bin/pip install --no-deps --target /tmp/old/xgboost_1.6.2 xgboost==1.6.2
    # likewise xgboost==1.5.2, 1.4.2, 1.0.2 and lightgbm==3.3.5, 2.3.1, 2.2.3, 2.0.12 (each its
    # own --target), and pandas==1.5.3 into /tmp/old/pandas_1.5.3
    PYTHONPATH=/tmp/old/xgboost_1.6.2 /tmp/old/venv/bin/python tests/data/old_models/make.py
    PYTHONPATH=/tmp/old/xgboost_1.4.2:/tmp/old/pandas_1.5.3 /tmp/old/venv/bin/python tests/data/old_models/make.py

Each run writes, next to this script, ``<library>-<version>-<case>.<suffix>`` (a few shallow
trees) and ``<same name>.pred.json`` (the old library's predictions on ``data.csv``, read
back from the CSV as the test reads it). ``data.csv`` is the same for every run: 120 rows
drawn with NumPy's legacy ``RandomState(41)``; ``a`` and ``b`` numeric, ``c`` a category
given as its integer code 0..3, ``y`` a numeric target, ``label`` a 0/1 target, ``tier``
the terciles of ``y`` as text (low, mid, high).

Releases used: XGBoost 1.0.2, 1.4.2 and 1.5.2 (these two with pandas 1.5.3 first on the
path: they import names pandas 2 removed), XGBoost 1.6.2; LightGBM 2.0.12 (format v2, no
'end of trees' line), 2.2.3 (v2), 2.3.1 and 3.3.5 (v3); CatBoost 1.0.6, whose wheels stop
at Python 3.10, so it ran on Python 3.9.18 (numpy 1.23.5, pandas 1.5.3)::

    python3.9 -m venv /tmp/old/venv39
    /tmp/old/venv39/bin/pip install numpy==1.23.5 pandas==1.5.3 six "scipy<1.12"
    /tmp/old/venv39/bin/pip install --no-deps catboost==1.0.6
    /tmp/old/venv39/bin/python tests/data/old_models/make.py

Cases: XGBoost ``regression`` (JSON; and UBJSON from 1.6), ``binary`` (JSON), and from 1.5
``categorical`` (``c`` as a pandas category; 1.6's partition splits store NaN
``split_conditions`` on the categorical nodes; 1.5's trees here split the code as a
number). LightGBM ``dart``, ``goss`` and, from 3.0, ``linear`` (``linear_tree``), all
regression. CatBoost ``regression`` (.cbm and .json), ``categorical`` (``c`` a categorical
feature, .cbm) and ``multiclass`` (target ``tier``, .cbm; its class names, in the library's
order, in ``<name>.classes.json``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
FEATURES = ["a", "b", "c"]


def data() -> pd.DataFrame:
    rng = np.random.RandomState(41)
    n = 120
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=n).round(3),
            "b": rng.uniform(-2, 2, size=n).round(3),
            "c": rng.randint(0, 4, size=n),
        }
    )
    effect = np.array([1.5, -1.0, 0.0, 0.5])[frame.c]
    frame["y"] = (2 * frame.a + frame.b**2 + effect + 0.2 * rng.normal(size=n)).round(3)
    frame["label"] = (frame.y > frame.y.median()).astype(int)
    low, high = frame.y.quantile([1 / 3, 2 / 3])
    frame["tier"] = np.select([frame.y < low, frame.y < high], ["low", "mid"], "high")
    return frame


def _save(name: str, predictions) -> None:
    values = [float(v) for v in np.asarray(predictions, dtype=np.float64).ravel()]
    (HERE / f"{name}.pred.json").write_text(json.dumps(values))
    print("wrote", name)


def xgboost_files(frame: pd.DataFrame) -> None:
    import xgboost as xgb

    version = xgb.__version__
    # a float array, not the frame: XGBoost 1.0's pandas conversion misreads pandas 2 frames
    X = frame[FEATURES].to_numpy(dtype=float)
    small = {"max_depth": 3, "eta": 0.3, "nthread": 1}
    for case, target, objective in (("regression", "y", "reg:squarederror"), ("binary", "label", "binary:logistic")):
        matrix = xgb.DMatrix(X, label=frame[target].to_numpy(), feature_names=FEATURES)
        booster = xgb.train({**small, "objective": objective}, matrix, num_boost_round=4)
        name = f"xgboost-{version}-{case}"
        booster.save_model(str(HERE / f"{name}.json"))
        _save(f"{name}.json", booster.predict(xgb.DMatrix(X, feature_names=FEATURES)))
        if case == "regression" and tuple(map(int, version.split(".")[:2])) >= (1, 6):
            booster.save_model(str(HERE / f"{name}.ubj"))
            _save(f"{name}.ubj", booster.predict(xgb.DMatrix(X, feature_names=FEATURES)))
    if tuple(map(int, version.split(".")[:2])) >= (1, 5):  # categorical splits on the CPU
        Xc = frame[FEATURES].assign(c=pd.Categorical(frame.c, categories=[0, 1, 2, 3]))
        matrix = xgb.DMatrix(Xc, label=frame.y, enable_categorical=True)
        params = {**small, "objective": "reg:squarederror", "tree_method": "hist", "max_cat_to_onehot": 1}
        booster = xgb.train(params, matrix, num_boost_round=4)
        name = f"xgboost-{version}-categorical"
        booster.save_model(str(HERE / f"{name}.json"))
        _save(f"{name}.json", booster.predict(xgb.DMatrix(Xc, enable_categorical=True)))


def lightgbm_files(frame: pd.DataFrame) -> None:
    import lightgbm as lgb

    version = lgb.__version__
    X = frame[FEATURES].to_numpy(dtype=float)
    small = {"objective": "regression", "num_leaves": 4, "min_data_in_leaf": 5, "verbose": -1, "num_threads": 1}
    cases = {
        "dart": {"boosting": "dart", "drop_rate": 0.3, "seed": 1},
        "goss": {"boosting": "goss", "top_rate": 0.3, "other_rate": 0.2, "learning_rate": 0.3},
    }
    if int(version.split(".")[0]) >= 3:
        cases["linear"] = {"linear_tree": True, "learning_rate": 0.3}
    for case, params in cases.items():
        train = lgb.Dataset(X, label=frame.y.to_numpy(), feature_name=FEATURES, free_raw_data=False)
        booster = lgb.train({**small, **params}, train, num_boost_round=5)
        name = f"lightgbm-{version}-{case}.txt"
        booster.save_model(str(HERE / name))
        _save(name, booster.predict(X))


def catboost_files(frame: pd.DataFrame) -> None:
    from catboost import CatBoostClassifier, CatBoostRegressor

    version = __import__("catboost").__version__
    X = frame[FEATURES]
    small = {"iterations": 5, "depth": 3, "random_seed": 0, "thread_count": 1, "verbose": False}
    small["allow_writing_files"] = False  # no catboost_info folder
    numeric = CatBoostRegressor(**small).fit(X, frame.y)
    for suffix, kind in ((".cbm", "cbm"), (".json", "json")):
        name = f"catboost-{version}-regression{suffix}"
        numeric.save_model(str(HERE / name), format=kind)
        _save(name, numeric.predict(X))
    categorical = CatBoostRegressor(**small, cat_features=["c"]).fit(X, frame.y)
    name = f"catboost-{version}-categorical.cbm"
    categorical.save_model(str(HERE / name))
    _save(name, categorical.predict(X))
    classes = CatBoostClassifier(**small, loss_function="MultiClass").fit(X, frame.tier)
    name = f"catboost-{version}-multiclass.cbm"
    classes.save_model(str(HERE / name))
    _save(name, classes.predict_proba(X))
    (HERE / f"{name}.classes.json").write_text(json.dumps([str(c) for c in classes.classes_]))


def main() -> None:
    frame = data()
    frame.to_csv(HERE / "data.csv", index=False)
    frame = pd.read_csv(HERE / "data.csv")  # the values as the test reads them
    done = False
    for module, write in (("xgboost", xgboost_files), ("lightgbm", lightgbm_files), ("catboost", catboost_files)):
        try:
            __import__(module)
        except ImportError:
            continue
        write(frame)
        done = True
    if not done:
        sys.exit("none of xgboost, lightgbm and catboost is importable")


if __name__ == "__main__":
    main()
