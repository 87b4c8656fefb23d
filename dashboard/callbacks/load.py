"""Loading your own files: upload feedback, target choice and the validating load job.

Files reach the server through the streaming ``/upload`` route (see ``dashboard.server``);
callbacks only see server-side file ids. Parsing a data file is plain pandas (no code
from the file runs); loading a model happens only inside the background job.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from dash import Input, Output, State, callback_context, html, no_update

import compute
from compute.losses import CLASSIFICATION_LOSSES, LOSS_LABELS, REGRESSION_LOSSES

from .. import ids
from ..isolation import isolated
from ..loading import (
    DATA_SUFFIXES,
    MODEL_SUFFIXES,
    LoadError,
    model_untrusted_types,
    read_data,
)
from ..loading.formats import REFUSE, decision, format_of
from ..loading.uploads import ALL_LOSSES, LoadRequest, load_workspace, prefixed, run_load
from ..quota import client_key
from . import labels_upload

log = logging.getLogger(__name__)


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
            errors.append(prefixed(name, str(f["error"])[:500]))
            continue
        size = f.get("size", 0)
        info.append(f"{name} ({(size if isinstance(size, (int, float)) else 0) / 1024:.0f} KiB)")
        suffix = Path(name).suffix.lower()
        fmt = format_of(suffix)
        if fmt is not None and decision(fmt, ctx.policy) == REFUSE:
            errors.append(fmt.upload_refusal.format(name=name))
            ctx.store.discard_upload(f.get("id"), errors[-1])  # refused files do not wait for the TTL
        elif fmt is not None and fmt.lists_types:  # .skops; an MLflow zip: its archive, MLmodel and flavour too
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
        return DataFeedback("", prefixed(name, str(upload["error"])[:500]), [], None, {})
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


LOAD_OUTPUTS = ("loaded", "model_error", "data_error", "target_error", "labels_error", "status")
#: the Load button's inputs, by the name the load callback is given each
LOAD_INPUTS = {
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
}
# A successful load closes the panel (the page now shows the new data set). <details>
# keeps its open state in the DOM only, so the panel is closed there.
CLOSE_PANEL = """
        function(loaded) {
            const panel = document.getElementById('load-panel');
            if (loaded && panel) { panel.open = false; }
            return loaded ? String(loaded) : dash_clientside.no_update;
        }
        """


def load_clicked(ctx, given: dict, remote) -> dict:
    """The load callback's outputs for the Load button's inputs (``given``, named as in
    :data:`LOAD_INPUTS`); ``remote``: the client's address (a load takes one of its slots)."""
    if not given.get("n"):
        return {name: no_update for name in LOAD_OUTPUTS}
    add, order = given.get("add"), given.get("order")
    request = LoadRequest(
        given.get("model_files"),
        given.get("data_file"),
        given.get("target"),
        given.get("loss"),
        given.get("output"),
        given.get("accepted"),
        isinstance(add, list) and "add" in add,
        given.get("state"),
        data_role=given.get("data_role"),
        order_confirmed=isinstance(order, list) and "yes" in order,
        labels=given.get("labels"),
        labels_file=given.get("labels_file"),
    )
    try:
        # a load is a process (and a model process under it): it takes one of the client's slots
        with ctx.slots.hold(client_key(remote), timeout=ctx.config.load_timeout):
            result = run_load(ctx, request)
    except compute.ExplainError as exc:
        result = {"errors": {"model": str(exc)}}
    return load_outputs(result)


def register(app, ctx) -> None:
    labels_upload.register(app, ctx)  # the optional labels file: its chooser and its check
    _register_feedback(app, ctx)
    _register_load(app, ctx)


def _register_feedback(app, ctx) -> None:
    """The file choosers and what the page says of each chosen file."""
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


def _register_load(app, ctx) -> None:
    """The Load button's background job, its cancellation, and what follows a load."""

    @app.callback(
        output={
            "loaded": Output(ids.LOADED_WS, "data"),
            "model_error": Output(ids.MODEL_ERROR, "children", allow_duplicate=True),
            "data_error": Output(ids.DATA_ERROR, "children", allow_duplicate=True),
            "target_error": Output(ids.TARGET_ERROR, "children"),
            "labels_error": Output(ids.LABELS_ERROR, "children", allow_duplicate=True),
            "status": Output(ids.LOAD_STATUS, "children"),
        },
        inputs=LOAD_INPUTS,
        background=True,
        running=[
            (Output(ids.LOAD_BUTTON, "disabled"), True, False),
            (Output(ids.LOAD_CANCEL, "disabled"), False, True),
        ],
        cancel=[Input(ids.LOAD_CANCEL, "n_clicks")],
        prevent_initial_call=True,
    )
    def load(**given):  # Dash hands dict-declared inputs by name
        return load_clicked(ctx, given, callback_context.remote)

    @app.callback(Output(ids.WS_NOTES, "children"), Input(ids.STATE, "data"))
    def notes(state):
        return workspace_notes(ctx, state)

    app.clientside_callback(
        CLOSE_PANEL,
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


__all__ = ["DATA_SUFFIXES", "MODEL_SUFFIXES", "LoadRequest", "load_workspace"]
