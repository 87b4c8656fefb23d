"""Built-in demos, trained at first use and kept in the cache folder (no download).

* ``demo-x3``: the X3 interaction simulation of Casalicchio, Molnar & Bischl (2018),
  Sec. 6.1, with a random forest: globally X1 and X2 are equally important, on X3 = 0
  only X1 matters and on X3 = 1 only X2 (Table 1, Fig. 4).
* ``demo-diabetes``: scikit-learn's diabetes data (regression), random forest and ridge.
* ``demo-cancer``: scikit-learn's breast-cancer data (classification), gradient boosting
  and logistic regression; explains the probability of "malignant".
* ``demo-wine``: scikit-learn's wine data (three cultivars), XGBoost, LightGBM and CatBoost
  side by side (listed when the three libraries are installed: the ``boosters`` extra).

Models are saved as ``.skops`` (the boosters in their own formats: XGBoost ``.ubj``, LightGBM
``.txt``, CatBoost ``.cbm``) and loaded through the same safe path as uploads.
"""

from __future__ import annotations

import fcntl
import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import compute
from compute.datasets import x3_interaction

from .store import ModelEntry, Store, Workspace

DEMOS = {
    "demo-x3": "X3 interaction simulation (random forest)",
    "demo-diabetes": "Diabetes progression (regression: random forest, ridge)",
    "demo-cancer": "Breast cancer (classification: gradient boosting, logistic regression)",
}
DEFAULT_DEMO = "demo-x3"
BOOSTER_LIBRARIES = ("xgboost", "lightgbm", "catboost")
BOOSTER_DEMOS = ("demo-wine",)  # trained with the booster libraries (their OpenMP: fresh interpreters only)
if all(importlib.util.find_spec(name) for name in BOOSTER_LIBRARIES):  # found, not imported (no OpenMP here)
    DEMOS["demo-wine"] = "Wine cultivars (3 classes: XGBoost, LightGBM, CatBoost)"


@dataclass(frozen=True)
class DemoData:
    """What a demo's builder returns: its held-out rows (features and target), the task, the
    loss PFI uses, the class whose probability is explained (None: the model's own), and the
    trained models by name."""

    data: pd.DataFrame
    target: str
    task: str  # "regression" or "classification"
    loss: str
    output: str | None
    models: dict


def _x3() -> DemoData:
    from sklearn.ensemble import RandomForestRegressor

    X_train, y_train = x3_interaction(5000, random_state=1)
    X_test, y_test = x3_interaction(500, random_state=2)
    forest = RandomForestRegressor(n_estimators=60, min_samples_leaf=5, random_state=0, n_jobs=-1)
    forest.fit(X_train, y_train)
    data = X_test.assign(Y=y_test)
    return DemoData(data, "Y", "regression", "squared_error", None, {"random forest": forest})


def _diabetes() -> DemoData:
    from sklearn.datasets import load_diabetes
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    frame = load_diabetes(as_frame=True, scaled=False).frame.rename(columns={"target": "progression"})
    train, test = train_test_split(frame, test_size=0.35, random_state=0)
    X_train, y_train = train.drop(columns="progression"), train["progression"]
    forest = RandomForestRegressor(n_estimators=100, min_samples_leaf=3, random_state=0, n_jobs=-1)
    ridge = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))
    models = {"random forest": forest.fit(X_train, y_train), "ridge": ridge.fit(X_train, y_train)}
    return DemoData(test.reset_index(drop=True), "progression", "regression", "squared_error", None, models)


def _cancer() -> DemoData:
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    raw = load_breast_cancer(as_frame=True)
    frame = raw.frame.copy()
    frame["diagnosis"] = pd.Series(np.asarray(raw.target_names)[raw.target], dtype=object).astype(str)
    frame = frame.drop(columns="target")
    train, test = train_test_split(frame, test_size=0.3, random_state=0, stratify=frame["diagnosis"])
    X_train, y_train = train.drop(columns="diagnosis"), train["diagnosis"]
    boost = HistGradientBoostingClassifier(max_iter=150, learning_rate=0.1, random_state=0)
    logit = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=2000))
    models = {"gradient boosting": boost.fit(X_train, y_train), "logistic regression": logit.fit(X_train, y_train)}
    return DemoData(test.reset_index(drop=True), "diagnosis", "classification", "log_loss", "malignant", models)


def _wine() -> DemoData:
    import catboost
    import lightgbm
    import xgboost
    from sklearn.datasets import load_wine
    from sklearn.model_selection import train_test_split

    raw = load_wine(as_frame=True)
    frame = raw.frame.copy()
    names = [str(n).replace("class_", "cultivar ") for n in raw.target_names]
    frame["cultivar"] = pd.Series(np.asarray(names)[raw.target], dtype=object).astype(str)
    frame = frame.drop(columns="target")
    train, test = train_test_split(frame, test_size=0.4, random_state=0, stratify=frame["cultivar"])
    X_train, y_train = train.drop(columns="cultivar"), train["cultivar"]
    codes = pd.Categorical(y_train, categories=names).codes  # XGBClassifier trains on 0..k-1
    models = {
        "XGBoost": xgboost.XGBClassifier(n_estimators=80, max_depth=3, learning_rate=0.1, random_state=0).fit(
            X_train, codes
        ),
        "LightGBM": lightgbm.LGBMClassifier(
            n_estimators=80, num_leaves=8, min_child_samples=5, random_state=0, verbose=-1
        ).fit(X_train, y_train),
        "CatBoost": catboost.CatBoostClassifier(
            iterations=150, depth=4, random_seed=0, verbose=0, allow_writing_files=False
        ).fit(X_train, y_train),
    }
    models["XGBoost"].wip_classes = tuple(names)  # what its outputs 0..k-1 mean (the file stores no labels)
    return DemoData(test.reset_index(drop=True), "cultivar", "classification", "log_loss", None, models)


_BUILDERS = {"demo-x3": _x3, "demo-diabetes": _diabetes, "demo-cancer": _cancer, "demo-wine": _wine}


def _save(model, stem: Path) -> tuple[Path, tuple]:
    """A demo model's file (its library's own format for a booster) and the class labels the
    file does not store (XGBoost: trained on 0..k-1, so the demo names them)."""
    module = type(model).__module__.split(".")[0]
    if module == "xgboost":
        path = stem.with_suffix(".ubj")
        model.save_model(path)
        return path, tuple(getattr(model, "wip_classes", ()))
    if module == "lightgbm":
        path = stem.with_suffix(".txt")
        model.booster_.save_model(path)
        return path, tuple(str(c) for c in model.classes_)
    if module == "catboost":
        path = stem.with_suffix(".cbm")
        model.save_model(str(path))
        return path, ()
    import skops.io as sio

    path = stem.with_suffix(".skops")
    sio.dump(model, path)
    return path, ()


def _train(store, ws_id: str):
    """Train a demo's models, save them (.skops, or a booster's own format) with its data;
    returns the workspace."""
    demo = _BUILDERS[ws_id]()
    data_rel, data_sha = store.keep_data(demo.data)
    features = tuple(str(c) for c in demo.data.columns if c != demo.target)
    entries = []
    for name, model in demo.models.items():
        path, classes = _save(model, Path(store.root / "demos" / f"{ws_id}-{name.replace(' ', '_')}"))
        rel, sha = store.keep_model(path, path.suffix)
        walked = compute.pfi_engine(model, demo.data[list(features)]) == compute.TREE_WALK
        entries.append(ModelEntry(name=name, path=rel, sha=sha, features=features, classes=classes, walked=walked))
    ws = Workspace(
        id=ws_id,
        title=DEMOS[ws_id],
        data_path=data_rel,
        data_sha=data_sha,
        n_rows=len(demo.data),
        target=demo.target,
        task=demo.task,
        loss=demo.loss,
        output=demo.output,
        models=tuple(entries),
        demo=True,
        features=features,
        data_role="held-out",  # every demo's data is a test split its models never saw
    )
    return ws


def build_demo(store, ws_id: str):
    """Train a demo's models, save them with its data, record the workspace (the store's
    ``build_demo``, given to it by :func:`dashboard.state.make_context`)."""
    if ws_id not in _BUILDERS:
        return None
    record = store.root / "workspaces" / f"{ws_id}.json"
    lock_path = store.root / "demos" / f"{ws_id}.lock"
    with open(lock_path, "w") as lock:  # one worker trains, the others wait for its record
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if record.exists():
                return Workspace.from_json(record.read_text())
            if store.remote is not None:  # a broker out of reach: said at once (BrokerError), not after training
                store.remote.ping()
            # Trained in a fresh interpreter (not a fork): scikit-learn's OpenMP pool
            # (gradient boosting) must never start in a web worker, or every job forked from
            # it later hangs in libgomp at its first parallel prediction; and a forked child
            # of a process whose pool is running hangs the same way while training.
            done = subprocess.run(
                [sys.executable, "-m", "dashboard.demos", str(store.root), str(store.size_limit_mb), ws_id],
                capture_output=True,
                text=True,
                timeout=900,
                cwd=Path(__file__).resolve().parent.parent,
            )
            if done.returncode != 0:
                raise RuntimeError(f"training the demo {ws_id!r} failed: {done.stderr[-2000:]}")
            ws = Workspace.from_json(done.stdout.strip().splitlines()[-1])
            store.save_workspace(ws)
            return ws
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


if __name__ == "__main__":  # python -m dashboard.demos ROOT SIZE_LIMIT_MB DEMO_ID: train, print the workspace
    print(_train(Store(sys.argv[1], size_limit_mb=int(sys.argv[2])), sys.argv[3]).to_json())
