"""Loading your own files: upload feedback, target choice and the validating load job.

Files reach the server through the streaming ``/upload`` route (see ``dashboard.server``);
callbacks only see server-side file ids. Parsing a data file is plain pandas (no code
from the file runs); loading a model happens only inside the background job.
"""

from __future__ import annotations

import functools
import logging
import traceback
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from dash import Input, Output, State, callback_context, html, no_update

import compute
from compute.losses import CLASSIFICATION_LOSSES, LOSS_LABELS, REGRESSION_LOSSES

from .. import ids
from .. import labels as labelling
from ..isolation import isolated
from ..loading import (
    DATA_SUFFIXES,
    FORMATS_TEXT,
    MODEL_SUFFIXES,
    LoadError,
    load_model,
    model_untrusted_types,
    read_data,
)
from ..loading.inspect import inspect_model
from ..loading.mlflow import MLFLOW_SUFFIX
from ..quota import client_key
from ..store import ModelEntry, Workspace, new_workspace_id
from . import labels_upload
from .labels_upload import display_labels

log = logging.getLogger(__name__)
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
ALL_LOSSES = [*REGRESSION_LOSSES, *CLASSIFICATION_LOSSES]


class ModelFeedback(NamedTuple):
    info: str
    error: object
    types: list
    types_box: dict


class DataFeedback(NamedTuple):
    info: str
    error: object
    columns: list
    target: object
    facts: dict  # column -> {"kind": "number"|"text", "classes": [...]} (target choices)


def describe_models(ctx, files) -> ModelFeedback:
    """Feedback after model uploads: names, upload errors, pickle refusals, untrusted types.

    The type listing reads the visitor's file, so it runs in an isolated process with the
    load limits; nothing about a file can raise out of here (no HTTP 500)."""
    files = [f for f in files if isinstance(f, dict)] if isinstance(files, list) else []
    info, errors, types = [], [], []
    for f in files:
        name = str(f.get("name", "file"))[:200]
        if f.get("error"):
            errors.append(_prefixed(name, str(f["error"])[:500]))
            continue
        size = f.get("size", 0)
        info.append(f"{name} ({(size if isinstance(size, (int, float)) else 0) / 1024:.0f} KiB)")
        suffix = Path(name).suffix.lower()
        if suffix in PICKLE_SUFFIXES and not ctx.policy.allow_pickle:
            errors.append(
                f"{name}: refused. Pickle and joblib files run code when they are loaded, so this "
                "server does not open them. Save the model with skops.io.dump(model, 'model.skops') "
                "or export it to ONNX."
            )
            ctx.store.discard_upload(f.get("id"), errors[-1])  # refused files do not wait for the TTL
        elif suffix in (".skops", MLFLOW_SUFFIX):  # an MLflow zip: its archive, MLmodel and flavour too
            path = ctx.store.upload_path(f.get("id"))
            if path is None:
                errors.append(ctx.store.upload_gone(f.get("id"), name))
                continue
            try:
                types.extend(
                    isolated(
                        functools.partial(model_untrusted_types, path, policy=ctx.policy, name=name),
                        what=f"Reading {name}",
                        limits=ctx.load_limits,
                    )
                )
            except (LoadError, compute.ExplainError) as exc:
                errors.append(str(exc))
                ctx.store.discard_upload(f.get("id"), errors[-1])
            except Exception as exc:  # never a 500 for a visitor's file
                log.warning("type listing failed for an upload: %s", exc)
                errors.append(f"{name} is not a valid {suffix} file ({type(exc).__name__}).")
                ctx.store.discard_upload(f.get("id"), errors[-1])
    options = [{"label": f" {t}", "value": t, "disabled": not ctx.policy.allow_user_types} for t in sorted(set(types))]
    box = {"display": "block"} if options else {"display": "none"}
    return ModelFeedback("; ".join(info), _lines(errors), options, box)


def _data_outline(path, name, policy) -> dict:
    """Rows, column names and, per column, what a target there would be (runs isolated)."""
    frame = read_data(path, name=name, policy=policy)
    facts = {}
    for column in frame.columns:
        values = frame[column]
        numeric = pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype)
        facts[str(column)] = {"kind": "number" if numeric else "text", "classes": _class_options(values)}
    return {"rows": len(frame), "columns": [str(c) for c in frame.columns], "facts": facts}


def _prefixed(name: str, message: str) -> str:
    """``name: message``, unless the message already starts with the file name."""
    return message if message.startswith(name) else f"{name}: {message}"


def target_choices(facts, target) -> dict:
    """Class and loss options for the chosen target column (issue 11: they followed the
    last column, and regression targets were offered classification losses).

    Text targets take classification losses; numeric targets with at most 10 values may be
    either (a 0/1 label or a count); other numeric targets take regression losses."""
    fact = facts.get(target) if isinstance(facts, dict) and isinstance(target, str) else None
    if not isinstance(fact, dict):
        return {"classes": [], "losses": [{"label": LOSS_LABELS[n], "value": n} for n in ALL_LOSSES]}
    classes = [str(c) for c in fact.get("classes") or []][:50]
    if fact.get("kind") == "text":
        names = list(CLASSIFICATION_LOSSES)
    elif len(classes) and len(classes) <= 10:
        names = ALL_LOSSES
    else:
        names, classes = list(REGRESSION_LOSSES), []
    return {"classes": classes, "losses": [{"label": LOSS_LABELS[n], "value": n} for n in names]}


def describe_data(ctx, upload) -> DataFeedback:
    """Feedback after a data upload: size, columns as target options, or the parse error.

    Parsing a visitor's file happens in an isolated process under the load limits, never in
    the web worker (a small compressed file can expand to gigabytes)."""
    if not upload or not isinstance(upload, dict):
        return DataFeedback("", None, [], None, {})
    name = str(upload.get("name", "file"))[:200]
    if upload.get("error"):
        return DataFeedback("", _prefixed(name, str(upload["error"])[:500]), [], None, {})
    path = ctx.store.upload_path(upload.get("id"))
    if path is None:
        return DataFeedback("", ctx.store.upload_gone(upload.get("id"), name), [], None, {})
    try:
        outline = isolated(_data_outline, path, name, ctx.policy, what=f"Reading {name}", limits=ctx.load_limits)
    except (LoadError, compute.ExplainError) as exc:
        ctx.store.discard_upload(upload.get("id"), str(exc))  # refused files do not wait for the TTL
        return DataFeedback("", str(exc), [], None, {})
    except Exception as exc:  # never a 500 for a visitor's file
        log.warning("data outline failed for an upload: %s", exc)
        message = f"{name} could not be read ({type(exc).__name__})."
        ctx.store.discard_upload(upload.get("id"), message)
        return DataFeedback("", message, [], None, {})
    columns = outline["columns"]
    info = f"{name}: {outline['rows']:,} rows × {len(columns)} columns"
    return DataFeedback(info, None, columns, columns[-1], outline["facts"])


def _class_options(column: pd.Series) -> list:
    values = column.dropna().unique()
    if len(values) > 50:
        return []
    return [str(v) for v in sorted(values, key=str)]


def _lines(messages):
    if not messages:
        return None
    return [html.Div(m) for m in messages]


DATA_ROLES = ("held-out", "training", "unknown")
MAX_LABELS = 100


def typed_labels(text) -> list[str]:
    """Class labels typed by the visitor (comma-separated, in the model's order); [] if none."""
    if not isinstance(text, str):
        return []
    labels = [part.strip() for part in text[:5000].split(",")]
    return [label[:200] for label in labels if label][:MAX_LABELS]


def load_workspace(
    ctx,
    model_files,
    data_file,
    target,
    loss,
    output,
    accepted,
    add_to_current,
    state,
    data_role="unknown",
    order_confirmed=False,
    labels=None,
    labels_file=None,
) -> dict:
    """Validate the uploads and create a workspace. Returns {"ws": id, "warnings": [...]} or
    {"errors": {field: message}}. Runs in the background job; the models are loaded and
    tried in a child process of it (:func:`dashboard.isolation.isolated`) under the load limits.
    ``labels``: the class labels typed for a booster; ``labels_file``: the upload of the
    features' and classes' display labels (:mod:`dashboard.labels`), or None."""
    model_files = [f for f in model_files if isinstance(f, dict)] if isinstance(model_files, list) else []
    data_file = data_file if isinstance(data_file, dict) else None
    target = target if isinstance(target, str) else None
    loss = loss if loss in ALL_LOSSES else None
    output = output if isinstance(output, (str, int, float)) and not isinstance(output, bool) else None
    accepted = [t for t in accepted if isinstance(t, str)] if isinstance(accepted, list) else []
    state = state if isinstance(state, dict) else None
    data_role = data_role if data_role in DATA_ROLES else "unknown"
    order_confirmed = order_confirmed is True
    labels = typed_labels(labels)
    labels_file = labels_file if isinstance(labels_file, dict) else None
    names = ", ".join(str(f.get("name", "?"))[:200] for f in model_files)
    try:
        return isolated(
            _load_workspace,
            ctx,
            model_files,
            data_file,
            target,
            loss,
            output,
            accepted,
            add_to_current,
            state,
            data_role,
            order_confirmed,
            labels,
            labels_file,
            what=f"Loading {names or 'the model'}",
            limits=ctx.load_limits,
        )
    except compute.ModelError as exc:
        return {"errors": {"model": str(exc)}}


def _load_workspace(
    ctx,
    model_files,
    data_file,
    target,
    loss,
    output,
    accepted,
    add_to_current,
    state,
    data_role,
    order_confirmed,
    labels=(),
    labels_file=None,
) -> dict:
    errors: dict[str, str] = {}
    models = [f for f in (model_files or []) if not f.get("error")]
    current = ctx.store.workspace((state or {}).get("ws")) if add_to_current else None
    if not models:
        errors["model"] = f"Choose at least one model file ({FORMATS_TEXT})."
    if not data_file and current is None:
        errors["data"] = "Choose a data file (.csv or .parquet), or tick “add the models to the data shown now”."
    if errors:
        return {"errors": errors}
    try:
        if current is not None and not data_file:
            data = ctx.store.data(current)
            target, data_name = current.target, current.title.split(":")[0]
            data_role = current.data_role  # the same rows: what was said of them still holds
        else:
            if data_file.get("error") or not data_file.get("id"):  # refused at upload (e.g. an .xlsx)
                name = str(data_file.get("name", "The data file"))[:200]
                raise LoadError(
                    _prefixed(name, str(data_file.get("error") or "was not uploaded")[:500])
                    + " Choose a .csv or .parquet file.",
                    field="data",
                )
            path = ctx.store.upload_path(data_file["id"])
            if path is None:
                raise LoadError(ctx.store.upload_gone(data_file["id"], str(data_file["name"])[:200]), field="data")
            data = read_data(path, name=data_file["name"], policy=ctx.policy)
            data_name = data_file["name"]
        if not target:
            raise LoadError("Choose the target column.", field="target")
        entries: list[ModelEntry] = []
        warnings: list[str] = []
        tasks: set[str] = set()
        loaded = []
        for f in models:
            path = ctx.store.upload_path(f["id"])
            if path is None:
                raise LoadError(ctx.store.upload_gone(f["id"], str(f["name"])[:200]), field="model")
            name = Path(f["name"]).stem
            model: Any = load_model(path, name=f["name"], policy=ctx.policy, accepted_types=tuple(accepted or ()))
            checked = inspect_model(
                model,
                data,
                target,
                name=f["name"],
                loss=loss,
                output=output,
                labels=labels,
                order_confirmed=order_confirmed,
            )
            if tasks and checked.task not in tasks:
                raise LoadError(
                    "The models mix classifiers and regressors; load models of one task together.", field="model"
                )
            tasks.add(checked.task)
            task, loss, output = checked.task, checked.loss, checked.output
            warnings.extend(w for w in checked.warnings if w not in warnings)
            loaded.append((f, name, path, checked))
        data_rel, data_sha = ctx.store.keep_data(data)
        names: set[str] = set()
        base_models = list(current.models) if (current is not None and not data_file) else []
        names.update(m.name for m in base_models)
        for _f, name, path, checked in loaded:
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
                    accepted_types=tuple(accepted or ()),
                    features=checked.features,
                    classes=checked.classes,
                )
            )
        all_models = tuple(base_models) + tuple(entries)
        shown = display_labels(
            ctx, labels_file, current if not data_file else None, all_models, data, target, task, output
        )
        ws = Workspace(
            id=new_workspace_id(),
            title=f"{data_name}: {', '.join(m.name for m in all_models)}",
            data_path=data_rel,
            data_sha=data_sha,
            target=str(target),
            task=task,
            loss=loss,
            output=output,
            models=all_models,
            demo=False,
            features=tuple(all_models[0].features),
            warnings=tuple(warnings),
            data_role=data_role,
            labels=shown,
        )
        ctx.store.save_workspace(ws)
        return {"ws": ws.id, "warnings": warnings}
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


def workspace_notes(ctx, state):
    """What the load said about the data set the page shows (class labels matched, columns
    taken in file order, another library version, ...), kept beside the page once the load
    panel has closed; nothing for a demo or a data set without notes."""
    ws = ctx.store.workspace(state.get("ws")) if isinstance(state, dict) else None
    if ws is None or not ws.warnings:
        return None
    return html.Details(
        [
            html.Summary(f"Notes from loading this data set ({len(ws.warnings)})"),
            html.Ul([html.Li(w) for w in ws.warnings]),
        ],
        open=True,
    )


def load_outputs(result: dict) -> dict:
    """The load callback's outputs: the loaded workspace, the errors by input, the status."""
    errors = result.get("errors", {})
    if errors:
        status = errors.get("loss") or errors.get("output") or "Not loaded: see the messages above."
        return {
            "loaded": no_update,
            "model_error": errors.get("model"),
            "data_error": errors.get("data"),
            "target_error": errors.get("target"),
            "labels_error": errors.get("labels"),
            "status": status,
        }
    warnings = result.get("warnings") or []
    # success is not an error: its own style inside the (red) status line
    status = html.Span("Loaded." + ("" if not warnings else " Note: " + " ".join(warnings)), className="load-ok")
    return {
        "loaded": result["ws"],
        "model_error": None,
        "data_error": None,
        "target_error": None,
        "labels_error": None,
        "status": status,
    }


def register(app, ctx) -> None:
    labels_upload.register(app, ctx)  # the optional labels file: its chooser and its check
    app.clientside_callback(
        "function(n, current) { return window.wipUpload.pick(n, 'model', true, current); }",
        Output(ids.MODEL_FILES, "data"),
        Input(ids.MODEL_UPLOAD, "n_clicks"),
        State(ids.MODEL_FILES, "data"),
        prevent_initial_call=True,
    )
    app.clientside_callback(
        "function(n, current) { return window.wipUpload.pick(n, 'data', false, current); }",
        Output(ids.DATA_FILE, "data"),
        Input(ids.DATA_UPLOAD, "n_clicks"),
        State(ids.DATA_FILE, "data"),
        prevent_initial_call=True,
    )

    @app.callback(
        output={
            "info": Output(ids.MODEL_FILES_INFO, "children"),
            "error": Output(ids.MODEL_ERROR, "children"),
            "types": Output(ids.TYPES_CHECKLIST, "options"),
            "types_box": Output(ids.TYPES_BOX, "style"),
        },
        inputs={"files": Input(ids.MODEL_FILES, "data")},
        prevent_initial_call=True,
    )
    def model_feedback(files):
        return describe_models(ctx, files)._asdict()

    @app.callback(
        output={
            "info": Output(ids.DATA_FILE_INFO, "children"),
            "error": Output(ids.DATA_ERROR, "children"),
            "columns": Output(ids.TARGET_SELECT, "options"),
            "target": Output(ids.TARGET_SELECT, "value"),
            "facts": Output(ids.DATA_COLUMNS, "data"),
        },
        inputs={"upload": Input(ids.DATA_FILE, "data")},
        prevent_initial_call=True,
    )
    def data_feedback(upload):
        return describe_data(ctx, upload)._asdict()

    @app.callback(
        output={"classes": Output(ids.OUTPUT_SELECT, "options"), "losses": Output(ids.LOSS_SELECT, "options")},
        inputs={"target": Input(ids.TARGET_SELECT, "value"), "facts": State(ids.DATA_COLUMNS, "data")},
    )
    def target_options(target, facts):
        return target_choices(facts, target)

    @app.callback(
        output={
            "loaded": Output(ids.LOADED_WS, "data"),
            "model_error": Output(ids.MODEL_ERROR, "children", allow_duplicate=True),
            "data_error": Output(ids.DATA_ERROR, "children", allow_duplicate=True),
            "target_error": Output(ids.TARGET_ERROR, "children"),
            "labels_error": Output(ids.LABELS_ERROR, "children", allow_duplicate=True),
            "status": Output(ids.LOAD_STATUS, "children"),
        },
        inputs={
            "n": Input(ids.LOAD_BUTTON, "n_clicks"),
            "model_files": State(ids.MODEL_FILES, "data"),
            "data_file": State(ids.DATA_FILE, "data"),
            "target": State(ids.TARGET_SELECT, "value"),
            "loss": State(ids.LOSS_SELECT, "value"),
            "output": State(ids.OUTPUT_SELECT, "value"),
            "accepted": State(ids.TYPES_CHECKLIST, "value"),
            "add": State(ids.ADD_TO_CURRENT, "value"),
            "state": State(ids.STATE, "data"),
            "data_role": State(ids.DATA_ROLE, "value"),
            "order": State(ids.ORDER_CONFIRM, "value"),
            "labels": State(ids.CLASS_LABELS, "value"),
            "labels_file": State(ids.LABELS_FILE, "data"),
        },
        background=True,
        running=[
            (Output(ids.LOAD_BUTTON, "disabled"), True, False),
            (Output(ids.LOAD_CANCEL, "disabled"), False, True),
        ],
        cancel=[Input(ids.LOAD_CANCEL, "n_clicks")],
        prevent_initial_call=True,
    )
    def load(
        n, model_files, data_file, target, loss, output, accepted, add, state, data_role, order, labels, labels_file
    ):
        if not n:
            names = ("loaded", "model_error", "data_error", "target_error", "labels_error", "status")
            return {name: no_update for name in names}
        try:
            # a load is a process (and a model process under it): it takes one of the client's slots
            with ctx.slots.hold(client_key(callback_context.remote), timeout=ctx.config.load_timeout):
                result = load_workspace(
                    ctx,
                    model_files,
                    data_file,
                    target,
                    loss,
                    output,
                    accepted,
                    isinstance(add, list) and "add" in add,
                    state,
                    data_role,
                    isinstance(order, list) and "yes" in order,
                    labels,
                    labels_file,
                )
        except compute.ExplainError as exc:
            result = {"errors": {"model": str(exc)}}
        return load_outputs(result)

    @app.callback(Output(ids.WS_NOTES, "children"), Input(ids.STATE, "data"))
    def notes(state):
        return workspace_notes(ctx, state)

    # A successful load closes the panel (the page now shows the new data set). <details>
    # keeps its open state in the DOM only, so the panel is closed there.
    app.clientside_callback(
        """
        function(loaded) {
            const panel = document.getElementById('load-panel');
            if (loaded && panel) { panel.open = false; }
            return loaded ? String(loaded) : dash_clientside.no_update;
        }
        """,
        Output(ids.LOAD_CLOSED, "data"),
        Input(ids.LOADED_WS, "data"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output(ids.LOAD_STATUS, "children", allow_duplicate=True),
        Input(ids.LOAD_CANCEL, "n_clicks"),
        prevent_initial_call=True,
    )
    def load_cancelled(_n):
        return html.Span(
            "Loading cancelled: nothing was loaded, and the model's process was stopped.", className="load-note"
        )


__all__ = ["DATA_SUFFIXES", "MODEL_SUFFIXES"]
