"""Train XGBoost, LightGBM and CatBoost models in a fresh interpreter and save, per case, the
model files in each native format, the training frame as CSV and the in-memory model's own
predictions on that frame (``python tests/helpers/train_boosters.py OUT``; prints a JSON index).

Run apart from the test process: these libraries start OpenMP thread pools, and a process
that has started one must not fork a child that uses OpenMP (the dashboard forks its model
processes), so the test process itself never trains or predicts with them.

Cases: library x task (regression, count, binary, 3-class) x inputs (numeric only, with a
categorical column whose training levels are in a non-alphabetical order).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

LEVELS = ["red", "green", "blue"]  # training order, not alphabetical
UNSEEN_ROWS = [2, 5, 7]  # rows given a level no model saw ('purple') in the *-unseen.csv files


def frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n).round(4),
            "b": rng.normal(size=n).round(4),
            "c": rng.choice(LEVELS, size=n),
        }
    )
    score = X.a + 0.5 * X.b + X.c.map({"red": 1.5, "green": -1.0, "blue": 0.0}) + 0.3 * rng.normal(size=n)
    X["regression"] = (3 * score).round(4)
    X["count"] = rng.poisson(np.exp(0.4 * score.clip(-3, 3)))
    X["binary"] = np.where(score > 0.2, "yes", "no")
    X["multi"] = np.select([score < -0.5, score < 0.8], ["low", "mid"], "high")
    return X


def target(X: pd.DataFrame, task: str, library: str):
    if task in ("binary", "multi") and library == "xgboost":  # XGBClassifier trains on 0..k-1
        return pd.Series(pd.Categorical(X[task]).codes, index=X.index, name=task)
    return X[task]


def train(library: str, task: str, inputs: pd.DataFrame, y):
    categorical = "c" in inputs.columns
    if library == "xgboost":
        import xgboost as xgb

        if categorical:
            inputs = inputs.assign(c=pd.Categorical(inputs.c, categories=LEVELS))
        kw = dict(n_estimators=25, max_depth=3, enable_categorical=True, tree_method="hist", random_state=0)
        if task in ("regression", "count"):
            model = xgb.XGBRegressor(objective="count:poisson" if task == "count" else "reg:squarederror", **kw)
        else:
            model = xgb.XGBClassifier(**kw)
    elif library == "lightgbm":
        import lightgbm as lgb

        if categorical:
            inputs = inputs.assign(c=pd.Categorical(inputs.c, categories=LEVELS))
        kw = dict(n_estimators=25, num_leaves=8, min_child_samples=5, random_state=0, verbose=-1)
        if task in ("regression", "count"):
            model = lgb.LGBMRegressor(objective="poisson" if task == "count" else "regression", **kw)
        else:
            model = lgb.LGBMClassifier(**kw)
    else:
        import catboost as cb

        kw = dict(iterations=25, depth=3, random_seed=0, verbose=0, allow_writing_files=False)
        cat = ["c"] if categorical else None
        if task in ("regression", "count"):
            model = cb.CatBoostRegressor(loss_function="Poisson" if task == "count" else "RMSE", cat_features=cat, **kw)
        else:
            model = cb.CatBoostClassifier(cat_features=cat, **kw)
    model.fit(inputs, y)
    if task in ("regression", "count"):
        reference = model.predict(inputs)
    else:
        reference = model.predict_proba(inputs)
    return model, np.asarray(reference, dtype=np.float64)


def save(library: str, model, stem: Path) -> list[str]:
    if library == "xgboost":
        model.save_model(f"{stem}.json")
        model.save_model(f"{stem}.ubj")
        return [f"{stem}.json", f"{stem}.ubj"]
    if library == "lightgbm":
        model.booster_.save_model(f"{stem}.txt")
        return [f"{stem}.txt"]
    model.save_model(f"{stem}.cbm")
    model.save_model(f"{stem}.json", format="json")
    return [f"{stem}.cbm", f"{stem}.json"]


def main(out: Path, libraries=("xgboost", "lightgbm", "catboost")) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    X = frame()
    cases = []
    for library in libraries:
        for task in ("regression", "count", "binary", "multi"):
            for kind in ("numeric", "categorical"):
                if task == "count" and kind == "categorical":
                    continue
                columns = ["a", "b"] + (["c"] if kind == "categorical" else [])
                y = target(X, task, library)
                model, reference = train(library, task, X[columns], y)
                stem = out / f"{library}-{task}-{kind}"
                data = X[columns].assign(**{task: y})
                data.to_csv(f"{stem}.csv", index=False)
                np.save(f"{stem}.npy", reference)
                extra = {}
                if kind == "categorical" and task == "regression":  # a level the model never saw
                    unseen = data.copy()
                    unseen.loc[UNSEEN_ROWS, "c"] = "purple"
                    unseen.to_csv(f"{stem}-unseen.csv", index=False)
                    inputs = unseen[columns]
                    if library != "catboost":
                        inputs = inputs.assign(c=pd.Categorical(inputs.c, categories=[*LEVELS, "purple"]))
                    np.save(f"{stem}-unseen.npy", np.asarray(model.predict(inputs), dtype=np.float64))
                    extra = {"unseen_csv": f"{stem}-unseen.csv", "unseen_reference": f"{stem}-unseen.npy"}
                cases.append(
                    {
                        "library": library,
                        "task": task,
                        "kind": kind,
                        "files": save(library, model, stem),
                        "csv": f"{stem}.csv",
                        "reference": f"{stem}.npy",
                        "target": task,
                        "classes": [str(c) for c in getattr(model, "classes_", [])],
                        **extra,
                    }
                )
    return cases


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), tuple(sys.argv[2:]) or ("xgboost", "lightgbm", "catboost"))))
