"""The ways in besides the upload form: a data set from Python objects or from files the
operator names, and a review written without a browser.

:func:`open_workspace` turns models (fitted objects of this session, or model files) and a
data frame into a workspace, checked as an upload is (``inspect_model``, in an isolated
process: model code runs only there). :func:`write_report` computes every section of a
drill-down state and writes the page's one-file HTML report, and the numbers behind it as
JSON. Both run in a process that has never run a model (a fresh interpreter: the command
line, or the one :func:`dashboard.report` starts), so the job processes forked from it are
safe from a running OpenMP pool."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

import compute
from compute.validation import as_pandas

from . import jobs, planning, session_models
from . import labels as labelling
from .callbacks.compute import run_request
from .html_report import report_html
from .isolation import isolated
from .loading import LoadError, read_data
from .loading.checks import PYTHON_CONFIRM
from .loading.formats import MLFLOW_SUFFIX, MODEL_SUFFIXES, format_of
from .loading.inspect import Checked, inspect_model
from .loading.mlflow import folder_archive
from .loading.sniff import AMBIGUOUS_SUFFIXES, suffix_by_content
from .state import Context, default_state, normalize
from .store import ModelEntry, Workspace, new_workspace_id
from .views import REGISTRY, load_inputs, plan_state
from .views.performance import verdicts

Progress = Callable[[int, int, str], None]


def open_workspace(
    ctx: Context,
    models: Mapping[str, object],
    data: pd.DataFrame,
    target: str,
    *,
    title: str = "",
    loss: str | None = None,
    output=None,
    data_role: str = "unknown",
    labels=None,
    columns_in_order: bool = False,
    confirm_how: str = PYTHON_CONFIRM,
) -> Workspace:
    """A saved workspace of ``models`` (name -> a fitted object of this session, its
    ``Pickled`` bytes, or the ``Path`` of a model file the upload form takes) on ``data``,
    whose ``target`` column is the outcome. ``labels``: the features' and classes' labels
    (a dict of a labels file's shape, or its path; :mod:`dashboard.labels`).
    ``columns_in_order``: the data's columns (the target left out) are in the order a model
    that names no inputs was trained on; without it such a model is refused with a message
    showing that order and ``confirm_how`` (how the caller's door confirms it). Raises
    ``LoadError`` (with ``field``: "model", "data" or "target"), ``LabelsError`` or
    ``compute.ExplainError`` naming what is wrong."""
    data = _given_data(ctx, data, target)
    if not models:
        raise LoadError("Give at least one model.", field="model")
    shaped = labelling.given_labels(labels)  # its shape before any model runs
    entries = [_entry(ctx, name, model) for name, model in models.items()]
    data_rel, data_sha = ctx.store.keep_data(data)
    draft = Workspace(
        id=new_workspace_id(),
        title=title or f"{data.attrs.get('name', 'data')}: {', '.join(e.name for e in entries)}",
        data_path=data_rel,
        data_sha=data_sha,
        target=target,
        task="regression",
        loss=loss or "squared_error",
        models=tuple(entries),
        data_role=data_role,
    )
    order = (bool(columns_in_order), confirm_how)
    checked = isolated(
        _inspect_all, ctx, draft, loss, output, order, what="Checking the models", limits=ctx.load_limits
    )
    tasks = {c.task for c in checked}
    if len(tasks) > 1:
        raise LoadError("The models mix classifiers and regressors; give models of one task together.", field="model")
    first = checked[0]
    classes = labelling.target_classes(
        first.task, data[target].dropna().unique(), *(c.classes for c in checked), [first.output]
    )
    shaped = labelling.check_known(shaped, features=first.features, classes=classes, name=labelling.source_name(labels))
    ws = Workspace(
        id=draft.id,
        title=draft.title,
        data_path=data_rel,
        data_sha=data_sha,
        n_rows=len(data),
        target=target,
        task=first.task,
        loss=first.loss,
        output=first.output,
        models=tuple(
            ModelEntry(name=e.name, path=e.path, sha=e.sha, features=c.features, classes=c.classes, walked=c.walked)
            for e, c in zip(entries, checked, strict=True)
        ),
        features=first.features,
        warnings=tuple(dict.fromkeys(w for c in checked for w in c.warnings)),
        data_role=data_role,
        labels=shaped,
    )
    ctx.store.save_workspace(ws)
    return ws


def _given_data(ctx: Context, data, target: str) -> pd.DataFrame:
    """The data as a pandas frame holding the target column (read first when it is a path)."""
    if isinstance(data, (str, os.PathLike)):  # show(): a data file or Parquet data set, read as --data is
        data = read_data(data, name=os.path.basename(os.fspath(data).rstrip("/")) or None, policy=ctx.policy)
    data = as_pandas(data, "data")  # a Polars or PyArrow frame: pandas from here on
    if not isinstance(data, pd.DataFrame) or data.empty:
        raise LoadError("The data must be a non-empty DataFrame (pandas, Polars or a PyArrow Table).", field="data")
    if not isinstance(target, str) or target not in data.columns:
        shown = ", ".join(map(str, list(data.columns)[:12]))
        raise LoadError(f"The target column {target!r} is not in the data (its columns: {shown}).", field="target")
    return data


def _entry(ctx: Context, name, model) -> ModelEntry:
    """A model kept for the workspace: a file in the cache (a model file, a raw booster's
    bytes, an MLflow folder's zip) or a session model (an object, or its pickled bytes)."""
    if isinstance(model, session_models.Pickled) and model.how.startswith("file:"):
        model = _as_file(ctx, model)  # a raw booster: its own file format
    if isinstance(model, Path) and model.is_dir():  # an MLflow model folder: kept as its zip
        model = _as_file(ctx, session_models.Pickled(folder_archive(model, ctx.policy), "file:" + MLFLOW_SUFFIX))
    if isinstance(model, Path):
        rel, sha = _kept_file(ctx, model)
    else:
        if not isinstance(model, session_models.Pickled) and not (
            hasattr(model, "predict") or hasattr(model, "predict_proba")
        ):
            raise LoadError(f"The model {name!r} has no predict or predict_proba.", field="model")
        try:
            rel, sha = session_models.keep(model)
        except Exception as exc:  # a lambda in a pipeline, an open connection
            what = f"{type(exc).__name__}: {exc}"
            message = f"The model {name!r} cannot be handed to the job processes ({what})."
            raise LoadError(message, field="model") from exc
    return ModelEntry(name=str(name), path=rel, sha=sha)


def _kept_file(ctx: Context, model: Path) -> tuple[str, str]:
    """A model file of a format of the table (:mod:`dashboard.loading.formats`) kept in the cache."""
    suffix = model.suffix.lower()
    if suffix in AMBIGUOUS_SUFFIXES:  # .model / .bst: LightGBM or XGBoost, read by content
        suffix = suffix_by_content(model, model.name)
    if format_of(suffix) is None:
        known = ", ".join(MODEL_SUFFIXES)
        raise LoadError(f"{model.name}: not a model file this door reads ({known}).", field="model")
    return ctx.store.keep_model(model, suffix)


def _as_file(ctx: Context, given) -> Path:
    """A booster's file bytes as a file in the cache (kept by content, as an upload)."""
    suffix = given.how[len("file:") :]
    if format_of(suffix) is None:
        raise LoadError(f"Not a model file format this door reads ({suffix}).", field="model")
    folder = ctx.store.path("sessions")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (hashlib.sha256(given.blob).hexdigest()[:32] + suffix)
    path.write_bytes(given.blob)
    return path


def _inspect_all(ctx: Context, ws: Workspace, loss, output, order: tuple[bool, str]) -> list[Checked]:
    """Each model loaded as a job loads it and checked against the data (in the isolated
    process); ``order``: (the column order is confirmed, how the door confirms it)."""
    data, found = ctx.store.data(ws), []
    loaded: dict = {}
    confirmed, how = order
    for entry in ws.models:
        model = jobs.load(ctx.store, ws, entry.name, loaded, ctx.policy)
        checked = inspect_model(
            model,
            data,
            ws.target,
            name=entry.name,
            loss=loss,
            output=output,
            order_confirmed=confirmed,
            confirm_how=how,
        )
        loss, output = checked.loss, checked.output  # the first model's choice holds for the others
        found.append(checked)
    return found


def write_report(
    ctx: Context,
    ws: Workspace,
    out: Path,
    *,
    json_path: Path | None = None,
    progress: Progress | None = None,
) -> dict:
    """Compute every section of the data set's drill-down (PFI and its caveats, SFIMP,
    the curves of the most important feature, subgroups found, performance) and write the
    page's HTML report to ``out``; the numbers behind it (:func:`report_numbers`) to
    ``json_path`` when given. Returns those numbers."""
    state = _computed(ctx, {**default_state(), "ws": ws.id, "sfimp": True}, progress)
    inp = load_inputs(ctx, {"state": state, "keys": plan_state(ctx, ws, state)["keys"]})
    pfi = inp.pfi.get(state["model"]) if inp is not None else None
    if pfi is not None:  # the curves and subgroups found of the feature the model relies on most
        state = _computed(ctx, {**state, "feature": str(pfi.importance.idxmax())}, progress)
    results = {"state": state, "keys": plan_state(ctx, ws, state)["keys"]}
    html = report_html(ctx, results)
    if html is None:
        raise LoadError("The data set could not be read back from the cache.", field="data")
    out.write_text(html, encoding="utf-8")
    numbers = report_numbers(ctx, results)
    if json_path is not None:
        json_path.write_text(json.dumps(numbers, indent=1, default=_plain), encoding="utf-8")
    return numbers


def _computed(ctx: Context, state: dict, progress: Progress | None) -> dict:
    """The cleaned state, with every result it needs computed into the cache."""
    state, error = normalize(ctx, state)
    if error:
        raise LoadError(error, field="data")

    def told(values) -> None:
        if progress is not None:
            done, total, label = values
            progress(int(done), int(total), str(label))

    outcome = run_request(ctx, {"state": state}, set_progress=told)
    if outcome.get("error"):
        raise compute.ModelError(outcome["error"])
    return state


def report_numbers(ctx: Context, results: dict) -> dict:
    """The numbers behind the report: the data set, each model's PFI with its standard
    error, and every view's numbers as the library defines them (``View.library``)."""
    inp = load_inputs(ctx, results)
    if inp is None:
        return {}
    state = inp.state
    every = {}
    try:
        every = inp.pfi
    except compute.ExplainError:
        pass
    pfi = {
        model: {
            str(f): {"importance": float(v), "std_error": float(se)}
            for f, v, se in zip(found.importance.index, found.importance, found.uncertainty, strict=True)
        }
        for model, found in every.items()
    }
    try:
        skills, comparison = verdicts(inp)
    except compute.ExplainError:  # the predictions could not be computed for these rows
        skills, comparison = {}, None
    performance: dict = {
        str(model): {
            "loss": skill.model_error,
            "baseline_loss": skill.baseline_error,
            "skill": skill.skill,
            "skill_low": skill.low,
            "skill_high": skill.high,
            "rows": skill.n_rows,
            **(
                {}
                if skill.accuracy is None
                else {"accuracy": skill.accuracy, "baseline_accuracy": skill.baseline_accuracy}
            ),
        }
        for model, skill in skills.items()
    }
    if skills:
        performance["best"] = comparison.best if comparison is not None else str(next(iter(skills)))
        performance["best_is_clear"] = None if comparison is None else comparison.clear
    views = {}
    for view in REGISTRY:
        if view.library is None:
            continue
        try:
            shown = view.library(inp)
        except compute.ExplainError as exc:  # its results could not be computed for these rows
            views[view.name] = {"error": str(exc)}
            continue
        if shown:
            views[view.name] = {name: _plain(value) for name, value in shown.items()}
    return {
        "data": {
            "title": inp.ws.title,
            "rows": len(inp.data),
            "target": inp.ws.target,
            "task": inp.ws.task,
            "loss": inp.ws.loss,
            "models": [m.name for m in inp.ws.models],
        },
        "state": {k: state[k] for k in ("model", "feature", "subgroup", "repeats") if k in state},
        "performance": performance,
        "pfi": pfi,
        "views": views,
        "seed": planning.SEED,
    }


def _plain(value):
    """A number, Series, array or frame as JSON values (NaN as null)."""
    if isinstance(value, pd.Series):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, pd.DataFrame):
        return {str(k): _plain(value[k]) for k in value.columns}
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
