"""Hostile gradient-boosting files (issue 24): each format's crafted files are refused with a
message naming what is wrong, before the library's C++ parser sees them; what passes runs in
the isolated process, so a parser crash is a refused file, never a 5xx or a dead worker.

Per format: a split on feature 10^9, a child index outside its tree, 10^7 declared trees with
one present, a truncated file, random bytes. The crafted files start from real models trained
in a fresh interpreter (tests/helpers/train_boosters.py; this process never runs OpenMP).
"""

from __future__ import annotations

import importlib.util
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dashboard.callbacks.load import load_workspace
from dashboard.config import Config
from dashboard.isolation import Limits, isolated
from dashboard.loading import LoadError, load_model
from dashboard.loading.booster_files import (
    check_binary_tree,
    check_catboost_json,
    check_cbm,
    check_lightgbm,
    check_xgboost,
)
from dashboard.loading.ubjson import read_ubjson
from dashboard.model_trust import ModelFileError
from dashboard.server import create_app

# Found, never imported here: the boosters' OpenMP pools and mapped libraries stay out of the
# test process (every load and prediction below runs in a fresh or isolated process; a pytest
# process holding them forks job children that start near their address-space limit).
_missing = [name for name in ("xgboost", "lightgbm", "catboost") if importlib.util.find_spec(name) is None]
if _missing:
    pytest.skip(f"the boosters extra is not installed ({', '.join(_missing)})", allow_module_level=True)

HERE = Path(__file__).resolve().parent
LIMITS = Limits(seconds=60, memory_bytes=4 << 30)  # the server default (address space: the test process maps a lot)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, bytes]:
    """One categorical 3-class model per library and format, as bytes."""
    out = tmp_path_factory.mktemp("hostile-boosters")
    done = subprocess.run(
        [sys.executable, str(HERE / "helpers" / "train_boosters.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    found = {}
    for case in json.loads(done.stdout.strip().splitlines()[-1]):
        if case["task"] == "multi" and case["kind"] == "categorical":
            for file in case["files"]:
                found[f"{case['library']}{Path(file).suffix}"] = Path(file).read_bytes()
        if case["task"] == "multi" and case["kind"] == "categorical" and case["library"] == "xgboost":
            found["csv"] = Path(case["csv"]).read_bytes()
    return found


# --- a UBJSON writer (the test's own, to craft .ubj files) ---------------------------------
def _ubj(value) -> bytes:
    if isinstance(value, dict):
        out = b"{"
        for key, item in value.items():
            raw = key.encode()
            out += b"L" + struct.pack(">q", len(raw)) + raw + _ubj(item)
        return out + b"}"
    if isinstance(value, np.ndarray):
        code = {"f4": b"d", "f8": b"D", "i1": b"i", "u1": b"U", "i2": b"I", "i4": b"l", "i8": b"L"}
        kind = f"{value.dtype.kind}{value.dtype.itemsize}"
        body = value.astype(value.dtype.newbyteorder(">")).tobytes()
        return b"[$" + code[kind] + b"#L" + struct.pack(">q", value.size) + body
    if isinstance(value, list):
        return b"[" + b"".join(_ubj(v) for v in value) + b"]"
    if isinstance(value, bool):
        return b"T" if value else b"F"
    if isinstance(value, int):
        return b"L" + struct.pack(">q", value)
    if isinstance(value, float):
        return b"D" + struct.pack(">d", value)
    if isinstance(value, str):
        raw = value.encode()
        return b"S" + b"L" + struct.pack(">q", len(raw)) + raw
    if value is None:
        return b"Z"
    raise TypeError(type(value))


def test_the_ubjson_reader_reads_what_xgboost_writes(models):
    """The .ubj and .json files of one model read to the same document (arrays as arrays)."""
    doc = read_ubjson(models["xgboost.ubj"], "m.ubj")
    ref = json.loads(models["xgboost.json"])
    trees, ref_trees = (d["learner"]["gradient_booster"]["model"]["trees"] for d in (doc, ref))
    assert len(trees) == len(ref_trees) == 25 * 3
    for key in ("left_children", "split_indices", "split_conditions", "base_weights"):
        assert np.allclose(np.asarray(trees[7][key], dtype=float), np.asarray(ref_trees[7][key], dtype=float))
    assert doc["learner"]["feature_names"] == ["a", "b", "c"]
    assert read_ubjson(_ubj(doc), "again.ubj")["learner"]["feature_types"] == ["float", "float", "c"]


# --- the crafted files ----------------------------------------------------------------------
def _xgb_doc(models, fmt):
    return read_ubjson(models["xgboost.ubj"], "m") if fmt == ".ubj" else json.loads(models["xgboost.json"])


def _xgb_bytes(doc, fmt) -> bytes:
    if fmt == ".ubj":
        return _ubj(doc)

    def plain(v):
        if isinstance(v, np.ndarray):
            return v.tolist()
        raise TypeError(type(v))

    return json.dumps(doc, default=plain).encode()


def _xgb_crafted(models, fmt, attack):
    doc = _xgb_doc(models, fmt)
    model = doc["learner"]["gradient_booster"]["model"]
    tree = model["trees"][0]
    internal = int(np.flatnonzero(np.asarray(tree["left_children"]) >= 0)[0])
    if attack == "feature":
        split = np.array(tree["split_indices"], dtype=np.int32)
        split[internal] = 10**9
        tree["split_indices"] = split if fmt == ".ubj" else split.tolist()
    elif attack == "child":
        left = np.array(tree["left_children"], dtype=np.int32)
        left[internal] = 10**6
        tree["left_children"] = left if fmt == ".ubj" else left.tolist()
    elif attack == "trees":
        model["trees"] = model["trees"][:1]
        model["tree_info"] = np.asarray(model["tree_info"])[:1]
        model["gbtree_model_param"]["num_trees"] = str(10**7)
        model["iteration_indptr"] = np.array([0, 1], dtype=np.int32)
    return _xgb_bytes(doc, fmt)


def _lgb_retile(text: str) -> str:
    """Recompute tree_sizes after editing trees, as a crafted file would."""
    head, _, rest = text.partition("\nTree=")
    trees, end, tail = ("Tree=" + rest).partition("end of trees")
    blocks = ["Tree=" + b for b in trees.split("Tree=")[1:]]
    sizes = " ".join(str(len(b.encode())) for b in blocks)
    head = "\n".join(("tree_sizes=" + sizes) if line.startswith("tree_sizes=") else line for line in head.split("\n"))
    return head + "\n" + "".join(blocks) + end + tail


def _lgb_edit(text: str, key: str, value: str) -> str:
    """Set the first value of ``key`` in tree 0."""
    start = text.index("\nTree=0\n")
    at = text.index(f"\n{key}=", start) + len(key) + 2
    stop = text.index(" ", at)
    return text[:at] + value + text[stop:]


def _lgb_crafted(models, attack):
    text = models["lightgbm.txt"].decode()
    if attack == "feature":
        text = _lgb_retile(_lgb_edit(text, "split_feature", str(10**9)))
    elif attack == "child":
        text = _lgb_retile(_lgb_edit(text, "left_child", str(10**6)))
    elif attack == "trees":
        first = text.index("\nTree=1\n")
        end = text.index("end of trees")
        text = text[: first + 1] + "\n" + text[end:]
        head, sep, rest = text.partition("\ntree_sizes=")
        line, nl, rest = rest.partition("\n")
        text = head + sep + " ".join([line.split()[0]] + ["100"] * (10**7 - 1)) + nl + rest
    return text.encode()


def _cb_json_crafted(models, attack):
    doc = json.loads(models["catboost.json"])
    trees = doc["oblivious_trees"]
    if attack == "feature":
        split = next(s for t in trees for s in t["splits"] if s["split_type"] == "FloatFeature")
        split["float_feature_index"] = 10**9
    elif attack == "child":  # oblivious trees have no child indices: leaves that do not fit the depth
        trees[0]["leaf_values"] = trees[0]["leaf_values"][:-1]
    elif attack == "trees":  # no declared tree count in JSON: a depth of 40 (2^40 leaves) with 8 present
        trees[0]["splits"] = (trees[0]["splits"] * 40)[:40]
    return json.dumps(doc).encode()


def _cbm_crafted(models, attack):
    data = bytearray(models["catboost.cbm"])
    if attack in ("feature", "child"):  # the FlatBuffers body: declared size beyond the file
        data[4:8] = struct.pack("<I", 10**9)
    elif attack == "trees":
        data[4:8] = struct.pack("<I", 10**7)
    return bytes(data)


def crafted(models, fmt: str, attack: str) -> bytes:
    library, suffix = fmt.split(".")
    suffix = "." + suffix
    if attack == "truncated":
        whole = models[fmt]
        return whole[: len(whole) // 2]
    if attack == "random":
        return np.random.default_rng(hash(fmt) % 2**32).integers(0, 256, 20_000, dtype=np.uint8).tobytes()
    if library == "xgboost":
        return _xgb_crafted(models, suffix, attack)
    if library == "lightgbm":
        return _lgb_crafted(models, attack)
    return _cbm_crafted(models, attack) if suffix == ".cbm" else _cb_json_crafted(models, attack)


FORMATS = ["xgboost.json", "xgboost.ubj", "lightgbm.txt", "catboost.cbm", "catboost.json"]
ATTACKS = ["feature", "child", "trees", "truncated", "random"]
REASONS = {  # what the message says, where the check is ours
    ("xgboost", "feature"): "splits on feature 1,000,000,000",
    ("xgboost", "child"): "child index outside",
    ("xgboost", "trees"): "10,000,000 trees declared, 1 present",
    ("lightgbm", "feature"): "splits on feature 1,000,000,000",
    ("lightgbm", "child"): "child index outside",
    ("lightgbm", "trees"): "tree_sizes declare 10,000,000 trees, 1 present",
    ("catboost.json", "feature"): "splits on float feature 1000000000",
    ("catboost.json", "child"): "leaf values",
    ("catboost.json", "trees"): "depth 40",
    ("catboost.cbm", "feature"): "declares a 1,000,000,000-byte model",
    ("catboost.cbm", "trees"): "declares a 10,000,000-byte model",
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_crafted_file_is_refused_by_name(tmp_path, models, fmt, attack):
    """Refused with a LoadError naming the file and the defect, inside the isolated process,
    within the load limits (no crash, no hang)."""
    library = fmt.split(".")[0]
    path = tmp_path / f"crafted.{fmt.split('.')[1]}"
    path.write_bytes(crafted(models, fmt, attack))
    with pytest.raises(LoadError) as info:
        isolated(load_model, str(path), limits=LIMITS)
    message = str(info.value)
    assert info.value.field == "model" and "crafted." in message
    reason = REASONS.get((fmt, attack)) or REASONS.get((library, attack))
    if reason:
        assert reason in message, message


def test_crafted_files_never_reach_the_native_parser(models):
    """The checks refuse the structural attacks in plain Python: the library never sees them."""
    checks = {
        "xgboost.json": lambda b: check_xgboost(json.loads(b), "m"),
        "xgboost.ubj": lambda b: check_xgboost(read_ubjson(b, "m"), "m"),
        "lightgbm.txt": lambda b: check_lightgbm(b, "m"),
        "catboost.json": lambda b: check_catboost_json(json.loads(b), "m"),
        "catboost.cbm": lambda b: check_cbm(b, "m"),
    }
    for fmt, check in checks.items():
        check(models[fmt])  # the real file passes
        for attack in ("feature", "child", "trees"):
            with pytest.raises(ModelFileError):
                check(crafted(models, fmt, attack))


def test_a_tree_with_a_loop_or_two_parents_is_refused():
    with pytest.raises(ModelFileError, match="at its root"):  # 1 -> 0: back to the root
        check_binary_tree(np.array([1, 0, -1, -1]), np.array([2, 3, -1, -1]), "m", "tree 0")
    with pytest.raises(ModelFileError, match="two parents"):
        check_binary_tree(np.array([1, 2, -1, -1]), np.array([2, 3, -1, -1]), "m", "tree 0")
    with pytest.raises(ModelFileError, match="one child"):
        check_binary_tree(np.array([1, -1]), np.array([-1, -1]), "m", "tree 0")
    check_binary_tree(np.array([1, -1, -1]), np.array([2, -1, -1]), "m", "tree 0")


def test_ubjson_counts_are_checked_before_allocating():
    huge = b"[$D#L" + struct.pack(">q", 10**12) + b"\x00" * 16
    with pytest.raises(ModelFileError, match="8,000,000,000,000 bytes declared, 16 left"):
        read_ubjson(huge, "m.ubj")
    nested = b"[" * 100 + b"]" * 100
    with pytest.raises(ModelFileError, match="nested deeper"):
        read_ubjson(nested, "m.ubj")


def test_mutated_files_are_refused_or_run_never_crash_the_server(tmp_path, models):
    """200 random byte mutations of each binary format through the page's Load: each ends in a
    loaded workspace or a message on the model field; the web process never sees a crash."""
    ctx = create_app(Config(cache_dir=str(tmp_path / "cache")))._wip_context
    rng = np.random.default_rng(7)
    outcomes = {"loaded": 0, "refused": 0}
    for fmt in ("catboost.cbm", "xgboost.ubj"):
        whole = np.frombuffer(models[fmt], dtype=np.uint8)
        for _ in range(100):
            mutant = whole.copy()
            at = rng.integers(8, len(mutant), size=rng.integers(1, 6))
            mutant[at] = rng.integers(0, 256, size=at.size)
            name = f"mutant.{fmt.split('.')[1]}"
            token, dest = ctx.store.new_upload(name)
            dest.write_bytes(mutant.tobytes())
            data_token, data_dest = ctx.store.new_upload("data.csv")
            data_dest.write_bytes(models["csv"])
            result = load_workspace(
                ctx,
                [{"id": token, "name": name, "size": len(mutant)}],
                {"id": data_token, "name": "data.csv", "size": len(models["csv"])},
                "multi",
                None,
                None,
                [],
                False,
                None,
            )
            if "ws" in result:
                outcomes["loaded"] += 1
            else:
                assert result["errors"] and set(result["errors"]) <= {"model", "data", "output", "target"}, result
                assert all(isinstance(m, str) and m for m in result["errors"].values())
                outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == 200
