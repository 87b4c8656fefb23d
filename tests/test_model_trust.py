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
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.neighbors import KNeighborsRegressor
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
from sklearn.svm import SVC, SVR
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from dashboard.loaders import LoadError, Policy, load_model, model_untrusted_types

ROOT = Path(__file__).resolve().parents[1]


# --- data, files and helpers -------------------------------------------------------------------
@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 200
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                      "c": pd.array(rng.choice(["x", "y", "z"], size=n), dtype="str")})
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
    assert folder.is_dir() and (folder / "secret.key").read_text() == "keep me", \
        "loading the model deleted or changed the victim folder"


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
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, check=False,
                              text=True, timeout=timeout, cwd=ROOT,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
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
@pytest.mark.parametrize("make", [
    lambda v: _finaliser("DataSource", v),
    lambda v: _finaliser("Repository", v),
    _npz_file,
    lambda v: _temp_memmap(),
    lambda v: _scipy_object(),
], ids=["numpy-DataSource-rmtree", "numpy-Repository-rmtree", "numpy-NpzFile", "sklearn-TempMemmap",
        "scipy-BFGS"])
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
    onehot = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["c"]),
                                ("num", StandardScaler(), ["a", "b"])])
    models = {
        "ColumnTransformer+OneHotEncoder+RF": (make_pipeline(onehot, RandomForestClassifier(10, random_state=0)), X, y_cls),
        "SimpleImputer+Ridge": (make_pipeline(SimpleImputer(), Ridge()), Xnan, y_num),
        "OrdinalEncoder+HGB": (make_pipeline(ColumnTransformer([("o", OrdinalEncoder(), ["c"])], remainder="passthrough"),
                                             HistGradientBoostingRegressor(max_iter=20)), X, y_num),
        "HGB classifier categorical": (HistGradientBoostingClassifier(max_iter=20, categorical_features="from_dtype"), Xcat, y_cls),
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
        models["TargetEncoder"] = (make_pipeline(ColumnTransformer([("t", TargetEncoder(), ["c"])],
                                                                   remainder="passthrough"), Ridge()), X, y_num)
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
            frame, target, *_, models = build()
            for name, model in models.items():
                cases[f"{ws_id} {name}"] = (model, frame.drop(columns=target))
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


# --- item 6: crafted schemas and archives never give another exception ----------------------------
def _central_directory_version(path: Path, version: int) -> None:
    """Set the "version needed to extract" of every central-directory entry (bytes 6-7)."""
    raw = bytearray(path.read_bytes())
    at = raw.find(b"PK\x01\x02")
    while at != -1:
        raw[at + 6:at + 8] = struct.pack("<H", version)
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
        "stray-loader-list": {"schema": lambda s: s.update(extra={"__loader__": ["x"], "__module__": "m",
                                                                  "__class__": "c"})},
        "stray-loader-object": {"schema": lambda s: s["content"].update(
            extra={"__loader__": {"a": 1}, "__module__": "m", "__class__": "c"})},
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
