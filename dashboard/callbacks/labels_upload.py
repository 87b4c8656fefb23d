"""The upload form's optional labels file (:mod:`dashboard.labels`): its chooser, the
check shown beside its input once it is uploaded, and the labels a load keeps.

The file reaches the server as every upload does (the streaming ``/upload`` route, kind
"labels", at most ``labels.MAX_BYTES``); callbacks see only its server-side id."""

from __future__ import annotations

from typing import NamedTuple

from dash import Input, Output

from .. import ids
from .. import labels as labelling


class LabelsFeedback(NamedTuple):
    info: str
    error: object


def describe_labels(ctx, upload, facts=None, target=None) -> LabelsFeedback:
    """Feedback after a labels file upload: how many labels, or why the file is refused,
    next to its input. The file is read here (at most ``labels.MAX_BYTES``, a bounded JSON
    parse, its shape checked: :func:`dashboard.labels.read_labels`); its features are checked
    against the data file's columns and its classes against the target's values when they
    are known (the load checks them against the models' inputs and classes again)."""
    if not upload or not isinstance(upload, dict):
        return LabelsFeedback("", None)
    name = str(upload.get("name", "labels file"))[:200]
    if upload.get("error"):
        return LabelsFeedback("", _prefixed(name, str(upload["error"])[:500]))
    path = ctx.store.upload_path(upload.get("id"))
    if path is None:
        return LabelsFeedback("", ctx.store.upload_gone(upload.get("id"), name))
    try:
        found = labelling.read_labels(path, name=name)
        columns = [c for c in facts if c != target] if isinstance(facts, dict) and facts else None
        fact = facts.get(target) if isinstance(facts, dict) and isinstance(target, str) else None
        classes = (fact or {}).get("classes") if isinstance(fact, dict) else None
        if columns is not None:
            only = {"features": found.get("features", {})}
            labelling.check_known(only, features=columns, classes=None, name=name)
        if classes:
            labelling.check_known({"classes": found.get("classes", {})}, features=(), classes=classes, name=name)
    except labelling.LabelsError as exc:
        ctx.store.discard_upload(upload.get("id"), str(exc))  # refused files do not wait for the TTL
        return LabelsFeedback("", str(exc))
    one = {"features": "feature", "classes": "class"}
    counts = [f"{len(part)} {one[key] if len(part) == 1 else key}" for key, part in found.items()]
    return LabelsFeedback(f"{name}: labels of {' and '.join(counts) or 'nothing'}", None)


def _prefixed(name: str, message: str) -> str:
    """``name: message``, unless the message already starts with the file name."""
    return message if message.startswith(name) else f"{name}: {message}"


def register(app, ctx) -> None:
    # the chooser and the streaming POST to /upload of assets/upload.js, as for a data file
    app.clientside_callback(
        "function(n) { return window.wipUpload.pick(n, 'labels', false); }",
        Output(ids.LABELS_FILE, "data"),
        Input(ids.LABELS_UPLOAD, "n_clicks"),
        prevent_initial_call=True,
    )

    @app.callback(
        output={"info": Output(ids.LABELS_FILE_INFO, "children"), "error": Output(ids.LABELS_ERROR, "children")},
        inputs={
            "upload": Input(ids.LABELS_FILE, "data"),
            "facts": Input(ids.DATA_COLUMNS, "data"),
            "target": Input(ids.TARGET_SELECT, "value"),
        },
        prevent_initial_call=True,
    )
    def labels_feedback(upload, facts, target):
        return describe_labels(ctx, upload, facts, target)._asdict()
