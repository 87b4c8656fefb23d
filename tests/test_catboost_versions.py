"""Issue 41: CatBoost .cbm and JSON models from CatBoost 1.0 on; a model written by an older
release is refused naming its version.

CatBoost stores the release that wrote a model in its build text (``model_info``'s
``catboost_version_info``, kept inside a .cbm as well): a release build names its branch
``tags/v1.2.10`` or says "CatBoost release 1.2.10"; a ``version`` entry of model_info is read
too. The too-old files are the 1.0.6 fixtures (tests/data/old_models) with that text edited: in
the JSON as text, in the .cbm in place with a string of the same length (its FlatBuffers
offsets unchanged). They are refused before CatBoost is imported; a model naming 1.0 or a
later release, and one naming none (1.0.6's wheels were built from a branch), load and predict
as CatBoost 1.0.6 did (1e-6). Loads run in the dashboard's isolated child, as the page runs them.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard.callbacks.load import load_workspace
from dashboard.config import Config
from dashboard.isolation import Limits, isolated
from dashboard.loading import LoadError, boosters, load_model
from dashboard.loading.booster_files import catboost_version, cbm_version
from dashboard.server import create_app

ROOT = Path(__file__).resolve().parent.parent
OLD = ROOT / "tests" / "data" / "old_models"
LIMITS = Limits(seconds=120, memory_bytes=4 << 30)
BRANCH = "Branch: heads/master"  # what CatBoost 1.0.6's wheels wrote (no release named)
needs_catboost = pytest.mark.skipif(importlib.util.find_spec("catboost") is None, reason="needs catboost")


def _json_naming(tmp_path, info_text: str | None = None, version: str | None = None, name: str = "old.json") -> Path:
    doc = json.loads((OLD / "catboost-1.0.6-regression.json").read_text())
    assert BRANCH in doc["model_info"]["catboost_version_info"]
    if info_text is not None:
        doc["model_info"]["catboost_version_info"] = doc["model_info"]["catboost_version_info"].replace(
            BRANCH, info_text
        )
    if version is not None:
        doc["model_info"]["version"] = version
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _cbm_naming(tmp_path, branch: str, source: str = "catboost-1.0.6-regression.cbm", name: str = "old.cbm") -> Path:
    blob = (OLD / source).read_bytes()
    assert len(branch) == len(BRANCH) and blob.count(BRANCH.encode()) == 1
    path = tmp_path / name
    path.write_bytes(blob.replace(BRANCH.encode(), branch.encode()))
    return path


@pytest.fixture
def never_loaded(monkeypatch):
    """A refusal made before CatBoost is imported (and so before it parses the file)."""

    def _import(library, label):
        raise AssertionError(f"{library} was imported for {label}")

    monkeypatch.setattr(boosters, "_import", _import)


def test_the_release_is_read_from_the_build_text():
    text = "Git info:\n    Commit: 1\n    Branch: {}\n    Summary: {}\n"
    assert catboost_version({"catboost_version_info": text.format("tags/v1.2.10", "x")}) == "1.2.10"
    assert catboost_version({"catboost_version_info": text.format("heads/master", "CatBoost release 0.26.1.")}) == (
        "0.26.1"
    )
    assert catboost_version({"catboost_version_info": text.format("heads/master", "fixes for MLTOOLS-6249")}) == ""
    assert catboost_version({"version": "0.24", "catboost_version_info": text.format("tags/v1.2.10", "")}) == "0.24"
    assert catboost_version({}) == "" and catboost_version(None) == ""
    assert cbm_version((OLD / "catboost-1.0.6-regression.cbm").read_bytes()) == ""  # built from a branch


@pytest.mark.parametrize(
    "edit, said",
    [
        (dict(info_text="Branch: tags/v0.26.1"), "0.26.1"),
        (dict(info_text="Branch: heads/master\n    Summary: CatBoost release 0.24.4"), "0.24.4"),
        (dict(version="0.9"), "0.9"),
    ],
)
def test_a_json_model_before_1_0_is_refused_naming_its_version(tmp_path, never_loaded, edit, said):
    path = _json_naming(tmp_path, **edit)
    with pytest.raises(LoadError, match=rf"old\.json was written by CatBoost {said}; .*from CatBoost 1\.0 on"):
        load_model(path)


@pytest.mark.parametrize("source", ["catboost-1.0.6-regression.cbm", "catboost-1.0.6-multiclass.cbm"])
def test_a_cbm_model_before_1_0_is_refused_naming_its_version(tmp_path, never_loaded, source):
    path = _cbm_naming(tmp_path, "Branch: tags/v0.26.1", source)
    with pytest.raises(LoadError, match=r"old\.cbm was written by CatBoost 0\.26\.1; .*from CatBoost 1\.0 on"):
        load_model(path)


def _loaded(path: str) -> tuple[str, np.ndarray]:
    """In the isolated child: the loaded model's version and its predictions on data.csv."""
    model = load_model(path, name="m")
    X = pd.read_csv(OLD / "data.csv")[["a", "b", "c"]]
    return model.version, np.asarray(model.predict(X), dtype=np.float64)


@needs_catboost
@pytest.mark.parametrize(
    "kind, branch, version",
    [
        ("json", "Branch: tags/v1.0.0", "1.0.0"),  # the oldest release read
        ("cbm", "Branch: tags/v1.0.10", "1.0.10"),
        ("json", None, ""),  # no release named: read, as 1.0.6's own files are
        ("cbm", BRANCH, ""),
    ],
)
def test_a_model_from_1_0_on_loads_and_predicts_as_catboost_did(tmp_path, kind, branch, version):
    if kind == "json":
        path = _json_naming(tmp_path, branch, name="m.json")
    else:
        path = _cbm_naming(tmp_path, branch, name="m.cbm")
    found, predicted = isolated(_loaded, str(path), limits=LIMITS)
    assert found == version
    expected = np.asarray(json.loads((OLD / f"catboost-1.0.6-regression.{kind}.pred.json").read_text()))
    np.testing.assert_allclose(predicted, expected, rtol=0, atol=1e-6 * max(1.0, float(np.abs(expected).max())))


@needs_catboost
def test_the_page_refuses_it_naming_the_version(tmp_path):
    app = create_app(Config(cache_dir=str(tmp_path / "cache"), upload_per_minute=10_000, upload_mb_per_hour=100_000))
    client = app.server.test_client()

    def post(kind, name, blob):
        answer = client.post(
            "/upload", data={"kind": kind, "file": (io.BytesIO(blob), name)}, content_type="multipart/form-data"
        )
        assert answer.status_code == 200, answer.get_json()
        return answer.get_json()

    data = pd.read_csv(OLD / "data.csv")[["a", "b", "c", "y"]].to_csv(index=False).encode()
    blob = _cbm_naming(tmp_path, "Branch: tags/v0.26.1").read_bytes()
    files = [post("model", "old.cbm", blob)]
    result = load_workspace(
        app._wip_context, files, post("data", "data.csv", data), "y", None, None, [], False, None, "training", True
    )
    said = json.dumps(result)
    assert "ws" not in result and "written by CatBoost 0.26.1" in said and "from CatBoost 1.0 on" in said, said
