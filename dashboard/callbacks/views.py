"""Views: the registry's callbacks (one per view, in ``dashboard.views``) and the hover line."""

from __future__ import annotations

import numpy as np
from dash import Input, Output, State

from .. import ids, planning, views
from ..fan_out import HIDDEN, fan_out_js
from ..state import clean_state


def hover_text(ctx, hovered, state) -> str:
    """The hovered curve's observation: its row label and feature values, one line.

    ``hovered`` is the HOVERED_ROW store, ``{"row": label}``, filled clientside from the
    point number (WebGL hover events carry no typed-array customdata)."""
    row = hovered.get("row") if isinstance(hovered, dict) else None
    if not isinstance(row, (str, int)) or isinstance(row, bool) or not isinstance(state, dict):
        return ""
    ws = ctx.store.workspace(clean_state(state)["ws"])
    if ws is None:
        return ""
    data = ctx.store.data(ws)
    label = planning.row_label(row, data.index)
    if label not in data.index:
        return ""
    values = data.loc[label]
    shown = ", ".join(f"{c} = {_short(v)}" for c, v in values.items())
    return f"row {row}: {shown}"


def _short(value) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 24 else text[:23] + "…"


def rows_line(ctx, results) -> str:
    """The toolbar's line under the subgroup: which rows the views use (and the curves'
    sample), whatever section is open."""
    inp = views.load_inputs(ctx, results)
    return "" if inp is None else inp.rows_line


def register(app, ctx) -> None:
    register_views(app, ctx)

    @app.callback(Output(ids.SUBGROUP_SIZE, "children"), Input(ids.RESULTS, "data"), prevent_initial_call=True)
    def subgroup_size(results):
        return rows_line(ctx, results)

    @app.callback(
        Output(ids.HOVER_INFO, "children"),
        Input(ids.HOVERED_ROW, "data"),
        State(ids.STATE, "data"),
        prevent_initial_call=True,
    )
    def hovered(row, state):
        return hover_text(ctx, row, state)


def register_views(app, ctx) -> None:
    """One callback per view: its input store (the results record) in, the view's named
    outputs out; a clientside callback feeds each store only when the view's signature
    changed."""
    app.clientside_callback(
        fan_out_js([v.name for v in views.REGISTRY], [v.section for v in views.REGISTRY]),
        [Output(views.input_id(v), "data") for v in views.REGISTRY],
        Input(ids.RESULTS, "data"),
        Input(ids.SECTION_TABS, "value"),
        [State(views.input_id(v), "data") for v in views.REGISTRY],
    )
    for view in views.REGISTRY:

        def callback(given, view=view, **controls):
            if isinstance(given, dict) and given.get("hidden"):
                return views.placeholder(view, HIDDEN)  # a section not open: blank, drawn when opened
            results = given.get("results") if isinstance(given, dict) else None
            return views.render(ctx, view, results, controls=controls)

        app.callback(
            output={name: Output(cid, prop) for name, (cid, prop) in view.outputs.items()},
            inputs={
                "given": Input(views.input_id(view), "data"),
                **{name: Input(control.id, control.prop) for name, control in view.controls.items()},
            },
        )(callback)
