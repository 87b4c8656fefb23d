"""Uploaded .skops models: an exact allow-list of types, validated trees, a bounded unpack.

Each attack builds a malicious file the way an attacker would (skops.io.dump of a doctored
object, or an edited archive), then goes through the dashboard's public entry points,
``model_untrusted_types`` (upload feedback, in the web worker) and ``load_model`` (the load
job). Side effects are observed with the marker pattern: a victim folder holding a file must
still exist after the load and a garbage collection. Anything that could spin or crash when
a crafted model predicts runs in a subprocess with a timeout, so a regression fails the test
instead of hanging or killing the suite.
"""

from __future__ import annotations

import gc
import io
import json
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.neighbors import KNeighborsRegressor
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
from sklearn.svm import SVC, SVR
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from dashboard.loading import LoadError, Policy, load_model, model_untrusted_types

ROOT = Path(__file__).resolve().parents[1]


# --- data, files and helpers -------------------------------------------------------------------
@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 200
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": pd.array(rng.choice(["x", "y", "z"], size=n), dtype="str"),
        }
    )
    y_num = 2 * X.a - X.b + (X.c == "x") + 0.1 * rng.normal(size=n)
    y_cls = np.where(X.a > 0.5, "hi", np.where(X.a > -0.5, "mid", "lo"))
    return X, y_num, y_cls


@pytest.fixture
def victim(tmp_path):
    """A folder with a file in it that no model load may touch."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "secret.key").write_text("keep me")
    return folder


def assert_victim_intact(folder: Path) -> None:
    gc.collect()
    assert folder.is_dir() and (folder / "secret.key").read_text() == "keep me", (
        "loading the model deleted or changed the victim folder"
    )


def dump(model, path: Path) -> Path:
    sio.dump(model, path)
    return path


def rewrite(src: Path, dst: Path, *, schema=None, members=None, raw_schema: bytes | None = None) -> Path:
    """Copy a skops archive, editing its schema (a function of the parsed JSON) or members."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            content = zin.read(item)
            if item.filename == "schema.json":
                if raw_schema is not None:
                    content = raw_schema
                elif schema is not None:
                    parsed = json.loads(content)
                    parsed = schema(parsed) or parsed
                    content = json.dumps(parsed).encode()
            elif members and item.filename in members:
                content = members[item.filename]
            zout.writestr(item, content)
    return dst


def refused(path, match, *, policy=None, both=True, accepted=()):
    """Both entry points refuse the file with a LoadError matching ``match``."""
    policy = policy or Policy()
    if both:
        with pytest.raises(LoadError, match=match) as info:
            model_untrusted_types(path, policy=policy, name="evil.skops")
        assert info.value.field == "model"
    with pytest.raises(LoadError, match=match) as info:
        load_model(path, name="evil.skops", policy=policy, accepted_types=accepted)
    assert info.value.field == "model" and "evil.skops" in str(info.value)
    return str(info.value)


def run_isolated(code: str, timeout: float = 90) -> str:
    """Run ``code`` in a fresh interpreter (the worktree's dashboard); its stdout. A crafted
    model that spins forever or crashes then fails the test instead of the suite."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            check=False,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the model did not finish within {timeout} s (an endless loop?)")
    assert done.returncode == 0, f"the subprocess died ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout


def _finaliser(cls_name: str, victim: Path):
    """A NumPy DataSource/Repository that removes ``victim`` when it is freed."""
    from numpy.lib import _datasource

    obj = getattr(_datasource, cls_name).__new__(getattr(_datasource, cls_name))
    obj._istmpdest, obj._destpath = True, str(victim)
    if cls_name == "Repository":
        obj._baseurl = "http://example.invalid"
    return obj


def _disarm(model) -> None:
    """The test's own copy of the finaliser object must not fire."""
    extra = getattr(model, "_cache", None)
    if hasattr(extra, "_istmpdest"):
        extra._istmpdest = False


def _temp_memmap():
    from sklearn.utils._testing import TempMemmap

    obj = TempMemmap.__new__(TempMemmap)  # __init__ would make a folder and an atexit hook
    obj.data, obj.mmap_mode = np.zeros(3), "r"
    return obj


def _scipy_object():
    from scipy.optimize import BFGS

    return BFGS()


def _npz_file(victim: Path):
    from numpy.lib._npyio_impl import NpzFile

    obj = NpzFile.__new__(NpzFile)  # a NumPy class with a finaliser (close())
    obj.zip = obj.fid = obj.f = None
    obj._files, obj.files, obj.allow_pickle = [], [], False
    return obj


# --- item 1: exact types, not packages --------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda v: _finaliser("DataSource", v),
        lambda v: _finaliser("Repository", v),
        _npz_file,
        lambda v: _temp_memmap(),
        lambda v: _scipy_object(),
    ],
    ids=["numpy-DataSource-rmtree", "numpy-Repository-rmtree", "numpy-NpzFile", "sklearn-TempMemmap", "scipy-BFGS"],
)
def test_side_effect_types_from_trusted_packages_are_refused(tmp_path, victim, data, make):
    """The audit's exploit and its relatives: a LinearRegression carrying an object of a
    NumPy/SciPy/scikit-learn class that is not on the allow-list is refused by name, in the
    upload feedback and in the load, and nothing of it is built (the victim folder survives
    even a finaliser that would rmtree it)."""
    X, y, _ = data
    model = LinearRegression().fit(X[["a", "b"]], y)
    model._cache = make(victim)
    type_name = f"{type(model._cache).__module__}.{type(model._cache).__name__}"  # as skops names it
    assert type_name.startswith(("numpy.", "scipy.", "sklearn."))
    path = dump(model, tmp_path / "evil.skops")
    _disarm(model)
    del model
    assert_victim_intact(victim)

    assert model_untrusted_types(path, name="evil.skops") == [type_name]
    message = refused(path, type_name, both=False)
    assert "--allow-user-types" in message
    with pytest.raises(LoadError, match=f"Tick the types you trust \\({type_name}\\)"):
        load_model(path, name="evil.skops", policy=Policy(allow_user_types=True))
    assert_victim_intact(victim)


def test_allowed_type_with_another_loader_is_refused(tmp_path, data, victim):
    """A type is allowed only with the loader that builds it safely: DictNode calls the named
    class, so a dict node claiming to be a LinearRegression (or DataSource) is refused."""
    X, y, _ = data
    path = dump(LinearRegression().fit(X[["a"]], y), tmp_path / "ok.skops")

    def as_dict_of(module, cls):
        def edit(schema):
            schema["content"]["__loader__"] = "DictNode"
            schema["content"]["__module__"], schema["content"]["__class__"] = module, cls

        return edit

    lr = rewrite(path, tmp_path / "lr.skops", schema=as_dict_of("sklearn.linear_model._base", "LinearRegression"))
    assert model_untrusted_types(lr) == ["sklearn.linear_model._base.LinearRegression"]
    ds = rewrite(path, tmp_path / "ds.skops", schema=as_dict_of("numpy.lib.npyio", "DataSource"))
    assert model_untrusted_types(ds) == ["numpy.lib.npyio.DataSource"]
    refused(ds, "numpy.lib.npyio.DataSource", both=False)
    assert_victim_intact(victim)


def test_functions_need_acceptance_even_numpy_ufuncs(tmp_path):
    """Functions are never accepted by package (chained NumPy functions can write files),
    including NumPy ufuncs, which skops itself trusts; numpy scalar types as values are."""
    from sklearn.preprocessing import FunctionTransformer

    for func, name in [(np.log1p, "numpy.log1p"), (np.savetxt, "numpy.savetxt")]:
        path = dump(make_pipeline(FunctionTransformer(func), LinearRegression()), tmp_path / f"{name}.skops")
        assert model_untrusted_types(path) == [name]
        refused(path, f"{name}.*--allow-user-types", both=False)


# --- item 1: what still loads -------------------------------------------------------------------
def _typical_models(data):
    X, y_num, y_cls = data
    Xn = X[["a", "b"]]
    Xnan = Xn.copy()
    Xnan.iloc[::7, 0] = np.nan
    Xcat = X.assign(c=X.c.astype("category"))
    onehot = ColumnTransformer(
        [("cat", OneHotEncoder(handle_unknown="ignore"), ["c"]), ("num", StandardScaler(), ["a", "b"])]
    )
    models = {
        "ColumnTransformer+OneHotEncoder+RF": (
            make_pipeline(onehot, RandomForestClassifier(10, random_state=0)),
            X,
            y_cls,
        ),
        "SimpleImputer+Ridge": (make_pipeline(SimpleImputer(), Ridge()), Xnan, y_num),
        "OrdinalEncoder+HGB": (
            make_pipeline(
                ColumnTransformer([("o", OrdinalEncoder(), ["c"])], remainder="passthrough"),
                HistGradientBoostingRegressor(max_iter=20),
            ),
            X,
            y_num,
        ),
        "HGB classifier categorical": (
            HistGradientBoostingClassifier(max_iter=20, categorical_features="from_dtype"),
            Xcat,
            y_cls,
        ),
        "HGB regressor NaN": (HistGradientBoostingRegressor(max_iter=20), Xnan, y_num),
        "RandomForestRegressor": (RandomForestRegressor(10, random_state=0), Xn, y_num),
        "ExtraTreesClassifier": (ExtraTreesClassifier(10, random_state=0), Xn, y_cls),
        "GradientBoostingClassifier": (GradientBoostingClassifier(n_estimators=10), Xn, y_cls),
        "GradientBoostingRegressor": (GradientBoostingRegressor(n_estimators=10), Xn, y_num),
        "DecisionTreeRegressor NaN": (DecisionTreeRegressor(), Xnan, y_num),
        "DecisionTreeClassifier": (DecisionTreeClassifier(max_depth=5), Xn, y_cls),
        "LogisticRegression": (make_pipeline(StandardScaler(), LogisticRegression()), Xn, y_cls),
        "SVR": (SVR(), Xn, y_num),
        "SVC": (SVC(C=2.0), Xn, y_cls),
        "MLPClassifier": (MLPClassifier(max_iter=30, random_state=0), Xn, y_cls),
        "MLPRegressor": (MLPRegressor(max_iter=30, random_state=0), Xn, y_num),
        "KNeighborsRegressor kd_tree": (KNeighborsRegressor(algorithm="kd_tree"), Xn, y_num),
    }
    try:
        from sklearn.preprocessing import TargetEncoder
    except ImportError:  # scikit-learn < 1.3
        pass
    else:
        models["TargetEncoder"] = (
            make_pipeline(ColumnTransformer([("t", TargetEncoder(), ["c"])], remainder="passthrough"), Ridge()),
            X,
            y_num,
        )
    return models


def test_demos_and_typical_pipelines_load_and_predict_without_acceptance(tmp_path, data):
    """Everything a typical upload holds is on the allow-list and passes the checks:
    predictions after loading are identical, and no type needs the user's acceptance."""
    import warnings

    from dashboard import demos

    cases = {name: (model.fit(X, y), X) for name, (model, X, y) in _typical_models(data).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ws_id, build in demos._BUILDERS.items():
            if ws_id in demos.BOOSTER_DEMOS:  # saved in their own formats: tests/test_boosters.py (isolated)
                continue
            demo = build()
            for name, model in demo.models.items():
                cases[f"{ws_id} {name}"] = (model, demo.data.drop(columns=demo.target))
    problems = []
    for name, (model, X) in cases.items():
        path = dump(model, tmp_path / f"{len(problems)}-{abs(hash(name))}.skops")
        try:
            assert model_untrusted_types(path, name=name) == []
            loaded = load_model(path, name=name)
        except (LoadError, AssertionError) as exc:
            problems.append(f"{name}: {exc}")
            continue
        method = "predict_proba" if hasattr(model, "predict_proba") and hasattr(model, "classes_") else "predict"
        got, expected = getattr(loaded, method)(X), getattr(model, method)(X)
        if np.issubdtype(np.asarray(expected).dtype, np.number):
            assert_allclose(got, expected, err_msg=name)
        else:
            assert_array_equal(got, expected, err_msg=name)
    assert problems == [], "\n".join(problems)


# --- item 2: tree structures --------------------------------------------------------------------
def _tampered_tree(model_tree, **fields):
    """Rewrite node fields of a fitted sklearn Tree in place (as a crafted file would)."""
    state = model_tree.__getstate__()
    nodes = state["nodes"].copy()
    for field, (index, value) in fields.items():
        nodes[field][index] = value
    state["nodes"] = nodes
    model_tree.__setstate__(state)


@pytest.fixture
def tree_data(data):
    X, y, _ = data
    return X[["a", "b"]], y


def _first_split(tree) -> int:
    return int(np.flatnonzero(tree.children_left != -1)[0])


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda t: _tampered_tree(t, feature=(0, 1_000_000)), "splits on feature 1000000"),
        (lambda t: _tampered_tree(t, threshold=(0, np.nan)), "NaN"),
        (lambda t: _tampered_tree(t, left_child=(0, 10**6)), "child index 1000000"),
        (lambda t: _tampered_tree(t, right_child=(0, -7)), "child index -7"),
    ],
    ids=["feature-1e6", "nan-threshold", "child-out-of-range", "child-negative"],
)
def test_tampered_decision_tree_is_refused(tmp_path, tree_data, edit, match):
    X, y = tree_data
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    edit(model.tree_)
    refused(dump(model, tmp_path / "evil.skops"), match, both=False)


def test_tree_inside_forest_and_pipeline_is_checked(tmp_path, data):
    """Trees are found wherever they are: in a forest, inside a Pipeline."""
    X, y, _ = data
    model = make_pipeline(
        ColumnTransformer([("o", OneHotEncoder(), ["c"])], remainder="passthrough"),
        RandomForestRegressor(5, max_depth=3, random_state=0),
    ).fit(X, y)
    _tampered_tree(model[-1].estimators_[3].tree_, feature=(0, 50))
    refused(dump(model, tmp_path / "evil.skops"), "splits on feature 50", both=False)


def test_forest_tree_reading_wider_input_than_checked_is_refused(tmp_path, tree_data):
    """A forest checks the input width once and calls its trees unchecked: a tree that
    believes in more features than the forest checks for is refused."""
    X, y = tree_data
    forest = RandomForestRegressor(3, max_depth=3, random_state=0).fit(X, y)
    tree = forest.estimators_[1]
    wide = DecisionTreeRegressor(max_depth=3, random_state=0).fit(np.c_[X, X, X], y)
    tree.tree_, tree.n_features_in_ = wide.tree_, 6
    refused(dump(forest, tmp_path / "evil.skops"), "passes 2 features to estimator 1, which expects 6", both=False)


def test_gradient_boosting_stage_width_is_checked(tmp_path, tree_data):
    """GradientBoosting's compiled predict writes column k of the raw predictions for each
    of estimators_.shape[1] trees: more trees per stage than columns would write out of
    bounds."""
    X, y = tree_data
    model = GradientBoostingRegressor(n_estimators=5, max_depth=2).fit(X, y)
    model.estimators_ = np.concatenate([model.estimators_] * 3, axis=1)
    refused(dump(model, tmp_path / "evil.skops"), "raw predictions of shape \\(2, 1\\) for 3 trees", both=False)


def test_cyclic_tree_is_refused_quickly(tmp_path, tree_data):
    """A tree whose root's children are itself would make predict spin forever: the load
    refuses it at once (in a subprocess, so a regression fails instead of hanging)."""
    X, y = tree_data
    model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    _tampered_tree(model.tree_, left_child=(0, 0), right_child=(0, 0))
    path = dump(model, tmp_path / "cycle.skops")
    X.to_csv(tmp_path / "X.csv", index=False)
    out = run_isolated(
        f"""
        import time, pandas as pd
        from dashboard.loading import LoadError, load_model, model_untrusted_types
        X = pd.read_csv({str(tmp_path / "X.csv")!r})
        start = time.perf_counter()
        assert model_untrusted_types({str(path)!r}) == []
        try:
            model = load_model({str(path)!r}, name="cycle.skops")
        except LoadError as exc:
            print("REFUSED", round(time.perf_counter() - start, 3), exc)
        else:
            model.predict(X)  # spins forever on a cyclic tree
            print("LOADED AND PREDICTED")
    """,
        timeout=60,
    )
    assert out.startswith("REFUSED"), out
    assert float(out.split()[1]) < 5 and "child index 0" in out


def test_cycle_deeper_in_the_tree_is_refused(tmp_path, tree_data):
    """Node counts per parent are right but a subtree loops back on itself."""
    X, y = tree_data
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    t = model.tree_
    left, right = t.children_left.copy(), t.children_right.copy()
    a = int(left[0])  # the root's left child, an internal node: make its subtree a loop
    b = int(left[a])
    # a -> b -> a: b's left child becomes a (a is then reached twice), dropping b's old child
    _tampered_tree(t, left_child=(b, a))
    assert left[b] != -1 and right[a] != -1
    refused(dump(model, tmp_path / "evil.skops"), "reached 2 times|cycle", both=False)


# --- item 2: histogram gradient boosting -----------------------------------------------------------
# Before the allow-list, the categorical preprocessing of HGB needed acceptance; accepting it
# lets these tests show what the old code did with the tampered trees.
USER_TYPES = Policy(allow_user_types=True)
HGB_TYPES = ("functools.partial", "sklearn.utils.validation.check_array")


@pytest.fixture
def hgb(data):
    X, y, _ = data
    Xcat = X.assign(c=X.c.astype("category"))
    y = y + 5 * (X.c == "y")  # so that the trees split on the categorical column
    return HistGradientBoostingRegressor(max_iter=5, categorical_features="from_dtype").fit(Xcat, y), Xcat


def _categorical_predictor(model):
    for stage in model._predictors:
        for pred in stage:
            nodes = pred.nodes
            if ((nodes["is_leaf"] == 0) & (nodes["is_categorical"] == 1)).any():
                return pred
    raise AssertionError("no categorical split")


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("feature_idx", 1_000_000, "splits on feature 1000000"),
        ("left", 0, "child index 0"),
        ("right", 4_000_000_000, "child index 4000000000"),
        ("num_threshold", np.nan, "NaN"),
        ("bitset_idx", 70_000, "categorical bitset 70000"),
    ],
    ids=["feature-1e6", "cycle-to-root", "child-out-of-range", "nan-threshold", "bitset-index"],
)
def test_tampered_hist_gradient_boosting_is_refused(tmp_path, hgb, field, value, match):
    model, _ = hgb
    pred = _categorical_predictor(model) if field == "bitset_idx" else model._predictors[0][0]
    nodes = pred.nodes
    split = np.flatnonzero(
        (nodes["is_leaf"] == 0)
        & ((nodes["is_categorical"] == 1) if field == "bitset_idx" else (nodes["is_categorical"] == 0))
    )[0]
    nodes[field][split] = value
    refused(dump(model, tmp_path / "evil.skops"), match, both=False, policy=USER_TYPES, accepted=HGB_TYPES)


def test_hist_gradient_boosting_checks_its_input_width(tmp_path, hgb):
    """Predictors also check, at each call, that the input is as wide as the features they
    split on (whatever preprocessing produced it)."""
    model, X = hgb
    loaded = load_model(dump(model, tmp_path / "ok.skops"), policy=USER_TYPES, accepted_types=HGB_TYPES)
    pred = loaded._predictors[0][0]
    assert type(pred).__name__ == "CheckedTreePredictor"
    known, f_idx = loaded._bin_mapper.make_known_categories_bitsets()
    with pytest.raises(ValueError, match="too narrow"):
        pred.predict(np.zeros((2, 0)), known, f_idx, 1)
    assert_allclose(loaded.predict(X), model.predict(X))


# --- item 2: other compiled structures ------------------------------------------------------------
def test_tampered_neighbour_tree_is_rebuilt_not_trusted(tmp_path, tree_data):
    """KDTree index arrays are read unchecked; they are rebuilt from the data on load, so a
    tampered index gives the genuine predictions (here in a subprocess: before this change
    it read out of bounds)."""
    X, y = tree_data
    model = KNeighborsRegressor(algorithm="kd_tree").fit(X, y)
    state = list(model._tree.__getstate__())
    state[1] = np.full_like(state[1], 10**9)  # idx_array
    model._tree.__setstate__(tuple(state))
    path = dump(model, tmp_path / "knn.skops")
    expected = KNeighborsRegressor(algorithm="kd_tree").fit(X, y).predict(X)
    np.save(tmp_path / "X.npy", X.to_numpy())
    out = run_isolated(f"""
        import numpy as np
        from dashboard.loading import load_model
        model = load_model({str(path)!r})
        np.save({str(tmp_path / "pred.npy")!r}, model.predict(np.load({str(tmp_path / "X.npy")!r})))
        print("OK")
    """)
    assert out.strip() == "OK"
    assert_allclose(np.load(tmp_path / "pred.npy"), expected)


def test_tampered_svm_is_refused(tmp_path, tree_data):
    """libsvm copies intercepts and probability coefficients by counts it derives from the
    number of classes: short arrays would be read past their end."""
    X, y = tree_data
    labels = np.digitize(y, [-1, 1])
    model = SVC(C=1.0).fit(X, labels)
    model._intercept_ = model._intercept_[:1]
    refused(dump(model, tmp_path / "svc.skops"), "1 intercepts for 3 classes", both=False)
    model = SVR().fit(X, y)
    model._dual_coef_ = model._dual_coef_[:, :3].copy()
    refused(dump(model, tmp_path / "svr.skops"), "dual coefficients of shape", both=False)


def test_vectorizer_reading_files_named_in_the_data_is_refused(tmp_path, data, victim):
    """CountVectorizer(input="filename") would open every value of its column as a path on
    the server (e.g. the secret key) and leak its content through the predictions."""
    X, y, _ = data
    docs = X.assign(doc=np.where(X.a > 0, "alpha beta", "gamma"))
    model = make_pipeline(ColumnTransformer([("t", CountVectorizer(), "doc")]), Ridge()).fit(docs, y)
    model[0].transformers_[0][1].input = "filename"
    refused(dump(model, tmp_path / "evil.skops"), "input='filename'", both=False)


# --- item 6: crafted schemas and archives never give another exception ----------------------------
def _central_directory_version(path: Path, version: int) -> None:
    """Set the "version needed to extract" of every central-directory entry (bytes 6-7)."""
    raw = bytearray(path.read_bytes())
    at = raw.find(b"PK\x01\x02")
    while at != -1:
        raw[at + 6 : at + 8] = struct.pack("<H", version)
        at = raw.find(b"PK\x01\x02", at + 4)
    path.write_bytes(bytes(raw))


def test_crafted_schemas_and_archives_give_load_errors(tmp_path, data):
    """Each crafted file (from the audit's fuzzing) is a LoadError from both entry points:
    non-text type fields (object, list), a member marked zip version 12.8, bad JSON, a schema
    that is not an object, unknown loaders and protocols, a non-integer __id__, a data file
    the archive lacks, nesting deep enough to exhaust recursion."""
    X, y, _ = data
    good = dump(LinearRegression().fit(X[["a", "b"]], y), tmp_path / "good.skops")

    def set_root(key, value):
        def edit(schema):
            schema["content"][key] = value

        return edit

    def nested(levels):  # JSON text: json.dumps itself cannot nest this deep
        node = '{"__class__": "list", "__module__": "builtins", "__loader__": "ListNode", "content": ['
        text = json.loads(zipfile.ZipFile(good).read("schema.json"))
        text["content"]["content"]["deep"] = "@DEEP@"
        return json.dumps(text).replace('"@DEEP@"', node * levels + "]}" * levels).encode()

    def missing_file(schema):
        schema["content"]["content"]["coef_"]["file"] = "nowhere.npy"

    cases = {
        "loader-object": {"schema": set_root("__loader__", {"not": "text"})},
        "loader-list": {"schema": set_root("__loader__", ["ObjectNode"])},
        # nodes skops never visits (extra keys) but a type scan must not trip over either
        "stray-loader-list": {
            "schema": lambda s: s.update(extra={"__loader__": ["x"], "__module__": "m", "__class__": "c"})
        },
        "stray-loader-object": {
            "schema": lambda s: s["content"].update(extra={"__loader__": {"a": 1}, "__module__": "m", "__class__": "c"})
        },
        "module-list": {"schema": set_root("__module__", ["sklearn"])},
        "class-number": {"schema": set_root("__class__", 12)},
        "unknown-loader": {"schema": set_root("__loader__", "EvalNode")},
        "id-list": {"schema": set_root("__id__", [1])},
        "protocol-0": {"schema": lambda s: s.update(protocol=0)},
        "protocol-text": {"schema": lambda s: s.update(protocol="2")},
        "missing-file": {"schema": missing_file},
        "nesting-300": {"raw_schema": nested(300)},
        "nesting-20000": {"raw_schema": nested(20_000)},
        "bad-json": {"raw_schema": b'{"__class__": "LinearRegression", '},
        "schema-list": {"raw_schema": b"[1, 2, 3]"},
    }
    paths = {name: rewrite(good, tmp_path / f"{name}.skops", **edit) for name, edit in cases.items()}
    paths["zip-version-12.8"] = tmp_path / "v128.skops"
    paths["zip-version-12.8"].write_bytes(good.read_bytes())
    _central_directory_version(paths["zip-version-12.8"], 128)
    problems = []
    for name, path in paths.items():
        try:
            refused(path, "not a valid .skops file|protocol")
        except (Exception, pytest.fail.Exception) as exc:  # noqa: BLE001 -- any failure is listed
            problems.append(f"{name}: {type(exc).__name__}: {str(exc)[:120]}")
    assert problems == [], "\n".join(problems)


def test_compressions_that_can_explode_are_refused(tmp_path, data):
    """bzip2/LZMA members can expand kilobytes into gigabytes in one decompression step."""
    X, y, _ = data
    path = tmp_path / "lzma.skops"
    sio.dump(LinearRegression().fit(X[["a"]], y), path, compression=zipfile.ZIP_LZMA)
    refused(path, "compression")
    deflated = tmp_path / "deflated.skops"
    sio.dump(LinearRegression().fit(X[["a"]], y), deflated, compression=zipfile.ZIP_DEFLATED)
    assert load_model(deflated).coef_.shape == (1,)


# --- the unpack limit ---------------------------------------------------------------------------
SMALL = Policy(max_bytes=1 << 20)  # a 1 MiB upload limit


def _with_member(src: Path, dst: Path, name: str, payload: bytes) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            zout.writestr(item, zin.read(item))
        zout.writestr(name, payload, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return dst


def test_zip_bomb_declared_size_is_refused_before_unpacking(tmp_path, data, monkeypatch):
    """A 6 KiB file that unpacks to 6 MiB, within 10 x the upload limit (the old rule) but
    over the limit itself, is refused from the declared sizes, before any decompression."""
    X, y, _ = data
    good = dump(LinearRegression().fit(X[["a"]], y), tmp_path / "good.skops")
    bomb = _with_member(good, tmp_path / "bomb.skops", "padding.bin", bytes(6 << 20))
    assert bomb.stat().st_size < 20_000
    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(
        zipfile.ZipFile,
        "open",
        lambda self, name, *a, **k: opened.append(getattr(name, "filename", name)) or real_open(self, name, *a, **k),
    )
    message = refused(bomb, "unpacks to 6 MB.*1 MB", policy=SMALL)
    assert "padding.bin" not in opened and "the upload limit" in message


def test_zip_bomb_with_lying_sizes_is_refused(tmp_path, data):
    """Declared sizes can lie: a member claiming 100 bytes that inflates to 6 MiB is caught
    while streaming (and never inflated past its claim)."""
    X, y, _ = data
    good = dump(LinearRegression().fit(X[["a"]], y), tmp_path / "good.skops")
    bomb = _with_member(good, tmp_path / "liar.skops", "padding.bin", bytes(6 << 20))
    raw = bytearray(bomb.read_bytes())
    at = raw.rfind(b"PK\x01\x02")  # the last central-directory entry: padding.bin
    assert raw[at + 46 : at + 46 + 11] == b"padding.bin"
    raw[at + 24 : at + 28] = struct.pack("<I", 100)  # uncompressed size
    bomb.write_bytes(bytes(raw))
    refused(bomb, "not a valid .skops file", policy=SMALL)


def test_member_read_by_many_nodes_counts_each_time(tmp_path, data):
    """skops reads an array member once per node that names it: 40 nodes naming one 400 KiB
    array make the loader hold 16 MiB from a 400 KiB file."""
    X, y, _ = data
    model = LinearRegression().fit(X[["a"]], y)
    model.big_ = np.zeros(50_000)
    good = dump(model, tmp_path / "good.skops")

    def repeat(schema):
        attrs = schema["content"]["content"]
        for i in range(40):
            attrs[f"copy{i}"] = dict(attrs["big_"], __id__=10**6 + i)

    evil = rewrite(good, tmp_path / "many.skops", schema=repeat)
    refused(evil, "read 16 MB.*named several times", policy=SMALL)


def test_sparse_matrix_member_counts_its_inner_arrays(tmp_path, data):
    """A SciPy sparse matrix is stored as an .npz (a zip) inside the archive: its own
    compressed arrays count towards the limit too."""
    import scipy.sparse as sp

    X, y, _ = data
    model = LinearRegression().fit(X[["a"]], y)
    model.extra_ = sp.csr_matrix(np.ones((1, 1)))
    good = dump(model, tmp_path / "good.skops")
    member = next(n for n in zipfile.ZipFile(good).namelist() if n.endswith(".npz"))
    big = sp.csr_matrix(
        (np.zeros(1_000_000), np.zeros(1_000_000, dtype=np.int32), np.r_[0, 1_000_000].astype(np.int32)), shape=(1, 1)
    )
    buffer = io.BytesIO()
    sp.save_npz(buffer, big, compressed=True)
    assert len(buffer.getvalue()) < 100_000
    evil = rewrite(good, tmp_path / "npz.skops", members={member: buffer.getvalue()})
    refused(evil, "unpacks to more than", policy=SMALL)


def test_npy_header_declaring_more_than_it_holds_is_refused(tmp_path, data):
    """numpy allocates the size an .npy header declares before reading: a header declaring
    10^12 elements over 8 bytes of data is refused."""
    X, y, _ = data
    good = dump(LinearRegression().fit(X[["a"]], y), tmp_path / "good.skops")
    names = zipfile.ZipFile(good).namelist()
    member = next(n for n in names if n.endswith(".npy"))
    header = io.BytesIO()
    from numpy.lib import format as npformat

    npformat.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    evil = rewrite(good, tmp_path / "npy.skops", members={member: header.getvalue() + bytes(8)})
    refused(evil, "declares an array of 8000000000000 bytes")
