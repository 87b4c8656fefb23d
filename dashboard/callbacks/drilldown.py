"""The controller: every drill-down input (URL, dropdowns, clicks, subgroup box) -> one state.

One callback owns the state, the URL and the controls' values, so they never disagree
(Dash allows a callback to have the same property as input and output; separate
callbacks would form a cycle).
"""

from __future__ import annotations

import json

from dash import Input, Output, State, ctx as dash_ctx, no_update

import compute

from .. import ids
from ..demos import DEMOS
from ..jobs import select_rows
from ..state import MAX_REPEATS, clean_state, default_state, search_from_state, state_from_search


def _click_value(click):
    """customdata of the first clicked point (a feature name or a row label), or None."""
    try:
        point = (click or {})["points"][0]
    except (KeyError, IndexError, TypeError):
        return None
    value = point.get("customdata")
    if isinstance(value, list):
        value = value[0] if value else None
    return value


def parse_values(text: str):
    """Values typed in the condition builder: numbers where they parse, else strings;
    several values separated by commas (for ``in`` and ``between``)."""
    parts = [p.strip() for p in str(text or "").split(",") if p.strip()]

    def one(p):
        low = p.lower()
        if low in ("true", "false"):
            return low == "true"
        try:
            return int(p)
        except ValueError:
            pass
        try:
            return float(p)
        except ValueError:
            return p.strip("'\"")

    return [one(p) for p in parts]


def build_condition(column, op, value_text) -> str:
    """One condition from the builder, in the language of ``parse_subgroup``."""
    if not column:
        raise compute.SubgroupError("Choose a column for the condition.")
    values = parse_values(value_text)
    if op in ("is missing", "is not missing"):
        return compute.format_condition(column, op)
    if op == "between":
        if len(values) != 2:
            raise compute.SubgroupError("'between' needs two values separated by a comma, e.g. 0, 1.5.")
        return compute.format_condition(column, op, tuple(values))
    if op in ("in", "not in"):
        if not values:
            raise compute.SubgroupError(f"'{op}' needs one or more values separated by commas.")
        return compute.format_condition(column, op, values)
    if len(values) != 1:
        raise compute.SubgroupError(f"'{op}' needs exactly one value (got {value_text!r}).")
    return compute.format_condition(column, op, values[0])


def update_state(ctx, state: dict | None, trigger: str | None, inputs: dict) -> tuple[dict, str | None]:
    """Apply one event to the state. Returns (new state, error message for the subgroup box)."""
    fresh = not (isinstance(state, dict) and state.get("ws"))
    state = clean_state(state)
    try:
        state = _apply_event(dict(state), trigger, inputs, fresh)
    except compute.SubgroupError as exc:
        return state, str(exc)
    except (TypeError, ValueError, AttributeError, KeyError):  # a forged or malformed input value
        pass  # the event is ignored; the state stays what it was
    previous = inputs.get("previous_subgroup", "")
    return normalize(ctx, state, previous_subgroup=previous if isinstance(previous, str) else "")


def _apply_event(state: dict, trigger, inputs: dict, fresh: bool) -> dict:
    """The state after one event (raises on values no honest page sends)."""
    if trigger in (None, ids.URL) or fresh:
        state = state_from_search(inputs.get("search"))
    elif trigger == ids.WS_SELECT:
        state = {**default_state(), "ws": inputs.get("ws")}
    elif trigger == ids.LOADED_WS and inputs.get("loaded"):
        state = {**default_state(), "ws": inputs["loaded"]}
    elif trigger == ids.MODEL_SELECT:
        state["model"] = inputs.get("model")
    elif trigger == ids.FEATURE_SELECT:
        state["feature"] = inputs.get("feature")
    elif trigger in (ids.PFI_GRAPH, ids.SFIMP_GRAPH, ids.GLOBAL_CI_GRAPH):
        value = _click_value(inputs.get("click"))
        if value is not None:
            state["feature"] = str(value)
    elif trigger == ids.CLICKED_ROW:
        clicked = inputs.get("clicked") or {}
        if clicked.get("row") is not None:
            state["obs"] = str(clicked["row"])
    elif trigger in (ids.ICI_GRAPH, ids.ICE_GRAPH):
        value = _click_value(inputs.get("click"))
        if value is not None:
            state["obs"] = str(value)
    elif trigger == ids.ICI_TABLE:
        cell = inputs.get("active_cell") or {}
        if cell.get("row_id") is not None:  # the record's id (its row label), not its page position
            state["obs"] = str(cell["row_id"])
    elif trigger in (ids.SUBGROUP_APPLY, ids.SUBGROUP_TEXT):
        state["subgroup"] = (inputs.get("subgroup_text") or "").strip()
    elif trigger == ids.SUBGROUP_CLEAR:
        state["subgroup"] = ""
    elif trigger == ids.COND_ADD:
        condition = build_condition(inputs.get("cond_column"), inputs.get("cond_op"), inputs.get("cond_value"))
        current = (state.get("subgroup") or "").strip()
        state["subgroup"] = f"({current}) and {condition}" if current else condition
    elif trigger == ids.REPEATS_MORE:
        state["repeats"] = min(int(state.get("repeats") or 10) * 2, MAX_REPEATS)
    elif trigger == ids.SFIMP_RUN:
        state["sfimp"] = True
    elif trigger == ids.CENTERED:
        state["centered"] = "c" in (inputs.get("centered") or [])
    elif trigger == ids.EXCLUDE_SELECTED and state.get("obs") is not None:
        state["exclude"] = sorted(set(state.get("exclude") or []) | {str(state["obs"])})
    elif trigger == ids.EXCLUDE_NEGATIVE:
        negative = inputs.get("negative") or []
        state["exclude"] = sorted(set(state.get("exclude") or []) | {str(e) for e in negative})
    elif trigger == ids.EXCLUDE_CLEAR:
        state["exclude"] = []
    return clean_state(state)


def normalize(ctx, state: dict, *, previous_subgroup: str = "", error=None) -> tuple[dict, str | None]:
    """Make a state valid for its workspace: known ids, a model, a feature, a parseable subgroup."""
    state = clean_state(state)
    ws = ctx.store.workspace(state.get("ws"))
    if ws is None:
        error = (f"Data set {state.get('ws')!r} is not available on this server (uploads expire); "
                 "showing a demo instead.")
        state = {**default_state()}
        ws = ctx.store.workspace(state["ws"])
    model = ws.model(state.get("model"))
    state["model"] = model.name
    if state.get("feature") not in model.features:
        state["feature"] = model.features[0]
    if state.get("subgroup"):
        try:
            mask = select_rows(ctx.store.data(ws), state["subgroup"])
            if not mask.any():
                raise compute.SubgroupError(f"Subgroup {state['subgroup']!r} selects 0 of {len(mask)} rows; "
                                            "choose another condition.")
        except compute.SubgroupError as exc:
            error = f"{exc}"
            state["subgroup"] = previous_subgroup if previous_subgroup != state["subgroup"] else ""
    return state, error


# A click on a curve: its row label from the point's customdata, or (WebGL traces leave
# typed-array customdata out of click events) from the graph's data by point number.
CLICKED_ROW_JS = """
function(iciClick, iceClick) {
    const trig = (dash_clientside.callback_context.triggered || [])[0];
    if (!trig) { return dash_clientside.no_update; }
    const graphId = trig.prop_id.split('.')[0];
    const click = graphId === 'ici-graph' ? iciClick : iceClick;
    const point = click && click.points && click.points[0];
    if (!point) { return dash_clientside.no_update; }
    let row = point.customdata;
    if (row === undefined || row === null) {
        const gd = document.querySelector('#' + graphId + ' .js-plotly-plot');
        const trace = gd && gd._fullData && gd._fullData[point.curveNumber];
        const data = trace && trace.customdata;
        row = data ? data[point.pointNumber] : undefined;
    }
    if (row === undefined || row === null) { return dash_clientside.no_update; }
    return {row: row, t: Date.now()};
}
"""


def register(app, ctx) -> None:
    app.clientside_callback(
        CLICKED_ROW_JS,
        Output(ids.CLICKED_ROW, "data"),
        Input(ids.ICI_GRAPH, "clickData"),
        Input(ids.ICE_GRAPH, "clickData"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output(ids.STATE, "data"),
        Output(ids.URL, "search"),
        Output(ids.WS_SELECT, "value"),
        Output(ids.MODEL_SELECT, "value"),
        Output(ids.FEATURE_SELECT, "value"),
        Output(ids.SUBGROUP_TEXT, "value"),
        Output(ids.SUBGROUP_ERROR, "children"),
        Output(ids.CENTERED, "value"),
        Output(ids.WS_SELECT, "options"),
        Output(ids.MODEL_SELECT, "options"),
        Output(ids.FEATURE_SELECT, "options"),
        Output(ids.COND_COLUMN, "options"),
        Input(ids.URL, "search"),
        Input(ids.WS_SELECT, "value"),
        Input(ids.MODEL_SELECT, "value"),
        Input(ids.FEATURE_SELECT, "value"),
        Input(ids.PFI_GRAPH, "clickData"),
        Input(ids.SFIMP_GRAPH, "clickData"),
        Input(ids.GLOBAL_CI_GRAPH, "clickData"),
        Input(ids.CLICKED_ROW, "data"),
        Input(ids.ICI_TABLE, "active_cell"),
        Input(ids.SUBGROUP_APPLY, "n_clicks"),
        Input(ids.SUBGROUP_TEXT, "n_submit"),
        Input(ids.SUBGROUP_CLEAR, "n_clicks"),
        Input(ids.COND_ADD, "n_clicks"),
        Input(ids.REPEATS_MORE, "n_clicks"),
        Input(ids.SFIMP_RUN, "n_clicks"),
        Input(ids.CENTERED, "value"),
        Input(ids.EXCLUDE_SELECTED, "n_clicks"),
        Input(ids.EXCLUDE_NEGATIVE, "n_clicks"),
        Input(ids.EXCLUDE_CLEAR, "n_clicks"),
        Input(ids.LOADED_WS, "data"),
        State(ids.SUBGROUP_TEXT, "value"),
        State(ids.COND_COLUMN, "value"),
        State(ids.COND_OP, "value"),
        State(ids.COND_VALUE, "value"),
        State(ids.ICI_TABLE, "data"),
        State(ids.NEGATIVE, "data"),
        State(ids.STATE, "data"),
    )
    def controller(search, ws, model, feature, pfi_click, sfimp_click, ci_click, clicked,
                   active_cell, _apply, _submit, _clear, _add, _more, _sfimp, centered, _ex_sel, _ex_neg,
                   _ex_clear, loaded, subgroup_text, cond_column, cond_op, cond_value, table_rows,
                   negative, state):
        trigger = dash_ctx.triggered_id
        clicks = {ids.PFI_GRAPH: pfi_click, ids.SFIMP_GRAPH: sfimp_click, ids.GLOBAL_CI_GRAPH: ci_click}
        inputs = {
            "search": search, "ws": ws, "model": model, "feature": feature, "click": clicks.get(trigger),
            "clicked": clicked, "active_cell": active_cell, "table_rows": table_rows, "subgroup_text": subgroup_text,
            "cond_column": cond_column, "cond_op": cond_op, "cond_value": cond_value, "centered": centered,
            "loaded": loaded, "previous_subgroup": (state or {}).get("subgroup", ""),
            "negative": negative or [],
        }
        return controller_outputs(ctx, state, trigger, inputs)


def controller_outputs(ctx, state, trigger, inputs) -> tuple:
    """The controller's outputs for one event: state, URL search, control values, the
    subgroup box and its error, the centred toggle and the dropdown options."""
    new, error = update_state(ctx, state, trigger, inputs)
    if new == state and trigger != ids.URL and error is None:
        return (no_update,) * 6 + (None,) + (no_update,) * 5
    subgroup_box = no_update if (error and trigger in (ids.SUBGROUP_APPLY, ids.SUBGROUP_TEXT)) else new["subgroup"]
    return (new, search_from_state(new), new["ws"], new["model"], new["feature"], subgroup_box, error,
            ["c"] if new["centered"] else [], *control_options(ctx, new))


def control_options(ctx, state):
    """Dropdown options for the state's workspace (demos plus the current upload)."""
    ws = ctx.store.workspace((state or {}).get("ws"))
    demos = [{"label": v, "value": k} for k, v in DEMOS.items()]
    if ws is None:
        return demos, [], [], []
    if not ws.demo:
        demos.append({"label": ws.title, "value": ws.id})
    model = ws.model(state.get("model"))
    columns = [c for c in ctx.store.data(ws).columns]
    return (demos, [m.name for m in ws.models], list(model.features),
            [{"label": str(c), "value": json.dumps(c) if not isinstance(c, str) else c} for c in columns])
