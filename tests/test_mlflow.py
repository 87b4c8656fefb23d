"""Issue 43, item 4: MLflow model folders (``MLmodel`` + the flavour's files), written by MLflow
itself, as ``--model FOLDER`` on the command line and as an uploaded ``.zip`` of the folder.

The xgboost, lightgbm, catboost and onnx flavours (each trained on an array, so only the
signature names the columns) load through the native loaders and predict what the native
model predicts (1e-6); a pickled scikit-learn flavour is refused by name, a skops one loads
through the allow-list; hostile zips (a ``..`` member, a huge declared size, no MLmodel, an
MLmodel that is not a YAML mapping) are refused naming the file.

The fixtures are written in a fresh interpreter with ``OMP_NUM_THREADS=1``; this process
never imports the boosters (loads and predictions run in the dashboard's isolated child)."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import stat
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import compute
from dashboard.callbacks.load import describe_models, load_workspace
from dashboard.cli import open_files
from dashboard.config import Config
from dashboard.isolation import Limits, isolated
from dashboard.loading import LoadError, Policy, load_model
from dashboard.loading.mlflow import folder_archive, read_mlmodel, type_mismatch
from dashboard.server import create_app

_missing = [n for n in ("mlflow", "xgboost", "lightgbm", "catboost", "skl2onnx") if importlib.util.find_spec(n) is None]
if _missing:
    pytest.skip(f"not installed: {', '.join(_missing)}", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
LIMITS = Limits(seconds=120, memory_bytes=4 << 30)
FLAVOURS = ("xgb", "lgb", "cb", "onnx")

WRITE = textwrap.dedent(
    """
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np, pandas as pd, mlflow, json
    import mlflow.xgboost, mlflow.lightgbm, mlflow.catboost, mlflow.onnx, mlflow.sklearn
    import xgboost, lightgbm, catboost, onnxruntime
    from mlflow.models import infer_signature
    from skl2onnx import to_onnx
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    y = 2 * X.a + X.b * X.c + rng.normal(scale=0.1, size=300)
    X.assign(y=y).to_csv("data.csv", index=False)
    A = X.to_numpy()  # trained on arrays: only the signature names the columns
    sig = infer_signature(X, y.to_numpy())
    quick = {"pip_requirements": []}  # no requirement inference (MLflow loads each model in a subprocess)

    xgb = xgboost.XGBRegressor(n_estimators=20, max_depth=3).fit(A, y)
    mlflow.xgboost.save_model(xgb, "xgb", signature=sig, **quick)
    np.save("xgb.npy", xgb.predict(A))
    lgb = lightgbm.LGBMRegressor(n_estimators=20, verbose=-1).fit(A, y)
    mlflow.lightgbm.save_model(lgb.booster_, "lgb", signature=sig, **quick)
    np.save("lgb.npy", lgb.booster_.predict(A))
    cb = catboost.CatBoostRegressor(iterations=20, depth=3, verbose=0, thread_count=1).fit(A, y)
    mlflow.catboost.save_model(cb, "cb", signature=sig, **quick)
    np.save("cb.npy", cb.predict(A))
    gbr = GradientBoostingRegressor(n_estimators=20, max_depth=3).fit(A.astype(np.float32), y)
    onx = to_onnx(gbr, A[:1].astype(np.float32))
    mlflow.onnx.save_model(onx, "onnx", signature=sig, **quick)
    session = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    np.save("onnx.npy", session.run(None, {session.get_inputs()[0].name: A.astype(np.float32)})[0].ravel())

    ridge = Ridge().fit(X, y)
    mlflow.sklearn.save_model(ridge, "skl_pickle", serialization_format="cloudpickle", **quick)
    mlflow.sklearn.save_model(ridge, "skl_skops", serialization_format="skops", **quick)
    np.save("skl_skops.npy", ridge.predict(X))
    mlflow.lightgbm.save_model(lgb, "lgb_wrapper", **quick)  # the scikit-learn wrapper: skops with LightGBM's types
    Xn = X.assign(n=rng.integers(0, 5, 300))  # a whole-number column: the signature says long
    Xn.assign(y=y).to_csv("data_n.csv", index=False)
    xgb_n = xgboost.XGBRegressor(n_estimators=10, max_depth=2).fit(Xn.to_numpy(), y)
    mlflow.xgboost.save_model(xgb_n, "xgb_long", signature=infer_signature(Xn, y.to_numpy()), **quick)
    print(mlflow.__version__)
    """
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlflow")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": f"file:{folder / 'runs'}"}
    done = subprocess.run(
        [sys.executable, "-c", WRITE], cwd=folder, env=env, timeout=300, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    config = Config(
        cache_dir=str(tmp_path_factory.mktemp("cache")), upload_per_minute=10_000, upload_mb_per_hour=100_000
    )
    return create_app(config)


def zipped(folder: Path, top: str | None = None) -> bytes:
    """The folder as a zip, as `zip -r` writes it (under its own name when ``top``)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                rel = path.relative_to(folder).as_posix()
                archive.write(path, f"{top}/{rel}" if top else rel)
    return buffer.getvalue()


def post(app, kind: str, name: str, blob: bytes) -> dict:
    answer = app.server.test_client().post(
        "/upload", data={"kind": kind, "file": (io.BytesIO(blob), name)}, content_type="multipart/form-data"
    )
    body = answer.get_json()
    assert answer.status_code == 200, body
    return body


def through_the_page(app, files: Path, name: str, blob: bytes) -> dict:
    data = post(app, "data", "data.csv", (files / "data.csv").read_bytes())
    model = post(app, "model", name, blob)
    return load_workspace(app._wip_context, [model], data, "y", None, None, [], False, None, "training", False)


def _predictions(ctx, ws_id: str) -> np.ndarray:
    """What the jobs compute: the stored model loaded from its file, fed the stored data."""
    ws = ctx.store.workspace(ws_id)
    entry = ws.models[0]
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    predictor, X = compute.validation.make_predictor(model, ctx.store.data(ws)[list(ws.features)], ws.output)
    return np.asarray(predictor.raw(predictor.design.block(np.arange(len(X)), {})), dtype=np.float64).ravel()


def _close(got, expected) -> None:
    expected = np.asarray(expected, dtype=np.float64).ravel()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * max(1.0, float(np.abs(expected).max())))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_zip_through_the_upload_predicts_as_the_native_model(app, files, flavour):
    """The zip of the folder (under its own top folder, as `zip -r` makes it) through the
    page's route: loaded without the column-order tick (the signature names the columns)."""
    result = through_the_page(app, files, f"{flavour}.zip", zipped(files / flavour, top=flavour))
    assert "ws" in result, result
    ws = app._wip_context.store.workspace(result["ws"])
    assert ws.models[0].features == ("a", "b", "c")
    _close(isolated(_predictions, app._wip_context, result["ws"], limits=LIMITS), np.load(files / f"{flavour}.npy"))


def test_a_folder_on_the_command_line_predicts_as_the_native_model(app, files):
    """``--model FOLDER``: the door zips the folder (the same bytes every time: one cache
    entry) and loads it in the isolated process as an upload is."""
    ctx = app._wip_context
    assert folder_archive(files / "xgb") == folder_archive(files / "xgb")
    for flavour in (*FLAVOURS, "skl_skops"):
        ws = open_files(ctx, [files / flavour], files / "data.csv", "y")
        assert ws.models[0].path.endswith(".zip"), ws.models[0]
        _close(isolated(_predictions, ctx, ws.id, limits=LIMITS), np.load(files / f"{flavour}.npy"))


def test_the_review_reads_the_four_folders(files):
    """``app.py report --model xgb --model lgb --model cb --model onnx``: each model's error
    in numbers.json is that of the native model's own predictions (1e-6)."""
    models = [arg for flavour in FLAVOURS for arg in ("--model", flavour)]
    command = [sys.executable, str(ROOT / "app.py"), "report", *models, "--data", "data.csv", "--target", "y"]
    command += ["--out", "r.html", "--json", "n.json", "--cache-dir", "cache-report"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=files, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    numbers = json.loads((files / "n.json").read_text())
    y = pd.read_csv(files / "data.csv")["y"].to_numpy()
    for flavour in FLAVOURS:
        expected = float(np.mean((y - np.load(files / f"{flavour}.npy")) ** 2))
        assert abs(numbers["performance"][flavour]["loss"] - expected) <= 1e-6 * max(1.0, expected), flavour


def test_pickled_flavours_are_refused_by_name(app, files, tmp_path):
    result = through_the_page(app, files, "skl_pickle.zip", zipped(files / "skl_pickle"))
    message = result["errors"]["model"]
    assert "skl_pickle.zip" in message and "sklearn flavour saved with cloudpickle" in message, message
    assert "--allow-pickle" in message
    with pytest.raises(LoadError, match=r"sklearn flavour saved with cloudpickle"):
        open_files(app._wip_context, [files / "skl_pickle"], files / "data.csv", "y")
    # said at upload already (the feedback reads the zip in the isolated process)
    said = describe_models(app._wip_context, [post(app, "model", "p.zip", zipped(files / "skl_pickle"))])
    assert "p.zip" in str(said.error) and "sklearn flavour saved with cloudpickle" in str(said.error), said
    # the operator's --allow-pickle lets it load (in the isolated process)
    blob = tmp_path / "skl_pickle.zip"
    blob.write_bytes(zipped(files / "skl_pickle"))
    kind = isolated(_kind, str(blob), Policy(allow_pickle=True), limits=LIMITS)
    assert kind == "Ridge"
    # LightGBM's scikit-learn wrapper: MLflow writes skops holding LightGBM's types, off the allow-list
    result = through_the_page(app, files, "lgb_wrapper.zip", zipped(files / "lgb_wrapper"))
    assert "lightgbm.basic.Booster" in result["errors"]["model"], result
    said = describe_models(app._wip_context, [post(app, "model", "w.zip", zipped(files / "lgb_wrapper"))])
    assert "lightgbm.basic.Booster" in [t["value"] for t in said.types], said


def test_the_review_takes_allow_pickle_as_the_server_does(files):
    """Issue 43: ``report --allow-pickle``, the serve command's option with the same meaning: a
    pickled flavour is refused by name without it and reviewed with it."""
    command = [sys.executable, str(ROOT / "app.py"), "report", "--model", "skl_pickle", "--data", "data.csv"]
    command += ["--target", "y", "--out", "p.html", "--json", "p.json", "--cache-dir", "cache-pickle"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    refused = subprocess.run(command, cwd=files, capture_output=True, text=True, timeout=600, env=env)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "sklearn flavour saved with cloudpickle" in refused.stderr and "--allow-pickle" in refused.stderr
    done = subprocess.run([*command, "--allow-pickle"], cwd=files, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    y = pd.read_csv(files / "data.csv")["y"].to_numpy()
    expected = float(np.mean((y - np.load(files / "skl_skops.npy")) ** 2))  # the same Ridge
    loss = json.loads((files / "p.json").read_text())["performance"]["skl_pickle"]["loss"]
    assert abs(loss - expected) <= 1e-9 * max(1.0, expected)
    helped = subprocess.run([sys.executable, str(ROOT / "app.py"), "report", "--help"], capture_output=True, text=True)
    assert "--allow-pickle" in helped.stdout


def _kind(path: str, policy: Policy) -> str:
    return type(load_model(path, policy=policy)).__name__


def _zip(members: dict[str, bytes], link: str = "") -> bytes:
    """A zip of these members (``link``: that one a symbolic link, as `zip -y` stores one)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, blob in members.items():
            info = zipfile.ZipInfo(name)
            if name == link:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, blob)
    return buffer.getvalue()


def _huge(blob: bytes) -> bytes:
    """The zip with its central directory declaring ~4 GB for its first member."""
    at = blob.index(b"PK\x01\x02")
    return blob[: at + 24] + struct.pack("<I", 0xFFFFFFF0) + blob[at + 28 :]


def test_hostile_zips_are_refused_naming_the_file(app, files):
    mlmodel = (files / "xgb" / "MLmodel").read_bytes()
    model = (files / "xgb" / "model.ubj").read_bytes()
    cases = {
        "escape.zip": (_zip({"MLmodel": mlmodel, "model.ubj": model, "../evil.txt": b"x"}), r"outside the folder"),
        "huge.zip": (_huge(_zip({"model.ubj": model, "MLmodel": mlmodel})), r"declares 4,096 MB unpacked"),
        "nomodel.zip": (_zip({"model.ubj": model}), r"holds no MLmodel file"),
        "list.zip": (_zip({"MLmodel": b"- a\n- b\n", "model.ubj": model}), r"MLmodel is not an MLflow MLmodel file"),
        "bad.zip": (_zip({"MLmodel": b"flavors: [unclosed\n", "model.ubj": model}), r"MLmodel is not valid YAML"),
        "gone.zip": (_zip({"MLmodel": mlmodel}), r"has no model\.ubj, which its MLmodel names"),
        "notzip.zip": (b"PK but not a zip", r"not a readable zip file"),
        "link.zip": (_zip({"MLmodel": mlmodel, "model.ubj": b"/etc/passwd"}, link="model.ubj"), r"symbolic link"),
    }
    for name, (blob, expected) in cases.items():
        result = through_the_page(app, files, name, blob)
        message = result.get("errors", {}).get("model", "")
        assert name in message and re.search(expected, message), (name, result)


def test_mlmodel_is_read_as_data(tmp_path):
    """No object is built from YAML tags; the size is bounded."""
    with pytest.raises(LoadError, match="not valid YAML"):
        read_mlmodel(b"flavors: !!python/object/apply:os.system ['true']\n", "m.zip")
    with pytest.raises(LoadError, match="at most 65,536"):
        read_mlmodel(b"#" * (70 * 1024), "m.zip")
    (tmp_path / "MLmodel").write_text("flavors: {}\n")
    (tmp_path / "link").symlink_to(tmp_path / "MLmodel")
    with pytest.raises(LoadError, match="symbolic link"):
        folder_archive(tmp_path, Policy())
    with pytest.raises(LoadError, match="has no MLmodel file"):
        folder_archive(tmp_path / "nothing", Policy())


def _types(folder: Path) -> dict[str, str]:
    meta = read_mlmodel((folder / "MLmodel").read_bytes(), "m")
    return {i["name"]: i["type"] for i in json.loads(meta["signature"]["inputs"])}


def test_the_signatures_column_types_are_checked_against_the_data(app, files, tmp_path):
    """Issue 43, item 3: a column whose type contradicts MLflow's signature is refused naming
    the column and both types; compatible types (whole numbers where it says double, a float
    column of whole numbers where it says long) load."""
    assert _types(files / "xgb") == {"a": "double", "b": "double", "c": "double"}  # as MLflow wrote them
    assert _types(files / "xgb_long")["n"] == "long"
    data = pd.read_csv(files / "data.csv")

    def load(name: str, frame: pd.DataFrame, folder: str) -> dict:
        csv = post(app, "data", name, frame.to_csv(index=False).encode())
        model = post(app, "model", f"{folder}.zip", zipped(files / folder))
        return load_workspace(app._wip_context, [model], csv, "y", None, None, [], False, None, "training", False)

    text = data.assign(a=[f"v{i % 3}" for i in range(len(data))])
    message = load("text.csv", text, "xgb")["errors"]["data"]
    assert re.search(r"column 'a' holds text \(str, e\.g\. 'v0'\).*xgb\.zip gives it the type double", message), message
    whole = data.assign(a=(data.a * 10).round().astype("int64"))  # long numbers where the signature says double
    assert "ws" in load("whole.csv", whole, "xgb"), "a long column where the signature says double must load"

    n_data = pd.read_csv(files / "data_n.csv")
    assert "ws" in load("n.csv", n_data, "xgb_long")
    assert "ws" in load("n_float.csv", n_data.assign(n=n_data.n.astype(float)), "xgb_long")  # 2.0 is long
    message = load("n_frac.csv", n_data.assign(n=n_data.n + 0.5), "xgb_long")["errors"]["data"]
    assert re.search(r"column 'n' holds numbers with a fractional part \(float64, e\.g\. \d\.5\)", message), message
    assert "gives it the type long" in message, message
    # the command line's door reads the same check
    bad = tmp_path / "bad.csv"
    text.to_csv(bad, index=False)
    with pytest.raises(LoadError, match=r"column 'a' holds text .* type double"):
        open_files(app._wip_context, [files / "xgb"], bad, "y")


def test_type_mismatch_rules():
    s = pd.Series
    assert type_mismatch(s([1, 2, 3]), "double") is None and type_mismatch(s([1.5]), "float") is None
    assert type_mismatch(s([True, False]), "double") is None
    assert type_mismatch(s(["x", "y"]), "double") == "text (str, e.g. 'x')"
    assert type_mismatch(s([1.0, None, 3.0]), "long") is None
    assert type_mismatch(s([1.0, 2.5]), "integer").startswith("numbers with a fractional part")
    assert type_mismatch(s(["x"]), "long") == "text (str, e.g. 'x')"
    assert type_mismatch(s([0, 1, 1]), "boolean") is None and type_mismatch(s([True]), "boolean") is None
    assert type_mismatch(s([0, 2]), "boolean").startswith("numbers other than 0 and 1")
    assert type_mismatch(s(["a", None]), "string") is None
    assert type_mismatch(s(pd.Categorical(["a", "b"])), "string") is None
    assert type_mismatch(s([1, 2]), "string") == "numbers (int64, e.g. 1)"
