"""The load job: the files a visitor uploaded (and the choices of the load panel) checked and
made a saved workspace. It runs in the page's background job; the models are loaded (by their
row of the table of formats, :mod:`dashboard.loading.formats`) and tried against the data in a
child process of it (:func:`dashboard.isolation.isolated`) under the load limits."""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import compute
from compute.losses import CLASSIFICATION_LOSSES, REGRESSION_LOSSES

from .. import labels as labelling
from ..isolation import isolated
from ..store import ModelEntry, Workspace, new_workspace_id
from .data import read_data
from .errors import LoadError
from .formats import FORMATS_TEXT
from .inspect import inspect_model
from .models import load_model

log = logging.getLogger(__name__)
ALL_LOSSES = [*REGRESSION_LOSSES, *CLASSIFICATION_LOSSES]

DATA_ROLES = ("held-out", "training", "unknown")
MAX_LABELS = 100


def typed_labels(text) -> list[str]:
    """Class labels typed by the visitor (comma-separated, in the model's order); [] if none."""
    if not isinstance(text, str):
        return []
    labels = [part.strip() for part in text[:5000].split(",")]
    return [label[:200] for label in labels if label][:MAX_LABELS]


@dataclass(frozen=True)
class LoadRequest:
    """What the Load button sends: the page's inputs in the load callback's order, unchecked
    (:meth:`cleaned` keeps what a load takes). ``add_to_current``: add the models to the data
    set shown (``state``'s); ``order_confirmed``: the columns are in the order a model that
    names no inputs was trained on; ``labels``: the class labels typed for a booster;
    ``labels_file``: the upload of the features' and classes' display labels
    (:mod:`dashboard.labels`), or None."""

    model_files: Any
    data_file: Any
    target: Any
    loss: Any
    output: Any
    accepted: Any
    add_to_current: Any
    state: Any
    data_role: Any = "unknown"
    order_confirmed: Any = False
    labels: Any = None
    labels_file: Any = None

    def cleaned(self) -> LoadRequest:
        """Each input of the type the load takes: what else a forged request sends is dropped."""
        output = self.output
        return LoadRequest(
            model_files=[f for f in self.model_files if isinstance(f, dict)]
            if isinstance(self.model_files, list)
            else [],
            data_file=self.data_file if isinstance(self.data_file, dict) else None,
            target=self.target if isinstance(self.target, str) else None,
            loss=self.loss if self.loss in ALL_LOSSES else None,
            output=output if isinstance(output, (str, int, float)) and not isinstance(output, bool) else None,
            accepted=[t for t in self.accepted if isinstance(t, str)] if isinstance(self.accepted, list) else [],
            add_to_current=self.add_to_current,
            state=self.state if isinstance(self.state, dict) else None,
            data_role=self.data_role if self.data_role in DATA_ROLES else "unknown",
            order_confirmed=self.order_confirmed is True,
            labels=typed_labels(self.labels),
            labels_file=self.labels_file if isinstance(self.labels_file, dict) else None,
        )


def load_workspace(ctx, *fields, **named) -> dict:
    """Validate the uploads and create a workspace. ``fields``/``named``: a
    :class:`LoadRequest`'s (the page's inputs, checked here). Returns {"ws": id, "warnings":
    [...]} or {"errors": {field: message}}. Runs in the background job; the models are loaded
    and tried in a child process of it (:func:`dashboard.isolation.isolated`) under the load
    limits."""
    return run_load(ctx, LoadRequest(*fields, **named))


def run_load(ctx, request: LoadRequest) -> dict:
    """:func:`load_workspace` of a :class:`LoadRequest`."""
    request = request.cleaned()
    names = ", ".join(str(f.get("name", "?"))[:200] for f in request.model_files)
    try:
        return isolated(_load_workspace, ctx, request, what=f"Loading {names or 'the model'}", limits=ctx.load_limits)
    except compute.ModelError as exc:
        return {"errors": {"model": str(exc)}}


@dataclass(frozen=True)
class _Rows:
    """The data a load explains: the frame, its target column, its name in the title, what the
    rows are, and the data set whose models it adds to (None: a new data set)."""

    data: pd.DataFrame
    target: str
    name: str
    role: str
    added_to: Workspace | None


@dataclass
class _Checked:
    """The models loaded and checked against the data: (name, uploaded path, what the checks
    found) each, and what they agreed on (the first model's loss and class hold for the others)."""

    found: list = field(default_factory=list)
    task: str = "regression"
    loss: Any = None
    output: object = None
    warnings: list[str] = field(default_factory=list)


def _load_workspace(ctx, request: LoadRequest) -> dict:
    """The load itself (in the isolated process): the workspace's id and the notes, or the
    errors by input."""
    current = ctx.store.workspace((request.state or {}).get("ws")) if request.add_to_current else None
    errors = _missing(request, current)
    if errors:
        return {"errors": errors}
    try:
        ws = _new_workspace(ctx, request, current)
    except labelling.LabelsError as exc:  # beside the labels file's input
        return {"errors": {"labels": str(exc)}}
    except LoadError as exc:
        return {"errors": {exc.field: str(exc)}}
    except compute.ExplainError as exc:
        return {"errors": {"model": str(exc)}}
    except Exception as exc:
        log.error("load failed: %s\n%s", exc, traceback.format_exc())
        return {
            "errors": {
                "model": f"Loading failed ({type(exc).__name__}). Check that the files are a model "
                "and a table of the same features."
            }
        }
    return {"ws": ws.id, "warnings": list(ws.warnings)}


def _missing(request: LoadRequest, current: Workspace | None) -> dict[str, str]:
    """What the visitor has not chosen yet, by input."""
    errors: dict[str, str] = {}
    if not _uploaded(request):
        errors["model"] = f"Choose at least one model file ({FORMATS_TEXT})."
    if not request.data_file and current is None:
        errors["data"] = "Choose a data file (.csv or .parquet), or tick “add the models to the data shown now”."
    return errors


def _uploaded(request: LoadRequest) -> list[dict]:
    return [f for f in (request.model_files or []) if not f.get("error")]


def _new_workspace(ctx, request: LoadRequest, current: Workspace | None) -> Workspace:
    """The workspace of the uploads (its models added to ``current``'s when it adds to it),
    saved."""
    rows = _rows(ctx, request, current)
    checked = _check_models(ctx, request, rows)
    data_rel, data_sha = ctx.store.keep_data(rows.data)
    base_models = tuple(rows.added_to.models) if rows.added_to is not None else ()
    all_models = base_models + _entries(ctx, request, checked, {m.name for m in base_models})
    shown = display_labels(
        ctx,
        request.labels_file,
        rows.added_to,
        all_models,
        data=rows.data,
        target=rows.target,
        task=checked.task,
        output=checked.output,
    )
    ws = Workspace(
        id=new_workspace_id(),
        title=f"{rows.name}: {', '.join(m.name for m in all_models)}",
        data_path=data_rel,
        data_sha=data_sha,
        n_rows=len(rows.data),
        target=str(rows.target),
        task=checked.task,
        loss=checked.loss,
        output=checked.output,
        models=all_models,
        demo=False,
        features=tuple(all_models[0].features),
        warnings=tuple(checked.warnings),
        data_role=rows.role,
        labels=shown,
    )
    ctx.store.save_workspace(ws)
    return ws


def _rows(ctx, request: LoadRequest, current: Workspace | None) -> _Rows:
    """The uploaded data file read, or the rows of the data set shown when the models are
    added to it."""
    data_file = request.data_file
    if current is not None and not data_file:  # the same rows: what was said of them still holds
        data = ctx.store.data(current)
        rows = _Rows(data, current.target, current.title.split(":")[0], current.data_role, current)
    else:
        if data_file.get("error") or not data_file.get("id"):  # refused at upload (e.g. an .xlsx)
            name = str(data_file.get("name", "The data file"))[:200]
            raise LoadError(
                prefixed(name, str(data_file.get("error") or "was not uploaded")[:500])
                + " Choose a .csv or .parquet file.",
                field="data",
            )
        path = ctx.store.upload_path(data_file["id"])
        if path is None:
            raise LoadError(ctx.store.upload_gone(data_file["id"], str(data_file["name"])[:200]), field="data")
        data = read_data(path, name=data_file["name"], policy=ctx.policy)
        rows = _Rows(data, request.target, data_file["name"], request.data_role, None)
    if not rows.target:
        raise LoadError("Choose the target column.", field="target")
    return rows


def _check_models(ctx, request: LoadRequest, rows: _Rows) -> _Checked:
    """Each uploaded model loaded (through the table of formats) and checked against the data;
    the first model's loss and class hold for the others."""
    checked = _Checked(loss=request.loss, output=request.output)
    tasks: set[str] = set()
    for f in _uploaded(request):
        path = ctx.store.upload_path(f["id"])
        if path is None:
            raise LoadError(ctx.store.upload_gone(f["id"], str(f["name"])[:200]), field="model")
        model: Any = load_model(path, name=f["name"], policy=ctx.policy, accepted_types=tuple(request.accepted or ()))
        found = inspect_model(
            model,
            rows.data,
            rows.target,
            name=f["name"],
            loss=checked.loss,
            output=checked.output,
            labels=request.labels,
            order_confirmed=request.order_confirmed,
        )
        if tasks and found.task not in tasks:
            raise LoadError(
                "The models mix classifiers and regressors; load models of one task together.", field="model"
            )
        tasks.add(found.task)
        checked.task, checked.loss, checked.output = found.task, found.loss, found.output
        checked.warnings.extend(w for w in found.warnings if w not in checked.warnings)
        checked.found.append((Path(f["name"]).stem, path, found))
    return checked


def _entries(ctx, request: LoadRequest, checked: _Checked, taken: set[str]) -> tuple[ModelEntry, ...]:
    """The checked models kept in the cache, each named by its file (numbered when a model of
    the data set already has that name)."""
    names = set(taken)
    entries = []
    for name, path, found in checked.found:
        unique = name
        k = 2
        while unique in names:
            unique, k = f"{name} ({k})", k + 1
        names.add(unique)
        rel, sha = ctx.store.keep_model(path, Path(path).suffix.lower())
        entries.append(
            ModelEntry(
                name=unique,
                path=rel,
                sha=sha,
                accepted_types=tuple(request.accepted or ()),
                features=found.features,
                classes=found.classes,
                walked=found.walked,
            )
        )
    return tuple(entries)


def prefixed(name: str, message: str) -> str:
    """``name: message``, unless the message already starts with the file name."""
    return message if message.startswith(name) else f"{name}: {message}"


def display_labels(ctx, upload, current, models, *, data, target, task, output) -> dict:
    """The labels file's labels, checked against the models' inputs and the target's classes;
    with no labels file, those of the data set the models are added to (the same rows)."""
    if not upload:
        return dict(current.labels) if current is not None else {}
    name = str(upload.get("name", "labels file"))[:200]
    if upload.get("error") or not upload.get("id"):
        raise labelling.LabelsError(prefixed(name, str(upload.get("error") or "was not uploaded")[:500]))
    path = ctx.store.upload_path(upload["id"])
    if path is None:
        raise labelling.LabelsError(ctx.store.upload_gone(upload["id"], name))
    found = labelling.read_labels(path, name=name)
    classes = labelling.target_classes(task, data[target].dropna().unique(), *(m.classes for m in models), [output])
    return labelling.check_known(found, features=models[0].features, classes=classes, name=name)
