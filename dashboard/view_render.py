"""Drawing views into the page: one view's outputs for a drill-down (its own render, guarded,
or a placeholder saying why not), the digests that tell the page which views to draw again,
and the panels that hold them.

The registry (:mod:`dashboard.views`) hands these functions its views and re-exports them
(``views.render``, ``views.signatures``, ``views.panels``), so this module sits below it and
imports no view. It lives outside ``dashboard/views/``, which the registry scans for views.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import TYPE_CHECKING

import compute

from . import figures, tasks
from .planning import TaskSpec

if TYPE_CHECKING:  # types only: importing dashboard.views.base runs its package, the registry, which imports this
    from .views.base import Inputs, View

log = logging.getLogger(__name__)


def built_in(kind: str) -> TaskSpec:
    """The spec of a built-in task kind (``View.needs``); an unknown kind is a bug in a view."""
    for spec in tasks.BUILT_IN:
        if spec.kind == kind:
            return spec
    raise RuntimeError(f"a view needs {kind!r}, which is no built-in task ({[s.kind for s in tasks.BUILT_IN]})")


def input_id(view: View) -> str:
    """The store a view's callback listens to: the results record, passed on only when the
    view's signature changed (``signatures``)."""
    return f"view-input-{view.name.replace('_', '-')}"


def view_keys(view: View, keys: dict, state: dict) -> list[str]:
    """The cache keys of the results a view reads, for a planned state."""
    specs = [built_in(kind) for kind in sorted(view.needs)] + list(view.tasks)
    return [k for spec in specs for k in spec.keys_read(keys, state) if k]


def signatures(views: tuple[View, ...], store, state: dict, keys: dict) -> dict[str, str]:
    """Per view, a digest of what its outputs depend on: the state fields it reads and
    which of its results are cached. Equal digests mean equal outputs, so the page skips
    drawing that view again (an edit, a feature or an observation switch redraws only the
    views that show it)."""
    cached: dict[str, bool] = {}

    def has(key: str) -> bool:
        if key not in cached:
            cached[key] = store.has(key)
        return cached[key]

    out = {}
    for view in views:
        fields = {name: state.get(name) for name in sorted(view.fields)}
        if "obs" in fields:  # a row shown by default is named so; once chosen, not
            fields["obs_default"] = bool(state.get("obs_default"))
        ready = [has(k) for k in view_keys(view, keys, state)]
        blob = json.dumps([fields, ready], sort_keys=True, default=str)
        out[view.name] = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return out


def placeholder(view: View, message: str) -> dict:
    """The view's outputs while its results are missing: a message in its figures, empty
    tables and texts."""
    if view.placeholder is not None:
        return view.placeholder(message)
    out = {}
    for name, (_, prop) in view.outputs.items():
        out[name] = (
            figures.empty_figure(message)
            if prop == "figure"
            else {"data": [], "columns": [], "style": {}, "tooltip_header": {}}.get(prop, "")
        )
    return out


def drawn(ctx, view: View, inp: Inputs, controls: dict | None = None) -> dict:
    """The named outputs of one view for a drill-down's inputs; never raises for a visitor."""
    try:
        out = draw(ctx, view, inp, controls)
    except compute.ExplainError as exc:  # its results cannot be had for these rows: it says why, alone
        return placeholder(view, str(exc))
    except Exception as exc:  # a bug: log it, keep the page and the other views working
        log.exception("view %s failed", view.name)
        return placeholder(view, f"This view could not be drawn ({type(exc).__name__}).")
    missing = set(view.outputs) - set(out)
    if missing:
        raise RuntimeError(f"view {view.name} rendered no {sorted(missing)}")
    return out


def draw(ctx, view: View, inp: Inputs, controls: dict | None = None) -> dict:
    """The view's own render, with its controls' values (their defaults where not given)."""
    if view.controls:
        given = controls or {}
        values = {name: given.get(name, control.default) for name, control in view.controls.items()}
        return view.render(ctx, inp, values)
    return view.render(ctx, inp)


def panel_id(name: str) -> str:
    """The page id of a view's panel (a link to the view scrolls to it)."""
    return f"view-{name}"


def panels(views: tuple[View, ...], panel, section: str | None = None) -> list:
    """One panel per view (of one section), in page order (``panel`` is ``dashboard.components.panel``)."""
    from dash import dcc

    return [
        panel(
            v.title,
            *v.body(),
            dcc.Store(id=input_id(v)),
            help_text=v.question,
            method=v.method,
            extra=None if v.extra is None else v.extra(),
            class_name="panel wide" if v.wide else "panel",
            panel_id=panel_id(v.name),
        )
        for v in views
        if section is None or v.section == section
    ]
