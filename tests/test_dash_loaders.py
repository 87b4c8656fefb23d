"""dashboard.loading: untrusted uploads are parsed, never executed; errors name the file and field."""

from __future__ import annotations

import pickle
import sys
import textwrap
import uuid
import zipfile

import joblib
import numpy as np
import pandas as pd
import pytest
import sklearn
import skops.io as sio
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

import compute
from dashboard.loading import (
    LoadError,
    OnnxModel,
    Policy,
    check_model_data,
    infer_task,
    load_model,
    load_warnings,
    model_untrusted_types,
    model_versions,
    read_data,
)

skl2onnx = pytest.importorskip("skl2onnx")
pytest.importorskip("onnxruntime")


# --- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def frame():
    """Two numeric inputs, one text input, a numeric and a three-class text target."""
    rng = np.random.default_rng(0)
    n = 120
    a, b = rng.normal(size=n), rng.normal(size=n)
    c = rng.choice(["x", "y", "z"], size=n)
    return pd.DataFrame(
        {
            "a": a,
            "b": b,
            "c": pd.array(c, dtype="str"),
            "y_num": 2 * a - b + (c == "x") + 0.1 * rng.normal(size=n),
            "label": pd.array(np.where(a > 0.5, "hi", np.where(a > -0.5, "mid", "lo")), dtype="str"),
        }
    )


@pytest.fixture(scope="session")
def forest(frame):
    pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["c"])], remainder="passthrough")
    model = make_pipeline(pre, RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0))
    return model.fit(frame[["a", "b", "c"]], frame["label"])


@pytest.fixture(scope="session")
def regressor(frame):
    pre = ColumnTransformer([("num", StandardScaler(), ["a", "b"])])
    return make_pipeline(pre, LinearRegression()).fit(frame[["a", "b"]], frame["y_num"])


@pytest.fixture(scope="session")
def files(tmp_path_factory, frame, forest, regressor):
    """Model and data files written once: skops, ONNX (three flavours), CSV."""
    folder = tmp_path_factory.mktemp("uploads")
    X = frame[["a", "b", "c"]]
    sio.dump(forest, folder / "forest.skops")
    onnx_zipmap = skl2onnx.to_onnx(forest, X.iloc[:1])
    onnx_plain = skl2onnx.to_onnx(forest, X.iloc[:1], options={RandomForestClassifier: {"zipmap": False}})
    onnx_reg = skl2onnx.to_onnx(regressor, frame[["a", "b"]].iloc[:1])
    for fname, proto in [("zipmap.onnx", onnx_zipmap), ("plain.onnx", onnx_plain), ("reg.onnx", onnx_reg)]:
        (folder / fname).write_bytes(proto.SerializeToString())
    frame.to_csv(folder / "data.csv", index=False)
    return folder


@pytest.fixture
def helper_module(tmp_path, monkeypatch):
    """A user module (not sklearn) defining a function and an estimator class."""
    name = f"user_helpers_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent("""
        import numpy as np
        from sklearn.base import BaseEstimator, RegressorMixin

        def double(X):
            return X * 2

        class Constant(RegressorMixin, BaseEstimator):
            def fit(self, X, y):
                self.value_ = float(np.mean(y))
                return self

            def predict(self, X):
                return np.full(len(X), self.value_)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    yield module
    sys.modules.pop(name, None)


def write(tmp_path, fname, content) -> str:
    path = tmp_path / fname
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


# --- LoadError -----------------------------------------------------------------------------
def test_load_error_keeps_field_and_pickles():
    """LoadError is an InputError with a field, and survives pickling (background jobs)."""
    err = LoadError("bad", field="target")
    assert isinstance(err, compute.InputError) and err.field == "target"
    again = pickle.loads(pickle.dumps(err))
    assert again.field == "target" and str(again) == "bad"
    with pytest.raises(ValueError, match="field"):
        LoadError("bad", field="nonsense")


# --- skops ---------------------------------------------------------------------------------
def test_skops_forest_pipeline_loads_and_predicts(files, frame, forest):
    """The Tree type skops flags is accepted by the sklearn prefix; predictions are unchanged."""
    path = files / "forest.skops"
    assert "sklearn.tree._tree.Tree" in sio.get_untrusted_types(file=str(path))
    assert model_untrusted_types(path) == []
    model = load_model(path, name="forest.skops")
    X = frame[["a", "b", "c"]]
    assert_allclose(model.predict_proba(X), forest.predict_proba(X))
    assert load_warnings(model) == []
    assert model_versions(path)["scikit-learn"] == sklearn.__version__
    assert infer_task(model) == "classification"


def test_skops_user_function_is_refused_and_named(tmp_path, frame, helper_module):
    """A FunctionTransformer calling a user function is refused; the message names it."""
    model = make_pipeline(FunctionTransformer(helper_module.double), LinearRegression())
    model.fit(frame[["a", "b"]], frame["y_num"])
    path = tmp_path / "user.skops"
    sio.dump(model, path)
    type_name = f"{helper_module.__name__}.double"
    assert model_untrusted_types(path) == [type_name]
    with pytest.raises(LoadError, match=f"{type_name}.*--allow-user-types") as info:
        load_model(path, name="user.skops", accepted_types=[type_name])
    assert info.value.field == "model" and "user.skops" in str(info.value)
    policy = Policy(allow_user_types=True)
    with pytest.raises(LoadError, match=f"Tick the types you trust \\({type_name}\\)"):
        load_model(path, name="user.skops", policy=policy)
    loaded = load_model(path, name="user.skops", policy=policy, accepted_types=[type_name])
    assert_allclose(loaded.predict(frame[["a", "b"]]), model.predict(frame[["a", "b"]]))


def test_skops_user_estimator_class_is_refused(tmp_path, frame, helper_module):
    """A custom estimator class from a user module is refused by name."""
    path = tmp_path / "custom.skops"
    sio.dump(helper_module.Constant().fit(frame[["a"]], frame["y_num"]), path)
    with pytest.raises(LoadError, match=f"{helper_module.__name__}.Constant"):
        load_model(path, name="custom.skops")


def test_skops_numpy_function_is_not_trusted_by_prefix_but_numpy_types_are(tmp_path, frame):
    """Functions under numpy.* need acceptance; np.number as a column-selector value does not."""
    fn = make_pipeline(FunctionTransformer(np.nan_to_num), LinearRegression()).fit(frame[["a"]], frame["y_num"])
    sio.dump(fn, tmp_path / "fn.skops")
    assert model_untrusted_types(tmp_path / "fn.skops") == ["numpy.nan_to_num"]
    sel = ColumnTransformer([("num", StandardScaler(), make_column_selector(dtype_include=np.number))])
    sel = make_pipeline(sel, LinearRegression()).fit(frame[["a", "b"]], frame["y_num"])
    sio.dump(sel, tmp_path / "sel.skops")
    assert model_untrusted_types(tmp_path / "sel.skops") == []
    assert_allclose(load_model(tmp_path / "sel.skops").predict(frame[["a", "b"]]), sel.predict(frame[["a", "b"]]))


def test_skops_other_sklearn_version_warns(tmp_path, files, frame):
    """A file recording another scikit-learn version loads, with a warning naming both versions."""
    source, path = files / "forest.skops", tmp_path / "old.skops"
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(path, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item)
            if item.filename == "schema.json":
                data = data.replace(f'\\"{sklearn.__version__}\\"'.encode(), b'\\"1.5.2\\"')
            zout.writestr(item, data)
    assert model_versions(path)["scikit-learn"] == "1.5.2"
    model = load_model(path, name="old.skops")
    assert load_warnings(model) == [
        f"old.skops was saved with scikit-learn 1.5.2; this server runs {sklearn.__version__}: "
        "predictions may differ or fail."
    ]
    assert model.predict(frame[["a", "b", "c"]]).shape == (len(frame),)


@pytest.mark.parametrize("content", [b"not a zip", b"PK\x03\x04garbage", "zip-without-schema"])
def test_invalid_skops_file(tmp_path, content):
    """A file that is not a skops archive is named and refused."""
    path = tmp_path / "upload.bin"
    if content == "zip-without-schema":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("other.txt", "x")
    else:
        path.write_bytes(content)
    with pytest.raises(LoadError, match="model.skops is not a valid .skops file"):
        load_model(path, name="model.skops")


# --- pickle / joblib -----------------------------------------------------------------------
class _WritesMarker:
    """Unpickling this object opens (creates) the marker file: code execution on load."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("fname, dump", [("evil.pkl", pickle.dump), ("evil.joblib", joblib.dump)])
def test_pickle_and_joblib_are_refused_unopened(tmp_path, monkeypatch, fname, dump):
    """Without --allow-pickle the file is never unpickled: the marker never appears."""
    marker = tmp_path / "marker.txt"
    path = tmp_path / fname
    if dump is pickle.dump:
        with open(path, "wb") as fh:
            pickle.dump(_WritesMarker(str(marker)), fh)
    else:
        joblib.dump(_WritesMarker(str(marker)), path)
    assert not marker.exists()
    monkeypatch.setattr(joblib, "load", lambda *a, **k: pytest.fail("joblib.load was called"))
    with pytest.raises(LoadError, match="execut.*skops.io.dump.*ONNX.*--allow-pickle") as info:
        load_model(path, name=fname)
    assert info.value.field == "model" and fname in str(info.value)
    assert not marker.exists()


def test_allow_pickle_loads_joblib_model(tmp_path, frame, regressor):
    """With the operator's --allow-pickle a normal joblib model loads."""
    joblib.dump(regressor, tmp_path / "lm.joblib")
    model = load_model(tmp_path / "lm.joblib", policy=Policy(allow_pickle=True))
    assert_allclose(model.predict(frame[["a", "b"]]), regressor.predict(frame[["a", "b"]]))
    assert model_versions(tmp_path / "lm.joblib") == {}


def test_unknown_model_suffix_and_non_model(tmp_path):
    """Unsupported suffixes list the supported ones; objects without predict are refused."""
    with pytest.raises(LoadError, match=r"\.skops, \.onnx, \.json, \.ubj, \.txt, \.cbm, \.pkl"):
        load_model(write(tmp_path, "model.h5", b"xx"), name="model.h5")
    sio.dump({"not": "a model"}, tmp_path / "dict.skops")
    with pytest.raises(LoadError, match="dict.skops holds a dict, which has neither predict"):
        load_model(tmp_path / "dict.skops", name="dict.skops")


# --- ONNX ----------------------------------------------------------------------------------
def test_onnx_regressor_matches_sklearn(files, frame, regressor):
    """Per-column inputs: feature names, float64 predictions equal to sklearn's (float32 tolerance)."""
    model = load_model(files / "reg.onnx", name="reg.onnx")
    assert isinstance(model, OnnxModel) and model._estimator_type == "regressor"
    assert list(model.feature_names_in_) == ["a", "b"]
    assert not hasattr(model, "predict_proba") and not hasattr(model, "classes_")
    pred = model.predict(frame[["a", "b"]])
    assert pred.dtype == np.float64 and pred.shape == (len(frame),)
    assert_allclose(pred, regressor.predict(frame[["a", "b"]]), rtol=1e-4, atol=1e-4)
    assert infer_task(model) == "regression"
    versions = model_versions(files / "reg.onnx")
    assert versions["skl2onnx"] == skl2onnx.__version__


@pytest.mark.parametrize("fname", ["zipmap.onnx", "plain.onnx"])
def test_onnx_classifier_matches_sklearn(files, frame, forest, fname):
    """ZipMap (list of dicts) and plain-tensor probabilities both give sklearn's classes and probabilities."""
    model = load_model(files / fname, name=fname)
    X = frame[["a", "b", "c"]]
    assert_array_equal(model.classes_.astype(str), forest.classes_.astype(str))
    proba = model.predict_proba(X)
    assert proba.shape == (len(X), 3) and proba.dtype == np.float64
    assert_allclose(proba, forest.predict_proba(X), atol=1e-5)
    assert_array_equal(model.predict(X), forest.predict(X))
    X_checked, y = check_model_data(model, frame, "label", name=fname)
    assert list(X_checked.columns) == ["a", "b", "c"]
    res = compute.permutation_importance(model, X_checked, y, n_repeats=2, random_state=0)
    assert res.features == ["a", "b", "c"] and np.isfinite(res.importance).all()


def test_onnx_zipmap_classes_without_onnx_package(files, frame, forest):
    """Without the graph (no onnx package), ZipMap classes come from a dummy row's keys."""
    model = load_model(files / "zipmap.onnx")
    bare = OnnxModel(model._session, name="zipmap.onnx")
    assert_array_equal(bare.classes_.astype(str), forest.classes_.astype(str))


def test_onnx_plain_probabilities_need_known_classes(files):
    """Plain probability columns without class labels in the graph are refused with a fix."""
    model = load_model(files / "plain.onnx")
    bare = OnnxModel(model._session, name="plain.onnx")
    with pytest.raises(compute.ModelError, match="plain.onnx does not say which class.*zipmap"):
        _ = bare.classes_


def test_onnx_external_data_cannot_read_neighbouring_files(tmp_path):
    """Tensors stored as external data are not read from files next to the upload."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    (tmp_path / "other_user.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    weight = numpy_helper.from_array(np.zeros(4, dtype=np.float32), "W")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in {"location": "other_user.bin", "offset": "0", "length": "16"}.items():
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "W"], ["Y"])],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 4])],
        initializer=[weight],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (tmp_path / "ext.onnx").write_bytes(proto.SerializeToString())
    with pytest.raises(LoadError, match="ext.onnx keeps tensors in separate external-data files") as info:
        load_model(tmp_path / "ext.onnx", name="ext.onnx")
    assert str(tmp_path) not in str(info.value)


def test_onnx_single_tensor_input(tmp_path, frame):
    """A [None, p] input takes the p non-target columns in file order, with a note; a count mismatch is refused."""
    arr = frame[["a", "b"]].to_numpy(np.float32)
    fitted = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(arr, frame["y_num"])
    (tmp_path / "t.onnx").write_bytes(skl2onnx.to_onnx(fitted, arr[:1]).SerializeToString())
    model = load_model(tmp_path / "t.onnx", name="t.onnx")
    assert model.n_features_in_ == 2 and getattr(model, "feature_names_in_", None) is None
    data = frame[["a", "b", "y_num"]]
    X, y = check_model_data(model, data, "y_num", name="t.onnx")
    assert list(X.columns) == ["a", "b"] and "file order" in X.attrs["notes"][0]
    assert_allclose(model.predict(X.to_numpy()), fitted.predict(arr), rtol=1e-5)
    with pytest.raises(LoadError, match="has 3 input column\\(s\\) but t.onnx expects 2") as info:
        check_model_data(model, frame[["a", "b", "c", "y_num"]], "y_num", name="t.onnx")
    assert info.value.field == "data"


def test_onnx_runtime_error_is_model_error(files, frame):
    """An ONNX Runtime failure becomes a short ModelError naming the file."""
    model = load_model(files / "reg.onnx", name="reg.onnx")
    bad = frame[["a", "b"]].assign(a="text")
    with pytest.raises(compute.ModelError, match="reg.onnx could not predict") as info:
        model.predict(bad)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_invalid_onnx_file(tmp_path):
    """Random bytes are not an ONNX model; the message names the user's file, not the path."""
    with pytest.raises(LoadError, match="model.onnx is not a valid ONNX model") as info:
        load_model(write(tmp_path, "x.onnx", b"\x08\x07garbage" * 10), name="model.onnx")
    assert str(tmp_path) not in str(info.value)


# --- data ----------------------------------------------------------------------------------
BAD_DATA = [
    (b"", {}, "data.csv is empty"),
    (b"PK\x03\x04" + b"\x00" * 100, {}, "looks like an Excel workbook.*CSV \\(UTF-8\\)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, {}, "old Excel"),
    (b"a,b\n1,\x002\n", {}, "binary file"),
    ("a,name\n1,Jos\u00e9\n".encode("latin-1"), {}, "not UTF-8 text: byte 12 \\(0xe9, line 2\\).*UTF-8"),
    (b"a,b\n1,2\n3,4,5\n", {}, "line 3 has 3 fields but the header has 2"),
    (b"a,b,a\n1,2,3\n", {}, "duplicated column names \\['a'\\]"),
    (b"a,,c\n1,2,3\n", {}, "column\\(s\\) \\[2\\] have no name"),
    (b",a\n0,1\n1,2\n", {}, "index=False"),
    (b"a,b,c\n1,2,3\n", {"max_columns": 2}, "has 3 columns; this server accepts at most 2"),
    (b"a,b\n" + b"1,2\n" * 100, {"max_bytes": 100}, "MB; this server accepts files up to"),
    (b"a,b\n" + b"1,2\n" * 6, {"max_rows": 5}, "more than 5 rows"),
    (b"a,b\n", {}, "has a header but no data rows"),
    (b"\n\n", {}, "has no header line"),
]


@pytest.mark.parametrize("content, policy, match", BAD_DATA)
def test_bad_data_files(tmp_path, content, policy, match):
    """Each broken upload gets a LoadError on the data field naming the file."""
    path = write(tmp_path, "upload-1234", content)
    with pytest.raises(LoadError, match=match) as info:
        read_data(path, name="data.csv", policy=Policy(**policy))
    assert info.value.field == "data" and "data.csv" in str(info.value)
    assert str(tmp_path) not in str(info.value)


def test_csv_reads_utf8_with_bom(tmp_path):
    """A BOM is accepted, text is pandas' str dtype and the frame carries the file name."""
    path = write(tmp_path, "d.csv", "\ufeffcity,n\nS\u00e3o Paulo,1\nOslo,2\n".encode("utf-8"))
    data = read_data(path, name="cities.csv")
    assert list(data.columns) == ["city", "n"] and data["city"].iloc[0] == "S\u00e3o Paulo"
    assert pd.api.types.is_string_dtype(data["city"]) and data.attrs["name"] == "cities.csv"


def test_parquet_round_trip_and_invalid(tmp_path, frame):
    """Parquet keeps values and dtypes; a broken file or too many rows is refused."""
    frame.to_parquet(tmp_path / "d.parquet")
    data = read_data(tmp_path / "d.parquet", name="d.parquet")
    pd.testing.assert_frame_equal(data, frame)
    with pytest.raises(LoadError, match="d.parquet has 120 rows; this server accepts at most 10"):
        read_data(tmp_path / "d.parquet", name="d.parquet", policy=Policy(max_rows=10))
    with pytest.raises(LoadError, match="bad.pq is not a valid Parquet file"):
        read_data(write(tmp_path, "bad.pq", b"PAR1 nope"), name="bad.pq")


# --- model and data together ---------------------------------------------------------------
@pytest.fixture(scope="session")
def data(files):
    return read_data(files / "data.csv", name="data.csv")


def test_check_model_data_returns_inputs_and_labels(forest, data):
    """X holds the model's columns in its order (extra columns ignored); y keeps the classes' dtype."""
    X, y = check_model_data(forest, data, "label", name="forest.skops")
    assert list(X.columns) == ["a", "b", "c"] and len(y) == len(data)
    assert set(y) <= set(forest.classes_)


def test_integer_labels_match_across_dtypes(tmp_path, frame):
    """Labels read as text or floats still match a classifier's integer classes."""
    yi = (frame["a"] > 0).astype(np.int64)
    model = LogisticRegression().fit(frame[["a", "b"]], yi)
    for column in (yi.astype(str), yi.astype(float)):
        X, y = check_model_data(model, frame[["a", "b"]].assign(t=column), "t", name="lr.skops")
        assert y.dtype == np.int64 and (y.to_numpy() == yi.to_numpy()).all()


CHECKS = [
    (
        lambda d: d.drop(columns=["c"]),
        "label",
        "data",
        "data.csv lacks 1 column\\(s\\) that forest.skops was fitted on: \\['c'\\]",
    ),
    (
        lambda d: d.assign(label=d["label"].where(d.index > 0)),
        "label",
        "target",
        "'label' of data.csv has 1 missing value\\(s\\) \\(first at position 0\\)",
    ),
    (
        lambda d: d.assign(label="maybe"),
        "label",
        "target",
        "'label' of data.csv contains labels forest.skops does not know: \\['maybe'\\]",
    ),
    (lambda d: d.assign(label="hi"), "label", "target", "single class \\('hi'\\)"),
    (lambda d: d, "lable", "target", "'lable' is not in data.csv. Did you mean 'label'"),
    (lambda d: d.iloc[:1], "label", "data", "at least 2"),
    (lambda d: d, "a", "target", "'a' is an input column of forest.skops"),
]


def test_missing_values_are_refused_only_when_the_model_cannot_predict_them(frame, data):
    """Issue 12: missing input values pass when the model predicts the rows holding them (an
    imputer in the pipeline, a forest that takes NaN); a model that cannot is refused with its
    own message, naming the column and the rows."""
    from sklearn.impute import SimpleImputer

    gaps = data.assign(a=data["a"].where(data.index > 2))
    strict = make_pipeline(
        ColumnTransformer([("cat", OneHotEncoder(), ["c"])], remainder="passthrough"), LogisticRegression()
    ).fit(frame[["a", "b", "c"]], frame["label"])
    with pytest.raises(LoadError) as info:
        check_model_data(strict, gaps, "label", name="lr.skops")
    assert info.value.field == "data"
    message = str(info.value)
    assert "lr.skops cannot predict the rows of data.csv where 'a' is missing (3 rows, first: 0, 1, 2)" in message
    assert "NaN" in message and "imputer" in message
    imputing = make_pipeline(
        ColumnTransformer([("num", SimpleImputer(), ["a", "b"]), ("cat", OneHotEncoder(), ["c"])]),
        LogisticRegression(),
    ).fit(frame[["a", "b", "c"]], frame["label"])
    for model in (
        imputing,
        RandomForestClassifier(n_estimators=5, random_state=0).fit(frame[["a", "b"]], frame["label"]),
    ):
        X, _ = check_model_data(model, gaps, "label", name="model.skops")
        assert X["a"].isna().sum() == 3
        assert any("missing values in 1 input column(s): 'a' (3 rows)" in n for n in X.attrs["notes"])


@pytest.mark.parametrize("edit, target, field, match", CHECKS)
def test_check_model_data_errors(forest, data, edit, target, field, match):
    """Each mismatch between model, data and target is named, on the right field."""
    with pytest.raises(LoadError, match=match) as info:
        check_model_data(forest, edit(data), target, name="forest.skops")
    assert info.value.field == field


def test_regressor_with_text_target(regressor, data):
    """A regressor's target must be numeric; text looks like a class label."""
    with pytest.raises(LoadError, match="regressor.*'label'.*looks like a class label") as info:
        check_model_data(regressor, data, "label", name="lm.skops")
    assert info.value.field == "target"


def test_predict_failure_is_shortened_and_names_files(data):
    """The model's own error, first line only, prefixed with the model and data names."""

    class Fails:
        def predict(self, X):
            raise ValueError("could not convert string to float: 'x'\n" + "trace line\n" * 50)

    with pytest.raises(LoadError) as info:
        check_model_data(Fails(), data, "y_num", name="broken.skops")
    assert str(info.value) == (
        "broken.skops on data.csv: The model's predict failed on 5 rows: "
        "ValueError: could not convert string to float: 'x'"
    )
    assert info.value.field == "model"


def test_wrong_output_shape(data):
    """A model returning one value per call is refused with the shapes."""

    class Scalar:
        def predict(self, X):
            return np.zeros(1)

    with pytest.raises(LoadError, match="returned an array of shape \\(1,\\) for 5 rows.*expected \\(5,\\)"):
        check_model_data(Scalar(), data, "y_num", name="odd.skops")


# --- the Load check runs compute's own rules (issue 16) -------------------------------------------
@pytest.mark.parametrize(
    "edit, target, kwargs, field",
    [
        (lambda d: d.drop(columns=["c"]), "label", {}, "data"),
        (lambda d: d.assign(label="maybe"), "label", {}, "target"),
        (lambda d: d, "label", {"output": "nope"}, "output"),
        (lambda d: d, "label", {"loss": "squared_error"}, "loss"),
    ],
)
def test_load_check_says_what_the_library_says(forest, data, edit, target, kwargs, field):
    """Columns, labels, the output class and the loss: the page's message is the library's,
    with the file names in place of the parameter names."""
    frame = edit(data)
    with pytest.raises(LoadError) as page:
        check_model_data(forest, frame, target, name="forest.skops", **kwargs)
    X = frame.drop(columns=[target])
    with pytest.raises(compute.InputError) as library:
        compute.permutation_importance(forest, X, frame[target], n_repeats=1, **kwargs)
    generic = str(library.value)
    named = str(page.value).replace("data.csv", "'X'").replace("forest.skops", "the model")
    named = named.replace("The target column 'label' of 'X'", "'y'")
    assert named == generic
    assert page.value.field == field


def test_probabilities_without_classes_are_refused_by_both(data):
    """A model with predict_proba but no classes_: its probability columns have no labels."""

    class NoClasses:
        def predict(self, X):
            return np.zeros(len(X))

        def predict_proba(self, X):
            return np.full((len(X), 2), 0.5)

    with pytest.raises(LoadError, match="odd.skops has predict_proba but no classes_") as info:
        check_model_data(NoClasses(), data, "y_num", name="odd.skops")
    assert info.value.field == "model"
    with pytest.raises(compute.InputError, match="The model has predict_proba but no classes_"):
        compute.feature_profile(NoClasses(), data[["a", "b"]], "a")


def test_nan_predictions_are_refused_at_load(data):
    """The predictor's own output rule (finite values) applies at Load, on the model field."""

    class Holes:
        def predict(self, X):
            return np.where(np.arange(len(X)) == 1, np.nan, 1.0)

    with pytest.raises(LoadError, match="holes.skops on data.csv: .*NaN or infinite values for 1 of 5 rows") as info:
        check_model_data(Holes(), data, "y_num", name="holes.skops")
    assert info.value.field == "model"


def test_label_positions_match_across_spellings():
    """Integer classes match text and whole-float labels; unknown labels get -1."""
    from compute.validation import label_positions

    classes = np.array([0, 1, 2])
    assert label_positions(np.array(["2", "0", "7"], dtype=object), classes).tolist() == [2, 0, -1]
    assert label_positions(np.array([1.0, 2.0, 0.5]), classes).tolist() == [1, 2, -1]
    assert label_positions(np.array(["b", "a"], dtype=object), np.array(["a", "b"])).tolist() == [1, 0]


# --- target choices and refused data files (issue 11, defects 4 and 5) --------------------------
def test_class_and_loss_options_follow_the_chosen_target(tmp_path):
    """A target-first CSV offered the last column's values (parch 0..9) as classes; a
    regression target was offered classification losses."""
    from dashboard.callbacks.load import describe_data, target_choices
    from dashboard.config import Config
    from dashboard.server import create_app

    ctx = create_app(Config(cache_dir=str(tmp_path / "cache")))._wip_context
    frame = pd.DataFrame(
        {
            "survived": ["yes", "no", "yes", "no"] * 5,
            "fare": np.linspace(5.0, 80.0, 20),
            "parch": [0, 1, 2, 3, 9] * 4,
        }
    )
    token, path = ctx.store.new_upload("titanic.csv")
    path.write_text(frame.to_csv(index=False))
    feedback = describe_data(ctx, {"id": token, "name": "titanic.csv", "size": 1})
    assert feedback.error is None and feedback.target == "parch"
    survived = target_choices(feedback.facts, "survived")
    assert survived["classes"] == ["no", "yes"]
    assert [o["value"] for o in survived["losses"]] == ["log_loss", "brier", "zero_one"]
    fare = target_choices(feedback.facts, "fare")
    assert fare["classes"] == [] and [o["value"] for o in fare["losses"]] == ["squared_error", "absolute_error"]
    parch = target_choices(feedback.facts, "parch")  # a small count: either task
    assert parch["classes"] == ["0", "1", "2", "3", "9"] and len(parch["losses"]) == 5
    assert target_choices({"x": "forged"}, "x")["classes"] == []


def test_a_data_file_refused_at_upload_gets_its_message_at_load(tmp_path):
    """An .xlsx chosen as data, then Load: 'Loading failed (KeyError)' before; now the data
    field says why, and the file name is not repeated."""
    from dashboard.callbacks.load import describe_data, load_workspace
    from dashboard.config import Config
    from dashboard.server import create_app

    ctx = create_app(Config(cache_dir=str(tmp_path / "cache")))._wip_context
    refused = {
        "name": "sheet.xlsx",
        "size": 10,
        "error": "sheet.xlsx: a data file must end in .csv, .parquet, .pq (got .xlsx).",
    }
    shown = describe_data(ctx, refused).error
    assert shown.count("sheet.xlsx") == 1
    token, path = ctx.store.new_upload("m.skops")
    path.write_bytes(b"x")
    result = load_workspace(
        ctx, [{"id": token, "name": "m.skops", "size": 1}], refused, "y", None, None, [], False, None
    )
    message = result["errors"]["data"]
    assert message.startswith("sheet.xlsx: a data file must end in") and ".csv or .parquet" in message
    assert "KeyError" not in str(result)


def test_a_csv_without_header_row_is_named_as_such(tmp_path):
    """Issue 12: a header-less CSV loaded as if its first row were the names; with a model
    that records its column names, Load says the file seems to lack a header row."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(40, 3)).round(3), columns=["x1", "x2", "x3"])
    frame["y"] = frame.sum(axis=1)
    model = LinearRegression().fit(frame[["x1", "x2", "x3"]], frame["y"])
    path = tmp_path / "boston.csv"
    frame.to_csv(path, index=False, header=False)
    data = read_data(path, name="boston.csv")
    target = str(data.columns[-1])
    with pytest.raises(LoadError) as info:
        check_model_data(model, data, target, name="lr.skops")
    assert info.value.field == "data"
    message = str(info.value)
    assert "boston.csv seems to have no header row: its column names are numbers" in message
    assert "expects named columns ('x1', 'x2', 'x3'" in message
    # a model without names cannot tell: the data loads with a note
    bare = LinearRegression().fit(frame[["x1", "x2", "x3"]].to_numpy(), frame["y"])
    X, _ = check_model_data(bare, data, target, name="bare.skops")
    assert any("no header row" in note for note in X.attrs["notes"])
    # named columns are no cause for alarm
    frame.to_csv(tmp_path / "named.csv", index=False)
    X, _ = check_model_data(model, read_data(tmp_path / "named.csv", name="named.csv"), "y", name="lr.skops")
    assert not any("header" in note for note in X.attrs["notes"])


@pytest.mark.parametrize("nested", [False, True])
def test_unseen_levels_are_named_against_the_models_encoder(nested):
    """Issue 12: a level the fitted encoder never saw ('4th' class) sitting after the first
    rows. With handle_unknown='error' Load refuses, naming the level, the column, the rows and
    the known levels; with 'ignore' it loads with a note giving the share. Through a
    ColumnTransformer, and (nested) an imputer before the encoder."""
    from sklearn.impute import SimpleImputer

    rng = np.random.default_rng(0)
    n = 200
    train = pd.DataFrame({"age": rng.uniform(1, 70, n), "klass": rng.choice(["1st", "2nd", "3rd"], n)})
    y = (train.age < 30).astype(int) ^ (train.klass == "1st").astype(int)
    data = train.assign(survived=y)
    data.loc[[20, 50, 51], "klass"] = "4th"
    data.loc[60, "klass"] = "crew"
    for setting in ("error", "ignore"):
        encoder = OneHotEncoder(handle_unknown=setting)
        cat = make_pipeline(SimpleImputer(strategy="most_frequent"), encoder) if nested else encoder
        pre = ColumnTransformer([("cat", cat, ["klass"])], remainder="passthrough")
        model = make_pipeline(pre, LogisticRegression()).fit(train, y)
        if setting == "error":
            with pytest.raises(LoadError) as info:
                check_model_data(model, data, "survived", name="titanic.skops")
            message = str(info.value)
            assert info.value.field == "data"
            assert (
                "'klass' in the data has level(s) titanic.skops never saw: '4th', 'crew' "
                "(4 rows, first: 20, 50, 51, 60)"
            ) in message
            assert "knows '1st', '2nd', '3rd'" in message and "handle_unknown='error'" in message
        else:
            X, _ = check_model_data(model, data, "survived", name="titanic.skops")
            (note,) = [n for n in X.attrs["notes"] if "never saw" in n]
            assert "'klass': 4 rows (2%) of the data hold level(s) titanic.skops never saw ('4th', 'crew')" in note
            assert "all zeros" in note


def test_unseen_levels_through_positions_and_an_ordinal_encoder():
    from sklearn.preprocessing import OrdinalEncoder

    from compute.validation import unseen_levels

    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.normal(size=50), "city": rng.choice(["Bern", "Chur"], 50)})
    pre = ColumnTransformer(
        [("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), [1])], remainder="passthrough"
    )
    model = make_pipeline(pre, LinearRegression()).fit(X.to_numpy(), X.a.to_numpy())
    found = unseen_levels(model, X.assign(city=["Basel"] + list(X.city[1:])))
    assert [(f.column, f.levels, f.rows, f.unknown_value) for f in found] == [("city", ["Basel"], 1, -1)]
    assert unseen_levels(LinearRegression().fit(X[["a"]], X.a), X) == []


def test_single_tensor_onnx_column_order_is_confirmed_or_read_from_metadata(tmp_path):
    """Issue 12: a single-tensor ONNX model was fed a file's columns by position with no check
    (the same columns shuffled gave nonsense). Now Load shows the order and asks for it to be
    confirmed; when the exporter stored the names in the metadata they are used, so a file
    with the columns shuffled predicts exactly as the original model does."""
    import json

    rng = np.random.default_rng(0)
    cols = ["CRIM", "ZN", "RM", "LSTAT"]
    frame = pd.DataFrame(rng.normal(size=(80, 4)), columns=cols)
    frame["MEDV"] = 3 * frame.RM - 2 * frame.LSTAT + 0.5 * frame.CRIM
    sk = LinearRegression().fit(frame[cols].to_numpy(), frame.MEDV)
    bare = skl2onnx.to_onnx(sk, frame[cols].to_numpy()[:1].astype(np.float32))
    (tmp_path / "bare.onnx").write_bytes(bare.SerializeToString())
    named = skl2onnx.to_onnx(sk, frame[cols].to_numpy()[:1].astype(np.float32))
    entry = named.metadata_props.add()
    entry.key, entry.value = "feature_names", json.dumps(cols)
    (tmp_path / "named.onnx").write_bytes(named.SerializeToString())
    shuffled = frame[["LSTAT", "ZN", "MEDV", "CRIM", "RM"]]

    model = load_model(tmp_path / "bare.onnx", name="bare.onnx")
    with pytest.raises(LoadError) as info:
        check_model_data(model, shuffled, "MEDV", name="bare.onnx", order_confirmed=False)
    assert info.value.field == "data"
    assert "in this order: LSTAT, ZN, CRIM, RM" in str(info.value) and "tick" in str(info.value)
    X, _ = check_model_data(model, shuffled, "MEDV", name="bare.onnx", order_confirmed=True)
    assert list(X.columns) == ["LSTAT", "ZN", "CRIM", "RM"]  # as the user confirmed

    model = load_model(tmp_path / "named.onnx", name="named.onnx")
    X, _ = check_model_data(model, shuffled, "MEDV", name="named.onnx", order_confirmed=False)
    assert list(X.columns) == cols  # reordered by the names in the metadata
    predictor, Xm = compute.validation.make_predictor(model, X)
    assert_allclose(model.predict(Xm), sk.predict(frame[cols].to_numpy()), rtol=1e-5)
    assert not any("does not record" in note for note in X.attrs["notes"])
